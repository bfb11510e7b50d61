/**
 * The plan every cluster profile (`local`, `sim`, and the coming `gke`) shares, written once: a cluster profile
 * is its substrate (which nodes, which images, how the controllers run) plus these pieces.
 *
 * - Config: the zod fields of the profile's object key ({@link integerIn}, {@link quantity}, {@link duration},
 *   {@link durationMs}, the `waitForPodsReadyTimeout` and `queue` knobs of {@link clusterKnobFields}) and the
 *   mapping of zod issues to `pulumi config` keys ({@link zodIssues}, {@link parseObjectKey}; the common config
 *   in stacks/config.ts uses the same ones).
 * - The RunSpec: `cohort.roles` is required, a role without `app.image` gets the profile's default image
 *   ({@link resolvePodRunSpec}).
 * - Kueue: the waitForPodsReady timeout ({@link kueueWaitTimeout}); the Configuration itself and the queue
 *   names are components/k8s/manifests/kueue.ts `kueueConfiguration` and `COHORT_QUEUES`.
 * - The runtime bundle and its digest ({@link readRuntimeBundle}), the pinned manifests
 *   ({@link loadClusterManifests}), the run namespace ({@link runNamespace}), all four in {@link planClusterRun};
 *   the quota and the cohort's fit ({@link planQuota}).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import type { ClusterImage } from "../components/kind/index.js";
import { RUN_WORKER_FILES, type WorkerFile } from "../components/run/worker-manifests.js";
import {
  AGENT_SANDBOX_MANIFESTS,
  checkCohortFits,
  deriveQuota,
  isQuantity,
  KUEUE_MANIFESTS,
  loadManifests,
  QuotaError,
  type CohortRoleDemand,
  type KubernetesObject,
  type NodeCapacity,
  type QuotaResult,
  type ReservedPods,
  type Toleration,
} from "../components/k8s/index.js";
import { formatDurationMs, parseDurationMs, type RunSpec } from "../runtime/index.js";
import { configKey, describe, integerIn, parseObjectKey, resolveRunSpec, RUNTIME_BUNDLE, StackConfigError, zodIssues, type ResolvedRunSpec, type StackConfig } from "./config.js";
import type { QueueNames } from "./profile.js";

export { describe, integerIn, parseObjectKey, RUNTIME_BUNDLE, zodIssues };

// ---------------------------------------------------------------------------------------------------------------
// Config fields

/** A zod field for a non-negative Kubernetes quantity (components/k8s/quantity.ts), e.g. `8`, `7500m`, `16Gi`; a number counts as its text. */
export const quantity = z.unknown().transform((value, ctx): string => {
  const text = typeof value === "number" ? String(value) : value;
  if (typeof text !== "string" || !isQuantity(text)) {
    ctx.addIssue({ code: "custom", message: `must be a Kubernetes quantity such as 8, 7500m, 16Gi (got ${describe(value)})` });
    return z.NEVER;
  }
  return text;
});

/** A zod field for a duration (`30s`, `5m`, `1h`; runtime/core/duration.ts), kept as the text. */
export const duration = z.unknown().transform((value, ctx): string => {
  try {
    parseDurationMs(value);
  } catch (error) {
    ctx.addIssue({ code: "custom", message: (error as Error).message });
    return z.NEVER;
  }
  return value as string;
});

/** A zod field for a duration, as milliseconds. */
export const durationMs = z.unknown().transform((value, ctx): number => {
  try {
    return parseDurationMs(value);
  } catch (error) {
    ctx.addIssue({ code: "custom", message: (error as Error).message });
    return z.NEVER;
  }
});

/**
 * The fields every cluster profile's object key has, to spread into its `z.strictObject` where they belong in its
 * field order: `waitForPodsReadyTimeout` (see {@link kueueWaitTimeout}) and `queue.cpu` / `queue.memory` (lower
 * the derived ClusterQueue quota).
 */
export const clusterKnobFields = {
  waitForPodsReadyTimeout: duration.optional(),
  queue: z.strictObject({ cpu: quantity.optional(), memory: quantity.optional() }).optional(),
};

/** The cluster knobs of a profile's config, validated. */
export interface ClusterKnobs {
  /** Kueue waitForPodsReady timeout (a duration string) if set. */
  readonly waitForPodsReadyTimeout?: string;
  readonly queue: { readonly cpu?: string; readonly memory?: string };
}

/** The {@link ClusterKnobs} of a parsed profile object (unset fields left out). */
export function clusterKnobs(c: {
  readonly waitForPodsReadyTimeout?: string | undefined;
  readonly queue?: { readonly cpu?: string | undefined; readonly memory?: string | undefined } | undefined;
}): ClusterKnobs {
  return {
    ...(c.waitForPodsReadyTimeout !== undefined ? { waitForPodsReadyTimeout: c.waitForPodsReadyTimeout } : {}),
    queue: { ...(c.queue?.cpu !== undefined ? { cpu: c.queue.cpu } : {}), ...(c.queue?.memory !== undefined ? { memory: c.queue.memory } : {}) },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The RunSpec

/** How a cluster profile completes the roster (see {@link resolvePodRunSpec}). */
export interface PodRunSpecOptions {
  /** The profile's name, e.g. `local` (its example stack file is `Pulumi.<profile>.yaml`). */
  readonly profile: string;
  /** Where members run, for the refusal without roles, e.g. `as Pods`. */
  readonly membersRun: string;
  /** Said of the roster in that refusal after "in the RunSpec shape", e.g. `, images pinned by digest`. @default "" */
  readonly rosterNote?: string;
  /** The image of a role without `app.image`. */
  readonly defaultImage: string;
  readonly projectDir: string;
  /** A role image that is an image built here, to be loaded into the nodes. @default none is */
  readonly builtImage?: (image: string) => ClusterImage | undefined;
}

/** The RunSpec of a cluster profile, with what it needs from the nodes. */
export interface PodRunSpec extends ResolvedRunSpec {
  /** Some role got {@link PodRunSpecOptions.defaultImage}. */
  readonly usesDefaultImage: boolean;
  /** Built images the roles name (once each), to load into the nodes. */
  readonly memberImages: readonly ClusterImage[];
}

/**
 * The RunSpec of a cluster profile: members run as Pods, so `cohort.roles` is required; a role without
 * `app.image` gets `defaultImage`.
 *
 * @throws {StackConfigError} naming `cohort-lab:cohort.roles` when no roles are configured, or any RunSpec problem
 */
export function resolvePodRunSpec(config: StackConfig, o: PodRunSpecOptions): PodRunSpec {
  const roles = config.cohort.roles;
  if (roles === undefined) {
    throw new StackConfigError([
      {
        key: configKey("cohort.roles"),
        reason:
          `the ${o.profile} profile runs members ${o.membersRun}, so it needs a custom roster (cohort.roles in the RunSpec shape${o.rosterNote ?? ""}); ` +
          `the app presets (${config.cohort.app ?? "openclaw"}) run host programs. See Pulumi.${o.profile}.yaml for an example`,
      },
    ]);
  }
  let usesDefaultImage = false;
  const memberImages = new Map<string, ClusterImage>();
  const withImages = roles.map((role) => {
    if (role === null || typeof role !== "object" || Array.isArray(role)) return role;
    const r = role as { app?: unknown };
    if (r.app === null || typeof r.app !== "object" || Array.isArray(r.app)) return role;
    const app = r.app as { image?: unknown };
    if (app.image !== undefined && app.image !== "") {
      const built = typeof app.image === "string" ? o.builtImage?.(app.image) : undefined;
      if (built !== undefined) memberImages.set(built.ref, built);
      return role;
    }
    usesDefaultImage = true;
    return { ...r, app: { ...app, image: o.defaultImage } };
  });
  return {
    ...resolveRunSpec({ ...config.cohort, roles: withImages }, { nodePath: process.execPath, projectDir: o.projectDir }),
    usesDefaultImage,
    memberImages: [...memberImages.values()],
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Kueue

/** Extra time Kueue's waitForPodsReady gives beyond the cohort's startupTimeout, so the runtime's own deadline fires first. */
export const WAIT_FOR_PODS_READY_MARGIN_MS = 60_000;

/**
 * Kueue's waitForPodsReady timeout: the cohort's startupTimeout + {@link WAIT_FOR_PODS_READY_MARGIN_MS}, or the
 * profile's `waitForPodsReadyTimeout` when set, which must be longer than startupTimeout.
 *
 * @param key - the override's config key, e.g. `cohort-lab:local.waitForPodsReadyTimeout`
 * @returns a Go duration, e.g. `6m`
 * @throws {StackConfigError} naming `key` when the override is not longer than startupTimeout
 */
export function kueueWaitTimeout(spec: Pick<RunSpec, "startupTimeout">, override: string | undefined, key: string): string {
  const startupMs = parseDurationMs(spec.startupTimeout);
  let waitMs = startupMs + WAIT_FOR_PODS_READY_MARGIN_MS;
  if (override !== undefined) {
    waitMs = parseDurationMs(override);
    if (waitMs <= startupMs) {
      throw new StackConfigError([
        {
          key,
          reason:
            `${override} is not longer than the cohort's startupTimeout ${spec.startupTimeout}: Kueue would evict the roster's Workload ` +
            "before the runtime's own deadline names the member that is late; set it above startupTimeout or leave it unset",
        },
      ]);
    }
  }
  return formatDurationMs(waitMs);
}

/** The `queues` stack output of a cluster profile. */
export function queueOutputs(names: Pick<QueueNames, "clusterQueue" | "localQueue" | "temporalTaskQueue">): pulumi.Output<QueueNames> {
  return pulumi.output({
    clusterQueue: names.clusterQueue,
    localQueue: names.localQueue,
    ...(names.temporalTaskQueue !== undefined ? { temporalTaskQueue: names.temporalTaskQueue } : {}),
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Runtime bundle, manifests, quota, run namespace

/** The runtime bundle a cluster profile deploys, and its SHA-256. */
export interface RuntimeBundle {
  readonly bundle: Buffer;
  /** Lower-case hex. */
  readonly bundleSha256: string;
}

/**
 * Reads `<projectDir>/dist/cohort.cjs` ({@link RUNTIME_BUNDLE}), or takes `given` (tests), and digests it.
 *
 * @throws {pulumi.RunError} when the bundle does not exist (run `npm run build`)
 */
export function readRuntimeBundle(projectDir: string, given?: Buffer): RuntimeBundle {
  let bundle = given;
  if (bundle === undefined) {
    const bundlePath = path.join(projectDir, RUNTIME_BUNDLE);
    if (!existsSync(bundlePath)) throw new pulumi.RunError(`the cohort runtime bundle ${bundlePath} does not exist: run \`npm run build\` first`);
    bundle = readFileSync(bundlePath);
  }
  return { bundle, bundleSha256: createHash("sha256").update(bundle).digest("hex") };
}

/**
 * The bundle files the run worker of a cluster profile's workflow mode is given (components/run/worker-manifests.ts
 * `RUN_WORKER_FILES`): `cohort.cjs` is `bundle` (the one the profile planned), the other two are read from
 * `<projectDir>/dist/` (`npm run build` writes all three, scripts/bundle.mjs).
 *
 * @param key - the config key a missing file is refused under (`local.runAs`, `gke.runAs`)
 * @throws {StackConfigError} naming `cohort-lab:<key>` and the missing file
 */
export function readRunWorkerFiles(projectDir: string, bundle: Buffer, key: string): WorkerFile[] {
  return RUN_WORKER_FILES.map((name) => {
    if (name === "cohort.cjs") return { name, bytes: bundle };
    const file = path.join(projectDir, "dist", name);
    if (!existsSync(file)) {
      throw new StackConfigError([
        { key: configKey(key), reason: `workflow: ${file} is missing; run \`npm run build\`, or run the cohort as a Job: \`npm run pulumi -- config set --path ${key} job\`` },
      ]);
    }
    return { name, bytes: readFileSync(file) };
  });
}

/** The pinned Kueue and Agent Sandbox release objects. */
export interface ClusterManifests {
  readonly kueue: readonly KubernetesObject[];
  readonly agentSandbox: readonly KubernetesObject[];
}

/**
 * `given` (tests), or the pinned release manifests from the tool cache.
 *
 * @throws {ManifestsMissingError} when they are not in the tool cache
 */
export function loadClusterManifests(given?: ClusterManifests): ClusterManifests {
  return given ?? { kueue: loadManifests(KUEUE_MANIFESTS), agentSandbox: loadManifests(AGENT_SANDBOX_MANIFESTS) };
}

/** The quota's view of the cohort: one demand per role, each naming the config key of its replicas. */
export function cohortRoleDemands(spec: RunSpec): CohortRoleDemand[] {
  return spec.roles.map((role, i) => ({
    name: role.name,
    replicas: role.replicas,
    requests: { ...(role.resources.cpu !== undefined ? { cpu: role.resources.cpu } : {}), ...(role.resources.memory !== undefined ? { memory: role.resources.memory } : {}) },
    replicasKey: configKey(`cohort.roles[${i}].replicas`),
  }));
}

/** Inputs of {@link planQuota}. */
export interface QuotaPlanInput {
  /** The nodes the cluster will have. */
  readonly nodes: readonly NodeCapacity[];
  /** What runs on them besides the cohort. */
  readonly reserved: readonly ReservedPods[];
  /** The ResourceFlavor's node labels and tolerations, if it has any. */
  readonly flavor?: { readonly nodeLabels: Readonly<Record<string, string>>; readonly tolerations: readonly Toleration[] };
  /** The profile's `queue` knob and its key, e.g. `cohort-lab:local.queue`. */
  readonly override: ClusterKnobs["queue"];
  readonly overrideKey: string;
  readonly spec: RunSpec;
}

/**
 * Derives the ClusterQueue quota (components/k8s/quota.ts) and refuses a cohort that does not fit it.
 *
 * @throws {StackConfigError} with the quota's key and arithmetic for a quota or fit problem
 */
export function planQuota(input: QuotaPlanInput): QuotaResult {
  try {
    const quota = deriveQuota({
      nodes: input.nodes,
      reserved: input.reserved,
      ...(input.flavor !== undefined ? { flavorNodeLabels: input.flavor.nodeLabels, flavorTolerations: input.flavor.tolerations } : {}),
      override: input.override,
      overrideKey: input.overrideKey,
    });
    checkCohortFits(quota, cohortRoleDemands(input.spec), configKey("cohort"));
    return quota;
  } catch (error) {
    if (error instanceof QuotaError) throw new StackConfigError([{ key: error.key, reason: error.reason }]);
    throw error;
  }
}

/** The run namespace, `<cohort name>-<10 hex>`: a new RunSpec or runtime bundle is a new namespace. */
export function runNamespace(name: string, specSha256: string, bundleSha256: string): string {
  return `${name}-${createHash("sha256").update(`${specSha256}\n${bundleSha256}`).digest("hex").slice(0, 10)}`;
}

/** What every cluster profile decides the same way once it has its RunSpec (see {@link planClusterRun}). */
export interface ClusterRunPlan extends RuntimeBundle {
  /** Kueue's waitForPodsReady timeout ({@link kueueWaitTimeout}). */
  readonly waitForPodsReadyTimeout: string;
  readonly manifests: ClusterManifests;
  /** The run namespace ({@link runNamespace}). */
  readonly namespace: string;
}

/**
 * The waitForPodsReady timeout (refused first), the pinned manifests, the runtime bundle and the run namespace.
 *
 * @param o.profile - the profile's config key, e.g. `local` (the override is `cohort-lab:<profile>.waitForPodsReadyTimeout`)
 * @throws {StackConfigError} | {ManifestsMissingError} | {pulumi.RunError} (missing runtime bundle)
 */
export function planClusterRun(o: {
  readonly profile: string;
  readonly projectDir: string;
  readonly resolved: ResolvedRunSpec;
  readonly knobs: ClusterKnobs;
  readonly manifests?: ClusterManifests | undefined;
  readonly bundle?: Buffer | undefined;
}): ClusterRunPlan {
  const spec = o.resolved.spec;
  const waitForPodsReadyTimeout = kueueWaitTimeout(spec, o.knobs.waitForPodsReadyTimeout, configKey(`${o.profile}.waitForPodsReadyTimeout`));
  const manifests = loadClusterManifests(o.manifests);
  const { bundle, bundleSha256 } = readRuntimeBundle(o.projectDir, o.bundle);
  return { waitForPodsReadyTimeout, manifests, bundle, bundleSha256, namespace: runNamespace(spec.name, o.resolved.specSha256, bundleSha256) };
}

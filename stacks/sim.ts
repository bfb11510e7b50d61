/**
 * The `sim` profile: a real kube-apiserver, etcd, kube-controller-manager and kube-scheduler with kwok fake
 * nodes, all local processes supervised by `simctl`, plus the real Kueue manager and Agent Sandbox controller
 * running out of cluster; the cohort runs as Sandboxes admitted by Kueue on simulated nodes (DESIGN.md
 * "Profiles"). The Kubernetes side is the same as `local`: the SAME `Kueue`, `AgentSandbox` and `CohortRun`
 * components, the same per-run objects (components/manifests/runtime.ts), the same quota arithmetic
 * (components/quota.ts) and the same Kubernetes backend; the runtime runs out of cluster with the run's
 * ServiceAccount token (so the namespaced Role is exercised exactly as on `local`). See docs/sim.md.
 *
 * Config keys (besides the common ones of stacks/config.ts):
 * - `cohort-lab:sim` — `nodes` (fake e2-standard-16 agent nodes, default 8), `podReadyDelay` / `podReadyJitter`
 *   (simulated member start-up: delay + uniform random extra, durations, default 0s), `portBase` (first of 11
 *   loopback ports, default 26400: below Linux's ephemeral range 32768-60999), `stateDir` (default `<project>/.sim/<stack>`), `waitForPodsReadyTimeout`
 *   (default: the cohort's startupTimeout + 1m), `queue.cpu` / `queue.memory` (lower the derived quota).
 * - `cohort-lab:cohort` — `cohort.roles` is required (members are Pods); a role without `app.image` gets a
 *   digest-pinned placeholder image: kwok never pulls images.
 *
 * Build order, everything refusable before any resource exists: config (zod, each problem names its key) →
 * RunSpec → runtime bundle and pinned manifests → quota from the fake nodes and the cohort's fit (refused with
 * the arithmetic) → SimCluster → FakeNodePool → Kueue (external; its manager starts once its CRDs and webhook
 * wiring exist, and that start is the webhook gate) → AgentSandbox (external) and its controller → per-run
 * Namespace, LocalQueue, ServiceAccount, Role, RoleBinding → run credentials → CohortRun (process executor,
 * `--backend kubernetes --backend-config <state>/runs/<ns>/backend.json`).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import * as YAML from "yaml";
import { z } from "zod";
import { AgentSandbox } from "../components/AgentSandbox.js";
import { CohortRun } from "../components/CohortRun.js";
import { FakeNodePool } from "../components/FakeNodePool.js";
import { createObject } from "../components/k8sObject.js";
import { Kueue } from "../components/Kueue.js";
import { AGENT_SANDBOX_MANIFESTS, KUEUE_MANIFESTS, loadManifests, ManifestsMissingError, type KubernetesObject } from "../components/manifests/cache.js";
import { renderKueueConfiguration } from "../components/manifests/kueue.js";
import { renderRunObjects, RUNTIME_NAMES } from "../components/manifests/runtime.js";
import { checkCohortFits, deriveQuota, QuotaError, type CohortRoleDemand, type QuotaResult } from "../components/quota.js";
import { SimCluster, simctlCommand } from "../components/SimCluster.js";
import { e2Standard16AgentNode, fakeNodeManifest, toNodeCapacity } from "../components/sim/fakeNode.js";
import { simFlavor, simKueueConfigurationInput, simQueueNames } from "../components/sim/queue.js";
import { formatDurationMs, parseDurationMs } from "../runtime/index.js";
import { portsFromBase } from "../scripts/sim/ports.js";
import { configKey, resolveRunSpec, StackConfigError, type ConfigIssue, type RawConfig, type ResolvedRunSpec, type StackConfig } from "./config.js";
import { local } from "./pins.js";
import type { ProfileContext, ProfileDefinition, RunOutputs, StackOutputs } from "./profiles.js";

/** Where `npm run build` writes the runtime bundle, relative to the project directory. */
export const SIM_RUNTIME_BUNDLE = path.join("dist", "cohort.cjs");

/** Defaults of `cohort-lab:sim` (the ONE place they are set). */
export const SIM_DEFAULTS = { nodes: 8, pool: "agents", portBase: 26400, podReadyDelay: "0s", podReadyJitter: "0s" } as const;

/** Extra time Kueue's waitForPodsReady gives beyond the cohort's startupTimeout (as on `local`). */
export const SIM_WAIT_FOR_PODS_READY_MARGIN_MS = 60_000;

/**
 * The image a role without `app.image` gets: any digest-pinned reference passes the backend's check, and kwok
 * never pulls images, so the profile reuses a pin it already has (the Temporal CLI image of `local`).
 */
export const SIM_PLACEHOLDER_IMAGE = `${local.temporal.repository}:${local.temporal.tag}@${local.temporal.digest}`;

/** `cohort-lab:sim`, validated, defaults applied. */
export interface SimConfig {
  readonly nodes: number;
  readonly portBase: number;
  readonly podReadyDelayMs: number;
  readonly podReadyJitterMs: number;
  /** Absolute. */
  readonly stateDir: string;
  readonly waitForPodsReadyTimeout?: string;
  readonly queue: { readonly cpu?: string; readonly memory?: string };
}

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : value === undefined ? "nothing" : Array.isArray(value) ? "a list" : typeof value === "object" && value !== null ? "an object" : String(value);
}

const intIn = (min: number, max: number) =>
  z.unknown().transform((value, ctx): number => {
    const n = typeof value === "string" && /^\d+$/.test(value.trim()) ? Number(value) : value;
    if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
      ctx.addIssue({ code: "custom", message: `must be an integer from ${min} to ${max} (got ${describe(value)})` });
      return z.NEVER;
    }
    return n;
  });
const durationMs = z.unknown().transform((value, ctx): number => {
  try {
    return parseDurationMs(value);
  } catch (error) {
    ctx.addIssue({ code: "custom", message: (error as Error).message });
    return z.NEVER;
  }
});
const QUANTITY_TEXT = /^[+]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?$/;
const quantity = z.unknown().transform((value, ctx): string => {
  const text = typeof value === "number" ? String(value) : value;
  if (typeof text !== "string" || !QUANTITY_TEXT.test(text)) {
    ctx.addIssue({ code: "custom", message: `must be a Kubernetes quantity such as 8, 7500m, 16Gi (got ${describe(value)})` });
    return z.NEVER;
  }
  return text;
});

const simSchema = z.strictObject({
  nodes: intIn(1, 5000).optional(),
  portBase: intIn(1024, 65535 - 11).optional(),
  podReadyDelay: durationMs.optional(),
  podReadyJitter: durationMs.optional(),
  stateDir: z.string().min(1, "must be a directory path").optional(),
  waitForPodsReadyTimeout: z
    .unknown()
    .transform((value, ctx): string => {
      try {
        parseDurationMs(value);
      } catch (error) {
        ctx.addIssue({ code: "custom", message: (error as Error).message });
        return z.NEVER;
      }
      return value as string;
    })
    .optional(),
  queue: z.strictObject({ cpu: quantity.optional(), memory: quantity.optional() }).optional(),
});

/**
 * Parses `cohort-lab:sim`.
 *
 * @throws {StackConfigError} listing every problem with its key
 */
export function parseSimConfig(raw: RawConfig, projectDir: string, stack: string): SimConfig {
  const issues: ConfigIssue[] = [];
  let value: unknown = {};
  if (raw.sim !== undefined) {
    try {
      value = JSON.parse(raw.sim);
    } catch {
      value = raw.sim;
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new StackConfigError([
        { key: configKey("sim"), reason: `must be an object whose fields are set one by one with --path, e.g. \`pulumi config set --path sim.nodes 12\` (got ${describe(value)})` },
      ]);
    }
  }
  const parsed = simSchema.safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      if (issue.code === "unrecognized_keys") {
        for (const k of issue.keys) issues.push({ key: configKey(["sim", ...issue.path.map(String), k].join(".")), reason: `unknown field (known fields: ${Object.keys(simSchema.shape).join(", ")})` });
      } else {
        issues.push({ key: configKey(["sim", ...issue.path.map(String)].join(".")), reason: issue.message });
      }
    }
    throw new StackConfigError(issues);
  }
  const c = parsed.data;
  return {
    nodes: c.nodes ?? SIM_DEFAULTS.nodes,
    portBase: c.portBase ?? SIM_DEFAULTS.portBase,
    podReadyDelayMs: c.podReadyDelay ?? parseDurationMs(SIM_DEFAULTS.podReadyDelay),
    podReadyJitterMs: c.podReadyJitter ?? parseDurationMs(SIM_DEFAULTS.podReadyJitter),
    stateDir: path.resolve(projectDir, c.stateDir ?? path.join(".sim", stack)),
    ...(c.waitForPodsReadyTimeout !== undefined ? { waitForPodsReadyTimeout: c.waitForPodsReadyTimeout } : {}),
    queue: { ...(c.queue?.cpu !== undefined ? { cpu: c.queue.cpu } : {}), ...(c.queue?.memory !== undefined ? { memory: c.queue.memory } : {}) },
  };
}

/**
 * The RunSpec of the sim profile: `cohort.roles` is required; a role without `app.image` gets
 * {@link SIM_PLACEHOLDER_IMAGE}.
 *
 * @throws {StackConfigError} naming `cohort-lab:cohort.roles` when no roles are configured, or any RunSpec problem
 */
export function resolveSimRunSpec(config: StackConfig, projectDir: string): ResolvedRunSpec {
  const roles = config.cohort.roles;
  if (roles === undefined) {
    throw new StackConfigError([
      {
        key: configKey("cohort.roles"),
        reason:
          "the sim profile runs members as Pods on simulated nodes, so it needs a custom roster (cohort.roles in the RunSpec shape); " +
          `the app presets (${config.cohort.app ?? "openclaw"}) run host programs. See Pulumi.sim.yaml for an example`,
      },
    ]);
  }
  const withImages = roles.map((role) => {
    if (role === null || typeof role !== "object" || Array.isArray(role)) return role;
    const r = role as { app?: unknown };
    if (r.app === null || typeof r.app !== "object" || Array.isArray(r.app)) return role;
    const app = r.app as { image?: unknown };
    return app.image !== undefined && app.image !== "" ? role : { ...r, app: { ...app, image: SIM_PLACEHOLDER_IMAGE } };
  });
  return resolveRunSpec({ ...config.cohort, roles: withImages }, { nodePath: process.execPath, projectDir });
}

/** Everything the profile decided before creating resources. */
export interface SimPlan {
  readonly sim: SimConfig;
  readonly resolved: ResolvedRunSpec;
  readonly quota: QuotaResult;
  readonly kueueConfiguration: ReturnType<typeof simKueueConfigurationInput>;
  /** The run namespace (`<cohort name>-<10 hex>`). */
  readonly namespace: string;
  readonly bundle: Buffer;
  readonly bundleSha256: string;
  readonly manifests: { readonly kueue: readonly KubernetesObject[]; readonly agentSandbox: readonly KubernetesObject[] };
}

/** Inputs of {@link planSim}. */
export interface SimPlanInput {
  readonly config: StackConfig;
  readonly raw: RawConfig;
  readonly projectDir: string;
  readonly stack: string;
  /** @default the tool cache */
  readonly manifests?: SimPlan["manifests"];
  /** @default reads `<projectDir>/dist/cohort.cjs` */
  readonly bundle?: Buffer;
}

/**
 * Validates everything and computes the quota from the fake nodes and the cohort's fit, with no resource created.
 *
 * @throws {StackConfigError} for config, RunSpec, quota and fit problems (each names its key and, for the
 *   quota, carries the arithmetic)
 * @throws {ManifestsMissingError} | {pulumi.RunError} (missing runtime bundle)
 */
export function planSim(input: SimPlanInput): SimPlan {
  const { config, raw, projectDir } = input;
  const sim = parseSimConfig(raw, projectDir, input.stack);
  const resolved = resolveSimRunSpec(config, projectDir);
  const spec = resolved.spec;

  const startupMs = parseDurationMs(spec.startupTimeout);
  let waitMs = startupMs + SIM_WAIT_FOR_PODS_READY_MARGIN_MS;
  if (sim.waitForPodsReadyTimeout !== undefined) {
    waitMs = parseDurationMs(sim.waitForPodsReadyTimeout);
    if (waitMs <= startupMs) {
      throw new StackConfigError([
        {
          key: configKey("sim.waitForPodsReadyTimeout"),
          reason:
            `${sim.waitForPodsReadyTimeout} is not longer than the cohort's startupTimeout ${spec.startupTimeout}: Kueue would evict the roster's Workload ` +
            "before the runtime's own deadline names the member that is late; set it above startupTimeout or leave it unset",
        },
      ]);
    }
  }
  const kueueConfiguration = simKueueConfigurationInput(formatDurationMs(waitMs));

  const manifests = input.manifests ?? { kueue: loadManifests(KUEUE_MANIFESTS), agentSandbox: loadManifests(AGENT_SANDBOX_MANIFESTS) };
  const bundlePath = path.join(projectDir, SIM_RUNTIME_BUNDLE);
  let bundle = input.bundle;
  if (bundle === undefined) {
    if (!existsSync(bundlePath)) throw new pulumi.RunError(`the cohort runtime bundle ${bundlePath} does not exist: run \`npm run build\` first`);
    bundle = readFileSync(bundlePath);
  }
  const bundleSha256 = createHash("sha256").update(bundle).digest("hex");

  // Quota: exactly the nodes the FakeNodePool registers; nothing else runs on them (the controllers are local processes).
  const flavor = simFlavor();
  let quota: QuotaResult;
  try {
    quota = deriveQuota({
      nodes: Array.from({ length: sim.nodes }, (_, i) => toNodeCapacity(fakeNodeManifest(SIM_DEFAULTS.pool, i, e2Standard16AgentNode))),
      reserved: [],
      flavorNodeLabels: flavor.nodeLabels,
      flavorTolerations: flavor.tolerations,
      override: sim.queue,
      overrideKey: configKey("sim.queue"),
    });
    const roles: CohortRoleDemand[] = spec.roles.map((role, i) => ({
      name: role.name,
      replicas: role.replicas,
      requests: { ...(role.resources.cpu !== undefined ? { cpu: role.resources.cpu } : {}), ...(role.resources.memory !== undefined ? { memory: role.resources.memory } : {}) },
      replicasKey: configKey(`cohort.roles[${i}].replicas`),
    }));
    checkCohortFits(quota, roles, configKey("cohort"));
  } catch (error) {
    if (error instanceof QuotaError) throw new StackConfigError([{ key: error.key, reason: error.reason }]);
    throw error;
  }
  const runHash = createHash("sha256").update(`${resolved.specSha256}\n${bundleSha256}`).digest("hex").slice(0, 10);
  return { sim, resolved, quota, kueueConfiguration, namespace: `${spec.name}-${runHash}`, bundle, bundleSha256, manifests };
}

/**
 * Builds the `sim` profile.
 *
 * @param inject - tests only: the manifests and bundle (default: the tool cache and `dist/cohort.cjs`)
 * @throws {StackConfigError} and the other refusals of {@link planSim}, before any resource exists
 */
export function buildSim(ctx: ProfileContext, inject: Pick<SimPlanInput, "manifests" | "bundle"> = {}): StackOutputs {
  const { config, projectDir } = ctx;
  let plan: SimPlan;
  try {
    plan = planSim({ config, raw: ctx.raw, projectDir, stack: ctx.stack, ...inject });
  } catch (error) {
    if (error instanceof ManifestsMissingError) throw new pulumi.RunError(error.message);
    throw error;
  }
  const ports = portsFromBase(plan.sim.portBase);
  const nodePath = process.execPath;

  const cluster = new SimCluster("sim", {
    stateDir: plan.sim.stateDir,
    projectDir,
    nodePath,
    portBase: plan.sim.portBase,
    podReadyDelayMs: plan.sim.podReadyDelayMs,
    podReadyJitterMs: plan.sim.podReadyJitterMs,
  });
  const provider = cluster.provider;
  const pool = new FakeNodePool("agents", {
    provider,
    pool: SIM_DEFAULTS.pool,
    count: plan.sim.nodes,
    sim: { stateDir: cluster.stateDir, nodePath, projectDir },
  });

  // The manager's image is never deployed (controller: "external"); the tag names the release it is built from.
  const controllerImage = `${local.kueue.image.repository}:${local.kueue.image.tag}`;
  const kueueConfigurationYaml = YAML.stringify(renderKueueConfiguration(plan.manifests.kueue, plan.kueueConfiguration), { lineWidth: 0 });
  const flavor = simFlavor();
  const kueue = new Kueue("kueue", {
    provider,
    controller: "external",
    image: controllerImage,
    configuration: plan.kueueConfiguration,
    externalWebhookPort: ports.kueueWebhook,
    webhookReady: (install) => [cluster.controller("kueue", install, kueueConfigurationYaml)],
    queue: {
      resourceFlavor: simQueueNames.resourceFlavor,
      clusterQueue: simQueueNames.clusterQueue,
      nominalQuota: plan.quota.nominalQuota,
      nodeLabels: flavor.nodeLabels,
      tolerations: flavor.tolerations,
    },
    manifests: plan.manifests.kueue,
  });
  const sandbox = new AgentSandbox(
    "agent-sandbox",
    { provider, controller: "external", image: `${local.agentSandbox.image.repository}:${local.agentSandbox.image.tag}`, manifests: plan.manifests.agentSandbox },
    { dependsOn: [...kueue.webhookReady] },
  );
  const sandboxController = cluster.controller("agent-sandbox", sandbox.install);

  // Per-run objects: the same renderer as `local` (its Job and ConfigMap are not needed: the runtime runs here).
  const spec = plan.resolved.spec;
  const run = renderRunObjects({
    namespace: plan.namespace,
    localQueue: simQueueNames.localQueue,
    clusterQueue: simQueueNames.clusterQueue,
    image: `${local.runtimeNode.repository}:${local.runtimeNode.tag}`,
    bundle: plan.bundle,
    specJson: `${JSON.stringify(spec)}\n`,
    artifactsPath: config.artifactRoot,
    profile: "sim",
    runAs: { uid: 0, gid: 0 },
    activeDeadlineSeconds: 3600,
  });
  const base = { provider };
  const namespace = createObject("run", run.namespace, { ...base, dependsOn: [...kueue.webhookReady] });
  const localQueue = createObject("run", run.localQueue, {
    ...base,
    dependsOn: [namespace, kueue.crds.get("localqueues.kueue.x-k8s.io")!, kueue.clusterQueue, ...kueue.webhookReady],
  });
  const serviceAccount = createObject("run", run.serviceAccount, { ...base, dependsOn: [namespace] });
  const role = createObject("run", run.role, { ...base, dependsOn: [namespace, ...sandbox.install] });
  const roleBinding = createObject("run", run.roleBinding, { ...base, dependsOn: [namespace, role, serviceAccount] });
  const credentials = new command.local.Command(
    "run-credentials",
    {
      create: simctlCommand(nodePath, [
        "run-credentials",
        "--state-dir",
        cluster.stateDir,
        "--namespace",
        plan.namespace,
        "--service-account",
        RUNTIME_NAMES.serviceAccount,
        "--queue",
        simQueueNames.localQueue,
      ]),
      dir: projectDir,
      triggers: [plan.namespace],
      logging: "stderr",
      addPreviousOutputInEnv: false,
    },
    { dependsOn: [cluster.controlPlane, serviceAccount, roleBinding] },
  );
  const backendConfigFile = credentials.stdout.apply((s) => (JSON.parse(s.trim().split("\n").at(-1) ?? "{}") as { backendConfig: string }).backendConfig);

  const cohort = new CohortRun(
    "cohort",
    {
      spec,
      runtime: { runtimeBundlePath: path.join(projectDir, SIM_RUNTIME_BUNDLE), runtimeBundleSha256: plan.bundleSha256, nodePath },
      artifactRoot: config.artifactRoot,
      profile: "sim",
      backend: "kubernetes",
      backendConfigFile,
      keepLedgers: config.keepLedgers,
      fallbackRuntimeBundlePath: path.join(projectDir, SIM_RUNTIME_BUNDLE),
    },
    { dependsOn: [credentials, localQueue, kueue.clusterQueue, ...kueue.webhookReady, sandboxController, pool.ready] },
  );
  const runOutputs: pulumi.Output<RunOutputs> = pulumi
    .all([cohort.runId, cohort.outcome, cohort.size, cohort.readyCount, cohort.timeToReadyMs, cohort.ledgerPath, cohort.reportPath])
    .apply(([id, outcome, size, readyCount, timeToReadyMs, ledgerPath, reportPath]) => ({ id, outcome, size, readyCount, timeToReadyMs, ledgerPath, reportPath }));
  return {
    profile: "sim",
    artifactRoot: config.artifactRoot,
    run: runOutputs,
    kubeContext: cluster.kubeContext,
    kubeconfig: cluster.kubeconfig,
    queues: pulumi.output({ clusterQueue: simQueueNames.clusterQueue, localQueue: simQueueNames.localQueue }),
  };
}

/** The `sim` profile entry of stacks/profiles.ts. */
export const simProfile: ProfileDefinition = {
  description: "a real control plane (etcd, kube-apiserver, controller-manager, scheduler) with kwok fake nodes and Kueue and Agent Sandbox as local processes",
  configKeys: ["sim"],
  build: (ctx) => buildSim(ctx),
};

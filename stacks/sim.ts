/**
 * The `sim` profile: a real kube-apiserver, etcd, kube-controller-manager and kube-scheduler with kwok fake
 * nodes, all local processes supervised by `simctl`, plus the real Kueue manager and Agent Sandbox controller
 * running out of cluster; the cohort runs as Sandboxes admitted by Kueue on simulated nodes. The Kubernetes side is the same as `local`: the SAME `Kueue`, `AgentSandbox` and `CohortRun`
 * components, the same run namespace (`RunNamespace`, components/run/RunNamespace.ts), the same quota arithmetic
 * (components/k8s/quota.ts) and the same Kubernetes backend; the runtime runs out of cluster with the run's
 * ServiceAccount token (so the namespaced Role is exercised exactly as on `local`). See docs/sim.md.
 *
 * Config keys (besides the common ones of stacks/config.ts):
 * - `cohort-lab:sim` — `nodes` (fake e2-standard-16 agent nodes, default 8), `podReadyDelay` / `podReadyJitter`
 *   (simulated member start-up: delay + uniform random extra, durations, default 0s), `portBase` (first of 11
 *   loopback ports, default 26400: below Linux's ephemeral range 32768-60999), `stateDir` (default `<project>/.sim/<stack>`), `waitForPodsReadyTimeout`
 *   (default: the cohort's startupTimeout + 1m), `queue.cpu` / `queue.memory` (lower the derived quota), `shape`
 *   (`agents`, the default: `nodes` agent nodes; `gke`: the gke profile's Kubernetes side, below), `runAs`
 *   (`process`, the default: `cohort run`; `workflow`: the run is a Temporal workflow, docs/temporal.md).
 * - `cohort-lab:gke` — read only with `sim.shape: gke` (and then required as on `gke`, stacks/gke.ts): the nodes
 *   are the gke profile's two pools (`gke.systemNodes` system nodes, `gke.agentMaxNodes` tainted agent nodes, each
 *   with its machine type's allocatable), and the quota, ResourceFlavor and Kueue Configuration are gke's, from
 *   ONE plan (stacks/gke.ts `gkeKubernetesPlan`). No GCP API is called. The controllers stay local processes
 *   (pods on kwok nodes execute nothing), so nothing is pinned to the system pool and Temporal is not applied.
 * - `cohort-lab:cohort` — `cohort.roles` is required (members are Pods); a role without `app.image` gets a
 *   digest-pinned placeholder image: kwok never pulls images.
 *
 * Build order, everything refusable before any resource exists: config (zod, each problem names its key) →
 * RunSpec → runtime bundle and pinned manifests → quota from the fake nodes (or gke's, with `shape: gke`) and the
 * cohort's fit (refused with the arithmetic) → SimCluster → FakeNodePool (one per pool) → Kueue (external; its manager starts once its CRDs and webhook
 * wiring exist, and that start is the webhook gate) → AgentSandbox (external) and its controller → RunNamespace
 * (Namespace, LocalQueue, ServiceAccount, Role, RoleBinding; no in-cluster runtime) → run credentials
 * (SimCluster.runCredentials) → CohortRun (process executor,
 * `--backend kubernetes --backend-config <state>/runs/<ns>/backend.json`).
 */
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import * as YAML from "yaml";
import { z } from "zod";
import { AgentSandbox } from "../components/k8s/AgentSandbox.js";
import { CohortRun } from "../components/run/CohortRun.js";
import { FakeNodePool } from "../components/sim/FakeNodePool.js";
import { Kueue } from "../components/k8s/Kueue.js";
import { kueueConfiguration, renderKueueConfiguration, type KueueConfigurationInput } from "../components/k8s/manifests/kueue.js";
import { RunNamespace } from "../components/run/RunNamespace.js";
import type { QuotaResult } from "../components/k8s/quota.js";
import { SimCluster } from "../components/sim/SimCluster.js";
import { e2Standard16AgentNode, fakeNodeManifest, toNodeCapacity, type FakeNodeShape } from "../components/sim/fakeNode.js";
import { SIM_GO_GC_RANGE } from "../components/sim/goRuntime.js";
import { simExcludedNamespaces, simFlavor, simQueueNames } from "../components/sim/queue.js";
import { parseDurationMs } from "../runtime/index.js";
import { portsFromBase } from "../components/sim/ports.js";
import {
  clusterKnobFields,
  clusterKnobs,
  durationMs,
  integerIn,
  parseObjectKey,
  planClusterRun,
  planQuota,
  queueOutputs,
  resolvePodRunSpec,
  RUNTIME_BUNDLE,
  zodIssues,
  type ClusterKnobs,
  type ClusterManifests,
} from "./cluster.js";
import { configKey, StackConfigError, type ConfigIssue, type RawConfig, type ResolvedRunSpec, type StackConfig } from "./config.js";
import { refusing } from "./errors.js";
import { gkeKubernetesPlan, GKE_POOLS, GKE_QUEUES, parseGkeConfig, type GkeConfig, type GkePoolNodes } from "./gke.js";
import { local } from "../common/pins.js";
import type { ProfileContext, ProfileDefinition, QueueNames, RunOutputs, StackOutputs } from "./profile.js";

/** Defaults of `cohort-lab:sim` (the ONE place they are set). */
export const SIM_DEFAULTS = { shape: "agents", nodes: 8, pool: "agents", portBase: 26400, podReadyDelay: "0s", podReadyJitter: "0s", runAs: "workflow" } as const;

/**
 * What the simulated cluster looks like (`cohort-lab:sim.shape`):
 * - `agents`: `sim.nodes` fake GKE `e2-standard-16` agent nodes, the sim's own queue (the scale rehearsal);
 * - `gke`: the gke profile's Kubernetes side from `cohort-lab:gke` (its two pools, quota, ResourceFlavor and Kueue
 *   Configuration: stacks/gke.ts `gkeKubernetesPlan`), so its objects are proven on a real control plane.
 */
export const SIM_SHAPES = ["agents", "gke"] as const;
export type SimShape = (typeof SIM_SHAPES)[number];

/** The sim keys that `shape: gke` takes from `cohort-lab:gke` instead, with where to set them. */
const GKE_SHAPE_OWNED: Readonly<Record<string, string>> = {
  nodes: "the pools are gke's: set gke.agentMaxNodes and gke.systemNodes",
  queue: "the quota is gke's: set gke.queue",
  waitForPodsReadyTimeout: "Kueue's Configuration is gke's: set gke.waitForPodsReadyTimeout",
};

/**
 * The image a role without `app.image` gets: any digest-pinned reference passes the backend's check, and kwok
 * never pulls images, so the profile reuses a pin it already has (the Temporal CLI image of `local`).
 */
export const SIM_PLACEHOLDER_IMAGE = `${local.temporal.repository}:${local.temporal.tag}@${local.temporal.digest}`;

/** `cohort-lab:sim`, validated, defaults applied. */
export interface SimConfig extends ClusterKnobs {
  readonly shape: SimShape;
  readonly nodes: number;
  readonly portBase: number;
  readonly podReadyDelayMs: number;
  readonly podReadyJitterMs: number;
  /** Absolute. */
  readonly stateDir: string;
  /**
   * How `CohortRun` runs the cohort: `workflow` (the default: `cohort submit` to the sim's Temporal with a detached
   * run worker, the stand-in for local's worker Deployment, rolled when a new run needs it: a killed `up` followed by
   * `up` attaches to the same run; docs/temporal.md "The sim stack") or `process` (`cohort run` under the command
   * provider, as on `host`).
   */
  readonly runAs: "process" | "workflow";
  /**
   * `GOGC` of every sim process (`cohort-lab:sim.goGC`, 25..10000); unset leaves simctl's default
   * (components/sim/goRuntime.ts SIM_GO_GC_DEFAULT, 400) and keeps the control plane's identity unchanged.
   */
  readonly goGC?: number;
}

const shape = z.unknown().refine((v) => typeof v === "string" && (SIM_SHAPES as readonly string[]).includes(v), {
  error: (issue) =>
    `must be agents (sim.nodes fake agent nodes, the default) or gke (the gke profile's pools, quota and Kueue objects from cohort-lab:gke) (got ${JSON.stringify(issue.input) ?? "nothing"})`,
});

const simSchema = z.strictObject({
  shape: shape.optional(),
  nodes: integerIn(1, 5000).optional(),
  portBase: integerIn(1024, 65535 - 11).optional(),
  podReadyDelay: durationMs.optional(),
  podReadyJitter: durationMs.optional(),
  stateDir: z.string().min(1, "must be a directory path").optional(),
  runAs: z.enum(["process", "workflow"], { error: (issue) => `must be process or workflow (got ${JSON.stringify(issue.input) ?? "nothing"})` }).optional(),
  goGC: integerIn(SIM_GO_GC_RANGE.min, SIM_GO_GC_RANGE.max).optional(),
  ...clusterKnobFields,
});

/**
 * Parses `cohort-lab:sim`.
 *
 * @throws {StackConfigError} listing every problem with its key
 */
export function parseSimConfig(raw: RawConfig, projectDir: string, stack: string): SimConfig {
  const issues: ConfigIssue[] = [];
  const value = parseObjectKey(raw, "sim", issues, " with --path, e.g. `pulumi config set --path sim.nodes 12`") ?? {};
  if (issues.length > 0) throw new StackConfigError(issues);
  const parsed = simSchema.safeParse(value);
  if (!parsed.success) throw new StackConfigError(zodIssues("sim", parsed.error, Object.keys(simSchema.shape)));
  const c = parsed.data;
  const simShape = (c.shape as SimShape | undefined) ?? SIM_DEFAULTS.shape;
  if (simShape === "gke") {
    const owned = Object.keys(GKE_SHAPE_OWNED).filter((k) => value[k] !== undefined);
    if (owned.length > 0) throw new StackConfigError(owned.map((k) => ({ key: configKey(`sim.${k}`), reason: `does not apply with sim.shape gke: ${GKE_SHAPE_OWNED[k]}` })));
  } else if (raw.gke !== undefined) {
    throw new StackConfigError([
      { key: configKey("gke"), reason: "is read on the sim profile only with sim.shape gke (`pulumi config set --path sim.shape gke`); unset it or set sim.shape" },
    ]);
  }
  return {
    shape: simShape,
    nodes: c.nodes ?? SIM_DEFAULTS.nodes,
    portBase: c.portBase ?? SIM_DEFAULTS.portBase,
    podReadyDelayMs: c.podReadyDelay ?? parseDurationMs(SIM_DEFAULTS.podReadyDelay),
    podReadyJitterMs: c.podReadyJitter ?? parseDurationMs(SIM_DEFAULTS.podReadyJitter),
    stateDir: path.resolve(projectDir, c.stateDir ?? path.join(".sim", stack)),
    runAs: c.runAs ?? SIM_DEFAULTS.runAs,
    ...(c.goGC !== undefined ? { goGC: c.goGC } : {}),
    ...clusterKnobs(c),
  };
}

/** One pool of fake nodes the profile registers (a `FakeNodePool`). */
export interface SimPoolPlan {
  /** The component's name (its children are `<component>-<pool>-NNNN` and `<component>-ready`). */
  readonly component: string;
  /** Node name prefix. */
  readonly pool: string;
  readonly count: number;
  readonly shape: FakeNodeShape;
}

/** Everything the profile decided before creating resources. */
export interface SimPlan {
  readonly sim: SimConfig;
  /** `cohort-lab:gke` with `sim.shape: gke`. */
  readonly gke?: GkeConfig;
  /** The fake node pools, in registration order. */
  readonly pools: readonly SimPoolPlan[];
  /** The queue object names (the ResourceFlavor is the shape's: `cohort-lab-agents` or gke's). */
  readonly queueNames: QueueNames & { readonly resourceFlavor: string };
  /** The ResourceFlavor's node labels and tolerations. */
  readonly flavor: ReturnType<typeof simFlavor>;
  readonly resolved: ResolvedRunSpec;
  readonly quota: QuotaResult;
  readonly kueueConfiguration: KueueConfigurationInput;
  /** The run namespace (`<cohort name>-<10 hex>`). */
  readonly namespace: string;
  readonly bundle: Buffer;
  readonly bundleSha256: string;
  readonly manifests: ClusterManifests;
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
 * Validates everything and computes the quota from the fake nodes (with `sim.shape: gke`, gke's plan: stacks/gke.ts
 * `gkeKubernetesPlan`) and the cohort's fit, with no resource created.
 *
 * @throws {StackConfigError} for config, RunSpec, quota and fit problems (each names its key and, for the
 *   quota, carries the arithmetic)
 * @throws {ManifestsMissingError} | {pulumi.RunError} (missing runtime bundle)
 */
export function planSim(input: SimPlanInput): SimPlan {
  const { config, raw, projectDir } = input;
  const sim = parseSimConfig(raw, projectDir, input.stack);
  // A role without app.image gets SIM_PLACEHOLDER_IMAGE.
  const resolved: ResolvedRunSpec = resolvePodRunSpec(config, { profile: "sim", membersRun: "as Pods on simulated nodes", defaultImage: SIM_PLACEHOLDER_IMAGE, projectDir });
  const spec = resolved.spec;

  if (sim.shape === "gke") return planGkeShape(input, sim, resolved);

  const { waitForPodsReadyTimeout, manifests, bundle, bundleSha256, namespace } = planClusterRun({
    profile: "sim",
    projectDir,
    resolved,
    knobs: sim,
    manifests: input.manifests,
    bundle: input.bundle,
  });
  const kueueConfig = kueueConfiguration({ waitForPodsReadyTimeout, excludedNamespaces: simExcludedNamespaces });

  // Quota: exactly the nodes the FakeNodePool registers; nothing else runs on them (the controllers are local processes).
  const quota = planQuota({
    nodes: Array.from({ length: sim.nodes }, (_, i) => toNodeCapacity(fakeNodeManifest(SIM_DEFAULTS.pool, i, e2Standard16AgentNode))),
    reserved: [],
    flavor: simFlavor(),
    override: sim.queue,
    overrideKey: configKey("sim.queue"),
    spec,
  });
  const pools = [{ component: "agents", pool: SIM_DEFAULTS.pool, count: sim.nodes, shape: e2Standard16AgentNode }];
  return { sim, pools, queueNames: simQueueNames, flavor: simFlavor(), resolved, quota, kueueConfiguration: kueueConfig, namespace, bundle, bundleSha256, manifests };
}

/**
 * A fake node shaped like a node of one of gke's pools: the allocatable, labels and taint the gke plan's quota
 * sees (components/gke/allocatable.ts `agentPoolNodes`), plus the labels a GKE node carries.
 */
export function gkePoolNodeShape(pool: GkePoolNodes): FakeNodeShape {
  const node = pool.nodes[0];
  if (node === undefined) throw new Error(`gkePoolNodeShape: the ${pool.allocatable.machineType} pool has no node`);
  return {
    allocatable: { cpu: node.allocatable.cpu, memory: node.allocatable.memory, pods: node.allocatable.pods ?? "110" },
    labels: {
      ...node.labels,
      "node.kubernetes.io/instance-type": pool.allocatable.machineType,
      "kubernetes.io/os": "linux",
      "kubernetes.io/arch": "amd64",
      type: "kwok",
    },
    taints: (node.taints ?? []).map((t) => ({ key: t.key, value: t.value ?? "", effect: t.effect })),
  };
}

/**
 * `sim.shape: gke`: the gke profile's Kubernetes plan (stacks/gke.ts `gkeKubernetesPlan`: pools, quota with the
 * DaemonSet subtraction, ResourceFlavor, Kueue Configuration) on fake nodes shaped like its two pools. The
 * cold-start check of `gke` does not apply: the agent nodes exist from the start (there is no autoscaler).
 */
function planGkeShape(input: SimPlanInput, sim: SimConfig, resolved: ResolvedRunSpec): SimPlan {
  const gke = parseGkeConfig(input.raw);
  const { waitForPodsReadyTimeout, manifests, bundle, bundleSha256, namespace } = planClusterRun({
    profile: "gke",
    projectDir: input.projectDir,
    resolved,
    knobs: gke,
    manifests: input.manifests,
    bundle: input.bundle,
  });
  const k = gkeKubernetesPlan({ gke, spec: resolved.spec, waitForPodsReadyTimeout });
  const pools: SimPoolPlan[] = [
    ...(gke.systemNodes > 0 ? [{ component: GKE_POOLS.system, pool: GKE_POOLS.system, count: gke.systemNodes, shape: gkePoolNodeShape(k.systemPool) }] : []),
    { component: GKE_POOLS.agents, pool: GKE_POOLS.agents, count: gke.agentMaxNodes, shape: gkePoolNodeShape(k.agentPool) },
  ];
  return { sim, gke, pools, queueNames: GKE_QUEUES, flavor: k.flavor, resolved, quota: k.quota, kueueConfiguration: k.configuration, namespace, bundle, bundleSha256, manifests };
}

/**
 * The Temporal task queue of the sim's run worker (docs/temporal.md): the `queues.temporalTaskQueue` output, the
 * `--task-queue` of `cohort worker` and `cohort submit` on this profile.
 */
export const SIM_TEMPORAL_TASK_QUEUE = "cohort-lab-sim-runs";

/**
 * Builds the `sim` profile.
 *
 * @param inject - tests only: the manifests and bundle (default: the tool cache and `dist/cohort.cjs`)
 * @throws {StackConfigError} and the other refusals of {@link planSim}, before any resource exists
 */
export function buildSim(ctx: ProfileContext, inject: Pick<SimPlanInput, "manifests" | "bundle"> = {}): StackOutputs {
  const { config, projectDir } = ctx;
  const plan = refusing(() => planSim({ config, raw: ctx.raw, projectDir, stack: ctx.stack, ...inject }));
  const ports = portsFromBase(plan.sim.portBase);
  const nodePath = process.execPath;

  const cluster = new SimCluster("sim", {
    stateDir: plan.sim.stateDir,
    projectDir,
    nodePath,
    portBase: plan.sim.portBase,
    podReadyDelayMs: plan.sim.podReadyDelayMs,
    podReadyJitterMs: plan.sim.podReadyJitterMs,
    ...(plan.sim.goGC !== undefined ? { goGC: plan.sim.goGC } : {}),
  });
  const provider = cluster.provider;
  const pools = plan.pools.map((p) => new FakeNodePool(p.component, { provider, pool: p.pool, count: p.count, shape: p.shape, sim: cluster }));

  // The manager's image is never deployed (controller: "external"); the tag names the release it is built from.
  const controllerImage = `${local.kueue.image.repository}:${local.kueue.image.tag}`;
  const kueueConfigurationYaml = YAML.stringify(renderKueueConfiguration(plan.manifests.kueue, plan.kueueConfiguration), { lineWidth: 0 });
  const flavor = plan.flavor;
  const names = plan.queueNames;
  const kueue = new Kueue("kueue", {
    provider,
    controller: "external",
    image: controllerImage,
    configuration: plan.kueueConfiguration,
    externalWebhookPort: ports.kueueWebhook,
    webhookReady: (install) => [cluster.controller("kueue", install, kueueConfigurationYaml)],
    queue: {
      resourceFlavor: names.resourceFlavor,
      clusterQueue: names.clusterQueue,
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

  // The run namespace: the same component as `local`, without the in-cluster runtime (the runtime runs here,
  // out of cluster, with the ServiceAccount's credentials). Its objects and the credentials Command were created
  // at the stack root before RunNamespace and SimCluster.runCredentials: the aliases keep existing stacks' objects.
  const spec = plan.resolved.spec;
  const atRoot = { parent: pulumi.rootStackResource };
  const runNamespace = new RunNamespace("run", {
    provider,
    namespace: plan.namespace,
    localQueue: names.localQueue,
    clusterQueue: names.clusterQueue,
    localQueueDependsOn: kueue.localQueueReady,
    waitFor: [...kueue.webhookReady, ...sandbox.install],
    childAliases: [atRoot],
  });
  // The flavor the roster is admitted to (the sim's, or gke's with `sim.shape: gke`): the runtime renders its placement
  // into member pods on the workload admission path.
  const credentials = cluster.runCredentials(runNamespace, { aliases: [{ ...atRoot, name: "run-credentials" }] }, { [names.resourceFlavor]: plan.flavor });
  const backendConfigFile = credentials.stdout.apply((s) => (JSON.parse(s.trim().split("\n").at(-1) ?? "{}") as { backendConfig: string }).backendConfig);

  const cohort = new CohortRun(
    "cohort",
    {
      spec,
      keepLedgers: config.keepLedgers,
      execution: {
        kind: "process",
        runtime: { runtimeBundlePath: path.join(projectDir, RUNTIME_BUNDLE), runtimeBundleSha256: plan.bundleSha256, nodePath },
        artifactRoot: config.artifactRoot,
        profile: "sim",
        backend: "kubernetes",
        backendConfigFile,
        fallbackRuntimeBundlePath: path.join(projectDir, RUNTIME_BUNDLE),
        ...(plan.sim.runAs === "workflow" ? { temporal: { address: cluster.temporalAddress, taskQueue: SIM_TEMPORAL_TASK_QUEUE } } : {}),
      },
    },
    { dependsOn: [credentials, ...runNamespace.resources, kueue.clusterQueue, ...kueue.webhookReady, sandboxController, ...pools.map((p) => p.ready)] },
  );
  const runOutputs: pulumi.Output<RunOutputs> = cohort.summary;
  return {
    profile: "sim",
    artifactRoot: config.artifactRoot,
    run: runOutputs,
    kubeContext: cluster.kubeContext,
    kubeconfig: cluster.kubeconfig,
    temporalAddress: cluster.temporalAddress,
    queues: queueOutputs({ ...names, temporalTaskQueue: SIM_TEMPORAL_TASK_QUEUE }),
  };
}

/** The `sim` profile entry of stacks/profiles.ts. */
export const simProfile: ProfileDefinition = {
  description: "a real control plane (etcd, kube-apiserver, controller-manager, scheduler) with kwok fake nodes and Kueue and Agent Sandbox as local processes",
  configKeys: ["sim", "gke"],
  build: (ctx) => buildSim(ctx),
};

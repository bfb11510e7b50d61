/**
 * The `gke` profile: a zonal GKE Standard cluster in the user's GCP project (VPC-native network, a least-privilege
 * node service account, a fixed-size system pool and an agent pool that autoscales from zero), Workload Identity,
 * a GCS ledger bucket writable only by the run's Kubernetes service account, and on the cluster the same
 * Kubernetes layer as `local` (Kueue, Agent Sandbox, Temporal, pinned to the system pool; a ResourceFlavor that
 * puts members on the agent pool). See docs/gke.md.
 *
 * Config keys (besides the common ones of stacks/config.ts; objects are set field by field with `--path`):
 * - `cohort-lab:gke` — see {@link GKE_DEFAULTS} and docs/gke.md "Config keys"; `project`, `zone` and
 *   `bucketName` are required; `runAs` is `workflow` by default, which `up` runs only with `runWorkerImage` set
 *   (the run worker image pushed to the user's registry, by digest: without it a preview warns and `up` is refused
 *   naming both ways out, set it or `gke.runAs job`).
 * - `cohort-lab:images` — as on `local` (stacks/local.ts `IMAGE_KEYS`): the pins whose digest is not known here.
 * - `cohort-lab:cohort` — `cohort.roles` is required (members are Pods).
 *
 * Build order, everything refusable before any resource exists: config (zod; each problem names its key) →
 * RunSpec → runtime bundle and pinned manifests → quota = agentMaxNodes × allocatable(agentMachineType) less the
 * DaemonSet requests per node (components/gke/allocatable.ts), the cohort's fit and the cold-start check of
 * `startupTimeout` (each refused with the arithmetic) → network → node service account → cluster → park guard →
 * pools → Kubernetes provider from the kubeconfig → Kueue → Agent Sandbox and Temporal → run namespace objects →
 * the ledger bucket and the writer binding for the run's service account → the run (CohortRun with a `bucket` ledger,
 * after the writer binding and Kueue, Agent Sandbox, Temporal: by default the cluster-workflow execution, a Temporal
 * workflow run by the in-cluster run worker whose runs export their ledgers to `gs://<bucket>/<runId>/`, the host's
 * `run-submit` step reading and verifying each back; with `gke.runAs: job` the Kubernetes-Job execution, the Job
 * exporting its ledger and the host-side summary step reading it back) → the ledger guard.
 */
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { AgentSandbox } from "../components/k8s/AgentSandbox.js";
import * as command from "@pulumi/command";
import { Kueue, type WebhookProber } from "../components/k8s/Kueue.js";
import { Temporal } from "../components/k8s/Temporal.js";
import { localTools, stepCommand } from "../components/kind/KindCluster.js";
import { TEMPORAL_NODE_PORT } from "../components/kind/kindConfig.js";
import { agentPoolLabel, agentPoolTaint } from "../components/sim/fakeNode.js";
import { AGENT_SANDBOX_NAMESPACE } from "../components/k8s/manifests/agentSandbox.js";
import { cohortQueueNames, KUEUE_NAMESPACE, kueueConfiguration, type KueueConfigurationInput } from "../components/k8s/manifests/kueue.js";
import { SYSTEM_NAMESPACE, TEMPORAL_GRPC_PORT, TEMPORAL_NAME } from "../components/k8s/manifests/temporal.js";
import { IMAGE_RECIPES } from "../components/kind/app-images.js";
import { RUN_WORKER_NAMES, type WorkerFile } from "../components/run/worker-manifests.js";
import type { NodeCapacity, QuotaResult, ReservedPods } from "../components/k8s/quota.js";
import { RUNTIME_NAMES } from "../components/run/manifests.js";
import { RunNamespace } from "../components/run/RunNamespace.js";
import { CohortRun } from "../components/run/CohortRun.js";
import {
  agentPoolNodes,
  checkColdStart,
  GkeCapacityError,
  GkeCluster,
  GkeNetwork,
  GkeNodePool,
  GkeNodeServiceAccount,
  ledgerGuard,
  LedgerBucket,
  parkGuard,
  pinDeployments,
  type Allocatable,
} from "../components/gke/index.js";
import * as path from "node:path";
import { cacheRoot } from "../common/paths.js";
import { parseDurationMs, type RunSpec } from "../runtime/index.js";
import {
  clusterKnobFields,
  clusterKnobs,
  duration,
  integerIn,
  parseObjectKey,
  planClusterRun,
  planQuota,
  RUNTIME_BUNDLE,
  queueOutputs,
  readRunWorkerFiles,
  resolvePodRunSpec,
  zodIssues,
  type ClusterKnobs,
  type ClusterManifests,
  type PodRunSpec,
} from "./cluster.js";
import { configKey, StackConfigError, type ConfigIssue, type RawConfig, type StackConfig } from "./config.js";
import { LOCAL_KUEUE_FRAMEWORKS, missingDigestIssues, parseLocalConfig, refuseOrWarnImages, type ResolvedImages } from "./local.js";
import { refusing } from "./errors.js";
import type { ProfileContext, ProfileDefinition, RunOutputs, StackOutputs } from "./profile.js";

/** Queue names of the profile. */
export const GKE_QUEUES = cohortQueueNames("cohort-lab-gke-agents");

/**
 * Defaults of `cohort-lab:gke` (the ONE place they are set). The machine types and pool sizes are the public
 * simulator's (https://github.com/chughtapan/moltzap, packages/simulator `gke/terraform/variables.tf`).
 *
 * - `daemonSetRequests`: what GKE's own DaemonSets (kube-proxy, the logging and metrics agents, the GKE metadata
 *   server of Workload Identity, the PD CSI node plugin, netd) request on EACH agent node. GKE does not publish one
 *   figure: it depends on the GKE version and the add-ons enabled. The default is an ASSUMPTION, not a
 *   measurement; measure it on a live agent node (`kubectl describe node <node>`, "Allocated resources" with no
 *   member on it) and set the key. The quota subtracts it once per node.
 * - `coldStart`: how long a member may wait for a node when the agent pool is at zero: node provisioning plus the
 *   member image pull. An ASSUMPTION (5m); the public simulator's two-minute startup default was the first
 *   failure of its cold 100-agent run, and its docs suggest 15 minutes for such a cohort. `startupTimeout` below
 *   it is refused.
 */
export const GKE_DEFAULTS = {
  region: "us-central1",
  clusterName: "cohort-lab",
  releaseChannel: "REGULAR",
  systemMachineType: "e2-standard-4",
  systemNodes: 1,
  systemDiskGb: 50,
  agentMachineType: "e2-standard-16",
  agentMaxNodes: 8,
  agentDiskGb: 100,
  deletionProtection: false,
  deleteLedgers: false,
  daemonSetRequests: { cpu: "500m", memory: "1Gi" },
  coldStart: "5m",
  runAs: "workflow",
} as const;

/** Values of `cohort-lab:gke.runAs`: how the cohort run executes in the cluster (`workflow` by default; docs/gke.md "The run"). */
export const GKE_RUN_MODES = ["job", "workflow"] as const;
export type GkeRunMode = (typeof GKE_RUN_MODES)[number];

/** The task queue the `gke` run worker polls (`queues.temporalTaskQueue` with `gke.runAs: workflow`, the default). */
export const GKE_TEMPORAL_TASK_QUEUE = "cohort-lab-gke-runs";

/**
 * `gke.runWorkerImage`: the run worker image as pushed to a registry the cluster pulls from, by digest
 * (`<registry>/<path>[:<tag>]@sha256:<64 hex>`, e.g. Artifact Registry's `us-central1-docker.pkg.dev/<project>/<repo>/run-worker`).
 * No public registry holds this project's own image: it is built here (`npm run toolchain -- local-apps`) and pushed
 * by the user (docs/gke.md). The first component must be a registry host (a dotted name, or `localhost`, with an
 * optional port), as in the reference grammar of https://github.com/distribution/reference (`domain`); the local
 * build's name, `cohort-lab.local/…`, is refused separately (no node can pull it).
 */
export const REGISTRY_IMAGE_REF =
  /^((?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)+(?::[0-9]+)?|localhost(?::[0-9]+)?)(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)+)(?::([\w][\w.-]{0,127}))?@(sha256:[0-9a-f]{64})$/;

/** Pool names and the system pool's label (the agent pool's label and taint are every cluster profile's, components/sim/fakeNode.ts). */
export const GKE_POOLS = { system: "system", agents: "agents" } as const;
export const systemPoolLabel = { key: agentPoolLabel.key, value: "system" } as const;

/** The agent-pool ResourceFlavor's node labels and tolerations. */
export function gkeFlavor(): {
  nodeLabels: Record<string, string>;
  tolerations: { key: string; operator: "Equal"; value: string; effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute" }[];
} {
  return {
    nodeLabels: { [agentPoolLabel.key]: agentPoolLabel.value },
    tolerations: [{ key: agentPoolTaint.key, operator: "Equal", value: agentPoolTaint.value, effect: agentPoolTaint.effect }],
  };
}

/** Namespaces Kueue never manages on this profile. */
export const GKE_EXCLUDED_NAMESPACES = [
  "kube-system",
  "kube-public",
  "kube-node-lease",
  "gke-managed-system",
  "gmp-system",
  "gmp-public",
  KUEUE_NAMESPACE,
  AGENT_SANDBOX_NAMESPACE,
  SYSTEM_NAMESPACE,
];

/**
 * Where the runtime Job writes its ledger inside its pod (an `emptyDir`: the pod's scratch copy; the ledger's home is
 * the bucket, `gs://<bucket>/<runId>/`, the summary's `ledgerUri`).
 */
export const GKE_ARTIFACTS_PATH = "/var/lib/cohort/artifacts";

/**
 * Where the workflow mode's host step keeps its records on this machine (components/run/run-records.ts: a run that
 * did not succeed, a workflow that lost its run; each a trigger, so the next `up` runs again):
 * `<artifactRoot>/.cohort-gke/<stack>`, apart from the `local` and `host` stacks' records at the artifact root itself.
 */
export function gkeRecordsDir(projectDir: string, artifactRoot: string, stack: string): string {
  return path.join(path.resolve(projectDir, artifactRoot), ".cohort-gke", stack);
}

/** The export destination of the runtime Job's ledger: `gs://<bucketName>` (runs at `gs://<bucketName>/<runId>/`). */
export function gkeLedgerUri(bucketName: string): string {
  return `gs://${bucketName}`;
}

/** `cohort-lab:gke`, validated, defaults applied. */
export interface GkeConfig extends ClusterKnobs {
  readonly project: string;
  readonly region: string;
  readonly zone: string;
  readonly clusterName: string;
  readonly releaseChannel: string;
  readonly systemMachineType: string;
  readonly systemNodes: number;
  readonly systemDiskGb: number;
  readonly agentMachineType: string;
  readonly agentMaxNodes: number;
  readonly agentDiskGb: number;
  readonly deletionProtection: boolean;
  readonly deleteLedgers: boolean;
  readonly bucketName: string;
  readonly daemonSetRequests: { readonly cpu: string; readonly memory: string };
  readonly coldStart: string;
  /** How the run executes: `workflow` (the default: a Temporal workflow run by the in-cluster worker) or `job` (the runtime Job). */
  readonly runAs: GkeRunMode;
  /** The run worker image by digest ({@link REGISTRY_IMAGE_REF}); required by `up` with `runAs: workflow`. */
  readonly runWorkerImage?: string;
}

const bool = z.unknown().transform((v, ctx): boolean => {
  if (v === true || v === "true") return true;
  if (v === false || v === "false") return false;
  ctx.addIssue({ code: "custom", message: `must be true or false (got ${JSON.stringify(v)})` });
  return z.NEVER;
});
const text = (pattern: RegExp, what: string) =>
  z.unknown().refine((v) => typeof v === "string" && pattern.test(v), { error: (issue) => `must be ${what} (got ${JSON.stringify(issue.input) ?? "nothing"})` });

const gkeSchema = z.strictObject({
  project: text(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, "a GCP project id (6-30 characters: lower-case letters, digits, hyphens)"),
  region: text(/^[a-z]+-[a-z]+\d+$/, "a GCP region such as us-central1").optional(),
  zone: text(/^[a-z]+-[a-z]+\d+-[a-z]$/, "a GCP zone such as us-central1-a"),
  clusterName: text(/^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$/, "a GKE cluster name (at most 40 characters: lower-case letters, digits, hyphens)").optional(),
  releaseChannel: text(/^(RAPID|REGULAR|STABLE|EXTENDED)$/, "one of RAPID, REGULAR, STABLE, EXTENDED").optional(),
  systemMachineType: z.string().optional(),
  systemNodes: integerIn(0, 10).optional(),
  systemDiskGb: integerIn(10, 65536).optional(),
  agentMachineType: z.string().optional(),
  agentMaxNodes: integerIn(1, 1000).optional(),
  agentDiskGb: integerIn(10, 65536).optional(),
  deletionProtection: bool.optional(),
  deleteLedgers: bool.optional(),
  bucketName: text(/^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$/, "a GCS bucket name (3-63 characters: lower-case letters, digits, hyphens, underscores)"),
  daemonSetRequests: z.strictObject({ cpu: z.string().optional(), memory: z.string().optional() }).optional(),
  coldStart: duration.optional(),
  runAs: z.enum(GKE_RUN_MODES, { error: (issue) => `must be ${GKE_RUN_MODES.join(" or ")} (got ${JSON.stringify(issue.input) ?? "nothing"})` }).optional(),
  runWorkerImage: text(REGISTRY_IMAGE_REF, "the run worker image in your registry by digest, <registry>/<path>[:<tag>]@sha256:<64 hex>").optional(),
  ...clusterKnobFields,
});

/**
 * Parses `cohort-lab:gke`.
 *
 * @throws {StackConfigError} listing every problem with its key
 */
export function parseGkeConfig(raw: RawConfig): GkeConfig {
  const issues: ConfigIssue[] = [];
  const value = parseObjectKey(raw, "gke", issues, " with --path, e.g. `pulumi config set --path gke.project my-project`") ?? {};
  if (issues.length > 0) throw new StackConfigError(issues);
  const parsed = gkeSchema.safeParse(value);
  if (!parsed.success) throw new StackConfigError(zodIssues("gke", parsed.error, Object.keys(gkeSchema.shape)));
  const c = parsed.data;
  const zone = c.zone as string;
  const region = (c.region as string | undefined) ?? zone.replace(/-[a-z]$/, "");
  if (!zone.startsWith(`${region}-`)) throw new StackConfigError([{ key: configKey("gke.zone"), reason: `${zone} is not a zone of gke.region ${region}` }]);
  const localHost = IMAGE_RECIPES.runWorker.repository.split("/")[0]!;
  if (typeof c.runWorkerImage === "string" && c.runWorkerImage.startsWith(`${localHost}/`)) {
    throw new StackConfigError([
      {
        key: configKey("gke.runWorkerImage"),
        reason: `${c.runWorkerImage} is the name of the local build (${localHost}), which no GKE node can pull: push it to your registry and set that name and digest (docs/gke.md)`,
      },
    ]);
  }
  return {
    project: c.project as string,
    region,
    zone,
    clusterName: (c.clusterName as string | undefined) ?? GKE_DEFAULTS.clusterName,
    releaseChannel: (c.releaseChannel as string | undefined) ?? GKE_DEFAULTS.releaseChannel,
    systemMachineType: c.systemMachineType ?? GKE_DEFAULTS.systemMachineType,
    systemNodes: c.systemNodes ?? GKE_DEFAULTS.systemNodes,
    systemDiskGb: c.systemDiskGb ?? GKE_DEFAULTS.systemDiskGb,
    agentMachineType: c.agentMachineType ?? GKE_DEFAULTS.agentMachineType,
    agentMaxNodes: c.agentMaxNodes ?? GKE_DEFAULTS.agentMaxNodes,
    agentDiskGb: c.agentDiskGb ?? GKE_DEFAULTS.agentDiskGb,
    deletionProtection: c.deletionProtection ?? GKE_DEFAULTS.deletionProtection,
    deleteLedgers: c.deleteLedgers ?? GKE_DEFAULTS.deleteLedgers,
    bucketName: c.bucketName as string,
    daemonSetRequests: { cpu: c.daemonSetRequests?.cpu ?? GKE_DEFAULTS.daemonSetRequests.cpu, memory: c.daemonSetRequests?.memory ?? GKE_DEFAULTS.daemonSetRequests.memory },
    coldStart: c.coldStart ?? GKE_DEFAULTS.coldStart,
    runAs: c.runAs ?? GKE_DEFAULTS.runAs,
    ...(c.runWorkerImage !== undefined ? { runWorkerImage: c.runWorkerImage as string } : {}),
    ...clusterKnobs(c),
  };
}

/** Everything the profile decided before creating resources. */
export interface GkePlan {
  readonly gke: GkeConfig;
  readonly images: ResolvedImages;
  readonly resolved: PodRunSpec;
  readonly agentAllocatable: Allocatable;
  readonly quota: QuotaResult;
  readonly configuration: KueueConfigurationInput;
  readonly namespace: string;
  readonly bundle: Buffer;
  readonly bundleSha256: string;
  readonly manifests: ClusterManifests;
  readonly jobDeadlineSeconds: number;
  /**
   * With `gke.runAs: workflow` (the default): the run worker's image (`gke.runWorkerImage`; in a preview without it,
   * the local build's tag, which no node can pull) and the bundle files it gets (components/run/worker-manifests.ts
   * `RUN_WORKER_FILES`).
   */
  readonly worker?: { readonly image: string; readonly files: readonly WorkerFile[] };
}

/** Inputs of {@link planGke}. */
export interface GkePlanInput {
  readonly config: StackConfig;
  readonly raw: RawConfig;
  readonly projectDir: string;
  /** `pulumi.runtime.isDryRun()`: `pulumi up` refuses an image without a digest (preview warns), as on `local`. */
  readonly dryRun: boolean;
  readonly warn?: (message: string) => void;
  readonly manifests?: ClusterManifests;
  readonly bundle?: Buffer;
}

function asConfigError<T>(fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    if (error instanceof GkeCapacityError) throw new StackConfigError([{ key: error.key, reason: error.reason }]);
    throw error;
  }
}

/** One pool of the profile as the quota sees it: its nodes (components/gke/allocatable.ts `agentPoolNodes`) and one node's allocatable. */
export interface GkePoolNodes {
  readonly nodes: readonly NodeCapacity[];
  readonly allocatable: Allocatable;
}

/**
 * The profile's Kubernetes side as decided from its config (pure): what `gke` applies to its cluster and what
 * `sim` with `sim.shape: gke` applies to the simulated one (stacks/sim.ts), so both use ONE plan.
 */
export interface GkeKubernetesPlan {
  /** The system pool at `gke.systemNodes` nodes of `gke.systemMachineType` (label {@link systemPoolLabel}, no taint). */
  readonly systemPool: GkePoolNodes;
  /** The agent pool at its maximum, `gke.agentMaxNodes` nodes of `gke.agentMachineType` (agent label and taint). */
  readonly agentPool: GkePoolNodes;
  /** What GKE's DaemonSets request on each agent node (`gke.daemonSetRequests`), subtracted from the quota. */
  readonly reserved: readonly ReservedPods[];
  /** The ClusterQueue quota, the cohort's fit checked against it. */
  readonly quota: QuotaResult;
  /** The Kueue manager Configuration (waitForPodsReady, {@link GKE_EXCLUDED_NAMESPACES}, local's frameworks). */
  readonly configuration: KueueConfigurationInput;
  /** The agent-pool ResourceFlavor's node labels and tolerations ({@link gkeFlavor}); its name is {@link GKE_QUEUES}'. */
  readonly flavor: ReturnType<typeof gkeFlavor>;
}

/**
 * The pools, the quota (the agent pool at its maximum less the DaemonSet requests per node) and the Kueue
 * Configuration of the profile.
 *
 * @throws {StackConfigError} for an unknown machine type (naming `gke.agentMachineType` / `gke.systemMachineType`)
 *   and for quota and fit problems (each with its key and the arithmetic)
 */
export function gkeKubernetesPlan(o: { readonly gke: GkeConfig; readonly spec: RunSpec; readonly waitForPodsReadyTimeout: string }): GkeKubernetesPlan {
  const { gke, spec } = o;
  const configuration = kueueConfiguration({
    waitForPodsReadyTimeout: o.waitForPodsReadyTimeout,
    excludedNamespaces: GKE_EXCLUDED_NAMESPACES,
    // The same integrations as `local` (the runtime Job and the members' Pods).
    frameworks: LOCAL_KUEUE_FRAMEWORKS,
  });
  // The quota: the agent pool at its maximum, less what GKE's DaemonSets request on each agent node. The
  // controllers, Temporal and the run worker (`gke.runAs: workflow`) are pinned to the system pool (nodeSelector),
  // and the runtime Job (`gke.runAs: job`) lands there too (no toleration of the agent pool's taint), so neither run
  // mode's pod is subtracted (on `local` they share the nodes with the members and are reserved).
  const agentPool = asConfigError(() =>
    agentPoolNodes(GKE_POOLS.agents, gke.agentMachineType, gke.agentMaxNodes, { label: agentPoolLabel, taint: agentPoolTaint }, configKey("gke.agentMachineType")),
  );
  // The system pool's machine type must be one whose shape is known too (refused like the agent pool's).
  const systemPool = asConfigError(() => agentPoolNodes(GKE_POOLS.system, gke.systemMachineType, gke.systemNodes, { label: systemPoolLabel }, configKey("gke.systemMachineType")));
  const reserved: ReservedPods[] = [
    {
      name: "GKE DaemonSets",
      placement: "daemonset",
      requests: gke.daemonSetRequests,
      source: `${configKey("gke.daemonSetRequests")} (default ${GKE_DEFAULTS.daemonSetRequests.cpu} CPU, ${GKE_DEFAULTS.daemonSetRequests.memory}: an assumption, docs/gke.md)`,
    },
  ];
  const flavor = gkeFlavor();
  const quota = planQuota({ nodes: agentPool.nodes, reserved, flavor, override: gke.queue, overrideKey: configKey("gke.queue"), spec });
  return { systemPool, agentPool, reserved, quota, configuration, flavor };
}

/**
 * Validates everything, derives the quota and checks the cohort against it and against a cold start, with no
 * resource created.
 *
 * @throws {StackConfigError} for config, RunSpec, quota, fit and cold-start problems (each names its key); in
 *   `pulumi up`, an image without a digest (`cohort-lab:images.<key>`)
 */
export function planGke(input: GkePlanInput): GkePlan {
  const { config, raw, projectDir } = input;
  const warn = input.warn ?? ((m: string) => pulumi.log.warn(m));
  const gke = parseGkeConfig(raw);
  const { images } = parseLocalConfig(raw);
  const runtimeImage = images.missing.some((m) => m.key === configKey("images.runtime")) ? "" : images.refs.runtime;
  const resolved = resolvePodRunSpec(config, { profile: "gke", membersRun: "as Pods on the agent pool", defaultImage: runtimeImage, projectDir });
  const spec = resolved.spec;
  const plan = planClusterRun({ profile: "gke", projectDir, resolved, knobs: gke, manifests: input.manifests, bundle: input.bundle });
  const { configuration, agentPool, quota } = gkeKubernetesPlan({ gke, spec, waitForPodsReadyTimeout: plan.waitForPodsReadyTimeout });
  asConfigError(() =>
    checkColdStart({
      startupMs: parseDurationMs(spec.startupTimeout),
      startupText: spec.startupTimeout,
      coldStartMs: parseDurationMs(gke.coldStart),
      coldStartText: gke.coldStart,
      startupKey: configKey("cohort.startupTimeout"),
      coldStartKey: configKey("gke.coldStart"),
    }),
  );
  // What `up` would refuse for want of an image, in one pass (as on `local`): the cluster pulls from registries, so
  // only a digest names what runs, and the workflow mode's worker image is this project's own, which only the
  // user's registry holds.
  const workerIssue = gke.runAs === "workflow" && gke.runWorkerImage === undefined ? runWorkerImageIssue() : undefined;
  refuseOrWarnImages({
    profile: "gke",
    dryRun: input.dryRun,
    warn,
    digestIssues: missingDigestIssues(images.missing, "gke"),
    worker: workerIssue !== undefined ? { issue: workerIssue, until: "set" } : undefined,
  });
  const worker =
    gke.runAs === "workflow"
      ? { image: gke.runWorkerImage ?? `${IMAGE_RECIPES.runWorker.repository}:${IMAGE_RECIPES.runWorker.tag}`, files: readRunWorkerFiles(projectDir, plan.bundle, "gke.runAs") }
      : undefined;
  const ms = (t: string) => parseDurationMs(t);
  const jobDeadlineSeconds = Math.ceil((ms(spec.admissionTimeout) + ms(spec.startupTimeout) + ms(spec.hold) + 2 * ms(spec.stopGracePeriod)) / 1000) + 300;
  return {
    gke,
    images,
    resolved,
    agentAllocatable: agentPool.allocatable,
    quota,
    configuration,
    namespace: plan.namespace,
    bundle: plan.bundle,
    bundleSha256: plan.bundleSha256,
    manifests: plan.manifests,
    jobDeadlineSeconds,
    ...(worker !== undefined ? { worker } : {}),
  };
}

/**
 * Why `pulumi up` refuses the default run mode (`gke.runAs: workflow`) without `gke.runWorkerImage`: the run worker
 * image is this project's own and no registry the cluster pulls from holds it until the user pushes it. A preview
 * warns with it instead (and plans the worker with the local build's tag).
 */
function runWorkerImageIssue(): ConfigIssue {
  const { repository, tag } = IMAGE_RECIPES.runWorker;
  return {
    key: configKey("gke.runWorkerImage"),
    reason:
      `gke.runAs is workflow (the default), and the run worker image (${repository}:${tag}, built here by \`npm run toolchain -- local-apps\`) is in no registry the cluster pulls from: ` +
      "push it to yours and set its digest, e.g. `npm run pulumi -- config set --stack gke --path gke.runWorkerImage us-central1-docker.pkg.dev/<project>/<repo>/run-worker@sha256:<64 hex>` (docs/gke.md), " +
      "or run the cohort as a Job: `npm run pulumi -- config set --stack gke --path gke.runAs job`",
  };
}

/** Test seams of {@link buildGke}. */
export interface GkeBuildOverrides {
  readonly manifests?: ClusterManifests;
  readonly bundle?: Buffer;
  /** @default cacheRoot() */
  readonly toolCacheRoot?: string;
}

/**
 * Builds the `gke` profile; the `run` output is the run's summary (CohortRun), read back from the bucket.
 *
 * @throws {StackConfigError} and the other refusals of {@link planGke}, before any resource exists
 */
export function buildGke(ctx: ProfileContext, overrides: GkeBuildOverrides = {}): StackOutputs {
  const { config, projectDir } = ctx;
  const plan = refusing(() =>
    planGke({
      config,
      raw: ctx.raw,
      projectDir,
      dryRun: pulumi.runtime.isDryRun(),
      ...(overrides.manifests !== undefined ? { manifests: overrides.manifests } : {}),
      ...(overrides.bundle !== undefined ? { bundle: overrides.bundle } : {}),
    }),
  );
  const g = plan.gke;
  const nodePath = process.execPath;
  const gcpProvider = new gcp.Provider("gke-gcp", { project: g.project, region: g.region, zone: g.zone });
  const network = new GkeNetwork("gke-network", { project: g.project, region: g.region, name: g.clusterName, provider: gcpProvider });
  const nodeIdentity = new GkeNodeServiceAccount("gke-nodes", { project: g.project, accountId: `${g.clusterName}-nodes`.slice(0, 30), provider: gcpProvider });
  const cluster = new GkeCluster(
    "gke",
    {
      project: g.project,
      zone: g.zone,
      clusterName: g.clusterName,
      network,
      releaseChannel: g.releaseChannel,
      deletionProtection: g.deletionProtection,
      nodeServiceAccount: nodeIdentity.email,
      provider: gcpProvider,
      labels: { "cohort-lab-profile": "gke" },
      // The run's host-side steps (summary, progress, forget: components/gke/steps.cjs) with the pinned kubectl.
      hostSteps: { projectDir: path.resolve(projectDir), ...(overrides.toolCacheRoot !== undefined ? { toolCacheRoot: overrides.toolCacheRoot } : {}) },
    },
    { dependsOn: [nodeIdentity] },
  );
  const park = parkGuard(
    "gke-park-guard",
    { nodePath, projectDir, systemNodes: g.systemNodes, kubeconfig: cluster.kubeconfig, kubectlEnvironment: cluster.kubectlEnvironment() },
    { dependsOn: [cluster.cluster] },
  );
  const systemPool = new GkeNodePool("gke-system", {
    project: g.project,
    zone: g.zone,
    cluster,
    poolName: GKE_POOLS.system,
    machineType: g.systemMachineType,
    diskSizeGb: g.systemDiskGb,
    serviceAccount: nodeIdentity.email,
    size: { fixed: g.systemNodes },
    label: systemPoolLabel,
    provider: gcpProvider,
    waitFor: [park],
  });
  const agentPool = new GkeNodePool("gke-agents", {
    project: g.project,
    zone: g.zone,
    cluster,
    poolName: GKE_POOLS.agents,
    machineType: g.agentMachineType,
    diskSizeGb: g.agentDiskGb,
    serviceAccount: nodeIdentity.email,
    size: { min: 0, max: g.agentMaxNodes },
    label: agentPoolLabel,
    taint: agentPoolTaint,
    provider: gcpProvider,
  });
  const provider = cluster.kubernetesProvider([systemPool.pool, agentPool.pool]);
  const onSystem = { [systemPoolLabel.key]: systemPoolLabel.value };
  const tools = localTools(`${process.platform}-${process.arch}`, overrides.toolCacheRoot ?? cacheRoot());

  // Kueue's webhook gate: the host-side `webhook-probe` step (kubectl dry-run creates, components/kind/steps.cjs)
  // run against this cluster's kubeconfig (its exec credential needs gke-gcloud-auth-plugin on PATH).
  const webhookProber: WebhookProber = {
    webhookProbe: (name, o, opts) =>
      new command.local.Command(
        name,
        {
          create: stepCommand(nodePath, "webhook-probe"),
          dir: projectDir,
          environment: {
            ...tools.environment,
            COHORT_KUBECONFIG: pulumi.secret(cluster.kubeconfig),
            COHORT_PROBES: JSON.stringify(o.probes),
            COHORT_PROBE_TIMEOUT_MS: String(o.timeoutMs),
          },
          triggers: [...o.triggers],
          addPreviousOutputInEnv: false,
        },
        opts,
      ),
  };
  const flavor = gkeFlavor();
  const kueue = new Kueue("kueue", {
    provider,
    controller: "in-cluster",
    image: plan.images.refs.kueue,
    configuration: plan.configuration,
    webhookProbe: webhookProber,
    queue: {
      resourceFlavor: GKE_QUEUES.resourceFlavor,
      clusterQueue: GKE_QUEUES.clusterQueue,
      nominalQuota: plan.quota.nominalQuota,
      nodeLabels: flavor.nodeLabels,
      tolerations: flavor.tolerations,
    },
    manifests: pinDeployments(plan.manifests.kueue, onSystem),
  });
  const sandbox = new AgentSandbox("agent-sandbox", {
    provider,
    controller: "in-cluster",
    image: plan.images.refs.agentSandbox,
    manifests: pinDeployments(plan.manifests.agentSandbox, onSystem),
    waitFor: kueue.webhookReady,
  });
  // Temporal renders its own Deployment: the system-pool nodeSelector is added to it as it is registered.
  const temporal = new Temporal(
    "temporal",
    { provider, image: plan.images.refs.temporal, nodePort: TEMPORAL_NODE_PORT, hostPort: 7233, waitFor: kueue.webhookReady },
    {
      transformations: [
        (a) => {
          if (a.type !== "kubernetes:apps/v1:Deployment") return undefined;
          const props = a.props as { spec: { template: { spec: { nodeSelector?: Record<string, string> } } } };
          return {
            props: { ...props, spec: { ...props.spec, template: { ...props.spec.template, spec: { ...props.spec.template.spec, nodeSelector: onSystem } } } },
            opts: a.opts,
          };
        },
      ],
    },
  );
  const runNamespace = {
    provider,
    namespace: plan.namespace,
    localQueue: GKE_QUEUES.localQueue,
    clusterQueue: GKE_QUEUES.clusterQueue,
    localQueueDependsOn: kueue.localQueueReady,
  };
  const bucket = new LedgerBucket("ledgers", { project: g.project, location: g.region.toUpperCase(), bucketName: g.bucketName, provider: gcpProvider });
  const projectNumber = gcp.organizations.getProjectOutput({ projectId: g.project }, { provider: gcpProvider }).apply((p) => String(p.number));
  const runtimeBundlePath = path.join(path.resolve(projectDir), RUNTIME_BUNDLE);
  // The run waits for the Kubernetes layer (as on `local`) and for the writer binding: IAM is eventually consistent,
  // and the runtime's upload retries for up to 120 s (runtime/gcs/index.ts).
  const layerReady = [...sandbox.ready, kueue.clusterQueue, ...kueue.webhookReady];
  let cohort: CohortRun;
  if (plan.worker !== undefined) {
    // gke.runAs workflow (the default): the run worker in the system namespace (one per stack, rolled in place from
    // run to run); each run exports its ledger to the bucket as the worker's service account, the one the writer
    // binding names.
    const runtime = new RunNamespace("runtime", runNamespace);
    const writer = bucket.grantWriter({ projectNumber, project: g.project, namespace: SYSTEM_NAMESPACE, serviceAccount: RUN_WORKER_NAMES.serviceAccount });
    cohort = new CohortRun("cohort", {
      spec: plan.resolved.spec,
      keepLedgers: config.keepLedgers,
      execution: {
        kind: "clusterWorkflow",
        cluster: { provider, hostStep: (step) => cluster.hostStep(step) },
        run: runtime,
        worker: {
          image: plan.worker.image,
          files: plan.worker.files,
          workerNamespace: SYSTEM_NAMESPACE,
          temporalAddress: `${TEMPORAL_NAME}.${SYSTEM_NAMESPACE}.svc.cluster.local:${TEMPORAL_GRPC_PORT}`,
          taskQueue: GKE_TEMPORAL_TASK_QUEUE,
          runAs: { uid: 1000, gid: 1000 },
          // On the system pool with the controllers (the agent pool's taint keeps it off that pool anyway).
          nodeSelector: onSystem,
          terminationGracePeriodSeconds: Math.ceil((2 * parseDurationMs(plan.resolved.spec.stopGracePeriod)) / 1000) + 30,
        },
        // The frontend is not published: the host steps reach it through a supervised port-forward.
        temporal: { portForward: { namespace: SYSTEM_NAMESPACE, service: TEMPORAL_NAME, port: TEMPORAL_GRPC_PORT }, kubeconfig: cluster.kubeconfig },
        profile: "gke",
        submitter: { runtimeBundlePath },
        ledger: {
          kind: "bucket",
          uri: gkeLedgerUri(g.bucketName),
          runtimeBundlePath,
          podPath: GKE_ARTIFACTS_PATH,
          recordsDir: gkeRecordsDir(projectDir, config.artifactRoot, ctx.stack),
        },
        workerDependsOn: [temporal.deployment],
        dependsOn: [...layerReady, writer],
      },
    });
  } else {
    const runtime = new RunNamespace("runtime", {
      ...runNamespace,
      inClusterRuntime: {
        image: plan.images.refs.runtime,
        bundle: plan.bundle,
        specJson: `${JSON.stringify(plan.resolved.spec)}\n`,
        artifactsPath: GKE_ARTIFACTS_PATH,
        profile: "gke",
        runAs: { uid: 1000, gid: 1000 },
        activeDeadlineSeconds: plan.jobDeadlineSeconds,
        // The pod's run directory is an emptyDir; the runtime exports the finished ledger to the bucket as the run's
        // service account (Workload Identity: the writer binding below).
        ledger: { kind: "bucket", exportUri: gkeLedgerUri(g.bucketName) },
      },
    });
    const writer = bucket.grantWriter({ projectNumber, project: g.project, namespace: runtime.namespaceName, serviceAccount: RUNTIME_NAMES.serviceAccount });
    cohort = new CohortRun("cohort", {
      spec: plan.resolved.spec,
      keepLedgers: config.keepLedgers,
      execution: {
        kind: "kubernetesJob",
        // GkeCluster's host steps with the provider built above (JobCluster).
        cluster: { provider, kubeconfig: cluster.kubeconfig, hostStep: (step) => cluster.hostStep(step) },
        run: runtime,
        dependsOn: [...layerReady, temporal.deployment, writer],
        ledger: { kind: "bucket", uri: gkeLedgerUri(g.bucketName), runtimeBundlePath },
      },
    });
  }
  // After the run too: on destroy its delete (the refusal while ledgers remain) runs after the run's own delete, which
  // removes the run's ledger first when keepLedgers is false.
  ledgerGuard("ledgers-guard", { nodePath, projectDir, bucket: bucket.bucket.name, deleteLedgers: g.deleteLedgers, runtimeBundlePath }, { dependsOn: [bucket.bucket, cohort] });
  const run: pulumi.Output<RunOutputs> = cohort.summary;
  return {
    profile: "gke",
    artifactRoot: bucket.url,
    run,
    kubeContext: cluster.kubeContext,
    kubeconfig: cluster.kubeconfig,
    queues: queueOutputs(plan.worker !== undefined ? { ...GKE_QUEUES, temporalTaskQueue: GKE_TEMPORAL_TASK_QUEUE } : GKE_QUEUES),
  };
}

/** The `gke` profile entry of stacks/profiles.ts. */
export const gkeProfile: ProfileDefinition = {
  description:
    "a zonal GKE Standard cluster (system pool, agent pool scaling from zero, Workload Identity, GCS ledger bucket) with Kueue, Agent Sandbox and Temporal; the run is a Temporal workflow run by an in-cluster worker whose image is pushed to your registry (gke.runWorkerImage), or with gke.runAs job a Job; its ledger is exported to the bucket",
  configKeys: ["gke", "images"],
  build: (ctx) => buildGke(ctx),
};

/**
 * The `local` profile: a kind cluster (1 control-plane + 2 workers) on this machine's Docker, with Kueue, Agent
 * Sandbox and a Temporal dev server, the cohort runtime deployed in the cluster, and the cohort run as Sandboxes
 * admitted by Kueue. See docs/local.md.
 *
 * Config keys (besides the common ones of stacks/config.ts; objects are set field by field with `--path`):
 * - `cohort-lab:local` — `clusterName` (default `cohort-lab`), `workers` (2), `temporalPort` (7233, a loopback
 *   host port, checked free before the cluster is created), `runAs` (`workflow`, the default: the run is a
 *   Temporal workflow executed by the in-cluster run worker and submitted from this machine, so a killed `up`
 *   followed by `up` attaches to the same run, docs/temporal.md; it needs the run worker image built here, and
 *   without it a preview warns and `up` is refused; `job`: the runtime runs as a Kubernetes Job), `waitForPodsReadyTimeout` (default: the cohort's
 *   `startupTimeout` + 1m; must be longer than it), `queue.cpu` / `queue.memory` (lower the ClusterQueue quota;
 *   never above what the nodes hold).
 * - `cohort-lab:images` — `kueue`, `agentSandbox`, `runtime`: `<repository>[:<tag>]@sha256:<64 hex>` for the pins
 *   whose digest is not known here (common/pins.ts `digest: null`). Preview warns and uses the tags; `pulumi up`
 *   refuses before creating anything until each is set.
 * - `cohort-lab:cohort` — the common cohort key, but the local profile needs `cohort.roles` (members run as
 *   Pods; the app presets run host programs). A role without `app.image` runs in the runtime's Node image.
 *
 * Build order, everything refusable before any resource exists:
 * 1. config (zod; each problem names its key), platform (pinned kind/kubectl sums), image digests;
 * 2. the RunSpec (the runtime's own validation), the runtime bundle, the pinned manifests (tool cache);
 * 3. the queue quota (components/k8s/quota.ts) from the nodes kind will create — every worker gets this machine's
 *    CPUs and memory (kind nodes are containers on one host; the control-plane is tainted) — less what the
 *    system pods request, and the cohort's fit against it (refused with the arithmetic). Once the cluster
 *    exists, a capacity check re-derives the quota from the nodes' real allocatable before the ClusterQueue;
 * 4. KindCluster → Kueue (in-cluster; webhook gate) → Agent Sandbox and Temporal (after Kueue's webhooks,
 *    whose pod webhook fails closed for every namespace but kube-system and kueue-system) → RunNamespace (run
 *    namespace, LocalQueue, RBAC, bundle) → CohortRun with the cluster workflow executor (the run worker
 *    Deployment, its guard and the host's `cohort submit`) or, with `local.runAs: job`, the Kubernetes-Job executor.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import * as YAML from "yaml";
import { z } from "zod";
import { AppImagesMissingError, findAppImages, IMAGE_RECIPES } from "../components/kind/app-images.js";
import {
  ETCD_IMAGE_TAG,
  IMAGE_REPOSITORY,
  KUBERNETES_VERSION as NODE_IMAGE_KUBERNETES_VERSION,
  POD_SUBNET,
  renderDefaultCni,
  TOOL_NAME as NODE_IMAGE_TOOL,
} from "../components/kind/node-image.js";
import { cacheRoot } from "../common/paths.js";
import { readStamp } from "../common/stamp.js";
import { CohortRun } from "../components/run/CohortRun.js";
import { AgentSandbox } from "../components/k8s/AgentSandbox.js";
import { KindCluster, localTools, pinnedNodeImage, type ClusterImage, type NodeImage } from "../components/kind/KindCluster.js";
import { Kueue } from "../components/k8s/Kueue.js";
import type { KubernetesObject } from "../components/k8s/manifests/cache.js";
import { ARTIFACTS_NODE_PATH, TEMPORAL_NODE_PORT } from "../components/kind/kindConfig.js";
import { AGENT_SANDBOX_NAMESPACE } from "../components/k8s/manifests/agentSandbox.js";
import { cohortQueueNames, KUEUE_NAMESPACE, kueueConfiguration, renderKueueInstall, type KueueConfigurationInput } from "../components/k8s/manifests/kueue.js";
import { RUNTIME_JOB_RESOURCES } from "../components/run/manifests.js";
import { SYSTEM_NAMESPACE, TEMPORAL_GRPC_PORT, TEMPORAL_NAME, TEMPORAL_REQUESTS } from "../components/k8s/manifests/temporal.js";
import { RUN_WORKER_RESOURCES, type WorkerFile } from "../components/run/worker-manifests.js";
import type { NodeCapacity, QuotaResult, ReservedPods } from "../components/k8s/quota.js";
import { RunNamespace } from "../components/run/RunNamespace.js";
import { Temporal } from "../components/k8s/Temporal.js";
import { parseDurationMs } from "../runtime/index.js";
import {
  clusterKnobFields,
  clusterKnobs,
  describe,
  integerIn,
  parseObjectKey,
  planClusterRun,
  readRunWorkerFiles,
  planQuota,
  queueOutputs,
  resolvePodRunSpec,
  zodIssues,
  type ClusterKnobs,
  type ClusterManifests,
  type PodRunSpec,
} from "./cluster.js";
import { configKey, StackConfigError, type ConfigIssue, type RawConfig, type StackConfig } from "./config.js";
import { refusing } from "./errors.js";
import { local, type ImagePin } from "../common/pins.js";
import type { ProfileContext, ProfileDefinition, RunOutputs, StackOutputs } from "./profile.js";

/** Queue names of the profile. */
export const LOCAL_QUEUES = cohortQueueNames("cohort-lab-default");

/** Defaults of `cohort-lab:local` (the ONE place they are set). */
export const LOCAL_DEFAULTS = { clusterName: "cohort-lab", workers: 2, temporalPort: 7233, kindWait: "5m", runAs: "workflow" } as const;

/** The task queue the `local` run worker polls (`queues.temporalTaskQueue` with `local.runAs: workflow`). */
export const LOCAL_TEMPORAL_TASK_QUEUE = "cohort-lab-local-runs";

/** Values of `cohort-lab:local.runAs`: how the cohort run executes in the cluster. */
export const LOCAL_RUN_MODES = ["job", "workflow"] as const;
export type LocalRunMode = (typeof LOCAL_RUN_MODES)[number];

/**
 * Kueue integrations of this profile: `pod` for the members (Sandbox pods), and `batch/job` because the runtime
 * itself is a Job in a namespace Kueue manages. Kueue v0.17.0 registers the Job webhook even when `batch/job` is
 * not enabled, without its options (`pkg/controller/jobs/job/job_webhook.go` `SetupWebhook` ignores
 * `WithNoopWebhook`), and that webhook panics on every Job create ("admission webhook mjob.kb.io denied the
 * request: panic: runtime error: invalid memory address or nil pointer dereference", seen on a real kind cluster
 * here). With `batch/job` enabled the webhook works; the runtime Job has no queue-name label and
 * `manageJobsWithoutQueueName` is false, so Kueue does not manage it.
 * @see https://github.com/kubernetes-sigs/kueue/blob/v0.17.0/pkg/controller/jobs/job/job_webhook.go
 */
export const LOCAL_KUEUE_FRAMEWORKS: readonly string[] = ["batch/job", "pod"];

/** Namespaces Kueue never manages on this profile (the pod integration must exclude kube-system and kueue-system). */
export const LOCAL_EXCLUDED_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease", "local-path-storage", KUEUE_NAMESPACE, AGENT_SANDBOX_NAMESPACE, SYSTEM_NAMESPACE];

/**
 * Pods of a kind v0.31.0 cluster that request resources on the workers, per pinned upstream source. (Control
 * plane pods run on the tainted control-plane and do not count.) The Kubernetes manifests were read at
 * v1.35.4 of kubeadm; the node image is v1.35.0, whose addon manifests are the same in these fields.
 */
export const KIND_SYSTEM_PODS: readonly ReservedPods[] = [
  {
    name: "kindnet",
    placement: "daemonset",
    requests: { cpu: "100m", memory: "50Mi" },
    source: "https://github.com/kubernetes-sigs/kind/blob/v0.31.0/pkg/build/nodeimage/const_cni.go (DaemonSet kindnet)",
  },
  {
    name: "kube-proxy",
    placement: "daemonset",
    requests: {},
    source: "https://github.com/kubernetes/kubernetes/blob/v1.35.4/cmd/kubeadm/app/phases/addons/proxy/manifests.go (no requests)",
  },
  {
    name: "coredns",
    placement: "replicas",
    count: 2,
    requests: { cpu: "100m", memory: "70Mi" },
    source:
      "https://github.com/kubernetes/kubernetes/blob/v1.35.4/cmd/kubeadm/app/phases/addons/dns/manifests.go (requests), dns.go coreDNSReplicas = 2; " +
      "it tolerates the control-plane taint, so both replicas are counted against the workers (worst case)",
  },
  {
    name: "local-path-provisioner",
    placement: "replicas",
    count: 1,
    requests: {},
    source: "https://github.com/kubernetes-sigs/kind/blob/v0.31.0/pkg/build/nodeimage/const_storage.go (no requests)",
  },
];

/**
 * What kind's nodes will report: kind runs every node as a container on this machine, so each node's capacity is
 * the machine's CPUs and memory, and kind's kubelet config reserves nothing (`evictionHard` lists only disk
 * signals and `mergeDefaultEvictionSettings` defaults to false, so `memory.available` is 0:
 * https://github.com/kubernetes-sigs/kind/blob/v0.31.0/pkg/cluster/internal/kubeadm/config.go,
 * https://github.com/kubernetes/kubelet/blob/v0.35.4/config/v1beta1/types.go). Allocatable = capacity;
 * `maxPods` is the kubelet default, 110. The control-plane carries kind's `node-role.kubernetes.io/control-plane`
 * NoSchedule taint in a multi-node cluster.
 */
export function kindNodes(clusterName: string, workers: number, facts: Pick<LocalHostFacts, "cpus" | "memoryBytes">): NodeCapacity[] {
  const allocatable = { cpu: String(facts.cpus), memory: String(facts.memoryBytes), pods: "110" };
  const controlPlane: NodeCapacity = {
    name: `${clusterName}-control-plane`,
    allocatable,
    taints: [{ key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" }],
  };
  // kind names workers <cluster>-worker, <cluster>-worker2, …
  const ws = Array.from({ length: workers }, (_, i): NodeCapacity => ({ name: `${clusterName}-worker${i === 0 ? "" : String(i + 1)}`, allocatable }));
  return [controlPlane, ...ws];
}

/** Requests of the pod template of every Deployment/DaemonSet in `objects`, as reserved pods. */
export function reservedFromObjects(objects: readonly KubernetesObject[], source: string): ReservedPods[] {
  const out: ReservedPods[] = [];
  for (const obj of objects) {
    if (obj.kind !== "Deployment" && obj.kind !== "DaemonSet") continue;
    const spec = obj.spec as { replicas?: number; template: { spec: { containers: { resources?: { requests?: Record<string, string> } }[] } } };
    const containers = spec.template.spec.containers;
    const sum = (resource: "cpu" | "memory") => containers.map((c) => c.resources?.requests?.[resource]).filter((v): v is string => v !== undefined);
    const cpu = sum("cpu");
    const memory = sum("memory");
    if (cpu.length > 1 || memory.length > 1) throw new Error(`${obj.kind} ${obj.metadata.name}: several containers with requests are not supported by the reservation`);
    out.push({
      name: obj.metadata.name,
      placement: obj.kind === "DaemonSet" ? "daemonset" : "replicas",
      count: spec.replicas ?? 1,
      requests: { ...(cpu[0] !== undefined ? { cpu: cpu[0] } : {}), ...(memory[0] !== undefined ? { memory: memory[0] } : {}) },
      source,
    });
  }
  return out;
}

/**
 * Pods the node image built here runs on the workers: its CNI (flannel, from the DaemonSet the image ships as
 * kind's default CNI manifest), kube-proxy and CoreDNS (as in {@link KIND_SYSTEM_PODS}); no local-path-provisioner
 * (kind falls back to its in-tree host-path StorageClass, which runs no pod).
 */
export const BUILT_NODE_SYSTEM_PODS: readonly ReservedPods[] = [
  ...reservedFromObjects(
    YAML.parseAllDocuments(renderDefaultCni(POD_SUBNET)).map((d) => d.toJSON() as KubernetesObject),
    "the flannel DaemonSet of the built node image (scripts/local/node-image.ts renderDefaultCni)",
  ),
  ...KIND_SYSTEM_PODS.filter((p) => p.name === "kube-proxy" || p.name === "coredns"),
];

/**
 * Environment variable naming the directory where the program looks for built node and project images instead
 * of the tool cache (e.g. an empty directory, to run the profile on upstream images only, as the e2e preview
 * test does).
 */
export const LOCAL_ARTIFACTS_ROOT_ENV = "COHORT_LOCAL_ARTIFACTS_ROOT";

/**
 * What the toolchain built for this profile: the newest finished node image of the pinned Kubernetes version
 * (`<cache>/kind-node-image-<version>-<hash>/`, its stamp and `image.json`) and the project images
 * (components/kind/app-images.ts `findAppImages`). Missing pieces are simply absent: the profile then falls back to
 * upstream images or refuses with the command that builds them.
 */
export function findLocalArtifacts(env: NodeJS.ProcessEnv = process.env): LocalArtifacts {
  const root = env[LOCAL_ARTIFACTS_ROOT_ENV] !== undefined && env[LOCAL_ARTIFACTS_ROOT_ENV] !== "" ? path.resolve(env[LOCAL_ARTIFACTS_ROOT_ENV]) : cacheRoot(env);
  let nodeImage: BuiltNodeImage | undefined;
  let newest = "";
  const prefix = `${NODE_IMAGE_TOOL}-${NODE_IMAGE_KUBERNETES_VERSION}-`;
  for (const entry of existsSync(root) ? readdirSync(root) : []) {
    if (!entry.startsWith(prefix)) continue;
    const dir = path.join(root, entry);
    const stamp = readStamp(dir);
    if (stamp === undefined || !existsSync(path.join(dir, "image.json"))) continue;
    let record: { tag: string; id: string; archive: string };
    try {
      record = JSON.parse(readFileSync(path.join(dir, "image.json"), "utf8")) as { tag: string; id: string; archive: string };
    } catch (error) {
      throw new Error(`${path.join(dir, "image.json")} is not a node image record (${(error as Error).message}); remove ${dir} and run \`npm run toolchain -- local-images\``, {
        cause: error,
      });
    }
    if (stamp.createdAt > newest) {
      newest = stamp.createdAt;
      nodeImage = { tag: record.tag, id: record.id, archive: path.resolve(dir, record.archive), imageRepository: IMAGE_REPOSITORY, etcdImageTag: ETCD_IMAGE_TAG };
    }
  }
  const images: BuiltImages = {};
  const appEnv = { ...env, COHORT_LAB_CACHE: root };
  for (const key of ["kueue", "agentSandbox", "runtime", "temporal", "openclaw", "runWorker"] as const) {
    try {
      const b = findAppImages(appEnv, [key])[key];
      images[key] = { repository: b.repository, tag: b.tag, digest: b.digest, archive: b.archive };
    } catch (error) {
      if (!(error instanceof AppImagesMissingError)) throw error;
    }
  }
  return { ...(nodeImage !== undefined ? { nodeImage } : {}), images };
}

/** Facts about this machine the profile depends on (injectable for tests). */
export interface LocalHostFacts {
  /** Logical CPUs (what kubelet reports as node capacity in a kind node). */
  readonly cpus: number;
  /** Total memory in bytes (MemTotal). */
  readonly memoryBytes: number;
  /** uid/gid the run worker or the runtime Job runs as (the ledger files on the host belong to them). */
  readonly uid: number;
  readonly gid: number;
  /** `${process.platform}-${process.arch}`. */
  readonly platform: string;
  /**
   * The host runs cgroup v1 (no cgroup2 file system at /sys/fs/cgroup): kind's kubelet then needs
   * `failCgroupV1: false` (Kubernetes >= 1.35 refuses v1 by default). @default false
   */
  readonly cgroupV1?: boolean;
}

/** This machine's facts. */
export function hostFacts(): LocalHostFacts {
  const info = os.userInfo();
  return {
    cpus: os.cpus().length,
    memoryBytes: os.totalmem(),
    uid: info.uid,
    gid: info.gid,
    platform: `${process.platform}-${process.arch}`,
    cgroupV1: !existsSync("/sys/fs/cgroup/cgroup.controllers"),
  };
}

/**
 * Values of `cohort-lab:local.nodeImage`: `upstream` = the pinned kindest/node digest (pulled by Docker), `built`
 * = the node image `npm run toolchain -- local-images` built here offline, `auto` = the built one when one is built
 * and the upstream image is not present in the local Docker engine, otherwise upstream ({@link chooseNodeImage}).
 */
export const NODE_IMAGE_MODES = ["auto", "built", "upstream"] as const;
export type NodeImageMode = (typeof NODE_IMAGE_MODES)[number];

/** `cohort-lab:local`, validated, defaults applied. */
export interface LocalConfig extends ClusterKnobs {
  /** Which node image the cluster runs. @default "auto" */
  readonly nodeImage: NodeImageMode;
  readonly clusterName: string;
  readonly workers: number;
  readonly temporalPort: number;
  /** How the run executes: a Temporal workflow run by the in-cluster worker (`workflow`) or a Job (`job`). @default "workflow" */
  readonly runAs: LocalRunMode;
}

const IMAGE_REF = /^([a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?@(sha256:[0-9a-f]{64})$/;

const localSchema = z.strictObject({
  clusterName: z
    .unknown()
    .refine((v) => typeof v === "string" && /^[a-z0-9.-]+$/.test(v) && v.length <= 50, {
      error: (issue) => `must match ^[a-z0-9.-]+$ (kind's rule) and have at most 50 characters (got ${describe(issue.input)})`,
    })
    .optional(),
  workers: integerIn(1, 16).optional(),
  temporalPort: integerIn(1024, 65535).optional(),
  runAs: z.enum(LOCAL_RUN_MODES, { error: (issue) => `must be ${LOCAL_RUN_MODES.join(" or ")} (got ${describe(issue.input)})` }).optional(),
  ...clusterKnobFields,
  nodeImage: z
    .unknown()
    .refine((v) => typeof v === "string" && (NODE_IMAGE_MODES as readonly string[]).includes(v), {
      error: (issue) => `must be one of ${NODE_IMAGE_MODES.join(", ")} (got ${describe(issue.input)})`,
    })
    .optional(),
});

/** Image keys of `cohort-lab:images` and the pin each overrides. */
export const IMAGE_KEYS = {
  kueue: local.kueue.image,
  agentSandbox: local.agentSandbox.image,
  runtime: local.runtimeNode,
  temporal: local.temporal,
} as const satisfies Record<string, ImagePin>;
export type ImageKey = keyof typeof IMAGE_KEYS;

const imagesSchema = z.strictObject({ kueue: z.string().optional(), agentSandbox: z.string().optional(), runtime: z.string().optional(), temporal: z.string().optional() });

/**
 * An image built here offline (`npm run toolchain -- local-apps`, components/kind/app-images.ts) and loaded into the
 * kind nodes from its archive, so it is referenced by digest with no registry.
 */
export interface BuiltImage {
  /** e.g. `cohort-lab.local/kueue`. */
  readonly repository: string;
  readonly tag: string;
  /** `sha256:<64 hex>`: the manifest digest the nodes' containerd computes for the archive. */
  readonly digest: string;
  /** Absolute path of the `docker save` archive. */
  readonly archive: string;
}

/** Images built here, by what they replace: the four {@link IMAGE_KEYS} and member images (`openclaw`). */
export type BuiltImages = Partial<Record<ImageKey | "openclaw" | "runWorker", BuiltImage>>;

/** A built node image (scripts/local/node-image.ts). */
export interface BuiltNodeImage {
  /** `cohort-lab/kind-node:v<k8s>-<12 hex>`. */
  readonly tag: string;
  /** Docker image ID. */
  readonly id: string;
  /** Absolute path of its `docker save` archive. */
  readonly archive: string;
  /** kubeadm's `imageRepository` the image's control-plane images are named under. */
  readonly imageRepository: string;
  /** The etcd image tag in the image (kubeadm's `etcd.local.imageTag`). */
  readonly etcdImageTag: string;
}

/** What the toolchain built for this profile, if anything (read from the tool cache; injectable for tests). */
export interface LocalArtifacts {
  readonly nodeImage?: BuiltNodeImage;
  readonly images: BuiltImages;
}

/** The images the profile deploys, resolved from pins and config. */
export interface ResolvedImages {
  /** Image references to deploy: `repository:tag@digest`, or `repository:tag` when the digest is missing (preview only). */
  readonly refs: Readonly<Record<ImageKey, string>>;
  /** Config keys whose digest is missing, with the tag reference. */
  readonly missing: readonly { readonly key: string; readonly ref: string }[];
  /** Built images among {@link refs}, to load into the nodes (no registry). */
  readonly load: readonly ClusterImage[];
}

/**
 * Parses `cohort-lab:local` and `cohort-lab:images`.
 *
 * @throws {StackConfigError} listing every problem with its key
 */
export function parseLocalConfig(raw: RawConfig, built: BuiltImages = {}): { local: LocalConfig; images: ResolvedImages } {
  const issues: ConfigIssue[] = [];
  const parsedLocal = localSchema.safeParse(parseObjectKey(raw, "local", issues, byPath("local")) ?? {});
  if (!parsedLocal.success) issues.push(...zodIssues("local", parsedLocal.error, Object.keys(localSchema.shape)));
  const parsedImages = imagesSchema.safeParse(parseObjectKey(raw, "images", issues, byPath("images")) ?? {});
  if (!parsedImages.success) issues.push(...zodIssues("images", parsedImages.error, Object.keys(IMAGE_KEYS)));

  const refs: Partial<Record<ImageKey, string>> = {};
  const missing: { key: string; ref: string }[] = [];
  const load: ClusterImage[] = [];
  for (const key of Object.keys(IMAGE_KEYS) as ImageKey[]) {
    const pin: ImagePin = IMAGE_KEYS[key];
    const tagRef = `${pin.repository}:${pin.tag}`;
    const given = parsedImages.success ? parsedImages.data[key] : undefined;
    if (given !== undefined) {
      const m = IMAGE_REF.exec(given.trim());
      if (m === null) {
        issues.push({ key: configKey(`images.${key}`), reason: `must be ${pin.repository}[:${pin.tag}]@sha256:<64 hex> (got ${JSON.stringify(given)})` });
        continue;
      }
      const [, repository, tag, digest] = m;
      if (repository !== pin.repository || (tag !== undefined && tag !== pin.tag)) {
        issues.push({
          key: configKey(`images.${key}`),
          reason: `must be the pinned image ${tagRef} (common/pins.ts) by digest, ${pin.repository}[:${pin.tag}]@sha256:<64 hex> (got ${JSON.stringify(given)})`,
        });
        continue;
      }
      if (pin.digest !== null && digest !== pin.digest) {
        issues.push({ key: configKey(`images.${key}`), reason: `${tagRef} is pinned to ${pin.digest} in common/pins.ts; got ${digest}` });
        continue;
      }
      refs[key] = `${tagRef}@${digest}`;
    } else if (built[key] !== undefined) {
      const b = built[key];
      refs[key] = `${b.repository}:${b.tag}@${b.digest}`;
      load.push({ ref: `${b.repository}:${b.tag}`, digest: b.digest, archive: b.archive });
    } else if (pin.digest !== null) {
      refs[key] = `${tagRef}@${pin.digest}`;
    } else {
      refs[key] = tagRef;
      missing.push({ key: configKey(`images.${key}`), ref: tagRef });
    }
  }
  if (issues.length > 0) throw new StackConfigError(issues);
  const l = parsedLocal.success ? parsedLocal.data : {};
  return {
    local: {
      clusterName: (l.clusterName as string | undefined) ?? LOCAL_DEFAULTS.clusterName,
      workers: l.workers ?? LOCAL_DEFAULTS.workers,
      temporalPort: l.temporalPort ?? LOCAL_DEFAULTS.temporalPort,
      runAs: l.runAs ?? LOCAL_DEFAULTS.runAs,
      nodeImage: (l.nodeImage as NodeImageMode | undefined) ?? "auto",
      ...clusterKnobs(l),
    },
    images: { refs: refs as Record<ImageKey, string>, missing, load },
  };
}

/** How a field of an object key is set, for {@link parseObjectKey}'s refusal. */
function byPath(key: string): string {
  return ` with --path, e.g. \`pulumi config set --path ${key}.<field> <value>\``;
}

/** The message for images without a digest (a warning in preview, a refusal in `pulumi up`); `stack` is the one the `config set` hint names (the profile's own stack). */
export function missingDigestIssues(missing: ResolvedImages["missing"], stack: string): ConfigIssue[] {
  return missing.map((m) => ({
    key: m.key,
    reason:
      `no digest is pinned for ${m.ref} (it cannot be learned without registry access, and none is invented). ` +
      `Get it with \`docker buildx imagetools inspect ${m.ref}\` (the "Digest:" line) and run ` +
      `\`npm run pulumi -- config set --stack ${stack} --path ${m.key.replace(/^cohort-lab:/, "")} ${m.ref}@sha256:<digest>\``,
  }));
}

/**
 * What `pulumi up` would refuse for want of an image, in one pass: the digests that are not known and, where the run
 * mode needs the run worker image and it is not there, the worker's issue. `up` refuses them all in one
 * {@link StackConfigError} (the digests first); a preview warns instead, once for the digests and once for the worker
 * (naming its key and both ways out), and goes on with the tags.
 *
 * @param o.worker.until - what `up` waits for, in "refuses until the run worker image is <until>"
 * @throws {StackConfigError} when not a dry run and there is any issue
 */
export function refuseOrWarnImages(o: {
  readonly profile: string;
  readonly dryRun: boolean;
  readonly warn: (message: string) => void;
  readonly digestIssues: readonly ConfigIssue[];
  readonly worker?: { readonly issue: ConfigIssue; readonly until: string } | undefined;
}): void {
  const { digestIssues, worker } = o;
  if (!o.dryRun && (digestIssues.length > 0 || worker !== undefined)) throw new StackConfigError([...digestIssues, ...(worker !== undefined ? [worker.issue] : [])]);
  if (digestIssues.length > 0) {
    o.warn(
      `${o.profile} profile: preview uses image tags without digests; \`pulumi up\` refuses until they are set:\n${digestIssues.map((i) => `${i.key}: ${i.reason}`).join("\n")}`,
    );
  }
  if (worker !== undefined) o.warn(`${o.profile} profile: \`pulumi up\` refuses until the run worker image is ${worker.until}:\n${worker.issue.key}: ${worker.issue.reason}`);
}

/**
 * The RunSpec of the local profile: `cohort.roles` is required; a role without `app.image` gets the runtime's
 * Node image (when its digest is known; otherwise the image stays empty, which only a preview can reach). A role
 * image that is one of the images built here (`repository[:tag]@digest`, e.g. the OpenClaw member image) is
 * returned in `memberImages`, to be loaded into the nodes.
 *
 * @throws {StackConfigError} naming `cohort-lab:cohort.roles` when no roles are configured, or any RunSpec problem
 */
export function resolveLocalRunSpec(
  config: StackConfig,
  runtimeImage: string | undefined,
  projectDir: string,
  built: BuiltImages = {},
): PodRunSpec & { readonly usesRuntimeImage: boolean } {
  const resolved = resolvePodRunSpec(config, {
    profile: "local",
    membersRun: "as Pods",
    rosterNote: ", images pinned by digest",
    defaultImage: runtimeImage ?? "",
    projectDir,
    builtImage: (image) => {
      // A member image built here (named by its digest reference): loaded into the nodes from its archive.
      const b = builtByRef(built, image);
      return b !== undefined ? { ref: `${b.repository}:${b.tag}`, digest: b.digest, archive: b.archive } : undefined;
    },
  });
  return { ...resolved, usesRuntimeImage: resolved.usesDefaultImage };
}

/** The built image a member's `app.image` names (`repository[:tag]@digest` of a built image), if any. */
function builtByRef(built: BuiltImages, image: string): BuiltImage | undefined {
  return Object.values(built).find((b) => b !== undefined && (image === `${b.repository}:${b.tag}@${b.digest}` || image === `${b.repository}@${b.digest}`));
}

/**
 * The node image for `cohort-lab:local.nodeImage`: `upstream` = the pinned kindest/node digest, `built` = the one
 * built here, `auto` = the built one when there is one and the upstream image is not in the local Docker engine
 * (`upstreamPresent`), otherwise upstream (pulled by Docker).
 *
 * @throws {StackConfigError} naming `cohort-lab:local.nodeImage` when `built` is asked for and none is built
 */
export function chooseNodeImage(mode: NodeImageMode, built: BuiltNodeImage | undefined, upstreamPresent: () => boolean): { image: NodeImage; built?: BuiltNodeImage } {
  // auto: with nothing built, the upstream image (Docker pulls it by digest where a registry is reachable).
  const useBuilt = mode === "built" || (mode === "auto" && built !== undefined && !upstreamPresent());
  if (!useBuilt) return { image: { ref: pinnedNodeImage() } };
  if (built === undefined) {
    throw new StackConfigError([
      {
        key: configKey("local.nodeImage"),
        reason:
          "built: no node image is built here; run `npm run toolchain -- local local-images` " +
          `(or set local.nodeImage to upstream or auto on a machine that can pull ${pinnedNodeImage()})`,
      },
    ]);
  }
  return { image: { ref: built.tag, imageId: built.id, archive: built.archive }, built };
}

/** Whether Docker has `image` locally (`docker image inspect`); false when Docker does not answer. */
export function dockerHasImage(image: string): boolean {
  try {
    execFileSync("docker", ["image", "inspect", "--format", "{{.Id}}", image], { stdio: "ignore", timeout: 20_000 });
    return true;
  } catch {
    return false;
  }
}

/** Everything the profile decided before creating resources. */
export interface LocalPlan {
  /** The node image and, when it was built here, its record (kubeadm settings come from it). */
  readonly nodeImage: { readonly image: NodeImage; readonly built?: BuiltNodeImage };
  /** Built images to load into the nodes: the controllers', the runtime's, the run worker's and the members'. */
  readonly loadImages: readonly ClusterImage[];
  readonly local: LocalConfig;
  readonly images: ResolvedImages;
  readonly resolved: PodRunSpec & { readonly usesRuntimeImage: boolean };
  readonly quota: QuotaResult;
  readonly configuration: KueueConfigurationInput;
  /** The Job's `activeDeadlineSeconds`. */
  readonly jobDeadlineSeconds: number;
  /** The run namespace. */
  readonly namespace: string;
  readonly bundle: Buffer;
  readonly bundleSha256: string;
  readonly manifests: ClusterManifests;
  /** Kubernetes backend options of the run, in the Job or the run worker (see {@link resolveLocalRunSpec}). */
  readonly backendOptions: Readonly<Record<string, string>>;
  /** With `local.runAs: workflow` (the default): the run worker's image (by tag only in a preview where it is not built) and the bundle files it gets (components/run/worker-manifests.ts `RUN_WORKER_FILES`). */
  readonly worker?: { readonly image: string; readonly files: readonly WorkerFile[] };
}

/** Inputs of {@link planLocal}. */
export interface PlanInput {
  readonly config: StackConfig;
  readonly raw: RawConfig;
  readonly projectDir: string;
  readonly facts: LocalHostFacts;
  /** `pulumi.runtime.isDryRun()`: missing digests and an unbuilt run worker image are warnings in a preview and refusals otherwise. */
  readonly dryRun: boolean;
  /** Where warnings go. @default pulumi.log.warn */
  readonly warn?: (message: string) => void;
  /** @default the tool cache */
  readonly manifests?: ClusterManifests;
  /** @default reads `<projectDir>/dist/cohort.cjs` */
  readonly bundle?: Buffer;
  /** What the toolchain built. @default nothing built */
  readonly artifacts?: LocalArtifacts;
  /** Tool cache root for kind and kubectl. @default cacheRoot() */
  readonly toolCacheRoot?: string;
  /** Pods a built node image runs on the workers (its CNI, kube-proxy, CoreDNS). @default none */
  readonly builtSystemPods?: readonly ReservedPods[];
  /** Whether the upstream node image is in the local Docker engine. @default {@link dockerHasImage} */
  readonly upstreamNodeImagePresent?: () => boolean;
}

/**
 * Validates everything and computes the quota and the cohort's fit, with no resource created.
 *
 * @throws {StackConfigError} for config, image, RunSpec, quota and fit problems (each names its key)
 * @throws {UnsupportedPlatformError} | {ManifestsMissingError} | {Error} (missing runtime bundle)
 */
export function planLocal(input: PlanInput): LocalPlan {
  const { config, raw, projectDir, facts } = input;
  const warn = input.warn ?? ((m: string) => pulumi.log.warn(m));
  const artifacts = input.artifacts ?? { images: {} };
  const { local: localConfig, images } = parseLocalConfig(raw, artifacts.images);
  localTools(facts.platform, input.toolCacheRoot ?? cacheRoot()); // refuses an unsupported platform before anything else
  const nodeImage = chooseNodeImage(localConfig.nodeImage, artifacts.nodeImage, input.upstreamNodeImagePresent ?? (() => dockerHasImage(pinnedNodeImage())));
  // What `up` would refuse for want of an image (digests not known; the run worker not built), in one pass.
  const workerIssue = localConfig.runAs === "workflow" && artifacts.images.runWorker === undefined ? runWorkerNotBuiltIssue() : undefined;
  refuseOrWarnImages({
    profile: "local",
    dryRun: input.dryRun,
    warn,
    digestIssues: missingDigestIssues(images.missing, "local"),
    worker: workerIssue !== undefined ? { issue: workerIssue, until: "built" } : undefined,
  });
  const runtimeImage = images.missing.some((m) => m.key === configKey("images.runtime")) ? undefined : images.refs.runtime;
  const resolved = resolveLocalRunSpec(config, runtimeImage, projectDir, artifacts.images);
  const spec = resolved.spec;

  const { waitForPodsReadyTimeout, manifests, bundle, bundleSha256, namespace } = planClusterRun({
    profile: "local",
    projectDir,
    resolved,
    knobs: localConfig,
    manifests: input.manifests,
    bundle: input.bundle,
  });
  const configuration = kueueConfiguration({ waitForPodsReadyTimeout, excludedNamespaces: LOCAL_EXCLUDED_NAMESPACES, frameworks: LOCAL_KUEUE_FRAMEWORKS });

  // Quota: the nodes kind will create, less the system pods and what this profile deploys besides the cohort.
  const kueueInstall = renderKueueInstall(manifests.kueue, { controller: "in-cluster", image: images.refs.kueue, configuration });
  const reserved: ReservedPods[] = [
    ...(nodeImage.built !== undefined ? (input.builtSystemPods ?? []) : KIND_SYSTEM_PODS),
    ...reservedFromObjects(kueueInstall, `Kueue ${local.kueue.version} release manifests (config/components/manager/manager.yaml)`),
    ...reservedFromObjects(manifests.agentSandbox, `Agent Sandbox ${local.agentSandbox.version} k8s/controller.yaml`),
    { name: "temporal", placement: "replicas", count: 1, requests: TEMPORAL_REQUESTS, source: "components/k8s/manifests/temporal.ts" },
    localConfig.runAs === "workflow"
      ? { name: "cohort run worker", placement: "replicas", count: 1, requests: RUN_WORKER_RESOURCES.requests, source: "components/run/worker-manifests.ts" }
      : { name: "cohort runtime Job", placement: "replicas", count: 1, requests: RUNTIME_JOB_RESOURCES.requests, source: "components/run/manifests.ts" },
  ];
  const quota = planQuota({
    nodes: kindNodes(localConfig.clusterName, localConfig.workers, facts),
    reserved,
    override: localConfig.queue,
    overrideKey: configKey("local.queue"),
    spec,
  });

  const worker = localConfig.runAs === "workflow" ? planWorker(artifacts.images, projectDir, bundle) : undefined;
  const ms = (text: string) => parseDurationMs(text);
  const jobDeadlineSeconds = Math.ceil((ms(spec.admissionTimeout) + ms(spec.startupTimeout) + ms(spec.hold) + 2 * ms(spec.stopGracePeriod)) / 1000) + 300;
  return {
    // The official Node image runs as root (no USER), so members in it cannot keep the backend's default
    // runAsNonRoot: true (kubelet refuses to start them). They still drop every capability and cannot escalate.
    backendOptions: resolved.usesRuntimeImage ? { runAsNonRoot: "false" } : {},
    nodeImage,
    loadImages: [...images.load, ...resolved.memberImages, ...(worker?.load !== undefined ? [worker.load] : [])],
    local: localConfig,
    images,
    resolved,
    quota,
    configuration,
    jobDeadlineSeconds,
    namespace,
    bundle,
    bundleSha256,
    manifests,
    ...(worker !== undefined ? { worker: { image: worker.image, files: worker.files } } : {}),
  };
}

/**
 * Why `pulumi up` refuses the default run mode (`local.runAs: workflow`) where the run worker image is not built:
 * it is this project's own image and no registry holds it (a machine that pulls upstream images has none). A
 * preview warns with it instead.
 */
function runWorkerNotBuiltIssue(): ConfigIssue {
  const { repository, tag } = IMAGE_RECIPES.runWorker;
  return {
    key: configKey("local.runAs"),
    reason:
      `workflow (the default): the run worker image ${repository}:${tag} is not built here (it is this project's image, in no registry); ` +
      "build it with `npm run toolchain -- local-apps`, or run the cohort as a Job: `npm run pulumi -- config set --stack local --path local.runAs job`",
  };
}

/**
 * The run worker of `local.runAs: workflow` (the default): its image (built here by `npm run toolchain -- local-apps`)
 * and the bundle files it runs (`dist/cohort.cjs` as planned, and `dist/cohort-temporal.cjs`,
 * `dist/cohort-temporal-workflows.js`). Where the image is not built (a preview only: `planLocal` refused an `up`
 * with {@link runWorkerNotBuiltIssue}), the worker is planned with the image's tag and nothing to load.
 *
 * @returns `image` is `repository:tag@sha256:<64 hex>`, or `repository:tag` with `load` undefined when not built
 * @throws {StackConfigError} naming `cohort-lab:local.runAs` when a bundle file is missing
 */
function planWorker(built: BuiltImages, projectDir: string, bundle: Buffer): { image: string; load?: ClusterImage; files: WorkerFile[] } {
  const files = readRunWorkerFiles(projectDir, bundle, "local.runAs");
  const image = built.runWorker;
  if (image === undefined) return { image: `${IMAGE_RECIPES.runWorker.repository}:${IMAGE_RECIPES.runWorker.tag}`, files };
  return { image: `${image.repository}:${image.tag}@${image.digest}`, load: { ref: `${image.repository}:${image.tag}`, digest: image.digest, archive: image.archive }, files };
}

/** Test seams of {@link buildLocal} (everything else comes from the stack config). */
export interface LocalBuildOverrides {
  /** @default hostFacts() */
  readonly facts?: LocalHostFacts;
  /** @default the tool cache */
  readonly manifests?: PlanInput["manifests"];
  /** @default `<projectDir>/dist/cohort.cjs` */
  readonly bundle?: Buffer;
  /** Tool cache root for the kind/kubectl paths. @default cacheRoot() */
  readonly toolCacheRoot?: string;
  /** What the toolchain built. @default read from the tool cache ({@link findLocalArtifacts}) */
  readonly artifacts?: LocalArtifacts;
  /** @default {@link dockerHasImage} of the pinned upstream node image */
  readonly upstreamNodeImagePresent?: () => boolean;
}

/**
 * Builds the `local` profile.
 *
 * @throws {StackConfigError} and the other refusals of {@link planLocal}, before any resource exists
 */
export function buildLocal(ctx: ProfileContext, overrides: LocalBuildOverrides = {}): StackOutputs {
  const { config, projectDir } = ctx;
  const facts = overrides.facts ?? hostFacts();
  const plan = refusing(() =>
    planLocal({
      config,
      raw: ctx.raw,
      projectDir,
      facts,
      dryRun: pulumi.runtime.isDryRun(),
      ...(overrides.manifests !== undefined ? { manifests: overrides.manifests } : {}),
      ...(overrides.bundle !== undefined ? { bundle: overrides.bundle } : {}),
      artifacts:
        overrides.artifacts ?? findLocalArtifacts(overrides.toolCacheRoot !== undefined ? { ...process.env, [LOCAL_ARTIFACTS_ROOT_ENV]: overrides.toolCacheRoot } : process.env),
      builtSystemPods: BUILT_NODE_SYSTEM_PODS,
      ...(overrides.toolCacheRoot !== undefined ? { toolCacheRoot: overrides.toolCacheRoot } : {}),
      ...(overrides.upstreamNodeImagePresent !== undefined ? { upstreamNodeImagePresent: overrides.upstreamNodeImagePresent } : {}),
    }),
  );
  const stackId = `${pulumi.getOrganization()}/${pulumi.getProject()}/${pulumi.getStack()}`;
  const artifactsDir = existsSync(config.artifactRoot) ? realpathOr(config.artifactRoot) : config.artifactRoot;

  const cluster = new KindCluster("local", {
    clusterName: plan.local.clusterName,
    workers: plan.local.workers,
    temporalHostPort: plan.local.temporalPort,
    artifactsDir,
    stackId,
    projectDir,
    waitTimeout: LOCAL_DEFAULTS.kindWait,
    platform: facts.platform,
    ...(overrides.toolCacheRoot !== undefined ? { toolCacheRoot: overrides.toolCacheRoot } : {}),
    // Re-derive the quota from the nodes' real allocatable before the ClusterQueue exists.
    capacity: { nodes: plan.quota.nodes.map((n) => n.name), reserved: plan.quota.reserved, quota: plan.quota.quota },
    nodeImage: plan.nodeImage.image,
    kubeadm: {
      ...(plan.nodeImage.built !== undefined ? { imageRepository: plan.nodeImage.built.imageRepository, etcdImageTag: plan.nodeImage.built.etcdImageTag } : {}),
      allowCgroupV1: facts.cgroupV1,
    },
    images: plan.loadImages,
  });
  const provider = cluster.provider;
  const kueue = new Kueue("kueue", {
    provider,
    controller: "in-cluster",
    image: plan.images.refs.kueue,
    configuration: plan.configuration,
    webhookProbe: cluster,
    queue: { resourceFlavor: LOCAL_QUEUES.resourceFlavor, clusterQueue: LOCAL_QUEUES.clusterQueue, nominalQuota: plan.quota.nominalQuota },
    manifests: plan.manifests.kueue,
    queueDependsOn: cluster.capacityCheck !== undefined ? [cluster.capacityCheck] : [],
  });
  // Kueue's pod webhook fails closed in every namespace but kube-system and kueue-system: pods of the other
  // controllers could not be created before it serves.
  const sandbox = new AgentSandbox("agent-sandbox", {
    provider,
    controller: "in-cluster",
    image: plan.images.refs.agentSandbox,
    manifests: plan.manifests.agentSandbox,
    waitFor: kueue.webhookReady,
  });
  const temporal = new Temporal("temporal", {
    provider,
    image: plan.images.refs.temporal,
    nodePort: TEMPORAL_NODE_PORT,
    hostPort: plan.local.temporalPort,
    waitFor: kueue.webhookReady,
  });
  // Named `runtime` (and typed `cohortlab:runtime:Runtime`) since before it was RunNamespace: existing stacks keep their URNs.
  const runNamespace = {
    provider,
    namespace: plan.namespace,
    localQueue: LOCAL_QUEUES.localQueue,
    clusterQueue: LOCAL_QUEUES.clusterQueue,
    localQueueDependsOn: kueue.localQueueReady,
  };
  if (plan.worker !== undefined) {
    const run = new CohortRun("cohort", {
      spec: plan.resolved.spec,
      keepLedgers: config.keepLedgers,
      execution: {
        kind: "clusterWorkflow",
        cluster,
        run: new RunNamespace("runtime", runNamespace),
        worker: {
          image: plan.worker.image,
          files: plan.worker.files,
          // One worker per stack, beside Temporal: a new run rolls it (components/run/worker-manifests.ts).
          workerNamespace: SYSTEM_NAMESPACE,
          temporalAddress: `${TEMPORAL_NAME}.${SYSTEM_NAMESPACE}.svc.cluster.local:${TEMPORAL_GRPC_PORT}`,
          taskQueue: LOCAL_TEMPORAL_TASK_QUEUE,
          runAs: { uid: facts.uid, gid: facts.gid },
          backendSettings: plan.backendOptions.runAsNonRoot === "false" ? { runAsNonRoot: false } : {},
          // The run's stop budget (members, then the ledger), as the runtime Job's deadline counts it.
          terminationGracePeriodSeconds: Math.ceil((2 * parseDurationMs(plan.resolved.spec.stopGracePeriod)) / 1000) + 30,
        },
        temporal: { hostAddress: temporal.hostAddress },
        profile: "local",
        submitter: { runtimeBundlePath: path.join(projectDir, "dist", "cohort.cjs") },
        ledger: { kind: "hostMount", hostDir: artifactsDir, nodePath: ARTIFACTS_NODE_PATH },
        workerDependsOn: [temporal.deployment],
        dependsOn: [...sandbox.ready, kueue.clusterQueue, ...kueue.webhookReady],
      },
    });
    return {
      profile: "local",
      artifactRoot: artifactsDir,
      run: run.summary,
      kubeContext: cluster.kubeContext,
      kubeconfig: cluster.kubeconfig,
      temporalAddress: temporal.hostAddress,
      queues: queueOutputs({ ...LOCAL_QUEUES, temporalTaskQueue: LOCAL_TEMPORAL_TASK_QUEUE }),
    };
  }
  const runtime = new RunNamespace("runtime", {
    ...runNamespace,
    inClusterRuntime: {
      image: plan.images.refs.runtime,
      bundle: plan.bundle,
      specJson: `${JSON.stringify(plan.resolved.spec)}\n`,
      artifactsPath: ARTIFACTS_NODE_PATH,
      profile: "local",
      runAs: { uid: facts.uid, gid: facts.gid },
      activeDeadlineSeconds: plan.jobDeadlineSeconds,
      backendOptions: plan.backendOptions,
    },
  });
  const run = new CohortRun("cohort", {
    spec: plan.resolved.spec,
    keepLedgers: config.keepLedgers,
    execution: {
      kind: "kubernetesJob",
      cluster,
      run: runtime,
      dependsOn: [...sandbox.ready, kueue.clusterQueue, ...kueue.webhookReady, temporal.deployment],
      ledger: { kind: "hostMount", hostDir: artifactsDir, nodePath: ARTIFACTS_NODE_PATH },
    },
  });
  const runOutputs: pulumi.Output<RunOutputs> = run.summary;
  return {
    profile: "local",
    artifactRoot: artifactsDir,
    run: runOutputs,
    kubeContext: cluster.kubeContext,
    kubeconfig: cluster.kubeconfig,
    temporalAddress: temporal.hostAddress,
    queues: queueOutputs(LOCAL_QUEUES),
  };
}

function realpathOr(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/** The `local` profile entry of stacks/profiles.ts. */
export const localProfile: ProfileDefinition = {
  description: "kind on this machine's Docker: Kueue, Agent Sandbox and Temporal in the cluster; members are Sandboxes admitted by Kueue",
  configKeys: ["local", "images"],
  build: (ctx) => buildLocal(ctx),
};

/**
 * The kind cluster configuration of the `local` profile (`kind.x-k8s.io/v1alpha4` `Cluster`), rendered as
 * plain data and YAML. Pure: no I/O. `test/unit/kind-config.test.ts` checks every rendering with kind's own
 * loader and validation (test/tools/kindcheck) at the pinned kind version.
 *
 * Shape (from the public simulator this project descends from, docs/local.md "Pins and why these versions"):
 * - 1 control-plane and `workers` workers, every node on the digest-pinned node image;
 * - every node mounts the host's artifacts directory at {@link ARTIFACTS_NODE_PATH}, so a hostPath volume of
 *   any pod on any node writes into the host directory (the ledger lands on the host);
 * - the control-plane maps the Temporal NodePort to `127.0.0.1:<temporalHostPort>` on the host (kube-proxy
 *   serves a NodePort on every node, the control-plane included);
 * - every node carries two ownership labels (see {@link OWNER_LABELS}) that prove which stack created the
 *   cluster: `components/kind/steps.cjs` adopts an existing cluster of the same name only when both match.
 *
 * @see https://kind.sigs.k8s.io/docs/user/configuration/ (v1alpha4 fields)
 */
import { createHash } from "node:crypto";
import * as YAML from "yaml";
import { CohortLabError } from "../errors.js";

/** Where the artifacts directory is mounted inside every kind node (and where pods find it). */
export const ARTIFACTS_NODE_PATH = "/var/lib/cohort-lab-artifacts";

/** The NodePort of the Temporal frontend Service (30000-32767 is the default NodePort range). */
export const TEMPORAL_NODE_PORT = 30733;

/** Node labels that mark a kind cluster as created by one cohort-lab stack with one configuration. */
export const OWNER_LABELS = {
  /** First 63 hex of SHA-256(`<organization>/<project>/<stack>`). */
  stack: "cohort-lab.dev/stack",
  /** First 63 hex of SHA-256 of the canonical kind config rendered without the owner labels. */
  config: "cohort-lab.dev/kind-config",
} as const;

/** A Kubernetes label value may hold at most 63 characters. */
const LABEL_VALUE_MAX = 63;

/** Inputs of {@link renderKindConfig}. */
export interface KindConfigInput {
  /** Cluster name: `^[a-z0-9.-]+$` (kind's rule), at most 50 characters so `kind-<name>` contexts and node names stay short. */
  readonly clusterName: string;
  /** Node image, `name:tag@sha256:<64 hex>`. */
  readonly nodeImage: string;
  /** Worker count. @default 2 */
  readonly workers?: number;
  /** Absolute host path of the artifacts directory. */
  readonly artifactsHostPath: string;
  /** Loopback host port of the Temporal frontend, 1024-65535. */
  readonly temporalHostPort: number;
  /** Fully qualified stack name, `<organization>/<project>/<stack>` (hashed into a label). */
  readonly stackId: string;
  /**
   * kubeadm and kubelet settings rendered as `kubeadmConfigPatches` (kind merges each into the document of the
   * same `kind`). @default none: the node image's own defaults
   */
  readonly kubeadm?: KindKubeadmSettings;
}

/**
 * What an offline node image and this host need from kubeadm and the kubelet.
 *
 * @see https://kind.sigs.k8s.io/docs/user/configuration/#kubeadm-config-patches
 * @see https://kubernetes.io/docs/reference/config-api/kubeadm-config.v1beta3/ (`imageRepository`, `etcd.local.imageTag`)
 * @see https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/ (`failCgroupV1`)
 */
export interface KindKubeadmSettings {
  /** ClusterConfiguration `imageRepository`: where kubeadm's control-plane images are named, e.g. `offline.invalid`. */
  readonly imageRepository?: string;
  /** ClusterConfiguration `etcd.local.imageTag`, when the node image carries another etcd than kubeadm's default. */
  readonly etcdImageTag?: string;
  /**
   * KubeletConfiguration `failCgroupV1: false`: Kubernetes >= 1.35 defaults it to true and refuses a cgroup v1
   * host. Set only when the host is cgroup v1. @default false (not rendered)
   */
  readonly allowCgroupV1?: boolean;
}

/** One node of the rendered config. */
export interface KindNode {
  readonly role: "control-plane" | "worker";
  readonly image: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly extraMounts: readonly { readonly hostPath: string; readonly containerPath: string }[];
  readonly extraPortMappings?: readonly {
    readonly containerPort: number;
    readonly hostPort: number;
    readonly listenAddress: string;
    readonly protocol: "TCP";
  }[];
}

/** The rendered `Cluster` object. */
export interface KindConfig {
  readonly kind: "Cluster";
  readonly apiVersion: "kind.x-k8s.io/v1alpha4";
  readonly name: string;
  readonly nodes: readonly KindNode[];
  /** YAML documents kind merges into its kubeadm and kubelet configuration. */
  readonly kubeadmConfigPatches?: readonly string[];
}

/** The result of {@link renderKindConfig}. */
export interface RenderedKindConfig {
  readonly config: KindConfig;
  /** The YAML handed to `kind create cluster --config`. */
  readonly yaml: string;
  /** Value of the {@link OWNER_LABELS.stack} label. */
  readonly stackLabel: string;
  /** Value of the {@link OWNER_LABELS.config} label (also the identity that replaces the cluster when it changes). */
  readonly configLabel: string;
}

/** A kind config input was refused. `field` is the input's name. */
export class KindConfigError extends CohortLabError {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`, { propertyPath: field });
    this.name = "KindConfigError";
  }
}

/** kind's cluster name rule (sigs.k8s.io/kind/pkg/internal/apis/config/validate.go `validNameRE`). */
const KIND_NAME_RE = /^[a-z0-9.-]+$/;
const DIGEST_IMAGE_RE = /^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}$/;
/**
 * A node image built here (scripts/local/node-image.ts): a local tag that carries the hash of everything the image
 * was built from, so it names one content exactly; the create step checks its Docker image ID against the stamp.
 */
export const BUILT_NODE_IMAGE_RE = /^cohort-lab\/kind-node:v\d+\.\d+\.\d+-[0-9a-f]{12}$/;
const IMAGE_REPOSITORY_RE = /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$/;
const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

function labelHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, LABEL_VALUE_MAX);
}

/**
 * Validates the inputs (each refusal names the field and the rule).
 *
 * @throws {KindConfigError}
 */
export function validateKindConfigInput(input: KindConfigInput): void {
  if (!KIND_NAME_RE.test(input.clusterName) || input.clusterName.length > 50) {
    throw new KindConfigError("clusterName", `must match ${KIND_NAME_RE.source} and have at most 50 characters (got ${JSON.stringify(input.clusterName)})`);
  }
  if (!DIGEST_IMAGE_RE.test(input.nodeImage) && !BUILT_NODE_IMAGE_RE.test(input.nodeImage)) {
    throw new KindConfigError(
      "nodeImage",
      `must be pinned by digest, name[:tag]@sha256:<64 hex>, or a node image built here (${BUILT_NODE_IMAGE_RE.source}) (got ${JSON.stringify(input.nodeImage)})`,
    );
  }
  const k = input.kubeadm ?? {};
  if (k.imageRepository !== undefined && !IMAGE_REPOSITORY_RE.test(k.imageRepository)) {
    throw new KindConfigError("kubeadm.imageRepository", `must be an image repository such as offline.invalid (got ${JSON.stringify(k.imageRepository)})`);
  }
  if (k.etcdImageTag !== undefined && !TAG_RE.test(k.etcdImageTag)) {
    throw new KindConfigError("kubeadm.etcdImageTag", `must be an image tag (got ${JSON.stringify(k.etcdImageTag)})`);
  }
  const workers = input.workers ?? 2;
  if (!Number.isInteger(workers) || workers < 1 || workers > 16) throw new KindConfigError("workers", `must be an integer from 1 to 16 (got ${workers})`);
  if (!input.artifactsHostPath.startsWith("/") || input.artifactsHostPath.includes("\n")) {
    throw new KindConfigError("artifactsHostPath", `must be an absolute path (got ${JSON.stringify(input.artifactsHostPath)})`);
  }
  if (!Number.isInteger(input.temporalHostPort) || input.temporalHostPort < 1024 || input.temporalHostPort > 65535) {
    throw new KindConfigError("temporalHostPort", `must be an integer from 1024 to 65535 (got ${input.temporalHostPort})`);
  }
  if (input.stackId.trim() === "") throw new KindConfigError("stackId", "must not be empty");
}

/** The `kubeadmConfigPatches` documents for {@link KindKubeadmSettings} (none when nothing is set). */
export function kubeadmPatches(settings: KindKubeadmSettings): string[] {
  const out: string[] = [];
  const cluster: Record<string, unknown> = {};
  if (settings.imageRepository !== undefined) cluster.imageRepository = settings.imageRepository;
  if (settings.etcdImageTag !== undefined) cluster.etcd = { local: { imageTag: settings.etcdImageTag } };
  if (Object.keys(cluster).length > 0) out.push(YAML.stringify({ kind: "ClusterConfiguration", ...cluster }, { lineWidth: 0 }));
  if (settings.allowCgroupV1 === true) out.push(YAML.stringify({ kind: "KubeletConfiguration", failCgroupV1: false }, { lineWidth: 0 }));
  return out;
}

function nodes(input: KindConfigInput, labels: Readonly<Record<string, string>>): KindNode[] {
  const mount = [{ hostPath: input.artifactsHostPath, containerPath: ARTIFACTS_NODE_PATH }];
  const controlPlane: KindNode = {
    role: "control-plane",
    image: input.nodeImage,
    labels,
    extraMounts: mount,
    extraPortMappings: [{ containerPort: TEMPORAL_NODE_PORT, hostPort: input.temporalHostPort, listenAddress: "127.0.0.1", protocol: "TCP" }],
  };
  const workers = Array.from({ length: input.workers ?? 2 }, (): KindNode => ({ role: "worker", image: input.nodeImage, labels, extraMounts: mount }));
  return [controlPlane, ...workers];
}

/**
 * Renders the kind config. The config label is the hash of the config rendered without the owner labels,
 * so it identifies everything kind is asked to build (nodes, image, mounts, ports, name).
 *
 * @throws {KindConfigError} for an invalid input (see {@link validateKindConfigInput})
 */
export function renderKindConfig(input: KindConfigInput): RenderedKindConfig {
  validateKindConfigInput(input);
  const patches = kubeadmPatches(input.kubeadm ?? {});
  const unlabelled: KindConfig = {
    kind: "Cluster",
    apiVersion: "kind.x-k8s.io/v1alpha4",
    name: input.clusterName,
    nodes: nodes(input, {}),
    ...(patches.length > 0 ? { kubeadmConfigPatches: patches } : {}),
  };
  const configLabel = labelHash(JSON.stringify(unlabelled));
  const stackLabel = labelHash(input.stackId);
  const config: KindConfig = {
    ...unlabelled,
    nodes: nodes(input, { [OWNER_LABELS.stack]: stackLabel, [OWNER_LABELS.config]: configLabel }),
  };
  const yaml = `# Rendered by cohort-lab (components/kind/kindConfig.ts); do not edit.\n${YAML.stringify(config, { lineWidth: 0, aliasDuplicateObjects: false })}`;
  return { config, yaml, stackLabel, configLabel };
}

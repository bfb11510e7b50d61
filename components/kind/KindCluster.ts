/**
 * `KindCluster` (token `cohortlab:local:KindCluster`): a kind cluster created and deleted by a
 * `@pulumi/command` `local.Command`, and the Kubernetes provider built from its kubeconfig.
 *
 * - kind and kubectl: the ones `npm run toolchain -- local` built (checked against their stamps' SHA-256 before
 *   every use), or else the pinned official releases (common/pins.ts `local`), downloaded into the tool cache on
 *   first use and checked against their pinned SHA-256 before every use (components/kind/steps.cjs). Downloads
 *   are only for the platforms whose sums are pinned; others are refused before any resource exists.
 * - The kind config (components/kind/kindConfig.ts): 1 control-plane + `workers` workers on the
 *   digest-pinned node image, the artifacts directory mounted into every node at one fixed path, the Temporal
 *   NodePort mapped to a loopback host port (checked free before create).
 * - Create refuses a cluster of the same name (exact name match) unless its nodes carry this stack's owner
 *   labels; delete is idempotent (a cluster deleted out of band is reported and skipped) and deletes only a
 *   cluster this stack provably created.
 * - Identity: the Command's `triggers` are the cluster name and the kind-config hash, so a change of name,
 *   node image, mounts or ports replaces the cluster (delete first: the name is reused). `create` is
 *   idempotent (adoption), so a mere update of the command re-runs it harmlessly.
 * - The kubeconfig is the Command's stdout: a secret output (`additionalSecretOutputs`), never logged
 *   (`logging: "stderr"` shows only the progress on stderr).
 * - The provider: `deleteUnreachable: true` (this profile is ephemeral: after `kind delete cluster` by hand,
 *   `pulumi destroy` drops the cluster's objects from state instead of failing; pulumi-kubernetes#2489 —
 *   never set for long-lived clusters), `clusterIdentifier` = name + kind-config hash (the provider, and with
 *   it every Kubernetes resource, is replaced exactly when the cluster is), server-side apply.
 *
 * @see https://kind.sigs.k8s.io/docs/user/quick-start/
 * @see https://www.pulumi.com/registry/packages/kubernetes/api-docs/provider/
 */
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { cacheRoot, toolDir } from "../../common/paths.js";
import { readStamp } from "../../common/stamp.js";
import { shellQuote } from "../../common/shell.js";
import { local, sim, type BinaryPlatform } from "../../common/pins.js";
import { OWNER_LABELS, renderKindConfig, TEMPORAL_NODE_PORT, type KindKubeadmSettings } from "./kindConfig.js";
import { CohortLabError } from "../errors.js";

/** Arguments of {@link KindCluster}. Plain values: all are checked before any resource exists. */
export interface KindClusterArgs {
  /** kind cluster name (`^[a-z0-9.-]+$`, at most 50 characters); the kube context is `kind-<name>`. */
  readonly clusterName: string;
  /** Worker nodes. @default 2 */
  readonly workers?: number;
  /** Loopback host port the Temporal NodePort is mapped to (1024-65535). @default 7233 */
  readonly temporalHostPort?: number;
  /** Absolute host path of the artifacts directory (created by the create step if missing). */
  readonly artifactsDir: string;
  /** Fully qualified stack name `<organization>/<project>/<stack>`, hashed into the owner label. */
  readonly stackId: string;
  /** Project directory (holds components/kind/steps.cjs); the commands run there. */
  readonly projectDir: string;
  /** `kind create cluster --wait` (Go duration). @default "5m" */
  readonly waitTimeout?: string;
  /** Node binary that runs the step script. @default process.execPath */
  readonly nodePath?: string;
  /** `${process.platform}-${process.arch}`. @default this machine's */
  readonly platform?: string;
  /** Tool cache root. @default cacheRoot() (common/paths.ts) */
  readonly toolCacheRoot?: string;
  /**
   * The quota derived at program time (components/k8s/quota.ts), to re-derive from the nodes' real allocatable once
   * the cluster exists: a `<name>-capacity` Command fails when the workers hold less. @default no check
   */
  readonly capacity?: CapacityPlan;
  /** The node image of every node. @default the pinned upstream kindest/node digest ({@link pinnedNodeImage}) */
  readonly nodeImage?: NodeImage;
  /** kubeadm/kubelet settings the node image and this host need (rendered as kubeadmConfigPatches). @default none */
  readonly kubeadm?: KindKubeadmSettings;
  /**
   * Images to make resolvable by digest in every node once the cluster exists (no registry: loaded from their
   * archives by the `<name>-images` Command, which re-runs when a digest changes). @default none
   */
  readonly images?: readonly ClusterImage[];
}

/** The node image kind runs. */
export interface NodeImage {
  /** `name[:tag]@sha256:<64 hex>` (upstream, pulled by Docker) or a built node image's content-addressed tag. */
  readonly ref: string;
  /** Built images only: the Docker image ID (`sha256:<64 hex>`) the create step checks before kind runs. */
  readonly imageId?: string;
  /** Built images only: the `docker save` archive the create step loads when Docker lost the image. */
  readonly archive?: string;
}

/** An image made resolvable by digest in the nodes (see {@link KindClusterArgs.images}). */
export interface ClusterImage {
  /** `repository:tag` as the archive names it. */
  readonly ref: string;
  /** `sha256:<64 hex>`: the manifest digest the nodes' containerd computes for the archive. */
  readonly digest: string;
  /** Absolute path of the `docker save` archive. */
  readonly archive: string;
}

/** What the capacity check compares (base units: millicores, bytes). */
export interface CapacityPlan {
  /** Names of the nodes the quota counts (the workers). */
  readonly nodes: readonly string[];
  readonly reserved: { readonly cpuMilli: number; readonly memoryBytes: number };
  readonly quota: { readonly cpuMilli: number; readonly memoryBytes: number };
}

/** The machine's platform has no pinned kind/kubectl SHA-256. */
export class UnsupportedPlatformError extends CohortLabError {
  constructor(platform: string) {
    const known = Object.keys(local.kind.platforms).join(", ");
    super(
      `the local profile runs kind and kubectl only where their SHA-256 is pinned (common/pins.ts: ${known}); this machine is ${platform}. ` +
        "The sums for other platforms are not known here and are never invented: add them to common/pins.ts from the official release pages to support it",
    );
    this.name = "UnsupportedPlatformError";
  }
}

/** The pinned tools as the step script needs them (paths in the tool cache, URLs, SHA-256). */
export interface LocalTools {
  readonly kind: string;
  readonly kubectl: string;
  /** Environment entries `COHORT_KIND_*` and `COHORT_KUBECTL_*` for components/kind/steps.cjs. */
  readonly environment: Readonly<Record<string, string>>;
}

/** A binary the toolchain built, from its tool directory's stamp: path and SHA-256, or undefined when not built. */
function builtBinary(root: string, tool: string, version: string, binary: string): { path: string; sha256: string } | undefined {
  const dir = toolDir(root, tool, version);
  const entry = readStamp(dir)?.binaries[binary];
  return entry === undefined ? undefined : { path: path.join(dir, entry.path), sha256: entry.sha256 };
}

/**
 * Resolves kind and kubectl: the ones `npm run toolchain -- local` built from the Go module proxy (kind at the
 * pinned version, kubectl from the Kubernetes release the node image carries) when their stamps exist, checked
 * against the stamps' SHA-256 before every use; otherwise the pinned official downloads, checked against the
 * pinned SHA-256 (`COHORT_TOOLCHAIN_SOURCE=build` refuses those).
 *
 * @throws {UnsupportedPlatformError} when nothing is built and the platform has no pinned SHA-256
 * @throws {pulumi.RunError} when nothing is built and `COHORT_TOOLCHAIN_SOURCE=build`
 */
export function localTools(platform: string, root: string, env: NodeJS.ProcessEnv = process.env): LocalTools {
  // The toolchain builds for the machine it runs on: built binaries serve only this process's platform.
  const here = platform === `${process.platform}-${process.arch}`;
  const kindBuilt = here ? builtBinary(root, "kind", local.kind.version, "kind") : undefined;
  const kubectlBuilt = here ? builtBinary(root, "kubernetes-node", sim.kubernetes.goModuleVersion, "kubectl") : undefined;
  if (kindBuilt !== undefined && kubectlBuilt !== undefined) {
    return {
      kind: kindBuilt.path,
      kubectl: kubectlBuilt.path,
      environment: {
        COHORT_KIND_BIN: kindBuilt.path,
        COHORT_KIND_URL: "",
        COHORT_KIND_SHA256: kindBuilt.sha256,
        COHORT_KUBECTL_BIN: kubectlBuilt.path,
        COHORT_KUBECTL_URL: "",
        COHORT_KUBECTL_SHA256: kubectlBuilt.sha256,
      },
    };
  }
  if (env.COHORT_TOOLCHAIN_SOURCE === "build") {
    throw new pulumi.RunError("kind and kubectl are not built and COHORT_TOOLCHAIN_SOURCE=build refuses downloads: run `npm run toolchain -- local`");
  }
  if (!Object.hasOwn(local.kind.platforms, platform) || !Object.hasOwn(local.kubectl.platforms, platform)) {
    throw new UnsupportedPlatformError(platform);
  }
  const p = platform as BinaryPlatform;
  const kind = path.join(toolDir(root, "kind", local.kind.version), "bin", "kind");
  const kubectl = path.join(toolDir(root, "kubectl", local.kubectl.version), "bin", "kubectl");
  return {
    kind,
    kubectl,
    environment: {
      COHORT_KIND_BIN: kind,
      COHORT_KIND_URL: local.kind.platforms[p].url,
      COHORT_KIND_SHA256: local.kind.platforms[p].sha256,
      COHORT_KUBECTL_BIN: kubectl,
      COHORT_KUBECTL_URL: local.kubectl.platforms[p].url,
      COHORT_KUBECTL_SHA256: local.kubectl.platforms[p].sha256,
    },
  };
}

/**
 * The program entry of the host-side steps, relative to the project directory: a stable path (it is stored in
 * every local stack's state as part of the steps' create and delete commands, so moving it would update every
 * existing stack); it runs components/kind/steps.cjs.
 */
export const STEPS_ENTRY = "scripts/local-profile.cjs";

/** A step of components/kind/steps.cjs. */
export type KindStep =
  | "create"
  | "delete"
  | "webhook-probe"
  | "run-summary"
  | "run-progress"
  | "run-forget"
  | "capacity-check"
  | "load-images"
  | "worker-guard"
  | "run-identity"
  | "run-submit"
  | "run-keep";

/** The command line of one step of components/kind/steps.cjs (run with `dir` = the project directory). */
export function stepCommand(nodePath: string, step: KindStep): string {
  return `${shellQuote(nodePath)} ${STEPS_ENTRY} ${step}`;
}

/** How a `command:local:Command` runs one host-side step against a {@link KindCluster} ({@link KindCluster.hostStep}). */
export interface KindHostStep {
  /** The step's command line. */
  readonly command: string;
  /** The project directory (the command's `dir`). */
  readonly dir: string;
  /** The pinned tools' `COHORT_KIND_*`/`COHORT_KUBECTL_*` entries; the caller adds the step's own. */
  readonly environment: Readonly<Record<string, string>>;
}

/** One server-side dry-run create of {@link KindCluster.webhookProbe} (components/kind/steps.cjs `webhook-probe`). */
export interface WebhookProbe {
  /** What the probe proves, for messages. */
  readonly name: string;
  readonly manifest: unknown;
  /** A scheduling gate the dry-run object must come back with (a mutating webhook's work). */
  readonly expectSchedulingGate?: string;
}

/** The kind node image reference from the pins. */
export function pinnedNodeImage(): string {
  return `${local.nodeImage.repository}:${local.nodeImage.tag}@${local.nodeImage.digest}`;
}

/**
 * A kind cluster and its Kubernetes provider.
 *
 * Children: `<name>-kind` (`command:local:Command`), `<name>-provider` (`pulumi:providers:kubernetes`).
 */
export class KindCluster extends pulumi.ComponentResource {
  /** The Kubernetes provider of this cluster; pass it explicitly to every Kubernetes resource. */
  public readonly provider: k8s.Provider;
  /** The kubeconfig (a Pulumi secret). */
  public readonly kubeconfig: pulumi.Output<string>;
  /** `kind-<clusterName>`: the context kind writes into the user's kubeconfig. */
  public readonly kubeContext: pulumi.Output<string>;
  public readonly clusterName: string;
  /** The Command that creates and deletes the cluster. */
  public readonly cluster: command.local.Command;
  /** Loopback host port of the Temporal NodePort. */
  public readonly temporalHostPort: number;
  /** The NodePort mapped to {@link temporalHostPort}. */
  public readonly temporalNodePort: number;
  /** Absolute host path of the artifacts directory. */
  public readonly artifactsDir: string;
  /** The capacity check (when `capacity` was given): depend on it before creating the ClusterQueue. */
  public readonly capacityCheck?: command.local.Command;
  /** The image load (when `images` were given): depend on it before any pod uses one of them. */
  public readonly imagesLoaded?: command.local.Command;
  /** Node binary and project directory the step commands use, and the pinned tools' environment. */
  private readonly nodePath: string;
  private readonly projectDir: string;
  private readonly tools: LocalTools;

  constructor(name: string, args: KindClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    const platform = args.platform ?? `${process.platform}-${process.arch}`;
    const tools = localTools(platform, args.toolCacheRoot ?? cacheRoot());
    if (!path.isAbsolute(args.artifactsDir)) {
      throw new pulumi.InputPropertyError({
        propertyPath: "artifactsDir",
        reason: `KindCluster ${name}: artifactsDir must be absolute (got ${JSON.stringify(args.artifactsDir)})`,
      });
    }
    const temporalHostPort = args.temporalHostPort ?? 7233;
    const nodeImage = args.nodeImage ?? { ref: pinnedNodeImage() };
    const rendered = renderKindConfig({
      clusterName: args.clusterName,
      nodeImage: nodeImage.ref,
      ...(args.kubeadm !== undefined ? { kubeadm: args.kubeadm } : {}),
      workers: args.workers ?? 2,
      artifactsHostPath: args.artifactsDir,
      temporalHostPort,
      stackId: args.stackId,
    });
    super("cohortlab:local:KindCluster", name, {}, opts);

    const nodePath = args.nodePath ?? process.execPath;
    this.nodePath = nodePath;
    this.projectDir = args.projectDir;
    this.tools = tools;
    this.cluster = new command.local.Command(
      `${name}-kind`,
      {
        create: stepCommand(nodePath, "create"),
        delete: stepCommand(nodePath, "delete"),
        dir: args.projectDir,
        environment: {
          ...tools.environment,
          COHORT_CLUSTER_NAME: args.clusterName,
          COHORT_KIND_CONFIG: rendered.yaml,
          COHORT_OWNER_LABELS: JSON.stringify(OWNER_LABELS),
          COHORT_STACK_LABEL: rendered.stackLabel,
          COHORT_CONFIG_LABEL: rendered.configLabel,
          COHORT_ARTIFACTS_DIR: args.artifactsDir,
          COHORT_TEMPORAL_PORT: String(temporalHostPort),
          COHORT_KIND_WAIT: args.waitTimeout ?? "5m",
          ...(nodeImage.imageId !== undefined
            ? { COHORT_NODE_IMAGE: nodeImage.ref, COHORT_NODE_IMAGE_ID: nodeImage.imageId, COHORT_NODE_IMAGE_ARCHIVE: nodeImage.archive ?? "" }
            : {}),
        },
        triggers: [args.clusterName, rendered.configLabel],
        // The kubeconfig is stdout; only stderr (progress) is logged. No previous stdout in the env of later steps.
        logging: "stderr",
        addPreviousOutputInEnv: false,
      },
      { parent: this, additionalSecretOutputs: ["stdout"], deleteBeforeReplace: true },
    );
    this.kubeconfig = pulumi.secret(this.cluster.stdout);
    if (args.images !== undefined && args.images.length > 0) {
      const images = args.images.map((i) => ({ ref: i.ref, digest: i.digest, archive: i.archive }));
      this.imagesLoaded = new command.local.Command(
        `${name}-images`,
        {
          create: stepCommand(nodePath, "load-images"),
          dir: args.projectDir,
          environment: { ...tools.environment, COHORT_CLUSTER_NAME: args.clusterName, COHORT_IMAGES: JSON.stringify(images) },
          // The cluster's kubeconfig is new whenever the cluster is (its CA and port): a cluster recreated by an
          // update of the kind Command, not a replacement, gets its images loaded again.
          triggers: [rendered.configLabel, this.kubeconfig, ...images.map((i) => `${i.ref}@${i.digest}`)],
          addPreviousOutputInEnv: false,
          logging: "stderr",
        },
        { parent: this, dependsOn: [this.cluster] },
      );
    }
    this.provider = new k8s.Provider(
      `${name}-provider`,
      {
        kubeconfig: this.kubeconfig,
        context: `kind-${args.clusterName}`,
        clusterIdentifier: `kind-${args.clusterName}-${rendered.configLabel.slice(0, 16)}`,
        deleteUnreachable: true,
        enableServerSideApply: true,
      },
      // Every Kubernetes object waits for the images: a pod created before its image is loaded would sit in
      // ImagePullBackOff (no registry) and retry with growing back-off.
      { parent: this, dependsOn: [this.cluster, ...(this.imagesLoaded !== undefined ? [this.imagesLoaded] : [])] },
    );
    if (args.capacity !== undefined) {
      this.capacityCheck = new command.local.Command(
        `${name}-capacity`,
        {
          create: stepCommand(nodePath, "capacity-check"),
          dir: args.projectDir,
          environment: { ...tools.environment, COHORT_KUBECONFIG: this.kubeconfig, COHORT_CAPACITY: JSON.stringify(args.capacity) },
          triggers: [JSON.stringify(args.capacity), rendered.configLabel],
          addPreviousOutputInEnv: false,
          logging: "stderr",
        },
        { parent: this, dependsOn: [this.cluster] },
      );
    }
    this.kubeContext = pulumi.output(`kind-${args.clusterName}`);
    this.clusterName = args.clusterName;
    this.temporalHostPort = temporalHostPort;
    this.temporalNodePort = TEMPORAL_NODE_PORT;
    this.artifactsDir = args.artifactsDir;
    this.registerOutputs({
      provider: this.provider,
      kubeconfig: this.kubeconfig,
      kubeContext: this.kubeContext,
      clusterName: this.clusterName,
      cluster: this.cluster,
      temporalHostPort: this.temporalHostPort,
      temporalNodePort: this.temporalNodePort,
      artifactsDir: this.artifactsDir,
      capacityCheck: this.capacityCheck,
      imagesLoaded: this.imagesLoaded,
    });
  }

  /**
   * How a Command runs `step` of components/kind/steps.cjs on this host against this cluster: the command line,
   * the project directory and the pinned tools' environment (the caller adds `COHORT_KUBECONFIG` and the step's
   * own entries).
   */
  public hostStep(step: KindStep): KindHostStep {
    return { command: stepCommand(this.nodePath, step), dir: this.projectDir, environment: this.tools.environment };
  }

  /**
   * A webhook gate: a Command (`name`, with `opts`: the caller's parent and the install it waits for) that sends
   * `probes` as server-side dry-run creates through the API server until every one is accepted (components/kind/steps.cjs
   * `webhook-probe`). A Deployment can be Ready before the API server can call its webhooks (the CA bundle is
   * injected asynchronously); depend on the returned Command before creating custom resources.
   *
   * @param o.triggers - what re-runs the probes (e.g. the manager's object)
   * @param o.timeoutMs - how long the probes may take
   */
  public webhookProbe(
    name: string,
    o: { readonly probes: readonly WebhookProbe[]; readonly triggers: readonly unknown[]; readonly timeoutMs: number },
    opts: pulumi.CustomResourceOptions,
  ): command.local.Command {
    const step = this.hostStep("webhook-probe");
    return new command.local.Command(
      name,
      {
        create: step.command,
        dir: step.dir,
        environment: {
          ...step.environment,
          COHORT_KUBECONFIG: pulumi.secret(this.kubeconfig),
          COHORT_PROBES: JSON.stringify(o.probes),
          COHORT_PROBE_TIMEOUT_MS: String(o.timeoutMs),
        },
        triggers: [...o.triggers],
        addPreviousOutputInEnv: false,
      },
      opts,
    );
  }
}

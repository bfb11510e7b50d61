/**
 * Kueue's install objects and queue objects, rendered as plain data (pure; no Pulumi, no I/O).
 *
 * {@link renderKueueInstall} starts from the release's own `manifests.yaml` (components/k8s/manifests/cache.ts)
 * and changes only what the profile needs:
 * - the manager image: the pinned digest when known (`repository:tag@sha256:…`), the release tag otherwise
 *   (preview only: `pulumi up` refuses an image without a digest before creating anything);
 * - `imagePullPolicy: IfNotPresent` instead of `Always`: a digest names immutable content, and `Always` would
 *   need a registry round-trip on every start, which fails for images loaded with `kind load` on an offline host;
 * - the manager's `Configuration` ({@link renderKueueConfiguration}) in the `kueue-manager-config` ConfigMap, and
 *   its SHA-256 as a pod-template annotation of the manager ({@link KUEUE_CONFIG_SHA256_ANNOTATION}), so a changed
 *   Configuration rolls the manager (it reads the file once, at start);
 * - `controller: "external"` (the `sim` profile runs the manager as a local process): no Deployment, no
 *   Services that select its pods, no visibility APIServices, no ConfigMap; the webhook Service becomes
 *   `type: ExternalName` → `localhost`, and every webhook and CRD-conversion `clientConfig.service.port`
 *   becomes the local process's port. kube-apiserver resolves an ExternalName service to
 *   `https://<externalName>:<port>` and still verifies the serving cert for `<service>.<namespace>.svc`, which
 *   Kueue's internal cert manager issues. This is the transformation kwokctl applies to Kueue
 *   (https://github.com/kubernetes-sigs/kwok/blob/main/pkg/kwokctl/components/kueue_manifest.go).
 *
 * {@link renderResourceFlavor}, {@link renderClusterQueue} and {@link renderLocalQueue} render the queue objects
 * (`kueue.x-k8s.io/v1beta2`); `test/unit/crd-schema.test.ts` validates them against the pinned CRDs' schemas.
 *
 * @see https://kueue.sigs.k8s.io/docs/reference/kueue-config.v1beta2/ (Configuration)
 * @see https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/ (ClusterQueue)
 */
import { createHash } from "node:crypto";
import * as YAML from "yaml";
import type { KubernetesObject } from "./cache.js";
import { CohortLabError } from "../../errors.js";

/** Namespace of the Kueue release (kustomize `namespace:` of config/default). */
export const KUEUE_NAMESPACE = "kueue-system";
/** Pod-template annotation of the Kueue manager that carries the SHA-256 of its Configuration. */
export const KUEUE_CONFIG_SHA256_ANNOTATION = "cohort-lab.dev/kueue-config-sha256";

/** The release's manager Deployment, container and config objects. */
export const KUEUE_DEPLOYMENT = "kueue-controller-manager";
export const KUEUE_CONTAINER = "manager";
export const KUEUE_CONFIG_MAP = "kueue-manager-config";
export const KUEUE_CONFIG_KEY = "controller_manager_config.yaml";
/** The release's webhook Service and cert Secret (internal cert management writes the Secret). */
export const KUEUE_WEBHOOK_SERVICE = "kueue-webhook-service";
export const KUEUE_WEBHOOK_SECRET = "kueue-webhook-server-cert";
/** The API group and version of the queue objects. */
export const KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2";

/** How the Kueue manager runs. */
export type ControllerMode = "in-cluster" | "external";

/** Kueue's `waitForPodsReady` block. */
export interface WaitForPodsReady {
  /** Admitted workload → all pods Ready within this, else evicted. Go duration, e.g. `"21m"`. */
  readonly timeout: string;
  /** @default false */
  readonly blockAdmission: boolean;
  readonly requeuingStrategy: {
    readonly timestamp: "Eviction" | "Creation";
    /** Evictions before the workload is deactivated; 0 = deactivate on the first eviction. */
    readonly backoffLimitCount: number;
  };
}

/** What the profile decides about Kueue's Configuration. */
export interface KueueConfigurationInput {
  readonly waitForPodsReady: WaitForPodsReady;
  /** Namespaces whose pods Kueue never manages (`managedJobsNamespaceSelector` NotIn). */
  readonly excludedNamespaces: readonly string[];
  /** `integrations.frameworks`. @default ["pod"] */
  readonly frameworks?: readonly string[];
}

/**
 * The Kueue Configuration choices every cluster profile makes (the ONE place they are written):
 * - `requeuingStrategy`: the runtime fails the run when its Workload is evicted, so a requeue would only restart a
 *   half-started society: deactivate on the first eviction (`backoffLimitCount: 0`);
 * - `blockAdmission: false`: the whole roster is ONE Workload (a pod group), and the quota is derived so that an
 *   admitted roster can schedule.
 *
 * @param o.waitForPodsReadyTimeout - Go duration; the stacks pass the cohort's startupTimeout + 1m. @default "5m"
 * @param o.excludedNamespaces - namespaces Kueue never manages (must include kube-system and kueue-system)
 * @param o.frameworks - `integrations.frameworks`. @default ["pod"]
 */
export function kueueConfiguration(o: {
  readonly waitForPodsReadyTimeout?: string;
  readonly excludedNamespaces: readonly string[];
  readonly frameworks?: readonly string[];
}): KueueConfigurationInput {
  return {
    waitForPodsReady: { timeout: o.waitForPodsReadyTimeout ?? "5m", blockAdmission: false, requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: 0 } },
    excludedNamespaces: o.excludedNamespaces,
    frameworks: o.frameworks ?? ["pod"],
  };
}

/** Names of the ClusterQueue and the LocalQueue of every cluster profile (each profile names its own ResourceFlavor). */
export const COHORT_QUEUES = { clusterQueue: "cohort-lab", localQueue: "cohort" } as const;

/** A profile's queue object names: its ResourceFlavor and {@link COHORT_QUEUES}. */
export function cohortQueueNames<F extends string>(resourceFlavor: F): { readonly resourceFlavor: F; readonly clusterQueue: "cohort-lab"; readonly localQueue: "cohort" } {
  return { resourceFlavor, ...COHORT_QUEUES };
}

/** Options of {@link renderKueueInstall}. */
export interface KueueInstallOptions {
  readonly controller: ControllerMode;
  /** Manager image reference (in-cluster). */
  readonly image: string;
  readonly configuration: KueueConfigurationInput;
  /** `controller: "external"`: the port the local manager's webhook server listens on. */
  readonly externalWebhookPort?: number;
}

/** A rendering refusal: the upstream manifests do not have the shape this renderer relies on. */
export class ManifestShapeError extends CohortLabError {
  constructor(message: string) {
    super(message);
    this.name = "ManifestShapeError";
  }
}

type Mutable = { [key: string]: unknown };

function clone<T>(value: T): T {
  return structuredClone(value);
}

function find(objects: readonly KubernetesObject[], kind: string, name: string): KubernetesObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (found === undefined) throw new ManifestShapeError(`the Kueue manifests have no ${kind} ${name}`);
  return found;
}

/**
 * The manager's Configuration: the release's own (from its ConfigMap) with `integrations.frameworks`,
 * `waitForPodsReady`, `managedJobsNamespaceSelector` and `internalCertManagement` set by the profile.
 *
 * Why these values:
 * - `frameworks` (default `["pod"]`): members are Agent Sandbox `Sandbox` pods, which Kueue handles through its
 *   plain-pod integration (there is no Sandbox integration; Kueue docs "Run A Sandbox"); each enabled framework
 *   adds webhooks and watches. A profile whose runtime is a Job in a managed namespace also needs `batch/job`
 *   (stacks/local.ts `LOCAL_KUEUE_FRAMEWORKS` says why).
 * - `managedJobsNamespaceSelector`: Kueue refuses a pod integration without one, and it must exclude
 *   kube-system and its own namespace (pkg/config/validation.go); the profile's system namespaces are excluded too.
 * - `internalCertManagement.enable: true` (the release default, made explicit): no cert-manager needed.
 *
 * @param upstream - the release's objects (the ConfigMap `kueue-manager-config` is read from them)
 * @throws {ManifestShapeError} when the ConfigMap or its key is missing
 */
export function renderKueueConfiguration(upstream: readonly KubernetesObject[], input: KueueConfigurationInput): Mutable {
  const cm = find(upstream, "ConfigMap", KUEUE_CONFIG_MAP) as KubernetesObject & { data?: Record<string, string> };
  const text = cm.data?.[KUEUE_CONFIG_KEY];
  if (text === undefined) throw new ManifestShapeError(`the Kueue ConfigMap ${KUEUE_CONFIG_MAP} has no ${KUEUE_CONFIG_KEY}`);
  const config = YAML.parse(text) as Mutable;
  if (config.kind !== "Configuration" || config.apiVersion !== "config.kueue.x-k8s.io/v1beta2") {
    throw new ManifestShapeError(
      `the Kueue Configuration in ${KUEUE_CONFIG_MAP} is ${String(config.apiVersion)}/${String(config.kind)}, expected config.kueue.x-k8s.io/v1beta2 Configuration`,
    );
  }
  return {
    ...config,
    internalCertManagement: { enable: true, webhookServiceName: KUEUE_WEBHOOK_SERVICE, webhookSecretName: KUEUE_WEBHOOK_SECRET },
    waitForPodsReady: {
      timeout: input.waitForPodsReady.timeout,
      blockAdmission: input.waitForPodsReady.blockAdmission,
      requeuingStrategy: { ...input.waitForPodsReady.requeuingStrategy },
    },
    managedJobsNamespaceSelector: {
      matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: [...input.excludedNamespaces] }],
    },
    integrations: { frameworks: [...(input.frameworks ?? ["pod"])] },
  };
}

function setWebhookPorts(obj: Mutable, port: number): void {
  const webhooks = obj.webhooks as Mutable[] | undefined;
  for (const hook of webhooks ?? []) {
    const service = (hook.clientConfig as Mutable | undefined)?.service as Mutable | undefined;
    if (service !== undefined) service.port = port;
  }
}

/**
 * Renders the Kueue install objects in apply order (Namespace first, Deployment and APIServices last).
 *
 * @throws {ManifestShapeError} when an object the transformation needs is missing, or when
 *   `controller: "external"` has no `externalWebhookPort`
 */
export function renderKueueInstall(upstream: readonly KubernetesObject[], options: KueueInstallOptions): KubernetesObject[] {
  const external = options.controller === "external";
  const port = options.externalWebhookPort;
  if (external && (port === undefined || !Number.isInteger(port) || port < 1 || port > 65535)) {
    throw new ManifestShapeError(`controller "external" needs externalWebhookPort, an integer from 1 to 65535 (got ${String(port)})`);
  }
  const configuration = renderKueueConfiguration(upstream, options.configuration);
  const deployment = find(upstream, "Deployment", KUEUE_DEPLOYMENT);
  const selector = ((deployment.spec as Mutable).selector as Mutable).matchLabels as Record<string, string>;
  const selectsManager = (o: KubernetesObject) => {
    const s = (o.spec as Mutable | undefined)?.selector as Record<string, string> | undefined;
    return s !== undefined && Object.entries(selector).every(([k, v]) => s[k] === v);
  };

  const configText = YAML.stringify(configuration, { lineWidth: 0 });
  const out: KubernetesObject[] = [];
  for (const original of upstream) {
    const obj = clone(original) as unknown as Mutable & KubernetesObject;
    const kind = obj.kind;
    const name = obj.metadata.name;
    if (external) {
      if (kind === "Deployment" || kind === "APIService" || (kind === "ConfigMap" && name === KUEUE_CONFIG_MAP)) continue;
      if (kind === "Service" && name !== KUEUE_WEBHOOK_SERVICE && selectsManager(obj)) continue;
    }
    if (kind === "ConfigMap" && name === KUEUE_CONFIG_MAP) {
      (obj.data as Mutable)[KUEUE_CONFIG_KEY] = configText;
    }
    if (kind === "Deployment" && name === KUEUE_DEPLOYMENT) {
      const containers = ((obj.spec as Mutable).template as { spec: { containers: Mutable[] } }).spec.containers;
      const manager = containers.find((c) => c.name === KUEUE_CONTAINER);
      if (manager === undefined) throw new ManifestShapeError(`the Kueue Deployment has no container ${KUEUE_CONTAINER}`);
      manager.image = options.image;
      manager.imagePullPolicy = "IfNotPresent";
      // The manager reads its Configuration once, at start: a changed Configuration must roll the pod (the
      // pod template changes with it), or the old one stays in force (Helm's "checksum/config" pattern).
      const template = (obj.spec as Mutable).template as { metadata?: { annotations?: Record<string, string> } };
      template.metadata = {
        ...(template.metadata ?? {}),
        annotations: { ...(template.metadata?.annotations ?? {}), [KUEUE_CONFIG_SHA256_ANNOTATION]: createHash("sha256").update(configText).digest("hex") },
      };
    }
    if (external && kind === "Service" && name === KUEUE_WEBHOOK_SERVICE) {
      const ports = ((obj.spec as Mutable).ports as Mutable[] | undefined) ?? [];
      obj.spec = {
        type: "ExternalName",
        externalName: "localhost",
        ports: ports.map((p) => ({ ...p, port: port!, targetPort: port! })),
      };
    }
    if (external && (kind === "MutatingWebhookConfiguration" || kind === "ValidatingWebhookConfiguration")) setWebhookPorts(obj, port!);
    if (external && kind === "CustomResourceDefinition") {
      const service = (((obj.spec as Mutable).conversion as Mutable | undefined)?.webhook as Mutable | undefined)?.clientConfig as Mutable | undefined;
      const svc = service?.service as Mutable | undefined;
      if (svc !== undefined) svc.port = port!;
    }
    out.push(obj);
  }
  const rank = (o: KubernetesObject) => (o.kind === "Namespace" ? 0 : o.kind === "CustomResourceDefinition" ? 1 : o.kind === "Deployment" ? 3 : o.kind === "APIService" ? 4 : 2);
  return out
    .map((o, i) => ({ o, i }))
    .sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i)
    .map(({ o }) => o);
}

/** Inputs of {@link renderResourceFlavor}. */
export interface ResourceFlavorInput {
  readonly name: string;
  /** Labels the admitted pods are pinned to (injected as nodeSelector). @default none */
  readonly nodeLabels?: Readonly<Record<string, string>>;
  /** Tolerations injected into admitted pods (e.g. for a tainted agent pool). @default none */
  readonly tolerations?: readonly {
    readonly key: string;
    readonly operator: "Equal" | "Exists";
    readonly value?: string;
    readonly effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  }[];
}

/** A `ResourceFlavor`. */
export function renderResourceFlavor(input: ResourceFlavorInput): KubernetesObject {
  return {
    apiVersion: KUEUE_API_VERSION,
    kind: "ResourceFlavor",
    metadata: { name: input.name },
    spec: {
      ...(input.nodeLabels !== undefined && Object.keys(input.nodeLabels).length > 0 ? { nodeLabels: { ...input.nodeLabels } } : {}),
      ...(input.tolerations !== undefined && input.tolerations.length > 0 ? { tolerations: input.tolerations.map((t) => ({ ...t })) } : {}),
    },
  };
}

/** Inputs of {@link renderClusterQueue}. */
export interface ClusterQueueInput {
  readonly name: string;
  readonly flavor: string;
  /** `nominalQuota` per covered resource, Kubernetes quantities (from components/k8s/quota.ts). */
  readonly nominalQuota: { readonly cpu: string; readonly memory: string };
}

/**
 * A `ClusterQueue` covering `cpu` and `memory` with one flavor. `namespaceSelector: {}` admits from every
 * namespace (a `null` selector would admit from none); `queueingStrategy: BestEffortFIFO` (the default, explicit).
 */
export function renderClusterQueue(input: ClusterQueueInput): KubernetesObject {
  return {
    apiVersion: KUEUE_API_VERSION,
    kind: "ClusterQueue",
    metadata: { name: input.name },
    spec: {
      namespaceSelector: {},
      queueingStrategy: "BestEffortFIFO",
      resourceGroups: [
        {
          coveredResources: ["cpu", "memory"],
          flavors: [
            {
              name: input.flavor,
              resources: [
                { name: "cpu", nominalQuota: input.nominalQuota.cpu },
                { name: "memory", nominalQuota: input.nominalQuota.memory },
              ],
            },
          ],
        },
      ],
    },
  };
}

/** A `LocalQueue` in a run namespace, pointing at the ClusterQueue. */
export function renderLocalQueue(input: { readonly name: string; readonly namespace: string; readonly clusterQueue: string }): KubernetesObject {
  return {
    apiVersion: KUEUE_API_VERSION,
    kind: "LocalQueue",
    metadata: { name: input.name, namespace: input.namespace },
    spec: { clusterQueue: input.clusterQueue },
  };
}

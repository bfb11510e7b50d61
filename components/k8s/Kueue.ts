/**
 * `Kueue` (token `cohortlab:k8s:Kueue`): the pinned Kueue release applied server-side, a readiness gate for
 * its webhooks, and the profile's ResourceFlavor and ClusterQueue.
 *
 * - Install objects: the release's `manifests.yaml` (components/k8s/manifests/cache.ts), transformed by
 *   components/k8s/manifests/kueue.ts (image pinned by digest, the profile's Configuration, or the `external`
 *   controller wiring). One typed resource per object, each with the explicit provider. Order: Namespace →
 *   everything else → the manager Deployment (awaited by pulumi-kubernetes: rolled out and Ready, and Kueue's
 *   readiness probe passes only once its webhook server serves) → the visibility APIServices.
 * - Webhook gate (`in-cluster`): a Command of the cluster ({@link WebhookProber}, `KindCluster.webhookProbe`) that
 *   sends server-side dry-run creates through the API server: a `v1beta1` LocalQueue (CRD conversion webhook), a
 *   ResourceFlavor (validating webhook) and a Pod with a queue name that must come back with Kueue's
 *   scheduling gate (pod mutating webhook). A Deployment can be Ready before the API server can call it (the
 *   CA bundle is injected asynchronously); custom resources created then fail (pulumi/pulumi-kubernetes#1712, #3176).
 *   `external` (the `sim` profile): the caller passes `webhookReady` — resources, or a function of the install
 *   resources returning them (e.g. the local manager's start and readiness steps, which need the CRDs first).
 * - Custom resources (ResourceFlavor, ClusterQueue) depend on their CRDs AND the webhook gate, so a single
 *   `pulumi up` on an empty cluster never meets "no matches for kind" or a webhook that is not serving.
 *
 * @see https://kueue.sigs.k8s.io/docs/installation/#install-a-released-version
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { createObject, objectKey } from "./k8sObject.js";
import { applyRelease } from "./release.js";
import { loadManifests, KUEUE_MANIFESTS, type KubernetesObject } from "./manifests/cache.js";
import {
  KUEUE_API_VERSION,
  KUEUE_DEPLOYMENT,
  ManifestShapeError,
  renderClusterQueue,
  renderKueueInstall,
  renderResourceFlavor,
  type ControllerMode,
  type KueueConfigurationInput,
  type ResourceFlavorInput,
} from "./manifests/kueue.js";

/** What runs the in-cluster webhook gate: the cluster (components/kind/KindCluster.ts `KindCluster` satisfies it). */
export interface WebhookProber {
  /** Creates the gate Command `name` with `opts`; it succeeds once every probe's dry-run create is accepted. */
  webhookProbe(
    name: string,
    o: { readonly probes: ReturnType<typeof kueueWebhookProbes>; readonly triggers: readonly unknown[]; readonly timeoutMs: number },
    opts: pulumi.CustomResourceOptions,
  ): pulumi.Resource;
}

/** Arguments of {@link Kueue}. */
export interface KueueArgs {
  /** The cluster's provider; every Kubernetes child gets it explicitly. */
  readonly provider: k8s.Provider;
  /** `in-cluster`: the release's Deployment. `external`: the manager runs outside the cluster (sim). */
  readonly controller: ControllerMode;
  /** Manager image (`repository:tag@sha256:…`; a tag-only reference is for preview only). */
  readonly image: string;
  readonly configuration: KueueConfigurationInput;
  /** `external`: the local manager's webhook port (1-65535). */
  readonly externalWebhookPort?: number;
  /** `in-cluster`: the cluster that runs the webhook gate (a `KindCluster`). Required for `in-cluster`. */
  readonly webhookProbe?: WebhookProber;
  /** `in-cluster`: how long the webhook gate's probes may take. @default 180000 */
  readonly webhookProbeTimeoutMs?: number;
  /**
   * `external`: what proves the manager's webhooks serve. Required for `external`: either resources, or a
   * function that receives the install resources (CRDs, webhook configurations, Service) and returns them.
   */
  readonly webhookReady?: readonly pulumi.Resource[] | ((install: readonly pulumi.Resource[]) => readonly pulumi.Resource[]);
  /** The queue objects. */
  readonly queue: {
    readonly resourceFlavor: string;
    readonly clusterQueue: string;
    /** `nominalQuota` from components/k8s/quota.ts (`{ cpu: "<n>m", memory: "<n>Mi" }`). */
    readonly nominalQuota: { readonly cpu: string; readonly memory: string };
    /** ResourceFlavor `nodeLabels`. @default none */
    readonly nodeLabels?: Readonly<Record<string, string>>;
    /** ResourceFlavor `tolerations` (injected into admitted pods). @default none */
    readonly tolerations?: ResourceFlavorInput["tolerations"];
  };
  /** The release objects. @default loadManifests(KUEUE_MANIFESTS) (the tool cache) */
  readonly manifests?: readonly KubernetesObject[];
  /** Further resources the ResourceFlavor and ClusterQueue wait for (e.g. the capacity check of the quota). @default [] */
  readonly queueDependsOn?: readonly pulumi.Resource[];
}

/** Probe name prefix of the dry-run objects (never persisted: dry-run). */
const PROBE_NAME = "cohort-lab-webhook-probe";

/**
 * The dry-run objects of the Kueue webhook gate, in order.
 *
 * @param podImage - any image reference; a dry run pulls nothing
 */
export function kueueWebhookProbes(podImage: string): { name: string; manifest: KubernetesObject; expectSchedulingGate?: string }[] {
  return [
    {
      name: "conversion (v1beta1 LocalQueue)",
      manifest: { apiVersion: "kueue.x-k8s.io/v1beta1", kind: "LocalQueue", metadata: { name: PROBE_NAME, namespace: "default" }, spec: { clusterQueue: PROBE_NAME } },
    },
    {
      name: "validating (ResourceFlavor)",
      manifest: { apiVersion: KUEUE_API_VERSION, kind: "ResourceFlavor", metadata: { name: PROBE_NAME }, spec: {} },
    },
    {
      name: "pod mutating (queue-name label)",
      manifest: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: PROBE_NAME, namespace: "default", labels: { "kueue.x-k8s.io/queue-name": PROBE_NAME } },
        spec: { containers: [{ name: "probe", image: podImage }] },
      },
      expectSchedulingGate: "kueue.x-k8s.io/admission",
    },
  ];
}

/**
 * Kueue on a cluster.
 *
 * Children: one resource per release object (`<name>:<namespace>/<object>` or `<name>:<object>`), the gate
 * `<name>-webhook-probe` (in-cluster), `<name>:<flavor>` (ResourceFlavor) and `<name>:<clusterQueue>` (ClusterQueue).
 *
 * @throws {pulumi.InputPropertyError} when the mode's required argument is missing
 * @throws {ManifestShapeError} when the release has no CRD for a Kueue kind the component creates
 * @throws {ManifestsMissingError} when the release manifests are not in the tool cache
 */
export class Kueue extends pulumi.ComponentResource {
  public readonly provider: k8s.Provider;
  /** Every install resource, in apply order. */
  public readonly install: readonly pulumi.CustomResource[];
  /** CRD resources by CRD name (`clusterqueues.kueue.x-k8s.io`, …). */
  public readonly crds: ReadonlyMap<string, pulumi.CustomResource>;
  /** The manager Deployment (`in-cluster` only). */
  public readonly deployment?: pulumi.CustomResource;
  /** What proves the webhooks serve (depend on these before creating Kueue objects). */
  public readonly webhookReady: readonly pulumi.Resource[];
  public readonly resourceFlavor: k8s.apiextensions.CustomResource;
  public readonly clusterQueue: k8s.apiextensions.CustomResource;
  /**
   * What a LocalQueue that points at {@link clusterQueue} must wait for: the LocalQueue CRD, the ClusterQueue and
   * {@link webhookReady} (depend on these before creating a run's LocalQueue).
   */
  public readonly localQueueReady: readonly pulumi.Resource[];
  public readonly clusterQueueName: string;
  public readonly resourceFlavorName: string;
  /** The rendered objects (install, then ResourceFlavor and ClusterQueue), for inspection and tests. */
  public readonly objects: readonly KubernetesObject[];

  constructor(name: string, args: KueueArgs, opts?: pulumi.ComponentResourceOptions) {
    if (args.controller === "in-cluster" && args.webhookProbe === undefined) {
      throw new pulumi.InputPropertyError({ propertyPath: "webhookProbe", reason: `Kueue ${name}: controller "in-cluster" needs webhookProbe` });
    }
    if (args.controller === "external" && args.webhookReady === undefined) {
      throw new pulumi.InputPropertyError({ propertyPath: "webhookReady", reason: `Kueue ${name}: controller "external" needs webhookReady` });
    }
    const upstream = args.manifests ?? loadManifests(KUEUE_MANIFESTS);
    const rendered = renderKueueInstall(upstream, {
      controller: args.controller,
      image: args.image,
      configuration: args.configuration,
      ...(args.externalWebhookPort !== undefined ? { externalWebhookPort: args.externalWebhookPort } : {}),
    });
    const flavor = renderResourceFlavor({
      name: args.queue.resourceFlavor,
      ...(args.queue.nodeLabels !== undefined ? { nodeLabels: args.queue.nodeLabels } : {}),
      ...(args.queue.tolerations !== undefined ? { tolerations: args.queue.tolerations } : {}),
    });
    const clusterQueue = renderClusterQueue({ name: args.queue.clusterQueue, flavor: args.queue.resourceFlavor, nominalQuota: args.queue.nominalQuota });
    super("cohortlab:k8s:Kueue", name, {}, opts);
    this.provider = args.provider;
    const base = { parent: this, provider: args.provider };

    const applied = applyRelease(name, rendered, base);
    const install = applied.map((a) => a.resource);
    const crds = new Map(applied.filter((a) => a.object.kind === "CustomResourceDefinition").map((a) => [a.object.metadata.name, a.resource] as const));
    const deployment = applied.find((a) => a.object.kind === "Deployment" && a.object.metadata.name === KUEUE_DEPLOYMENT)?.resource;

    let webhookReady: readonly pulumi.Resource[];
    if (args.controller === "in-cluster") {
      const manager = rendered.find((o) => o.kind === "Deployment");
      webhookReady = [
        args.webhookProbe!.webhookProbe(
          `${name}-webhook-probe`,
          // A new manager (image, configuration) is probed again.
          { probes: kueueWebhookProbes(args.image), triggers: [JSON.stringify(manager ?? null)], timeoutMs: args.webhookProbeTimeoutMs ?? 180_000 },
          { parent: this, dependsOn: install },
        ),
      ];
    } else {
      const ready = args.webhookReady!;
      webhookReady = typeof ready === "function" ? ready(install) : ready;
    }

    const crdFor = (kind: string) => {
      const crd = crds.get(`${kind.toLowerCase()}s.kueue.x-k8s.io`);
      if (crd === undefined) throw new ManifestShapeError(`Kueue ${name}: the release has no CRD for ${kind}`);
      return crd;
    };
    const queueDependsOn = args.queueDependsOn ?? [];
    this.resourceFlavor = createObject(name, flavor, { ...base, dependsOn: [crdFor("ResourceFlavor"), ...webhookReady, ...queueDependsOn] }) as k8s.apiextensions.CustomResource;
    this.clusterQueue = createObject(name, clusterQueue, {
      ...base,
      dependsOn: [crdFor("ClusterQueue"), this.resourceFlavor, ...webhookReady, ...queueDependsOn],
    }) as k8s.apiextensions.CustomResource;

    this.install = install;
    this.crds = crds;
    if (deployment !== undefined) this.deployment = deployment;
    this.webhookReady = webhookReady;
    this.localQueueReady = [crdFor("LocalQueue"), this.clusterQueue, ...webhookReady];
    this.clusterQueueName = args.queue.clusterQueue;
    this.resourceFlavorName = args.queue.resourceFlavor;
    this.objects = [...rendered, flavor, clusterQueue];
    this.registerOutputs({
      provider: this.provider,
      install: this.install,
      crds: Object.fromEntries(crds),
      deployment: this.deployment,
      webhookReady: this.webhookReady,
      resourceFlavor: this.resourceFlavor,
      clusterQueue: this.clusterQueue,
      localQueueReady: this.localQueueReady,
      clusterQueueName: this.clusterQueueName,
      resourceFlavorName: this.resourceFlavorName,
      objects: this.objects.map(objectKey),
    });
  }
}

/**
 * `Temporal` (token `cohortlab:k8s:Temporal`): the Temporal CLI dev server (`temporal server start-dev`) in the
 * cluster, image pinned by digest, with a NodePort Service for its gRPC frontend (components/k8s/manifests/temporal.ts).
 * On kind the NodePort is mapped to `127.0.0.1:<host port>` (components/kind/kindConfig.ts), so
 * {@link Temporal.hostAddress} reaches it from the host.
 *
 * @see https://docs.temporal.io/cli/server#start-dev
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { createObject } from "./k8sObject.js";
import { renderTemporal, SYSTEM_NAMESPACE, TEMPORAL_GRPC_PORT, TEMPORAL_NAME } from "./manifests/temporal.js";

/** Arguments of {@link Temporal}. */
export interface TemporalArgs {
  readonly provider: k8s.Provider;
  /** Image pinned by digest (common/pins.ts `local.temporal`). */
  readonly image: string;
  /** NodePort of the frontend (30000-32767). */
  readonly nodePort: number;
  /** Host port the NodePort is mapped to, for {@link Temporal.hostAddress}. */
  readonly hostPort: number;
  /** @default "cohort-lab-system" */
  readonly namespace?: string;
  /** Resources every child waits for (given to each child's `dependsOn`). @default [] */
  readonly waitFor?: readonly pulumi.Resource[];
}

/**
 * Children: `<name>:<namespace>` (Namespace), `<name>:<namespace>/temporal` (Deployment, Service).
 */
export class Temporal extends pulumi.ComponentResource {
  public readonly provider: k8s.Provider;
  public readonly namespace: pulumi.CustomResource;
  public readonly deployment: pulumi.CustomResource;
  public readonly service: pulumi.CustomResource;
  /** `127.0.0.1:<hostPort>`. */
  public readonly hostAddress: pulumi.Output<string>;
  /** `temporal.<namespace>.svc.cluster.local:7233`. */
  public readonly clusterAddress: pulumi.Output<string>;

  constructor(name: string, args: TemporalArgs, opts?: pulumi.ComponentResourceOptions) {
    if (!Number.isInteger(args.nodePort) || args.nodePort < 30000 || args.nodePort > 32767) {
      throw new pulumi.InputPropertyError({ propertyPath: "nodePort", reason: `Temporal ${name}: nodePort must be an integer from 30000 to 32767 (got ${args.nodePort})` });
    }
    const ns = args.namespace ?? SYSTEM_NAMESPACE;
    const [deploymentObj, serviceObj] = renderTemporal({ image: args.image, nodePort: args.nodePort, namespace: ns });
    super("cohortlab:k8s:Temporal", name, {}, opts);
    this.provider = args.provider;
    const base = { parent: this, provider: args.provider };
    const waitFor = args.waitFor ?? [];
    this.namespace = createObject(
      name,
      { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: { "app.kubernetes.io/part-of": "cohort-lab" } } },
      { ...base, dependsOn: [...waitFor] },
    );
    this.deployment = createObject(name, deploymentObj!, { ...base, dependsOn: [...waitFor, this.namespace] });
    this.service = createObject(name, serviceObj!, { ...base, dependsOn: [...waitFor, this.namespace] });
    this.hostAddress = pulumi.output(`127.0.0.1:${args.hostPort}`);
    this.clusterAddress = pulumi.output(`${TEMPORAL_NAME}.${ns}.svc.cluster.local:${TEMPORAL_GRPC_PORT}`);
    this.registerOutputs({
      provider: this.provider,
      namespace: this.namespace,
      deployment: this.deployment,
      service: this.service,
      hostAddress: this.hostAddress,
      clusterAddress: this.clusterAddress,
    });
  }
}

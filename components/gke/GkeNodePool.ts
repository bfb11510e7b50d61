/**
 * `GkeNodePool` (token `cohortlab:gke:GkeNodePool`): one node pool of a {@link GkeCluster}, either fixed-size
 * (the system pool: `nodeCount` from config, `0` = parked) or autoscaled (the agent pool: `0..maxNodes`).
 *
 * - The pool's Kubernetes label and taint are declared on the pool (`nodeConfig.labels`, `nodeConfig.taints`), so
 *   the cluster autoscaler knows them for a pool at zero nodes and scales it up for a pending Pod that selects the
 *   label and tolerates the taint.
 * - `workloadMetadataConfig.mode: GKE_METADATA`: Pods see the GKE metadata server (Workload Identity), never the
 *   node's own credentials.
 * - The nodes run as the least-privilege node service account (components/gke/GkeNodeServiceAccount.ts).
 *
 * @see https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-autoscaler#scheduling-and-disruption (scale from zero)
 * @see https://cloud.google.com/kubernetes-engine/docs/how-to/node-taints
 */
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";
import type { Taint } from "../k8s/quota.js";
import type { GkeCluster } from "./GkeCluster.js";

/** GKE's spelling of a Kubernetes taint effect. */
export const GKE_TAINT_EFFECT = { NoSchedule: "NO_SCHEDULE", PreferNoSchedule: "PREFER_NO_SCHEDULE", NoExecute: "NO_EXECUTE" } as const;

/** Arguments of {@link GkeNodePool}. */
export interface GkeNodePoolArgs {
  readonly project: string;
  readonly zone: string;
  readonly cluster: GkeCluster;
  /** The pool's name in GKE. */
  readonly poolName: string;
  readonly machineType: string;
  readonly diskSizeGb: number;
  readonly serviceAccount: pulumi.Input<string>;
  /** Fixed size, or autoscaling bounds. */
  readonly size: { readonly fixed: number } | { readonly min: number; readonly max: number };
  readonly label: { readonly key: string; readonly value: string };
  readonly taint?: Taint;
  readonly provider: gcp.Provider;
  /**
   * Further resources the pool waits for (e.g. the park guard before a change of size), given to the pool's own
   * `dependsOn`: a component's `dependsOn` does not reach its children's registrations. @default []
   */
  readonly waitFor?: readonly pulumi.Resource[];
}

/** Children: `<name>-pool` (`gcp:container/nodePool:NodePool`). */
export class GkeNodePool extends pulumi.ComponentResource {
  public readonly pool: gcp.container.NodePool;
  public readonly poolName: string;

  constructor(name: string, args: GkeNodePoolArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cohortlab:gke:GkeNodePool", name, {}, opts);
    this.poolName = args.poolName;
    const size =
      "fixed" in args.size
        ? { nodeCount: args.size.fixed }
        : { initialNodeCount: args.size.min, autoscaling: { minNodeCount: args.size.min, maxNodeCount: args.size.max, locationPolicy: "ANY" } };
    this.pool = new gcp.container.NodePool(
      `${name}-pool`,
      {
        project: args.project,
        location: args.zone,
        cluster: args.cluster.cluster.name,
        name: args.poolName,
        ...size,
        management: { autoRepair: true, autoUpgrade: true },
        nodeConfig: {
          machineType: args.machineType,
          diskSizeGb: args.diskSizeGb,
          diskType: "pd-balanced",
          imageType: "COS_CONTAINERD",
          serviceAccount: args.serviceAccount,
          oauthScopes: ["https://www.googleapis.com/auth/cloud-platform"],
          labels: { [args.label.key]: args.label.value },
          ...(args.taint !== undefined ? { taints: [{ key: args.taint.key, value: args.taint.value ?? "", effect: GKE_TAINT_EFFECT[args.taint.effect] }] } : {}),
          workloadMetadataConfig: { mode: "GKE_METADATA" },
          metadata: { "disable-legacy-endpoints": "true" },
        },
      },
      { parent: this, provider: args.provider, dependsOn: [args.cluster.cluster, ...(args.waitFor ?? [])] },
    );
    this.registerOutputs({ poolName: this.poolName });
  }
}

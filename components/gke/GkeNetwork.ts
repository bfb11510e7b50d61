/**
 * `GkeNetwork` (token `cohortlab:gke:GkeNetwork`): the VPC-native network of the `gke` profile: a custom-mode VPC
 * and one regional subnet with two secondary ranges, one for Pod IPs and one for Service IPs (the cluster's
 * `ipAllocationPolicy` names them, components/gke/GkeCluster.ts).
 *
 * Default ranges are the public simulator's (https://github.com/chughtapan/moltzap, packages/simulator
 * `gke/terraform/main.tf`): nodes 10.40.0.0/20, Pods 10.44.0.0/14, Services 10.48.0.0/20.
 *
 * @see https://cloud.google.com/kubernetes-engine/docs/concepts/alias-ips (VPC-native clusters)
 */
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

/** The subnet's ranges. */
export const GKE_NETWORK_RANGES = { nodes: "10.40.0.0/20", pods: "10.44.0.0/14", services: "10.48.0.0/20" } as const;

/** Arguments of {@link GkeNetwork}. */
export interface GkeNetworkArgs {
  readonly project: string;
  readonly region: string;
  /** Name of the VPC and the subnet (the secondary ranges are `<name>-pods`, `<name>-services`). */
  readonly name: string;
  readonly provider: gcp.Provider;
}

/** Children: `<name>-vpc` (`gcp:compute/network:Network`), `<name>-subnet` (`gcp:compute/subnetwork:Subnetwork`). */
export class GkeNetwork extends pulumi.ComponentResource {
  public readonly network: gcp.compute.Network;
  public readonly subnetwork: gcp.compute.Subnetwork;
  public readonly podsRangeName: string;
  public readonly servicesRangeName: string;

  constructor(name: string, args: GkeNetworkArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cohortlab:gke:GkeNetwork", name, {}, opts);
    const base = { parent: this, provider: args.provider };
    this.podsRangeName = `${args.name}-pods`;
    this.servicesRangeName = `${args.name}-services`;
    this.network = new gcp.compute.Network(`${name}-vpc`, { project: args.project, name: args.name, autoCreateSubnetworks: false }, base);
    this.subnetwork = new gcp.compute.Subnetwork(
      `${name}-subnet`,
      {
        project: args.project,
        region: args.region,
        name: args.name,
        network: this.network.id,
        ipCidrRange: GKE_NETWORK_RANGES.nodes,
        privateIpGoogleAccess: true,
        secondaryIpRanges: [
          { rangeName: this.podsRangeName, ipCidrRange: GKE_NETWORK_RANGES.pods },
          { rangeName: this.servicesRangeName, ipCidrRange: GKE_NETWORK_RANGES.services },
        ],
      },
      base,
    );
    this.registerOutputs({ network: this.network.id, subnetwork: this.subnetwork.id });
  }
}

/**
 * `GkeNodeServiceAccount` (token `cohortlab:gke:GkeNodeServiceAccount`): the nodes' Google service account with
 * least privilege: only `roles/container.defaultNodeServiceAccount` on the project (what a node needs to write
 * logs and metrics and read its own configuration), instead of the Compute Engine default service account's
 * Editor role.
 *
 * @see https://cloud.google.com/kubernetes-engine/docs/how-to/hardening-your-cluster#use_least_privilege_sa
 */
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

/** The one role the node service account gets. */
export const NODE_SERVICE_ACCOUNT_ROLE = "roles/container.defaultNodeServiceAccount";

/** Arguments of {@link GkeNodeServiceAccount}. */
export interface GkeNodeServiceAccountArgs {
  readonly project: string;
  /** The account id (6-30 characters). */
  readonly accountId: string;
  readonly provider: gcp.Provider;
}

/** Children: `<name>-sa` (`gcp:serviceaccount/account:Account`), `<name>-role` (`gcp:projects/iAMMember:IAMMember`). */
export class GkeNodeServiceAccount extends pulumi.ComponentResource {
  public readonly account: gcp.serviceaccount.Account;
  public readonly role: gcp.projects.IAMMember;
  public readonly email: pulumi.Output<string>;

  constructor(name: string, args: GkeNodeServiceAccountArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cohortlab:gke:GkeNodeServiceAccount", name, {}, opts);
    const base = { parent: this, provider: args.provider };
    this.account = new gcp.serviceaccount.Account(`${name}-sa`, { project: args.project, accountId: args.accountId, displayName: "cohort-lab GKE nodes" }, base);
    this.email = this.account.email;
    this.role = new gcp.projects.IAMMember(
      `${name}-role`,
      { project: args.project, role: NODE_SERVICE_ACCOUNT_ROLE, member: pulumi.interpolate`serviceAccount:${this.account.email}` },
      base,
    );
    this.registerOutputs({ email: this.email });
  }
}

/**
 * `LedgerBucket` (token `cohortlab:gke:LedgerBucket`): the GCS bucket the `gke` profile's ledgers are exported to
 * (`gs://<bucket>/<runId>/`): uniform bucket-level access (IAM only, no object ACLs), public access prevention
 * enforced, and `forceDestroy: false` (Pulumi cannot delete it while it holds objects; the `gke.deleteLedgers`
 * refusal of `pulumi destroy` is in docs/gke.md "Lifecycle").
 *
 * {@link LedgerBucket.grantWriter} binds `roles/storage.objectUser` on this bucket for ONE Kubernetes service
 * account through Workload Identity Federation for GKE (the principal
 * `principal://iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<project>.svc.id.goog/subject/ns/<namespace>/sa/<ksa>`):
 * no other service account of the cluster can read or write the ledgers.
 *
 * @see https://cloud.google.com/storage/docs/uniform-bucket-level-access
 * @see https://cloud.google.com/storage/docs/public-access-prevention
 * @see https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity#configure-authz-principals
 */
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

/** The role the run's service account gets on the bucket (create, read, overwrite and delete objects; nothing on the bucket itself). */
export const LEDGER_WRITER_ROLE = "roles/storage.objectUser";

/** The Workload Identity principal of one Kubernetes service account. */
export function workloadIdentityPrincipal(o: { readonly projectNumber: string; readonly project: string; readonly namespace: string; readonly serviceAccount: string }): string {
  return (
    `principal://iam.googleapis.com/projects/${o.projectNumber}/locations/global/workloadIdentityPools/${o.project}.svc.id.goog` +
    `/subject/ns/${o.namespace}/sa/${o.serviceAccount}`
  );
}

/** Arguments of {@link LedgerBucket}. */
export interface LedgerBucketArgs {
  readonly project: string;
  /** Bucket location, e.g. `US-CENTRAL1`. */
  readonly location: string;
  readonly bucketName: string;
  readonly provider: gcp.Provider;
}

/** Children: `<name>-bucket` (`gcp:storage/bucket:Bucket`) and one `<name>-writer-<namespace>` (`gcp:storage/bucketIAMMember:BucketIAMMember`) per grant. */
export class LedgerBucket extends pulumi.ComponentResource {
  public readonly bucket: gcp.storage.Bucket;
  /** `gs://<bucket>`. */
  public readonly url: pulumi.Output<string>;
  private readonly baseName: string;
  private readonly provider: gcp.Provider;

  constructor(name: string, args: LedgerBucketArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cohortlab:gke:LedgerBucket", name, {}, opts);
    this.baseName = name;
    this.provider = args.provider;
    this.bucket = new gcp.storage.Bucket(
      `${name}-bucket`,
      {
        project: args.project,
        name: args.bucketName,
        location: args.location,
        storageClass: "STANDARD",
        uniformBucketLevelAccess: true,
        publicAccessPrevention: "enforced",
        forceDestroy: false,
      },
      { parent: this, provider: args.provider },
    );
    this.url = pulumi.interpolate`gs://${this.bucket.name}`;
    this.registerOutputs({ url: this.url });
  }

  /** Lets exactly one Kubernetes service account (`namespace`/`serviceAccount`) write ledgers. */
  grantWriter(o: {
    readonly projectNumber: pulumi.Input<string>;
    readonly project: string;
    readonly namespace: string;
    readonly serviceAccount: string;
  }): gcp.storage.BucketIAMMember {
    return new gcp.storage.BucketIAMMember(
      `${this.baseName}-writer-${o.namespace}`,
      {
        bucket: this.bucket.name,
        role: LEDGER_WRITER_ROLE,
        member: pulumi.output(o.projectNumber).apply((projectNumber) => workloadIdentityPrincipal({ ...o, projectNumber })),
      },
      { parent: this, provider: this.provider },
    );
  }
}

/**
 * `GkeCluster` (token `cohortlab:gke:GkeCluster`): a GKE Standard, zonal cluster, VPC-native on a
 * {@link GkeNetwork}'s subnet and secondary ranges, with the default node pool removed (GKE creates a cluster
 * with at least one node: `initialNodeCount: 1` and `removeDefaultNodePool: true` delete it once the cluster
 * exists; the profile's pools are separate `GkeNodePool`s), a release channel, `deletionProtection` from config
 * and the Workload Identity pool `<project>.svc.id.goog`.
 *
 * The kubeconfig ({@link GkeCluster.kubeconfig}, a secret) uses the `gke-gcloud-auth-plugin` exec credential
 * (components/gke/kubeconfig.ts); {@link GkeCluster.kubernetesProvider} builds the Kubernetes provider from it
 * explicitly, after the pools that must exist before anything is scheduled.
 *
 * {@link GkeCluster.hostStep} (with `hostSteps`): how the run's host-side steps (components/gke/steps.cjs
 * `run-summary`, `run-progress`, `run-forget`, and the workflow execution's `worker-guard`, `run-identity`,
 * `run-submit`, `run-keep`) run against this cluster: with the Node binary of the program, in the project directory,
 * with the pinned kubectl of the tool cache (components/kind/KindCluster.ts `localTools`, the one `local` uses; the
 * kubeconfig's exec credential needs `gke-gcloud-auth-plugin` on PATH), so the cluster is a `JobCluster` of
 * components/run/kubernetesJob.ts and a `WorkflowCluster` (with its provider) of components/run/clusterWorkflow.ts.
 *
 * @see https://cloud.google.com/kubernetes-engine/docs/concepts/types-of-clusters (zonal Standard)
 * @see https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity
 */
import * as gcp from "@pulumi/gcp";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { cacheRoot } from "../../common/paths.js";
import { localTools, type LocalTools } from "../kind/KindCluster.js";
import type { WorkflowHostStepName } from "../run/clusterWorkflow.js";
import type { JobHostStep, JobHostStepName } from "../run/kubernetesJob.js";
import { gkeContextName, renderGkeKubeconfig } from "./kubeconfig.js";
import { gkeStepCommand } from "./Lifecycle.js";
import type { GkeNetwork } from "./GkeNetwork.js";

/** Arguments of {@link GkeCluster}. */
export interface GkeClusterArgs {
  readonly project: string;
  /** The zone (a zonal cluster). */
  readonly zone: string;
  readonly clusterName: string;
  readonly network: GkeNetwork;
  /** `RAPID`, `REGULAR`, `STABLE` or `EXTENDED`. */
  readonly releaseChannel: string;
  readonly deletionProtection: boolean;
  /** Email of the node service account (the transient default pool uses it too). */
  readonly nodeServiceAccount: pulumi.Input<string>;
  readonly provider: gcp.Provider;
  /** Resource labels on the cluster. @default {} */
  readonly labels?: Readonly<Record<string, string>>;
  /**
   * Where the run's host-side steps run ({@link GkeCluster.hostStep}): the project directory (holds
   * components/gke/steps.cjs), the Node binary (@default process.execPath), the tool cache root (@default
   * cacheRoot()) and platform (@default this machine's) the pinned kubectl is resolved for. @default none:
   * `hostStep` refuses
   */
  readonly hostSteps?: {
    readonly projectDir: string;
    readonly nodePath?: string;
    readonly toolCacheRoot?: string;
    readonly platform?: string;
  };
}

/** Children: `<name>-cluster` (`gcp:container/cluster:Cluster`) and, once asked for, `<name>-k8s` (`pulumi:providers:kubernetes`). */
export class GkeCluster extends pulumi.ComponentResource {
  public readonly cluster: gcp.container.Cluster;
  /** The kubeconfig with the `gke-gcloud-auth-plugin` exec credential (a secret). */
  public readonly kubeconfig: pulumi.Output<string>;
  /** `gke_<project>_<zone>_<cluster>`. */
  public readonly kubeContext: pulumi.Output<string>;
  /** `<project>.svc.id.goog`. */
  public readonly workloadPool: string;
  private readonly baseName: string;
  private readonly steps?: { readonly projectDir: string; readonly nodePath: string; readonly tools: LocalTools };

  constructor(name: string, args: GkeClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    const h = args.hostSteps;
    if (h !== undefined && !path.isAbsolute(h.projectDir)) {
      throw new pulumi.InputPropertyError({
        propertyPath: "hostSteps.projectDir",
        reason: `GkeCluster ${name}: projectDir must be absolute (got ${JSON.stringify(h.projectDir)})`,
      });
    }
    // Resolved before any resource exists: an unsupported platform is refused here (UnsupportedPlatformError).
    const tools = h !== undefined ? localTools(h.platform ?? `${process.platform}-${process.arch}`, h.toolCacheRoot ?? cacheRoot()) : undefined;
    super("cohortlab:gke:GkeCluster", name, {}, opts);
    this.baseName = name;
    if (h !== undefined && tools !== undefined) this.steps = { projectDir: h.projectDir, nodePath: h.nodePath ?? process.execPath, tools };
    this.workloadPool = `${args.project}.svc.id.goog`;
    this.cluster = new gcp.container.Cluster(
      `${name}-cluster`,
      {
        project: args.project,
        location: args.zone,
        name: args.clusterName,
        network: args.network.network.id,
        subnetwork: args.network.subnetwork.id,
        networkingMode: "VPC_NATIVE",
        ipAllocationPolicy: { clusterSecondaryRangeName: args.network.podsRangeName, servicesSecondaryRangeName: args.network.servicesRangeName },
        removeDefaultNodePool: true,
        initialNodeCount: 1,
        nodeConfig: { serviceAccount: args.nodeServiceAccount, oauthScopes: ["https://www.googleapis.com/auth/cloud-platform"] },
        releaseChannel: { channel: args.releaseChannel },
        deletionProtection: args.deletionProtection,
        workloadIdentityConfig: { workloadPool: this.workloadPool },
        resourceLabels: { ...(args.labels ?? {}) },
      },
      { parent: this, provider: args.provider },
    );
    const context = gkeContextName(args.project, args.zone, args.clusterName);
    this.kubeContext = pulumi.output(context);
    this.kubeconfig = pulumi.secret(
      pulumi
        .all([this.cluster.endpoint, this.cluster.masterAuth])
        .apply(([endpoint, auth]) => renderGkeKubeconfig({ context, endpoint, caCertificate: auth?.clusterCaCertificate ?? "" })),
    );
    this.registerOutputs({ kubeContext: this.kubeContext, kubeconfig: this.kubeconfig });
  }

  /**
   * How a Command runs `step` of components/gke/steps.cjs on this host against this cluster: the command line, the
   * project directory and the pinned kubectl's environment (the executor adds `COHORT_KUBECONFIG` and the step's
   * own entries).
   *
   * @throws {pulumi.InputPropertyError} `hostSteps` when the cluster was created without it
   */
  hostStep(step: JobHostStepName | WorkflowHostStepName): JobHostStep {
    if (this.steps === undefined) {
      throw new pulumi.InputPropertyError({ propertyPath: "hostSteps", reason: `GkeCluster ${this.baseName}: created without hostSteps, so its run steps (${step}) cannot run` });
    }
    return { command: gkeStepCommand(this.steps.nodePath, step), dir: this.steps.projectDir, environment: this.steps.tools.environment };
  }

  /**
   * The pinned kubectl's environment (`COHORT_KUBECTL_*`) for the park guard (components/gke/Lifecycle.ts).
   *
   * @throws {pulumi.InputPropertyError} `hostSteps` when the cluster was created without it
   */
  kubectlEnvironment(): Readonly<Record<string, string>> {
    if (this.steps === undefined) {
      throw new pulumi.InputPropertyError({ propertyPath: "hostSteps", reason: `GkeCluster ${this.baseName}: created without hostSteps, so its park guard cannot run` });
    }
    return Object.fromEntries(Object.entries(this.steps.tools.environment).filter(([key]) => key.startsWith("COHORT_KUBECTL_")));
  }

  /**
   * The Kubernetes provider of the cluster, from {@link kubeconfig} (so it is created after the cluster), and
   * after `dependsOn` (the node pools: nothing can be scheduled before them). One per cluster.
   */
  kubernetesProvider(dependsOn: readonly pulumi.Resource[]): k8s.Provider {
    return new k8s.Provider(
      `${this.baseName}-k8s`,
      { kubeconfig: this.kubeconfig, clusterIdentifier: this.cluster.id, deleteUnreachable: false, enableServerSideApply: true },
      { parent: this, dependsOn: [this.cluster, ...dependsOn] },
    );
  }
}

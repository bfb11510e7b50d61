/**
 * The `gke` profile's lifecycle refusals as resources (components/gke/steps.cjs runs them on the host with what the
 * run's steps use: the pinned kubectl of the tool cache and the bundled runtime, dist/cohort.cjs):
 *
 * - `parkGuard`: a Command the system pool depends on, re-run whenever `gke.systemNodes` changes; with
 *   `systemNodes: 0` it refuses while any Kueue Workload exists (or cannot be listed), so the pool is never shrunk
 *   under a cohort. Environment: the pinned kubectl's `COHORT_KUBECTL_*` ({@link GkeCluster.kubectlEnvironment}).
 * - `ledgerGuard`: a Command that depends on the bucket and does nothing on create; its DELETE step (run by
 *   `pulumi destroy` before the bucket's delete, because it depends on the bucket) refuses while the bucket holds
 *   objects (or cannot be listed) unless `gke.deleteLedgers: true`, which empties it first, all through the runtime
 *   bundle (`cohort ledger list --json`, `cohort ledger delete --all`; `COHORT_RUNTIME_BUNDLE`).
 */
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import { shellQuote } from "../../common/shell.js";

/** The steps file, relative to the project directory (stored in state: keep the path stable). */
export const GKE_STEPS_ENTRY = "components/gke/steps.cjs";

/** A step of components/gke/steps.cjs: the two lifecycle guards, the Job's three (components/run/kubernetesJob.ts) and the workflow's four (components/run/clusterWorkflow.ts). */
export type GkeStep = "park-check" | "ledger-guard" | "run-summary" | "run-progress" | "run-forget" | "worker-guard" | "run-identity" | "run-submit" | "run-keep";

/** `<node> components/gke/steps.cjs <step>` (run with `dir` = the project directory). */
export function gkeStepCommand(nodePath: string, step: GkeStep): string {
  return `${shellQuote(nodePath)} ${GKE_STEPS_ENTRY} ${step}`;
}

/** The park guard: before a change of the system pool's size. */
export function parkGuard(
  name: string,
  o: {
    readonly nodePath: string;
    readonly projectDir: string;
    readonly systemNodes: number;
    readonly kubeconfig: pulumi.Input<string>;
    /** `COHORT_KUBECTL_*`: the pinned kubectl (GkeCluster.kubectlEnvironment). */
    readonly kubectlEnvironment: Readonly<Record<string, string>>;
  },
  opts: pulumi.CustomResourceOptions,
): command.local.Command {
  return new command.local.Command(
    name,
    {
      create: gkeStepCommand(o.nodePath, "park-check"),
      update: gkeStepCommand(o.nodePath, "park-check"),
      dir: path.resolve(o.projectDir),
      environment: { ...o.kubectlEnvironment, COHORT_SYSTEM_NODES: String(o.systemNodes), COHORT_KUBECONFIG: pulumi.secret(o.kubeconfig) },
      triggers: [o.systemNodes],
      addPreviousOutputInEnv: false,
      logging: "stderr",
    },
    opts,
  );
}

/** The ledger guard: its delete runs before the bucket's. */
export function ledgerGuard(
  name: string,
  o: {
    readonly nodePath: string;
    readonly projectDir: string;
    readonly bucket: pulumi.Input<string>;
    readonly deleteLedgers: boolean;
    /** dist/cohort.cjs on this machine (absolute), as the run's steps get it. */
    readonly runtimeBundlePath: string;
  },
  opts: pulumi.CustomResourceOptions,
): command.local.Command {
  return new command.local.Command(
    name,
    {
      create: "true",
      delete: gkeStepCommand(o.nodePath, "ledger-guard"),
      dir: path.resolve(o.projectDir),
      environment: { COHORT_BUCKET: o.bucket, COHORT_DELETE_LEDGERS: String(o.deleteLedgers), COHORT_RUNTIME_BUNDLE: o.runtimeBundlePath },
      addPreviousOutputInEnv: false,
      logging: "stderr",
    },
    opts,
  );
}

/**
 * The Kubernetes-Job execution of `CohortRun` (components/run/CohortRun.ts, `execution.kind: "kubernetesJob"`): the
 * run executes as a Job in the cluster instead of a child process of the command provider.
 *
 * - The Job (from {@link RunNamespace.jobObject}, a RunNamespace with `inClusterRuntime`) is created with the cluster's provider after every per-run object,
 *   after Agent Sandbox is ready and after Kueue's webhook gate and ClusterQueue; pulumi-kubernetes awaits it
 *   (a Job is ready when its `Complete` condition is True; `Failed` fails `pulumi up`). The create timeout is the
 *   Job's own deadline plus 2 minutes.
 * - Then `<name>-summary`, a Command on the host (components/kind/steps.cjs `run-summary`), prints the runtime's
 *   one-line JSON summary from the Job's log with `ledgerPath` and `reportPath` mapped to the host path, after checking that the
 *   ledger's `completion.json` reached the host through the kind mount. Its stdout becomes the `CohortRun`
 *   outputs, so the stack's `run` output has the same shape as on the `host` profile.
 * - Triggers: the Job object's hash (spec, bundle, image, namespace), so a new run replaces the summary too.
 * - Delete (destroy, replacement): with `keepLedgers: false` the run's ledger directory on the host is removed
 *   (components/kind/steps.cjs `run-forget`, from the stored summary); by default ledgers are kept.
 * - Progress: `<name>-progress`, a Command on the host (components/kind/steps.cjs `run-progress`) created in
 *   parallel with the Job (it depends on what the Job depends on, not on the Job, so the engine runs it while
 *   pulumi-kubernetes awaits the Job). It follows the runtime container's log (`kubectl logs -f`; in the pod the
 *   runtime has no `--progress-fd` and writes its progress lines to stderr) and writes each progress line to the
 *   command provider's status pipe (`COHORT_STATUS_FD=3`, as the `process` executor does): `pulumi up` shows
 *   them as ephemeral info on the `-progress` row and stores none of them (its stdout stays empty). It exits 0
 *   when the Job is Complete or Failed (at most 2 s later), never fails `pulumi up` (a follower that cannot reach
 *   the log prints one note and exits 0), has the same triggers as the summary (a new run replaces it) and does
 *   nothing on delete. With the upstream command provider fd 3 is not open: it notes that and exits at once.
 */
import * as command from "@pulumi/command";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { parseRunSummary, STATUS_FD_ENV, type CohortExecution, type ExecutionPlan } from "./execution.js";
import { jsonDigest } from "../digest.js";
import { createObject } from "../k8s/k8sObject.js";
import type { KindHostStep } from "../kind/KindCluster.js";
import { RUNTIME_NAMES } from "./manifests.js";
import type { RunNamespace } from "./RunNamespace.js";

/**
 * The cluster a run's Job executes in, and the host side that reads its result (a `KindCluster`
 * satisfies it): its provider, its kubeconfig (a secret) and how the host-side steps
 * (components/kind/steps.cjs `run-summary`, `run-progress`, `run-forget`) run.
 */
export interface JobCluster {
  readonly provider: k8s.Provider;
  readonly kubeconfig: pulumi.Input<string>;
  /** The command line, directory and tool environment (`COHORT_KUBECTL_*`) of a host-side step. */
  hostStep(step: "run-summary" | "run-progress" | "run-forget"): KindHostStep;
}

/** `CohortRunArgs.execution` for a run that executes as a Kubernetes Job. */
export interface KubernetesJobExecution {
  readonly kind: "kubernetesJob";
  /** The cluster the Job runs in. */
  readonly cluster: JobCluster;
  /** The per-run objects (namespace, RBAC, ConfigMaps) and the Job to create: a RunNamespace with `inClusterRuntime`. */
  readonly run: RunNamespace;
  /** Further resources the Job waits for (Agent Sandbox ready, Kueue gate and ClusterQueue, Temporal). */
  readonly dependsOn: readonly pulumi.Resource[];
  /** Where the ledgers land: the host directory and the same directory's path inside the nodes. */
  readonly artifacts: { readonly hostDir: string; readonly nodePath: string };
}

/**
 * Creates the resources that execute the run as a Job, under `parent` (the CohortRun).
 *
 * Children: `<name>:<ns>/cohort-run` (`kubernetes:batch/v1:Job`), `<name>-progress` and `<name>-summary`
 * (`command:local:Command`).
 */
export function executeAsKubernetesJob(plan: ExecutionPlan, args: KubernetesJobExecution, parent: pulumi.Resource): CohortExecution {
  const { cluster, run } = args;
  const job = run.jobObject;
  if (job === undefined)
    throw new Error(`${plan.name}: the run namespace ${run.namespaceName} has no in-cluster runtime (RunNamespace without inClusterRuntime), so there is no Job to run`);
  const deadline = Number((job.spec as { activeDeadlineSeconds?: number }).activeDeadlineSeconds ?? 3600);
  const resource = createObject(plan.name, job, {
    parent,
    provider: cluster.provider,
    dependsOn: [...run.resources, ...args.dependsOn],
    customTimeouts: { create: `${deadline + 120}s`, update: `${deadline + 120}s` },
  });
  const triggers = [jsonDigest(job), plan.specSha256];
  const progress = cluster.hostStep("run-progress");
  const report = cluster.hostStep("run-summary");
  const logAccess = {
    ...report.environment,
    COHORT_KUBECONFIG: pulumi.secret(cluster.kubeconfig),
    COHORT_NAMESPACE: run.namespaceName,
    COHORT_JOB: RUNTIME_NAMES.job,
    COHORT_CONTAINER: RUNTIME_NAMES.container,
    COHORT_WAIT_MS: String((deadline + 120) * 1000),
  };
  // The follower: same dependencies as the Job but not the Job itself, so it runs while the Job is awaited.
  new command.local.Command(
    `${plan.name}-progress`,
    {
      create: progress.command,
      dir: progress.dir,
      // The status pipe (fd 3) of the substitute command provider: lines shown on this row, stored nowhere.
      environment: { ...logAccess, [STATUS_FD_ENV]: "3" },
      triggers,
      logging: "stderr",
    },
    { parent, dependsOn: [...run.resources, ...args.dependsOn] },
  );
  const summary = new command.local.Command(
    `${plan.name}-summary`,
    {
      create: report.command,
      // The summary of the previous create is in PULUMI_COMMAND_STDOUT: it names the ledger to remove.
      delete: cluster.hostStep("run-forget").command,
      dir: report.dir,
      environment: {
        ...logAccess,
        COHORT_ARTIFACTS_DIR: args.artifacts.hostDir,
        COHORT_ARTIFACTS_NODE_PATH: args.artifacts.nodePath,
        COHORT_KEEP_LEDGERS: String(plan.keepLedgers),
      },
      triggers,
      addPreviousOutputInEnv: true,
      logging: "stderr",
    },
    { parent, dependsOn: [resource] },
  );
  return { resource, summary: summary.stdout.apply(parseRunSummary) };
}

/**
 * The Kubernetes-Job execution of `CohortRun` (components/run/CohortRun.ts, `execution.kind: "kubernetesJob"`): the
 * run executes as a Job in the cluster instead of a child process of the command provider.
 *
 * - The Job (from {@link RunNamespace.jobObject}, a RunNamespace with `inClusterRuntime`) is created with the cluster's provider after every per-run object,
 *   after Agent Sandbox is ready and after Kueue's webhook gate and ClusterQueue; pulumi-kubernetes awaits it
 *   (a Job is ready when its `Complete` condition is True; `Failed` fails `pulumi up`). The create timeout is the
 *   Job's own deadline plus 2 minutes.
 * - Then `<name>-summary`, a Command on the host (the cluster's `run-summary` step: components/kind/steps.cjs or
 *   components/gke/steps.cjs; both wait for the Job and take the runtime's one-line JSON summary from its log with
 *   the same code, components/run/job-steps.cjs `jobSummary`), then checks where the ledger went, by
 *   {@link JobLedger}: `hostMount` (kind) maps `ledgerPath` and `reportPath` to the host path after checking that
 *   `completion.json` reached the host through the mount; `bucket` (gke) requires the runtime's `ledgerUri`, downloads
 *   and verifies the exported ledger with the bundled runtime (`cohort ledger verify --json`) and takes `outcome` and
 *   `firstFailure` from its completion.json (`reportPath` null: report.html is not exported; `ledgerPath` is the
 *   pod's path, `ledgerUri` the ledger's home). Its stdout becomes the `CohortRun` outputs, so the stack's `run`
 *   output has the same shape as on the `host` profile.
 * - Triggers: the Job object's hash (spec, bundle, image, namespace, ledger destination), so a new run replaces the summary too.
 * - Delete (destroy, replacement): with `keepLedgers: false` the run's ledger is removed (the `run-forget` step, from
 *   the stored summary: the host directory, or the bucket's objects through the runtime's GCS store); by default
 *   ledgers are kept.
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
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { parseRunSummary, STATUS_FD_ENV, type CohortExecution, type ExecutionPlan } from "./execution.js";
import { jsonDigest } from "../digest.js";
import { createObject } from "../k8s/k8sObject.js";
import type { KubernetesObject } from "../k8s/manifests/cache.js";
import { RUNTIME_NAMES } from "./manifests.js";
import type { RunNamespace } from "./RunNamespace.js";

/** The host-side steps of a run's Job (each cluster's steps file has all three). */
export type JobHostStepName = "run-summary" | "run-progress" | "run-forget";

/** How a `command:local:Command` runs one host-side step (a `KindHostStep` is one). */
export interface JobHostStep {
  /** The step's command line. */
  readonly command: string;
  /** The command's `dir` (the project directory). */
  readonly dir: string;
  /** The pinned tools' `COHORT_KUBECTL_*` entries (and the cluster's own); the executor adds the step's inputs. */
  readonly environment: Readonly<Record<string, string>>;
}

/**
 * The cluster a run's Job executes in, and the host side that reads its result (`KindCluster` and `GkeCluster`
 * satisfy it): its provider, its kubeconfig (a secret) and how the host-side steps (`run-summary`, `run-progress`,
 * `run-forget` of components/kind/steps.cjs or components/gke/steps.cjs) run.
 */
export interface JobCluster {
  readonly provider: k8s.Provider;
  readonly kubeconfig: pulumi.Input<string>;
  /** The command line, directory and tool environment (`COHORT_KUBECTL_*`) of a host-side step. */
  hostStep(step: JobHostStepName): JobHostStep;
}

/**
 * Where a Job's ledger goes and how the summary step reads it back:
 * - `hostMount` (kind): the Job writes into `nodePath`, a directory of every node that is the host's `hostDir`
 *   (the RunNamespace's `inClusterRuntime.ledger` is `hostPath`).
 * - `bucket` (gke): the Job exports to `uri` (`gs://<bucket>[/<prefix>]`, the RunNamespace's `inClusterRuntime.ledger`
 *   is `{ kind: "bucket", exportUri: uri }`); the summary and forget steps read and delete `<uri>/<runId>` with the
 *   runtime bundle at `runtimeBundlePath` on this machine (absolute; dist/cohort.cjs).
 */
export type JobLedger =
  { readonly kind: "hostMount"; readonly hostDir: string; readonly nodePath: string } | { readonly kind: "bucket"; readonly uri: string; readonly runtimeBundlePath: string };

/** `CohortRunArgs.execution` for a run that executes as a Kubernetes Job. */
export interface KubernetesJobExecution {
  readonly kind: "kubernetesJob";
  /** The cluster the Job runs in. */
  readonly cluster: JobCluster;
  /** The per-run objects (namespace, RBAC, ConfigMaps) and the Job to create: a RunNamespace with `inClusterRuntime`. */
  readonly run: RunNamespace;
  /** Further resources the Job waits for (Agent Sandbox ready, Kueue gate and ClusterQueue, Temporal). */
  readonly dependsOn: readonly pulumi.Resource[];
  /** Where the ledgers land and how they are read back ({@link JobLedger}). */
  readonly ledger: JobLedger;
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
  const ledgerEnv = ledgerEnvironment(plan.name, args.ledger, job);
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
      environment: { ...logAccess, ...ledgerEnv, COHORT_KEEP_LEDGERS: String(plan.keepLedgers) },
      triggers,
      addPreviousOutputInEnv: true,
      logging: "stderr",
    },
    { parent, dependsOn: [resource] },
  );
  return { resource, summary: summary.stdout.apply(parseRunSummary) };
}

/**
 * The summary step's environment for the ledger choice: `COHORT_ARTIFACTS_DIR` and `COHORT_ARTIFACTS_NODE_PATH`
 * (hostMount), or `COHORT_LEDGER_URI` and `COHORT_RUNTIME_BUNDLE` (bucket).
 *
 * @throws {pulumi.InputPropertyError} naming `execution.ledger.<field>`: an unknown kind, a relative path, or a
 *   bucket the Job does not export to (its `--ledger-export` differs: the RunNamespace's `inClusterRuntime.ledger`)
 */
function ledgerEnvironment(name: string, ledger: JobLedger, job: KubernetesObject): Record<string, string> {
  const bad = (field: string, reason: string) => new pulumi.InputPropertyError({ propertyPath: `execution.ledger.${field}`, reason: `CohortRun ${name}: ${reason}` });
  const kind = (ledger as { kind?: unknown } | undefined)?.kind;
  if (kind === "hostMount") {
    const l = ledger as Extract<JobLedger, { kind: "hostMount" }>;
    if (!path.isAbsolute(l.hostDir)) throw bad("hostDir", `hostDir must be absolute (got ${JSON.stringify(l.hostDir)})`);
    if (!path.posix.isAbsolute(l.nodePath)) throw bad("nodePath", `nodePath must be absolute (got ${JSON.stringify(l.nodePath)})`);
    return { COHORT_ARTIFACTS_DIR: l.hostDir, COHORT_ARTIFACTS_NODE_PATH: l.nodePath };
  }
  if (kind !== "bucket") throw bad("kind", `expected "hostMount" or "bucket" (got ${JSON.stringify(kind)})`);
  const l = ledger as Extract<JobLedger, { kind: "bucket" }>;
  if (typeof l.uri !== "string" || !l.uri.startsWith("gs://")) throw bad("uri", `expected gs://<bucket>[/<prefix>] (got ${JSON.stringify(l.uri)})`);
  if (typeof l.runtimeBundlePath !== "string" || !path.isAbsolute(l.runtimeBundlePath))
    throw bad("runtimeBundlePath", `runtimeBundlePath must be absolute (got ${JSON.stringify(l.runtimeBundlePath)})`);
  const command = (job.spec as { template?: { spec?: { containers?: { command?: string[] }[] } } } | undefined)?.template?.spec?.containers?.[0]?.command ?? [];
  const i = command.indexOf("--ledger-export");
  if (i === -1 || command[i + 1] !== l.uri) {
    throw bad(
      "uri",
      `the run's Job does not export its ledger to ${l.uri} (its --ledger-export: ${i === -1 ? "none" : command[i + 1]}); give the RunNamespace inClusterRuntime.ledger { kind: "bucket", exportUri: ${JSON.stringify(l.uri)} }`,
    );
  }
  return { COHORT_LEDGER_URI: l.uri, COHORT_RUNTIME_BUNDLE: l.runtimeBundlePath };
}

/**
 * The workflow execution of `CohortRun` on a cluster (`execution.kind: "clusterWorkflow"`, docs/temporal.md
 * "local"): the run is the Temporal workflow `<workflowIdPrefix>/<run identity>`, executed by the in-cluster run
 * worker (components/run/worker-manifests.ts) and submitted from this machine, so a killed `pulumi up` followed by
 * `up` attaches to the same run and reads its result: one run, one ledger.
 *
 * Children, in order:
 * 1. `<name>-worker-guard`, a Command on the host (the cluster's `worker-guard` step) whose trigger is the worker
 *    Deployment's object: before the Deployment is created or changed it lists the task queue's running workflows
 *    (`cohort open-runs`) and fails, naming them, when there is one. A rollout is refused while runs are open;
 *    the Deployment and its ConfigMaps depend on the guard, so a refused rollout leaves the running worker alone;
 * 2. the worker's ServiceAccount and ConfigMaps in the worker namespace (one worker per stack, outliving runs), and
 *    its RoleBinding to the run's Role in the run namespace;
 * 3. the Deployment (`cohort-run-worker` in the worker namespace, one replica, `Recreate`): a new run (a new run
 *    namespace) rolls the same Deployment to a new revision, so no worker of an earlier run ever polls beside it;
 *    awaited by pulumi-kubernetes until the new revision's pod is Ready (its readiness probe: the worker polls),
 *    not any ready replica;
 * 4. `<name>-identity` (the run cluster step `run-identity`: 12 random hex digits, kept in state; same triggers as
 *    the run, so a new run gets a new workflow id), after the guard: a refused rollout leaves it as it was;
 * 5. `<name>-run` (`run-submit`): `cohort submit` against Temporal (its host address, or a supervised
 *    `kubectl port-forward`: {@link WorkflowTemporalAccess}) with the workflow id, the ledger root the worker sees
 *    and the RunSpec on stdin; it prints the run's summary with the ledger's home ({@link WorkflowLedger}: the host
 *    path after checking `completion.json` reached the host through the kind mount, or the bucket's copy
 *    downloaded and verified). Its progress
 *    (from `runCohort`'s heartbeats) goes to the provider's status pipe (fd 3): the `-run` row of `pulumi up`.
 *    A run that did not succeed is in the state and fails `pulumi up` with the runtime's one-line reason (the
 *    process executor's contract: `reason`); a workflow that lost its run (the worker died) fails it naming the
 *    cause, and records the workflow id so the next `up` runs again under a new one. Update (an input other than
 *    the triggers changed): `run-keep`, the summary unchanged. Delete: `run-forget` (the ledger removed when
 *    `keepLedgers` is false).
 */
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { jsonDigest } from "../digest.js";
import { createObject } from "../k8s/k8sObject.js";
import { LOST_WORKFLOW_FILE, lastLostWorkflowId, lastUnsuccessfulRunId, UNSUCCESSFUL_RUN_FILE } from "./run-records.js";
import { parseRunSummary, STATUS_FD_ENV, type CohortExecution, type ExecutionPlan } from "./execution.js";
import type { RunNamespace } from "./RunNamespace.js";
import { renderRunWorker, type RunWorkerInput } from "./worker-manifests.js";

/** The host-side steps of the workflow execution (components/kind/steps.cjs and components/gke/steps.cjs have them). */
export type WorkflowHostStepName = "worker-guard" | "run-identity" | "run-submit" | "run-keep" | "run-forget";

/** How a `command:local:Command` runs one host-side step (a `KindHostStep` is one). */
export interface WorkflowHostStep {
  readonly command: string;
  /** The command's `dir` (the project directory). */
  readonly dir: string;
  /** The pinned tools' entries; the executor adds the step's inputs. */
  readonly environment: Readonly<Record<string, string>>;
}

/** The cluster the worker runs in and how its host-side steps run (`KindCluster` and `GkeCluster` satisfy it). */
export interface WorkflowCluster {
  readonly provider: k8s.Provider;
  hostStep(step: WorkflowHostStepName): WorkflowHostStep;
}

/**
 * How this machine reaches Temporal's frontend:
 * - `{ hostAddress }`: directly, `HOST:PORT` (kind's port mapping on `local`);
 * - `{ portForward }`: through a `kubectl port-forward` to the Service that the host steps start and supervise
 *   (components/run/workflow-steps.cjs `withTemporal`: restarted on the same local port when it exits or reports a
 *   lost connection, while the submitter retries; `gke`, whose frontend is not published), with the cluster's
 *   kubeconfig and the pinned kubectl of the host step's environment.
 */
export type WorkflowTemporalAccess =
  | { readonly hostAddress: pulumi.Input<string> }
  | {
      readonly portForward: { readonly namespace: string; readonly service: string; readonly port: number };
      /** The cluster's kubeconfig (a secret). */
      readonly kubeconfig: pulumi.Input<string>;
    };

/**
 * Where the runs' ledgers go and how the submit step reads a run's back:
 * - `hostMount` (kind): the worker writes into `nodePath`, a hostPath of every node that is the host's `hostDir`;
 *   the summary's paths are mapped to the host's after `completion.json` is seen there. The step's records
 *   (components/run/run-records.ts) are kept in `hostDir`.
 * - `bucket` (gke): the worker writes into `podPath` (an emptyDir) and each run exports its ledger to
 *   `uri` (`gs://<bucket>[/<prefix>]`, the worker's backend setting `ledgerExport`, so its ServiceAccount is the one
 *   the bucket's writer binding must name); the submit step downloads and verifies `<uri>/<runId>` with the
 *   runtime bundle at `runtimeBundlePath` (components/gke/steps.cjs `summaryFromBucket`). The records are kept in
 *   `recordsDir` on this machine (absolute).
 */
export type WorkflowLedger =
  | { readonly kind: "hostMount"; readonly hostDir: string; readonly nodePath: string }
  | { readonly kind: "bucket"; readonly uri: string; readonly runtimeBundlePath: string; readonly podPath: string; readonly recordsDir: string };

/** `CohortRunArgs.execution` for a run that is a Temporal workflow executed by an in-cluster worker. */
export interface ClusterWorkflowExecution {
  readonly kind: "clusterWorkflow";
  readonly cluster: WorkflowCluster;
  /** The run namespace (its Role and LocalQueue); without `inClusterRuntime`. */
  readonly run: RunNamespace;
  /** The worker ({@link RunWorkerInput} less what the run namespace and the ledger give). */
  readonly worker: Omit<RunWorkerInput, "namespace" | "localQueue" | "artifactsPath" | "artifactsVolume">;
  readonly temporal: WorkflowTemporalAccess & {
    /** @default `cohort-lab/<stack>` */
    readonly workflowIdPrefix?: string;
  };
  /** The profile recorded in the ledger manifest (`local`, `gke`). */
  readonly profile: string;
  /** The runtime on this machine that submits: `node` and `dist/cohort.cjs` (absolute), with node_modules next to dist/. */
  readonly submitter: { readonly runtimeBundlePath: string };
  /** Where the ledgers go and how the submit step reads them back ({@link WorkflowLedger}). */
  readonly ledger: WorkflowLedger;
  /** What the worker waits for besides the run namespace (Temporal's Deployment). */
  readonly workerDependsOn: readonly pulumi.Resource[];
  /** What the run waits for besides the worker (Agent Sandbox ready, Kueue gate and ClusterQueue; on gke the bucket's writer binding). */
  readonly dependsOn: readonly pulumi.Resource[];
}

/**
 * Creates the worker and the run under `parent` (the CohortRun). See the module doc for the children.
 *
 * @throws {pulumi.InputPropertyError} naming `execution.ledger.<field>` (a relative path, a bucket uri that is not
 *   `gs://…`, an unknown kind) or `execution.submitter.runtimeBundlePath` (a relative path)
 * @throws {RunWorkerFilesError} from {@link renderRunWorker}
 */
export function executeAsClusterWorkflow(plan: ExecutionPlan, args: ClusterWorkflowExecution, parent: pulumi.Resource): CohortExecution {
  const bad = (field: string, reason: string) => new pulumi.InputPropertyError({ propertyPath: `execution.${field}`, reason: `CohortRun ${plan.name}: ${reason}` });
  const ledger = args.ledger;
  const absolute = (field: string, p: string, posix: boolean) => {
    if (!(posix ? path.posix.isAbsolute(p) : path.isAbsolute(p))) throw bad(`ledger.${field}`, `${field} must be absolute (got ${JSON.stringify(p)})`);
  };
  if (ledger.kind === "hostMount") {
    absolute("hostDir", ledger.hostDir, false);
    absolute("nodePath", ledger.nodePath, true);
  } else if (ledger.kind === "bucket") {
    if (!/^gs:\/\/[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](\/[^\s]*)?$/.test(ledger.uri))
      throw bad("ledger.uri", `uri must be gs://<bucket>[/<prefix>] (got ${JSON.stringify(ledger.uri)})`);
    absolute("podPath", ledger.podPath, true);
    absolute("recordsDir", ledger.recordsDir, false);
    absolute("runtimeBundlePath", ledger.runtimeBundlePath, false);
  } else {
    throw bad("ledger.kind", `unknown ledger kind ${JSON.stringify((ledger as { kind?: unknown }).kind)} (hostMount or bucket)`);
  }
  if (!path.isAbsolute(args.submitter.runtimeBundlePath)) throw bad("submitter.runtimeBundlePath", `must be absolute (got ${JSON.stringify(args.submitter.runtimeBundlePath)})`);
  const { cluster, run } = args;
  // A bucket ledger: each run exports to it (the runtime's `ledgerExport` backend setting, runtime/cli.ts).
  const backendSettings = ledger.kind === "bucket" ? { ...(args.worker.backendSettings ?? {}), ledgerExport: ledger.uri } : args.worker.backendSettings;
  const objects = renderRunWorker({
    ...args.worker,
    ...(backendSettings !== undefined ? { backendSettings } : {}),
    namespace: run.namespaceName,
    localQueue: run.localQueueName,
    artifactsPath: ledger.kind === "bucket" ? ledger.podPath : ledger.nodePath,
    artifactsVolume: ledger.kind === "bucket" ? "emptyDir" : "hostPath",
  });
  const opts = { parent, provider: cluster.provider };
  const recordsDir = ledger.kind === "bucket" ? ledger.recordsDir : ledger.hostDir;
  const temporalEnv: Record<string, pulumi.Input<string>> = "portForward" in args.temporal
    ? { COHORT_TEMPORAL_PORT_FORWARD: JSON.stringify(args.temporal.portForward), COHORT_KUBECONFIG: pulumi.secret(args.temporal.kubeconfig) }
    : { COHORT_TEMPORAL_ADDRESS: args.temporal.hostAddress };
  const ledgerEnv: Record<string, string> =
    ledger.kind === "bucket"
      ? {
          COHORT_ARTIFACTS_DIR: ledger.recordsDir,
          COHORT_ARTIFACTS_NODE_PATH: ledger.podPath,
          COHORT_LEDGER_URI: ledger.uri,
          COHORT_RUNTIME_BUNDLE: ledger.runtimeBundlePath,
          // Named in a failed export's message (where the worker's log is).
          COHORT_NAMESPACE: args.worker.workerNamespace,
        }
      : { COHORT_ARTIFACTS_DIR: ledger.hostDir, COHORT_ARTIFACTS_NODE_PATH: ledger.nodePath };
  const hostEnv = { COHORT_BUNDLE: args.submitter.runtimeBundlePath, COHORT_TASK_QUEUE: args.worker.taskQueue, ...temporalEnv };
  const guardStep = cluster.hostStep("worker-guard");
  const guard = new command.local.Command(
    `${plan.name}-worker-guard`,
    {
      create: guardStep.command,
      dir: guardStep.dir,
      environment: { ...guardStep.environment, ...hostEnv },
      // A new worker object (image, files, settings) is a new guard: it runs before the Deployment changes.
      triggers: [jsonDigest(objects.deployment)],
      logging: "stderr",
    },
    { parent, dependsOn: [...args.workerDependsOn] },
  );
  // The ConfigMaps change after the guard: a refused rollout leaves the running worker's objects as they were (a
  // pod recreated later would unpack new parts into the old template, or miss a part ConfigMap deleted).
  const inRun = { ...opts, dependsOn: [...run.resources, guard] };
  const workerObjects = [objects.serviceAccount, objects.config, ...objects.fileParts].map((o) => createObject(plan.name, o, inRun));
  const roleBinding = createObject(plan.name, objects.roleBinding, { ...opts, dependsOn: [...run.resources, workerObjects[0]!] });
  // pulumi-kubernetes awaits the new revision's Ready pod: the images are in the nodes, so 10 minutes is the unpack and the worker's connect.
  const deployment = createObject(plan.name, objects.deployment, {
    ...opts,
    dependsOn: [...run.resources, ...workerObjects, roleBinding, guard, ...args.workerDependsOn],
    customTimeouts: { create: "10m", update: "10m" },
  });

  const triggers = [
    plan.specSha256,
    objects.fileSha256["cohort.cjs"]!,
    run.namespaceName,
    ledger.kind === "bucket" ? ledger.uri : ledger.hostDir,
    lastUnsuccessfulRunId(recordsDir),
    lastLostWorkflowId(recordsDir),
  ];
  const identityStep = cluster.hostStep("run-identity");
  const identity = new command.local.Command(
    `${plan.name}-identity`,
    {
      create: identityStep.command,
      update: identityStep.command,
      dir: identityStep.dir,
      environment: identityStep.environment,
      triggers,
      addPreviousOutputInEnv: true,
      logging: "none",
    },
    // After the guard: an up refused while a run is open (a changed RoleSpec with the previous up killed mid-run)
    // keeps the identity in state, so the up that follows with the program as it was attaches to that run.
    { parent, dependsOn: [guard] },
  );
  const prefix = args.temporal.workflowIdPrefix ?? `cohort-lab/${pulumi.getStack()}`;
  const submit = cluster.hostStep("run-submit");
  const resource = new command.local.Command(
    `${plan.name}-run`,
    {
      create: submit.command,
      // An input change that is not a trigger (e.g. the host address) keeps the summary: the run is not submitted
      // again (a re-submit would attach or read the closed workflow, unless Temporal lost its history).
      update: cluster.hostStep("run-keep").command,
      delete: cluster.hostStep("run-forget").command,
      dir: submit.dir,
      stdin: plan.specJson,
      environment: {
        ...submit.environment,
        ...hostEnv,
        COHORT_WORKFLOW_ID: pulumi.interpolate`${prefix}/${identity.stdout.apply((s) => s.trim())}`,
        ...ledgerEnv,
        COHORT_KEEP_LEDGERS: String(plan.keepLedgers),
        COHORT_PROFILE: args.profile,
        COHORT_UNSUCCESSFUL_RUN_FILE: UNSUCCESSFUL_RUN_FILE,
        COHORT_LOST_WORKFLOW_FILE: LOST_WORKFLOW_FILE,
        // The status pipe on fd 3: the run's progress (runCohort's heartbeats) on this row of `pulumi up`.
        [STATUS_FD_ENV]: "3",
      },
      triggers,
      addPreviousOutputInEnv: true,
      logging: "none",
    },
    { parent, dependsOn: [deployment, identity, ...args.dependsOn] },
  );
  return { resource, summary: resource.stdout.apply(parseRunSummary), reason: resource.stderr };
}

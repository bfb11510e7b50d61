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
 * 2. the worker's ServiceAccount, RoleBinding (to the run's Role) and ConfigMaps, in the run namespace;
 * 3. the Deployment (`cohort-run-worker`, one replica, `Recreate`), awaited by pulumi-kubernetes until the new
 *    revision's pod is Ready (its readiness probe: the worker polls), not any ready replica;
 * 4. `<name>-identity` (the run cluster step `run-identity`: 12 random hex digits, kept in state; same triggers as
 *    the run, so a new run gets a new workflow id);
 * 5. `<name>-run` (`run-submit`): `cohort submit` against Temporal's host address with the workflow id, the ledger
 *    root the worker sees (`ledger.nodePath`) and the RunSpec on stdin; it prints the run's summary with the
 *    ledger's host path (after checking `completion.json` reached the host through the kind mount). Its progress
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

/** The host-side steps of the workflow execution (components/kind/steps.cjs has them). */
export type WorkflowHostStepName = "worker-guard" | "run-identity" | "run-submit" | "run-keep" | "run-forget";

/** How a `command:local:Command` runs one host-side step (a `KindHostStep` is one). */
export interface WorkflowHostStep {
  readonly command: string;
  /** The command's `dir` (the project directory). */
  readonly dir: string;
  /** The pinned tools' entries; the executor adds the step's inputs. */
  readonly environment: Readonly<Record<string, string>>;
}

/** The cluster the worker runs in and how its host-side steps run (`KindCluster` satisfies it). */
export interface WorkflowCluster {
  readonly provider: k8s.Provider;
  hostStep(step: WorkflowHostStepName): WorkflowHostStep;
}

/** `CohortRunArgs.execution` for a run that is a Temporal workflow executed by an in-cluster worker. */
export interface ClusterWorkflowExecution {
  readonly kind: "clusterWorkflow";
  readonly cluster: WorkflowCluster;
  /** The run namespace (its Role and LocalQueue); without `inClusterRuntime`. */
  readonly run: RunNamespace;
  /** The worker ({@link RunWorkerInput} less what the run namespace gives). */
  readonly worker: Omit<RunWorkerInput, "namespace" | "localQueue">;
  readonly temporal: {
    /** Temporal's frontend as this machine reaches it, `HOST:PORT` (kind's port mapping). */
    readonly hostAddress: pulumi.Input<string>;
    /** @default `cohort-lab/<stack>` */
    readonly workflowIdPrefix?: string;
  };
  /** The profile recorded in the ledger manifest (`local`). */
  readonly profile: string;
  /** The runtime on this machine that submits: `node` and `dist/cohort.cjs` (absolute), with node_modules next to dist/. */
  readonly submitter: { readonly runtimeBundlePath: string };
  /** The host directory of the ledgers, and the same directory as the worker sees it (the nodes' mount). */
  readonly ledger: { readonly hostDir: string; readonly nodePath: string };
  /** What the worker waits for besides the run namespace (Temporal's Deployment). */
  readonly workerDependsOn: readonly pulumi.Resource[];
  /** What the run waits for besides the worker (Agent Sandbox ready, Kueue gate and ClusterQueue). */
  readonly dependsOn: readonly pulumi.Resource[];
}

/**
 * Creates the worker and the run under `parent` (the CohortRun). See the module doc for the children.
 *
 * @throws {pulumi.InputPropertyError} naming `execution.ledger.<field>` or `execution.submitter.runtimeBundlePath` for a relative path
 * @throws {RunWorkerFilesError} from {@link renderRunWorker}
 */
export function executeAsClusterWorkflow(plan: ExecutionPlan, args: ClusterWorkflowExecution, parent: pulumi.Resource): CohortExecution {
  const bad = (field: string, reason: string) => new pulumi.InputPropertyError({ propertyPath: `execution.${field}`, reason: `CohortRun ${plan.name}: ${reason}` });
  if (!path.isAbsolute(args.ledger.hostDir)) throw bad("ledger.hostDir", `hostDir must be absolute (got ${JSON.stringify(args.ledger.hostDir)})`);
  if (!path.posix.isAbsolute(args.ledger.nodePath)) throw bad("ledger.nodePath", `nodePath must be absolute (got ${JSON.stringify(args.ledger.nodePath)})`);
  if (!path.isAbsolute(args.submitter.runtimeBundlePath)) throw bad("submitter.runtimeBundlePath", `must be absolute (got ${JSON.stringify(args.submitter.runtimeBundlePath)})`);
  const { cluster, run } = args;
  const objects = renderRunWorker({ ...args.worker, namespace: run.namespaceName, localQueue: run.localQueueName });
  const opts = { parent, provider: cluster.provider };
  const hostEnv = {
    COHORT_BUNDLE: args.submitter.runtimeBundlePath,
    COHORT_TEMPORAL_ADDRESS: args.temporal.hostAddress,
    COHORT_TASK_QUEUE: args.worker.taskQueue,
  };
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
    args.ledger.hostDir,
    lastUnsuccessfulRunId(args.ledger.hostDir),
    lastLostWorkflowId(args.ledger.hostDir),
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
    { parent },
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
        COHORT_ARTIFACTS_DIR: args.ledger.hostDir,
        COHORT_ARTIFACTS_NODE_PATH: args.ledger.nodePath,
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

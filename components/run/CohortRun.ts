/**
 * `CohortRun`: one run of a cohort through the bundled runtime, executed during `pulumi up`.
 *
 * Lifecycle (how it maps onto `@pulumi/command` `local.Command` semantics, v1.2.1,
 * https://github.com/pulumi/pulumi-command/blob/v1.2.1/provider/pkg/provider/local/commandController.go):
 * - **create** runs the cohort: `node <bundle> run --spec - --artifacts <root> --profile <p> --backend <b>`,
 *   the RunSpec on stdin (nothing long or secret in a command line). The runtime admits, starts, probes,
 *   holds and tears down the members, writes the ledger, and prints one JSON summary line on stdout,
 *   which becomes the typed outputs. Its stderr goes to a temp file. Whatever the outcome, a run
 *   that happened ends the step with exit 0 and its summary, so the state (and the stack outputs) record THIS
 *   run, failed or interrupted included; for a run that did not succeed the step also prints the runtime's
 *   last stderr line (the one-line reason naming the member) on stderr and the component fails the deployment
 *   with it (`pulumi.log.error`), so `pulumi up` still exits non-zero. The run id of the last unsuccessful
 *   run under the artifact root is a trigger, so the next `up` runs the cohort again. When no run happened
 *   (a refused spec, the artifact root's run lock held by a live run) the step fails with that line.
 *   The runtime runs with `--lock` (one live run per artifact root) and `--watch-pid` (the step shell and
 *   the provider: if either dies, the run ends by itself); a signal to the step is passed to the runtime.
 *   Its progress lines (`--progress-fd 3`, at most two a second, naming members that became ready and, near
 *   the end, those still awaited) go to fd 3, which the substitute command provider opens as a status pipe
 *   when the environment has `COHORT_STATUS_FD=3`: they appear as ephemeral info on this resource's row
 *   during `pulumi up` and are stored nowhere (not in the `stderr` output, not in the failure message).
 *   With the upstream provider fd 3 is not open: the runtime notes that in its stderr and drops progress.
 * - **guard** (`<name>-guard`, see {@link COHORT_GUARD_STEPS}): deleted after the run, it stops the run the
 *   artifact root's run lock names, which covers a run that never reached the state.
 * - **triggers** = [spec digest, runtime bundle digest, artifact root, profile, backend, last unsuccessful
 *   run id, then `runAgainOn` when given]: any change to
 *   what would run replaces the resource, i.e. a new run with a new ledger. Unchanged: the engine sees
 *   no diff and nothing runs.
 * - **update** (inputs that do not change the run, e.g. `keepLedgers` or these scripts): prints the
 *   previous summary (`PULUMI_COMMAND_STDOUT`) again, so the run and its outputs are kept.
 * - **delete** (destroy, or the old run after a replacement) runs the delete step stored in state with
 *   the previous stdout in `PULUMI_COMMAND_STDOUT`: it takes the run directory (`ledgerPath`) from that
 *   summary, runs `cohort reap <runDir>` (stops any member or runtime process the run left behind;
 *   idempotent), and removes the run directory only when `keepLedgers` is false.
 *
 * The run id is chosen by the runtime (`<name>-<UTC time>-<6 hex>`), not by the program: that keeps
 * every run's ledger directory new even when the same spec runs again after a destroy; the delete step
 * finds it through the stored summary rather than through anything computed at program time.
 *
 * All steps share one shell script passed as the `interpreter` (`/bin/sh -c <script> cohort <step>`);
 * `create`/`update`/`delete` are only the step names `cohort run`/`cohort keep`/`cohort reap`. That keeps
 * the provider's failure message short: `exit status 1: running "cohort run":` + the reason.
 */
import path from "node:path";
import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import { canonicalJson, sha256Hex, type RunSpec } from "../../runtime/index.js";
import { parseRunSummary, STATUS_FD_ENV, type CohortExecution, type ExecutionPlan, type RunOutcome, type RunSummary } from "./execution.js";
import { executeAsKubernetesJob, type KubernetesJobExecution } from "./kubernetesJob.js";
import { executeAsClusterWorkflow, type ClusterWorkflowExecution } from "./clusterWorkflow.js";
import { LOST_WORKFLOW_FILE, lastLostWorkflowId, lastUnsuccessfulRunId, UNSUCCESSFUL_RUN_FILE } from "./run-records.js";

export { LOST_WORKFLOW_FILE, lastLostWorkflowId, lastUnsuccessfulRunId, UNSUCCESSFUL_RUN_FILE } from "./run-records.js";

export { parseRunSummary, STATUS_FD_ENV, type CohortExecution, type ExecutionPlan, type RunOutcome, type RunSummary };
export type { JobCluster, KubernetesJobExecution } from "./kubernetesJob.js";

/**
 * Members per role, in the RunSpec's role order, e.g. `{ router: 1, agent: 8 }`.
 *
 * @param spec - a validated RunSpec (replicas defaulted)
 */
export function rosterOf(spec: Pick<RunSpec, "roles">): Record<string, number> {
  return Object.fromEntries(spec.roles.map((role) => [role.name, role.replicas]));
}

/** One line for `pulumi preview`: `roster: router 1, agent 8 (9 members)`. */
export function rosterLine(roster: Readonly<Record<string, number>>): string {
  const total = Object.values(roster).reduce((sum, n) => sum + n, 0);
  return `roster: ${Object.entries(roster)
    .map(([role, n]) => `${role} ${n}`)
    .join(", ")} (${total} member${total === 1 ? "" : "s"})`;
}

/** Where the runtime comes from (a {@link HostProfile} satisfies it). */
export interface CohortRuntimeRef {
  /** Absolute path of the runtime bundle (a `.cjs` file that runs with plain Node). */
  readonly runtimeBundlePath: pulumi.Input<string>;
  /** Its lower-case hex SHA-256 (a trigger: a different runtime is a different run). */
  readonly runtimeBundleSha256: pulumi.Input<string>;
  /** Absolute path of the Node binary that runs it. */
  readonly nodePath: pulumi.Input<string>;
}

/**
 * The run executes as a child process of the command provider on this machine (`host`, `sim`): the bundled
 * runtime with the given backend (`process`, or `kubernetes` from outside the cluster with a config file).
 */
export interface ProcessExecution {
  readonly kind: "process";
  /** The runtime to run it with (a {@link HostProfile} satisfies it). */
  readonly runtime: CohortRuntimeRef;
  /** Absolute path of the artifact root; the ledger goes to `<artifactRoot>/<runId>`. */
  readonly artifactRoot: string;
  /** Profile name recorded in the ledger manifest (`--profile`). */
  readonly profile: string;
  /** Runtime backend (`--backend`). @default "process" */
  readonly backend?: string;
  /**
   * Path of a backend config file (`--backend-config`, JSON or YAML) the runtime reads, e.g. the `sim`
   * profile's out-of-cluster Kubernetes settings (kubeconfig path, namespace, queue). @default none
   */
  readonly backendConfigFile?: pulumi.Input<string>;
  /** Where to look for a runtime to reap with if the bundle copy was deleted out of band. @default none */
  readonly fallbackRuntimeBundlePath?: string;
  /**
   * What the run ran on, as one string (e.g. the `multipass` profile's VM launch ids): appended to the triggers when
   * given and not empty, so a change (a VM launched again) runs the cohort again. Absent or "": the triggers are
   * exactly as before.
   * @default none
   */
  readonly runAgainOn?: pulumi.Input<string>;
  /**
   * Run the cohort as a Temporal workflow ({@link COHORT_SUBMIT_SCRIPT}, docs/temporal.md) instead of
   * `cohort run`: `cohort submit` with the workflow id `<workflowIdPrefix>/<run identity>`, the identity a
   * random id kept in state (the `<name>-identity` Command, replaced with the run), so a killed `pulumi up`
   * followed by `up` attaches to the same run. Needs `backendConfigFile` (the run worker's). @default none
   */
  readonly temporal?: TemporalExecution;
}

/** Where the workflow mode submits (see {@link ProcessExecution.temporal}). */
export interface TemporalExecution {
  /** Temporal frontend `HOST:PORT` (the sim's `temporalAddress`). */
  readonly address: pulumi.Input<string>;
  /** Task queue the run worker polls (`queues.temporalTaskQueue`). */
  readonly taskQueue: string;
  /** @default `cohort-lab/<stack>` */
  readonly workflowIdPrefix?: string;
}

/**
 * How a run executes: a local process ({@link ProcessExecution}), a Kubernetes Job in a given cluster
 * ({@link KubernetesJobExecution}, components/run/kubernetesJob.ts), or a Temporal workflow executed by a run worker
 * in the cluster ({@link ClusterWorkflowExecution}, components/run/clusterWorkflow.ts). Each kind takes only what it uses.
 */
export type CohortRunExecution = ProcessExecution | KubernetesJobExecution | ClusterWorkflowExecution;

/** Arguments of {@link CohortRun}. */
export interface CohortRunArgs {
  /** The validated RunSpec with defaults applied (runtime/core/spec.ts `validateRunSpec`). */
  readonly spec: RunSpec;
  /** `false`: deleting the run (destroy, replacement) removes its ledger directory too. @default true */
  readonly keepLedgers?: boolean;
  /** Where and how the run executes. */
  readonly execution: CohortRunExecution;
}

/**
 * A run as the stacks export it (the `run` stack output of every profile): the runtime's summary with the run
 * id as `id` (the key CI jobs read), plus the RunSpec digest.
 */
export interface CohortRunSummary {
  /** Run id, `<cohort name>-<UTC yyyymmddThhmmssZ>-<6 hex>`. */
  readonly id: string;
  readonly outcome: RunOutcome;
  /** Members in the roster. */
  readonly size: number;
  /** Members that became ready (equals `size` on success). */
  readonly readyCount: number;
  /** Milliseconds from admission until the whole roster was ready; `null` if it never was. */
  readonly timeToReadyMs: number | null;
  /** Absolute path (on this machine) of the run's ledger directory. */
  readonly ledgerPath: string;
  /** `null`, or the first failure: the member and the first line of its reason. */
  readonly firstFailure: { readonly member: string | null; readonly reason: string } | null;
  /** SHA-256 of the canonical RunSpec, equal to the ledger manifest's `specSha256`. */
  readonly specSha256: string;
  /** Absolute path of the run's HTML report (`report.html` in the ledger directory); `null` when it was not written. */
  readonly reportPath: string | null;
}

/** The typed outputs of a run. */
export interface CohortRunOutputs {
  readonly runId: pulumi.Output<string>;
  readonly outcome: pulumi.Output<RunOutcome>;
  readonly size: pulumi.Output<number>;
  readonly readyCount: pulumi.Output<number>;
  readonly timeToReadyMs: pulumi.Output<number | null>;
  readonly ledgerPath: pulumi.Output<string>;
  /** `null`, or the first failure: the member and the first line of the reason. */
  readonly firstFailure: pulumi.Output<{ readonly member: string | null; readonly reason: string } | null>;
  readonly reportPath: pulumi.Output<string | null>;
}

/**
 * The shared step script (see the module doc). Inputs arrive as environment variables:
 * `COHORT_NODE`, `COHORT_BUNDLE`, `COHORT_BUNDLE_FALLBACK`, `COHORT_ARTIFACT_ROOT`, `COHORT_PROFILE`,
 * `COHORT_BACKEND`, `COHORT_BACKEND_CONFIG` (optional), `COHORT_KEEP_LEDGERS`; the provider adds `PULUMI_COMMAND_STDOUT` (previous summary).
 * Its text (comments included) is the `interpreter` input of every run and guard Command, stored in each stack's
 * state: any edit is an update of every existing stack's run resources, so change it only with a reason.
 */
export const COHORT_RUN_SCRIPT = `set -u
case "$1" in
"cohort run")
  spec="" out="" log="" child=""
  # Temp files go on every exit path a shell can see (a SIGKILL of this shell is the one it cannot).
  trap 'rm -f -- "$spec" "$out" "$log"' EXIT
  # A signal to this step (the provider's cancel, a kill) goes to the runtime, which ends the run as
  # interrupted within its grace period; the step then reports that run like any other.
  forward() { if [ -n "$child" ]; then kill -"$1" "$child" 2>/dev/null; fi; }
  trap 'forward TERM' TERM
  trap 'forward INT' INT
  trap 'forward HUP' HUP
  spec=$(mktemp "\${TMPDIR:-/tmp}/cohort-run.XXXXXX") || exit 1
  out=$(mktemp "\${TMPDIR:-/tmp}/cohort-run.XXXXXX") || exit 1
  log=$(mktemp "\${TMPDIR:-/tmp}/cohort-run.XXXXXX") || exit 1
  cat >"$spec" || exit 1
  # In the background so that the traps above run while it runs; --watch-pid: this shell and the provider
  # (its parent): if either dies, e.g. with the Pulumi CLI, the runtime ends the run by itself.
  "$COHORT_NODE" "$COHORT_BUNDLE" run --spec "$spec" --artifacts "$COHORT_ARTIFACT_ROOT" --profile "$COHORT_PROFILE" --backend "$COHORT_BACKEND" \${COHORT_BACKEND_CONFIG:+--backend-config "$COHORT_BACKEND_CONFIG"} \${COHORT_STATUS_FD:+--progress-fd "$COHORT_STATUS_FD"} --lock --watch-pid "$$" --watch-pid "$PPID" </dev/null >"$out" 2>"$log" &
  child=$!
  wait "$child"
  rc=$?
  while kill -0 "$child" 2>/dev/null; do
    wait "$child"
    rc=$?
  done
  child=""
  trap '' PIPE
  summary=$(tail -n 1 "$out")
  reason=$(tail -n 1 "$log")
  case "$summary" in
  '{"runId":'*)
    # A run happened: its summary is the resource's state whatever its outcome, so the stack outputs name
    # this run; the program fails the deployment with the reason on stderr (components/CohortRun.ts).
    printf '%s\\n' "$summary"
    if [ "$rc" -ne 0 ]; then
      printf '%s\\n' "\${reason:-the cohort runtime exited with status $rc and printed no reason}" >&2
      { printf '%s\\n' "$summary" >"$COHORT_ARTIFACT_ROOT/${UNSUCCESSFUL_RUN_FILE}.tmp" && mv -f "$COHORT_ARTIFACT_ROOT/${UNSUCCESSFUL_RUN_FILE}.tmp" "$COHORT_ARTIFACT_ROOT/${UNSUCCESSFUL_RUN_FILE}"; } 2>/dev/null
    fi
    exit 0
    ;;
  esac
  printf '%s\\n' "\${reason:-the cohort runtime exited with status $rc and printed no reason}" >&2
  exit "$rc"
  ;;
"cohort guard")
  ;;
"cohort release")
  bundle=$COHORT_BUNDLE
  if [ ! -f "$bundle" ] && [ -n "$COHORT_BUNDLE_FALLBACK" ] && [ -f "$COHORT_BUNDLE_FALLBACK" ]; then bundle=$COHORT_BUNDLE_FALLBACK; fi
  if [ -f "$bundle" ]; then "$COHORT_NODE" "$bundle" reap --artifacts "$COHORT_ARTIFACT_ROOT" >&2 || exit 1; fi
  ;;
"cohort keep")
  printf '%s' "\${PULUMI_COMMAND_STDOUT:-}"
  ;;
"cohort reap")
  if [ -z "\${PULUMI_COMMAND_STDOUT:-}" ]; then exit 0; fi
  dir=$("$COHORT_NODE" -p 'JSON.parse(process.env.PULUMI_COMMAND_STDOUT).ledgerPath') || exit 1
  bundle=$COHORT_BUNDLE
  if [ ! -f "$bundle" ] && [ -n "$COHORT_BUNDLE_FALLBACK" ] && [ -f "$COHORT_BUNDLE_FALLBACK" ]; then bundle=$COHORT_BUNDLE_FALLBACK; fi
  if [ -f "$bundle" ]; then
    "$COHORT_NODE" "$bundle" reap "$dir" >&2 || exit 1
  elif [ -d "$dir" ]; then
    echo "cannot reap run $dir: the runtime bundle $COHORT_BUNDLE is gone; run npm run build, then destroy again" >&2
    exit 1
  fi
  if [ "$COHORT_KEEP_LEDGERS" != true ]; then rm -rf -- "$dir"; fi
  ;;
*)
  echo "cohort: unknown step '$1'" >&2
  exit 2
  ;;
esac
`;

/**
 * File under the artifact root where the workflow mode's step script records the run worker it started
 * (`cohort worker`, detached in a session of its own): its pid. Its log is {@link RUN_WORKER_LOG_FILE}.
 */
export const RUN_WORKER_PID_FILE = ".cohort-worker.pid";

/** The detached run worker's stdout and stderr, appended (see {@link RUN_WORKER_PID_FILE}). */
export const RUN_WORKER_LOG_FILE = ".cohort-worker.log";

/**
 * What the detached run worker was started for (see {@link RUN_WORKER_PID_FILE}): one line, `<temporal address>
 * <task queue> <backend config path> <its SHA-256> <runtime bundle SHA-256>`. A submit whose line differs (a new
 * run namespace, a new bundle) rolls the worker: refused while a run is open on the queue, else the worker is
 * stopped and started again, as the worker Deployment of `local` rolls (components/run/worker-manifests.ts).
 */
export const RUN_WORKER_KEY_FILE = ".cohort-worker.key";

/**
 * The step script of the workflow mode ({@link ProcessExecution.temporal}, docs/temporal.md "The sim stack"):
 * the run is the Temporal workflow `COHORT_WORKFLOW_ID`, submitted with `cohort submit` (start-or-attach), so a
 * killed `pulumi up` followed by `up` attaches to the same run. Inputs as {@link COHORT_RUN_SCRIPT}'s plus
 * `COHORT_TEMPORAL_ADDRESS`, `COHORT_TASK_QUEUE`, `COHORT_WORKFLOW_ID` and `COHORT_BACKEND_CONFIG`
 * (required: the run worker's backend config).
 * Steps:
 * - `cohort identity`: prints 12 random hex digits: the run identity, kept in state once created.
 * - `cohort submit`: starts the run worker unless the one {@link RUN_WORKER_PID_FILE} names is alive and was
 *   started for this run ({@link RUN_WORKER_KEY_FILE}: otherwise it rolls, refused while a run is open on the
 *   queue) (`setsid`: it outlives the step, the provider and the Pulumi CLI), then submits and waits; the summary line
 *   and the unsuccessful-run record exactly as `cohort run` in {@link COHORT_RUN_SCRIPT}. A signal to the step
 *   ends the submitter only: the workflow and its run go on (the next `up` attaches).
 * - `cohort release` (the guard's delete: destroy): stops the run worker (SIGTERM; its running run completes
 *   its ledger `interrupted`), then reaps what the artifact root's run lock names.
 * - `cohort keep`, `cohort reap`, `cohort guard`: as in {@link COHORT_RUN_SCRIPT}.
 * Its text is the `interpreter` of the workflow mode's Commands, stored in the state: change it only with a reason.
 */
export const COHORT_SUBMIT_SCRIPT = `set -u
worker_alive() {
  [ -f "$COHORT_ARTIFACT_ROOT/${RUN_WORKER_PID_FILE}" ] || return 1
  wpid=$(cat "$COHORT_ARTIFACT_ROOT/${RUN_WORKER_PID_FILE}" 2>/dev/null) || return 1
  [ -n "$wpid" ] && tr '\\0' ' ' <"/proc/$wpid/cmdline" 2>/dev/null | grep -q " worker --temporal-address "
}
worker_stop() {
  kill -TERM "$wpid" 2>/dev/null
  n=0
  while kill -0 "$wpid" 2>/dev/null && [ "$n" -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
  if kill -0 "$wpid" 2>/dev/null; then kill -KILL "$wpid" 2>/dev/null; fi
  rm -f -- "$COHORT_ARTIFACT_ROOT/${RUN_WORKER_PID_FILE}" "$COHORT_ARTIFACT_ROOT/${RUN_WORKER_KEY_FILE}"
}
# Sets roll=1 when the live worker was started for another run (its key differs) and no run is open on the queue;
# fails, saying why on stderr, when one is (a rollout would take that run's activity down with it).
roll_check() {
  roll=0
  worker_alive || return 0
  [ "$(cat "$COHORT_ARTIFACT_ROOT/${RUN_WORKER_KEY_FILE}" 2>/dev/null)" = "$(worker_key)" ] && return 0
  err=$(mktemp "\${TMPDIR:-/tmp}/cohort-open-runs.XXXXXX") || return 1
  open=$("$COHORT_NODE" "$COHORT_BUNDLE" open-runs --temporal-address "$COHORT_TEMPORAL_ADDRESS" --task-queue "$COHORT_TASK_QUEUE" --wait-s 120 2>"$err")
  orc=$?
  last=$(tail -n 1 "$err")
  rm -f -- "$err"
  if [ "$orc" -eq 3 ]; then
    printf '%s\\n' "the run worker cannot roll while runs are open on task queue $COHORT_TASK_QUEUE (a rollout would stop a running activity): $(printf '%s' "$open" | tr '\\n' ';' | sed 's/;$//; s/;/; /g'). Let them finish (\\\`pulumi up\\\` with the unchanged program attaches to a run and waits for it), or cancel one: temporal workflow cancel --address $COHORT_TEMPORAL_ADDRESS --workflow-id $(printf '%s' "$open" | head -n 1 | cut -d ' ' -f 1)" >&2
    return 1
  elif [ "$orc" -ne 0 ]; then
    printf '%s\\n' "cohort open-runs exited with status $orc: $last" >&2
    return 1
  fi
  roll=1
}
worker_key() {
  conf=$(sha256sum <"$COHORT_BACKEND_CONFIG" 2>/dev/null) || conf=missing
  printf '%s\\n' "$COHORT_TEMPORAL_ADDRESS $COHORT_TASK_QUEUE $COHORT_BACKEND_CONFIG \${conf%% *} \${COHORT_BUNDLE_SHA256:-}"
}
bundle_or_fallback() {
  bundle=$COHORT_BUNDLE
  if [ ! -f "$bundle" ] && [ -n "$COHORT_BUNDLE_FALLBACK" ] && [ -f "$COHORT_BUNDLE_FALLBACK" ]; then bundle=$COHORT_BUNDLE_FALLBACK; fi
}
case "$1" in
"cohort identity")
  # A new run's identity only once its worker may roll: a refused up keeps the identity in state, so the up with
  # the program as it was attaches to the open run.
  if ! roll_check; then exit 1; fi
  od -An -N6 -tx1 /dev/urandom | tr -d ' \\n' || exit 1
  printf '\\n'
  ;;
"cohort submit")
  spec="" out="" log="" child=""
  trap 'rm -f -- "$spec" "$out" "$log"' EXIT
  # A signal ends the submitter only; the workflow (and the run in the worker) goes on.
  forward() { if [ -n "$child" ]; then kill -"$1" "$child" 2>/dev/null; fi; }
  trap 'forward TERM' TERM
  trap 'forward INT' INT
  trap 'forward HUP' HUP
  spec=$(mktemp "\${TMPDIR:-/tmp}/cohort-run.XXXXXX") || exit 1
  out=$(mktemp "\${TMPDIR:-/tmp}/cohort-run.XXXXXX") || exit 1
  log=$(mktemp "\${TMPDIR:-/tmp}/cohort-run.XXXXXX") || exit 1
  cat >"$spec" || exit 1
  mkdir -p "$COHORT_ARTIFACT_ROOT" || exit 1
  key=$(worker_key)
  if ! roll_check; then exit 1; fi
  if [ "$roll" = 1 ]; then
    printf '%s\\n' "run worker $wpid serves another run: stopping it (no run open on task queue $COHORT_TASK_QUEUE)" >>"$COHORT_ARTIFACT_ROOT/${RUN_WORKER_LOG_FILE}"
    worker_stop
  fi
  if ! worker_alive; then
    # A session of its own: no signal to the provider's group or the step reaches it.
    setsid "$COHORT_NODE" "$COHORT_BUNDLE" worker --temporal-address "$COHORT_TEMPORAL_ADDRESS" --task-queue "$COHORT_TASK_QUEUE" --backend-config "$COHORT_BACKEND_CONFIG" </dev/null >>"$COHORT_ARTIFACT_ROOT/${RUN_WORKER_LOG_FILE}" 2>&1 &
    printf '%s\\n' "$!" >"$COHORT_ARTIFACT_ROOT/${RUN_WORKER_PID_FILE}" || exit 1
    printf '%s\\n' "$key" >"$COHORT_ARTIFACT_ROOT/${RUN_WORKER_KEY_FILE}" || exit 1
  fi
  "$COHORT_NODE" "$COHORT_BUNDLE" submit --temporal-address "$COHORT_TEMPORAL_ADDRESS" --task-queue "$COHORT_TASK_QUEUE" --workflow-id "$COHORT_WORKFLOW_ID" --artifacts "$COHORT_ARTIFACT_ROOT" --profile "$COHORT_PROFILE" --sole --spec "$spec" </dev/null >"$out" 2>"$log" &
  child=$!
  wait "$child"
  rc=$?
  while kill -0 "$child" 2>/dev/null; do
    wait "$child"
    rc=$?
  done
  child=""
  trap '' PIPE
  summary=$(tail -n 1 "$out")
  reason=$(grep -v '^cohort: run .* succeeded; ledger ' "$log" | tail -n 1)
  case "$summary" in
  '{"runId":'*)
    printf '%s\\n' "$summary"
    if [ "$rc" -ne 0 ]; then
      printf '%s\\n' "\${reason:-the cohort runtime exited with status $rc and printed no reason}" >&2
      { printf '%s\\n' "$summary" >"$COHORT_ARTIFACT_ROOT/${UNSUCCESSFUL_RUN_FILE}.tmp" && mv -f "$COHORT_ARTIFACT_ROOT/${UNSUCCESSFUL_RUN_FILE}.tmp" "$COHORT_ARTIFACT_ROOT/${UNSUCCESSFUL_RUN_FILE}"; } 2>/dev/null
    fi
    exit 0
    ;;
  esac
  if grep -q "^cohort: workflow .* lost the run: " "$log"; then
    { printf '%s\\n' "$COHORT_WORKFLOW_ID" >"$COHORT_ARTIFACT_ROOT/${LOST_WORKFLOW_FILE}.tmp" && mv -f "$COHORT_ARTIFACT_ROOT/${LOST_WORKFLOW_FILE}.tmp" "$COHORT_ARTIFACT_ROOT/${LOST_WORKFLOW_FILE}"; } 2>/dev/null
  fi
  printf '%s\\n' "\${reason:-cohort submit exited with status $rc and printed no reason}" >&2
  exit "$rc"
  ;;
"cohort guard")
  ;;
"cohort release")
  if worker_alive; then worker_stop; fi
  rm -f -- "$COHORT_ARTIFACT_ROOT/${RUN_WORKER_PID_FILE}" "$COHORT_ARTIFACT_ROOT/${RUN_WORKER_KEY_FILE}"
  bundle_or_fallback
  if [ -f "$bundle" ]; then "$COHORT_NODE" "$bundle" reap --artifacts "$COHORT_ARTIFACT_ROOT" >&2 || exit 1; fi
  ;;
"cohort keep")
  printf '%s' "\${PULUMI_COMMAND_STDOUT:-}"
  ;;
"cohort reap")
  if [ -z "\${PULUMI_COMMAND_STDOUT:-}" ]; then exit 0; fi
  dir=$("$COHORT_NODE" -p 'JSON.parse(process.env.PULUMI_COMMAND_STDOUT).ledgerPath') || exit 1
  bundle_or_fallback
  if [ -f "$bundle" ]; then
    "$COHORT_NODE" "$bundle" reap "$dir" >&2 || exit 1
  elif [ -d "$dir" ]; then
    echo "cannot reap run $dir: the runtime bundle $COHORT_BUNDLE is gone; run npm run build, then destroy again" >&2
    exit 1
  fi
  if [ "$COHORT_KEEP_LEDGERS" != true ]; then rm -rf -- "$dir"; fi
  ;;
*)
  echo "cohort: unknown step '$1'" >&2
  exit 2
  ;;
esac
`;

/** The workflow mode's step names (see {@link COHORT_SUBMIT_SCRIPT}). */
export const COHORT_SUBMIT_STEPS = { identity: "cohort identity", create: "cohort submit", update: "cohort keep", delete: "cohort reap" } as const;

/** The step names given to the provider as `create`, `update` and `delete`. */
export const COHORT_RUN_STEPS = { create: "cohort run", update: "cohort keep", delete: "cohort reap" } as const;

/**
 * The steps of the run guard (`<name>-guard`), created before the run and deleted after it: its delete
 * (`pulumi destroy`, or a changed artifact root) stops the run the artifact root's run lock names
 * (`cohort reap --artifacts`), which reaches a run that never reached the state (an `up` killed mid-run).
 */
export const COHORT_GUARD_STEPS = { create: "cohort guard", delete: "cohort release" } as const;

/**
 * Lower-case hex SHA-256 of the canonical JSON of a RunSpec: the same digest the runtime records as
 * `specSha256` in the ledger manifest (runtime/core/ledger.ts `canonicalJson`).
 */
export function runSpecSha256(spec: RunSpec): string {
  return sha256Hex(canonicalJson(spec, "spec"));
}

/**
 * The `process` executor: the runtime runs as a child of the command provider on this machine.
 * Kept apart from the class so other executors (a Kubernetes Job) can be added beside it.
 */
export function executeAsProcess(plan: ExecutionPlan, args: ProcessExecution, parent: pulumi.Resource): CohortExecution {
  if (args.temporal !== undefined) return executeAsWorkflow(plan, args, args.temporal, parent);
  const backend = args.backend ?? "process";
  const interpreter = ["/bin/sh", "-c", COHORT_RUN_SCRIPT, "cohort"];
  const runtimeEnv = {
    COHORT_NODE: args.runtime.nodePath,
    COHORT_BUNDLE: args.runtime.runtimeBundlePath,
    COHORT_BUNDLE_FALLBACK: args.fallbackRuntimeBundlePath ?? "",
    COHORT_ARTIFACT_ROOT: args.artifactRoot,
  };
  const guard = new command.local.Command(
    `${plan.name}-guard`,
    { interpreter, create: COHORT_GUARD_STEPS.create, delete: COHORT_GUARD_STEPS.delete, environment: runtimeEnv, triggers: [args.artifactRoot], logging: "stderr" },
    { parent },
  );
  const baseTriggers = [plan.specSha256, args.runtime.runtimeBundleSha256, args.artifactRoot, args.profile, backend, lastUnsuccessfulRunId(args.artifactRoot)];
  const resource = new command.local.Command(
    `${plan.name}-run`,
    {
      interpreter,
      create: COHORT_RUN_STEPS.create,
      update: COHORT_RUN_STEPS.update,
      delete: COHORT_RUN_STEPS.delete,
      stdin: plan.specJson,
      environment: {
        ...runtimeEnv,
        COHORT_PROFILE: args.profile,
        COHORT_BACKEND: backend,
        ...(args.backendConfigFile !== undefined ? { COHORT_BACKEND_CONFIG: args.backendConfigFile } : {}),
        COHORT_KEEP_LEDGERS: String(plan.keepLedgers),
        // The substitute command provider opens fd 3 as a status pipe: the runtime's progress lines
        // (`--progress-fd 3`) are shown on this resource's row in `pulumi up` and stored nowhere.
        [STATUS_FD_ENV]: "3",
      },
      // The last: the run id of the last unsuccessful run under the artifact root, so that a failed or
      // interrupted run in the state is run again by the next `up`, and a success after it changes nothing.
      // `runAgainOn` "" or absent: exactly the triggers before it existed.
      triggers:
        args.runAgainOn === undefined ? baseTriggers : pulumi.all([pulumi.all(baseTriggers), args.runAgainOn]).apply(([base, again]) => (again === "" ? base : [...base, again])),
      addPreviousOutputInEnv: true,
      // stdout is the summary (it becomes outputs), stderr is sent to a temp file by the script; progress
      // goes through the status pipe (fd 3), which is neither captured in the state nor in the failure message.
      logging: "none",
    },
    { parent, dependsOn: [guard] },
  );
  return { resource, summary: resource.stdout.apply(parseRunSummary), reason: resource.stderr };
}

/**
 * The workflow mode of the `process` executor ({@link ProcessExecution.temporal}): children `<name>-guard`
 * (its delete stops the run worker), `<name>-identity` (the run identity: same triggers as the run, so a new run
 * gets a new workflow id) and `<name>-run` (`cohort submit`).
 */
function executeAsWorkflow(plan: ExecutionPlan, args: ProcessExecution, temporal: TemporalExecution, parent: pulumi.Resource): CohortExecution {
  if (args.backendConfigFile === undefined) {
    throw new pulumi.InputPropertyError({
      propertyPath: "execution.backendConfigFile",
      reason: `CohortRun ${plan.name}: the workflow mode needs the run worker's backend config file`,
    });
  }
  const backend = args.backend ?? "process";
  const interpreter = ["/bin/sh", "-c", COHORT_SUBMIT_SCRIPT, "cohort"];
  const runtimeEnv = {
    COHORT_NODE: args.runtime.nodePath,
    COHORT_BUNDLE: args.runtime.runtimeBundlePath,
    COHORT_BUNDLE_FALLBACK: args.fallbackRuntimeBundlePath ?? "",
    COHORT_ARTIFACT_ROOT: args.artifactRoot,
  };
  // The process mode's triggers, plus the last workflow that lost its run (a new identity, so a new run).
  const triggers = [
    plan.specSha256,
    args.runtime.runtimeBundleSha256,
    args.artifactRoot,
    args.profile,
    backend,
    lastUnsuccessfulRunId(args.artifactRoot),
    lastLostWorkflowId(args.artifactRoot),
  ];
  const guard = new command.local.Command(
    `${plan.name}-guard`,
    { interpreter, create: COHORT_GUARD_STEPS.create, delete: COHORT_GUARD_STEPS.delete, environment: runtimeEnv, triggers: [args.artifactRoot], logging: "stderr" },
    { parent },
  );
  // What the run worker is started for (the script's worker_key): the identity step checks it too, so a rollout
  // refused while a run is open leaves the identity in state.
  const workerEnv = {
    COHORT_BACKEND_CONFIG: args.backendConfigFile,
    COHORT_TEMPORAL_ADDRESS: temporal.address,
    COHORT_TASK_QUEUE: temporal.taskQueue,
    COHORT_BUNDLE_SHA256: args.runtime.runtimeBundleSha256,
  };
  const identity = new command.local.Command(
    `${plan.name}-identity`,
    {
      interpreter,
      create: COHORT_SUBMIT_STEPS.identity,
      update: COHORT_SUBMIT_STEPS.update,
      environment: { ...runtimeEnv, ...workerEnv },
      triggers,
      addPreviousOutputInEnv: true,
      logging: "none",
    },
    { parent, dependsOn: [guard] },
  );
  const prefix = temporal.workflowIdPrefix ?? `cohort-lab/${pulumi.getStack()}`;
  const resource = new command.local.Command(
    `${plan.name}-run`,
    {
      interpreter,
      create: COHORT_SUBMIT_STEPS.create,
      update: COHORT_SUBMIT_STEPS.update,
      delete: COHORT_SUBMIT_STEPS.delete,
      stdin: plan.specJson,
      environment: {
        ...runtimeEnv,
        ...workerEnv,
        COHORT_PROFILE: args.profile,
        COHORT_KEEP_LEDGERS: String(plan.keepLedgers),
        COHORT_WORKFLOW_ID: pulumi.interpolate`${prefix}/${identity.stdout.apply((s) => s.trim())}`,
        // The status pipe on fd 3: `cohort submit` writes the run's progress (from runCohort's heartbeats) to
        // it, shown on this resource's row in `pulumi up` (the script's text is unchanged: the submitter finds
        // the descriptor in this variable).
        [STATUS_FD_ENV]: "3",
      },
      triggers,
      addPreviousOutputInEnv: true,
      logging: "none",
    },
    { parent, dependsOn: [guard, identity] },
  );
  return { resource, summary: resource.stdout.apply(parseRunSummary), reason: resource.stderr };
}

/**
 * One run of a cohort (token `cohortlab:runtime:CohortRun`).
 *
 * Children: the executor's resource; for `process`, a `command:local:Command` named `<name>-run`.
 * A failed run fails `pulumi up` with the runtime's one-line reason naming the member.
 */
export class CohortRun extends pulumi.ComponentResource implements CohortRunOutputs {
  public readonly runId: pulumi.Output<string>;
  public readonly outcome: pulumi.Output<RunOutcome>;
  public readonly size: pulumi.Output<number>;
  public readonly readyCount: pulumi.Output<number>;
  public readonly timeToReadyMs: pulumi.Output<number | null>;
  public readonly ledgerPath: pulumi.Output<string>;
  public readonly firstFailure: pulumi.Output<{ readonly member: string | null; readonly reason: string } | null>;
  /** Absolute path of the run's `report.html`; `null` when it was not written (see {@link RunSummary.reportPath}). */
  public readonly reportPath: pulumi.Output<string | null>;
  /** Digest of the RunSpec (equals the ledger manifest's `specSha256`). */
  public readonly specSha256: pulumi.Output<string>;
  /** The resource that executes the run (the run Command, or the Job). */
  public readonly execution: pulumi.CustomResource;
  /** All of the above as one value: what the stacks export as `run`. */
  public readonly summary: pulumi.Output<CohortRunSummary>;

  constructor(name: string, args: CohortRunArgs, opts?: pulumi.ComponentResourceOptions) {
    const kind = (args.execution as { kind?: unknown } | undefined)?.kind;
    if (kind !== "process" && kind !== "kubernetesJob" && kind !== "clusterWorkflow") {
      throw new pulumi.InputPropertyError({
        propertyPath: "execution.kind",
        reason: `CohortRun ${name}: expected "process", "kubernetesJob" or "clusterWorkflow" (got ${JSON.stringify(kind)})`,
      });
    }
    if (args.execution.kind === "process" && !path.isAbsolute(args.execution.artifactRoot)) {
      throw new pulumi.InputPropertyError({
        propertyPath: "execution.artifactRoot",
        reason: `CohortRun ${name}: artifactRoot must be absolute (got ${JSON.stringify(args.execution.artifactRoot)})`,
      });
    }
    // The roster is the component's one input, so `pulumi preview` (with --diff, and in the state) shows what
    // will run; a component's inputs change no URN and replace nothing. The info line shows it without --diff.
    const roster = rosterOf(args.spec);
    super("cohortlab:runtime:CohortRun", name, { roster }, opts);
    void pulumi.log.info(rosterLine(roster), this);

    const specSha256 = runSpecSha256(args.spec);
    const plan: ExecutionPlan = { name, specJson: `${JSON.stringify(args.spec)}\n`, specSha256, keepLedgers: args.keepLedgers ?? true };
    const execution =
      args.execution.kind === "process"
        ? executeAsProcess(plan, args.execution, this)
        : args.execution.kind === "kubernetesJob"
          ? executeAsKubernetesJob(plan, args.execution, this)
          : executeAsClusterWorkflow(plan, args.execution, this);

    this.execution = execution.resource;
    // A run that did not succeed is in the state (its outputs name it) and fails `pulumi up` with the
    // runtime's one-line reason naming the member; never in preview, where the state's old values show.
    if (execution.reason !== undefined) {
      pulumi.all([execution.summary, execution.reason]).apply(([summary, reason]) => {
        if (pulumi.runtime.isDryRun()) return;
        // `stderr` is unset when the engine (or a mock) reports no value for it.
        const text = (reason ?? "").trim();
        if (summary.outcome !== "succeeded" || text !== "") {
          // The report shows the timeline and every failed member's output tail (its path is also the
          // `run.reportPath` output): named on the same line, so the error stays one line.
          const where = summary.reportPath !== null ? `; report: ${summary.reportPath}` : `; ledger: ${summary.ledgerPath}`;
          void pulumi.log.error(`${text !== "" ? text : `cohort: run ${summary.runId} ${summary.outcome}`}${where}`, this);
        }
      });
    }
    this.runId = execution.summary.apply((s) => s.runId);
    this.outcome = execution.summary.apply((s) => s.outcome);
    this.size = execution.summary.apply((s) => s.size);
    this.readyCount = execution.summary.apply((s) => s.readyCount);
    this.timeToReadyMs = execution.summary.apply((s) => s.timeToReadyMs);
    this.ledgerPath = execution.summary.apply((s) => s.ledgerPath);
    this.firstFailure = execution.summary.apply((s) =>
      s.firstFailure === null ? null : { member: s.firstFailure.member, reason: (s.firstFailure.reason ?? "").split("\n")[0] ?? "" },
    );
    this.reportPath = execution.summary.apply((s) => s.reportPath);
    this.specSha256 = pulumi.output(specSha256);
    this.summary = pulumi.output({
      id: this.runId,
      outcome: this.outcome,
      size: this.size,
      readyCount: this.readyCount,
      timeToReadyMs: this.timeToReadyMs,
      ledgerPath: this.ledgerPath,
      firstFailure: this.firstFailure,
      specSha256: this.specSha256,
      reportPath: this.reportPath,
    });
    this.registerOutputs({
      runId: this.runId,
      outcome: this.outcome,
      size: this.size,
      readyCount: this.readyCount,
      timeToReadyMs: this.timeToReadyMs,
      ledgerPath: this.ledgerPath,
      firstFailure: this.firstFailure,
      reportPath: this.reportPath,
      specSha256: this.specSha256,
    });
  }
}

/**
 * The contract of the `cohortRun` Temporal workflow (docs/temporal.md): its input, its result, the activity
 * timeouts and the policies, shared by the workflow code (bundled for the worker's sandbox), the activities, the
 * worker and the submitter. No SDK import here: the workflow bundle and the CLI both read it.
 */
import type { RunSummary } from "../core/summary.js";

/** The workflow type name (the exported function in workflows.ts). */
export const WORKFLOW_TYPE = "cohortRun";

/** The activity heartbeat timeout, seconds: a worker that stops heartbeating this long has lost the run. */
export const HEARTBEAT_TIMEOUT_S = 30;

/** How often the `runCohort` activity heartbeats, milliseconds (its own timer, whatever the cohort does). */
export const HEARTBEAT_INTERVAL_MS = 5_000;

/**
 * How often `runCohort` reads the run's new progress lines, milliseconds: a changed line is sent at once as the
 * heartbeat's details ({@link RunCohortHeartbeat}), and the submitter shows it (docs/temporal.md "Progress").
 */
export const PROGRESS_POLL_MS = 1_000;

/**
 * The heartbeat throttle the worker sets (`maxHeartbeatThrottleInterval`, `defaultHeartbeatThrottleInterval`),
 * milliseconds. The SDK sends a heartbeat to the server at most this often and otherwise keeps only the
 * latest details (its default is 80% of the heartbeat timeout, capped at 60 s: 24 s here, too slow to carry
 * progress); the server keeps the last details of a pending activity, which `describe` returns.
 */
export const HEARTBEAT_THROTTLE_MS = 1_000;

/** The details of a `runCohort` heartbeat (`pendingActivities[].heartbeatDetails` of `workflow describe`). */
export interface RunCohortHeartbeat {
  /** `starting` before the run's process exists, then `running`. */
  readonly phase: "starting" | "running";
  readonly runId: string;
  /** The run's last progress line (`cohort run --progress-fd`), without its newline; absent before the first. */
  readonly progress?: string;
}

/** Start-to-close of `cleanupRun`, seconds (it waits up to 120 s for the run's objects to go). */
export const CLEANUP_TIMEOUT_S = 180;

/** Input of the workflow (one JSON argument). */
export interface CohortRunInput {
  /** The RunSpec as the user wrote it (YAML or JSON text); the worker's `cohort run` validates it. */
  readonly specText: string;
  /** The run id (`cohort run --run-id`): fixed by the first submitter, so every attach sees the same run. */
  readonly runId: string;
  /** Where the ledger goes on the worker's file system (`cohort run --artifacts`). */
  readonly artifacts: string;
  /** `cohort run --profile` (recorded in the ledger's manifest). @default "sim" */
  readonly profile?: string;
  /**
   * Start-to-close of `runCohort`, seconds: the RunSpec's budgets (admission + startup + hold + two stop grace
   * periods) plus a margin, computed by the submitter from the compiled spec ({@link runBudgetSeconds}).
   */
  readonly runTimeoutS: number;
}

/** What the `runCohort` activity returns and the workflow's result. */
export interface CohortRunResult {
  /** The run summary: exactly the JSON object of the line `cohort run` printed. */
  readonly summary: RunSummary;
  /**
   * The exit code `cohort run` exited with on the worker (0 succeeded, 1 failed or the ledger could not be
   * completed, 128+N interrupted by signal N): the summary does not carry the signal, so it travels beside it.
   */
  readonly exitCode: number;
  /**
   * The run's last progress line (`done: started N/N ready N/N stopped N/N`, runtime/core/progress.ts), read from
   * its progress file after it exited: the heartbeats that carry the earlier ones end with the activity, so the
   * submitter shows this one from the result. Absent when the run printed none (or a worker older than this field
   * ran it).
   */
  readonly progress?: string;
}

/** The compiled spec's budgets {@link runBudgetSeconds} reads (runtime/core/spec.ts CompiledRunSpec, ms). */
export interface RunBudgets {
  readonly admissionTimeoutMs: number;
  readonly startupTimeoutMs: number;
  readonly holdMs: number;
  readonly stopGraceMs: number;
}

/** Margin added to the budgets for the runtime's own start, report and close, seconds. */
export const RUN_TIMEOUT_MARGIN_S = 300;

/**
 * Start-to-close of `runCohort`: admission + startup + hold + 2 x stop grace period, in seconds (rounded up),
 * plus {@link RUN_TIMEOUT_MARGIN_S}.
 */
export function runBudgetSeconds(b: RunBudgets): number {
  return Math.ceil((b.admissionTimeoutMs + b.startupTimeoutMs + b.holdMs + 2 * b.stopGraceMs) / 1000) + RUN_TIMEOUT_MARGIN_S;
}

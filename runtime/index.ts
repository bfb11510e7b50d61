/**
 * Package runtime: the cohort runtime (spec, graph, scheduler, probes, ledger, backends, CLI), bundled
 * to one file by scripts/bundle.mjs (`dist/cohort.cjs`). See DESIGN.md "Contracts" and runtime/cli.ts.
 */
export type { Backend, MemberEndpoint, MemberEvent, MemberEventSink, MemberHandle, MemberIdentity, MemberPlan } from "./core/backend";
export { formatDurationMs, parseDurationMs } from "./core/duration";
export {
  BackendUnavailableError,
  CohortError,
  MemberExitedError,
  MemberStartError,
  MemberStartTimeoutError,
  RunInterruptedError,
  SpecError,
  type SpecIssue,
} from "./core/errors";
export { checkRoleGraph, criticalPath, roleLevels } from "./core/graph";
export { LedgerWriter, readLedger } from "./core/ledger";
export { ledgerTimeline, showLedger } from "./core/ledger-show";
export { recoverLedger, verifyLedger } from "./core/ledger-verify";
export { memberDir, planMembers } from "./core/plan";
export { Scheduler, realClock, type Clock, type FirstFailure, type LedgerSink, type RunProgress, type RunResult, type SchedulerConfig } from "./core/scheduler";
export {
  compileRunSpec,
  loadRunSpec,
  parseRunSpecText,
  RUNSPEC_DEFAULTS,
  validateRunSpec,
  withDefaults,
  type CompiledRole,
  type CompiledRunSpec,
  type RoleSpec,
  type RunSpec,
  type RunSpecInput,
} from "./core/spec";
export { OUTCOMES, parseRunSummary, runSummarySchema, type Outcome, type RunSummary } from "./core/summary";
export { backendNames, createBackend, type BackendContext, type BackendFactory } from "./backends/index";
export { COHORT_VERSION, main, newRunId } from "./cli";

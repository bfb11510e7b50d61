/**
 * Package runtime: the cohort runtime (spec, graph, scheduler, probes, ledger, backends), bundled to one file
 * by scripts/bundle.mjs (`dist/cohort.cjs`, entry runtime/cli.ts). See DESIGN.md "Contracts" and runtime/cli.ts.
 *
 * This file is the ONE door into the runtime for components/, stacks/, simctl/, scripts/ and bench/: they
 * import runtime/index.ts, never runtime/core/* or runtime/backends/*. It stays cheap to import from a Pulumi
 * program: it loads Node built-ins, zod and nothing that runs on import; no backend SDK (the Kubernetes client
 * and execa are loaded by the backends on first use, runtime/backends/index.ts). The CLI itself (`main`,
 * `COHORT_VERSION`, `newRunId`) is runtime/cli.ts, the bundle's entry: it loads the terminal progress bars
 * and checks the Node version on import, so it is not re-exported here.
 */

// The run contract: the outcome and the `cohort run` summary line.
export { OUTCOMES, parseRunSummary, runSummarySchema, type Outcome, type RunSummary } from "./core/summary";

// RunSpec.
export {
  compileRunSpec,
  loadRunSpec,
  MAX_COHORT_SIZE,
  MAX_NAME_LENGTH,
  parseRunSpecText,
  RUNSPEC_API_VERSION,
  RUNSPEC_DEFAULTS,
  RUNSPEC_KIND,
  runSpecSchema,
  validateRunSpec,
  withDefaults,
  type CompiledRole,
  type CompiledRunSpec,
  type RoleSpec,
  type RunSpec,
  type RunSpecInput,
} from "./core/spec";
export { durationProblem, formatDurationMs, parseDurationMs } from "./core/duration";
export { cpuMillicores, isNonNegativeQuantity, isQuantity, memoryBytes, parseQuantity, quantityValue, type Quantity } from "./core/quantity";
export { checkRoleGraph, criticalPath, roleLevels, type GraphIssue, type RoleNode } from "./core/graph";
export {
  BackendUnavailableError,
  CohortError,
  LedgerInputError,
  LedgerVerifyError,
  MemberExitedError,
  MemberStartError,
  MemberStartTimeoutError,
  RunInterruptedError,
  SpecError,
  type LedgerVerifyCode,
  type SpecIssue,
} from "./core/errors";

// Digests and the run ledger.
export { canonicalJson, sha256Hex } from "./core/digest";
import type { LedgerStoreFactory } from "./core/ledger/remote";
export {
  DEFAULT_FSYNC_POLICY,
  LEDGER_FILES,
  LedgerWriter,
  ledgerTimeline,
  loadRunView,
  readLedger,
  recoverLedger,
  renderJunit,
  renderReport,
  showLedger,
  verifyLedger,
  type Completion,
  type FsyncPolicy,
  type LedgerManifest,
  type LedgerRecord,
  type LedgerTimeline,
  type LedgerWriterOptions,
  type RecordKind,
  type RecoverReport,
  type RunView,
  type VerifyReport,
} from "./core/ledger/index";
/** The ledger in an object store (gs://); SDK-free: the GCS store itself is runtime/gcs/, loaded on first use. */
export {
  deleteAllRemote,
  deleteRemoteLedger,
  exportLedger,
  formatLedgerUri,
  isLedgerUri,
  listRemoteLedgers,
  parseLedgerUri,
  readRemoteCompletion,
  runLedgerUri,
  verifyRemoteLedger,
  type ExportReport,
  type LedgerObjectStore,
  type LedgerStoreFactory,
  type LedgerUri,
  type RemoteListing,
} from "./core/ledger/remote";
/** Opens a GCS bucket as a {@link LedgerObjectStore} (`@google-cloud/storage` is imported when this is called). */
export const openGcsLedgerStore: LedgerStoreFactory = async (bucket) => (await import("./gcs/index.js")).createGcsLedgerStore(bucket);

// Scheduling and backends.
export type { Backend, BackendContext, BackendFactory, MemberEndpoint, MemberEvent, MemberEventSink, MemberHandle, MemberIdentity, MemberPlan } from "./core/backend";
export { memberDir, planMembers } from "./core/plan";
export { Scheduler, realClock, type Clock, type FirstFailure, type LedgerSink, type RunProgress, type RunResult, type SchedulerConfig } from "./core/scheduler";
export { backendNames, createBackend } from "./backends/index";
/** The process backend's member launcher (no execa on import: it is loaded when a launcher starts). */
export { Launcher, NATIVE_LAUNCHER_NAME, launcherBeside } from "./backends/process/launcher";
/** The process backend's per-member cgroups (`npm run bench:startup` measures spawning into them). */
export {
  CgroupWatcher,
  createMemberCgroupAsync,
  killCgroup,
  openRunCgroups,
  removeCohortDirIfEmpty,
  removeTree as removeCgroupTree,
  type CgroupHierarchy,
} from "./backends/process/cgroup";
/** The RBAC rules the Kubernetes backend needs (derived from its API calls; no Kubernetes client loaded). */
export { RUNTIME_POLICY_RULES, type PolicyRule } from "./backends/kubernetes/rbac";

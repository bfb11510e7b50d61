/**
 * The run ledger (./format.ts describes the run directory): the public names of this folder. Hashing and
 * canonical JSON (`sha256Hex`, `canonicalJson`) are runtime/core/digest.ts and re-exported here.
 */
export { canonicalJson, sha256Hex } from "../digest";
export {
  CompletionSchema,
  DEFAULT_FSYNC_POLICY,
  LEDGER_FILES,
  ManifestSchema,
  OUTCOMES,
  TRANSITION_KINDS,
  describeZodError,
  isRfc3339,
  type Completion,
  type FsyncPolicy,
  type LedgerManifest,
  type LedgerRecord,
  type Outcome,
  type RecordKind,
} from "./format";
export { MIN_SECRET_LENGTH, REDACTED } from "./redact";
export { LedgerWriter, type LedgerWriterOptions, type LedgerWriterStats, type ResumedLedger } from "./writer";
export { LedgerBusyError, runProcessAlive, SEAL_LOCK_FILE, sealLostRun, type SealReport } from "./seal";
export { parseCompletion, parseManifest, readLedger, readOptional, splitLines, type RawLine } from "./read";
export { FINAL_RECORD_KINDS, recoverLedger, verifyLedger, type RecoverReport, type VerifyReport } from "./verify";
export { ledgerTimeline, showLedger, timelineOf, type LedgerTimeline, type TimelineMember } from "./show";
export { loadRunView, outcomeText, runViewOf, type MemberEvents, type MemberFailure, type RunMarkers, type RunView, type Verification } from "./view";
export { COLLAPSE_MEMBERS, COLLAPSE_ROLE_MEMBERS, collapsesRole, escapeHtml, renderReport } from "./report";
export { junitCases, renderJunit, stripInvalidXmlChars, xmlAttr, xmlText, type JunitCase } from "./junit";

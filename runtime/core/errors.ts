/**
 * Named errors of the cohort runtime core. Every error the core raises on purpose is a `CohortError`
 * with a stable, machine-readable `code` (kebab-case) so that the CLI, tests and CI can branch on it
 * without parsing messages. Messages are one human-readable sentence naming what was expected and
 * what was found.
 */

/** Base class of every named runtime error. */
export class CohortError extends Error {
  /** Stable machine-readable code, e.g. `hash-chain-broken`, `ledger-exists`. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/**
 * Stable codes of {@link LedgerVerifyError}.
 *
 * - `manifest-missing`: `manifest.json` does not exist (the directory holds no ledger).
 * - `manifest-invalid`: `manifest.json` is not JSON or lacks a required field.
 * - `records-missing`: `records.ndjson` does not exist.
 * - `torn-final-line`: the last line lacks its `\n` or does not parse; the only damage `recoverLedger` repairs.
 * - `blank-line`: an empty line (JSON Lines forbids them).
 * - `invalid-json`: a line other than the last is not a JSON object.
 * - `record-invalid`: a line is JSON but lacks or mistypes a required field (`seq`, `at`, `elapsedMs`, `kind`, `prev`).
 * - `seq-gap`: a `seq` is larger than expected (records are missing).
 * - `seq-mismatch`: a `seq` is smaller than expected or not an integer (duplicated or reordered records).
 * - `hash-chain-broken`: a record's `prev` is not the SHA-256 of the previous line (or of manifest.json for seq 1).
 * - `completion-invalid`: `completion.json` is not JSON or lacks/mistypes a required field (incl. `outcome`).
 * - `count-mismatch`: `completion.records` differs from the number of lines.
 * - `records-digest-mismatch`: `completion.recordsSha256` differs from the SHA-256 of records.ndjson.
 * - `manifest-digest-mismatch`: `completion.manifestSha256` differs from the SHA-256 of manifest.json.
 * - `spec-digest-mismatch`: `manifest.specSha256` differs from the SHA-256 of the canonical JSON of `manifest.spec`.
 * - `records-changed`: records.ndjson changed while `recoverLedger` worked on it (a writer is still running).
 * - `invalid-utf8`: records.ndjson (a line other than the torn last one), manifest.json or completion.json holds bytes
 *   that are not well-formed UTF-8 (e.g. a multi-byte character cut in two); `detail` gives the byte offset and bytes.
 * - `lone-surrogate`: a string or key in a record, manifest.json or completion.json holds a lone UTF-16 surrogate
 *   (the JSON escape `\ud83d` without its pair: half of a character cut in two), which strict readers refuse;
 *   `detail` names the file, the field's dotted path, the code unit and its index in the string.
 * - `completion-missing`: `completion.json` does not exist although the records show the run finished (the
 *   last record is `teardown-finished` or `run-finished`, written just before it): it was deleted or lost. For a
 *   `gs://` ledger (runtime/core/ledger/remote.ts) the missing object alone: the run is incomplete or its export torn.
 *   There `manifest-missing` and `records-missing` name the missing object, and `torn-final-line` a truncated one.
 * - `completion-mismatch`: `completion.json` says what the hash-chained records contradict: `succeeded` with a
 *   `run-failed`, `run-interrupted` or `member-failed` record; not `failed` with a
 *   `run-failed` record; `readyCount` other than the number of
 *   `member-ready` records; `timeToReadyMs` other than `roster-ready`'s (or a number without one).
 */
export type LedgerVerifyCode =
  | "manifest-missing"
  | "manifest-invalid"
  | "records-missing"
  | "torn-final-line"
  | "blank-line"
  | "invalid-json"
  | "record-invalid"
  | "seq-gap"
  | "seq-mismatch"
  | "hash-chain-broken"
  | "completion-invalid"
  | "count-mismatch"
  | "records-digest-mismatch"
  | "manifest-digest-mismatch"
  | "spec-digest-mismatch"
  | "records-changed"
  | "invalid-utf8"
  | "lone-surrogate"
  | "completion-missing"
  | "completion-mismatch";

/**
 * A ledger failed verification (or recovery refused to touch it). `line` is the 1-based line number
 * in `records.ndjson` when one line is at fault; `detail` says what was expected and what was found.
 */
export class LedgerVerifyError extends CohortError {
  declare readonly code: LedgerVerifyCode;
  /** Directory of the ledger. */
  readonly runDir: string;
  /** 1-based line number in records.ndjson, when a line is at fault. */
  readonly line?: number;
  /** Expected vs found, one sentence. */
  readonly detail: string;
  /** Byte offset in records.ndjson of the first byte of the line at fault, when one line is at fault. */
  readonly byteOffset?: number;

  constructor(code: LedgerVerifyCode, runDir: string, detail: string, line?: number, byteOffset?: number) {
    super(code, `ledger ${runDir}: ${code}${line !== undefined ? ` at line ${line}` : ""}: ${detail}`);
    this.runDir = runDir;
    this.detail = detail;
    if (line !== undefined) this.line = line;
    if (byteOffset !== undefined) this.byteOffset = byteOffset;
  }
}

/**
 * A write to the ledger failed (or an earlier one did): the writer is latched failed and every later
 * `append`/`complete` rejects with this error (code `ledger-write-failed`), with the first failure as `cause`.
 */
export class LedgerWriteError extends CohortError {
  readonly runDir: string;
  constructor(runDir: string, message: string, options?: { cause?: unknown }) {
    super("ledger-write-failed", `ledger ${runDir}: ${message}`, options);
    this.runDir = runDir;
  }
}

/** `LedgerWriter.open` refused a directory that already holds a ledger (code `ledger-exists`). */
export class LedgerExistsError extends CohortError {
  readonly runDir: string;
  constructor(runDir: string, found: string) {
    super("ledger-exists", `ledger ${runDir}: refusing to open a new ledger: the directory already holds ${found}`);
    this.runDir = runDir;
  }
}

/** `append`/`complete` called after `complete` or `close` (code `ledger-closed`). */
export class LedgerClosedError extends CohortError {
  readonly runDir: string;
  constructor(runDir: string, what: string, how: "completed" | "closed without a completion" = "completed") {
    super("ledger-closed", `ledger ${runDir}: ${what} after the ledger was ${how}`);
    this.runDir = runDir;
  }
}

/**
 * Bad input to the ledger API (code `ledger-input-invalid`): a manifest or completion field of the
 * wrong shape, a reserved or non-JSON record field, a secret too short to redact reliably, or a record
 * that would carry a registered secret outside a string value. `path` is the dotted path of the field.
 * Never latches the writer: the call is refused and nothing is written.
 */
export class LedgerInputError extends CohortError {
  /** Dotted path of the offending field, e.g. `manifest.createdAt`, `record.fields.seq`. */
  readonly path: string;
  constructor(path: string, reason: string) {
    super("ledger-input-invalid", `${path}: ${reason}`);
    this.path = path;
  }
}

// ---- other runtime modules: add error classes below this line ----

// ---- runtime/core/spec.ts, scheduler.ts, backends (cohort runtime core) ----

/** One problem in a RunSpec: `path` is the field path (`roles[2].needs[0]`, "" for the whole document). */
export interface SpecIssue {
  readonly path: string;
  readonly reason: string;
}

/**
 * A RunSpec was refused (code `spec-invalid`) before any side effect. `path`/`reason` describe the first
 * problem; `issues` lists all of them in document order. The message is `<path>: <reason>` of the first.
 */
export class SpecError extends CohortError {
  /** Field path of the first problem, e.g. `roles[2].needs[0]`; "" when the document itself is at fault. */
  readonly path: string;
  /** Why, e.g. `unknown role "db" (known: router, agent)`. */
  readonly reason: string;
  /** Every problem found (at least one). */
  readonly issues: readonly SpecIssue[];

  constructor(issues: readonly SpecIssue[]) {
    const first = issues[0] ?? { path: "", reason: "invalid RunSpec" };
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : "";
    super("spec-invalid", `${first.path === "" ? "" : `${first.path}: `}${first.reason}${more}`);
    this.path = first.path;
    this.reason = first.reason;
    this.issues = issues.length > 0 ? issues : [first];
  }
}

/**
 * A member did not become ready before a deadline (code `member-start-timeout`): its own
 * (`memberTimeout` or the role's `readiness.timeout`) or the roster's (`startupTimeout`).
 */
export class MemberStartTimeoutError extends CohortError {
  readonly member: string;
  readonly backend: string;
  /** Which deadline fired: `memberTimeout`, `roles[i].readiness.timeout` or `startupTimeout`. */
  readonly deadline: string;
  readonly timeoutMs: number;
  constructor(member: string, backend: string, deadline: string, timeoutMs: number, message: string) {
    super("member-start-timeout", message);
    this.member = member;
    this.backend = backend;
    this.deadline = deadline;
    this.timeoutMs = timeoutMs;
  }
}

/** A member exited when it should have kept running (code `member-exited`): before ready, or while the roster was held. */
export class MemberExitedError extends CohortError {
  readonly member: string;
  readonly backend: string;
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** Last lines of the member's output (secrets redacted), "" if none. */
  readonly outputTail: string;
  constructor(member: string, backend: string, message: string, details: { exitCode?: number | null; signal?: string | null; outputTail?: string }) {
    super("member-exited", message);
    this.member = member;
    this.backend = backend;
    this.exitCode = details.exitCode ?? null;
    this.signal = details.signal ?? null;
    this.outputTail = details.outputTail ?? "";
  }
}

/** The backend could not start a member (code `member-start-failed`), e.g. its command does not exist. */
export class MemberStartError extends CohortError {
  readonly member: string;
  readonly backend: string;
  constructor(member: string, backend: string, message: string, options?: { cause?: unknown }) {
    super("member-start-failed", message, options);
    this.member = member;
    this.backend = backend;
  }
}

/** A backend cannot run here, or no backend has that name (code `backend-unavailable`). */
export class BackendUnavailableError extends CohortError {
  readonly backend: string;
  constructor(backend: string, message: string, options?: { cause?: unknown }) {
    super("backend-unavailable", message, options);
    this.backend = backend;
  }
}

/** The run was interrupted by a signal to the runtime (code `run-interrupted`). */
export class RunInterruptedError extends CohortError {
  /** `SIGINT`, `SIGTERM`, `SIGHUP` or another reason given to the scheduler. */
  readonly signal: string;
  constructor(signal: string) {
    super("run-interrupted", `run interrupted by ${signal}`);
    this.signal = signal;
  }
}

/**
 * `cohort run --artifacts DIR`: DIR cannot hold a run directory (code `artifacts-unusable`). The message
 * starts with `--artifacts <DIR as given>:` and says why: a component is a file, the directory is not
 * writable (with the errno code, `EACCES`, `EROFS` or `EPERM`), or the file system refuses new directories.
 */
export class ArtifactsDirError extends CohortError {
  /** The errno code behind the refusal, when there is one (e.g. `EROFS`). */
  readonly errno: string | undefined;
  constructor(message: string, errno?: string) {
    super("artifacts-unusable", message);
    this.errno = errno;
  }
}

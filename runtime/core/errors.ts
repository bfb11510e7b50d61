/**
 * Named errors of the cohort runtime core. Every error the core raises on purpose is a `CohortError`
 * with a stable, machine-readable `code` (kebab-case) so that the CLI, tests and CI can branch on it
 * without parsing messages. Messages are one human-readable sentence naming what was expected and
 * what was found.
 *
 * Shared file: other runtime modules add their error classes at the END of this file.
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
 * - `records-after-completion`: bytes follow the last record counted by `completion.json`.
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
  | "records-after-completion";

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

  constructor(code: LedgerVerifyCode, runDir: string, detail: string, line?: number) {
    super(code, `ledger ${runDir}: ${code}${line !== undefined ? ` at line ${line}` : ""}: ${detail}`);
    this.runDir = runDir;
    this.detail = detail;
    if (line !== undefined) this.line = line;
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

/** `append`/`complete` called after `complete` (code `ledger-closed`). */
export class LedgerClosedError extends CohortError {
  readonly runDir: string;
  constructor(runDir: string, what: string) {
    super("ledger-closed", `ledger ${runDir}: ${what} after the ledger was completed`);
    this.runDir = runDir;
  }
}

// ---- other runtime modules: add error classes below this line ----

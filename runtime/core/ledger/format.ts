/**
 * The run ledger: a crash-safe, append-only, hash-chained record of one cohort run
 * (DESIGN.md "Ledger"). A run directory `{artifactRoot}/{runId}/` holds:
 *
 * - `manifest.json`: written once, atomically, when the writer opens (run id, profile, backend, the
 *   normalized RunSpec and its SHA-256, tool versions, creation time, runtime pid). Pretty-printed JSON
 *   with a trailing newline.
 * - `records.ndjson`: one JSON object per line, `\n`-terminated (JSON Lines, https://jsonlines.org/).
 *   Each record has `seq` (1, 2, 3, … without gaps), `at` (RFC 3339 wall time, UTC, ms), `elapsedMs`
 *   (monotonic ms since the writer opened, rounded to 0.001, never decreasing), `kind`, `member` where
 *   one is concerned, free-form fields, and `prev`: the lower-case hex SHA-256 of the previous line's
 *   bytes without its newline; for `seq` 1 the SHA-256 of `manifest.json`'s bytes (the etcd WAL idea
 *   of chaining every record to all before it, https://github.com/etcd-io/etcd/blob/main/server/storage/wal/doc.go).
 * - `completion.json`: written last, atomically (unique temp, fsync, rename, fsync of the directory):
 *   outcome, first failure, record count, SHA-256 of records.ndjson and of manifest.json, phase
 *   durations. Its absence means the run crashed or is still running.
 *
 * This folder: ./format.ts (file names, record kinds, the shapes and their schemas), ./redact.ts (secrets),
 * ./writer.ts (LedgerWriter), ./read.ts (readLedger and the parsers the verifier shares), ./verify.ts,
 * ./show.ts, ./view.ts, ./report.ts, ./junit.ts; ./index.ts re-exports the public names. Hashing and
 * canonical JSON are runtime/core/digest.ts.
 */
import { z } from "zod";
import { OUTCOMES, type Outcome } from "../summary";

/** File names inside a run directory. */
export const LEDGER_FILES = {
  manifest: "manifest.json",
  records: "records.ndjson",
  completion: "completion.json",
} as const;

export { OUTCOMES, type Outcome } from "../summary";

/**
 * Record kinds the cohort scheduler writes. The writer and verifier accept any kind matching
 * `^[a-z][a-z0-9-]*$` (forward compatible); `ledgerTimeline` interprets these.
 *
 * - `run-started`: the writer opened and the run began (elapsedMs ≈ 0).
 * - `roster-admitted`: the whole roster was admitted (cluster backends: quota granted).
 * - `member-scheduled` (member): the member's needs were met and it was queued for start.
 * - `member-started` (member; `pid`, `pgid`, `port`, `endpoint`; `attempt` from the second start on): the
 *   backend started it.
 * - `member-restarted` (member; `attempt` (2, 3, ...), `maxAttempts`, `previousReason`, `exitCode`, `signal`,
 *   `backoffMs`, `cleanupMs`): its previous start failed before ready (RunSpec `roles[].restart`); a
 *   `member-started` of the new attempt follows.
 * - `member-ready` (member; `probe`, `attempts`, `startToReadyMs` from the first start; `startAttempt` when
 *   restarted): its readiness gate passed.
 * - `member-unhealthy` (member; `probe`, `target`, `failures`, `attempts`, `lastError`, `periodMs`,
 *   `failureThreshold`): its liveness probe failed `failureThreshold` times in a row after it was ready;
 *   `member-failed` and `run-failed` follow.
 * - `member-failed` (member; `reason`, `outputTail`): it failed (exited before ready, timed out, …).
 * - `member-exited` (member; `exitCode`, `signal`): its process/pod ended.
 * - `member-stopping` (member): teardown asked it to stop.
 * - `member-stopped` (member): it is gone.
 * - `roster-ready` (`readyCount`, `timeToReadyMs`): every member is ready.
 * - `hold-started` / `hold-ended`: the ready society is held.
 * - `teardown-started` / `teardown-finished`: members are stopped in reverse dependency order.
 * - `run-interrupted` (`signal`): SIGINT/SIGTERM to the runtime.
 * - `run-failed` (`member`, `reason`): the first failure that ended the run.
 */
export type RecordKind =
  | "run-started"
  | "roster-admitted"
  | "member-scheduled"
  | "member-started"
  | "member-restarted"
  | "member-ready"
  | "member-unhealthy"
  | "member-failed"
  | "member-exited"
  | "member-stopping"
  | "member-stopped"
  | "roster-ready"
  | "hold-started"
  | "hold-ended"
  | "teardown-started"
  | "teardown-finished"
  | "run-interrupted"
  | "run-failed";

/** Kinds after which the `"transitions"` fsync policy syncs the batch. */
export const TRANSITION_KINDS: ReadonlySet<string> = new Set<RecordKind>([
  "run-started",
  "roster-admitted",
  "roster-ready",
  "hold-started",
  "hold-ended",
  "teardown-started",
  "teardown-finished",
  "run-interrupted",
  "run-failed",
  "member-failed",
]);

/** `manifest.json`. */
export interface LedgerManifest {
  runId: string;
  profile: string;
  backend: string;
  /** The normalized RunSpec object (as JSON: `undefined` members dropped, `toJSON` applied). */
  spec: unknown;
  /** Lower-case hex SHA-256 of the canonical JSON of `spec` ({@link canonicalJson}); computed by the writer. */
  specSha256: string;
  /** Tool name -> version. */
  tools: Record<string, string>;
  /** RFC 3339. */
  createdAt: string;
  /** pid of the runtime that wrote the ledger. @default process.pid */
  runtimePid?: number;
}

/** One line of `records.ndjson`. */
export interface LedgerRecord {
  seq: number;
  at: string;
  elapsedMs: number;
  kind: string;
  member?: string;
  prev: string;
  [k: string]: unknown;
}

/** `completion.json`. */
export interface Completion {
  outcome: Outcome;
  firstFailure: null | { member: string | null; reason: string };
  /** Number of records (= last seq). */
  records: number;
  /** Lower-case hex SHA-256 of records.ndjson's bytes. */
  recordsSha256: string;
  /** Lower-case hex SHA-256 of manifest.json's bytes. */
  manifestSha256: string;
  /** Phase name -> duration in ms (e.g. `admission`, `startup`, `hold`, `teardown`). */
  phasesMs: Record<string, number>;
  /** RFC 3339. */
  completedAt: string;
  [k: string]: unknown;
}

/** fsync policy of {@link LedgerWriter}; see ./writer.ts. */
export type FsyncPolicy = "always" | "transitions" | "none";

/** The default fsync policy (see ./writer.ts for the reasoning and bench/ledger.ts for figures). */
export const DEFAULT_FSYNC_POLICY: FsyncPolicy = "transitions";

// ---------------------------------------------------------------------------------------------
// Schemas shared by the writer, the reader and the verifier

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;
const HEX64 = /^[0-9a-f]{64}$/;
/** A record kind (`^[a-z][a-z0-9-]*$`). */
export const KIND = /^[a-z][a-z0-9-]*$/;

/** True for an RFC 3339 date-time (`2026-01-02T03:04:05.678Z`, offsets allowed). */
export function isRfc3339(s: unknown): s is string {
  return typeof s === "string" && RFC3339.test(s) && !Number.isNaN(Date.parse(s));
}

const rfc3339 = z.string().refine(isRfc3339, { message: "expected an RFC 3339 date-time, e.g. 2026-01-02T03:04:05.678Z" });
const hex64 = z.string().regex(HEX64, { message: "expected 64 lower-case hex digits (SHA-256)" });
const nonEmpty = z.string().min(1, { message: "expected a non-empty string" });

/** Shape of `manifest.json` as the verifier checks it. */
export const ManifestSchema = z.looseObject({
  runId: nonEmpty,
  profile: nonEmpty,
  backend: nonEmpty,
  spec: z.unknown().refine((v) => v !== undefined, { message: "required" }),
  specSha256: hex64,
  tools: z.record(z.string(), z.string()),
  createdAt: rfc3339,
  runtimePid: z.number().int().positive().optional(),
});

/** @internal What LedgerWriter.open accepts as the manifest. */
export const ManifestInputSchema = ManifestSchema.omit({ specSha256: true }).extend({ specSha256: z.unknown().optional() });

const FirstFailureSchema = z.union([z.null(), z.strictObject({ member: z.string().nullable(), reason: z.string() })]);
const PhasesSchema = z.record(z.string(), z.number().finite().nonnegative());

/** Shape of `completion.json` as the verifier checks it (consistency of outcome and firstFailure included). */
export const CompletionSchema = z
  .looseObject({
    outcome: z.enum(OUTCOMES),
    firstFailure: FirstFailureSchema,
    records: z.number().int().nonnegative(),
    recordsSha256: hex64,
    manifestSha256: hex64,
    phasesMs: PhasesSchema,
    completedAt: rfc3339,
  })
  .superRefine(checkOutcome);

/** @internal What LedgerWriter.complete accepts. */
export const CompletionInputSchema = z.looseObject({ outcome: z.enum(OUTCOMES), firstFailure: FirstFailureSchema, phasesMs: PhasesSchema }).superRefine(checkOutcome);

function checkOutcome(c: { outcome: Outcome; firstFailure: unknown }, ctx: z.RefinementCtx): void {
  if (c.outcome === "succeeded" && c.firstFailure !== null) ctx.addIssue({ code: "custom", path: ["firstFailure"], message: 'must be null when outcome is "succeeded"' });
  if (c.outcome === "failed" && c.firstFailure === null) ctx.addIssue({ code: "custom", path: ["firstFailure"], message: 'must name the failure when outcome is "failed"' });
}

/** First zod issue as `dotted.path: message` (prefix `root`). */
export function describeZodError(root: string, error: z.ZodError): { path: string; reason: string } {
  const issue = error.issues[0]!;
  const dotted = issue.path.reduce<string>((acc, p) => (typeof p === "number" ? `${acc}[${p}]` : `${acc}.${String(p)}`), root);
  return { path: dotted, reason: issue.message };
}

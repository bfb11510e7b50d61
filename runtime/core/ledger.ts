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
 * ## Writer
 *
 * One {@link LedgerWriter} per run directory. It holds one `O_APPEND` file descriptor. Appends are
 * assigned `seq`/`prev` synchronously in call order (so records are totally ordered in call order),
 * queued, and written by a single flush loop: every batch of records queued while the previous write
 * was in flight goes out as ONE `write()` of whole lines (group commit), followed by at most one
 * `fdatasync()`. A line is therefore never interleaved with anything, and a crash can only tear the
 * final line (which `recoverLedger` cuts, and nothing else).
 *
 * ## fsync policy and the default
 *
 * - `"always"`: `fdatasync` after every batch; an append resolves only once its record is on stable
 *   storage. Survives a power loss / kernel crash with nothing acknowledged lost.
 * - `"transitions"` (DEFAULT): `fdatasync` after a batch that contains a run-level transition
 *   ({@link TRANSITION_KINDS}: run-started, roster-admitted, roster-ready, hold-*, teardown-*, run-failed,
 *   run-interrupted, member-failed) and always before `completion.json` is written. Other appends
 *   resolve once `write()` returned, i.e. the bytes are in the kernel page cache.
 * - `"none"`: no fsync of records until `complete()` (which always fsyncs).
 *
 * Why `"transitions"` is the default: what matters for a run record is (a) a crash of the runtime
 * itself (SIGKILL, OOM, panic) and (b) a crash of the machine. Against (a) every policy is equally
 * safe, because a record whose `write()` returned is in the page cache and survives the death of the
 * process. Only (b) distinguishes them; and when the machine dies the members die with it, so the
 * run is lost either way and the ledger's job is to say how far it got. With `"transitions"` a power
 * loss can lose only the member-level records written since the last run-level transition, never a
 * transition, never a completion, and never anything in the middle (fdatasync of a later transition
 * covers all earlier bytes). Its cost is a fixed ~10 fdatasync calls per run regardless of size.
 * `"always"` costs one fdatasync per batch. Measured with bench/ledger.ts on the project's dev VM
 * (ext4 on virtio, 2 cores, load average 11–25 from parallel builds): fdatasync took 2–3 ms on
 * average and up to 520 ms (an ext4 journal commit also flushes other processes' dirty data); a
 * single sequential appender managed ~280–340 records/s with `"always"` against ~2,000–19,000 with
 * the other policies, and 64 concurrent appenders ~4,000–32,000 against ~30,000–215,000 (group
 * commit puts 64 records in each batch). Every awaited append on the scheduler's critical path would pay that
 * latency, and member readiness gates are awaited per dependency level. Choose `"always"` where each
 * acknowledged record must survive power loss.
 *
 * ## Secrets
 *
 * {@link LedgerWriter.redact} registers a secret; every later record (and the completion) has each
 * occurrence in any string value or key replaced with `"[redacted]"`, numbers/booleans whose text
 * contains it become `"[redacted]"`, and a line that would still contain it anywhere (in its raw or
 * JSON-escaped form) is refused, never written. Secrets known before the run starts go in
 * {@link LedgerWriterOptions.secrets} so that the manifest is redacted too.
 */
import * as crypto from "node:crypto";
import { createHash, type Hash } from "node:crypto";
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { z } from "zod";
import { fsyncDir, writeFileAtomic } from "./atomic";
import { LedgerClosedError, LedgerExistsError, LedgerInputError, LedgerVerifyError, LedgerWriteError } from "./errors";
import { OUTCOMES, type Outcome } from "./summary";
import { findLoneSurrogate, hexBytes, invalidUtf8, mayHoldLoneSurrogateEscape, wellFormedValue } from "./text";

/** File names inside a run directory. */
export const LEDGER_FILES = {
  manifest: "manifest.json",
  records: "records.ndjson",
  completion: "completion.json",
} as const;

export { OUTCOMES, type Outcome } from "./summary";

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

/** fsync policy of {@link LedgerWriter}; see the module doc. */
export type FsyncPolicy = "always" | "transitions" | "none";

/** The default fsync policy (see the module doc for the reasoning and bench/ledger.ts for figures). */
export const DEFAULT_FSYNC_POLICY: FsyncPolicy = "transitions";

/** Minimum length of a secret given to {@link LedgerWriter.redact}. */
export const MIN_SECRET_LENGTH = 8;

/** Replacement text for a secret. */
export const REDACTED = "[redacted]";

/** Options of {@link LedgerWriter.open}. */
export interface LedgerWriterOptions {
  /** Monotonic clock in ms; `elapsedMs` is measured from its value at open. @default performance.now */
  now?: () => number;
  /** Wall clock for `at` and `completedAt`. @default () => new Date() */
  wallClock?: () => Date;
  /** @default "transitions" ({@link DEFAULT_FSYNC_POLICY}) */
  fsync?: FsyncPolicy;
  /** Secrets to redact from the manifest and everything after it (see {@link LedgerWriter.redact}). @default [] */
  secrets?: readonly string[];
}

/** Counters of a writer (for benchmarks and diagnostics). */
export interface LedgerWriterStats {
  /** Records written. */
  records: number;
  /** Batches written (one `write()` each, unless the kernel wrote short). */
  batches: number;
  /** `fdatasync()` calls on records.ndjson. */
  syncs: number;
  /** Bytes of records.ndjson. */
  bytes: number;
  /** Total wall time spent in `fdatasync()` of records.ndjson, ms. */
  syncMs: number;
  /** Longest single `fdatasync()`, ms. */
  syncMsMax: number;
}

// ---------------------------------------------------------------------------------------------
// Hashing and canonical JSON

/** Lower-case hex SHA-256 of a string (UTF-8) or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  // crypto.hash (Node >= 20.12/21.7) is the one-shot form, about 3x cheaper than createHash for a record line.
  return oneShotHash ? oneShotHash("sha256", data, "hex") : createHash("sha256").update(data).digest("hex");
}

const oneShotHash = (crypto as { hash?: (algorithm: string, data: string | Uint8Array, encoding: "hex") => string }).hash;

/**
 * Canonical JSON: object keys sorted by UTF-16 code units, no whitespace, strings and numbers as
 * `JSON.stringify` writes them (this is RFC 8785 JCS for JSON values, https://www.rfc-editor.org/rfc/rfc8785).
 * `undefined` object members are skipped, as in JSON.
 * @throws {LedgerInputError} for values JSON cannot represent (non-finite numbers, bigint, functions, symbols, cycles).
 */
export function canonicalJson(value: unknown, at = "value", seen: Set<object> = new Set()): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new LedgerInputError(at, `${value} is not representable in JSON`);
      return JSON.stringify(value);
    case "object": {
      if (seen.has(value)) throw new LedgerInputError(at, "circular reference");
      seen.add(value);
      let out: string;
      if (Array.isArray(value)) {
        out = `[${value.map((v, i) => canonicalJson(v, `${at}[${i}]`, seen)).join(",")}]`;
      } else {
        const obj = value as Record<string, unknown>;
        const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
        out = `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k], `${at}.${k}`, seen)}`).join(",")}}`;
      }
      seen.delete(value);
      return out;
    }
    default:
      throw new LedgerInputError(at, `a ${typeof value} is not representable in JSON`);
  }
}

// ---------------------------------------------------------------------------------------------
// Schemas shared with the verifier

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;
const HEX64 = /^[0-9a-f]{64}$/;
const KIND = /^[a-z][a-z0-9-]*$/;

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

const ManifestInputSchema = ManifestSchema.omit({ specSha256: true }).extend({ specSha256: z.unknown().optional() });

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

const CompletionInputSchema = z
  .looseObject({ outcome: z.enum(OUTCOMES), firstFailure: FirstFailureSchema, phasesMs: PhasesSchema })
  .superRefine(checkOutcome);

function checkOutcome(c: { outcome: Outcome; firstFailure: unknown }, ctx: z.RefinementCtx): void {
  if (c.outcome === "succeeded" && c.firstFailure !== null)
    ctx.addIssue({ code: "custom", path: ["firstFailure"], message: 'must be null when outcome is "succeeded"' });
  if (c.outcome === "failed" && c.firstFailure === null)
    ctx.addIssue({ code: "custom", path: ["firstFailure"], message: 'must name the failure when outcome is "failed"' });
}

/** First zod issue as `dotted.path: message` (prefix `root`). */
export function describeZodError(root: string, error: z.ZodError): { path: string; reason: string } {
  const issue = error.issues[0]!;
  const dotted = issue.path.reduce<string>((acc, p) => (typeof p === "number" ? `${acc}[${p}]` : `${acc}.${String(p)}`), root);
  return { path: dotted, reason: issue.message };
}

// ---------------------------------------------------------------------------------------------
// Redaction

/** Multiplier of the rolling window hash (the 32-bit FNV prime). */
const ROLL_BASE = 0x01000193;
/** ROLL_BASE^(MIN_SECRET_LENGTH-1) mod 2^32, to drop the outgoing character. */
const ROLL_OUT = Array.from({ length: MIN_SECRET_LENGTH - 1 }).reduce<number>((acc) => Math.imul(acc, ROLL_BASE), 1);

/** Polynomial hash of `text[i .. i+MIN_SECRET_LENGTH)` mod 2^32. */
function windowHash(text: string, i: number): number {
  let h = 0;
  for (let j = i; j < i + MIN_SECRET_LENGTH; j++) h = (Math.imul(h, ROLL_BASE) + text.charCodeAt(j)) | 0;
  return h;
}

/**
 * Finds and replaces registered secrets. Every pattern (raw and JSON-escaped form of each secret)
 * puts the rolling hash of its first {@link MIN_SECRET_LENGTH} characters into a 2^20-bit filter;
 * checking a line rolls the hash across it (a few integer operations per character, no allocation)
 * and only looks a window up in the prefix map when its filter bit is set (Rabin–Karp). The cost per
 * line is therefore O(line length) however many secrets are registered (a 1,000-member run may
 * register one per member).
 */
class Redactor {
  private readonly secrets = new Set<string>();
  /** 2^20-bit filter of prefix window hashes. */
  private readonly filter = new Uint32Array(1 << 15);
  /** prefix -> raw secrets starting with it */
  private readonly raw = new Map<string, string[]>();
  /** prefix -> raw and JSON-escaped forms starting with it */
  private readonly any = new Map<string, string[]>();

  get size(): number {
    return this.secrets.size;
  }

  add(secret: string, at: string): void {
    if (typeof secret !== "string") throw new LedgerInputError(at, `expected a string, got ${typeof secret}`);
    if (secret.length < MIN_SECRET_LENGTH)
      throw new LedgerInputError(at, `a secret must be at least ${MIN_SECRET_LENGTH} characters to be redacted reliably (got ${secret.length})`);
    if (REDACTED.includes(secret)) throw new LedgerInputError(at, `a secret must not be part of the replacement text "${REDACTED}"`);
    if (this.secrets.has(secret)) return;
    this.secrets.add(secret);
    index(this.raw, secret);
    index(this.any, secret);
    this.mark(secret);
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) {
      index(this.any, escaped);
      this.mark(escaped);
    }
  }

  private mark(pattern: string): void {
    const bit = windowHash(pattern, 0) >>> 12;
    this.filter[bit >>> 5]! |= 1 << (bit & 31);
  }

  /** True if `text` contains any secret in raw or JSON-escaped form. */
  foundIn(text: string): boolean {
    if (this.secrets.size === 0 || text.length < MIN_SECRET_LENGTH) return false;
    const filter = this.filter;
    let h = windowHash(text, 0);
    for (let i = 0; ; i++) {
      const bit = h >>> 12;
      if ((filter[bit >>> 5]! & (1 << (bit & 31))) !== 0 && matchOne(this.any, text, i) !== undefined) return true;
      const next = i + MIN_SECRET_LENGTH;
      if (next >= text.length) return false;
      h = (Math.imul(h - Math.imul(text.charCodeAt(i), ROLL_OUT), ROLL_BASE) + text.charCodeAt(next)) | 0;
    }
  }

  /** `s` with every raw occurrence replaced by {@link REDACTED} (longest match first, left to right). */
  redactString(s: string): string {
    if (this.secrets.size === 0 || s.length < MIN_SECRET_LENGTH) return s;
    let out = "";
    let from = 0;
    for (let i = 0; i + MIN_SECRET_LENGTH <= s.length; ) {
      const hit = matchOne(this.raw, s, i);
      if (hit === undefined) {
        i++;
        continue;
      }
      out += s.slice(from, i) + REDACTED;
      i += hit.length;
      from = i;
    }
    return from === 0 ? s : out + s.slice(from);
  }

  /** Deep copy of a JSON value with secrets redacted from strings, keys and the text of numbers/booleans. */
  redactValue(v: unknown): unknown {
    if (typeof v === "string") return this.redactString(v);
    if (typeof v === "number" || typeof v === "boolean") return this.foundIn(String(v)) ? REDACTED : v;
    if (v === null || typeof v !== "object") return v;
    if (typeof (v as { toJSON?: unknown }).toJSON === "function") return this.redactValue((v as { toJSON(): unknown }).toJSON());
    if (Array.isArray(v)) return v.map((x) => this.redactValue(x));
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      // defineProperty: a "__proto__" key (JSON.parse makes it an own property) must stay a property.
      Object.defineProperty(out, this.redactString(k), { value: this.redactValue(x), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
}

function index(map: Map<string, string[]>, pattern: string): void {
  const key = pattern.slice(0, MIN_SECRET_LENGTH);
  const list = map.get(key);
  if (list) {
    list.push(pattern);
    list.sort((a, b) => b.length - a.length);
  } else map.set(key, [pattern]);
}

function matchOne(map: Map<string, string[]>, text: string, i: number): string | undefined {
  const list = map.get(text.slice(i, i + MIN_SECRET_LENGTH));
  if (list) for (const p of list) if (text.startsWith(p, i)) return p;
  return undefined;
}


// ---------------------------------------------------------------------------------------------
// Writer

const RESERVED_FIELDS = new Set(["seq", "at", "elapsedMs", "kind", "prev"]);
const COMPLETION_COMPUTED = new Set(["records", "recordsSha256", "manifestSha256", "completedAt"]);

interface Pending {
  readonly line: string;
  readonly record: LedgerRecord;
  readonly transition: boolean;
  readonly resolve: (r: LedgerRecord) => void;
  readonly reject: (e: Error) => void;
}

function write(fd: number, buf: Buffer, offset: number): Promise<number> {
  return new Promise((resolve, reject) =>
    fs.write(fd, buf, offset, buf.length - offset, null, (err, n) => (err ? reject(err) : resolve(n))),
  );
}

function fdatasync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())));
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

async function exists(p: string): Promise<boolean> {
  try {
    await fsp.lstat(p);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

/**
 * The single writer of one run's ledger. Create with {@link LedgerWriter.open}; append records with
 * {@link LedgerWriter.append}; end with {@link LedgerWriter.complete} (or {@link LedgerWriter.close}
 * to release the file without a completion, leaving the run marked as crashed).
 */
export class LedgerWriter {
  /** The run directory. */
  readonly runDir: string;
  private readonly fdNum: number;
  private readonly policy: FsyncPolicy;
  private readonly now: () => number;
  private readonly wallClock: () => Date;
  private readonly t0: number;
  private readonly manifestSha256: string;
  private readonly redactor: Redactor;
  private readonly fileHash: Hash = createHash("sha256");
  private seq = 0;
  private prevHash: string;
  private lastElapsed = 0;
  private queue: Pending[] = [];
  private flushing = false;
  private flushScheduled = false;
  private idleWaiters: Array<() => void> = [];
  private failure: LedgerWriteError | undefined;
  private state: "open" | "completing" | "closed" = "open";
  private closedHow: "completed" | "closed without a completion" = "completed";
  private readonly counters: LedgerWriterStats = { records: 0, batches: 0, syncs: 0, bytes: 0, syncMs: 0, syncMsMax: 0 };

  private constructor(runDir: string, fd: number, manifestSha256: string, redactor: Redactor, t0: number, opts: LedgerWriterOptions) {
    this.runDir = runDir;
    this.fdNum = fd;
    this.manifestSha256 = manifestSha256;
    this.prevHash = manifestSha256;
    this.redactor = redactor;
    this.t0 = t0;
    this.now = opts.now ?? (() => performance.now());
    this.wallClock = opts.wallClock ?? (() => new Date());
    this.policy = opts.fsync ?? DEFAULT_FSYNC_POLICY;
  }

  /**
   * Create `runDir` (mkdir -p), write `manifest.json` atomically (refusing to replace one) with
   * `specSha256` computed from the canonical JSON of `spec` (any caller value is ignored), create
   * `records.ndjson` exclusively, and fsync the directory. `elapsedMs` of later records counts from here.
   * @param manifest run id, profile, backend, spec, tools, createdAt (RFC 3339), runtimePid (default process.pid).
   * @throws {LedgerInputError} a manifest field is missing or malformed (names the dotted path), or an option is invalid.
   * @throws {LedgerExistsError} `runDir` already holds manifest.json, records.ndjson or completion.json.
   * @throws the underlying `NodeJS.ErrnoException` if the directory or files cannot be created.
   */
  static async open(runDir: string, manifest: Omit<LedgerManifest, "specSha256">, opts: LedgerWriterOptions = {}): Promise<LedgerWriter> {
    if (opts.fsync !== undefined && opts.fsync !== "always" && opts.fsync !== "transitions" && opts.fsync !== "none")
      throw new LedgerInputError("options.fsync", `expected "always", "transitions" or "none", got ${JSON.stringify(opts.fsync)}`);
    const redactor = new Redactor();
    (opts.secrets ?? []).forEach((s, i) => redactor.add(s, `options.secrets[${i}]`));

    const parsed = ManifestInputSchema.safeParse(manifest);
    if (!parsed.success) {
      const { path: p, reason } = describeZodError("manifest", parsed.error);
      throw new LedgerInputError(p, reason);
    }
    const specText = JSON.stringify(manifest.spec);
    if (specText === undefined) throw new LedgerInputError("manifest.spec", "is not representable in JSON");
    const spec = redactor.redactValue(JSON.parse(specText));
    const tools = redactor.redactValue(manifest.tools) as Record<string, string>;
    const doc: LedgerManifest = {
      runId: manifest.runId,
      profile: manifest.profile,
      backend: manifest.backend,
      createdAt: manifest.createdAt,
      runtimePid: manifest.runtimePid ?? process.pid,
      tools,
      specSha256: sha256Hex(canonicalJson(spec, "manifest.spec")),
      spec,
    };
    const text = `${JSON.stringify(doc, null, 2)}\n`;
    if (redactor.foundIn(text)) throw new LedgerInputError("manifest", "would contain a registered secret outside any string value");
    const lone = mayHoldLoneSurrogateEscape(text) ? findLoneSurrogate(doc, "manifest") : undefined;
    if (lone !== undefined)
      throw new LedgerInputError(lone.path, `holds a lone surrogate U+${lone.unit.toString(16).toUpperCase()} at character ${lone.index}; text in the ledger must be valid Unicode`);

    const dir = path.resolve(runDir);
    await fsp.mkdir(dir, { recursive: true });
    for (const f of [LEDGER_FILES.manifest, LEDGER_FILES.records, LEDGER_FILES.completion])
      if (await exists(path.join(dir, f))) throw new LedgerExistsError(dir, f);

    const manifestPath = path.join(dir, LEDGER_FILES.manifest);
    try {
      await writeFileAtomic(manifestPath, text, { noClobber: true, syncDir: false });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") throw new LedgerExistsError(dir, LEDGER_FILES.manifest);
      throw err;
    }
    let fd: number;
    try {
      fd = fs.openSync(path.join(dir, LEDGER_FILES.records), fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o644);
    } catch (err) {
      await fsp.rm(manifestPath, { force: true });
      if ((err as NodeJS.ErrnoException).code === "EEXIST") throw new LedgerExistsError(dir, LEDGER_FILES.records);
      throw err;
    }
    await fsyncDir(dir);
    const now = opts.now ?? (() => performance.now());
    return new LedgerWriter(dir, fd, sha256Hex(text), redactor, now(), opts);
  }

  /** Number of records appended so far (= the last assigned seq). */
  get recordCount(): number {
    return this.seq;
  }

  /** Counters (records, batches, fdatasync calls, bytes). */
  get stats(): Readonly<LedgerWriterStats> {
    return { ...this.counters };
  }

  /** The fsync policy in force. */
  get fsyncPolicy(): FsyncPolicy {
    return this.policy;
  }

  /** @internal The records.ndjson file descriptor (tests close it to provoke a write failure). */
  get fd(): number {
    return this.fdNum;
  }

  /**
   * Register a secret: from now on any occurrence in a record or the completion is replaced with
   * `"[redacted]"` (see the module doc). Registering the same secret twice is a no-op.
   * @throws {LedgerInputError} the secret is shorter than {@link MIN_SECRET_LENGTH} characters or part of `"[redacted]"`.
   */
  redact(secret: string): void {
    this.redactor.add(secret, "secret");
  }

  /**
   * Append one record. `seq`, `at`, `elapsedMs` and `prev` are assigned now, in call order; the
   * returned promise resolves with the record as written once the batch holding it is written (and
   * fdatasync'ed, per the fsync policy). Never throws synchronously. A caller that does not await
   * must still attach a rejection handler: an unhandled rejection terminates Node.
   * @param kind `^[a-z][a-z0-9-]*$`, see {@link RecordKind}.
   * @param fields free-form JSON fields; `member` (string) names the member; `seq`, `at`, `elapsedMs`, `kind`, `prev` are reserved.
   * @returns rejects with {@link LedgerInputError} (bad kind/field, nothing written, writer still usable),
   *   {@link LedgerClosedError} (after `complete`/`close`) or {@link LedgerWriteError} (a write failed; latched).
   */
  append(kind: string, fields?: Record<string, unknown> & { member?: string }): Promise<LedgerRecord> {
    try {
      if (this.failure) return Promise.reject(this.failure);
      if (this.state !== "open") return Promise.reject(new LedgerClosedError(this.runDir, `append(${JSON.stringify(kind)})`, this.closedHow));
      if (typeof kind !== "string" || !KIND.test(kind))
        return Promise.reject(new LedgerInputError("record.kind", `expected a kind matching ^[a-z][a-z0-9-]*$, got ${JSON.stringify(kind)}`));
      const seq = this.seq + 1;
      const elapsedMs = Math.max(this.lastElapsed, round3(this.now() - this.t0));
      const at = this.wallClock().toISOString();
      let record: LedgerRecord;
      if (fields === undefined || fields === null) {
        record = { seq, at, elapsedMs, kind, prev: this.prevHash };
      } else {
        if (typeof fields !== "object" || Array.isArray(fields))
          return Promise.reject(new LedgerInputError(`record(${kind}).fields`, "expected an object"));
        for (const key of Object.keys(fields)) {
          if (RESERVED_FIELDS.has(key))
            return Promise.reject(new LedgerInputError(`record(${kind}).fields.${key}`, "is reserved (assigned by the writer)"));
        }
        if (fields.member !== undefined && (typeof fields.member !== "string" || fields.member === ""))
          return Promise.reject(new LedgerInputError(`record(${kind}).fields.member`, `expected a non-empty string, got ${JSON.stringify(fields.member)}`));
        // Spread (not Object.assign): a "__proto__" field stays a field. `member` goes right after `kind`.
        record = { seq, at, elapsedMs, kind, ...(fields.member !== undefined ? { member: fields.member } : {}), ...fields, prev: this.prevHash };
      }
      let line = serialize(record, kind);
      if (mayHoldLoneSurrogateEscape(line)) {
        // Half of a character cut in two somewhere upstream: write U+FFFD for it, never the `\udXXX`
        // escape that strict JSON and UTF-8 readers refuse (ledger verify: lone-surrogate).
        record = wellFormedValue(record) as LedgerRecord;
        line = serialize(record, kind);
      }
      if (this.redactor.foundIn(line)) {
        // Slow path: redact every caller-given value (the writer's own seq/at/elapsedMs/prev stay exact).
        const { seq: _s, at: _a, elapsedMs: _e, kind: _k, prev, ...rest } = JSON.parse(line) as LedgerRecord;
        record = { seq, at, elapsedMs, kind: this.redactor.redactString(kind), ...(this.redactor.redactValue(rest) as object), prev } as LedgerRecord;
        line = serialize(record, kind);
        if (this.redactor.foundIn(line))
          return Promise.reject(new LedgerInputError(`record(${kind})`, "would contain a registered secret outside any string value; not written"));
      }
      this.seq = seq;
      this.lastElapsed = elapsedMs;
      this.prevHash = sha256Hex(line);
      return new Promise<LedgerRecord>((resolve, reject) => {
        this.queue.push({ line, record, transition: TRANSITION_KINDS.has(kind), resolve, reject });
        this.scheduleFlush();
      });
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * Finish the ledger: refuse further appends, wait for every pending append, fdatasync
   * records.ndjson (whatever the policy), then write `completion.json` atomically (unique temp,
   * fsync, rename, fsync of the directory) and close the file.
   * `records`, `recordsSha256`, `manifestSha256` and `completedAt` are computed; other fields are
   * written as given (redacted).
   * @returns the completion as written.
   * @throws {LedgerInputError} malformed outcome/firstFailure/phasesMs, or a computed field given (nothing written; may be retried).
   * @throws {LedgerClosedError} `complete` or `close` was already called.
   * @throws {LedgerWriteError} a write failed (then no completion is written: the run reads as crashed).
   */
  complete(c: { outcome: Outcome; firstFailure: Completion["firstFailure"]; phasesMs: Record<string, number>; [k: string]: unknown }): Promise<Completion> {
    const p = this.completeInner(c);
    this.finishing = p;
    return p;
  }

  private finishing: Promise<unknown> | undefined;

  private async completeInner(c: { outcome: Outcome; firstFailure: Completion["firstFailure"]; phasesMs: Record<string, number>; [k: string]: unknown }): Promise<Completion> {
    if (this.failure) throw this.failure;
    if (this.state !== "open") throw new LedgerClosedError(this.runDir, "complete()", this.closedHow);
    const parsed = CompletionInputSchema.safeParse(c);
    if (!parsed.success) {
      const { path: p, reason } = describeZodError("completion", parsed.error);
      throw new LedgerInputError(p, reason);
    }
    for (const key of Object.keys(c))
      if (COMPLETION_COMPUTED.has(key)) throw new LedgerInputError(`completion.${key}`, "is computed by the writer and must not be given");
    const { outcome, firstFailure, phasesMs, ...extra } = c;
    let text: string;
    try {
      text = serialize({ outcome, firstFailure, phasesMs, ...extra }, "completion");
    } catch (err) {
      throw err instanceof LedgerInputError ? new LedgerInputError("completion", err.message) : err;
    }
    this.state = "completing";
    await this.drain();
    if (this.failure) throw this.failure;
    try {
      await this.sync();
    } catch (err) {
      this.latch(err, []);
      throw this.failure!;
    }
    // Lone surrogates become U+FFFD (see append).
    const body = wellFormedValue(this.redactor.redactValue(JSON.parse(text))) as Record<string, unknown>;
    const completion: Completion = {
      outcome: body.outcome as Outcome,
      firstFailure: body.firstFailure as Completion["firstFailure"],
      records: this.seq,
      recordsSha256: this.fileHash.copy().digest("hex"),
      manifestSha256: this.manifestSha256,
      phasesMs: body.phasesMs as Record<string, number>,
      completedAt: this.wallClock().toISOString(),
    };
    for (const [k, v] of Object.entries(body)) if (!(k in completion)) completion[k] = v;
    const out = `${JSON.stringify(completion, null, 2)}\n`;
    if (this.redactor.foundIn(out)) {
      this.state = "open";
      throw new LedgerInputError("completion", "would contain a registered secret outside any string value; not written");
    }
    try {
      await writeFileAtomic(path.join(this.runDir, LEDGER_FILES.completion), out, { noClobber: true });
    } catch (err) {
      this.latch(err, []);
      throw this.failure!;
    } finally {
      if (this.failure) this.closeFd();
    }
    this.state = "closed";
    this.closeFd();
    return completion;
  }

  /**
   * Release the file WITHOUT writing a completion (the ledger then reads as a crashed run). Waits for
   * pending appends (and for a `complete()` in progress, which then wins). Idempotent; later appends
   * reject with {@link LedgerClosedError}.
   */
  async close(): Promise<void> {
    if (this.state === "completing" && this.finishing) await this.finishing.catch(() => undefined);
    if (this.state === "closed") return;
    if (this.state === "open") this.closedHow = "closed without a completion";
    this.state = "completing";
    await this.drain();
    this.state = "closed";
    this.closeFd();
  }

  private fdClosed = false;
  private closeFd(): void {
    if (this.fdClosed) return;
    this.fdClosed = true;
    try {
      fs.closeSync(this.fdNum);
    } catch {
      // already closed underneath (EBADF): nothing to release
    }
  }

  private async sync(): Promise<void> {
    const t = performance.now();
    await fdatasync(this.fdNum);
    const ms = performance.now() - t;
    this.counters.syncs++;
    this.counters.syncMs += ms;
    if (ms > this.counters.syncMsMax) this.counters.syncMsMax = ms;
  }

  private scheduleFlush(): void {
    if (this.flushing || this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => void this.flush());
  }

  private drain(): Promise<void> {
    if (!this.flushing && !this.flushScheduled && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async flush(): Promise<void> {
    this.flushScheduled = false;
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.queue.length > 0 && !this.failure) {
        const batch = this.queue;
        this.queue = [];
        let text = "";
        let transition = false;
        for (const p of batch) {
          text += `${p.line}\n`;
          transition ||= p.transition;
        }
        const buf = Buffer.from(text, "utf8");
        try {
          for (let off = 0; off < buf.length; ) off += await write(this.fdNum, buf, off);
          this.counters.batches++;
          this.counters.bytes += buf.length;
          this.fileHash.update(buf);
          if (this.policy === "always" || (this.policy === "transitions" && transition)) await this.sync();
        } catch (err) {
          this.latch(err, batch);
          break;
        }
        this.counters.records += batch.length;
        for (const p of batch) p.resolve(p.record);
      }
    } finally {
      this.flushing = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  private latch(err: unknown, batch: Pending[]): void {
    const first = batch[0]?.record.seq;
    const last = batch[batch.length - 1]?.record.seq;
    const what = first === undefined ? "sync of records.ndjson or write of completion.json" : `write of records ${first}..${last} to records.ndjson`;
    this.failure ??= new LedgerWriteError(this.runDir, `${what} failed: ${(err as Error)?.message ?? String(err)}; the ledger is latched failed`, { cause: err });
    const pending = [...batch, ...this.queue];
    this.queue = [];
    for (const p of pending) p.reject(this.failure);
  }
}

function serialize(value: unknown, what: string): string {
  let line: string | undefined;
  try {
    line = JSON.stringify(value);
  } catch (err) {
    throw new LedgerInputError(`record(${what})`, `is not representable in JSON: ${(err as Error).message}`);
  }
  if (line === undefined) throw new LedgerInputError(`record(${what})`, "is not representable in JSON");
  return line;
}

// ---------------------------------------------------------------------------------------------
// Reader

/**
 * Read a run directory without checking the hash chain, digests or seq order (use `verifyLedger`
 * for that): parses manifest.json, every line of records.ndjson and completion.json if present.
 * A missing records.ndjson reads as no records (the run crashed before its first record).
 * @throws {LedgerVerifyError} `manifest-missing`, `invalid-utf8`, `manifest-invalid`, `torn-final-line`, `blank-line`,
 *   `invalid-json` (line number given) or `completion-invalid`.
 */
export async function readLedger(runDir: string): Promise<{ manifest: LedgerManifest; records: LedgerRecord[]; completion: Completion | null }> {
  const dir = path.resolve(runDir);
  const manifestBytes = await readOptional(path.join(dir, LEDGER_FILES.manifest));
  if (manifestBytes === undefined) throw new LedgerVerifyError("manifest-missing", dir, `${LEDGER_FILES.manifest} does not exist`);
  const manifest = parseManifest(dir, manifestBytes);
  const recordBytes = (await readOptional(path.join(dir, LEDGER_FILES.records))) ?? Buffer.alloc(0);
  const completionBytes = await readOptional(path.join(dir, LEDGER_FILES.completion));
  const records: LedgerRecord[] = [];
  for (const line of splitLines(dir, recordBytes, completionBytes !== undefined)) records.push(line.value);
  const completion = completionBytes === undefined ? null : parseCompletion(dir, completionBytes);
  return { manifest, records, completion };
}

/** @internal Read a file, `undefined` if it does not exist. */
export async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return await fsp.readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * @internal Throws `invalid-utf8` naming the byte offset and the bytes when `bytes` (all of `file`) is not
 * well-formed UTF-8.
 */
function checkUtf8(dir: string, file: string, bytes: Buffer): void {
  const bad = invalidUtf8(bytes);
  if (bad !== undefined)
    throw new LedgerVerifyError("invalid-utf8", dir, `${file} is not valid UTF-8 at byte ${bad.offset}: ${hexBytes(bad.bytes)} is not a UTF-8 sequence`);
}

/** @internal Parse and shape-check manifest.json. @throws {LedgerVerifyError} `invalid-utf8`, `manifest-invalid`. */
export function parseManifest(dir: string, bytes: Buffer): LedgerManifest {
  checkUtf8(dir, LEDGER_FILES.manifest, bytes);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new LedgerVerifyError("manifest-invalid", dir, `${LEDGER_FILES.manifest} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = ManifestSchema.safeParse(value);
  if (!parsed.success) {
    const { path: p, reason } = describeZodError("manifest", parsed.error);
    throw new LedgerVerifyError("manifest-invalid", dir, `${p}: ${reason}`);
  }
  return value as LedgerManifest;
}

/** @internal Parse and shape-check completion.json. @throws {LedgerVerifyError} `invalid-utf8`, `completion-invalid`. */
export function parseCompletion(dir: string, bytes: Buffer): Completion {
  checkUtf8(dir, LEDGER_FILES.completion, bytes);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new LedgerVerifyError("completion-invalid", dir, `${LEDGER_FILES.completion} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = CompletionSchema.safeParse(value);
  if (!parsed.success) {
    const { path: p, reason } = describeZodError("completion", parsed.error);
    throw new LedgerVerifyError("completion-invalid", dir, `${p}: ${reason}`);
  }
  return value as Completion;
}

/** @internal One line of records.ndjson. */
export interface RawLine {
  /** 1-based line number. */
  readonly number: number;
  /** Byte offset of the line's first byte. */
  readonly offset: number;
  /** The line's bytes without the newline. */
  readonly bytes: Buffer;
  readonly value: LedgerRecord;
}

/**
 * @internal Split records.ndjson into parsed lines. A last line without `\n`, or a last line that does
 * not parse, is `torn-final-line` unless the ledger is complete (a completed ledger cannot have a torn
 * tail, so it is `invalid-json`). Lines must be well-formed UTF-8 (`invalid-utf8`, or torn on the last line of an
 * unfinished ledger) and JSON objects; blank lines are refused.
 */
export function* splitLines(dir: string, bytes: Buffer, complete: boolean): Generator<RawLine> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let offset = 0;
  let number = 0;
  while (offset < bytes.length) {
    number++;
    const nl = bytes.indexOf(0x0a, offset);
    const end = nl === -1 ? bytes.length : nl;
    const isLast = nl === -1 || nl === bytes.length - 1;
    const lineBytes = bytes.subarray(offset, end);
    const torn = (reason: string): LedgerVerifyError =>
      new LedgerVerifyError("torn-final-line", dir, `${reason} (${lineBytes.length} bytes from offset ${offset}); recoverLedger can cut it`, number, offset);
    if (nl === -1 && !complete) {
      throw torn("the final line has no terminating newline");
    }
    if (lineBytes.length === 0) throw new LedgerVerifyError("blank-line", dir, "expected a JSON object, found an empty line", number);
    const bad = invalidUtf8(bytes, offset, end);
    if (bad !== undefined) {
      // A torn write can stop inside a character: on the last line of an unfinished ledger that is torn.
      if (isLast && !complete) throw torn(`the final line is not valid UTF-8 at byte ${bad.offset}`);
      throw new LedgerVerifyError(
        "invalid-utf8",
        dir,
        `${LEDGER_FILES.records} is not valid UTF-8 at byte ${bad.offset} (line ${number}, byte ${bad.offset - offset} of the line): ${hexBytes(bad.bytes)} is not a UTF-8 sequence`,
        number,
        offset,
      );
    }
    let value: unknown;
    try {
      value = JSON.parse(decoder.decode(lineBytes));
    } catch (err) {
      if (isLast && !complete) throw torn(`the final line does not parse: ${(err as Error).message}`);
      throw new LedgerVerifyError("invalid-json", dir, `expected a JSON object, found unparsable text: ${(err as Error).message}`, number);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value))
      throw new LedgerVerifyError("invalid-json", dir, `expected a JSON object, found ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`, number);
    if (nl === -1) throw new LedgerVerifyError("invalid-json", dir, "expected the line to end with a newline (the ledger is complete, so this is not a torn write)", number);
    yield { number, offset, bytes: lineBytes, value: value as LedgerRecord };
    offset = end + 1;
  }
}

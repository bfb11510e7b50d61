/**
 * The writer of a run ledger (./format.ts describes the files).
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
 */
import { createHash, type Hash } from "node:crypto";
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { fsyncDir, writeFileAtomic } from "../atomic";
import { canonicalJson, sha256Hex } from "../digest";
import { LedgerClosedError, LedgerExistsError, LedgerInputError, LedgerVerifyError, LedgerWriteError } from "../errors";
import type { Outcome } from "../summary";
import { findLoneSurrogate, mayHoldLoneSurrogateEscape, wellFormedValue } from "../text";
import {
  CompletionInputSchema,
  DEFAULT_FSYNC_POLICY,
  KIND,
  LEDGER_FILES,
  ManifestInputSchema,
  TRANSITION_KINDS,
  describeZodError,
  type Completion,
  type FsyncPolicy,
  type LedgerManifest,
  type LedgerRecord,
} from "./format";
import { readOptional, splitLines, type RawLine } from "./read";
import { Redactor } from "./redact";
import { recoverLedger } from "./verify";

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

/** What {@link LedgerWriter.resume} returns: the writer, and the records it found (read once). */
export interface ResumedLedger {
  /** Positioned at the end of records.ndjson; the next append continues the chain. */
  readonly writer: LedgerWriter;
  /** The records of records.ndjson (a torn final line cut), in order: what `readLedger` would return for them. */
  readonly records: LedgerRecord[];
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
  return new Promise((resolve, reject) => fs.write(fd, buf, offset, buf.length - offset, null, (err, n) => (err ? reject(err) : resolve(n))));
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
      throw new LedgerInputError(
        lone.path,
        `holds a lone surrogate U+${lone.unit.toString(16).toUpperCase()} at character ${lone.index}; text in the ledger must be valid Unicode`,
      );

    const dir = path.resolve(runDir);
    await fsp.mkdir(dir, { recursive: true });
    for (const f of [LEDGER_FILES.manifest, LEDGER_FILES.records, LEDGER_FILES.completion]) if (await exists(path.join(dir, f))) throw new LedgerExistsError(dir, f);

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

  /**
   * Reopen the ledger of a run whose writer is GONE (its process died without a completion: `cohort run`
   * SIGKILLed, or the run worker's container lost with the run inside it), to append its last records and
   * complete it. A ledger whose last record already ends the run (`teardown-finished`: the writer died before its
   * completion) is accepted as it is. A torn final line is cut first ({@link recoverLedger}, the cut bytes kept beside the file);
   * then the records are verified, and the next record continues the chain: `seq` from the last one, `prev`
   * its SHA-256, `elapsedMs` its value plus the wall-clock time since its `at` (never decreasing).
   *
   * The caller must know the writer is gone: two writers on one file break the chain (the run's own later
   * `complete()` then fails on the existing completion.json, `noClobber`, rather than replace it). Secrets
   * registered with the dead writer are not known here: give them in `opts.secrets` when the new records may
   * contain them.
   *
   * @returns a writer positioned at the end of records.ndjson, and the records the file holds ({@link ResumedLedger}).
   * @throws {LedgerExistsError} the ledger already has its completion.json (nothing is touched).
   * @throws {LedgerVerifyError} the ledger is damaged beyond a torn final line, or has no manifest (nothing is
   *   touched); `records-changed` when records.ndjson grew while it was read (a writer is alive).
   * @throws {LedgerInputError} an option is invalid.
   */
  static async resume(runDir: string, opts: LedgerWriterOptions = {}): Promise<ResumedLedger> {
    if (opts.fsync !== undefined && opts.fsync !== "always" && opts.fsync !== "transitions" && opts.fsync !== "none")
      throw new LedgerInputError("options.fsync", `expected "always", "transitions" or "none", got ${JSON.stringify(opts.fsync)}`);
    const dir = path.resolve(runDir);
    if (await exists(path.join(dir, LEDGER_FILES.completion))) throw new LedgerExistsError(dir, LEDGER_FILES.completion);
    // Cuts only a torn final line; verifies the rest (chain, seq, manifest digest), naming any other damage. A
    // ledger whose records end the run (its writer died between its last record and its completion) is whole.
    try {
      await recoverLedger(dir);
    } catch (err) {
      if (!(err instanceof LedgerVerifyError && err.code === "completion-missing")) throw err;
    }
    const redactor = new Redactor();
    (opts.secrets ?? []).forEach((s, i) => redactor.add(s, `options.secrets[${i}]`));
    const manifestBytes = await fsp.readFile(path.join(dir, LEDGER_FILES.manifest));
    const recordsPath = path.join(dir, LEDGER_FILES.records);
    const bytes = (await readOptional(recordsPath)) ?? Buffer.alloc(0);
    const records: LedgerRecord[] = [];
    let last: RawLine | undefined;
    let count = 0;
    for (const line of splitLines(dir, bytes, false)) {
      records.push(line.value);
      last = line;
      count = line.number;
    }
    const fd = fs.openSync(recordsPath, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o644);
    if (fs.fstatSync(fd).size !== bytes.length) {
      fs.closeSync(fd);
      throw new LedgerVerifyError("records-changed", dir, `${LEDGER_FILES.records} changed while it was being resumed: is the run's writer still alive?`);
    }
    const now = opts.now ?? (() => performance.now());
    const wallClock = opts.wallClock ?? (() => new Date());
    const lastElapsed = typeof last?.value.elapsedMs === "number" ? last.value.elapsedMs : 0;
    const lastAt = last === undefined ? Date.parse(JSON.parse(manifestBytes.toString("utf8")).createdAt as string) : Date.parse(last.value.at);
    const sinceLast = Number.isFinite(lastAt) ? Math.max(0, wallClock().getTime() - lastAt) : 0;
    const writer = new LedgerWriter(dir, fd, sha256Hex(manifestBytes), redactor, now() - (lastElapsed + sinceLast), opts);
    writer.seq = count;
    writer.lastElapsed = lastElapsed;
    if (last !== undefined) writer.prevHash = sha256Hex(last.bytes);
    writer.fileHash.update(bytes);
    writer.counters.bytes = bytes.length;
    return { writer, records };
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
   * `"[redacted]"` (see ./redact.ts). Registering the same secret twice is a no-op.
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
        if (typeof fields !== "object" || Array.isArray(fields)) return Promise.reject(new LedgerInputError(`record(${kind}).fields`, "expected an object"));
        for (const key of Object.keys(fields)) {
          if (RESERVED_FIELDS.has(key)) return Promise.reject(new LedgerInputError(`record(${kind}).fields.${key}`, "is reserved (assigned by the writer)"));
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
        if (this.redactor.foundIn(line)) return Promise.reject(new LedgerInputError(`record(${kind})`, "would contain a registered secret outside any string value; not written"));
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
    for (const key of Object.keys(c)) if (COMPLETION_COMPUTED.has(key)) throw new LedgerInputError(`completion.${key}`, "is computed by the writer and must not be given");
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
          for (let off = 0; off < buf.length;) off += await write(this.fdNum, buf, off);
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

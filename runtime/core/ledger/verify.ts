/**
 * Verification and recovery of a run ledger (DESIGN.md "Ledger"; format in ./format.ts).
 *
 * `verifyLedger` checks everything the format promises and throws a {@link LedgerVerifyError} with a
 * stable `code` for the first violation. `recoverLedger` repairs exactly one kind of damage, a torn
 * final line (what a crash in the middle of a `write()` can leave), the way etcd's WAL repair does
 * (https://github.com/etcd-io/etcd/blob/main/server/storage/wal/repair.go): the torn bytes are copied
 * aside, the file is truncated at the last complete record and fsynced. Any other damage is refused.
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as path from "node:path";
import { writeFileAtomic, fsyncDir } from "../atomic";
import { LedgerVerifyError } from "../errors";
import { findLoneSurrogate, type LoneSurrogate } from "../text";
import { canonicalJson, sha256Hex } from "../digest";
import type { Outcome } from "../summary";
import { LEDGER_FILES, isRfc3339, type Completion } from "./format";
import { manifestMissing, parseCompletion, parseManifest, readOptional, splitLines } from "./read";

/**
 * Record kinds that end a run: the scheduler writes `teardown-finished` last and then completion.json
 * (`run-finished` is accepted as well, for writers that name their final record so).
 */
export const FINAL_RECORD_KINDS: ReadonlySet<string> = new Set(["teardown-finished", "run-finished"]);

/** Result of a successful {@link verifyLedger}. */
export interface VerifyReport {
  ok: true;
  runId: string;
  /** Number of records (= last seq). */
  records: number;
  /** completion.json exists (and matches). */
  complete: boolean;
  /** completion.outcome, or null without a completion (crashed or still running). */
  outcome: Outcome | null;
}

/**
 * Verify a run directory:
 * 1. manifest.json exists, parses and has the required fields; its `specSha256` matches the spec;
 * 2. every line of records.ndjson is a JSON object terminated by `\n`, no blank lines;
 * 3. `seq` runs 1, 2, 3, … without gaps; `at` is RFC 3339; `elapsedMs` is a number that never decreases;
 *    `kind` is a non-empty string; `member`, if present, a string;
 * 4. `prev` of line 1 is the SHA-256 of manifest.json's bytes, `prev` of line n the SHA-256 of line n-1's bytes;
 * 5. if completion.json exists: it parses, its outcome/firstFailure are consistent, and `records`,
 *    `recordsSha256`, `manifestSha256` match the files;
 * 6. all three files are well-formed UTF-8 (`invalid-utf8`) and no string or key in them holds a lone UTF-16
 *    surrogate, the escape `\ud83d` without its pair (`lone-surrogate`).
 * 7. without completion.json, the last record is not one that ends a run ({@link FINAL_RECORD_KINDS}):
 *    otherwise `completion-missing` (a finished run whose completion was deleted).
 * 8. completion.json says nothing the records contradict ({@link completionContradiction}): completion.json is not
 *    in the hash chain, so its outcome, first failure, ready count and time to ready are checked against the records
 *    that are (`completion-mismatch`). Its `phasesMs` and `completedAt` are not provable from the records.
 * A missing records.ndjson without completion reads as zero records.
 * @throws {LedgerVerifyError} on the first violation, with `code`, `line` (1-based, when one line is
 *   at fault) and `detail` (expected vs found).
 */
export async function verifyLedger(runDir: string): Promise<VerifyReport> {
  const dir = path.resolve(runDir);
  const manifestBytes = await readOptional(path.join(dir, LEDGER_FILES.manifest));
  if (manifestBytes === undefined) throw await manifestMissing(dir);
  const manifest = parseManifest(dir, manifestBytes);
  const loneInManifest = findLoneSurrogate(manifest, "manifest");
  if (loneInManifest !== undefined) throw new LedgerVerifyError("lone-surrogate", dir, loneSurrogateDetail(LEDGER_FILES.manifest, loneInManifest));
  let specSha: string;
  try {
    specSha = sha256Hex(canonicalJson(manifest.spec, "manifest.spec"));
  } catch (err) {
    throw new LedgerVerifyError("manifest-invalid", dir, (err as Error).message);
  }
  if (specSha !== manifest.specSha256)
    throw new LedgerVerifyError("spec-digest-mismatch", dir, `manifest.specSha256 is ${manifest.specSha256} but the canonical JSON of manifest.spec hashes to ${specSha}`);
  const manifestSha = sha256Hex(manifestBytes);

  const completionBytes = await readOptional(path.join(dir, LEDGER_FILES.completion));
  const recordBytes = await readOptional(path.join(dir, LEDGER_FILES.records));
  if (recordBytes === undefined && completionBytes !== undefined)
    throw new LedgerVerifyError("records-missing", dir, `${LEDGER_FILES.records} does not exist but ${LEDGER_FILES.completion} does`);
  const bytes = recordBytes ?? Buffer.alloc(0);

  let expectedPrev = manifestSha;
  let lastElapsed = 0;
  let count = 0;
  let lastKind: string | undefined;
  /** The records {@link completionContradiction} reads. */
  const facts: { kind: string; [k: string]: unknown }[] = [];
  for (const line of splitLines(dir, bytes, completionBytes !== undefined)) {
    const n = line.number;
    const r = line.value as Record<string, unknown>;
    const bad = (code: "record-invalid" | "seq-gap" | "seq-mismatch" | "hash-chain-broken" | "lone-surrogate", detail: string): LedgerVerifyError =>
      new LedgerVerifyError(code, dir, detail, n, line.offset);
    if (!("seq" in r)) throw bad("record-invalid", `expected seq ${n}, found no seq field`);
    if (typeof r.seq !== "number" || !Number.isInteger(r.seq)) throw bad("seq-mismatch", `expected seq ${n}, found ${JSON.stringify(r.seq)}`);
    if (r.seq > n) throw bad("seq-gap", `expected seq ${n}, found ${r.seq}: ${r.seq - n} record(s) missing before it`);
    if (r.seq < n) throw bad("seq-mismatch", `expected seq ${n}, found ${r.seq}: a duplicated or reordered record`);
    if (typeof r.prev !== "string") throw bad("record-invalid", `expected prev to be a SHA-256 hex string, found ${JSON.stringify(r.prev)}`);
    if (r.prev !== expectedPrev)
      throw bad(
        "hash-chain-broken",
        n === 1
          ? `expected prev = SHA-256 of ${LEDGER_FILES.manifest} (${expectedPrev}), found ${r.prev}: the manifest was altered or the records belong to another run`
          : `expected prev = SHA-256 of line ${n - 1} (${expectedPrev}), found ${r.prev}: line ${n - 1} was altered or line ${n} does not follow it`,
      );
    if (!isRfc3339(r.at)) throw bad("record-invalid", `expected at to be an RFC 3339 date-time, found ${JSON.stringify(r.at)}`);
    if (typeof r.elapsedMs !== "number" || !Number.isFinite(r.elapsedMs) || r.elapsedMs < 0)
      throw bad("record-invalid", `expected elapsedMs to be a non-negative number, found ${JSON.stringify(r.elapsedMs)}`);
    if (r.elapsedMs < lastElapsed) throw bad("record-invalid", `expected elapsedMs >= ${lastElapsed} (monotonic), found ${r.elapsedMs}`);
    if (typeof r.kind !== "string" || r.kind === "") throw bad("record-invalid", `expected kind to be a non-empty string, found ${JSON.stringify(r.kind)}`);
    if ("member" in r && typeof r.member !== "string") throw bad("record-invalid", `expected member to be a string, found ${JSON.stringify(r.member)}`);
    const lone = findLoneSurrogate(r, "record");
    if (lone !== undefined) throw bad("lone-surrogate", loneSurrogateDetail(LEDGER_FILES.records, lone));
    lastElapsed = r.elapsedMs;
    lastKind = r.kind;
    if (RUN_FACT_KINDS.has(r.kind)) facts.push(r as { kind: string; [k: string]: unknown });
    expectedPrev = sha256Hex(line.bytes);
    count = n;
  }

  if (completionBytes === undefined) {
    // A run writes completion.json right after its last record; without it, the records must not say it finished.
    if (lastKind !== undefined && FINAL_RECORD_KINDS.has(lastKind))
      throw new LedgerVerifyError(
        "completion-missing",
        dir,
        `${LEDGER_FILES.completion} does not exist but the run finished (line ${count} is ${lastKind}): it was deleted or lost`,
      );
    return { ok: true, runId: manifest.runId, records: count, complete: false, outcome: null };
  }
  const completion = parseCompletion(dir, completionBytes);
  const loneInCompletion = findLoneSurrogate(completion, "completion");
  if (loneInCompletion !== undefined) throw new LedgerVerifyError("lone-surrogate", dir, loneSurrogateDetail(LEDGER_FILES.completion, loneInCompletion));
  if (completion.records !== count)
    throw new LedgerVerifyError("count-mismatch", dir, `${LEDGER_FILES.completion} says ${completion.records} records, ${LEDGER_FILES.records} has ${count}`);
  const recordsSha = sha256Hex(bytes);
  if (completion.recordsSha256 !== recordsSha)
    throw new LedgerVerifyError(
      "records-digest-mismatch",
      dir,
      `${LEDGER_FILES.completion} recordsSha256 is ${completion.recordsSha256}, ${LEDGER_FILES.records} hashes to ${recordsSha}`,
    );
  if (completion.manifestSha256 !== manifestSha)
    throw new LedgerVerifyError(
      "manifest-digest-mismatch",
      dir,
      `${LEDGER_FILES.completion} manifestSha256 is ${completion.manifestSha256}, ${LEDGER_FILES.manifest} hashes to ${manifestSha}`,
    );
  const contradiction = completionContradiction(completion, facts);
  if (contradiction !== undefined) throw new LedgerVerifyError("completion-mismatch", dir, `${LEDGER_FILES.completion} ${contradiction}`);
  return { ok: true, runId: manifest.runId, records: count, complete: true, outcome: completion.outcome };
}

/** The record kinds {@link completionContradiction} reads. */
const RUN_FACT_KINDS: ReadonlySet<string> = new Set(["run-failed", "run-interrupted", "member-failed", "member-ready", "roster-ready"]);

/**
 * What completion.json says that the records contradict, as the scheduler writes both (runtime/core/scheduler.ts:
 * `member-ready` and its ready count move together, `roster-ready` carries `timeToReadyMs`, a failure is recorded as
 * `run-failed` before the completion's `failed`); `undefined` when nothing does.
 *
 * Only what the records prove is checked: a `failed` completion without a `run-failed` record is accepted (a run
 * whose ledger write failed is failed with no record of it), and `readyCount`/`timeToReadyMs` only when present.
 *
 * @param completion - the parsed completion.json
 * @param facts - the records of {@link RUN_FACT_KINDS}, in order
 * @returns one clause naming the field, what it says and what the records show
 */
export function completionContradiction(completion: Completion, facts: readonly { kind: string; [k: string]: unknown }[]): string | undefined {
  const first = (kind: string) => facts.find((r) => r.kind === kind);
  const runFailed = first("run-failed");
  const line = (r: { [k: string]: unknown }) => (typeof r.seq === "number" ? ` (line ${r.seq})` : "");
  if (runFailed !== undefined && completion.outcome !== "failed") return `says outcome ${completion.outcome}, but the records hold run-failed${line(runFailed)}`;
  if (completion.outcome === "succeeded") {
    for (const kind of ["run-interrupted", "member-failed"]) {
      const r = first(kind);
      if (r !== undefined) return `says outcome succeeded, but the records hold ${kind}${line(r)}`;
    }
    if (completion.firstFailure !== null) return "says outcome succeeded with a firstFailure";
  }
  const ready = facts.filter((r) => r.kind === "member-ready").length;
  if (typeof completion.readyCount === "number" && completion.readyCount !== ready) return `says readyCount ${completion.readyCount}, but the records hold ${ready} member-ready`;
  if (typeof completion.timeToReadyMs === "number") {
    const rosterReady = first("roster-ready");
    if (rosterReady === undefined) return `says timeToReadyMs ${completion.timeToReadyMs}, but the records hold no roster-ready`;
    if (typeof rosterReady.timeToReadyMs === "number" && rosterReady.timeToReadyMs !== completion.timeToReadyMs)
      return `says timeToReadyMs ${completion.timeToReadyMs}, but roster-ready${line(rosterReady)} says ${rosterReady.timeToReadyMs}`;
  }
  return undefined;
}

/** The `detail` of a `lone-surrogate` error: file, dotted path, code unit, index. */
function loneSurrogateDetail(file: string, lone: LoneSurrogate): string {
  return `${file} ${lone.path} holds a lone surrogate U+${lone.unit.toString(16).toUpperCase()} at character ${lone.index} (half of a character cut in two; strict JSON and UTF-8 readers refuse it)`;
}

/** Result of {@link recoverLedger}. */
export interface RecoverReport {
  /** A torn final line was cut. */
  recovered: boolean;
  /** Bytes removed from the end of records.ndjson (0 when nothing was cut). */
  truncatedBytes: number;
  /** Where the cut bytes were kept: `<runDir>/records.ndjson.torn-<UTC yyyymmddThhmmssmmmZ>`. */
  movedTo?: string;
}

/**
 * Repair a ledger whose ONLY damage is a torn final line (no trailing `\n`, or an unparsable last
 * line, in a ledger without completion): copy the torn bytes to `records.ndjson.torn-<ts>`
 * (atomically), truncate records.ndjson to the end of the last complete record, fsync it and the
 * directory, and verify again. A ledger that verifies is left untouched (`recovered: false`).
 * Must not be run while the run's writer is still alive.
 * @throws {LedgerVerifyError} any other damage (the file is not touched), or `records-changed` if
 *   records.ndjson changed during recovery.
 */
export async function recoverLedger(runDir: string): Promise<RecoverReport> {
  const dir = path.resolve(runDir);
  let torn: LedgerVerifyError;
  try {
    await verifyLedger(dir);
    return { recovered: false, truncatedBytes: 0 };
  } catch (err) {
    if (!(err instanceof LedgerVerifyError) || err.code !== "torn-final-line" || err.byteOffset === undefined) throw err;
    torn = err;
  }
  const recordsPath = path.join(dir, LEDGER_FILES.records);
  const offset = torn.byteOffset!;
  const handle = await fsp.open(recordsPath, fs.constants.O_RDWR);
  let cut: number;
  let movedTo: string;
  try {
    const { size } = await handle.stat();
    const tail = Buffer.alloc(size - offset);
    await handle.read(tail, 0, tail.length, offset);
    cut = tail.length;
    movedTo = path.join(dir, `${LEDGER_FILES.records}.torn-${new Date().toISOString().replace(/[-:.]/g, "")}`);
    await writeFileAtomic(movedTo, tail, { noClobber: true });
    const now = await handle.stat();
    if (now.size !== size)
      throw new LedgerVerifyError("records-changed", dir, `${LEDGER_FILES.records} grew from ${size} to ${now.size} bytes during recovery: is the run's writer still alive?`);
    await handle.truncate(offset);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fsyncDir(dir);
  await verifyLedger(dir);
  return { recovered: true, truncatedBytes: cut, movedTo };
}

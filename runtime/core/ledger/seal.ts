/**
 * Completing the ledger of a run that lost its runtime (docs/temporal.md "A lost worker").
 *
 * A `cohort run` completes its own ledger when it is stopped (a signal, its watched worker gone: `--watch-pid`).
 * It cannot when it dies with its worker: on the cluster profiles the run is the worker's child inside the
 * worker's container, and a container that is killed (the pod force-deleted, the node lost, OOM) takes the run
 * with it, leaving a ledger without completion.json. The workflow's cleanup step (runtime/temporal/activities.ts
 * `cleanupRun`) reclaims the run's members and then calls {@link sealLostRun}, which appends what is now known
 * and writes the completion. What it appends depends only on the records, so a seal that dies midway is finished
 * by the next attempt without repeating itself:
 *
 * - `member-stopped` (`by: "cleanup"`) for each member whose last record (in record order) is its
 *   `member-started` (the cleanup waited until none of the run's Sandboxes and pods was listed, so they are
 *   stopped); a member whose last record is `member-stopped` or `member-exited` is left alone;
 * - `run-interrupted` (`lost: <reason>`), unless the records already hold a `run-interrupted` or a `run-failed`;
 * - `teardown-finished` (`by: "cleanup"`), unless the last record already ends the run ({@link FINAL_RECORD_KINDS});
 * - completion.json: outcome `failed` with the records' first `run-failed` when there is one; else `interrupted`
 *   with `interruptedBy` = the first `run-interrupted`'s `signal`, or `"runtime-lost"`; else, when the run's own
 *   records ended it (it died after its `teardown-finished`, before its completion), `succeeded`; `readyCount` (the
 *   `member-ready` records, as the scheduler counts them), `size` and `timeToReadyMs` from the records;
 *   `phasesMs` from the run-level records' `elapsedMs` since `run-started` (admission, startup, hold; teardown 0).
 *
 * One sealer at a time: `<runDir>/seal.lock` (created exclusively, holding the sealer's pid and start time: a pid
 * lock, ../pid-lock.ts) is held from the resume to the completion; a lock whose holder is gone is taken over. The
 * ledger then verifies (`cohort ledger verify`) like any other completed run.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { LedgerExistsError } from "../errors";
import { acquirePidLock, pidLockHolderOf, thisLockHolder } from "../pid-lock";
import { readProcStat } from "../proc-stat";
import type { Outcome } from "../summary";
import { LEDGER_FILES, type LedgerRecord } from "./format";
import { parseManifest, readLedger } from "./read";
import { FINAL_RECORD_KINDS, verifyLedger } from "./verify";
import { LedgerWriter, type ResumedLedger } from "./writer";

/** The seal's lock file inside the run directory. */
export const SEAL_LOCK_FILE = "seal.lock";

/** What {@link sealLostRun} found and did. */
export interface SealReport {
  /** The run directory (absolute). */
  readonly runDir: string;
  /**
   * `sealed`: this call completed the ledger; `complete`: it already had its completion (the run completed it,
   * or an earlier cleanup attempt did); `absent`: no ledger there (the run never opened one, or its directory
   * did not outlive the worker: an emptyDir).
   */
  readonly state: "sealed" | "complete" | "absent";
  /** The completion's outcome; `null` when absent. */
  readonly outcome: Outcome | null;
  /** Members this call recorded as stopped (sealed only). */
  readonly stopped: readonly string[];
  /** Set when a ledger found complete does not verify: the verifier's message (nothing can repair it). */
  readonly problem?: string;
}

/** Raised when the run's own process, or another sealer, is still at work on the ledger: retry later. */
export class LedgerBusyError extends Error {
  constructor(
    readonly runDir: string,
    readonly pid: number,
    what: string,
  ) {
    super(`ledger ${runDir}: ${what} is still running (pid ${pid}); the ledger is not sealed beside it`);
    this.name = "LedgerBusyError";
  }
}

/**
 * Whether `pid` is a live (non-zombie) `cohort run` of `runId` in this PID namespace: `/proc/<pid>/cmdline` holds
 * `--run-id <runId>`. In another namespace (a new worker container) the pid names another process or none, and
 * the check is false, as it should be: the run died with its container.
 */
export function runProcessAlive(pid: number | undefined, runId: string): boolean {
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return false;
  const stat = readProcStat(pid);
  if (stat === undefined || stat.state === "Z" || stat.state === "X") return false;
  let argv: string[];
  try {
    argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return false;
  }
  const i = argv.indexOf("--run-id");
  return i !== -1 && argv[i + 1] === runId;
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * Takes `<dir>/seal.lock` (`{pid, startTicks}` of this process: a pid lock, ../pid-lock.ts), taking over one whose
 * holder is dead. Returns its release.
 * @throws {LedgerBusyError} a live sealer holds it, or other sealers kept taking it
 * @throws {Error} a directory stands at the lock path
 */
async function takeSealLock(dir: string): Promise<() => void> {
  const lock = path.join(dir, SEAL_LOCK_FILE);
  await acquirePidLock(lock, thisLockHolder(), {
    parse: pidLockHolderOf,
    held: (holder) => new LedgerBusyError(dir, holder.pid, "another seal of it"),
    directory: () => new Error(`ledger ${dir}: ${lock} is a directory, not a seal lock; remove it`),
    contended: () => new LedgerBusyError(dir, process.pid, `a seal (${lock} taken again by another)`),
  });
  return () => fs.rmSync(lock, { force: true });
}

/**
 * Completes the ledger in `runDir` of a run whose runtime is gone (see the module comment).
 *
 * @param runDir - the run directory (`<artifacts>/<runId>`)
 * @param reason - why the runtime is gone, as the workflow saw it (e.g. `activity Heartbeat timeout`); recorded
 *   in `run-interrupted.lost`
 * @param opts.waitMs - how long to wait for a run process still alive in this PID namespace (it completes its
 *   own ledger) before refusing. @default 45000
 * @throws {LedgerBusyError} the run's process is still alive after `waitMs`, or another live sealer holds the
 *   seal lock (nothing written)
 * @throws {LedgerVerifyError} the ledger is damaged beyond a torn final line (nothing written)
 * @throws {Error} a directory stands at the seal lock's path (nothing written)
 */
export async function sealLostRun(runDir: string, reason: string, opts: { waitMs?: number; pollMs?: number } = {}): Promise<SealReport> {
  const dir = path.resolve(runDir);
  if (!fs.existsSync(path.join(dir, LEDGER_FILES.manifest))) return { runDir: dir, state: "absent", outcome: null, stopped: [] };
  if (fs.existsSync(path.join(dir, LEDGER_FILES.completion))) return await completeAlready(dir);
  const manifest = parseManifest(dir, fs.readFileSync(path.join(dir, LEDGER_FILES.manifest)));
  // A run outlived its worker here (same PID namespace: the sim's detached worker): it is stopping on its own.
  const waitMs = opts.waitMs ?? 45_000;
  const waitStarted = Date.now();
  while (runProcessAlive(manifest.runtimePid, manifest.runId)) {
    if (Date.now() - waitStarted >= waitMs) throw new LedgerBusyError(dir, manifest.runtimePid!, `the run's runtime (waited ${waitMs} ms)`);
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 250));
  }
  const release = await takeSealLock(dir);
  try {
    let resumed: ResumedLedger;
    try {
      // Cuts a torn final line (a run killed mid-write), verifies the rest, and hands back the records.
      resumed = await LedgerWriter.resume(dir);
    } catch (error) {
      // The run (or another sealer, before this one took the lock) completed it meanwhile.
      if (error instanceof LedgerExistsError) return await completeAlready(dir);
      throw error;
    }
    const { writer, records } = resumed;
    try {
      return await seal(dir, writer, records, reason);
    } finally {
      await writer.close();
    }
  } finally {
    release();
  }
}

/** The report of a ledger found complete, verified. */
async function completeAlready(dir: string): Promise<SealReport> {
  try {
    const report = await verifyLedger(dir);
    return { runDir: dir, state: "complete", outcome: report.outcome, stopped: [] };
  } catch (error) {
    const { completion } = await readLedger(dir).catch(() => ({ completion: null }));
    return { runDir: dir, state: "complete", outcome: completion?.outcome ?? null, stopped: [], problem: (error as Error).message };
  }
}

/** Appends to `writer` what the ledger's `records` (all of them, as resumed) still lack, then writes the completion. */
async function seal(dir: string, writer: LedgerWriter, records: readonly LedgerRecord[], reason: string): Promise<SealReport> {
  // Each member's last state, in record order (a restarted member is running again after its exit).
  const running = new Map<string, boolean>();
  let readyCount = 0;
  for (const r of records) {
    if (r.member === undefined) continue;
    if (r.kind === "member-started") running.set(r.member, true);
    if (r.kind === "member-stopped" || r.kind === "member-exited") running.set(r.member, false);
    if (r.kind === "member-ready") readyCount++;
  }
  const stopped = [...running]
    .filter(([, up]) => up)
    .map(([m]) => m)
    .sort();
  const failed = records.find((r) => r.kind === "run-failed");
  const interrupted = records.find((r) => r.kind === "run-interrupted");
  const last = records.at(-1);
  const finished = last !== undefined && FINAL_RECORD_KINDS.has(last.kind);
  const appends: Promise<LedgerRecord>[] = [];
  if (!finished) {
    for (const member of stopped) appends.push(writer.append("member-stopped", { member, by: "cleanup" }));
    if (failed === undefined && interrupted === undefined) appends.push(writer.append("run-interrupted", { lost: reason }));
    appends.push(writer.append("teardown-finished", { by: "cleanup" }));
  }
  await Promise.all(appends);
  const at = (kind: string): number | undefined => records.find((x) => x.kind === kind)?.elapsedMs;
  const t0 = at("run-started") ?? 0;
  const end = last?.elapsedMs ?? t0;
  const admitted = at("roster-admitted");
  const rosterReady = at("roster-ready");
  const holdStarted = at("hold-started");
  const holdEnded = at("hold-ended") ?? (holdStarted !== undefined ? end : undefined);
  const phasesMs: Record<string, number> = {
    admission: round3(Math.max(0, (admitted ?? end) - t0)),
    startup: admitted === undefined ? 0 : round3(Math.max(0, (rosterReady ?? end) - admitted)),
    hold: holdStarted === undefined || holdEnded === undefined ? 0 : round3(Math.max(0, holdEnded - holdStarted)),
    teardown: 0,
  };
  const runStarted = records.find((r) => r.kind === "run-started");
  const readyRecord = records.find((r) => r.kind === "roster-ready");
  // As the scheduler decides (runtime/core/scheduler.ts): a run whose own records end it (teardown-finished) with
  // neither a failure nor an interruption had succeeded, and died only before writing its completion.
  const outcome: Outcome = failed !== undefined ? "failed" : interrupted !== undefined || !finished ? "interrupted" : "succeeded";
  const completion = await writer.complete({
    outcome,
    firstFailure: failed !== undefined ? { member: typeof failed.member === "string" ? failed.member : null, reason: String(failed.reason ?? "run-failed") } : null,
    phasesMs,
    ...(typeof runStarted?.size === "number" ? { size: runStarted.size } : {}),
    readyCount,
    timeToReadyMs: typeof readyRecord?.timeToReadyMs === "number" ? readyRecord.timeToReadyMs : null,
    ...(outcome === "interrupted" ? { interruptedBy: typeof interrupted?.signal === "string" ? interrupted.signal : "runtime-lost" } : {}),
    sealedBy: "cleanup",
  });
  return { runDir: dir, state: "sealed", outcome: completion.outcome, stopped: finished ? [] : stopped };
}

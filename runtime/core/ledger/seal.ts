/**
 * Completing the ledger of a run that lost its runtime (docs/temporal.md "A lost worker").
 *
 * A `cohort run` completes its own ledger when it is stopped (a signal, its watched worker gone: `--watch-pid`).
 * It cannot when it dies with its worker: on the cluster profiles the run is the worker's child inside the
 * worker's container, and a container that is killed (the pod force-deleted, the node lost, OOM) takes the run
 * with it, leaving a ledger without completion.json. The workflow's cleanup step (runtime/temporal/activities.ts
 * `cleanupRun`) reclaims the run's members and then calls {@link sealLostRun}, which appends what is now known
 * and writes the completion:
 *
 * - `member-stopped` (`by: "cleanup"`) for each member the records show started and neither stopped nor exited (the cleanup
 *   waited until none of the run's Sandboxes and pods was listed, so they are stopped);
 * - `run-interrupted` (`lost: <reason>`), unless the records already end the run in failure;
 * - `teardown-finished` (`by: "cleanup"`);
 * - completion.json: outcome `failed` with the records' first `run-failed` when there is one, else `interrupted`
 *   with `interruptedBy: "runtime-lost"`; `readyCount`, `size` and `timeToReadyMs` from the records; `phasesMs`
 *   from the run-level records' `elapsedMs` (admission, startup, hold; teardown 0).
 *
 * The ledger then verifies (`cohort ledger verify`) like any other completed run.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { Outcome } from "../summary";
import { readProcStat } from "../proc-stat";
import { LEDGER_FILES, type LedgerRecord } from "./format";
import { LedgerExistsError } from "../errors";
import { parseCompletion, parseManifest, readLedger, readOptional } from "./read";
import { LedgerWriter } from "./writer";

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
}

/** Raised when the run's own process is still alive at the deadline: the ledger is its to complete. */
export class RunStillAliveError extends Error {
  constructor(
    readonly runDir: string,
    readonly pid: number,
    waitedMs: number,
  ) {
    super(`ledger ${runDir}: the run's runtime (pid ${pid}) is still running after ${waitedMs} ms; its ledger is not sealed beside its own writer`);
    this.name = "RunStillAliveError";
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

function elapsedOf(records: readonly LedgerRecord[], kind: string): number | undefined {
  const r = records.find((x) => x.kind === kind);
  return r === undefined ? undefined : r.elapsedMs;
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * Completes the ledger in `runDir` of a run whose runtime is gone (see the module comment).
 *
 * @param runDir - the run directory (`<artifacts>/<runId>`)
 * @param reason - why the runtime is gone, as the workflow saw it (e.g. `activity Heartbeat timeout`); recorded
 *   in `run-interrupted.lost`
 * @param opts.waitMs - how long to wait for a run process still alive in this PID namespace (it completes its
 *   own ledger) before refusing. @default 60000
 * @throws {RunStillAliveError} the run's process is still alive after `waitMs` (nothing written)
 * @throws {LedgerVerifyError} the ledger is damaged beyond a torn final line (nothing written)
 */
export async function sealLostRun(runDir: string, reason: string, opts: { waitMs?: number; pollMs?: number } = {}): Promise<SealReport> {
  const dir = path.resolve(runDir);
  if (!fs.existsSync(path.join(dir, LEDGER_FILES.manifest))) return { runDir: dir, state: "absent", outcome: null, stopped: [] };
  const completionBytes = await readOptional(path.join(dir, LEDGER_FILES.completion));
  if (completionBytes !== undefined) return { runDir: dir, state: "complete", outcome: parseCompletion(dir, completionBytes).outcome, stopped: [] };
  const manifest = parseManifest(dir, fs.readFileSync(path.join(dir, LEDGER_FILES.manifest)));
  // A run outlived its worker here (same PID namespace: the sim's detached worker): it is stopping on its own.
  const waitMs = opts.waitMs ?? 60_000;
  const waitStarted = Date.now();
  while (runProcessAlive(manifest.runtimePid, manifest.runId)) {
    if (Date.now() - waitStarted >= waitMs) throw new RunStillAliveError(dir, manifest.runtimePid!, waitMs);
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 250));
  }
  let writer: LedgerWriter;
  try {
    // Cuts a torn final line (a run killed mid-write), verifies the rest.
    writer = await LedgerWriter.resume(dir);
  } catch (error) {
    // The run completed it while we waited.
    if (error instanceof LedgerExistsError) {
      const done = await readLedger(dir);
      return { runDir: dir, state: "complete", outcome: done.completion?.outcome ?? null, stopped: [] };
    }
    throw error;
  }
  const { records } = await readLedger(dir);
  const startedMembers = new Set<string>();
  const stoppedAlready = new Set<string>();
  const ready = new Set<string>();
  for (const r of records) {
    if (r.member === undefined) continue;
    if (r.kind === "member-started") startedMembers.add(r.member);
    if (r.kind === "member-stopped" || r.kind === "member-exited") stoppedAlready.add(r.member);
    if (r.kind === "member-ready") ready.add(r.member);
  }
  const stopped = [...startedMembers].filter((m) => !stoppedAlready.has(m)).sort();
  const failed = records.find((r) => r.kind === "run-failed");
  const appends = stopped.map((member) => writer.append("member-stopped", { member, by: "cleanup" }));
  if (failed === undefined) appends.push(writer.append("run-interrupted", { lost: reason }));
  appends.push(writer.append("teardown-finished", { by: "cleanup" }));
  try {
    await Promise.all(appends);
  } catch (error) {
    await writer.close();
    throw error;
  }
  const lastElapsed = records.at(-1)?.elapsedMs ?? 0;
  const admitted = elapsedOf(records, "roster-admitted");
  const rosterReady = elapsedOf(records, "roster-ready");
  const holdStarted = elapsedOf(records, "hold-started");
  const holdEnded = elapsedOf(records, "hold-ended") ?? (holdStarted !== undefined ? lastElapsed : undefined);
  const phasesMs: Record<string, number> = {
    admission: round3(admitted ?? lastElapsed),
    startup: admitted === undefined ? 0 : round3(Math.max(0, (rosterReady ?? lastElapsed) - admitted)),
    hold: holdStarted === undefined || holdEnded === undefined ? 0 : round3(Math.max(0, holdEnded - holdStarted)),
    teardown: 0,
  };
  const runStarted = records.find((r) => r.kind === "run-started");
  const readyRecord = records.find((r) => r.kind === "roster-ready");
  const completion = await writer.complete({
    outcome: failed !== undefined ? "failed" : "interrupted",
    firstFailure: failed !== undefined ? { member: typeof failed.member === "string" ? failed.member : null, reason: String(failed.reason ?? "run-failed") } : null,
    phasesMs,
    ...(typeof runStarted?.size === "number" ? { size: runStarted.size } : {}),
    readyCount: ready.size,
    timeToReadyMs: typeof readyRecord?.timeToReadyMs === "number" ? readyRecord.timeToReadyMs : null,
    ...(failed === undefined ? { interruptedBy: "runtime-lost" } : {}),
    sealedBy: "cleanup",
  });
  return { runDir: dir, state: "sealed", outcome: completion.outcome, stopped };
}

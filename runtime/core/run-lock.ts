/**
 * The artifact root's run lock (`cohort run --lock`): at most one live run per artifact root.
 *
 * `<artifacts>/.cohort-run.lock` holds `{runId, runDir, pid, startTicks, createdAt}` of the run that owns the
 * root. It is created with its content in one step before the run directory exists: the record is written and
 * fsynced to a temp file in the same directory, which is then `link()`ed to the lock name (atomic; `EEXIST`
 * means another run holds it) and unlinked. A reader therefore never sees an empty or half-written lock from
 * this code. The lock is removed when the run ends.
 *
 * Who holds an existing lock ({@link inspectRunLock}):
 * - `alive`: `/proc/<pid>/stat` exists, is not a zombie and its start time equals `startTicks` (off Linux: the
 *   pid answers `kill(pid, 0)`). The new run is refused with a {@link RunLockedError} naming that run, its pid
 *   and `npx cohort reap --artifacts <root>`, which stops it.
 * - `ended` (no such pid), `other-process` (the pid is alive but its start time differs: a recycled pid, or a
 *   lock without a numeric `startTicks`, which cannot prove its holder on Linux) and `unreadable` (not JSON or
 *   missing fields: no lock this code wrote) are stale: the new run reaps what the named run left running
 *   (`reapRun`, which signals only processes proven to be the run's), takes the lock over and says so on
 *   stderr. An EMPTY lock file younger than {@link EMPTY_LOCK_GRACE_MS} (what an older runtime that wrote the
 *   lock after creating it could leave for a moment) is waited for before it counts as stale.
 * - a directory at the lock path is refused (`<path> is a directory, not a run lock; remove it`), nothing is
 *   created.
 *
 * `cohort reap --artifacts DIR` (the host profile's destroy) stops the run a lock names, live or dead, so a run
 * that never reached the Pulumi state is still stopped, and removes a lock whose holder is not alive.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { CohortError } from "./errors";
import { tempNameFor } from "./atomic";
import { readProcStat } from "./proc-stat";

/** File name of the lock inside the artifact root. */
export const RUN_LOCK_FILE = ".cohort-run.lock";

/** How long an empty lock file is taken for one being written by an older runtime. */
export const EMPTY_LOCK_GRACE_MS = 2_000;

/** What the lock file records. */
export interface RunLockRecord {
  readonly runId: string;
  readonly runDir: string;
  readonly pid: number;
  /** `/proc/<pid>/stat` start time (clock ticks since boot); `null` off Linux. */
  readonly startTicks: number | null;
  readonly createdAt: string;
}

/** A live run holds the artifact root's lock. */
export class RunLockedError extends CohortError {
  constructor(
    readonly holder: RunLockRecord,
    lockPath: string,
  ) {
    super(
      "run-locked",
      `refused: run ${holder.runId} (runtime pid ${holder.pid}) is still running under ${path.dirname(lockPath)} (lock ${lockPath}); ` +
        `wait for it to end, or stop it with \`npx cohort reap --artifacts ${path.dirname(lockPath)}\``,
    );
  }
}

/** Reads the lock file; `undefined` when there is none or it is unreadable/torn (treated as stale). */
export function readRunLock(artifacts: string): RunLockRecord | undefined {
  try {
    const v = JSON.parse(fs.readFileSync(path.join(artifacts, RUN_LOCK_FILE), "utf8")) as Partial<RunLockRecord>;
    if (typeof v.runId !== "string" || typeof v.runDir !== "string" || typeof v.pid !== "number") return undefined;
    return { runId: v.runId, runDir: v.runDir, pid: v.pid, startTicks: typeof v.startTicks === "number" ? v.startTicks : null, createdAt: String(v.createdAt ?? "") };
  } catch {
    return undefined;
  }
}

/** Whether a lock's runtime is the process that wrote it (see the module doc). */
export type LockHolderState = "alive" | "ended" | "other-process";

/**
 * Whether `holder.pid` is still the runtime that wrote the lock: `alive` (pid alive, same start time, not a
 * zombie), `ended` (no such process, or a zombie) or `other-process` (alive, but a different start time, or the
 * lock has no numeric `startTicks` to prove it on Linux).
 */
export function lockHolderState(holder: RunLockRecord): LockHolderState {
  if (holder.pid === process.pid) return "alive";
  const stat = readProcStat(holder.pid);
  if (stat !== undefined) {
    if (stat.state === "Z") return "ended";
    return typeof holder.startTicks === "number" && stat.startTicks === holder.startTicks ? "alive" : "other-process";
  }
  if (fs.existsSync("/proc/self/stat")) return "ended";
  try {
    process.kill(holder.pid, 0);
    return "alive";
  } catch {
    return "ended";
  }
}

/** True when {@link lockHolderState} is `alive`. */
export function lockHolderAlive(holder: RunLockRecord): boolean {
  return lockHolderState(holder) === "alive";
}

/** What the lock path holds. */
export type RunLockState =
  | { readonly kind: "none" }
  | { readonly kind: "directory" }
  /** Not a lock this code wrote: empty, not JSON or missing fields. */
  | { readonly kind: "unreadable"; readonly bytes: number; readonly ageMs: number }
  | { readonly kind: "held"; readonly holder: RunLockRecord; readonly state: LockHolderState };

/** Inspects `<artifacts>/.cohort-run.lock` without changing it. */
export function inspectRunLock(artifacts: string): RunLockState {
  const lockPath = path.join(artifacts, RUN_LOCK_FILE);
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(lockPath);
  } catch {
    return { kind: "none" };
  }
  if (stat.isDirectory()) return { kind: "directory" };
  const holder = readRunLock(artifacts);
  if (holder === undefined) return { kind: "unreadable", bytes: stat.size, ageMs: Date.now() - stat.mtimeMs };
  return { kind: "held", holder, state: lockHolderState(holder) };
}

/** The refusal for a directory at the lock path. */
export function lockIsDirectoryError(lockPath: string): CohortError {
  return new CohortError("run-locked", `${lockPath} is a directory, not a run lock; remove it`);
}

/** Writes `record` to a temp file beside `lockPath` and links it there: true when created, false on EEXIST. */
function createLockFile(lockPath: string, record: RunLockRecord): boolean {
  const tmp = tempNameFor(lockPath);
  try {
    const fd = fs.openSync(tmp, "wx", 0o644);
    try {
      fs.writeSync(fd, `${JSON.stringify(record)}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.linkSync(tmp, lockPath);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** A held lock; {@link release} removes the file if it still names this run. */
export interface HeldRunLock {
  readonly path: string;
  /**
   * The stale lock taken over, if any: the run it named (`null` for an unreadable lock), why it was stale, and
   * how many groups/runtimes of that run were stopped.
   */
  readonly reaped: {
    readonly runId: string | null;
    readonly pid: number | null;
    readonly why: "ended" | "other-process" | "unreadable";
    readonly stopped: number;
  } | null;
  release(): void;
}

/** The stderr line that reports a takeover (`cohort: ...`). */
export function takeoverMessage(lockPath: string, reaped: NonNullable<HeldRunLock["reaped"]>): string {
  const stopped = `stopped ${reaped.stopped} process group(s) it left`;
  if (reaped.why === "unreadable") return `cohort: ${lockPath} held no readable run lock (not written by a cohort run); took it over`;
  if (reaped.why === "other-process")
    return `cohort: run ${reaped.runId} did not release ${lockPath} and its runtime pid ${reaped.pid} now names another process; took it over, ${stopped}`;
  return `cohort: run ${reaped.runId} (runtime pid ${reaped.pid}) had ended without releasing ${lockPath}; ${stopped}`;
}

/**
 * Takes the artifact root's lock for `runId` (see the module doc).
 *
 * @param reap - stops a stale run's leftovers (`reapRun` of its run dir); returns how many groups/runtimes it stopped
 * @throws {RunLockedError} when a live run holds the lock
 */
export async function acquireRunLock(artifacts: string, runId: string, runDir: string, reap: (runDir: string) => Promise<number>): Promise<HeldRunLock> {
  fs.mkdirSync(artifacts, { recursive: true });
  const lockPath = path.join(artifacts, RUN_LOCK_FILE);
  const record: RunLockRecord = { runId, runDir, pid: process.pid, startTicks: readProcStat(process.pid)?.startTicks ?? null, createdAt: new Date().toISOString() };
  let reaped: HeldRunLock["reaped"] = null;
  const deadline = Date.now() + EMPTY_LOCK_GRACE_MS + 1_000;
  for (let attempt = 0; attempt < 5 || Date.now() < deadline; attempt++) {
    if (createLockFile(lockPath, record)) {
      return {
        path: lockPath,
        reaped,
        release() {
          if (readRunLock(artifacts)?.runId === runId) fs.rmSync(lockPath, { force: true });
        },
      };
    }
    const found = inspectRunLock(artifacts);
    if (found.kind === "none") continue; // released meanwhile
    if (found.kind === "directory") throw lockIsDirectoryError(lockPath);
    if (found.kind === "held" && found.state === "alive") throw new RunLockedError(found.holder, lockPath);
    if (found.kind === "unreadable" && found.bytes === 0 && found.ageMs < EMPTY_LOCK_GRACE_MS) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    // Stale: move it aside atomically (only one contender wins the rename), reap its run, retry.
    const aside = `${lockPath}.stale-${process.pid}`;
    try {
      fs.renameSync(lockPath, aside);
    } catch {
      continue; // another run moved it first; try again
    }
    fs.rmSync(aside, { force: true });
    if (found.kind === "unreadable") {
      reaped = { runId: null, pid: null, why: "unreadable", stopped: 0 };
    } else {
      const { holder } = found;
      const stopped = fs.existsSync(path.join(holder.runDir, "manifest.json")) ? await reap(holder.runDir) : 0;
      reaped = { runId: holder.runId, pid: holder.pid, why: found.state === "other-process" ? "other-process" : "ended", stopped };
    }
  }
  throw new CohortError("run-locked", `could not take the run lock ${lockPath} (contended)`);
}

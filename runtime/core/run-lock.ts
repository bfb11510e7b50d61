/**
 * The artifact root's run lock (`cohort run --lock`): at most one live run per artifact root.
 *
 * `<artifacts>/.cohort-run.lock` holds `{runId, runDir, pid, startTicks, createdAt}` of the run that owns the
 * root. It is a pid lock (./pid-lock.ts {@link acquirePidLock}): created with its content in one step (a temp
 * file `link()`ed to the lock name) before the run directory exists, so a reader never sees an empty or
 * half-written lock from this code. The lock is removed when the run ends.
 *
 * Who holds an existing lock ({@link inspectRunLock}, {@link lockHolderState}):
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
import { acquirePidLock, inspectPidLock, lockHolderState, pidLockHolderOf, readPidLock, thisLockHolder, type PidLockHolder, type PidLockState } from "./pid-lock";

export { EMPTY_LOCK_GRACE_MS, lockHolderState, type LockHolderState } from "./pid-lock";

/** File name of the lock inside the artifact root. */
export const RUN_LOCK_FILE = ".cohort-run.lock";

/** What the lock file records: the run, and its runtime as the lock's holder (`pid`, `startTicks`). */
export interface RunLockRecord extends PidLockHolder {
  readonly runId: string;
  readonly runDir: string;
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

/** The run lock in a lock file's parsed JSON; `undefined` when it lacks `runId`, `runDir` or a numeric `pid`. */
function runLockOf(value: unknown): RunLockRecord | undefined {
  const holder = pidLockHolderOf(value);
  const v = value as Partial<Record<keyof RunLockRecord, unknown>>;
  if (holder === undefined || typeof v.runId !== "string" || typeof v.runDir !== "string") return undefined;
  return { runId: v.runId, runDir: v.runDir, ...holder, createdAt: String(v.createdAt ?? "") };
}

/** Reads the lock file; `undefined` when there is none or it is unreadable/torn (treated as stale). */
export function readRunLock(artifacts: string): RunLockRecord | undefined {
  return readPidLock(path.join(artifacts, RUN_LOCK_FILE), runLockOf);
}

/** True when {@link lockHolderState} is `alive`. */
export function lockHolderAlive(holder: RunLockRecord): boolean {
  return lockHolderState(holder) === "alive";
}

/** What the lock path holds (`unreadable`: not a lock this code wrote: empty, not JSON or missing fields). */
export type RunLockState = PidLockState<RunLockRecord>;

/** Inspects `<artifacts>/.cohort-run.lock` without changing it. */
export function inspectRunLock(artifacts: string): RunLockState {
  return inspectPidLock(path.join(artifacts, RUN_LOCK_FILE), runLockOf);
}

/** The refusal for a directory at the lock path. */
export function lockIsDirectoryError(lockPath: string): CohortError {
  return new CohortError("run-locked", `${lockPath} is a directory, not a run lock; remove it`);
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
  const { pid, startTicks } = thisLockHolder();
  const record: RunLockRecord = { runId, runDir, pid, startTicks, createdAt: new Date().toISOString() };
  let reaped: HeldRunLock["reaped"] = null;
  await acquirePidLock(lockPath, record, {
    parse: runLockOf,
    held: (holder) => new RunLockedError(holder, lockPath),
    directory: () => lockIsDirectoryError(lockPath),
    contended: () => new CohortError("run-locked", `could not take the run lock ${lockPath} (contended)`),
    async takenOver(stale) {
      if (stale.holder === null) {
        reaped = { runId: null, pid: null, why: "unreadable", stopped: 0 };
        return;
      }
      const { holder } = stale;
      const stopped = fs.existsSync(path.join(holder.runDir, "manifest.json")) ? await reap(holder.runDir) : 0;
      reaped = { runId: holder.runId, pid: holder.pid, why: stale.why, stopped };
    },
  });
  return {
    path: lockPath,
    reaped,
    release() {
      if (readRunLock(artifacts)?.runId === runId) fs.rmSync(lockPath, { force: true });
    },
  };
}

/**
 * The artifact root's run lock (`cohort run --lock`): at most one live run per artifact root.
 *
 * `<artifacts>/.cohort-run.lock` holds `{runId, runDir, pid, startTicks, createdAt}` of the run that owns the
 * root. It is created with O_EXCL before the run directory exists and removed when the run ends. A lock whose
 * runtime is gone (pid missing, or its `/proc/<pid>/stat` start time differs: a recycled pid) is stale: the
 * new run first reaps what that run left running (`reapRun`, which signals only processes proven to be the
 * run's) and then takes the lock over. A lock whose runtime is alive refuses the new run with a
 * {@link RunLockedError} naming that run, its pid and the command that stops it.
 *
 * `cohort reap --artifacts DIR` (the host profile's destroy) stops the run a lock names, live or dead, so a run
 * that never reached the Pulumi state is still stopped.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { CohortError } from "./errors";
import { readProcStat } from "../backends/process/status";

/** File name of the lock inside the artifact root. */
export const RUN_LOCK_FILE = ".cohort-run.lock";

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
        `wait for it to end, or stop it with \`npx cohort reap ${holder.runDir}\``,
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

/** True when the lock's runtime is still the process that wrote it (pid alive, same start time, not a zombie). */
export function lockHolderAlive(holder: RunLockRecord): boolean {
  if (holder.pid === process.pid) return true;
  const stat = readProcStat(holder.pid);
  if (stat !== undefined) return stat.state !== "Z" && (holder.startTicks === null || stat.startTicks === holder.startTicks);
  if (fs.existsSync("/proc/self/stat")) return false;
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A held lock; {@link release} removes the file if it still names this run. */
export interface HeldRunLock {
  readonly path: string;
  /** The stale run whose leftovers were reaped before taking the lock, if any. */
  readonly reaped: { readonly runId: string; readonly pid: number; readonly stopped: number } | null;
  release(): void;
}

/**
 * Takes the artifact root's lock for `runId` (see the module doc).
 *
 * @param reap - stops a stale run's leftovers (`reapRun` of its run dir); returns how many groups/runtimes it stopped
 * @throws {RunLockedError} when a live run holds the lock
 */
export async function acquireRunLock(
  artifacts: string,
  runId: string,
  runDir: string,
  reap: (runDir: string) => Promise<number>,
): Promise<HeldRunLock> {
  fs.mkdirSync(artifacts, { recursive: true });
  const lockPath = path.join(artifacts, RUN_LOCK_FILE);
  const record: RunLockRecord = { runId, runDir, pid: process.pid, startTicks: readProcStat(process.pid)?.startTicks ?? null, createdAt: new Date().toISOString() };
  let reaped: HeldRunLock["reaped"] = null;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const fd = fs.openSync(lockPath, "wx", 0o644);
      fs.writeSync(fd, `${JSON.stringify(record)}\n`);
      fs.fsyncSync(fd);
      fs.closeSync(fd);
      return {
        path: lockPath,
        reaped,
        release() {
          if (readRunLock(artifacts)?.runId === runId) fs.rmSync(lockPath, { force: true });
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const holder = readRunLock(artifacts);
    if (holder !== undefined && lockHolderAlive(holder)) throw new RunLockedError(holder, lockPath);
    // Stale: move it aside atomically (only one contender wins the rename), reap its run, retry.
    const aside = `${lockPath}.stale-${process.pid}`;
    try {
      fs.renameSync(lockPath, aside);
    } catch {
      continue; // another run moved it first; try again
    }
    fs.rmSync(aside, { force: true });
    if (holder !== undefined && fs.existsSync(path.join(holder.runDir, "manifest.json"))) {
      reaped = { runId: holder.runId, pid: holder.pid, stopped: await reap(holder.runDir) };
    } else if (holder !== undefined) {
      reaped = { runId: holder.runId, pid: holder.pid, stopped: 0 };
    }
  }
  throw new CohortError("run-locked", `could not take the run lock ${lockPath} (contended)`);
}

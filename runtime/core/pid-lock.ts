/**
 * A lock file naming its holder by pid and start time: created exclusively with its content, taken over when its
 * holder is dead ({@link acquirePidLock}). The artifact root's run lock (./run-lock.ts, which reaps what a dead
 * holder left before it takes the lock over) and the seal's lock (./ledger/seal.ts) are both taken with it.
 */
import * as fs from "node:fs";
import { tempNameFor } from "./atomic";
import { readProcStat } from "./proc-stat";

/** How long an empty lock file is taken for one being written by an older runtime. */
export const EMPTY_LOCK_GRACE_MS = 2_000;

/** The process that holds a lock, as its lock file records it (besides any fields of the lock's own). */
export interface PidLockHolder {
  readonly pid: number;
  /** `/proc/<pid>/stat` start time (clock ticks since boot); `null` off Linux. */
  readonly startTicks: number | null;
}

/** This process as a lock holder: its pid and `/proc/self/stat` start time (`null` off Linux). */
export function thisLockHolder(): PidLockHolder {
  return { pid: process.pid, startTicks: readProcStat(process.pid)?.startTicks ?? null };
}

/**
 * The holder in a lock file's parsed JSON: `{pid, startTicks}` when `pid` is a number (`startTicks` `null` unless
 * it is one); `undefined` otherwise (not a lock this code wrote).
 */
export function pidLockHolderOf(value: unknown): PidLockHolder | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Partial<Record<keyof PidLockHolder, unknown>>;
  if (typeof v.pid !== "number") return undefined;
  return { pid: v.pid, startTicks: typeof v.startTicks === "number" ? v.startTicks : null };
}

/** Whether a lock's holder is the process that wrote it (see {@link lockHolderState}). */
export type LockHolderState = "alive" | "ended" | "other-process";

/**
 * Whether `holder.pid` is still the process that wrote the lock:
 * - `alive`: `holder.pid` is this process; or `/proc/<pid>/stat` exists, is not a zombie and its start time
 *   (field 22, ./proc-stat.ts) equals `holder.startTicks`; off Linux (no `/proc/self/stat`), the pid answers
 *   `kill(pid, 0)`;
 * - `ended`: no such process (no `/proc/<pid>/stat`; off Linux, `kill(pid, 0)` fails), or a zombie;
 * - `other-process`: the pid is alive with another start time (a recycled pid), or the lock has no numeric
 *   `startTicks` to prove its holder on Linux.
 *
 * `ended` and `other-process` are dead. A holder in another PID namespace (a container that is gone) reads as one
 * of them: its pid names no process here, or another one.
 */
export function lockHolderState(holder: PidLockHolder): LockHolderState {
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

/** What a lock path holds. */
export type PidLockState<R extends PidLockHolder> =
  | { readonly kind: "none" }
  | { readonly kind: "directory" }
  /** Not a lock this code wrote: empty, not JSON, or not what `parse` accepts. */
  | { readonly kind: "unreadable"; readonly bytes: number; readonly ageMs: number }
  | { readonly kind: "held"; readonly holder: R; readonly state: LockHolderState };

/** The lock file at `lockPath` parsed by `parse`; `undefined` when there is none or it is unreadable/torn. */
export function readPidLock<R extends PidLockHolder>(lockPath: string, parse: (value: unknown) => R | undefined): R | undefined {
  try {
    return parse(JSON.parse(fs.readFileSync(lockPath, "utf8")));
  } catch {
    return undefined;
  }
}

/** Inspects the lock at `lockPath` without changing it; `parse` takes the holder's record from its JSON. */
export function inspectPidLock<R extends PidLockHolder>(lockPath: string, parse: (value: unknown) => R | undefined): PidLockState<R> {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(lockPath);
  } catch {
    return { kind: "none" };
  }
  if (stat.isDirectory()) return { kind: "directory" };
  const holder = readPidLock(lockPath, parse);
  if (holder === undefined) return { kind: "unreadable", bytes: stat.size, ageMs: Date.now() - stat.mtimeMs };
  return { kind: "held", holder, state: lockHolderState(holder) };
}

/** Writes `record` to a temp file beside `lockPath` and links it there: true when created, false on EEXIST. */
function createLockFile(lockPath: string, record: PidLockHolder): boolean {
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

/** A lock {@link acquirePidLock} took over: its holder was dead (`ended`, `other-process`) or not readable. */
export type StaleLock<R extends PidLockHolder> = { readonly why: "ended" | "other-process"; readonly holder: R } | { readonly why: "unreadable"; readonly holder: null };

/** The lock's own parts of {@link acquirePidLock}: its record's parser, its refusals and what a takeover does. */
export interface PidLockOptions<R extends PidLockHolder> {
  /** The holder's record from the lock file's JSON; `undefined` when it is not one (the lock is then `unreadable`). */
  readonly parse: (value: unknown) => R | undefined;
  /** The refusal when a live process holds the lock. */
  readonly held: (holder: R) => Error;
  /** The refusal when a directory stands at the lock path. */
  readonly directory: () => Error;
  /** The refusal when the lock is still not taken after every attempt (other contenders kept taking it). */
  readonly contended: () => Error;
  /**
   * Called with each stale lock taken over, once it is moved aside and before the lock is created again (the run
   * lock reaps the dead run's leftovers here). A rejection is raised as it is; no lock is held then.
   */
  readonly takenOver?: (stale: StaleLock<R>) => Promise<void>;
}

/**
 * Takes the lock file `lockPath` for this process, taking it over when its holder is dead.
 *
 * The file is one line of JSON, `record` (a {@link PidLockHolder}, normally {@link thisLockHolder}, plus the lock's
 * own fields), created with its content in one step: written and fsynced to a temp file beside it, then `link()`ed
 * to `lockPath` (atomic; `EEXIST` means it is held) and the temp unlinked. A reader never sees an empty or
 * half-written lock from this code. The caller removes the file to release the lock.
 *
 * An existing lock ({@link inspectPidLock}, `opts.parse` reading its JSON):
 * - held by a live process ({@link lockHolderState} `alive`, from `/proc/<pid>/stat`): refused;
 * - held by a dead one (`ended` or `other-process`), or `unreadable` (not JSON or not what `opts.parse` accepts):
 *   stale. It is renamed aside (only one contender wins the rename) and removed, `opts.takenOver` is awaited, and
 *   the lock is created again. An EMPTY lock younger than {@link EMPTY_LOCK_GRACE_MS} (what an older runtime that
 *   wrote the lock after creating it could leave for a moment) is waited for before it counts as stale;
 * - gone meanwhile (released): created again.
 * It tries at least 5 times and for {@link EMPTY_LOCK_GRACE_MS} + 1 s.
 *
 * @throws `opts.held(holder)` when a live process holds the lock
 * @throws `opts.directory()` when a directory stands at `lockPath` (nothing is created)
 * @throws `opts.contended()` when the lock was not taken in every attempt (other contenders kept taking it)
 * @throws what `opts.takenOver` rejects with, and the underlying `NodeJS.ErrnoException` when the file cannot be
 *   written
 */
export async function acquirePidLock<R extends PidLockHolder>(lockPath: string, record: R, opts: PidLockOptions<R>): Promise<void> {
  const deadline = Date.now() + EMPTY_LOCK_GRACE_MS + 1_000;
  for (let attempt = 0; attempt < 5 || Date.now() < deadline; attempt++) {
    if (createLockFile(lockPath, record)) return;
    const found = inspectPidLock(lockPath, opts.parse);
    if (found.kind === "none") continue; // released meanwhile
    if (found.kind === "directory") throw opts.directory();
    if (found.kind === "held" && found.state === "alive") throw opts.held(found.holder);
    if (found.kind === "unreadable" && found.bytes === 0 && found.ageMs < EMPTY_LOCK_GRACE_MS) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    // Stale: move it aside atomically (only one contender wins the rename), let the caller clean up, retry.
    const aside = `${lockPath}.stale-${process.pid}`;
    try {
      fs.renameSync(lockPath, aside);
    } catch {
      continue; // another contender moved it first; try again
    }
    fs.rmSync(aside, { force: true });
    const stale: StaleLock<R> =
      found.kind === "unreadable" ? { why: "unreadable", holder: null } : { why: found.state === "other-process" ? "other-process" : "ended", holder: found.holder };
    await opts.takenOver?.(stale);
  }
  throw opts.contended();
}

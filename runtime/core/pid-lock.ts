/**
 * A lock file naming its holder by pid and start time: created exclusively with its content, taken over when its
 * holder is dead ({@link acquirePidLock}). The artifact root's run lock (./run-lock.ts, which reaps what a dead
 * holder left before it takes the lock over) and the seal's lock (./ledger/seal.ts) are both taken with it.
 */
import { createHash, randomBytes } from "node:crypto";
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
  | { readonly kind: "unreadable"; readonly bytes: number; readonly ageMs: number; readonly identity?: string }
  | { readonly kind: "held"; readonly holder: R; readonly state: LockHolderState; readonly identity?: string };

/** The lock file at `lockPath` parsed by `parse`; `undefined` when there is none or it is unreadable/torn. */
export function readPidLock<R extends PidLockHolder>(lockPath: string, parse: (value: unknown) => R | undefined): R | undefined {
  try {
    return parseLockBytes(fs.readFileSync(lockPath), parse);
  } catch {
    return undefined;
  }
}

/** A lock file's bytes parsed by `parse`; `undefined` when they are not JSON or not what `parse` accepts. */
function parseLockBytes<R extends PidLockHolder>(bytes: Buffer, parse: (value: unknown) => R | undefined): R | undefined {
  try {
    return parse(JSON.parse(bytes.toString("utf8")));
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
  // One read gives both the identity and the holder (a symlink, which the identity does not follow, is read through).
  const file = readLockFile(lockPath);
  const identity = file?.identity;
  const holder = file !== undefined ? parseLockBytes(file.bytes, parse) : readPidLock(lockPath, parse);
  if (holder === undefined) return { kind: "unreadable", bytes: stat.size, ageMs: Date.now() - stat.mtimeMs, identity };
  return { kind: "held", holder, state: lockHolderState(holder), identity };
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

/**
 * One lock file's identity: its inode and its bytes, hashed (16 hex). A lock removed and created again gets
 * another identity even when the file system reuses the inode (the new holder's record differs: pid, start time,
 * creation time). `undefined` when nothing (or a directory) is at `lockPath`.
 */
export function pidLockIdentity(lockPath: string): string | undefined {
  return readLockFile(lockPath)?.identity;
}

/** The regular file at `lockPath` (not followed through a symlink): its bytes and {@link pidLockIdentity}. */
function readLockFile(lockPath: string): { readonly identity: string; readonly bytes: Buffer } | undefined {
  try {
    const fd = fs.openSync(lockPath, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      const stat = fs.fstatSync(fd);
      if (!stat.isFile()) return undefined;
      const bytes = fs.readFileSync(fd);
      return { identity: createHash("sha256").update(`${stat.dev}:${stat.ino}\n`).update(bytes).digest("hex").slice(0, 16), bytes };
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return undefined;
  }
}

/** How a stale lock's takeover ended: `moved` (this process removed it), `busy` (another live contender is taking it over) or `gone` (it is no longer at the path). */
export type TakeoverResult = "moved" | "busy" | "gone";

/** The takeover claim files of the stale lock `identity` at `lockPath`, generation `gen`. */
function takeoverClaim(lockPath: string, identity: string, gen: number): string {
  return `${lockPath}.takeover-${identity}-${gen}`;
}

/**
 * Removes the stale lock whose identity ({@link pidLockIdentity}) a contender read, unless another contender got
 * there first: the step that makes a takeover safe under contention.
 *
 * Renaming "whatever is at the lock path" is not enough: between a contender's inspection and its rename, another
 * contender may have taken the stale lock over and created its own live lock, which the rename would then remove
 * (two live runs under one lock). So a takeover is claimed first: a claim file `<lockPath>.takeover-<identity>-<gen>`
 * created exclusively (link(2), as the lock itself), naming its creator by pid and start time. Exactly one
 * contender creates generation 0; a later generation is tried only when every earlier claim's creator is dead (a
 * contender that died mid-takeover). Holding the claim, the contender checks that the lock path still holds that
 * identity (only a claim holder removes it, and no lock can be created while it exists), renames it aside and
 * removes it, then removes the claims.
 *
 * @param lockPath - the lock file
 * @param identity - the stale lock's {@link pidLockIdentity}, read when it was judged stale
 * @returns `moved` when this process removed it; `busy` when a live contender holds the claim (retry after a
 *   pause: it will be gone or replaced); `gone` when the path no longer holds that lock (retry at once)
 * @throws the underlying `NodeJS.ErrnoException` when a claim cannot be written (not EEXIST)
 */
export function takeOverStaleLock(lockPath: string, identity: string): TakeoverResult {
  let gen = 0;
  for (;;) {
    const claim = takeoverClaim(lockPath, identity, gen);
    if (createLockFile(claim, thisLockHolder())) break;
    const holder = readPidLock(claim, pidLockHolderOf);
    if (holder !== undefined && lockHolderState(holder) === "alive") return "busy";
    gen += 1; // its creator died mid-takeover (or the claim was torn): the next generation
  }
  const claims = Array.from({ length: gen + 1 }, (_, g) => takeoverClaim(lockPath, identity, g));
  try {
    if (pidLockIdentity(lockPath) !== identity) return "gone";
    const aside = `${lockPath}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
    fs.renameSync(lockPath, aside);
    fs.rmSync(aside, { force: true });
    return "moved";
  } finally {
    for (const c of claims) fs.rmSync(c, { force: true });
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
 *   stale. It is taken over through a claim ({@link takeOverStaleLock}: exactly one contender removes that lock,
 *   and never a live lock another contender created meanwhile), `opts.takenOver` is awaited, and the lock is
 *   created again. An EMPTY lock younger than {@link EMPTY_LOCK_GRACE_MS} (what an older runtime that
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
    // Stale: take it over through a claim (takeOverStaleLock), let the caller clean up, retry.
    const identity = found.identity;
    if (identity === undefined) continue; // gone meanwhile
    const result = takeOverStaleLock(lockPath, identity);
    if (result === "busy") await new Promise((resolve) => setTimeout(resolve, 50));
    if (result !== "moved") continue;
    const stale: StaleLock<R> =
      found.kind === "unreadable" ? { why: "unreadable", holder: null } : { why: found.state === "other-process" ? "other-process" : "ended", holder: found.holder };
    await opts.takenOver?.(stale);
  }
  throw opts.contended();
}

/**
 * Process-group status for the process backend: is a group still alive, which processes are in it,
 * and what a process's environment and start time are (for `cohort reap`, which must never signal a
 * recycled pid).
 *
 * Linux reads /proc (proc(5): https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html); other
 * platforms fall back to `kill(-pgid, 0)` (kill(2)), which also counts zombies.
 */
import * as fs from "node:fs";
import { readProcStat, type ProcStat } from "../../core/proc-stat";
import { PollingWaiters } from "./waiters";

/** True on platforms with /proc/<pid>/stat. */
export const HAS_PROC = process.platform === "linux" && fs.existsSync("/proc/self/stat");

/** /proc/<pid>/stat (moved to the core, which the run lock needs too: runtime/core/proc-stat.ts). */
export { readProcStat, type ProcStat } from "../../core/proc-stat";

/**
 * The environment a process was started with (/proc/<pid>/environ), as NAME -> value.
 *
 * @returns undefined when unreadable (gone, or not ours)
 */
export function readProcEnviron(pid: number): Record<string, string> | undefined {
  let raw: string;
  try {
    raw = fs.readFileSync(`/proc/${pid}/environ`, "utf8");
  } catch {
    return undefined;
  }
  const env: Record<string, string> = {};
  for (const entry of raw.split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

/** Every live process on the host (Linux), from /proc. */
export function listProcesses(): ProcStat[] {
  if (!HAS_PROC) return [];
  const out: ProcStat[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(Number(name));
    if (stat !== undefined) out.push(stat);
  }
  return out;
}

/** Processes of group `pgid` that are not zombies (Linux; elsewhere an empty list). */
export function groupMembers(pgid: number, processes: readonly ProcStat[] = listProcesses()): ProcStat[] {
  return processes.filter((p) => p.pgid === pgid && p.state !== "Z");
}

/** Whether group `pgid` has any process, zombies included: one `kill(-pgid, 0)`. */
export function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Whether any process of group `pgid` is alive. `kill(-pgid, 0)` first (one syscall); when it says
 * the group exists on Linux, zombies (exited, not yet reaped by their new parent) do not count.
 */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  if (!HAS_PROC) return true;
  return groupMembers(pgid).length > 0;
}

/**
 * Sends `signal` to every process of group `pgid`.
 *
 * @returns false when the group no longer exists (ESRCH)
 * @throws the kill(2) error for anything but ESRCH (e.g. EPERM)
 */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw error;
  }
}

/**
 * Waits for process groups to become empty. There is no OS event for "every process of a group I am
 * not the parent of has exited" (the leader's exit is an event, its children's are not), so while at
 * least one group is awaited, ONE check runs every {@link GROUP_CHECK_INTERVAL_MS}: a `kill(-pgid, 0)`
 * per group, and at most one /proc scan for the groups that still answer. Nothing runs when no stop is
 * in progress.
 */
export const GROUP_CHECK_INTERVAL_MS = 10;

export class GroupWatcher {
  private readonly waiters = new PollingWaiters<number>(GROUP_CHECK_INTERVAL_MS, (awaited) => emptyGroups([...awaited.values()]).map(String));

  /**
   * Waits until group `pgid` has no live (non-zombie) process. Call it after the group's leader has exited:
   * while the leader lives the group is trivially alive, and each check of a group that still answers
   * `kill(-pgid, 0)` costs a /proc scan (shared by every group awaited at that moment).
   *
   * @param signal gives up the wait when it aborts (e.g. `AbortSignal.timeout(ms)`): no check runs for it after
   * @returns true once the group is empty (at once when it already is); false when `signal` aborted first
   */
  waitEmpty(pgid: number, signal?: AbortSignal): Promise<boolean> {
    if (!groupExists(pgid)) return Promise.resolve(true);
    return this.waiters.wait(String(pgid), pgid, signal);
  }

  /** How many groups are awaited now (0: no check is running). */
  get waiting(): number {
    return this.waiters.size;
  }
}

/** Of `pgids`, those with no live process: `kill(-pgid, 0)` each, and at most one /proc scan for those that answer. */
function emptyGroups(pgids: readonly number[]): number[] {
  const empty: number[] = [];
  const answering: number[] = [];
  for (const pgid of pgids) {
    let exists = true;
    try {
      process.kill(-pgid, 0);
    } catch (error) {
      exists = (error as NodeJS.ErrnoException).code === "EPERM";
    }
    if (exists) answering.push(pgid);
    else empty.push(pgid);
  }
  if (answering.length === 0 || !HAS_PROC) return empty;
  let processes: ProcStat[];
  try {
    processes = listProcesses();
  } catch {
    return empty; // /proc unreadable this time (EMFILE, ENFILE): the groups that answer are checked again next tick
  }
  for (const pgid of answering) if (groupMembers(pgid, processes).length === 0) empty.push(pgid);
  return empty;
}

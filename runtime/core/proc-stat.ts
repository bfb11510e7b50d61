/**
 * /proc/<pid>/stat (Linux; proc(5): https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html): a process's
 * state, parent, group, session and start time. With the pid, the start time identifies a process
 * uniquely, so the pid locks (./pid-lock.ts: the run lock, the seal lock) and the process backend's reaper never
 * mistake a recycled pid.
 */
import * as fs from "node:fs";

/** Fields of /proc/<pid>/stat the runtime uses. */
export interface ProcStat {
  readonly pid: number;
  /** One-letter state: R, S, D, Z (zombie), T, ... */
  readonly state: string;
  readonly ppid: number;
  readonly pgid: number;
  readonly sid: number;
  /** Start time in clock ticks since boot (field 22): with the pid, identifies a process uniquely. */
  readonly startTicks: number;
}

/**
 * Reads /proc/<pid>/stat (Linux). The command name (field 2) may contain spaces and parentheses, so
 * fields are split after its LAST `)`.
 *
 * @returns undefined when the process does not exist (or /proc is unavailable)
 */
export function readProcStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const close = text.lastIndexOf(")");
  if (close === -1) return undefined;
  const fields = text.slice(close + 2).split(" ");
  // fields[0] is field 3 (state); field N is fields[N - 3].
  return {
    pid,
    state: fields[0] ?? "?",
    ppid: Number(fields[1]),
    pgid: Number(fields[2]),
    sid: Number(fields[3]),
    startTicks: Number(fields[19]),
  };
}

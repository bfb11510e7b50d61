/**
 * Process plumbing of the sim supervisor: start a long-lived component detached in its own process group with
 * its output in a log file, recognise it again later from another process (pid plus kernel start time, so a
 * reused pid is never signalled), and stop a whole process group (SIGTERM, then SIGKILL after a grace period).
 *
 * Linux only (reads `/proc`). Requires Node >= 22 (execa).
 */
import * as fs from "node:fs";

/** What is needed to find a started process again from any other process. */
export interface ProcessIdentity {
  /** Process id; also the process group id (each component leads its own group). */
  readonly pid: number;
  /** Field 22 of `/proc/<pid>/stat` (start time in clock ticks since boot): tells a reused pid apart. */
  readonly startTicks: number;
}

/** A component started by {@link spawnDetached}. */
export interface SpawnedProcess extends ProcessIdentity {
  /**
   * Settles when the process exits while this (parent) process is alive: `{ code, signal }`. Never rejects.
   * A process that outlives its parent is reaped by init; use {@link isRunning} from other processes.
   */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: string | null }>;
  /** True once `exited` has settled. */
  hasExited(): boolean;
}

/** Options of {@link spawnDetached}. */
export interface SpawnOptions {
  /** Absolute path of the executable. */
  readonly file: string;
  /** Arguments. They must hold no secret (secrets go in files the state dir holds). */
  readonly args: readonly string[];
  /** Log file; stdout and stderr are appended to it. */
  readonly logFile: string;
  /** Extra environment (added to this process's environment). @default {} */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory. @default the log file's directory */
  readonly cwd?: string;
}

/**
 * Reads the kernel start time and state of a process.
 *
 * @returns `undefined` when there is no such process.
 * @see https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html (fields 3 `state` and 22 `starttime`)
 */
export function readProcStat(pid: number): { readonly state: string; readonly startTicks: number; readonly pgrp: number } | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may contain spaces or parentheses: split after the last ')'.
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  // rest[0] is field 3 (state); field N is rest[N - 3].
  return { state: rest[0] ?? "?", pgrp: Number(rest[5 - 3]), startTicks: Number(rest[22 - 3]) };
}

/**
 * Whether the process identified by `id` still runs (a zombie counts as gone).
 */
export function isRunning(id: ProcessIdentity): boolean {
  const stat = readProcStat(id.pid);
  return stat !== undefined && stat.startTicks === id.startTicks && stat.state !== "Z" && stat.state !== "X";
}

/** Pids of every live (non-zombie) process whose process group is `pgid`. */
export function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readProcStat(Number(entry));
    if (stat !== undefined && stat.pgrp === pgid && stat.state !== "Z" && stat.state !== "X") out.push(Number(entry));
  }
  return out;
}

/**
 * Starts `file` detached: a new session and process group, stdin closed, stdout/stderr appended to `logFile`
 * (so the process outlives this one and never holds this process's pipes).
 *
 * @throws Error when the process cannot be spawned (missing or non-executable file), naming the file.
 */
export async function spawnDetached(o: SpawnOptions): Promise<SpawnedProcess> {
  // execa is ESM-only; a dynamic import keeps this CommonJS module loadable by tsx, whose require hook cannot
  // resolve execa's ESM-only dependencies (the same reason scripts/toolchain.ts imports its Go builders lazily).
  const { execa } = await import("execa");
  const fd = fs.openSync(o.logFile, "a", 0o600);
  // A numeric fd is handed to the child natively (execa's "native" stdio type), so the child keeps writing to
  // the file after this process exits; execa 10's types only admit literal fd numbers, hence the cast.
  const logFd = fd as 1;
  try {
    const sub = execa(o.file, [...o.args], {
      detached: true,
      cleanup: false,
      stdin: "ignore",
      stdout: logFd,
      stderr: logFd,
      env: o.env ?? {},
      cwd: o.cwd,
      reject: false,
      buffer: false,
    });
    let done = false;
    const exited = sub.then(
      (r) => {
        done = true;
        return { code: r.exitCode ?? null, signal: r.signal ?? null };
      },
      () => {
        done = true;
        return { code: null, signal: null };
      },
    );
    const pid = sub.pid;
    if (pid === undefined) {
      const r = await sub;
      const cause = (r as { cause?: unknown }).cause;
      throw new Error(`could not start ${o.file}: ${cause instanceof Error ? cause.message : "spawn failed"}`);
    }
    sub.nodeChildProcess.unref();
    const stat = readProcStat(pid);
    return {
      pid,
      startTicks: stat?.startTicks ?? -1,
      exited,
      hasExited: () => done,
    };
  } finally {
    fs.closeSync(fd);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Stops the process group led by `id`: SIGTERM to the group, then SIGKILL to whatever of the group is left
 * after `graceMs`. Does nothing when the leader is gone (or its pid now belongs to another process) and the
 * group is empty. Idempotent.
 *
 * @param graceMs - time between SIGTERM and SIGKILL, in milliseconds.
 * @returns how the group ended: `"not-running"`, `"terminated"` (gone within the grace period) or `"killed"`.
 */
export async function stopGroup(id: ProcessIdentity, graceMs: number): Promise<"not-running" | "terminated" | "killed"> {
  const leaderOurs = isRunning(id);
  // Only signal the group if its leader is ours, or the leader is gone but members of its group remain
  // (a pgid is not reused while any member of the group lives).
  const members = () => groupMembers(id.pid);
  if (!leaderOurs && members().length === 0) return "not-running";
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-id.pid, sig);
    } catch {
      // ESRCH: the group is already gone.
    }
  };
  signal("SIGTERM");
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isRunning(id) && members().length === 0) return "terminated";
    await sleep(50);
  }
  signal("SIGKILL");
  const killDeadline = Date.now() + 5_000;
  while (Date.now() < killDeadline) {
    if (!isRunning(id) && members().length === 0) return "killed";
    await sleep(50);
  }
  return "killed";
}

/**
 * The last `lines` lines of a log file ("" when it cannot be read), for error messages.
 */
export function logTail(file: string, lines = 20): string {
  let text: string;
  try {
    const fd = fs.openSync(file, "r");
    try {
      const size = fs.fstatSync(fd).size;
      const len = Math.min(size, 64 * 1024);
      const buf = Buffer.alloc(len);
      fs.readSync(fd, buf, 0, len, size - len);
      text = buf.toString("utf8");
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return "";
  }
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .slice(-lines)
    .join("\n");
}

/** Resident set size of a process in bytes (from `/proc/<pid>/status` `VmRSS`), or `undefined`. */
export function rssBytes(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

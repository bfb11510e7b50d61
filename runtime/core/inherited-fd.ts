/**
 * Which descriptor `cohort run --progress-fd N` may write to.
 *
 * Inside Node, descriptors from 3 up are mostly Node's and libuv's own (epoll, eventfd, io_uring, the signal and
 * async pipes); `fstat()` succeeds on all of them, and writing progress into one crashes or corrupts the runtime.
 * So `--progress-fd N` is used only when ALL of these hold (Linux, read from `/proc/self`):
 * 1. N was already open when this module was first evaluated ({@link ENTRY_FDS}, taken by the first import of
 *    runtime/cli.ts), so it is none of the runtime's own files (ledger, lock, member logs);
 * 2. `readlink /proc/self/fd/N` is not `anon_inode:[…]` (eventfd, eventpoll, io_uring, timerfd, …);
 * 3. `/proc/self/fdinfo/N` says it is open for writing (access mode O_WRONLY or O_RDWR);
 * 4. it is a pipe, FIFO, socket, character device (a tty) or regular file, and not a directory;
 * 5. if it is a pipe, no other descriptor of this process holds the same pipe open for READING: a pipe whose
 *    read end is ours is one of Node's internal pipes; a caller's status pipe has its read end in the caller.
 * Without `/proc/self/fd` (not Linux) only `fstat()` is checked.
 */
import * as fs from "node:fs";

const entryFds: Set<number> | undefined = openFds();
/** Descriptors open when this module was evaluated (`undefined` without /proc/self/fd). */
export const ENTRY_FDS: ReadonlySet<number> | undefined = entryFds;

/**
 * Removes `fd` from {@link ENTRY_FDS}: an inherited descriptor that is the runtime's own, not the caller's (the pipe
 * from bin/cohort.cjs, ./wrapper-link.ts), so that `--progress-fd` refuses it (rule 1).
 */
export function forgetEntryFd(fd: number): void {
  entryFds?.delete(fd);
}

function openFds(): Set<number> | undefined {
  try {
    return new Set(fs.readdirSync("/proc/self/fd").map(Number).filter(Number.isInteger));
  } catch {
    return undefined;
  }
}

function accessMode(fd: number): number | undefined {
  try {
    const m = /^flags:\s*([0-7]+)$/m.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"));
    return m === null ? undefined : parseInt(m[1]!, 8) & 3;
  } catch {
    return undefined;
  }
}

/**
 * Why `fd` must not carry progress, or `undefined` when it may (rules in the module doc).
 * @param entryFds - the descriptors open at the process's start (rule 1): {@link ENTRY_FDS} of the bundle that
 *   was the entry point, passed on by a bundle loaded later (dist/cohort-temporal.cjs), whose own copy of this
 *   module is evaluated after Node opened its descriptors. @default ENTRY_FDS
 * @returns a short reason such as `is anon_inode:[eventfd], one of Node's own descriptors`
 */
export function unusableProgressFd(fd: number, entryFds: ReadonlySet<number> | undefined = ENTRY_FDS): string | undefined {
  let stat: fs.Stats;
  try {
    stat = fs.fstatSync(fd);
  } catch {
    return "is not an open file descriptor";
  }
  if (!fs.existsSync("/proc/self/fd")) return undefined;
  if (entryFds !== undefined && !entryFds.has(fd)) return "was not open when cohort started (not inherited from the caller)";
  let target: string;
  try {
    target = fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return "is not an open file descriptor";
  }
  if (target.startsWith("anon_inode:")) return `is ${target}, one of Node's own descriptors`;
  const mode = accessMode(fd);
  if (mode !== 1 && mode !== 2) return `is ${target}, not open for writing`;
  if (stat.isDirectory()) return `is the directory ${target}`;
  if (!(stat.isFIFO() || stat.isSocket() || stat.isCharacterDevice() || stat.isFile())) return `is ${target}, not a pipe, FIFO, socket, tty or file`;
  if (target.startsWith("pipe:")) {
    for (const other of fs.readdirSync("/proc/self/fd").map(Number)) {
      if (other === fd || !Number.isInteger(other)) continue;
      let link: string;
      try {
        link = fs.readlinkSync(`/proc/self/fd/${other}`);
      } catch {
        continue;
      }
      const otherMode = accessMode(other);
      if (link === target && (otherMode === 0 || otherMode === 2)) return `is ${target}, one of Node's own pipes (its read end is fd ${other} of this process)`;
    }
  }
  return undefined;
}

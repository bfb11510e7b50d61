/**
 * Who holds a listening TCP port (Linux): the socket's inode from `/proc/net/tcp` and `/proc/net/tcp6`,
 * and the processes that have that inode open among their `/proc/<pid>/fd/*` (`socket:[<inode>]`).
 *
 * Format (proc(5), "/proc/net/tcp", https://man7.org/linux/man-pages/man5/proc_net_tcp.5.html, and the
 * kernel's Documentation/networking/proc_net_tcp.rst): after a header line, one line per socket,
 * whitespace-separated: `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid
 * timeout inode ...`. `local_address` is `<hex address>:<hex port>` (the port in host-readable hex, e.g.
 * `0100007F:A871` is 127.0.0.1:43121), `st` is the TCP state in hex, `0A` = LISTEN. A process's open
 * sockets are the symlinks `/proc/<pid>/fd/<n>` -> `socket:[<inode>]` (proc(5), /proc/pid/fd).
 * Reading another user's fds needs root (or the same uid); unreadable processes are skipped.
 */
import * as fs from "node:fs";

/** TCP state LISTEN in /proc/net/tcp (include/net/tcp_states.h: TCP_LISTEN = 10). */
const TCP_LISTEN = "0A";

/** The /proc/net files with TCP sockets of this network namespace. */
export const PROC_NET_TCP: readonly string[] = ["/proc/net/tcp", "/proc/net/tcp6"];

/**
 * Inodes of the LISTEN sockets bound to `port` (any address, IPv4 and IPv6).
 *
 * @param files - the tables to read. @default {@link PROC_NET_TCP}
 * @returns the inodes (as decimal strings), possibly empty; null when NO table could be read (no /proc/net:
 *   not Linux, or hidden), so the caller cannot tell who holds the port
 */
export function listeningInodes(port: number, files: readonly string[] = PROC_NET_TCP): string[] | null {
  const table = new Map<number, string[]>();
  let readable = 0;
  for (const file of files) {
    try {
      parseListeners(fs.readFileSync(file, "utf8"), table);
    } catch {
      continue; // tcp6 is absent on a kernel without IPv6
    }
    readable++;
  }
  const inodes = table.get(port) ?? [];
  return readable === 0 ? null : inodes;
}

/**
 * Parses the LISTEN lines of /proc/net/tcp-format text into port -> inodes (added to `into`). Most lines are
 * not LISTEN (connections, TIME_WAIT: every readiness and liveness probe leaves one), so the state is looked
 * at first, with indexOf, and only a LISTEN line is split: splitting every line took ~160 ms of the runtime's
 * CPU in the 0.8 s in which the 1,000-member bench spawned its widest level (the liveness probes of the levels
 * before re-read a table of thousands of lines), about 10x the cost of this parse (docs/host.md "Measured:
 * the runtime and the process backend").
 */
function parseListeners(text: string, into: Map<number, string[]>): void {
  for (let next = text.indexOf("\n") + 1; next > 0 && next < text.length;) {
    const start = next;
    let end = text.indexOf("\n", start);
    if (end === -1) end = text.length;
    next = end + 1;
    // `  sl: local rem st ...`: the state is the token after the two addresses.
    const localAt = text.indexOf(":", start) + 2;
    const remAt = text.indexOf(" ", localAt) + 1;
    const stateAt = text.indexOf(" ", remAt) + 1;
    if (localAt < 2 || remAt < 1 || stateAt < 1 || stateAt > end || !text.startsWith(TCP_LISTEN, stateAt)) continue;
    const fields = text.slice(start, end).trim().split(/\s+/);
    if (fields.length < 10 || fields[3] !== TCP_LISTEN || fields[9] === "0") continue;
    const local = fields[1]!;
    const port = parseInt(local.slice(local.lastIndexOf(":") + 1), 16);
    const list = into.get(port);
    if (list === undefined) into.set(port, [fields[9]!]);
    else list.push(fields[9]!);
  }
}

/**
 * {@link listeningInodes} for many callers at once: /proc/net/tcp lists EVERY socket of the network namespace
 * (7,300 lines, ~12 ms to read and parse on the dev VM while other test suites ran), so concurrent lookups
 * (a roster of 180 members becoming ready together) share one asynchronous read. A lookup is answered by a
 * read that STARTS after the lookup was made, so a listener that existed when it was asked is in the answer.
 */
export class ListenerTable {
  private waiting: Array<{ port: number; resolve: (inodes: string[] | null) => void }> = [];
  private reading = false;

  constructor(private readonly files: readonly string[] = PROC_NET_TCP) {}

  /** Same result as {@link listeningInodes}. */
  lookup(port: number): Promise<string[] | null> {
    return new Promise((resolve) => {
      this.waiting.push({ port, resolve });
      if (!this.reading) void this.read();
    });
  }

  private async read(): Promise<void> {
    this.reading = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting;
      this.waiting = [];
      const table = new Map<number, string[]>();
      let readable = 0;
      for (const file of this.files) {
        try {
          parseListeners(await fs.promises.readFile(file, "utf8"), table);
          readable++;
        } catch {
          // tcp6 is absent on a kernel without IPv6
        }
      }
      for (const { port, resolve } of batch) resolve(readable === 0 ? null : (table.get(port) ?? []));
    }
    this.reading = false;
  }
}

/**
 * Whether process `pid` has one of `inodes` open (a `socket:[<inode>]` fd).
 *
 * @returns false when it has not, or its fds cannot be read (gone, another user's)
 */
export function holdsSocket(pid: number, inodes: ReadonlySet<string>): boolean {
  let fds: string[];
  try {
    fds = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    let target: string;
    try {
      target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    if (target.startsWith("socket:[") && inodes.has(target.slice(8, -1))) return true;
  }
  return false;
}

/** The command name of `pid` (`/proc/<pid>/comm`, at most 15 bytes), or `?`. */
export function commandOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "?";
  }
}

/**
 * The first process on the host (lowest pid) that has one of `inodes` open, skipping `exclude`.
 *
 * @returns its pid and command, or null when none is found (e.g. it belongs to a user whose fds we cannot read)
 */
export function socketHolder(inodes: ReadonlySet<string>, exclude: ReadonlySet<number> = new Set()): { pid: number; command: string } | null {
  let names: string[];
  try {
    names = fs.readdirSync("/proc");
  } catch {
    return null;
  }
  const pids = names
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .sort((a, b) => a - b);
  for (const pid of pids) {
    if (exclude.has(pid)) continue;
    if (holdsSocket(pid, inodes)) return { pid, command: commandOf(pid) };
  }
  return null;
}

/**
 * Loopback ports of the sim control plane: which ones exist, picking free ones, checking that given ones are
 * free, and naming the process that holds a busy one (from `/proc/net/tcp{,6}` and `/proc/<pid>/fd`).
 */
import * as fs from "node:fs";
import * as net from "node:net";
import { portNames, type PortMap, type PortName } from "../components/sim/ports";

// The port layout lives beside SimCluster (the stack plans with it); re-exported for simctl's callers.
export { portNames, portsFromBase, SIM_PORT_BLOCK, type PortMap, type PortName } from "../components/sim/ports";

/** A process holding a port, when it can be found (it may belong to another user). */
export interface PortHolder {
  readonly pid: number;
  /** Its command line, space-joined. */
  readonly command: string;
}

/** Raised when a wanted port is taken; the message names the port, its role and the holder when known. */
export class PortBusyError extends Error {
  constructor(
    readonly portName: PortName,
    readonly port: number,
    readonly holder: PortHolder | undefined,
  ) {
    super(
      `port ${port} (${portName}) on 127.0.0.1 is in use` +
        (holder !== undefined ? ` by pid ${holder.pid} (${holder.command})` : " (holder not visible to this user)") +
        `; pick other ports with --port-base or --ports ${portName}=<port>`,
    );
    this.name = "PortBusyError";
  }
}

/** Resolves true when `port` can be bound on 127.0.0.1 right now. */
export function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen({ host: "127.0.0.1", port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** The kernel's ephemeral port range (`/proc/sys/net/ipv4/ip_local_port_range`, ip-sysctl.rst); Linux's default when unreadable. */
export function localPortRange(file = "/proc/sys/net/ipv4/ip_local_port_range"): { readonly low: number; readonly high: number } {
  try {
    const [low, high] = fs.readFileSync(file, "utf8").trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high) && low! > 0 && low! <= high!) return { low: low!, high: high! };
  } catch {
    // not Linux, or hidden
  }
  return { low: 32768, high: 60999 };
}

/** Lowest port {@link freePortBelowEphemeral} picks from: above the well-known and most registered services' ports. */
export const FREE_PORT_FLOOR = 20000;

/**
 * A port that can be bound on 127.0.0.1 now, picked at random BELOW the kernel's ephemeral range (from
 * {@link FREE_PORT_FLOOR} to the range's start), so that nothing else takes it before its component binds it: a
 * kernel-picked (port 0) choice is an ephemeral port, which any process may be handed meanwhile, as the local port
 * of an outgoing connection or by its own port-0 bind (seen here: the Temporal dev server, started before Kueue,
 * took Kueue's webhook port for one of the internal services it binds on random free ports, temporalio/cli
 * `temporalcli/devserver/server.go` buildServiceConfig). Falls back to a kernel-picked port when the range leaves
 * no room below it or 200 tries found none free.
 */
async function freePortBelowEphemeral(used: ReadonlySet<number>): Promise<number> {
  const { low } = localPortRange();
  for (let tries = 0; low - FREE_PORT_FLOOR > 100 && tries < 200; tries++) {
    const port = FREE_PORT_FLOOR + Math.floor(Math.random() * (low - FREE_PORT_FLOOR));
    if (!used.has(port) && (await canBind(port))) return port;
  }
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Finds the process listening on TCP `port` (any local address).
 *
 * @returns the holder, or `undefined` when no listener is visible (or it belongs to a process we cannot inspect).
 */
export function findPortHolder(port: number): PortHolder | undefined {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = fs.readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const local = cols[1] ?? "";
      const state = cols[3];
      const localPort = parseInt(local.slice(local.lastIndexOf(":") + 1), 16);
      if (localPort === port && state === "0A") inodes.add(cols[9] ?? "");
    }
  }
  if (inodes.size === 0) return undefined;
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = fs.readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = fs.readlinkSync(`/proc/${entry}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1]!)) {
        let command = "?";
        try {
          command = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ").slice(0, 200);
        } catch {
          // keep "?"
        }
        return { pid: Number(entry), command };
      }
    }
  }
  return undefined;
}

/** How ports are chosen: all picked free by the kernel, or consecutive from a base; either with overrides. */
export interface PortRequest {
  /** First port of a consecutive block, or `undefined` for free ports picked below the ephemeral range. */
  readonly base?: number;
  /** Explicit ports by name (win over `base`). @default {} */
  readonly overrides?: Partial<Record<PortName, number>>;
}

/**
 * Resolves every sim port and checks that each is free.
 *
 * @throws PortBusyError for the first busy port (naming the holder when it can be found).
 * @throws Error when two names map to the same port or a port is outside 1..65535.
 */
export async function resolvePorts(req: PortRequest): Promise<PortMap> {
  const chosen = {} as Record<PortName, number>;
  const used = new Set<number>();
  for (const [i, name] of portNames.entries()) {
    let port = req.overrides?.[name];
    if (port === undefined && req.base !== undefined) port = req.base + i;
    if (port === undefined) {
      do port = await freePortBelowEphemeral(used);
      while (used.has(port));
    }
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`ports.${name}: ${port} is not a TCP port (1..65535)`);
    if (used.has(port)) throw new Error(`ports.${name}: ${port} is already given to another sim port`);
    used.add(port);
    chosen[name] = port;
  }
  for (const name of portNames) await assertFree(name, chosen[name]);
  return chosen;
}

/**
 * @throws PortBusyError when `port` cannot be bound on 127.0.0.1.
 */
export async function assertFree(name: PortName, port: number): Promise<void> {
  if (!(await canBind(port))) throw new PortBusyError(name, port, findPortHolder(port));
}

/**
 * Parses `name=port,name=port` (the `--ports` flag).
 *
 * @throws Error naming the bad entry and the known names.
 */
export function parsePortOverrides(text: string): Partial<Record<PortName, number>> {
  const out: Partial<Record<PortName, number>> = {};
  for (const part of text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([A-Za-z]+)=(\d+)$/.exec(part);
    if (!m || !(portNames as readonly string[]).includes(m[1]!)) {
      throw new Error(`--ports: "${part}" is not <name>=<port> with a name among ${portNames.join(", ")}`);
    }
    out[m[1] as PortName] = Number(m[2]);
  }
  return out;
}

/**
 * Free loopback ports for members of a run (process backend, and the core's default when a backend
 * assigns no endpoints itself).
 *
 * Each port is RESERVED by listening on it and held until the member is about to start, then released, so
 * that no other process, no other run and no other member of this run can take it in between. Ports are
 * unique within an allocator (one per run), even when many reservations race.
 *
 * Every address family a member may bind: a member may listen on `127.0.0.1`, on `0.0.0.0` (all IPv4
 * addresses) or on `::` (all IPv6 addresses; dual-stack by default in Node). On Linux a wildcard bind
 * conflicts with a listener on ANY address of its family (`127.0.0.2:P` or `10.0.0.5:P` make `0.0.0.0:P`
 * fail with EADDRINUSE, but not `127.0.0.1:P`), and an IPv6-only listener on `[::]:P` or `[::1]:P` does
 * not conflict with `127.0.0.1:P` at all. So the reservation listens on the wildcards, `0.0.0.0:<port>`
 * and, when the host has IPv6, `[::]:<port>` (IPV6_V6ONLY): a port is handed out only when both binds
 * succeed, i.e. no listener holds it on any IPv4 or IPv6 address, and while it is held nobody else can
 * bind it on any address. (The reservation sockets never accept; a connection to them waits in a
 * backlog of 1 until the release. Members are still reached at {@link PortAllocator.host}.)
 *
 * Why not `listen(0)`: the kernel picks port 0 from the ephemeral range, the same range it uses for the
 * source port of every outgoing connection on the host (ip_local_port_range,
 * https://www.kernel.org/doc/html/latest/networking/ip-sysctl.html). Between the release of a
 * reservation and the member's own `bind()` (seconds, for a member that sleeps or loads before
 * listening), any outgoing connection, including the runtime's own readiness probes, may take that
 * port as its source port and the member fails with EADDRINUSE. So by default the allocator scans
 * ports BELOW the ephemeral range (from a random offset, so concurrent runs rarely contend), and
 * falls back to `listen(0)` only when that range is exhausted.
 */
import * as fs from "node:fs";
import * as net from "node:net";

/** Options of {@link PortAllocator}. */
export interface PortAllocatorOptions {
  /** Address members are reached at (the endpoint host); reservations are on the wildcards (module doc). @default "127.0.0.1" */
  readonly host?: string;
  /**
   * Inclusive range to scan. @default [20000, ephemeral low - 1] (Linux: from
   * /proc/sys/net/ipv4/ip_local_port_range, usually 32768; macOS: 49152)
   */
  readonly range?: readonly [number, number];
  /** Random source for the start offset, in [0, 1). @default Math.random */
  readonly random?: () => number;
}

/** The lowest port of the host's ephemeral (outgoing source port) range. */
export function ephemeralLow(): number {
  if (process.platform === "linux") {
    try {
      const [low] = fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);
      const value = Number(low);
      if (Number.isInteger(value) && value > 1024) return value;
    } catch {
      // fall through to the IANA default
    }
    return 32768;
  }
  return 49152; // IANA dynamic range, macOS default (net.inet.ip.portrange.first)
}

/** A port the allocator can bind on; the result of a bind that conflicts or is not allowed is null. */
function listen(server: net.Server, port: number, host: string, ipv6Only = false): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException): void => {
      server.off("listening", onListening);
      if (error.code === "EADDRINUSE" || error.code === "EACCES") resolve(null);
      else reject(error);
    };
    const onListening = (): void => {
      server.off("error", onError);
      resolve((server.address() as net.AddressInfo).port);
    };
    server.once("error", onError);
    server.once("listening", onListening);
    server.listen({ port, host, exclusive: true, backlog: 1, ipv6Only });
  });
}

let ipv6Probe: Promise<boolean> | null = null;

/**
 * Whether this host can listen on IPv6 (`[::1]:0`); false when the kernel has no IPv6 (EAFNOSUPPORT) or
 * no IPv6 loopback address (EADDRNOTAVAIL). Checked once per process.
 */
export function hasIpv6(): Promise<boolean> {
  ipv6Probe ??= new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen({ port: 0, host: "::1", exclusive: true }, () => server.close(() => resolve(true)));
  });
  return ipv6Probe;
}

/**
 * Listens on `port` on 0.0.0.0 and, when the host has IPv6, on [::] (IPv6 only); port 0: a kernel-chosen
 * IPv4 port, then the same port on IPv6.
 *
 * @returns the port and its sockets, or null when a bind conflicts (EADDRINUSE, EACCES): nothing is held then
 * @throws the listen error for anything else (e.g. EMFILE)
 */
async function listenEverywhere(port: number): Promise<{ port: number; servers: net.Server[] } | null> {
  const v4 = net.createServer();
  v4.unref();
  const bound = await listen(v4, port, "0.0.0.0");
  if (bound === null) return null;
  if (!(await hasIpv6())) return { port: bound, servers: [v4] };
  const v6 = net.createServer();
  v6.unref();
  let ok: number | null;
  try {
    ok = await listen(v6, bound, "::", true);
  } catch (error) {
    v4.close();
    throw error;
  }
  if (ok === null) {
    v4.close();
    return null;
  }
  return { port: bound, servers: [v4, v6] };
}

/**
 * Reserves unique ports that are free on every address (module doc) and holds them until released.
 */
export class PortAllocator {
  readonly host: string;
  private readonly low: number;
  private readonly high: number;
  private cursor: number;
  private scanned = 0;
  private readonly held = new Map<string, { port: number; servers: net.Server[] }>();
  private readonly used = new Set<number>();

  constructor(options: PortAllocatorOptions = {}) {
    this.host = options.host ?? "127.0.0.1";
    const [low, high] = options.range ?? [20000, ephemeralLow() - 1];
    if (!Number.isInteger(low) || !Number.isInteger(high) || low < 1 || high > 65535 || low > high) {
      throw new RangeError(`PortAllocator: invalid range [${low}, ${high}]`);
    }
    this.low = low;
    this.high = high;
    this.cursor = low + Math.floor((options.random ?? Math.random)() * (high - low + 1));
  }

  /** Ports handed out so far (reserved or released), in no order. */
  get allocated(): ReadonlySet<number> {
    return this.used;
  }

  /**
   * Reserves a port for `key` (a member id): listens on it (0.0.0.0 and [::], see the module doc) until
   * {@link release}. Calling it again for the same key returns the same port.
   *
   * @returns the port
   * @throws the listen error when it is neither EADDRINUSE nor EACCES (e.g. EMFILE)
   */
  async reserve(key: string): Promise<number> {
    const existing = this.held.get(key);
    if (existing !== undefined) return existing.port;
    const size = this.high - this.low + 1;
    while (this.scanned < size) {
      const candidate = this.cursor;
      this.cursor = candidate === this.high ? this.low : candidate + 1;
      this.scanned++;
      if (this.used.has(candidate)) continue;
      this.used.add(candidate); // claimed synchronously: concurrent reserve() calls never try the same port
      const held = await listenEverywhere(candidate);
      if (held !== null) {
        this.held.set(key, held);
        return held.port;
      }
    }
    // Range exhausted: let the kernel pick (ephemeral range), still unique within this allocator.
    for (;;) {
      const held = await listenEverywhere(0);
      if (held === null) continue;
      if (this.used.has(held.port)) {
        for (const server of held.servers) server.close();
        continue;
      }
      this.used.add(held.port);
      this.held.set(key, held);
      return held.port;
    }
  }

  /**
   * Holds `port` for `key` again after its member stopped (the process backend, between two attempts of a
   * restarted member: nobody else can take the port during the backoff; the next start releases it right
   * before it spawns). Only a port this allocator handed out; a no-op when `key` already holds one.
   *
   * @returns false when the port is not free now (e.g. a process the member left behind holds it): then
   *   nothing is held and the next attempt may fail with EADDRINUSE, as before
   * @throws the listen error when it is neither EADDRINUSE nor EACCES (e.g. EMFILE)
   */
  async hold(key: string, port: number): Promise<boolean> {
    if (this.held.has(key)) return this.held.get(key)!.port === port;
    if (!this.used.has(port)) return false;
    const held = await listenEverywhere(port);
    if (held === null) return false;
    if (this.held.has(key)) {
      for (const server of held.servers) server.close();
      return this.held.get(key)!.port === port;
    }
    this.held.set(key, held);
    return true;
  }

  /**
   * Stops holding `key`'s port so its member can bind it. The port stays allocated (never handed to
   * another key). The socket is closed synchronously (libuv closes the descriptor inside `close()`); the
   * promise resolves when Node confirms it. Idempotent.
   */
  async release(key: string): Promise<void> {
    const entry = this.held.get(key);
    if (entry === undefined) return;
    this.held.delete(key);
    await Promise.all(entry.servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }

  /** Releases every held port. */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.held.keys()].map((key) => this.release(key)));
  }
}

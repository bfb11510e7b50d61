/**
 * Free loopback ports for members of a run (process backend, and the core's default when a backend
 * assigns no endpoints itself).
 *
 * Each port is RESERVED by listening on it (`127.0.0.1:<port>`) and held until the member is about to
 * start, then released, so that no other process, no other run and no other member of this run can
 * take it in between. Ports are unique within an allocator (one per run), even when many reservations
 * race.
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
  /** Address to reserve on. @default "127.0.0.1" */
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

function listen(server: net.Server, port: number, host: string): Promise<number | null> {
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
    server.listen({ port, host, exclusive: true, backlog: 1 });
  });
}

/**
 * Reserves unique free ports on the loopback interface and holds them until released.
 */
export class PortAllocator {
  readonly host: string;
  private readonly low: number;
  private readonly high: number;
  private cursor: number;
  private scanned = 0;
  private readonly held = new Map<string, { port: number; server: net.Server }>();
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
   * Reserves a port for `key` (a member id): listens on it until {@link release}. Calling it again for
   * the same key returns the same port.
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
      const server = net.createServer();
      server.unref();
      const port = await listen(server, candidate, this.host);
      if (port !== null) {
        this.held.set(key, { port, server });
        return port;
      }
    }
    // Range exhausted: let the kernel pick (ephemeral range), still unique within this allocator.
    for (;;) {
      const server = net.createServer();
      server.unref();
      const port = await listen(server, 0, this.host);
      if (port === null) continue;
      if (this.used.has(port)) {
        server.close();
        continue;
      }
      this.used.add(port);
      this.held.set(key, { port, server });
      return port;
    }
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
    await new Promise<void>((resolve) => entry.server.close(() => resolve()));
  }

  /** Releases every held port. */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.held.keys()].map((key) => this.release(key)));
  }
}

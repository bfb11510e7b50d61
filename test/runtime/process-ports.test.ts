/**
 * Port reservations for members (runtime/core/ports.ts) with real sockets: unique under concurrent
 * reservations, held until released, below the ephemeral range, and a kernel-chosen fallback.
 */
import * as net from "node:net";
import { describe, expect, it } from "vitest";
import { PortAllocator, ephemeralLow } from "../../runtime/core/ports";

function tryListen(port: number, host = "127.0.0.1", ipv6Only = false): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen({ port, host, exclusive: true, ipv6Only }, () => server.close(() => resolve(true)));
  });
}

/** Whether this host can listen on [::1] (checked here, not with the allocator's own check). */
const hasIpv6 = (): Promise<boolean> => tryListen(0, "::1");

/** A listener on `host` (port 0: kernel-chosen); resolves with its port and a close function. */
function listener(host: string, port = 0, ipv6Only = false): Promise<{ port: number; close: () => Promise<void> }> {
  const server = net.createServer();
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port, host, ipv6Only, exclusive: true }, () =>
      resolve({ port: (server.address() as net.AddressInfo).port, close: () => new Promise<void>((done) => server.close(() => done())) }),
    );
  });
}

describe("PortAllocator", () => {
  it("gives 300 concurrent reservations 300 distinct ports below the ephemeral range, held until released", async () => {
    const ports = new PortAllocator();
    const reserved = await Promise.all(Array.from({ length: 300 }, (_, i) => ports.reserve(`m-${i}`)));
    expect(new Set(reserved).size).toBe(300);
    for (const port of reserved) {
      expect(port).toBeGreaterThanOrEqual(20000);
      expect(port).toBeLessThan(ephemeralLow());
    }
    expect(await ports.reserve("m-7")).toBe(reserved[7]); // same key, same port
    expect(await tryListen(reserved[0]!)).toBe(false); // held: nobody else can bind it
    await ports.release("m-0");
    expect(await tryListen(reserved[0]!)).toBe(true); // released: the member can bind it
    const again = await ports.reserve("late");
    expect(reserved).not.toContain(again); // never handed out twice
    await ports.releaseAll();
  });

  it("skips ports in use and falls back to kernel-chosen ports when its range is exhausted", async () => {
    const blocker = net.createServer();
    const busy = await new Promise<number>((resolve) => blocker.listen({ port: 0, host: "127.0.0.1" }, () => resolve((blocker.address() as net.AddressInfo).port)));
    const ports = new PortAllocator({ range: [busy, busy], random: () => 0 });
    const first = await ports.reserve("a");
    const second = await ports.reserve("b");
    expect(first).not.toBe(busy);
    expect(second).not.toBe(first);
    await ports.releaseAll();
    blocker.close();
    expect(() => new PortAllocator({ range: [5000, 4000] })).toThrow("PortAllocator: invalid range [5000, 4000]");
  });

  // A member may bind 127.0.0.1, 0.0.0.0 or ::. A listener on another IPv4 address of the port (127.0.0.2 is
  // loopback too on Linux) or an IPv6-only one on [::] does not conflict with 127.0.0.1 but does with the
  // member's 0.0.0.0 / :: bind (EADDRINUSE). 0.0.0.0 itself already conflicted with a 127.0.0.1 reservation.
  it.each([
    ["0.0.0.0", false],
    ["127.0.0.2", false],
    ["::", true],
    ["::1", false],
  ] as const)("does not hand out a port that a listener on %s holds (a member binding all addresses would fail)", async (host, ipv6Only) => {
    if (host.includes(":") && !(await hasIpv6())) {
      console.log(`skipping ${host}: no IPv6 here`);
      return;
    }
    if (host === "127.0.0.2" && process.platform !== "linux") return; // only Linux routes all of 127/8 to lo
    const taken = await listener(host, 0, ipv6Only);
    const ports = new PortAllocator({ range: [taken.port, taken.port], random: () => 0 });
    const got = await ports.reserve("member");
    expect(got).not.toBe(taken.port);
    // While held, nobody can bind the port on any address.
    expect(await tryListen(got, "127.0.0.1")).toBe(false);
    expect(await tryListen(got, "0.0.0.0")).toBe(false);
    if (await hasIpv6()) expect(await tryListen(got, "::", true)).toBe(false);
    await ports.releaseAll();
    expect(await tryListen(got, "0.0.0.0")).toBe(true);
    await taken.close();
  });
});

/**
 * Port reservations for members (runtime/core/ports.ts) with real sockets: unique under concurrent
 * reservations, held until released, below the ephemeral range, and a kernel-chosen fallback.
 */
import * as net from "node:net";
import { describe, expect, it } from "vitest";
import { PortAllocator, ephemeralLow } from "../../runtime/core/ports";

function tryListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)));
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
});

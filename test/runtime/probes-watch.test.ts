/**
 * The core's tcp/http probes with a backend listen watch (MemberHandle.whenListening, runtime/core/probes.ts): the
 * watch wakes the probe right after the member's listen(2), the connect still decides, and a watch that cannot tell
 * leaves the plain schedule. Real loopback sockets; the handles are plain objects (no backend).
 */
import * as http from "node:http";
import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { MemberHandle } from "../../runtime/core/backend";
import { MAX_RETRY_DELAY_MS, WATCHED_RETRY_DELAY_MS, probeStatus, waitReady } from "../../runtime/core/probes";
import type { CompiledReadiness } from "../../runtime/core/spec";
import { freePort } from "./process-helpers";

const servers: net.Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

const tcp: CompiledReadiness = { kind: "tcp", port: null };

/**
 * A handle whose watch resolves when `listened` does (the test's own "kernel"), recording the signal it got.
 */
function watchedHandle(port: number, listened: Promise<unknown> | "reject"): { handle: MemberHandle; watchSignals: AbortSignal[] } {
  const watchSignals: AbortSignal[] = [];
  const handle: MemberHandle = {
    member: "m-0",
    endpoint: { host: "127.0.0.1", port },
    whenListening: (watched, signal) => {
      expect(watched).toBe(port);
      watchSignals.push(signal);
      return listened === "reject" ? Promise.reject(new Error("cannot tell")) : listened.then(() => undefined);
    },
  };
  return { handle, watchSignals };
}

/** Listens on 127.0.0.1:port after `ms`; resolves with the time of the listen(2) call. */
function listenLater(port: number, ms: number, server: net.Server = net.createServer()): Promise<number> {
  servers.push(server);
  return new Promise((resolve) =>
    setTimeout(() => {
      const at = performance.now();
      server.listen(port, "127.0.0.1", () => resolve(at));
    }, ms),
  );
}

describe("readiness probes with a listen watch (MemberHandle.whenListening)", () => {
  it("tcp: ready within a few ms of the listen, not a retry period later; one attempt a second while the watch is pending", async () => {
    expect(WATCHED_RETRY_DELAY_MS).toBe(1_000);
    const port = await freePort();
    const listened = listenLater(port, 1_500);
    const { handle, watchSignals } = watchedHandle(port, listened);
    const status = probeStatus(tcp, handle);
    await waitReady(tcp, handle, status, new AbortController().signal);
    const late = performance.now() - (await listened);
    console.log(`ready ${late.toFixed(1)} ms after listen(2), ${status.attempts} attempts in 1.5 s`);
    expect(late).toBeLessThan(50);
    // The plain schedule (5 ms x1.5 up to 100 ms) makes ~20 attempts in 1.5 s; with the watch: at 0, 1 s and the listen.
    expect(status.attempts).toBe(3);
    expect(watchSignals).toHaveLength(1);
    expect(watchSignals[0]!.aborted).toBe(true); // the probe ended: the watch was cancelled
  });

  it("no watch when the first attempt succeeds; the watch is cancelled when the probe is aborted", async () => {
    const port = await freePort();
    await listenLater(port, 0);
    const ready = watchedHandle(port, new Promise(() => undefined));
    await waitReady(tcp, ready.handle, probeStatus(tcp, ready.handle), new AbortController().signal);
    expect(ready.watchSignals).toHaveLength(0);

    const silent = await freePort();
    const aborted = watchedHandle(silent, new Promise(() => undefined));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    await expect(waitReady(tcp, aborted.handle, probeStatus(tcp, aborted.handle), controller.signal)).rejects.toThrow("probe aborted");
    expect(aborted.watchSignals.map((signal) => signal.aborted)).toEqual([true]);
  });

  it("a watch that cannot tell (rejects) leaves the plain schedule: still ready within a retry period", async () => {
    const port = await freePort();
    const listened = listenLater(port, 600);
    const { handle } = watchedHandle(port, "reject");
    const status = probeStatus(tcp, handle);
    await waitReady(tcp, handle, status, new AbortController().signal);
    expect(performance.now() - (await listened)).toBeLessThan(MAX_RETRY_DELAY_MS + 50);
    expect(status.attempts).toBeGreaterThanOrEqual(8); // the 5 ms x1.5 ramp and 100 ms retries
  });

  it("http: the watch wakes the probe, the status code still decides (503 until the app is up)", async () => {
    const port = await freePort();
    let up = false;
    const server = http.createServer((_request, response) => {
      response.statusCode = up ? 200 : 503;
      response.end();
    });
    const listened = listenLater(port, 300, server);
    void listened.then(() => setTimeout(() => (up = true), 300));
    const readiness: CompiledReadiness = { kind: "http", path: "/", port: null };
    const { handle } = watchedHandle(port, listened);
    const status = probeStatus(readiness, handle);
    await waitReady(readiness, handle, status, new AbortController().signal);
    const after = performance.now() - (await listened);
    expect(after).toBeGreaterThanOrEqual(300);
    expect(after).toBeLessThan(300 + MAX_RETRY_DELAY_MS + 50); // back on the plain schedule once the watch fired
    expect(status.lastError).toBe("HTTP 503");
  });
});

/**
 * Liveness and restarts with the real scheduler, process backend and ledger writer (real child
 * processes): a member that answers its probe once and then stops answering fails the run during the
 * hold; `liveness: false` does not look; a member that exits on its first start and works on its second
 * is restarted; exhausted attempts fail the run naming the member. Every ledger verifies.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { showLedger } from "../../runtime/core/ledger/show";
import { verifyLedger } from "../../runtime/core/ledger/verify";
import { nodeMember, processesOfRun, runCohort } from "./process-helpers";

const sh = (script: string) => ["sh", "-c", script];

/** An HTTP member that answers its first request with 200 and every later one with 503. */
const okOnceThen503 = nodeMember(
  `let n=0;require("http").createServer((q,s)=>{s.statusCode=n++===0?200:503;s.end(String(s.statusCode))}).listen(+process.env.COHORT_PORT,"127.0.0.1")`,
);
/** A TCP member that accepts one connection and then closes its listener (the process lives on). */
// Closes its listener 500 ms after the first connection: the readiness probe (a connect, then the
// listener-owner check) has seen it ready by then; liveness sees it gone.
const closesListener = nodeMember(
  `const srv=require("net").createServer((c)=>{c.destroy();if(!srv.closing){srv.closing=1;setTimeout(()=>{srv.close();console.log("listener closed")},500)}}).listen(+process.env.COHORT_PORT,"127.0.0.1");setInterval(()=>{},1000)`,
);

describe("process backend: liveness during the hold", () => {
  it("a member that answers 200 once and then 503 fails the run during the hold, named, with a member-unhealthy record", async () => {
    const { result, runDir, runId, records } = await runCohort(
      [{ name: "web", app: { command: okOnceThen503 }, readiness: { http: { path: "/healthz" } }, liveness: { period: "200ms", failureThreshold: 3 } }],
      { hold: "30s" },
    );
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure?.member).toBe("web-0");
    const port = records.find((r) => r.kind === "member-started")!.port;
    expect(result.firstFailure?.reason.split("\n")[0]).toBe(
      `member web-0 failed its liveness probe during hold: 3 http://127.0.0.1:${port}/healthz probes in a row failed (period 200ms, failureThreshold 3); last: HTTP 503`,
    );
    expect(records.find((r) => r.kind === "member-unhealthy")).toMatchObject({
      member: "web-0",
      probe: "http",
      target: `http://127.0.0.1:${port}/healthz`,
      failures: 3,
      attempts: 3,
      lastError: "HTTP 503",
      periodMs: 200,
      failureThreshold: 3,
    });
    expect(records.find((r) => r.kind === "run-failed")).toMatchObject({ member: "web-0" });
    expect(result.phasesMs.hold).toBeLessThan(10_000);
    expect(await verifyLedger(runDir)).toMatchObject({ ok: true, complete: true, outcome: "failed" });
    expect(processesOfRun(runId)).toEqual([]);
  });

  it("a member that closes its listener after ready (tcp) fails the run", async () => {
    const { result, runDir, records } = await runCohort(
      [
        { name: "peer", replicas: 2, app: { command: sh("exec sleep 1000"), port: false }, readiness: { exec: { command: ["true"] } } },
        { name: "gate", app: { command: closesListener }, readiness: { tcp: {} }, liveness: { period: "150ms", failureThreshold: 2 } },
      ],
      { hold: "30s" },
    );
    expect(result.firstFailure?.member).toBe("gate-0");
    expect(result.firstFailure?.reason).toMatch(
      /^member gate-0 failed its liveness probe during hold: 2 tcp 127\.0\.0\.1:\d+ probes in a row failed \(period 150ms, failureThreshold 2\); last: connect ECONNREFUSED/,
    );
    expect(result.firstFailure?.reason).toContain("listener closed");
    expect(records.filter((r) => r.kind === "member-unhealthy").map((r) => r.member)).toEqual(["gate-0"]);
    expect(await verifyLedger(runDir)).toMatchObject({ outcome: "failed" });
  });

  it("liveness: false: the same member holds to the end and the run succeeds", async () => {
    const { result, runDir, records } = await runCohort([{ name: "web", app: { command: okOnceThen503 }, readiness: { http: { path: "/healthz" } }, liveness: false }], {
      hold: "1500ms",
    });
    expect(result).toMatchObject({ outcome: "succeeded", firstFailure: null });
    expect(records.some((r) => r.kind === "member-unhealthy")).toBe(false);
    expect(result.phasesMs.hold).toBeGreaterThanOrEqual(1500);
    expect(await verifyLedger(runDir)).toMatchObject({ outcome: "succeeded" });
  });
});

describe.each(["native", "perl", "direct"] as const)("process backend: restarts before ready (launcher: %s)", (launcher) => {
  it("a member that exits 1 on its first start and serves on its second is restarted; the run succeeds", async () => {
    const server = `require("http").createServer((q,s)=>s.end("ok")).listen(+process.env.COHORT_PORT,"127.0.0.1")`;
    const { result, runDir, runId, records } = await runCohort(
      [
        {
          name: "gw",
          app: {
            // The marker file is in the member's directory (its working directory), which survives the restart.
            command: sh(`if [ -e started-once ]; then echo "second start"; exec "${process.execPath}" -e '${server}'; fi; : > started-once; echo "first start: failing"; exit 1`),
          },
          readiness: { http: { path: "/" } },
          restart: { attempts: 2, backoff: "100ms" },
        },
      ],
      { hold: "200ms" },
      { launcher },
    );
    expect(result).toMatchObject({ outcome: "succeeded", readyCount: 1, firstFailure: null });
    expect(records.filter((r) => r.member === "gw-0").map((r) => r.kind)).toEqual([
      "member-scheduled",
      "member-started",
      "member-exited",
      "member-restarted",
      "member-started",
      "member-ready",
      "member-stopping",
      "member-exited",
      "member-stopped",
    ]);
    expect(records.find((r) => r.kind === "member-restarted")).toMatchObject({
      member: "gw-0",
      attempt: 2,
      maxAttempts: 3,
      previousReason: "exited before it was ready (exit code 1)",
      exitCode: 1,
      signal: null,
      backoffMs: 100,
    });
    const starts = records.filter((r) => r.kind === "member-started");
    expect(starts[0]!.pid).not.toBe(starts[1]!.pid);
    expect(starts[1]!.port).toBe(starts[0]!.port);
    // Both starts' output is kept, in order.
    expect(fs.readFileSync(path.join(runDir, "members", "gw-0", "output.log"), "utf8")).toBe("first start: failing\nsecond start\n");
    expect(await verifyLedger(runDir)).toMatchObject({ ok: true, outcome: "succeeded" });
    const shown = await showLedger(runDir);
    expect(shown).toMatch(/MEMBER\s+ROLE\s+SCHEDULED\s+STARTED\s+STARTS\s+READY\s+STOPPED/);
    expect(shown).toMatch(/gw-0\s+gw\s+[\d.]+\s+[\d.]+\s+2\s+[\d.]+\s+[\d.]+/);
    expect(processesOfRun(runId)).toEqual([]);
  });

  it("attempts exhausted: the run fails naming the member and 'after 3 attempts'", async () => {
    const { result, runDir, runId, records } = await runCohort(
      [{ name: "gw", app: { command: sh('touch starts; echo "start $(wc -l < starts)"; echo x >> starts; exit 78') }, restart: { attempts: 2, backoff: "50ms" } }],
      {},
      { launcher },
    );
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure?.member).toBe("gw-0");
    expect(result.firstFailure?.reason).toMatch(/^member gw-0 exited before it was ready \(exit code 78\) after 3 attempts\n/);
    expect(records.filter((r) => r.kind === "member-restarted").map((r) => [r.attempt, r.backoffMs])).toEqual([
      [2, 50],
      [3, 100],
    ]);
    expect(records.filter((r) => r.kind === "member-started")).toHaveLength(3);
    expect(fs.readFileSync(path.join(runDir, "members", "gw-0", "output.log"), "utf8").replace(/ +/g, " ")).toBe("start 0\nstart 1\nstart 2\n");
    expect(await verifyLedger(runDir)).toMatchObject({ ok: true, outcome: "failed" });
    expect(processesOfRun(runId)).toEqual([]);
  });
});

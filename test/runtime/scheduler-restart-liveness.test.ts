/**
 * The real scheduler on a fake clock against a scripted backend: liveness after ready (period, failure
 * threshold, reset on success, spread, off, not with backend readiness) and restarts before ready
 * (backoff doubling, per-attempt member deadline, exhausted attempts, backends that cannot restart).
 * Times are exact: the clock moves only when a timer fires.
 */
import { describe, expect, it } from "vitest";
import { Scheduler } from "../../runtime/core/scheduler";
import { loadRunSpec, type RunSpecInput } from "../../runtime/core/spec";
import { FakeClock, MemoryLedger, ScriptedBackend, type ScriptedMember } from "./scheduler-fakes";

function specOf(roles: RunSpecInput["roles"], extra: Partial<RunSpecInput> = {}) {
  return loadRunSpec(JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "t", stopGracePeriod: "0s", roles, ...extra }));
}

const execRole = (name: string, extra: Record<string, unknown> = {}) => ({ name, app: { command: ["fake"] }, readiness: { exec: { command: ["check"] } }, ...extra });

async function runScripted(
  spec: ReturnType<typeof specOf>,
  script: (member: string) => ScriptedMember,
  options: { readiness?: "probe" | "backend"; restarts?: boolean; random?: () => number } = {},
) {
  const clock = new FakeClock();
  const backend = new ScriptedBackend(clock, script, options);
  const ledger = new MemoryLedger();
  const scheduler = new Scheduler({ spec, runId: "t-20260101T000000Z-abcdef", runDir: "/nonexistent/run", backend, ledger, clock, random: options.random ?? (() => 0.5) });
  backend.events = scheduler.events;
  const result = await clock.run(scheduler.run());
  return { backend, ledger, result, clock };
}

describe("scheduler: liveness during the hold (fake clock)", () => {
  it("a member that stops answering after ready fails the run after failureThreshold failures in a row, with a member-unhealthy record", async () => {
    const spec = specOf([execRole("web", { liveness: { period: "2s", failureThreshold: 3 } })], { hold: "60s" });
    // exec 1 is the readiness probe (passes); every liveness exec after it fails.
    const { backend, ledger, result } = await runScripted(spec, () => ({ exec: (_attempt, n) => (n === 1 ? 0 : 1) }));
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure).toEqual({
      member: "web-0",
      reason: "member web-0 failed its liveness probe during hold: 3 exec check probes in a row failed (period 2s, failureThreshold 3); last: exit code 1\ntail of web-0 attempt 1",
    });
    // Ready at 0; first liveness attempt after random (0.5) x period = 1 s, then every 2 s: 1, 3, 5 s.
    expect(backend.callsOf("exec").map((c) => c.at)).toEqual([0, 1000, 3000, 5000]);
    expect(ledger.records.find((r) => r.kind === "member-unhealthy")).toEqual({
      seq: expect.any(Number),
      kind: "member-unhealthy",
      member: "web-0",
      probe: "exec",
      target: "exec check",
      failures: 3,
      attempts: 3,
      lastError: "exit code 1",
      periodMs: 2000,
      failureThreshold: 3,
    });
    expect(ledger.records.find((r) => r.kind === "hold-ended")).toMatchObject({ heldMs: 5000, early: true });
    expect(ledger.records.find((r) => r.kind === "run-failed")).toMatchObject({ member: "web-0" });
    expect(ledger.completion).toMatchObject({ outcome: "failed", firstFailure: result.firstFailure });
  });

  it("a success resets the count: failures that never reach the threshold in a row do not fail the run", async () => {
    const spec = specOf([execRole("web", { liveness: { period: "1s", failureThreshold: 3 } })], { hold: "20s" });
    // Liveness attempts (n >= 2) fail, fail, pass, fail, fail, pass, ...
    const { backend, result } = await runScripted(spec, () => ({ exec: (_attempt, n) => (n === 1 || (n - 1) % 3 === 0 ? 0 : 1) }));
    expect(result.outcome).toBe("succeeded");
    expect(backend.callsOf("exec").length).toBeGreaterThan(15);
  });

  it("liveness: false: the probe is never re-run and the run succeeds", async () => {
    const spec = specOf([execRole("web", { liveness: false })], { hold: "60s" });
    const { backend, result } = await runScripted(spec, () => ({ exec: (_attempt, n) => (n === 1 ? 0 : 1) }));
    expect(result.outcome).toBe("succeeded");
    expect(backend.callsOf("exec")).toHaveLength(1);
  });

  it("the default is on: period 5s, failureThreshold 3", async () => {
    const spec = specOf([execRole("web")], { hold: "60s" });
    const { backend, result } = await runScripted(spec, () => ({ exec: (_attempt, n) => (n === 1 ? 0 : 1) }));
    expect(result.firstFailure?.reason.split("\n")[0]).toBe(
      "member web-0 failed its liveness probe during hold: 3 exec check probes in a row failed (period 5s, failureThreshold 3); last: exit code 1",
    );
    expect(backend.callsOf("exec").map((c) => c.at)).toEqual([0, 2500, 7500, 12500]);
  });

  it("spreads the first attempts of members that became ready together over the period", async () => {
    const spec = specOf([{ ...execRole("web"), replicas: 50, liveness: { period: "10s", failureThreshold: 1000 } }], { hold: "10s" });
    let i = 0;
    const { backend, result } = await runScripted(spec, () => ({}), { random: () => (i++ % 50) / 50 });
    expect(result.outcome).toBe("succeeded");
    const first = new Map<string, number>();
    for (const call of backend.callsOf("exec").slice(50)) if (!first.has(call.member)) first.set(call.member, call.at);
    // 50 members, 50 distinct first-attempt times, 200 ms apart, within one period.
    expect(new Set(first.values()).size).toBe(50);
    expect(Math.min(...first.values())).toBe(0);
    expect(Math.max(...first.values())).toBe(9800);
  });

  it("backends that decide readiness themselves (readiness: backend, e.g. Kubernetes) are not probed by the core", async () => {
    const spec = specOf([execRole("web", { liveness: { period: "1s", failureThreshold: 1 } })], { hold: "30s" });
    const { backend, result } = await runScripted(spec, () => ({ exec: () => 1 }), { readiness: "backend" });
    expect(result.outcome).toBe("succeeded");
    expect(backend.callsOf("exec")).toHaveLength(0);
  });
});

describe("scheduler: restarts before ready (fake clock)", () => {
  it("a member that exits before ready is started again after the backoff and the run succeeds; member-restarted records it", async () => {
    const spec = specOf([execRole("gw", { restart: { attempts: 2, backoff: "1s" }, liveness: false })], { hold: "1s" });
    // Start 1 exits with code 78 after 10 ms (readiness never passes before it); start 2 is ready.
    const { backend, ledger, result } = await runScripted(spec, () => ({
      exec: (attempt) => (attempt === 1 ? 1 : 0),
      exit: (attempt) => (attempt === 1 ? { afterMs: 10, code: 78 } : null),
    }));
    expect(result).toMatchObject({ outcome: "succeeded", readyCount: 1, firstFailure: null });
    expect(backend.callsOf("start").map((c) => [c.attempt, c.at])).toEqual([
      [1, 0],
      [2, 1010],
    ]);
    expect(ledger.kinds("gw-0")).toEqual([
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
    expect(ledger.records.find((r) => r.kind === "member-restarted")).toEqual({
      seq: expect.any(Number),
      kind: "member-restarted",
      member: "gw-0",
      attempt: 2,
      maxAttempts: 3,
      previousReason: "exited before it was ready (exit code 78)",
      exitCode: 78,
      signal: null,
      backoffMs: 1000,
      cleanupMs: 0,
    });
    expect(ledger.records.filter((r) => r.kind === "member-started").map((r) => r.attempt)).toEqual([undefined, 2]);
    expect(ledger.records.find((r) => r.kind === "member-ready")).toMatchObject({ startAttempt: 2, startToReadyMs: 1010 });
    expect(ledger.records.some((r) => r.kind === "member-failed")).toBe(false);
  });

  it("the backoff doubles; when the attempts are exhausted the run fails naming the member and the attempt count", async () => {
    const spec = specOf([execRole("gw", { restart: { attempts: 3, backoff: "1s" } })]);
    const { backend, ledger, result } = await runScripted(spec, () => ({ exec: () => 1, exit: () => ({ afterMs: 5, code: 1 }) }));
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure).toEqual({ member: "gw-0", reason: "member gw-0 exited before it was ready (exit code 1) after 4 attempts\nattempt 4 output" });
    // Starts at 0; exits 5 ms later each time; restarts after 1 s, 2 s, 4 s.
    expect(backend.callsOf("start").map((c) => c.at)).toEqual([0, 1005, 3010, 7015]);
    expect(ledger.records.filter((r) => r.kind === "member-restarted").map((r) => [r.attempt, r.backoffMs])).toEqual([
      [2, 1000],
      [3, 2000],
      [4, 4000],
    ]);
    expect(ledger.records.filter((r) => r.kind === "member-failed")).toHaveLength(1);
  });

  it("the member deadline covers one attempt: a member not ready in time is stopped and started again", async () => {
    const spec = specOf([execRole("gw", { restart: { attempts: 1, backoff: "500ms" }, liveness: false })], { memberTimeout: "5s" });
    // Start 1 never passes its probe; start 2 passes at once.
    const { backend, ledger, result } = await runScripted(spec, () => ({ exec: (attempt) => (attempt === 1 ? 1 : 0) }));
    expect(result).toMatchObject({ outcome: "succeeded", readyCount: 1 });
    expect(backend.callsOf("start").map((c) => c.at)).toEqual([0, 5500]);
    expect(backend.callsOf("stop").map((c) => [c.attempt, c.at])).toEqual([
      [1, 5000],
      [2, 5500],
    ]);
    const restarted = ledger.records.find((r) => r.kind === "member-restarted")!;
    expect(restarted).toMatchObject({ attempt: 2, exitCode: null, signal: null, backoffMs: 500 });
    expect(restarted.previousReason).toMatch(/^not ready within 5s \(memberTimeout\); last exec check probe: exit code 1 \(\d+ attempts\)$/);
    // The attempt stopped for the restart exits (recorded), and that exit is not a failure.
    expect(ledger.kinds("gw-0").slice(0, 5)).toEqual(["member-scheduled", "member-started", "member-exited", "member-restarted", "member-started"]);
  });

  it("a deadline with no restarts left fails the run with the attempt count", async () => {
    const spec = specOf([execRole("gw", { restart: { attempts: 1, backoff: "0s" } })], { memberTimeout: "2s" });
    const { result } = await runScripted(spec, () => ({ exec: () => 1 }));
    expect(result.firstFailure?.member).toBe("gw-0");
    expect(result.firstFailure?.reason.split("\n")[0]).toMatch(
      /^member gw-0 was not ready within 2s \(memberTimeout\) after 2 attempts; last exec check probe: exit code 1 \(\d+ attempts\)$/,
    );
  });

  it("a member that exits after it was ready is not restarted: the run fails", async () => {
    const spec = specOf([execRole("gw", { restart: { attempts: 2, backoff: "1s" }, liveness: false })], { hold: "60s" });
    const { backend, result } = await runScripted(spec, () => ({ exit: () => ({ afterMs: 3000, code: 0 }) }));
    expect(result.firstFailure).toEqual({ member: "gw-0", reason: "member gw-0 exited during hold (exit code 0)\nattempt 1 output" });
    expect(backend.callsOf("start")).toHaveLength(1);
  });

  it("a backend that cannot restart members fails the run before anything starts", async () => {
    const spec = specOf([execRole("a"), execRole("gw", { restart: { attempts: 2 } })]);
    const { backend, result } = await runScripted(spec, () => ({}), { restarts: false });
    expect(result.firstFailure).toEqual({
      member: null,
      reason: "roles[1].restart: the scripted backend cannot restart members (role gw asks for 2); remove restart or set restart.attempts: 0",
    });
    expect(backend.callsOf("start")).toHaveLength(0);
  });
});

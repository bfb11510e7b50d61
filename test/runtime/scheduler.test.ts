/**
 * The real scheduler against an in-memory backend and ledger: dependency order,
 * the concurrency bound, one record of each kind per member, fail fast, deadlines, teardown order,
 * hold, interrupt.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Scheduler } from "../../runtime/core/scheduler";
import { loadRunSpec, type RunSpecInput } from "../../runtime/core/spec";
import { FakeBackend, MemoryLedger, type FakeBehaviour } from "./scheduler-fakes";

function specOf(roles: RunSpecInput["roles"], extra: Partial<RunSpecInput> = {}) {
  return loadRunSpec(JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "t", roles, ...extra }));
}

async function runWith(spec: ReturnType<typeof specOf>, behaviour: (member: string) => FakeBehaviour) {
  const backend = new FakeBackend(behaviour);
  const ledger = new MemoryLedger();
  const scheduler = new Scheduler({ spec, runId: "t-20260101T000000Z-abcdef", runDir: "/nonexistent/run", backend, ledger });
  backend.events = scheduler.events;
  const result = await scheduler.run();
  return { backend, ledger, result, scheduler };
}

const role = (name: string, replicas: number, needs: string[] = []) => ({ name, replicas, needs, app: { command: ["fake"] } });

describe("scheduler with an in-memory backend", () => {
  it("property: any DAG, delays and concurrency: needs are ready before a start, the bound holds, one record per member", async () => {
    const cohort = fc.record({
      roles: fc.integer({ min: 1, max: 6 }).chain((n) =>
        fc.tuple(
          ...Array.from({ length: n }, (_, i) =>
            fc.record({
              replicas: fc.integer({ min: 1, max: 4 }),
              needs: fc.subarray(Array.from({ length: i }, (_, j) => j)),
            }),
          ),
        ),
      ),
      concurrency: fc.integer({ min: 1, max: 6 }),
      seed: fc.integer({ min: 0, max: 1000 }),
    });
    await fc.assert(
      fc.asyncProperty(cohort, async ({ roles, concurrency, seed }) => {
        const spec = specOf(
          roles.map((r, i) =>
            role(
              `r${i}`,
              r.replicas,
              r.needs.map((j) => `r${j}`),
            ),
          ),
          { concurrency },
        );
        const delays = (member: string): FakeBehaviour => {
          const h = [...member].reduce((a, c) => (a * 31 + c.charCodeAt(0) + seed) % 997, 7);
          return { kind: "ready", startMs: h % 3, readyMs: h % 5 };
        };
        const { backend, ledger, result } = await runWith(spec, delays);
        expect(result.outcome).toBe("succeeded");
        expect(result.readyCount).toBe(spec.size);
        expect(backend.maxStarting).toBeLessThanOrEqual(concurrency);
        const readyAt = new Map(backend.log.filter((e) => e.what === "ready").map((e) => [e.member, e.at]));
        for (const r of spec.roles) {
          for (const member of r.members) {
            const startAt = backend.log.find((e) => e.what === "start" && e.member === member)!.at;
            for (const need of r.needs) {
              for (const dep of spec.roles.find((x) => x.name === need)!.members) expect(readyAt.get(dep)!).toBeLessThanOrEqual(startAt);
            }
            expect(ledger.kinds(member)).toEqual(["member-scheduled", "member-started", "member-ready", "member-stopping", "member-exited", "member-stopped"]);
          }
        }
        // Teardown: a member stops only after every member of every role that needs it has stopped.
        const stoppedAt = new Map(backend.log.filter((e) => e.what === "stopped").map((e) => [e.member, e.at]));
        const stopAt = new Map(backend.log.filter((e) => e.what === "stop").map((e) => [e.member, e.at]));
        for (const r of spec.roles) {
          for (const dependant of r.dependants) {
            for (const a of spec.roles.find((x) => x.name === dependant)!.members) {
              for (const b of r.members) expect(stoppedAt.get(a)!).toBeLessThanOrEqual(stopAt.get(b)!);
            }
          }
        }
        expect(ledger.completion?.outcome).toBe("succeeded");
      }),
      { numRuns: 40 },
    );
  }, 120_000);

  it("writes the run-level records in order and the completion with phases", async () => {
    const spec = specOf([role("router", 1), role("agent", 3, ["router"])], { hold: "20ms" });
    const { ledger, result } = await runWith(spec, () => ({ kind: "ready", startMs: 1, readyMs: 2 }));
    expect(ledger.kinds().filter((k) => !k.startsWith("member-"))).toEqual([
      "run-started",
      "roster-admitted",
      "roster-ready",
      "hold-started",
      "hold-ended",
      "teardown-started",
      "teardown-finished",
    ]);
    expect(result).toMatchObject({ outcome: "succeeded", size: 4, readyCount: 4, firstFailure: null, ledgerError: null });
    expect(result.timeToReadyMs).toBeGreaterThan(0);
    expect(result.phasesMs.hold).toBeGreaterThanOrEqual(19);
    expect(Object.keys(result.phasesMs)).toEqual(["admission", "startup", "hold", "teardown"]);
    expect(ledger.completion).toMatchObject({ outcome: "succeeded", firstFailure: null, size: 4, readyCount: 4 });
    // Every agent's COHORT_NEEDS names the router's address.
  });

  it("a member that exits before it is ready fails the run, named, with its output tail; nothing after it starts", async () => {
    const spec = specOf([role("router", 1), role("db", 1), role("agent", 2, ["router", "db"])]);
    const { backend, ledger, result } = await runWith(spec, (member) =>
      member === "db-0" ? { kind: "exit-before-ready", afterMs: 5, exitCode: 3, output: "line 1\nline 2\nfatal: no config" } : { kind: "ready", startMs: 0, readyMs: 1 },
    );
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure).toEqual({
      member: "db-0",
      reason: "member db-0 exited before it was ready (exit code 3)\nline 1\nline 2\nfatal: no config",
    });
    expect(backend.log.some((e) => e.member.startsWith("agent"))).toBe(false);
    expect(ledger.records.find((r) => r.kind === "member-failed")).toMatchObject({
      member: "db-0",
      reason: "member db-0 exited before it was ready (exit code 3)",
      outputTail: "line 1\nline 2\nfatal: no config",
    });
    expect(ledger.records.find((r) => r.kind === "run-failed")).toMatchObject({ member: "db-0" });
    expect(ledger.completion).toMatchObject({ outcome: "failed", firstFailure: result.firstFailure });
    // the router was started, so it is stopped; db-0 had exited but is stopped too (its group may live on)
    expect(ledger.kinds("router-0")).toContain("member-stopped");
  });

  it("a member that never becomes ready fails at its deadline, named, with the field that set it", async () => {
    const spec = specOf([role("router", 1), { ...role("agent", 2, ["router"]), readiness: { tcp: {}, timeout: "150ms" } }]);
    const { result } = await runWith(spec, (member) => (member === "agent-1" ? { kind: "never-ready" } : { kind: "ready", startMs: 0, readyMs: 1 }));
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure).toEqual({
      member: "agent-1",
      reason: "member agent-1 was not ready within 150ms (roles[1].readiness.timeout)\ntail of agent-1",
    });
  });

  it("the roster deadline names the earliest-started member that is not ready", async () => {
    const spec = specOf([role("router", 1), role("agent", 3, ["router"])], { startupTimeout: "120ms", memberTimeout: "10s" });
    const { result } = await runWith(spec, (member) => (member === "router-0" ? { kind: "never-ready" } : { kind: "ready", startMs: 0, readyMs: 1 }));
    expect(result.firstFailure?.member).toBe("router-0");
    expect(result.firstFailure?.reason).toBe(
      "member router-0 was not ready within 120ms (startupTimeout); 4 of 4 members not ready: router-0, agent-0, agent-1, agent-2\ntail of router-0",
    );
  });

  it("a start error fails the run naming the member", async () => {
    const spec = specOf([role("a", 2)]);
    const { result } = await runWith(spec, (member) => (member === "a-1" ? { kind: "start-throws", message: "boom" } : { kind: "ready", startMs: 5, readyMs: 5 }));
    expect(result.firstFailure).toEqual({ member: "a-1", reason: "member a-1 could not be started: boom" });
  });

  it("a member that exits during hold fails the run", async () => {
    const spec = specOf([role("a", 2)], { hold: "5s" });
    const { result, ledger } = await runWith(spec, (member) =>
      member === "a-1" ? { kind: "exit-after-ready", readyMs: 1, exitAfterMs: 30 } : { kind: "ready", startMs: 0, readyMs: 1 },
    );
    expect(result.firstFailure).toEqual({ member: "a-1", reason: "member a-1 exited during hold (exit code 0)\nbye" });
    expect(ledger.records.find((r) => r.kind === "hold-ended")).toMatchObject({ early: true });
    expect(result.phasesMs.hold).toBeLessThan(5_000);
  });

  it("interrupt: outcome interrupted, members stopped, completion written", async () => {
    const spec = specOf([role("router", 1), role("agent", 2, ["router"])]);
    const backend = new FakeBackend((member) => (member.startsWith("agent") ? { kind: "never-ready" } : { kind: "ready", startMs: 0, readyMs: 1 }));
    const ledger = new MemoryLedger();
    const scheduler = new Scheduler({
      spec,
      runId: "t-20260101T000000Z-abcdef",
      runDir: "/nonexistent/run",
      backend,
      ledger,
      onProgress: (p) => {
        if (p.started === 3 && p.phase === "startup") scheduler.interrupt("SIGTERM");
      },
    });
    backend.events = scheduler.events;
    const result = await scheduler.run();
    expect(result).toMatchObject({ outcome: "interrupted", firstFailure: null, interruptedBy: "SIGTERM", readyCount: 1 });
    expect(ledger.records.find((r) => r.kind === "run-interrupted")).toMatchObject({ signal: "SIGTERM" });
    for (const member of ["router-0", "agent-0", "agent-1"]) expect(ledger.kinds(member)).toContain("member-stopped");
    expect(ledger.completion).toMatchObject({ outcome: "interrupted", interruptedBy: "SIGTERM" });
  });

  it("plans members: env, $(VAR) expansion, COHORT_NEEDS, secrets registered for redaction before use", async () => {
    const spec = specOf([
      role("router", 2),
      {
        name: "agent",
        needs: ["router"],
        app: {
          command: ["agent", "--port=$(COHORT_PORT)", "--dir=$(COHORT_MEMBER_DIR)", "$$(COHORT_PORT)"],
          env: { URL: "http://127.0.0.1:$(COHORT_PORT)/", AUTH: "Bearer $(TOKEN)" },
          secretEnv: ["TOKEN"],
          files: { "config.json": "{}" },
        },
      },
    ]);
    let n = 0;
    const backend = new FakeBackend(() => ({ kind: "ready", startMs: 0, readyMs: 0 }));
    const ledger = new MemoryLedger();
    const scheduler = new Scheduler({
      spec,
      runId: "t-20260101T000000Z-abcdef",
      runDir: "/runs/t1",
      backend,
      ledger,
      secretToken: () => `secret-token-${++n}`.padEnd(20, "x"),
    });
    backend.events = scheduler.events;
    await scheduler.run();
    const plan = backend.plans.get("agent-0")!;
    expect(plan.command).toEqual(["agent", "--port=10002", "--dir=/runs/t1/members/agent-0", "$(COHORT_PORT)"]);
    expect(plan.env).toEqual({
      COHORT_RUN_ID: "t-20260101T000000Z-abcdef",
      COHORT_ROLE: "agent",
      COHORT_INDEX: "0",
      COHORT_MEMBER: "agent-0",
      COHORT_PORT: "10002",
      COHORT_NEEDS: JSON.stringify({ router: ["fake.invalid:10000", "fake.invalid:10001"] }),
      COHORT_MEMBER_DIR: "/runs/t1/members/agent-0",
      TOKEN: "secret-token-1xxxxxx",
      URL: "http://127.0.0.1:10002/",
      AUTH: "Bearer secret-token-1xxxxxx",
    });
    expect(plan.secretEnv).toEqual(["TOKEN", "AUTH"]);
    expect(plan.files).toEqual({ "config.json": "{}" });
    expect(backend.plans.get("router-1")!.env.COHORT_NEEDS).toBe("{}");
    expect(ledger.secrets).toEqual(["secret-token-1xxxxxx"]);
    expect(JSON.stringify(ledger.records)).not.toContain("secret-token");
  });
});

describe("scheduler with a ledger that stops taking writes (a full disk after the hold)", () => {
  /** A MemoryLedger whose appends fail from the record kind `failFrom` on, and whose completion fails when `failComplete`. */
  class FailingLedger extends MemoryLedger {
    private failing = false;
    constructor(
      private readonly failFrom: string | null,
      private readonly failComplete: boolean,
    ) {
      super();
    }
    override async append(kind: string, fields: Record<string, unknown> = {}): Promise<unknown> {
      if (kind === this.failFrom) this.failing = true;
      if (this.failing) throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
      return super.append(kind, fields);
    }
    override async complete(completion: Parameters<MemoryLedger["complete"]>[0]): Promise<unknown> {
      if (this.failComplete) throw new Error("ENOSPC: no space left on device, open 'completion.json'");
      return super.complete(completion);
    }
  }

  async function runWithLedger(ledger: MemoryLedger) {
    const spec = specOf([role("web", 2)], { hold: "10ms" });
    const backend = new FakeBackend(() => ({ kind: "ready", startMs: 1, readyMs: 1 }));
    const scheduler = new Scheduler({ spec, runId: "t-20260101T000000Z-abcdef", runDir: "/nonexistent/run", backend, ledger });
    backend.events = scheduler.events;
    return scheduler.run();
  }

  it("a teardown record that cannot be written fails the run, naming the write and its reason; never succeeded", async () => {
    const ledger = new FailingLedger("teardown-finished", true);
    const result = await runWithLedger(ledger);
    expect(result.outcome).toBe("failed");
    expect(result.readyCount).toBe(2);
    expect(result.firstFailure).toEqual({ member: null, reason: "ledger append (teardown-finished) failed: ENOSPC: no space left on device, write" });
    expect(result.ledgerError).toBe(result.firstFailure!.reason);
  });

  it("a completion that cannot be written fails the run (every record written)", async () => {
    const ledger = new FailingLedger(null, true);
    const result = await runWithLedger(ledger);
    expect(ledger.kinds()).toContain("teardown-finished");
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure?.reason).toBe("completion not written: ENOSPC: no space left on device, open 'completion.json'");
  });

  it("a teardown record that fails but a completion that is written: the completion says failed too", async () => {
    const ledger = new FailingLedger("member-stopped", false);
    const result = await runWithLedger(ledger);
    expect(result.outcome).toBe("failed");
    expect(ledger.completion?.outcome).toBe("failed");
    expect(ledger.completion?.firstFailure?.reason).toMatch(/^ledger append \(member-stopped\) failed: ENOSPC/);
  });
});

/**
 * The real scheduler, process backend and ledger writer with real child processes (no mocks of the
 * process layer): probes, environment, $(VAR) expansion, early exits, deadlines, process trees,
 * secrets, and no process left behind.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { cgroupHierarchies } from "../../runtime/backends/process/cgroup";
import { listProcesses, readProcStat } from "../../runtime/backends/process/status";
import { verifyLedger } from "../../runtime/core/ledger/verify";
import { filesUnder, groupExists, httpListener, nodeMember, processesOfRun, runCohort as runWith, tempDir } from "./process-helpers";

const sh = (script: string) => ["sh", "-c", script];
const tcpListener = nodeMember(`require("net").createServer(()=>{}).listen(+process.env.COHORT_PORT,"127.0.0.1")`);

function startedGroups(records: readonly Record<string, unknown>[]): number[] {
  return records.filter((r) => r.kind === "member-started").map((r) => r.pgid as number);
}

describe.each(["native", "perl", "direct"] as const)("process backend (launcher: %s)", (launcher) => {
  const runCohort = (roles: Parameters<typeof runWith>[0], extra: Parameters<typeof runWith>[1] = {}, hooks: Parameters<typeof runWith>[2] = {}) =>
    runWith(roles, extra, { ...hooks, launcher });

  it("runs a graph with http, tcp, exec and log probes; env, $(VAR) expansion and files reach members; the ledger verifies", async () => {
    const { result, runDir, runId, records } = await runCohort([
      { name: "router", app: { command: httpListener(100) }, readiness: { http: { path: "/" } } },
      {
        name: "agent",
        replicas: 2,
        needs: ["router"],
        app: {
          command: sh('printf "%s\\n" "$@" > argv.txt; env | grep -E "^(COHORT_|GREETING)" | sort > env.txt; exec sleep 1000').concat([
            "sh",
            "--port=$(COHORT_PORT)",
            "--dir=$(COHORT_MEMBER_DIR)",
            "$$(COHORT_PORT)",
            "$(UNDEFINED)",
          ]),
          env: { GREETING: "hello from $(COHORT_MEMBER)" },
          files: { "conf/agent.json": '{"ok":true}' },
        },
        readiness: { exec: { command: ["test", "-s", "env.txt"] } },
      },
      { name: "gate", needs: ["agent"], app: { command: tcpListener }, readiness: { tcp: {} } },
      { name: "logger", needs: ["gate"], app: { command: sh("echo starting; sleep 0.2; echo READY; exec sleep 1000"), port: false }, readiness: { log: { pattern: "^READY$" } } },
    ]);
    expect(result).toMatchObject({ outcome: "succeeded", readyCount: 5, size: 5, firstFailure: null, ledgerError: null });
    expect(await verifyLedger(runDir)).toMatchObject({ ok: true, complete: true, outcome: "succeeded" });
    const ready = Object.fromEntries(records.filter((r) => r.kind === "member-ready").map((r) => [r.member, r.probe]));
    expect(ready).toEqual({ "router-0": "http", "agent-0": "exec", "agent-1": "exec", "gate-0": "tcp", "logger-0": "log" });

    const memberDir = path.join(runDir, "members", "agent-1");
    const env = Object.fromEntries(
      fs
        .readFileSync(path.join(memberDir, "env.txt"), "utf8")
        .trim()
        .split("\n")
        .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
    );
    const started = records.find((r) => r.kind === "member-started" && r.member === "router-0")!;
    expect(env).toEqual({
      COHORT_INDEX: "1",
      COHORT_MEMBER: "agent-1",
      COHORT_MEMBER_DIR: memberDir,
      COHORT_NEEDS: JSON.stringify({ router: [started.endpoint] }),
      COHORT_PORT: env.COHORT_PORT,
      COHORT_ROLE: "agent",
      COHORT_RUN_ID: runId,
      GREETING: "hello from agent-1",
    });
    expect(Number(env.COHORT_PORT)).toBeGreaterThan(0);
    expect(fs.readFileSync(path.join(memberDir, "argv.txt"), "utf8")).toBe(`--port=${env.COHORT_PORT}\n--dir=${memberDir}\n$(COHORT_PORT)\n$(UNDEFINED)\n`);
    expect(fs.readFileSync(path.join(memberDir, "conf/agent.json"), "utf8")).toBe('{"ok":true}');
    expect((fs.statSync(path.join(memberDir, "conf/agent.json")).mode & 0o777).toString(8)).toBe("600");
    expect(fs.readFileSync(path.join(runDir, "members", "logger-0", "output.log"), "utf8")).toBe("starting\nREADY\n");
    // Each member's records come in lifecycle order, its exit before its stop.
    for (const member of ["router-0", "agent-0", "agent-1", "gate-0", "logger-0"]) {
      expect(records.filter((r) => r.member === member).map((r) => r.kind)).toEqual([
        "member-scheduled",
        "member-started",
        "member-ready",
        "member-stopping",
        "member-exited",
        "member-stopped",
      ]);
    }
    // Distinct ports; every group is gone after teardown.
    const ports = records.filter((r) => r.kind === "member-started" && r.port !== 0).map((r) => r.port);
    expect(new Set(ports).size).toBe(ports.length);
    for (const pgid of startedGroups(records)) expect(groupExists(pgid)).toBe(false);
    expect(processesOfRun(runId)).toEqual([]);
  });

  it("a member that exits before it is ready fails the run naming it, with its output tail; no member process is left", async () => {
    const { result, runDir, runId, records } = await runCohort([
      { name: "router", app: { command: httpListener() }, readiness: { http: { path: "/" } } },
      { name: "db", needs: ["router"], app: { command: sh("echo line-1; echo line-2 >&2; echo 'fatal: no config'; exit 3") } },
      { name: "agent", needs: ["db"], app: { command: tcpListener } },
    ]);
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure?.member).toBe("db-0");
    const [summary, ...tail] = result.firstFailure!.reason.split("\n");
    expect(summary).toBe("member db-0 exited before it was ready (exit code 3)");
    expect(tail.sort()).toEqual(["fatal: no config", "line-1", "line-2"]);
    expect(records.some((r) => r.kind === "member-started" && r.member === "agent-0")).toBe(false);
    expect(records.find((r) => r.kind === "member-exited" && r.member === "db-0")).toMatchObject({ exitCode: 3, signal: null });
    expect(records.find((r) => r.kind === "member-stopped" && r.member === "router-0")).toBeDefined();
    expect(await verifyLedger(runDir)).toMatchObject({ outcome: "failed" });
    for (const pgid of startedGroups(records)) expect(groupExists(pgid)).toBe(false);
    expect(processesOfRun(runId)).toEqual([]);
  });

  it("a member that never becomes ready fails at its deadline, named, with the last probe error", async () => {
    const { result, runId, records } = await runCohort([{ name: "slow", app: { command: ["sleep", "1000"] }, readiness: { tcp: {} } }], {
      memberTimeout: "1500ms",
    });
    const port = records.find((r) => r.kind === "member-started")!.port;
    expect(result.firstFailure?.member).toBe("slow-0");
    expect(result.firstFailure?.reason).toMatch(
      new RegExp(
        `^member slow-0 was not ready within 1500ms \\(memberTimeout\\); last tcp 127\\.0\\.0\\.1:${port} probe: connect ECONNREFUSED 127\\.0\\.0\\.1:${port} \\(\\d+ attempts\\)$`,
      ),
    );
    expect(records.find((r) => r.kind === "member-exited" && r.member === "slow-0")).toMatchObject({ signal: "SIGTERM" });
    expect(processesOfRun(runId)).toEqual([]);
  });

  it("kills the whole process tree: a leader that ignores SIGTERM and its child are SIGKILLed after the grace period", async () => {
    const { result, runDir, runId, records } = await runCohort(
      [
        {
          name: "tree",
          app: { command: sh('trap "" TERM; sleep 1000 & echo "child $!"; while :; do sleep 1; done'), port: false },
          readiness: { log: { pattern: "^child \\d+$" } },
        },
      ],
      { stopGracePeriod: "500ms" },
    );
    expect(result.outcome).toBe("succeeded");
    const child = Number(/child (\d+)/.exec(fs.readFileSync(path.join(runDir, "members", "tree-0", "output.log"), "utf8"))![1]);
    // Gone, or a zombie waiting for its new parent (PID 1) to reap it: not running either way.
    expect(readProcStat(child)?.state ?? "gone").toMatch(/^(gone|Z)$/);
    expect(records.find((r) => r.kind === "member-exited")).toMatchObject({ member: "tree-0", signal: "SIGKILL" });
    expect(processesOfRun(runId)).toEqual([]);
  });

  it("secrets: a fresh token per member, only in its environment; redacted in output.log, the ledger and the failure reason", async () => {
    const outside = tempDir("secret");
    const { result, runDir } = await runCohort([
      {
        name: "leaky",
        replicas: 2,
        app: {
          // Written under a temp name and renamed: when the first member's exit fails the run, the other one
          // may be stopped mid-write, and a half-written file must not look like its token.
          command: sh(
            'printf %s "$TOKEN" > "$OUTSIDE/.$COHORT_MEMBER" && mv "$OUTSIDE/.$COHORT_MEMBER" "$OUTSIDE/$COHORT_MEMBER"; echo "my token is $TOKEN"; echo "auth: $AUTH"; exit 1',
          ),
          env: { OUTSIDE: outside, AUTH: "Bearer $(TOKEN)" },
          secretEnv: ["TOKEN"],
        },
      },
    ]);
    expect(result.outcome).toBe("failed");
    const tokens = fs
      .readdirSync(outside)
      .filter((name) => !name.startsWith("."))
      .map((name) => fs.readFileSync(path.join(outside, name), "utf8"));
    expect(tokens.length).toBeGreaterThanOrEqual(1);
    for (const token of tokens) expect(token).toMatch(/^[0-9a-f]{64}$/);
    if (tokens.length === 2) expect(tokens[0]).not.toBe(tokens[1]);
    for (const file of filesUnder(runDir)) {
      const text = fs.readFileSync(file, "utf8");
      for (const token of tokens) expect(text.includes(token), `${file} contains a secret`).toBe(false);
    }
    expect(result.firstFailure!.reason).toContain("my token is [redacted]");
    expect(result.firstFailure!.reason).toContain("auth: Bearer [redacted]");
    const failed = result.firstFailure!.member!;
    expect(fs.readFileSync(path.join(runDir, "members", failed, "output.log"), "utf8")).toBe("my token is [redacted]\nauth: Bearer [redacted]\n");
  });

  it("a member that exits during hold fails the run", async () => {
    const { result } = await runCohort([{ name: "brief", app: { command: sh("echo up; sleep 0.5; exit 0"), port: false }, readiness: { log: { pattern: "up" } } }], {
      hold: "30s",
    });
    expect(result.firstFailure).toEqual({ member: "brief-0", reason: "member brief-0 exited during hold (exit code 0)\nup" });
  });

  it("a command that does not exist fails the run naming the member", async () => {
    const { result } = await runCohort([{ name: "bad", app: { command: ["no-such-command-xyz"] } }]);
    expect(result.firstFailure).toEqual({ member: "bad-0", reason: 'member bad-0 could not be started: cannot run "no-such-command-xyz": command not found (ENOENT)' });
  });

  it("interrupt mid-start: outcome interrupted, every started member stopped, completion written", async () => {
    let interrupted = false;
    const { result, runDir, runId, records } = await runCohort(
      [
        { name: "router", app: { command: httpListener() }, readiness: { http: { path: "/" } } },
        { name: "agent", replicas: 3, needs: ["router"], app: { command: httpListener(60_000) }, readiness: { http: { path: "/" } } },
      ],
      {},
      {
        onScheduler: (scheduler) => {
          // Interrupt once all three agents are started (and not ready: they listen after 60 s).
          const timer = setInterval(() => {
            const dir = path.join(runDir0(scheduler), "records.ndjson");
            const text = fs.existsSync(dir) ? fs.readFileSync(dir, "utf8") : "";
            if (!interrupted && (text.match(/"kind":"member-started","member":"agent-/g) ?? []).length === 3) {
              interrupted = true;
              clearInterval(timer);
              scheduler.interrupt("SIGTERM");
            }
          }, 20);
        },
      },
    );
    expect(result).toMatchObject({ outcome: "interrupted", interruptedBy: "SIGTERM", readyCount: 1, firstFailure: null });
    expect(await verifyLedger(runDir)).toMatchObject({ outcome: "interrupted" });
    expect(
      records
        .filter((r) => r.kind === "member-stopped")
        .map((r) => r.member)
        .sort(),
    ).toEqual(["agent-0", "agent-1", "agent-2", "router-0"]);
    expect(processesOfRun(runId)).toEqual([]);
  });
});

/** The run directory of a scheduler under test (its private config), for polling its ledger. */
function runDir0(scheduler: object): string {
  return (scheduler as unknown as { config: { runDir: string } }).config.runDir;
}

describe("process backend: last-resort cleanup", () => {
  it.each([
    ["throw", "native"],
    ["exit", "native"],
    ["throw", "perl"],
    ["exit", "perl"],
    ["throw", "direct"],
    ["exit", "direct"],
  ])("when the runtime dies (%s, launcher %s), every member process group is killed", async (how, launcher) => {
    const { spawnSync } = await import("node:child_process");
    const fixture = path.join(__dirname, "process-crash-fixture.ts");
    const run = spawnSync(process.execPath, ["--import", "tsx", fixture, how, launcher], { encoding: "utf8", cwd: path.join(__dirname, "..", "..") });
    expect(run.status).toBe(how === "exit" ? 7 : 1);
    if (how === "throw") expect(run.stderr).toContain("boom: an uncaught exception in the runtime");
    const groups = run.stdout.trim().split("\n").map(Number);
    expect(groups).toHaveLength(2);
    for (const pgid of groups) {
      expect(pgid).toBeGreaterThan(1);
      expect(groupExists(pgid)).toBe(false);
    }
    // The exit handler also killed and removed the members' cgroups (runtime/backends/process/cgroup.ts).
    for (const hierarchy of cgroupHierarchies()) expect(fs.existsSync(path.join(hierarchy.mount, "cohort", "crash"))).toBe(false);
  });
});

describe.each([
  ["native", "cohort-launcher"],
  ["perl", "perl"],
] as const)("process backend: %s launcher", (launcher, comm) => {
  it("if the launcher dies mid-run, teardown still stops every member and the run completes", async () => {
    let killed = 0;
    const { result, runId, records } = await runWith(
      [{ name: "a", replicas: 2, app: { command: sh("echo up; exec sleep 1000"), port: false }, readiness: { log: { pattern: "^up$" } } }],
      { hold: "60s" },
      {
        launcher,
        onScheduler: (scheduler) => {
          const dir = runDir0(scheduler);
          const timer = setInterval(() => {
            const file = path.join(dir, "records.ndjson");
            if (!fs.existsSync(file) || !fs.readFileSync(file, "utf8").includes('"kind":"hold-started"')) return;
            clearInterval(timer);
            for (const p of listProcesses()) {
              if (p.ppid === process.pid && fs.readFileSync(`/proc/${p.pid}/comm`, "utf8").trim() === comm.slice(0, 15)) {
                process.kill(p.pid, "SIGKILL");
                killed++;
              }
            }
            setTimeout(() => scheduler.interrupt("SIGTERM"), 200);
          }, 20);
        },
      },
    );
    expect(killed).toBe(1);
    expect(result).toMatchObject({ outcome: "interrupted", readyCount: 2 });
    expect(records.filter((r) => r.kind === "member-stopped").length).toBe(2);
    expect(records.find((r) => r.kind === "member-exited")).toMatchObject({ reason: "exited (status unknown: the launcher is gone)" });
    expect(processesOfRun(runId)).toEqual([]);
  });
});

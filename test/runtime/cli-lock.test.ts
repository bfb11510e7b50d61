/**
 * `cohort run --lock` (one live run per artifact root) and `--watch-pid` (the run ends by itself when the
 * process that started it is gone), with the shipped bundle as a real child process, as the host profile's
 * step script runs it. `reap --artifacts` stops the run the lock names.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { buildBundle, processesOfRun, runBundle, tempDir, type CliExit } from "./process-helpers";

let bundle = "";

beforeAll(async () => {
  // Shipped alone: a directory with nothing but the bundle and the member launcher built beside it.
  bundle = await buildBundle({ shipped: true });
}, 300_000);

type Exit = CliExit;

const cohort = (args: string[], onStart?: (child: ChildProcess) => void): Promise<Exit> => runBundle(bundle, args, { onStart });

function writeSpec(spec: object): string {
  const file = path.join(tempDir("spec"), "cohort.json");
  const member = { app: { command: ["sh", "-c", "echo ready; exec sleep 1000"], port: false }, readiness: { log: { pattern: "^ready$" } } };
  fs.writeFileSync(file, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", stopGracePeriod: "2s", roles: [{ name: "web", replicas: 2, ...member }], ...spec }));
  return file;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves with the run directory once the lock names a run whose members are all ready. */
async function lockedRunReady(artifacts: string): Promise<{ runId: string; runDir: string; pid: number }> {
  for (const deadline = Date.now() + 60_000; ;) {
    if (Date.now() > deadline) throw new Error(`no ready run holds ${artifacts}/.cohort-run.lock after 60 s`);
    try {
      const lock = JSON.parse(fs.readFileSync(path.join(artifacts, ".cohort-run.lock"), "utf8")) as { runId: string; runDir: string; pid: number };
      if (fs.readFileSync(path.join(lock.runDir, "records.ndjson"), "utf8").includes('"kind":"roster-ready"')) return lock;
    } catch {
      // not yet
    }
    await sleep(25);
  }
}

describe("cohort run --lock", () => {
  it("refuses a second run naming the live one; after the live runtime is SIGKILLed, the next run reaps it and runs; the lock goes with the run", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({ name: "locked", hold: "60s" });
    let first: ReturnType<typeof spawn> | undefined;
    const firstDone = cohort(["run", "--spec", spec, "--artifacts", artifacts, "--lock", "--backend-option", "launcher=direct"], (child) => (first = child));
    const live = await lockedRunReady(artifacts);

    const refused = await cohort(["run", "--spec", spec, "--artifacts", artifacts, "--lock"]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe("");
    expect(refused.stderr.trimEnd().split("\n").at(-1)).toBe(
      `cohort: refused: run ${live.runId} (runtime pid ${live.pid}) is still running under ${artifacts} (lock ${path.join(artifacts, ".cohort-run.lock")}); wait for it to end, or stop it with \`npx cohort reap --artifacts ${artifacts}\``,
    );
    expect(fs.readdirSync(artifacts).filter((d) => d.startsWith("locked-"))).toEqual([live.runId]);

    // The runtime dies without releasing the lock; with the direct launcher its members outlive it.
    first!.kill("SIGKILL");
    await firstDone;
    expect(processesOfRun(live.runId).length).toBeGreaterThan(0);
    const next = await cohort(["run", "--spec", writeSpec({ name: "locked", hold: "0s" }), "--artifacts", artifacts, "--lock"]);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stderr).toContain(
      `cohort: run ${live.runId} (runtime pid ${live.pid}) had ended without releasing ${path.join(artifacts, ".cohort-run.lock")}; stopped 2 process group(s) it left`,
    );
    expect(processesOfRun(live.runId)).toEqual([]);
    expect(fs.existsSync(path.join(artifacts, ".cohort-run.lock"))).toBe(false);
  }, 120_000);

  it("reap --artifacts stops the live run the lock names (it completes as interrupted) and releases the lock", async () => {
    const artifacts = tempDir("artifacts");
    const done = cohort(["run", "--spec", writeSpec({ name: "reaped", hold: "60s" }), "--artifacts", artifacts, "--lock"]);
    const live = await lockedRunReady(artifacts);
    const reap = await cohort(["reap", "--artifacts", artifacts]);
    expect(reap.code, reap.stderr).toBe(0);
    expect(reap.stdout).toMatch(new RegExp(`^stopped runtime pid ${live.pid} of run ${live.runId}\\n`));
    const out = await done;
    expect(out.code).toBe(143);
    expect(JSON.parse(out.stdout)).toMatchObject({ runId: live.runId, outcome: "interrupted" });
    expect(processesOfRun(live.runId)).toEqual([]);
    expect(fs.existsSync(path.join(artifacts, ".cohort-run.lock"))).toBe(false);
    expect((await cohort(["reap", "--artifacts", artifacts])).stdout).toBe(`no run holds ${path.join(artifacts, ".cohort-run.lock")}\n`);
  }, 120_000);
});

describe("cohort run --lock: stale and foreign locks", () => {
  const lockOf = (artifacts: string) => path.join(artifacts, ".cohort-run.lock");
  const spec = () => writeSpec({ name: "edge", hold: "0s" });

  it("an unreadable (garbage) lock is taken over with a note on stderr; reap --artifacts removes one", async () => {
    const artifacts = tempDir("artifacts");
    fs.writeFileSync(lockOf(artifacts), "{not json");
    const out = await cohort(["run", "--spec", spec(), "--artifacts", artifacts, "--lock"]);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).toContain(`cohort: ${lockOf(artifacts)} held no readable run lock (not written by a cohort run); took it over`);
    expect(fs.existsSync(lockOf(artifacts))).toBe(false);
    fs.writeFileSync(lockOf(artifacts), "");
    const reap = await cohort(["reap", "--artifacts", artifacts]);
    expect(reap.code, reap.stderr).toBe(0);
    expect(reap.stdout).toBe(`removed ${lockOf(artifacts)}: it held no readable run lock\n`);
    expect(fs.existsSync(lockOf(artifacts))).toBe(false);
  }, 60_000);

  it("a lock naming a live unrelated pid without startTicks is stale: taken over (pid now names another process); reap --artifacts removes it", async () => {
    for (const startTicks of [undefined, 1]) {
      const artifacts = tempDir("artifacts");
      const lock = { runId: "ghost", runDir: path.join(artifacts, "ghost"), pid: 1, ...(startTicks === undefined ? {} : { startTicks }), createdAt: "2026-01-01T00:00:00Z" };
      fs.writeFileSync(lockOf(artifacts), JSON.stringify(lock));
      const reap = await cohort(["reap", "--artifacts", artifacts]);
      expect(reap.code, reap.stderr).toBe(0);
      expect(reap.stdout).toBe(`nothing left running for run ghost; removed ${lockOf(artifacts)} (runtime pid 1 now names another process)\n`);
      expect(fs.existsSync(lockOf(artifacts))).toBe(false);
      fs.writeFileSync(lockOf(artifacts), JSON.stringify(lock));
      const out = await cohort(["run", "--spec", spec(), "--artifacts", artifacts, "--lock"]);
      expect(out.code, out.stderr).toBe(0);
      expect(out.stderr).toContain(
        `cohort: run ghost did not release ${lockOf(artifacts)} and its runtime pid 1 now names another process; took it over, stopped 0 process group(s) it left`,
      );
      expect(out.stderr).not.toContain("had ended");
      expect(fs.readdirSync(artifacts).filter((f) => f.includes("stale") || f.includes(".tmp-"))).toEqual([]);
    }
  }, 60_000);

  it("a directory at the lock path is refused clearly and nothing is left behind", async () => {
    const artifacts = tempDir("artifacts");
    fs.mkdirSync(lockOf(artifacts));
    const out = await cohort(["run", "--spec", spec(), "--artifacts", artifacts, "--lock"]);
    expect(out.code).toBe(1);
    expect(out.stderr.trimEnd().split("\n").at(-1)).toBe(`cohort: ${lockOf(artifacts)} is a directory, not a run lock; remove it`);
    expect(fs.readdirSync(artifacts)).toEqual([".cohort-run.lock"]);
    expect(fs.readdirSync(lockOf(artifacts))).toEqual([]);
  }, 60_000);
});

describe("cohort run --watch-pid", () => {
  it("ends the run as interrupted (SIGHUP, exit 129), members stopped, when the watched process is gone", async () => {
    const artifacts = tempDir("artifacts");
    const parent = spawn("sleep", ["1000"], { stdio: "ignore" });
    const done = cohort(["run", "--spec", writeSpec({ name: "watched", hold: "60s" }), "--artifacts", artifacts, "--lock", "--watch-pid", String(parent.pid)]);
    const live = await lockedRunReady(artifacts);
    const killedAt = Date.now();
    parent.kill("SIGKILL");
    const out = await done;
    const ms = Date.now() - killedAt;
    console.log(`[cli-lock] watched process SIGKILLed -> runtime exited in ${ms} ms`);
    expect(out.code).toBe(129);
    expect(JSON.parse(out.stdout)).toMatchObject({ runId: live.runId, outcome: "interrupted" });
    expect(out.stderr).toContain(`cohort: process ${parent.pid} (--watch-pid) is gone: stopping members`);
    expect(ms).toBeLessThan(2_000 + 3_000);
    expect(processesOfRun(live.runId)).toEqual([]);
    const completion = JSON.parse(fs.readFileSync(path.join(live.runDir, "completion.json"), "utf8")) as { outcome: string };
    expect(completion.outcome).toBe("interrupted");
  }, 120_000);

  it("refuses a pid that is not a number", async () => {
    const out = await cohort(["run", "--spec", writeSpec({ name: "bad" }), "--artifacts", tempDir("artifacts"), "--watch-pid", "x"]);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain('cohort: run: --watch-pid expects a process id; got "x"');
  });

  it("refuses pids that are not plain decimal integers, or exceed pid_max, before anything is created", async () => {
    const pidMax = Number(fs.readFileSync("/proc/sys/kernel/pid_max", "utf8"));
    for (const raw of ["0x10", "1e3", " 12", "12 ", "+12", "012", "0", String(pidMax + 1)]) {
      const artifacts = path.join(tempDir("artifacts"), "root");
      const out = await cohort(["run", "--spec", writeSpec({ name: "bad" }), "--artifacts", artifacts, "--lock", "--watch-pid", raw]);
      expect(out.code, raw).toBe(2);
      expect(out.stderr, raw).toMatch(/cohort: run: --watch-pid (expects a process id; got|\d+ exceeds the largest process id)/);
      expect(fs.existsSync(artifacts), raw).toBe(false);
    }
  });
});

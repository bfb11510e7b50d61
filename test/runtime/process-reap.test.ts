/**
 * `cohort reap` (runtime/backends/process/reap.ts) against a manifest.json nobody vouches for, and the
 * whole-run cgroup at teardown and in reap: with a REAL victim cgroup and real processes, so the tests
 * prove what the kernel does, not what a mock says. They need root and a writable cgroup2 or v1 freezer
 * hierarchy; they are skipped (with the reason printed) otherwise.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { COHORT_CGROUP_DIR, type CgroupHierarchy } from "../../runtime/backends/process/cgroup";
import { reapRun } from "../../runtime/backends/process/reap";
import { showLedger } from "../../runtime/core/ledger/show";
import { verifyLedger } from "../../runtime/core/ledger/verify";
import { httpListener, runCohort, tempDir, usableCgroupHierarchy } from "./process-helpers";

const sh = (script: string) => ["sh", "-c", script];

function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Pids whose command line contains `marker`, zombies excluded. */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, "utf8").includes(marker) && alive(Number(name))) out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      cleanup();
    } catch {
      // best effort
    }
  }
});

let counter = 0;
describe.each(["v2", "freezer"] as const)("reap and the whole run cgroup (%s)", (kind) => {
  const hierarchy = usableCgroupHierarchy(kind);
  const skip = typeof hierarchy === "string";
  if (skip) console.log(`skipping the ${kind} reap tests: ${hierarchy}`);

  it.skipIf(skip)('a manifest.json runId "../<victim>" is refused before anything is signalled; the victim cgroup and its process survive', async () => {
    const h = hierarchy as CgroupHierarchy;
    const name = `cohort-test-victim-${process.pid}-${counter++}`;
    const victim = path.join(h.mount, name);
    fs.mkdirSync(path.join(victim, "m0"), { recursive: true });
    const sleeper: ChildProcess = spawn("sleep", ["400"], { stdio: "ignore" });
    cleanups.push(() => {
      sleeper.kill("SIGKILL");
      for (let i = 0; i < 200 && fs.existsSync(path.join(victim, "m0")); i++) {
        try {
          fs.rmdirSync(path.join(victim, "m0"));
        } catch {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
        }
      }
      fs.rmdirSync(victim);
    });
    fs.writeFileSync(path.join(victim, "m0", "cgroup.procs"), String(sleeper.pid));
    // `cohort/` exists, as it does while any run is live (else `cohort/..` would not resolve either way).
    const cohort = path.join(h.mount, COHORT_CGROUP_DIR);
    const madeCohort = !fs.existsSync(cohort);
    if (madeCohort) fs.mkdirSync(cohort);
    cleanups.push(() => madeCohort && fs.rmdirSync(cohort));
    const evil = tempDir("evil");
    fs.writeFileSync(path.join(evil, "manifest.json"), JSON.stringify({ runId: `../${name}` }));
    await expect(reapRun(evil, { graceMs: 200 })).rejects.toThrow(`manifest.json runId "../${name}" is not a run id`);
    for (const runId of ["..", ".", "a/../../x", `x/../../${name}`]) {
      fs.writeFileSync(path.join(evil, "manifest.json"), JSON.stringify({ runId }));
      await expect(reapRun(evil, { graceMs: 200 })).rejects.toThrow(`manifest.json runId ${JSON.stringify(runId)} is not a run id`);
    }
    expect(alive(sleeper.pid!)).toBe(true);
    expect(fs.readFileSync(path.join(victim, "m0", "cgroup.procs"), "utf8").trim()).toBe(String(sleeper.pid));
  });

  it.skipIf(skip)("a member's process moved into the run-level cgroup and one in a sibling cgroup it made are gone after a succeeded run; no fake member", async () => {
    const h = hierarchy as CgroupHierarchy;
    const tag1 = `1000.${process.pid}${counter++}1`;
    const tag2 = `1000.${process.pid}${counter++}2`;
    const R = `${h.mount}/${COHORT_CGROUP_DIR}/$COHORT_RUN_ID`;
    const script = `setsid env -i sleep ${tag1} & echo $! > ${R}/cgroup.procs; mkdir ${R}/zz; setsid env -i sleep ${tag2} & echo $! > ${R}/zz/cgroup.procs; exec "$0" "$@"`;
    const { result, runId, runDir, records } = await runCohort(
      [{ name: "web", app: { command: sh(script).concat(httpListener()) }, readiness: { http: { path: "/" } } }],
      {},
      { cgroup: kind },
    );
    expect(result.outcome).toBe("succeeded");
    expect(processesWith(tag1)).toEqual([]);
    expect(processesWith(tag2)).toEqual([]);
    expect(fs.existsSync(path.join(h.mount, COHORT_CGROUP_DIR, runId))).toBe(false);
    const killed = records.filter((r) => r.kind === "member-killed");
    expect(killed.map((r) => r.member).filter((m) => m !== undefined && m !== "web-0")).toEqual([]); // no fake member `zz`
    const runScope = killed.filter((r) => r.scope === "run");
    expect(runScope.map((r) => [r.cgroup, r.processes]).sort()).toEqual([
      ["", 1],
      ["zz", 1],
    ]);
    // The run-scope records (no `member`) verify, and no member `zz` shows up in the timeline.
    expect(await verifyLedger(runDir)).toMatchObject({ ok: true, outcome: "succeeded" });
    expect(await showLedger(runDir)).not.toMatch(/\bzz\b/);
  });
  it.skipIf(skip)("reap after a SIGKILLed runtime stops a process in the run-level cgroup and one in a sibling cgroup; the sibling is no member", async () => {
    const h = hierarchy as CgroupHierarchy;
    const bundle = path.resolve("dist/cohort.cjs");
    expect(fs.existsSync(bundle), "npm run -s build first").toBe(true);
    const tag1 = `1000.${process.pid}${counter++}3`;
    const tag2 = `1000.${process.pid}${counter++}4`;
    const R = `${h.mount}/${COHORT_CGROUP_DIR}/$COHORT_RUN_ID`;
    const artifacts = tempDir("artifacts");
    const spec = path.join(tempDir("spec"), "cohort.json");
    const script = `setsid env -i sleep ${tag1} & echo $! > ${R}/cgroup.procs; mkdir ${R}/zz; setsid env -i sleep ${tag2} & echo $! > ${R}/zz/cgroup.procs; echo ready; exec sleep 1000`;
    fs.writeFileSync(
      spec,
      JSON.stringify({
        apiVersion: "cohort-lab/v1",
        kind: "Cohort",
        name: "escape",
        hold: "60s",
        stopGracePeriod: "2s",
        roles: [{ name: "a", app: { command: sh(script), port: false }, readiness: { log: { pattern: "^ready$" } } }],
      }),
    );
    // launcher=direct: the member is the runtime's own child, so a SIGKILLed runtime leaves it behind.
    const run = spawn(process.execPath, [bundle, "run", "--spec", spec, "--artifacts", artifacts, "--backend-option", "launcher=direct", "--backend-option", `cgroup=${kind}`], {
      stdio: "ignore",
    });
    cleanups.push(() => run.kill("SIGKILL"));
    let runDir = "";
    for (let i = 0; i < 400; i++) {
      const dirs = fs.existsSync(artifacts) ? fs.readdirSync(artifacts).filter((d) => !d.startsWith(".")) : [];
      if (dirs.length === 1) {
        runDir = path.join(artifacts, dirs[0]!);
        const records = path.join(runDir, "records.ndjson");
        if (fs.existsSync(records) && fs.readFileSync(records, "utf8").includes('"kind":"hold-started"')) break;
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    run.kill("SIGKILL");
    await new Promise((resolve) => run.once("exit", resolve));
    const runId = path.basename(runDir);
    const runCgroup = path.join(h.mount, COHORT_CGROUP_DIR, runId);
    expect(processesWith(tag1)).toHaveLength(1);
    expect(processesWith(tag2)).toHaveLength(1);
    const reap = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawn(process.execPath, [bundle, "reap", runDir, "--grace", "500"], { stdio: ["ignore", "pipe", "inherit"] });
      let stdout = "";
      child.stdout.on("data", (chunk) => (stdout += chunk));
      child.on("close", (code) => resolve({ code, stdout }));
    });
    expect(reap.code).toBe(0);
    const lines = reap.stdout.split("\n").filter((line) => line.includes("(cgroup "));
    expect(lines.sort()).toEqual([`stopped member ? (cgroup ${runCgroup}, 1 process(es))`, `stopped member ? (cgroup ${runCgroup}/zz, 1 process(es))`]);
    expect(reap.stdout).not.toMatch(/member zz/);
    expect(processesWith(tag1)).toEqual([]);
    expect(processesWith(tag2)).toEqual([]);
    expect(fs.existsSync(runCgroup)).toBe(false);
  });
});

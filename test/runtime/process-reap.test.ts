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
import { cgroupHierarchies, COHORT_CGROUP_DIR, type CgroupHierarchy, type CgroupKind } from "../../runtime/backends/process/cgroup";
import { reapRun } from "../../runtime/backends/process/reap";
import { httpListener, runCohort, tempDir } from "./process-helpers";

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

function usable(kind: CgroupKind): CgroupHierarchy | string {
  if (process.platform !== "linux") return `cgroups are Linux only (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "not root: cannot create cgroups";
  const hierarchy = cgroupHierarchies().find((h) => h.kind === kind);
  if (hierarchy === undefined) return `no writable ${kind} hierarchy is mounted`;
  const probe = path.join(hierarchy.mount, `cohort-test-probe-${process.pid}`);
  try {
    fs.mkdirSync(probe);
    fs.rmdirSync(probe);
  } catch (error) {
    return `cannot create a cgroup in ${hierarchy.mount}: ${(error as Error).message}`;
  }
  return hierarchy;
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
  const hierarchy = usable(kind);
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
    const { result, runId, records } = await runCohort(
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
  });
});

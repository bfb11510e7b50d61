/**
 * Issue #12, finding 5, with real child processes and the real scheduler, process backend and ledger writer:
 * members run in cgroups (cgroup2 and the v1 freezer), so a child that escapes its session, group and
 * environment (`setsid env -i`) does not survive teardown, and every kill is in the ledger (`member-killed`);
 * where no cgroup can be made, one `backend-warning` record and process groups only. The cgroup tests need
 * root and a writable cgroupfs; they are skipped (with the reason printed) otherwise.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { cgroupHierarchies, COHORT_CGROUP_DIR } from "../../runtime/backends/process/cgroup";
import { liveMemberCgroups } from "../../runtime/backends/process/index";
import { httpListener, runCohort, tempDir, usableCgroupHierarchy } from "./process-helpers";

const sh = (script: string) => ["sh", "-c", script];

/** Pids whose command line contains `marker` (from /proc/<pid>/cmdline), zombies excluded. */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!fs.readFileSync(`/proc/${name}/cmdline`, "utf8").includes(marker)) continue;
      if (/^\S+ \(.*\) Z /.test(fs.readFileSync(`/proc/${name}/stat`, "utf8"))) continue;
      out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

/** Cgroup directories of run `runId` left under any hierarchy. */
function leftoverCgroups(runId: string): string[] {
  return cgroupHierarchies()
    .map((h) => path.join(h.mount, COHORT_CGROUP_DIR, runId))
    .filter((dir) => fs.existsSync(dir));
}

let counter = 0;
const marker = () => `${process.pid}${String(counter++).padStart(3, "0")}`;
describe.each(["v2", "freezer"] as const)("member cgroups (%s)", (kind) => {
  const usable = usableCgroupHierarchy(kind);
  const skip = typeof usable === "string" ? usable : null;
  if (skip !== null) console.log(`skipping the ${kind} cgroup tests: ${skip}`);

  it.skipIf(skip !== null).each(["native", "perl", "direct"] as const)(
    "launcher %s: a child started with `setsid env -i` does not survive a succeeded run; member-killed counts it",
    async (launcher) => {
      const tag = `1000.${marker()}`;
      const { result, runId, records } = await runCohort(
        [{ name: "web", app: { command: sh(`setsid env -i sleep ${tag} & exec "$0" "$@"`).concat(httpListener()) }, readiness: { http: { path: "/" } } }],
        {},
        { launcher, cgroup: kind },
      );
      expect(result.outcome).toBe("succeeded");
      const started = records.find((r) => r.kind === "member-started")!;
      expect(started.cgroup).toMatch(new RegExp(`/${COHORT_CGROUP_DIR}/${runId}/web-0$`));
      console.log(`cgroup ${kind}, launcher ${launcher}: cgroup setup ${String(started.cgroupMs)} ms`);
      expect(processesWith(tag)).toEqual([]);
      const killed = records.filter((r) => r.kind === "member-killed");
      expect(killed.length).toBeGreaterThanOrEqual(1);
      expect(killed[0]).toMatchObject({ member: "web-0", via: "cgroup" });
      expect(killed.reduce((sum, r) => sum + (r.outsideGroup as number), 0)).toBeGreaterThanOrEqual(1);
      expect(leftoverCgroups(runId)).toEqual([]);
      expect(liveMemberCgroups()).toEqual([]);
    },
  );

  it.skipIf(skip !== null)("a member that ignores SIGTERM: member-killed with SIGKILL and its process count after the grace period", async () => {
    const { result, runId, records } = await runCohort(
      [{ name: "stubborn", app: { command: sh('trap "" TERM; echo up; while :; do sleep 1; done'), port: false }, readiness: { log: { pattern: "^up$" } } }],
      { stopGracePeriod: "300ms" },
      { cgroup: kind },
    );
    expect(result.outcome).toBe("succeeded");
    const stopping = records.find((r) => r.kind === "member-stopping")!;
    const killed = records.filter((r) => r.kind === "member-killed");
    expect(killed).toHaveLength(1);
    expect(killed[0]).toMatchObject({ member: "stubborn-0", signal: "SIGKILL", via: "cgroup", outsideGroup: 0 });
    expect(killed[0]!.processes).toBeGreaterThanOrEqual(1); // sh, and its sleep unless between two
    expect(killed[0]!.elapsedMs - stopping.elapsedMs).toBeGreaterThanOrEqual(290);
    expect(records.find((r) => r.kind === "member-exited")).toMatchObject({ signal: "SIGKILL" });
    expect(leftoverCgroups(runId)).toEqual([]);
  });
});

describe.runIf(process.platform === "linux")("no cgroups available (an empty mounts table)", () => {
  it("one backend-warning record for the run, members in process groups as before, the SIGKILL still recorded", async () => {
    const mounts = path.join(tempDir("mounts"), "mounts");
    fs.writeFileSync(mounts, "");
    const { result, runId, records } = await runCohort(
      [{ name: "stubborn", replicas: 2, app: { command: sh('trap "" TERM; echo up; while :; do sleep 1; done'), port: false }, readiness: { log: { pattern: "^up$" } } }],
      { stopGracePeriod: "300ms" },
      { mountsFile: mounts },
    );
    expect(result.outcome).toBe("succeeded");
    const warnings = records.filter((r) => r.kind === "backend-warning");
    expect(warnings).toEqual([
      expect.objectContaining({
        backend: "process",
        topic: "cgroup",
        message: expect.stringMatching(/^members run without cgroups, in process groups only: no writable cgroup2 or cgroup v1 freezer hierarchy is mounted;/),
      }),
    ]);
    for (const started of records.filter((r) => r.kind === "member-started")) expect(started.cgroup).toBeUndefined();
    const killed = records.filter((r) => r.kind === "member-killed").map((r) => [r.member, r.signal, r.via]);
    expect(killed.sort()).toEqual([
      ["stubborn-0", "SIGKILL", "process-group"],
      ["stubborn-1", "SIGKILL", "process-group"],
    ]);
    expect(leftoverCgroups(runId)).toEqual([]);
  });
});

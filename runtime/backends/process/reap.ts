/**
 * `cohort reap <runDir>`: stops whatever a run of the process backend left running, e.g. after its
 * runtime was SIGKILLed (OOM, `kill -9`, a crashed CI runner), so `pulumi destroy` leaves nothing behind.
 *
 * Only processes PROVEN to belong to the run are signalled, never a recycled pid:
 * - the runtime, when `/proc/<pid>/stat`'s start time equals `runtimeStartTicks` in the run's
 *   `run-started` record (pid + start time identify a process uniquely);
 * - member process groups: every group (from `member-started` records, plus a scan of all processes)
 *   that contains a process whose `/proc/<pid>/environ` holds `COHORT_RUN_ID=<runId>`. A group with
 *   such a process cannot be a recycled pgid (the kernel does not reuse a pid while its group lives).
 * - the run's cgroups, `<hierarchy>/cohort/<runId>/<member>` in every cgroup2 and v1 freezer hierarchy
 *   (./cgroup.ts): whatever is in them is the run's, even a process that dropped its environment
 *   (`env -i`) and left its process group (`setsid`). SIGTERM to each, SIGKILL to the cgroup after the
 *   grace, then the cgroup directories are removed.
 * Idempotent: a second reap finds nothing. Linux only (/proc).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { CgroupWatcher, cgroupProcs, killCgroup, removeCohortDirIfEmpty, removeTree, runCgroupDir, runCgroups, signalCgroup } from "./cgroup";
import { HAS_PROC, GroupWatcher, groupMembers, listProcesses, readProcEnviron, readProcStat, signalGroup, type ProcStat } from "./status";

/** What {@link reapRun} did. */
export interface ReapReport {
  readonly runId: string;
  /** The runtime's pid when it was alive and stopped. */
  readonly runtime: number | null;
  /** Member groups stopped: member id (or `?` when not in the ledger) and pgid, with their process count. */
  readonly groups: readonly { readonly member: string; readonly pgid: number; readonly processes: number }[];
  /** Member cgroups found and removed: member id, directory, and the processes that were still in it. */
  readonly cgroups: readonly { readonly member: string; readonly dir: string; readonly processes: number }[];
}

/** Options of {@link reapRun}. */
export interface ReapOptions {
  /** SIGTERM -> SIGKILL grace, in ms. @default 2000 */
  readonly graceMs?: number;
  /** The mounts table cgroup hierarchies are looked up in. @default "/proc/self/mounts" */
  readonly mountsFile?: string;
}

function readRecords(runDir: string): Array<Record<string, unknown>> {
  let text: string;
  try {
    text = fs.readFileSync(path.join(runDir, "records.ndjson"), "utf8");
  } catch {
    return [];
  }
  const records: Array<Record<string, unknown>> = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    try {
      records.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a torn final line: reap does not need it (and never repairs the ledger)
    }
  }
  return records;
}

async function stopGroupNow(pgid: number, graceMs: number, watcher: GroupWatcher): Promise<void> {
  if (!signalGroup(pgid, "SIGTERM")) return;
  const gone = watcher.waitEmpty(pgid).then(() => true);
  let timer: NodeJS.Timeout | undefined;
  const done = await Promise.race([gone, new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)))]);
  clearTimeout(timer);
  if (done) return;
  signalGroup(pgid, "SIGKILL");
  await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, 5_000))]);
}

/**
 * Reaps run `runDir` (see the module doc).
 *
 * @throws {Error} when not on Linux, or when `runDir` has no readable manifest.json
 */
export async function reapRun(runDir: string, options: ReapOptions = {}): Promise<ReapReport> {
  if (!HAS_PROC) throw new Error("reap needs /proc (Linux); on this platform stop the run's process groups by hand");
  const graceMs = options.graceMs ?? 2_000;
  const dir = path.resolve(runDir);
  let manifest: { runId?: unknown; runtimePid?: unknown };
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(dir, "manifest.json"), "utf8")) as typeof manifest;
  } catch (error) {
    throw new Error(`${dir} holds no readable manifest.json: ${(error as Error).message}`);
  }
  if (typeof manifest.runId !== "string" || manifest.runId === "") throw new Error(`${dir}/manifest.json has no runId`);
  const runId = manifest.runId;
  const records = readRecords(dir);

  // 1. The runtime (so it starts nothing more). SIGTERM lets it tear down and complete its ledger.
  let runtime: number | null = null;
  const started = records.find((record) => record.kind === "run-started");
  const runtimePid = typeof manifest.runtimePid === "number" ? manifest.runtimePid : null;
  const startTicks = typeof started?.runtimeStartTicks === "number" ? started.runtimeStartTicks : null;
  if (runtimePid !== null && startTicks !== null && runtimePid !== process.pid) {
    const stat = readProcStat(runtimePid);
    if (stat !== undefined && stat.state !== "Z" && stat.startTicks === startTicks) {
      runtime = runtimePid;
      process.kill(runtimePid, "SIGTERM");
      const deadline = Date.now() + graceMs + 10_000;
      while (Date.now() < deadline && readProcStat(runtimePid)?.startTicks === startTicks && readProcStat(runtimePid)?.state !== "Z") {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const still = readProcStat(runtimePid);
      if (still !== undefined && still.startTicks === startTicks && still.state !== "Z") process.kill(runtimePid, "SIGKILL");
    }
  }

  // 2. Member groups proven to be the run's.
  const memberOf = new Map<number, string>();
  for (const record of records) {
    if (record.kind === "member-started" && typeof record.pgid === "number" && typeof record.member === "string") memberOf.set(record.pgid, record.member);
  }
  const stopped = await stopRunProcesses(runId, graceMs, memberOf);
  const cgroups = await stopRunCgroups(runId, graceMs, options.mountsFile);
  return { runId, runtime, groups: stopped, cgroups };
}

/**
 * Stops everything in run `runId`'s cgroups (SIGTERM to each process, SIGKILL to the cgroup after
 * `graceMs`) and removes them, with the run's directory (and `cohort/` when no other run uses it).
 *
 * @returns the member cgroups found, with the number of processes that were in each (0: it was empty)
 * @throws {Error} when a cgroup control file cannot be written (naming it)
 */
export async function stopRunCgroups(runId: string, graceMs: number, mountsFile?: string): Promise<Array<{ member: string; dir: string; processes: number }>> {
  const found = runCgroups(runId, mountsFile);
  const watcher = new CgroupWatcher();
  const out: Array<{ member: string; dir: string; processes: number }> = [];
  await Promise.all(
    found.map(async ({ hierarchy, member, dir }) => {
      const exclude = new Set([process.pid]);
      const processes = cgroupProcs(dir).filter((pid) => !exclude.has(pid)).length;
      if (processes > 0) {
        signalCgroup(dir, "SIGTERM", (pid) => exclude.has(pid));
        let timer: NodeJS.Timeout | undefined;
        const empty = watcher.waitEmpty(hierarchy.kind, dir).then(() => true);
        const done = await Promise.race([empty, new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)))]);
        clearTimeout(timer);
        if (!done) {
          killCgroup(hierarchy.kind, dir, exclude);
          await Promise.race([empty, new Promise((resolve) => setTimeout(resolve, 5_000))]);
        }
      }
      removeTree(dir);
      out.push({ member, dir, processes });
    }),
  );
  for (const { hierarchy } of found) {
    removeTree(runCgroupDir(hierarchy, runId));
    removeCohortDirIfEmpty(hierarchy);
  }
  out.sort((a, b) => a.member.localeCompare(b.member) || a.dir.localeCompare(b.dir));
  return out;
}

/**
 * Stops every process group that holds a live process whose `/proc/<pid>/environ` carries
 * `COHORT_RUN_ID=<runId>` (SIGTERM to the group, SIGKILL after `graceMs`), this process excepted.
 * This reaches what group signals cannot: a member's descendant that left its group (`setsid`).
 * Used by {@link reapRun} and by the process backend's `close()` at the end of every run.
 *
 * @param memberOf pgid -> member name, for the report (`"?"` when unknown)
 * @returns the groups stopped, sorted by member then pgid
 */
export async function stopRunProcesses(
  runId: string,
  graceMs: number,
  memberOf: ReadonlyMap<number, string> = new Map(),
): Promise<Array<{ member: string; pgid: number; processes: number }>> {
  if (!HAS_PROC) return [];
  const watcher = new GroupWatcher();
  const processes = listProcesses();
  const ours = (p: ProcStat): boolean => readProcEnviron(p.pid)?.COHORT_RUN_ID === runId;
  const groups = new Map<number, number>();
  for (const p of processes) {
    if (p.state === "Z" || p.pid === process.pid) continue;
    if (ours(p)) groups.set(p.pgid, (groups.get(p.pgid) ?? 0) + 1);
  }
  const stopped: Array<{ member: string; pgid: number; processes: number }> = [];
  await Promise.all(
    [...groups].map(async ([pgid]) => {
      const count = groupMembers(pgid, processes).length;
      await stopGroupNow(pgid, graceMs, watcher);
      stopped.push({ member: memberOf.get(pgid) ?? "?", pgid, processes: count });
    }),
  );
  stopped.sort((a, b) => a.member.localeCompare(b.member) || a.pgid - b.pgid);
  return stopped;
}

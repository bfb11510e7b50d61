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
 * - the run's cgroup, `<hierarchy>/cohort/<runId>` with ALL its descendants, in every cgroup2 and v1
 *   freezer hierarchy (./cgroup.ts): whatever is in it is the run's, even a process that dropped its
 *   environment (`env -i`) and left its process group (`setsid`), one a member (as root) moved into the run's
 *   own directory, or one in a sibling cgroup a member created (`cohort/<runId>/zz`). SIGTERM to each, SIGKILL
 *   to the whole run cgroup after the grace, then the directories are removed, deepest first. A directory is
 *   reported as a member's only when its name is a member id of the run's roster (`run-started` roles and
 *   replicas: `<role>-<i>`); anything else is reported as member `?` with `scope: "run"`.
 * The run id comes from `manifest.json`, a file anyone may write: it must be a run id (runtime/core/run-id.ts),
 * and every cgroup directory must resolve inside `<hierarchy>/cohort/`, else reap refuses before signalling
 * anything (`manifest.json runId "../victim" is not a run id`).
 * Idempotent: a second reap finds nothing. Linux only (/proc).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { MAX_TIMER_MS } from "../../core/duration";
import { isRunId } from "../../core/run-id";
import { CgroupWatcher, cgroupOwner, cgroupProcs, killCgroup, removeCohortDirIfEmpty, removeTreeRetrying, runCgroupTree, runCgroups, signalCgroup } from "./cgroup";
import { KILL_WAIT_MS } from "./stop";
import { HAS_PROC, GroupWatcher, groupMembers, listProcesses, readProcEnviron, readProcStat, signalGroup, type ProcStat } from "./status";

/** The longest grace {@link reapRun} takes, in ms: the grace is a timer's delay ({@link MAX_TIMER_MS}). */
export const MAX_GRACE_MS = MAX_TIMER_MS;

/** What {@link reapRun} did. */
export interface ReapReport {
  readonly runId: string;
  /** The runtime's pid when it was alive and stopped. */
  readonly runtime: number | null;
  /** Member groups stopped: member id (or `?` when not in the ledger) and pgid, with their process count. */
  readonly groups: readonly { readonly member: string; readonly pgid: number; readonly processes: number }[];
  /**
   * Cgroups found and removed (see {@link stopRunCgroups}): per member directory (`scope: "member"`, member id,
   * its processes and its descendants'), and per other directory of the run's tree that held processes
   * (`scope: "run"`, member `?`: the run's own directory, a sibling cgroup a member created).
   */
  readonly cgroups: readonly { readonly member: string; readonly scope: "member" | "run"; readonly dir: string; readonly processes: number }[];
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
  if (await watcher.waitEmpty(pgid, AbortSignal.timeout(graceMs))) return;
  signalGroup(pgid, "SIGKILL");
  await watcher.waitEmpty(pgid, AbortSignal.timeout(KILL_WAIT_MS));
}

/**
 * Reaps run `runDir` (see the module doc).
 *
 * @throws {Error} when not on Linux, when `options.graceMs` is not a whole number from 0 to {@link MAX_GRACE_MS}, or
 *   when `runDir` has no readable manifest.json
 */
export async function reapRun(runDir: string, options: ReapOptions = {}): Promise<ReapReport> {
  if (!HAS_PROC) throw new Error("reap needs /proc (Linux); on this platform stop the run's process groups by hand");
  const graceMs = options.graceMs ?? 2_000;
  if (!Number.isInteger(graceMs) || graceMs < 0 || graceMs > MAX_GRACE_MS) {
    throw new Error(`reap: options.graceMs must be a whole number of ms from 0 to ${MAX_GRACE_MS}; got ${String(graceMs)}`);
  }
  const dir = path.resolve(runDir);
  let manifest: { runId?: unknown; runtimePid?: unknown };
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(dir, "manifest.json"), "utf8")) as typeof manifest;
  } catch (error) {
    throw new Error(`${dir} holds no readable manifest.json: ${(error as Error).message}`, { cause: error });
  }
  if (typeof manifest.runId !== "string" || manifest.runId === "") throw new Error(`${dir}/manifest.json has no runId`);
  if (!isRunId(manifest.runId)) {
    throw new Error(
      `${dir}/manifest.json runId ${JSON.stringify(manifest.runId)} is not a run id (a Kubernetes label value: letters, digits, "-", "_", ".", at most 63 characters); refusing to reap`,
    );
  }
  const runId = manifest.runId;
  const records = readRecords(dir);
  const found = runCgroups(runId, options.mountsFile); // throws before any signal when a directory resolves outside cohort/

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
  const cgroups = found.length === 0 ? [] : await stopRunCgroups(runId, graceMs, options.mountsFile, rosterOf(started));
  return { runId, runtime, groups: stopped, cgroups };
}

/**
 * Member ids of a `run-started` record: `<role>-<i>` for `i < replicas` of each `roles[]` entry (runtime/core/expand.ts).
 *
 * @returns empty when there is no such record (then no cgroup is attributed to a member)
 */
export function rosterOf(started: Record<string, unknown> | undefined): Set<string> {
  const roster = new Set<string>();
  const roles = started?.roles;
  if (!Array.isArray(roles)) return roster;
  for (const role of roles as Array<{ name?: unknown; replicas?: unknown }>) {
    if (typeof role?.name !== "string" || typeof role.replicas !== "number") continue;
    for (let i = 0; i < role.replicas && i < 100_000; i++) roster.add(`${role.name}-${i}`);
  }
  return roster;
}

/**
 * Stops everything in run `runId`'s cgroup trees (`<hierarchy>/cohort/<runId>` and all descendants): SIGTERM
 * to each process, SIGKILL to the whole run cgroup after `graceMs` (./cgroup.ts killCgroup on the run's
 * directory: cgroup2 `cgroup.kill`, or freezing the run's directory, which freezes its descendants), then
 * removes the directories deepest first (and `cohort/` when no other run uses it).
 *
 * @param roster - member ids of the run; a directory `<member>` (or below it) is reported as that member's,
 *   any other directory (the run's own, a sibling a member created) as member `?` with `scope: "run"`
 * @returns one entry per member directory (also when empty) and per other directory that held processes
 * @throws {Error} when `runId` is not a run id, a directory resolves outside `<hierarchy>/cohort/`, or a
 *   cgroup control file cannot be written (naming it)
 */
export async function stopRunCgroups(
  runId: string,
  graceMs: number,
  mountsFile?: string,
  roster: ReadonlySet<string> = new Set(),
): Promise<Array<{ member: string; scope: "member" | "run"; dir: string; processes: number }>> {
  const found = runCgroups(runId, mountsFile);
  const watcher = new CgroupWatcher();
  const out: Array<{ member: string; scope: "member" | "run"; dir: string; processes: number }> = [];
  const exclude = new Set([process.pid]);
  await Promise.all(
    found.map(async ({ hierarchy, dir }) => {
      const tree = runCgroupTree(dir);
      // Member entries: one per member directory, its descendants' processes included; others per directory.
      const entries = new Map<string, { member: string; scope: "member" | "run"; dir: string; processes: number }>();
      for (const entry of tree) {
        const owner = cgroupOwner(entry.rel, roster);
        const count = entry.pids.filter((pid) => !exclude.has(pid)).length;
        if ("member" in owner) {
          const key = `m:${owner.member}`;
          const e = entries.get(key) ?? { member: owner.member, scope: "member" as const, dir: `${dir}/${owner.member}`, processes: 0 };
          e.processes += count;
          entries.set(key, e);
        } else if (count > 0) {
          entries.set(`r:${entry.rel}`, { member: "?", scope: "run", dir: entry.dir, processes: count });
        }
      }
      const processes = cgroupProcs(dir).filter((pid) => !exclude.has(pid)).length;
      if (processes > 0) {
        signalCgroup(dir, "SIGTERM", (pid) => exclude.has(pid));
        if (!(await watcher.waitEmpty(hierarchy.kind, dir, AbortSignal.timeout(graceMs)))) {
          killCgroup(hierarchy.kind, dir, exclude);
          await watcher.waitEmpty(hierarchy.kind, dir, AbortSignal.timeout(KILL_WAIT_MS));
        }
      }
      await removeTreeRetrying(dir, 50);
      removeCohortDirIfEmpty(hierarchy);
      out.push(...entries.values());
    }),
  );
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

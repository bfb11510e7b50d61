/**
 * Stopping a member's whole process tree: SIGTERM to its process group, SIGKILL after the grace period,
 * done when the leader has exited AND no process of the group is left (members such as OpenClaw gateways
 * run worker children; they must die too).
 *
 * With a member cgroup (./cgroup.ts), processes that left the group on purpose (setsid/setpgid, e.g.
 * `setsid env -i sleep 1000 &`) are reached too: they get SIGTERM with the group (one kill(2) each: a
 * process of the group is never signalled twice), the stop also waits until the cgroup is empty, and at the
 * grace deadline every process in the cgroup is SIGKILLed (atomically: `cgroup.kill`, or freeze/kill/thaw).
 * Without one, such processes are out of reach of group signals (the backend's close() still stops those
 * that kept `COHORT_RUN_ID` in their environment, ./reap.ts).
 *
 * Every signal beyond the plain SIGTERM to the group is reported through `onKill` (the backend records it
 * as `member-killed`): the SIGKILL at the grace deadline (or at once, grace 0) with the number of processes
 * it reached, and the SIGTERM to processes outside the group.
 */
import { cgroupEmpty, cgroupProcs, killCgroup, signalCgroup, type CgroupKind, type CgroupWatcher } from "./cgroup";
import { GroupWatcher, groupAlive, groupMembers, readProcStat, signalGroup } from "./status";

/** How long to wait after SIGKILL before declaring the group unkillable. */
export const KILL_WAIT_MS = 5_000;

/** What one round of signals reached (see {@link StoppableGroup.onKill}). */
export interface KillReport {
  readonly signal: "SIGTERM" | "SIGKILL";
  /** Processes signalled (alive at that moment). */
  readonly processes: number;
  /** Of them, processes outside the member's process group (reachable through its cgroup only). */
  readonly outsideGroup: number;
  /** `cgroup` or `process-group`: what the kill went through. */
  readonly via: "cgroup" | "process-group";
}

/** One member's process group, as the stopper sees it. */
export interface StoppableGroup {
  readonly member: string;
  readonly pgid: number;
  /** Resolves when the leader (our child) has exited. */
  readonly leaderExited: Promise<void>;
  /** The member's cgroup, when it has one. */
  readonly cgroup?: { readonly kind: CgroupKind; readonly dir: string; readonly watcher: CgroupWatcher };
  /** Pids never to signal through the cgroup (the runtime, the launcher). */
  readonly exclude?: ReadonlySet<number>;
  /** Called for every signal round beyond the SIGTERM to the group (module doc). */
  readonly onKill?: (report: KillReport) => void;
}

/**
 * Stops group `group`: SIGTERM, then SIGKILL after `graceMs` (0: SIGKILL at once).
 *
 * @returns when the leader has exited and the group (and the cgroup, if any) is empty
 * @throws {Error} when the group or cgroup is still alive {@link KILL_WAIT_MS} after SIGKILL, or a cgroup
 *   control file cannot be written (naming it)
 */
export async function stopGroup(group: StoppableGroup, graceMs: number, watcher: GroupWatcher, escalate: Promise<void>): Promise<void> {
  const stopped = new AbortController();
  try {
    await stopGroupUntil(group, graceMs, watcher, escalate, stopped.signal);
  } finally {
    stopped.abort(); // a wait still pending (the group outlived KILL_WAIT_MS) is no longer checked
  }
}

async function stopGroupUntil(group: StoppableGroup, graceMs: number, watcher: GroupWatcher, escalate: Promise<void>, stopped: AbortSignal): Promise<void> {
  const cg = group.cgroup;
  const exclude = group.exclude ?? new Set<number>();
  const outside = (pid: number): boolean => !exclude.has(pid) && readProcStat(pid)?.pgid !== group.pgid;
  // The leader's exit is an event; only then is the rest of the group checked (see GroupWatcher).
  const gone = group.leaderExited.then(() => watcher.waitEmpty(group.pgid, stopped)).then((empty) => empty && (cg === undefined || cg.watcher.waitEmpty(cg.kind, cg.dir, stopped)));
  if (graceMs > 0) {
    signalGroup(group.pgid, "SIGTERM");
    if (cg !== undefined) {
      const escaped = signalCgroup(cg.dir, "SIGTERM", (pid) => !outside(pid));
      if (escaped.length > 0) group.onKill?.({ signal: "SIGTERM", processes: escaped.length, outsideGroup: escaped.length, via: "cgroup" });
    }
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)));
    const finished = await Promise.race([gone, graceOver, escalate.then(() => false as const)]);
    clearTimeout(timer);
    if (finished) return;
  }
  if (cg !== undefined) {
    const pids = cgroupProcs(cg.dir).filter((pid) => !exclude.has(pid));
    const groupOnly = groupMembers(group.pgid).filter((p) => !pids.includes(p.pid)).length; // moved out of the cgroup (root can)
    const outsideGroup = pids.filter(outside).length;
    signalGroup(group.pgid, "SIGKILL");
    killCgroup(cg.kind, cg.dir, exclude);
    if (pids.length + groupOnly > 0) group.onKill?.({ signal: "SIGKILL", processes: pids.length + groupOnly, outsideGroup, via: "cgroup" });
  } else {
    const count = groupMembers(group.pgid).length;
    if (signalGroup(group.pgid, "SIGKILL") && count > 0) group.onKill?.({ signal: "SIGKILL", processes: count, outsideGroup: 0, via: "process-group" });
  }
  let timer: NodeJS.Timeout | undefined;
  const killWait = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), KILL_WAIT_MS)));
  const finished = await Promise.race([gone, killWait]);
  clearTimeout(timer);
  if (!finished && groupAlive(group.pgid)) {
    throw new Error(`process group ${group.pgid} of member ${group.member} is still alive ${KILL_WAIT_MS}ms after SIGKILL`);
  }
  if (!finished && cg !== undefined && !cgroupEmpty(cg.kind, cg.dir)) {
    throw new Error(`cgroup ${cg.dir} of member ${group.member} still has processes ${KILL_WAIT_MS}ms after SIGKILL: ${cgroupProcs(cg.dir).join(", ")}`);
  }
}

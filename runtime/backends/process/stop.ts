/**
 * Stopping a member's whole process tree: SIGTERM to its process group, SIGKILL to the group after the
 * grace period, done when the leader has exited AND no process of the group is left (members such as
 * OpenClaw gateways run worker children; they must die too). Processes that left the group on purpose
 * (setsid/setpgid) are out of reach of group signals; run members under a cgroup (systemd backend) when
 * that matters.
 */
import { GroupWatcher, groupAlive, signalGroup } from "./status";

/** How long to wait after SIGKILL before declaring the group unkillable. */
export const KILL_WAIT_MS = 5_000;

/** One member's process group, as the stopper sees it. */
export interface StoppableGroup {
  readonly member: string;
  readonly pgid: number;
  /** Resolves when the leader (our child) has exited. */
  readonly leaderExited: Promise<void>;
}

/**
 * Stops group `group`: SIGTERM, then SIGKILL after `graceMs` (0: SIGKILL at once).
 *
 * @returns when the leader has exited and the group is empty
 * @throws {Error} when the group is still alive {@link KILL_WAIT_MS} after SIGKILL
 */
export async function stopGroup(group: StoppableGroup, graceMs: number, watcher: GroupWatcher, escalate: Promise<void>): Promise<void> {
  // The leader's exit is an event; only then is the rest of the group checked (see GroupWatcher).
  const gone = group.leaderExited.then(() => watcher.waitEmpty(group.pgid)).then(() => true);
  if (graceMs > 0) {
    signalGroup(group.pgid, "SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)));
    const finished = await Promise.race([gone, graceOver, escalate.then(() => false as const)]);
    clearTimeout(timer);
    if (finished) return;
  }
  signalGroup(group.pgid, "SIGKILL");
  let timer: NodeJS.Timeout | undefined;
  const killWait = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), KILL_WAIT_MS)));
  const finished = await Promise.race([gone, killWait]);
  clearTimeout(timer);
  if (!finished && groupAlive(group.pgid)) {
    throw new Error(`process group ${group.pgid} of member ${group.member} is still alive ${KILL_WAIT_MS}ms after SIGKILL`);
  }
}

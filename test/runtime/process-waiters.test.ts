/**
 * The polling waits of the process backend (runtime/backends/process/waiters.ts): a wait that gives up (its signal
 * aborts) is dropped at once and leaves no check running, so a stop whose grace period ends, or a reap that moves
 * on, does not keep polling a group or cgroup that never empties. Real processes and real cgroups (root and a
 * writable cgroupfs; skipped with the reason printed otherwise).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CgroupWatcher, createMemberCgroupAsync, killCgroup, openRunCgroups, removeCohortDirIfEmpty, removeTreeRetrying } from "../../runtime/backends/process/cgroup";
import { GroupWatcher } from "../../runtime/backends/process/status";
import { PollingWaiters } from "../../runtime/backends/process/waiters";
import { usableCgroupHierarchy } from "./process-helpers";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("PollingWaiters", () => {
  /** Waiters over a set of settled ids, counting the checks. */
  function fixture() {
    const settled = new Set<string>();
    const checks: string[][] = [];
    const waiters = new PollingWaiters<number>(5, (awaited) => {
      checks.push([...awaited.keys()]);
      return [...awaited.keys()].filter((id) => settled.has(id));
    });
    return { settled, checks, waiters };
  }

  it("resolves true once a check reports the id settled; waits on one id share each check", async () => {
    const { settled, checks, waiters } = fixture();
    const a = waiters.wait("a", 1);
    const a2 = waiters.wait("a", 1);
    const b = waiters.wait("b", 2);
    expect(waiters.size).toBe(2);
    await sleep(20);
    expect(checks.length).toBeGreaterThan(0);
    for (const ids of checks) expect(ids).toEqual(["a", "b"]);
    settled.add("a");
    await expect(a).resolves.toBe(true);
    await expect(a2).resolves.toBe(true);
    expect(waiters.size).toBe(1);
    settled.add("b");
    await expect(b).resolves.toBe(true);
    expect(waiters.size).toBe(0);
    const after = checks.length;
    await sleep(20);
    expect(checks.length).toBe(after); // nothing awaited: no timer
  });

  it("a wait whose signal aborts resolves false, is dropped at once, and the checks stop with the last waiter", async () => {
    const { checks, waiters } = fixture();
    const giveUp = new AbortController();
    const kept = new AbortController();
    const dropped = waiters.wait("x", 1, giveUp.signal);
    const other = waiters.wait("x", 1, kept.signal);
    await sleep(15);
    giveUp.abort();
    await expect(dropped).resolves.toBe(false);
    expect(waiters.size).toBe(1); // the other waiter on "x" still waits
    kept.abort();
    await expect(other).resolves.toBe(false);
    expect(waiters.size).toBe(0);
    const after = checks.length;
    await sleep(25);
    expect(checks.length).toBe(after);
  });

  it("an already aborted signal resolves false without waiting; a timeout signal gives up after its time", async () => {
    const { checks, waiters } = fixture();
    await expect(waiters.wait("y", 1, AbortSignal.abort())).resolves.toBe(false);
    expect(waiters.size).toBe(0);
    expect(checks).toEqual([]);
    const t0 = performance.now();
    await expect(waiters.wait("y", 1, AbortSignal.timeout(40))).resolves.toBe(false);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(35);
    expect(waiters.size).toBe(0);
  });

  it("a check that throws settles nothing that tick and does not stop the checks; an abort after settling changes nothing", async () => {
    let calls = 0;
    const waiters = new PollingWaiters<number>(5, (awaited) => {
      calls++;
      if (calls <= 2) throw new Error("EMFILE: too many open files, scandir '/proc'");
      return [...awaited.keys()];
    });
    const signal = new AbortController();
    await expect(waiters.wait("z", 1, signal.signal)).resolves.toBe(true);
    expect(calls).toBe(3);
    signal.abort();
    expect(waiters.size).toBe(0);
  });
});

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

/** A `sleep 30` that leads a process group of its own; resolves once it runs. */
async function sleeper(): Promise<ChildProcess> {
  const child = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
  children.push(child);
  await new Promise((resolve, reject) => child.once("spawn", resolve).once("error", reject));
  return child;
}

describe.runIf(process.platform === "linux")("GroupWatcher", () => {
  it("gives up on a group that stays alive when the signal aborts (false, nothing left awaited); true once it is empty", async () => {
    const child = await sleeper();
    const watcher = new GroupWatcher();
    await expect(watcher.waitEmpty(child.pid!, AbortSignal.timeout(50))).resolves.toBe(false);
    expect(watcher.waiting).toBe(0);
    const empty = watcher.waitEmpty(child.pid!, AbortSignal.timeout(5_000));
    expect(watcher.waiting).toBe(1);
    process.kill(-child.pid!, "SIGKILL");
    await expect(empty).resolves.toBe(true);
    expect(watcher.waiting).toBe(0);
  });
});

describe.each(["v2", "freezer"] as const)("CgroupWatcher (%s)", (kind) => {
  const usable = usableCgroupHierarchy(kind);
  const skip = typeof usable === "string" ? usable : null;
  if (skip !== null) console.log(`skipping the ${kind} CgroupWatcher test: ${skip}`);

  it.skipIf(skip !== null)("gives up on a cgroup that stays populated when the signal aborts; true once it is empty", async () => {
    const opened = openRunCgroups(kind, `test-waiters-${process.pid}-${kind}`);
    if ("unavailable" in opened) throw new Error(opened.unavailable);
    try {
      const dir = await createMemberCgroupAsync(opened.dir, "m");
      const child = await sleeper();
      fs.writeFileSync(path.join(dir, "cgroup.procs"), String(child.pid));
      const watcher = new CgroupWatcher();
      await expect(watcher.waitEmpty(kind, dir, AbortSignal.timeout(50))).resolves.toBe(false);
      expect(watcher.waiting).toBe(0);
      const empty = watcher.waitEmpty(kind, dir, AbortSignal.timeout(5_000));
      expect(watcher.waiting).toBe(1);
      killCgroup(kind, dir);
      await expect(empty).resolves.toBe(true);
      expect(watcher.waiting).toBe(0);
    } finally {
      killCgroup(kind, opened.dir);
      await removeTreeRetrying(opened.dir, 100);
      removeCohortDirIfEmpty(opened.hierarchy);
    }
  });
});

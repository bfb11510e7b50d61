/**
 * Taking over a stale pid lock under contention (runtime/core/pid-lock.ts takeOverStaleLock).
 *
 * The race this guards against (found by an adversarial review, reproduced with strace delaying rename(2)): two
 * contenders find the same dead holder's lock; the first moves it aside and creates its own live lock; the second,
 * which had judged the OLD lock stale, then renamed "whatever is at the lock path" — the first one's live lock — and
 * both ran under one lock. A takeover now claims the stale lock by its identity first and checks the path still
 * holds that lock before it moves anything.
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquirePidLock, pidLockHolderOf, pidLockIdentity, takeOverStaleLock, thisLockHolder } from "../../runtime/core/pid-lock";
import { readProcStat } from "../../runtime/core/proc-stat";
import { tempDir } from "./process-helpers";

/** A pid that has exited, with a start time that can never match again. */
function deadHolder(): { pid: number; startTicks: number } {
  const child = spawnSync("true");
  return { pid: child.pid!, startTicks: 1 };
}

const opts = {
  parse: pidLockHolderOf,
  held: (holder: { pid: number }) => Object.assign(new Error(`held by ${holder.pid}`), { code: "held" }),
  directory: () => new Error("directory"),
  contended: () => new Error("contended"),
};

const children: { kill: () => void }[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill();
});

describe("takeOverStaleLock", () => {
  it("a contender that judged the OLD lock stale does not remove the live lock another contender created meanwhile", async () => {
    const dir = tempDir("pidlock");
    const lock = path.join(dir, ".cohort-run.lock");
    fs.writeFileSync(lock, `${JSON.stringify(deadHolder())}\n`);
    const staleIdentity = pidLockIdentity(lock)!;
    expect(staleIdentity).toMatch(/^[0-9a-f]{16}$/);
    // Contender B takes the stale lock over and holds it (this process's live record).
    await acquirePidLock(lock, thisLockHolder(), opts);
    const live = fs.readFileSync(lock, "utf8");
    expect(JSON.parse(live).pid).toBe(process.pid);
    // Contender A, late, acts on what it inspected before B's takeover.
    expect(takeOverStaleLock(lock, staleIdentity)).toBe("gone");
    expect(fs.readFileSync(lock, "utf8")).toBe(live);
    expect(fs.readdirSync(dir).sort()).toEqual([".cohort-run.lock"]);
    // ... and acquiring now is refused naming B.
    await expect(acquirePidLock(lock, thisLockHolder(), { ...opts, held: () => new Error("refused: held") })).rejects.toThrow("refused: held");
  });

  it("a live contender's claim makes the others wait (busy) and leaves the stale lock to it", () => {
    const dir = tempDir("pidlock");
    const lock = path.join(dir, "seal.lock");
    fs.writeFileSync(lock, `${JSON.stringify(deadHolder())}\n`);
    const identity = pidLockIdentity(lock)!;
    const sleeper = spawn("sleep", ["30"], { stdio: "ignore" });
    children.push({ kill: () => sleeper.kill("SIGKILL") });
    const startTicks = readProcStat(sleeper.pid!)!.startTicks;
    fs.writeFileSync(`${lock}.takeover-${identity}-0`, `${JSON.stringify({ pid: sleeper.pid, startTicks })}\n`);
    expect(takeOverStaleLock(lock, identity)).toBe("busy");
    expect(pidLockIdentity(lock)).toBe(identity);
    expect(fs.existsSync(`${lock}.takeover-${identity}-1`)).toBe(false);
  });

  it("a claim whose creator died mid-takeover is passed by the next generation; every claim is removed after", () => {
    const dir = tempDir("pidlock");
    const lock = path.join(dir, "seal.lock");
    fs.writeFileSync(lock, `${JSON.stringify(deadHolder())}\n`);
    const identity = pidLockIdentity(lock)!;
    fs.writeFileSync(`${lock}.takeover-${identity}-0`, `${JSON.stringify(deadHolder())}\n`);
    expect(takeOverStaleLock(lock, identity)).toBe("moved");
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it("the same lock written again (same inode reused, another record) has another identity", () => {
    const dir = tempDir("pidlock");
    const lock = path.join(dir, "run.lock");
    fs.writeFileSync(lock, `${JSON.stringify(deadHolder())}\n`);
    const before = pidLockIdentity(lock);
    fs.writeFileSync(lock, `${JSON.stringify(thisLockHolder())}\n`);
    expect(pidLockIdentity(lock)).not.toBe(before);
    expect(pidLockIdentity(path.join(dir, "none"))).toBeUndefined();
    expect(pidLockIdentity(dir)).toBeUndefined();
  });
});

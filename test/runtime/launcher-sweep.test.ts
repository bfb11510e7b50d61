/**
 * Socket directories of launchers that are gone (`cohort-l-*` under the temp dir, left by a runtime killed with
 * SIGKILL) are removed by the next launcher's start (runtime/backends/process/launcher.ts
 * `sweepStaleLauncherDirs`); a live launcher's, a fresh one's and anything that is not such a directory are left
 * alone. Real unix sockets and real processes: a socket whose listener exited refuses connections.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LAUNCHER_DIR_PREFIX, Launcher, findNativeLauncher, sweepStaleLauncherDirs } from "../../runtime/backends/process/launcher";

const roots: string[] = [];
const servers: net.Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
  for (const root of roots.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

function tempRoot(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-sweep-"));
  roots.push(root);
  return root;
}

/** A launcher directory `<root>/cohort-l-<name>` whose socket `s` was bound by a process that has exited. */
function staleDir(root: string, name: string): string {
  const dir = path.join(root, `${LAUNCHER_DIR_PREFIX}${name}`);
  fs.mkdirSync(dir, { mode: 0o700 });
  const bound = spawnSync(process.execPath, ["-e", `require("node:net").createServer().listen(process.argv[1], () => process.exit(0))`, path.join(dir, "s")], {
    timeout: 30_000,
  });
  expect(bound.status).toBe(0);
  expect(fs.statSync(path.join(dir, "s")).isSocket()).toBe(true);
  return dir;
}

/** A launcher directory whose socket this process listens on. */
async function liveDir(root: string, name: string): Promise<string> {
  const dir = path.join(root, `${LAUNCHER_DIR_PREFIX}${name}`);
  fs.mkdirSync(dir, { mode: 0o700 });
  const server = net.createServer((socket) => socket.destroy());
  servers.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path.join(dir, "s"), resolve);
  });
  return dir;
}

describe("sweepStaleLauncherDirs", () => {
  it("removes a directory whose socket refuses connections and one left without a socket for over a minute; keeps the rest", async () => {
    const root = tempRoot();
    const stale = staleDir(root, "stale1");
    const live = await liveDir(root, "live01");
    const fresh = path.join(root, `${LAUNCHER_DIR_PREFIX}fresh1`);
    fs.mkdirSync(fresh);
    const old = path.join(root, `${LAUNCHER_DIR_PREFIX}old001`);
    fs.mkdirSync(old);
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    fs.utimesSync(old, twoMinutesAgo, twoMinutesAgo);
    // Not a launcher's directory: another prefix, a symlink to a stale one, a plain file.
    const otherName = staleDir(root, "x");
    fs.renameSync(otherName, path.join(root, "other-dir"));
    const target = staleDir(root, "target");
    fs.renameSync(target, path.join(root, "elsewhere"));
    fs.symlinkSync(path.join(root, "elsewhere"), path.join(root, `${LAUNCHER_DIR_PREFIX}link01`));
    fs.writeFileSync(path.join(root, `${LAUNCHER_DIR_PREFIX}file01`), "");

    const removed = await sweepStaleLauncherDirs(root);

    expect(removed.sort()).toEqual([old, stale].sort());
    expect(fs.existsSync(stale)).toBe(false);
    expect(fs.existsSync(old)).toBe(false);
    for (const kept of [
      live,
      fresh,
      path.join(root, "other-dir"),
      path.join(root, "elsewhere", "s"),
      path.join(root, `${LAUNCHER_DIR_PREFIX}link01`),
      path.join(root, `${LAUNCHER_DIR_PREFIX}file01`),
    ])
      expect(fs.existsSync(kept), kept).toBe(true);
    // The live listener still accepts connections after the sweep's probe.
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(path.join(live, "s"), () => {
        socket.destroy();
        resolve();
      });
      socket.once("error", reject);
    });
  });

  it.runIf(process.getuid?.() === 0)("leaves another user's directory alone", async () => {
    const root = tempRoot();
    const stale = staleDir(root, "nobody");
    fs.chownSync(stale, 65534, 65534);
    expect(await sweepStaleLauncherDirs(root)).toEqual([]);
    expect(fs.existsSync(stale)).toBe(true);
  });

  it("returns nothing for a temp dir that cannot be read", async () => {
    expect(await sweepStaleLauncherDirs(path.join(tempRoot(), "missing"))).toEqual([]);
  });
});

describe("a launcher's start", () => {
  it("sweeps the temp dir it makes its own socket directory in, and its own directory is not swept", async () => {
    const root = tempRoot();
    const stale = staleDir(root, "killed");
    const file = findNativeLauncher();
    const program = file === null ? ({ kind: "perl" } as const) : ({ kind: "native", path: file } as const);
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = root; // os.tmpdir() reads it on every call
    let launcher: Launcher;
    try {
      launcher = await Launcher.start(program);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    try {
      for (const deadline = Date.now() + 10_000; fs.existsSync(stale) && Date.now() < deadline;) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(fs.existsSync(stale)).toBe(false);
      const own = fs.readdirSync(root).filter((name) => name.startsWith(LAUNCHER_DIR_PREFIX));
      expect(own).toHaveLength(1);
      expect(await sweepStaleLauncherDirs(root)).toEqual([]);
    } finally {
      await launcher.close();
    }
    expect(fs.readdirSync(root).filter((name) => name.startsWith(LAUNCHER_DIR_PREFIX))).toEqual([]);
  });
});

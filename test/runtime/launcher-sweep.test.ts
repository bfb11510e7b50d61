/**
 * Socket directories of launchers that are gone (`cohort-l-*` under the temp dir, left by a runtime killed with
 * SIGKILL) are removed by the next launcher's start (runtime/backends/process/launcher.ts
 * `sweepStaleLauncherDirs`); a live launcher's, a fresh one's, another host's and anything that is not such a
 * directory are left alone. Real unix sockets and real processes: a socket whose listener exited refuses
 * connections. Linux only (the sweep is).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LAUNCHER_DIR_PREFIX, LAUNCHER_OWNER_FILE, Launcher, findNativeLauncher, sweepStaleLauncherDirs } from "../../runtime/backends/process/launcher";

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

const TWO_MINUTES_AGO = (): Date => new Date(Date.now() - 120_000);

/** Makes `<root>/cohort-l-<name>` as a launcher does: 0700, an owner file naming `host` (default: this one). */
function launcherDir(root: string, name: string, host: string | null = os.hostname()): string {
  const dir = path.join(root, `${LAUNCHER_DIR_PREFIX}${name}`);
  fs.mkdirSync(dir, { mode: 0o700 });
  if (host !== null) fs.writeFileSync(path.join(dir, LAUNCHER_OWNER_FILE), `${host}\n12345\n`);
  return dir;
}

/** Binds `file` as a unix socket in a process that then exits: the socket stays and refuses connections. */
function deadSocket(file: string): void {
  const bound = spawnSync(process.execPath, ["-e", `require("node:net").createServer().listen(process.argv[1], () => process.exit(0))`, file], { timeout: 30_000 });
  expect(bound.status).toBe(0);
  expect(fs.statSync(file).isSocket()).toBe(true);
}

/** A launcher directory of this host whose socket's listener has exited, last changed two minutes ago. */
function staleDir(root: string, name: string, host?: string | null): string {
  const dir = launcherDir(root, name, host);
  deadSocket(path.join(dir, "s"));
  fs.utimesSync(dir, TWO_MINUTES_AGO(), TWO_MINUTES_AGO());
  return dir;
}

/** A launcher directory whose socket this process listens on, last changed two minutes ago. */
async function liveDir(root: string, name: string): Promise<string> {
  const dir = launcherDir(root, name);
  const server = net.createServer((socket) => socket.destroy());
  servers.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path.join(dir, "s"), resolve);
  });
  fs.utimesSync(dir, TWO_MINUTES_AGO(), TWO_MINUTES_AGO());
  return dir;
}

describe.runIf(process.platform === "linux")("sweepStaleLauncherDirs", () => {
  it("removes this host's directories whose socket refuses connections or that have none, once unchanged for a minute", async () => {
    const root = tempRoot();
    const stale = staleDir(root, "stale1");
    const noSocket = launcherDir(root, "nosock");
    fs.utimesSync(noSocket, TWO_MINUTES_AGO(), TWO_MINUTES_AGO());
    const live = await liveDir(root, "live01");

    expect((await sweepStaleLauncherDirs(root)).sort()).toEqual([noSocket, stale].sort());
    expect(fs.existsSync(live)).toBe(true);
    // The live listener still accepts connections after the sweep's probe.
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(path.join(live, "s"), () => {
        socket.destroy();
        resolve();
      });
      socket.once("error", reject);
    });
  });

  it("leaves alone what it cannot prove dead: fresh, ownerless, another host's, an s that is not a socket, not a directory", async () => {
    const root = tempRoot();
    // Bound but not listening yet (a live launcher between bind(2) and listen(2) refuses too): changed just now.
    const fresh = launcherDir(root, "fresh1");
    deadSocket(path.join(fresh, "s"));
    const ownerless = staleDir(root, "noown1", null); // a launcher from before the owner file
    const otherHost = staleDir(root, "other1", `not-${os.hostname()}`); // a temp dir shared with another machine
    const notSocket = launcherDir(root, "sdir01");
    fs.mkdirSync(path.join(notSocket, "s"));
    fs.writeFileSync(path.join(notSocket, "s", "precious"), "keep");
    fs.utimesSync(notSocket, TWO_MINUTES_AGO(), TWO_MINUTES_AGO());
    const otherPrefix = staleDir(root, "x");
    fs.renameSync(otherPrefix, path.join(root, "other-dir"));
    const target = staleDir(root, "target");
    fs.renameSync(target, path.join(root, "elsewhere"));
    fs.symlinkSync(path.join(root, "elsewhere"), path.join(root, `${LAUNCHER_DIR_PREFIX}link01`));
    fs.writeFileSync(path.join(root, `${LAUNCHER_DIR_PREFIX}file01`), "");

    expect(await sweepStaleLauncherDirs(root)).toEqual([]);
    for (const kept of [
      fresh,
      ownerless,
      otherHost,
      path.join(notSocket, "s", "precious"),
      path.join(root, "other-dir", "s"),
      path.join(root, "elsewhere", "s"),
      path.join(root, `${LAUNCHER_DIR_PREFIX}link01`),
      path.join(root, `${LAUNCHER_DIR_PREFIX}file01`),
    ])
      expect(fs.existsSync(kept), kept).toBe(true);
    // The same fresh directory is swept once it has been left alone for over a minute.
    expect(await sweepStaleLauncherDirs(root, Date.now() + 120_000)).toContain(fresh);
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

describe.runIf(process.platform === "linux")("a launcher's start", () => {
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
      expect(fs.readFileSync(path.join(root, own[0]!, LAUNCHER_OWNER_FILE), "utf8")).toBe(`${os.hostname()}\n${process.pid}\n`);
      // Even once it is old, the live launcher's directory is not swept: its socket accepts.
      expect(await sweepStaleLauncherDirs(root, Date.now() + 120_000)).toEqual([]);
    } finally {
      await launcher.close();
    }
    expect(fs.readdirSync(root).filter((name) => name.startsWith(LAUNCHER_DIR_PREFIX))).toEqual([]);
  });
});

/**
 * The compiled launcher's listen watches and lookups (runtime/launcher/listen.go: sock_diag exact lookups), against
 * real sockets of this kernel, no mocks: `dist/cohort-launcher` (COHORT_LAUNCHER, vitest.config.mts) driven through
 * the runtime's Launcher class and, where the protocol itself is the subject, line by line. Linux only.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Launcher, findNativeLauncher } from "../../runtime/backends/process/launcher";
import { freePort } from "./process-helpers";

const hex = (text: string): string => Buffer.from(text, "utf8").toString("hex");

/** Closed after each test: servers this process listens with, and processes it started. */
const servers: net.Server[] = [];
const children: ChildProcessWithoutNullStreams[] = [];
const launchers: Launcher[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) server.close();
  for (const child of children.splice(0)) child.kill("SIGKILL");
  await Promise.all(launchers.splice(0).map((launcher) => launcher.close()));
});

async function nativeLauncher(): Promise<Launcher> {
  const file = findNativeLauncher();
  if (file === null) throw new Error("no compiled launcher: run `npm run build` (COHORT_LAUNCHER names dist/cohort-launcher)");
  const launcher = await Launcher.start({ kind: "native", path: file });
  launchers.push(launcher);
  return launcher;
}

/** Listens on host:port in this process; resolves with the time listen(2) was called (performance.now()). */
async function listen(host: string, port: number, options: { ipv6Only?: boolean } = {}): Promise<number> {
  const server = net.createServer();
  servers.push(server);
  const at = performance.now();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port, ...options }, resolve);
  });
  return at;
}

/** The inode of the LISTEN socket on `port` as /proc/net/tcp{,6} lists it (proc(5)), or null. */
function procInode(port: number): { inode: number; uid: number } | null {
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of fs.readFileSync(file, "utf8").split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== "0A") continue;
      if (parseInt(f[1]!.slice(f[1]!.lastIndexOf(":") + 1), 16) === port) return { inode: Number(f[9]), uid: Number(f[7]) };
    }
  }
  return null;
}

/** The compiled launcher as a bare process, for the protocol lines themselves. */
function rawLauncher(): { write: (line: string) => void; lines: string[]; waitFor: (prefix: string, ms?: number) => Promise<string> } {
  const child = spawn(findNativeLauncher()!, [path.join(os.tmpdir(), `cohort-no-socket-${process.pid}`)], { stdio: ["pipe", "pipe", "pipe"] });
  children.push(child);
  const lines: string[] = [];
  let buffer = "";
  const waiters: Array<() => void> = [];
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    buffer += chunk;
    for (let at = buffer.indexOf("\n"); at !== -1; at = buffer.indexOf("\n")) {
      lines.push(buffer.slice(0, at));
      buffer = buffer.slice(at + 1);
    }
    for (const wake of waiters.splice(0)) wake();
  });
  const waitFor = async (prefix: string, ms = 5_000): Promise<string> => {
    const deadline = performance.now() + ms;
    for (;;) {
      const found = lines.find((line) => line.startsWith(prefix));
      if (found !== undefined) return found;
      if (performance.now() > deadline) throw new Error(`no line starting ${JSON.stringify(prefix)} within ${ms} ms; got ${JSON.stringify(lines)}`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 20);
      });
    }
  };
  return { write: (line) => child.stdin.write(`${line}\n`), lines, waitFor };
}

describe.runIf(process.platform === "linux")("compiled launcher: listen watches and lookups (sock_diag)", () => {
  it("announces watch and lookup before `ready`; the perl launcher announces nothing and refuses both", async () => {
    const native = await nativeLauncher();
    expect([...native.features].sort()).toEqual(["lookup", "watch"]);
    const perl = await Launcher.start({ kind: "perl" });
    launchers.push(perl);
    expect(perl.features.size).toBe(0);
    await expect(perl.lookupListener("127.0.0.1", 1)).rejects.toThrow("the perl launcher cannot lookup listeners");
    await expect(perl.watchListening("127.0.0.1", 1)).rejects.toThrow("the perl launcher cannot watch listeners");
  });

  it("lookup: the inode and uid /proc/net/tcp lists for the socket that accepts host:port; null when nothing would", async () => {
    const launcher = await nativeLauncher();
    const port = await freePort();
    expect(await launcher.lookupListener("127.0.0.1", port)).toBeNull();
    await listen("127.0.0.1", port);
    const proc = procInode(port)!;
    expect(proc.inode).toBeGreaterThan(0);
    expect(await launcher.lookupListener("127.0.0.1", port)).toEqual(proc);
    expect(await launcher.lookupListener("::ffff:127.0.0.1", port)).toEqual(proc); // IPv4-mapped: asked as IPv4
    expect(await launcher.lookupListener("::1", port)).toBeNull(); // another address, nothing there

    // A dual-stack [::] listener accepts 127.0.0.1 and ::1; an IPV6_V6ONLY one only ::1.
    const dual = await freePort();
    await listen("::", dual);
    expect(await launcher.lookupListener("127.0.0.1", dual)).toEqual(procInode(dual));
    expect(await launcher.lookupListener("::1", dual)).toEqual(procInode(dual));
    const v6only = await freePort();
    await listen("::", v6only, { ipv6Only: true });
    expect(await launcher.lookupListener("127.0.0.1", v6only)).toBeNull();
    expect(await launcher.lookupListener("::1", v6only)).toEqual(procInode(v6only));
  });

  it("watch: fires within a few tens of ms of a real listen on 127.0.0.1, ::1 and [::], with the socket's inode", async () => {
    const launcher = await nativeLauncher();
    const cases: Array<{ watch: string; listen: string }> = [
      { watch: "127.0.0.1", listen: "127.0.0.1" },
      { watch: "::1", listen: "::1" },
      { watch: "127.0.0.1", listen: "::" },
      { watch: "::1", listen: "::" },
    ];
    const latencies: string[] = [];
    for (const c of cases) {
      const port = await freePort();
      const fired = launcher.watchListening(c.watch, port).then((inode) => ({ inode, at: performance.now() }));
      await new Promise((resolve) => setTimeout(resolve, 150)); // watched a while with nothing there
      const listenedAt = await listen(c.listen, port);
      const { inode, at } = await fired;
      expect(inode).toBe(procInode(port)!.inode);
      const ms = at - listenedAt;
      latencies.push(`${c.watch} <- ${c.listen}: ${ms.toFixed(1)} ms`);
      expect(ms).toBeLessThan(100);
    }
    console.log(`watch fired after listen(2): ${latencies.join("; ")}`);
  });

  it("watch: a listener already there answers at once; many watches at once all fire", async () => {
    const launcher = await nativeLauncher();
    const port = await freePort();
    await listen("127.0.0.1", port);
    expect(await launcher.watchListening("127.0.0.1", port)).toBe(procInode(port)!.inode);
    const ports = await Promise.all(Array.from({ length: 100 }, () => freePort()));
    const fired = ports.map((p) => launcher.watchListening("127.0.0.1", p));
    await new Promise((resolve) => setTimeout(resolve, 50));
    for (const p of ports) await listen("127.0.0.1", p);
    expect(await Promise.all(fired)).toEqual(ports.map((p) => procInode(p)!.inode));
  });

  it("unwatch (the watch's signal aborts): the watch is cancelled in the launcher and never answers", async () => {
    const raw = rawLauncher();
    await raw.waitFor("ready");
    expect(raw.lines.slice(0, 2)).toEqual(["features\twatch\tlookup", "ready"]);
    const [cancelled, kept] = [await freePort(), await freePort()];
    raw.write(`watch\tw1\t${hex("127.0.0.1")}\t${cancelled}`);
    raw.write(`watch\tw2\t${hex("127.0.0.1")}\t${kept}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    raw.write("unwatch\tw1");
    await new Promise((resolve) => setTimeout(resolve, 50));
    await listen("127.0.0.1", cancelled);
    await listen("127.0.0.1", kept);
    expect(await raw.waitFor("listening\tw2\t")).toBe(`listening\tw2\t${procInode(kept)!.inode}`);
    await new Promise((resolve) => setTimeout(resolve, 100)); // many watch periods
    expect(raw.lines.filter((line) => line.startsWith("listening\tw1"))).toEqual([]);

    // Through the Launcher class: an aborted watch rejects, and its `unwatch` goes out.
    const launcher = await nativeLauncher();
    const controller = new AbortController();
    const watching = launcher.watchListening("127.0.0.1", await freePort(), controller.signal);
    controller.abort();
    await expect(watching).rejects.toThrow("watch aborted");
  });

  it("errors come back at once as inode 0 with the reason: a host that is not an address literal, a bad port, a bad request", async () => {
    const raw = rawLauncher();
    await raw.waitFor("ready");
    raw.write(`watch\tw1\t${hex("localhost")}\t80`);
    raw.write(`lookup\tt1\t${hex("127.0.0.1")}\t0`);
    raw.write(`lookup\tt2\t${hex("127.0.0.1")}`);
    const unhex = (line: string): string => Buffer.from(line.split("\t").at(-1)!, "hex").toString("utf8");
    const w1 = await raw.waitFor("listening\tw1\t");
    expect(w1.split("\t").slice(0, 3)).toEqual(["listening", "w1", "0"]);
    expect(unhex(w1)).toBe('not an IP address literal without a zone: "localhost"');
    const t1 = await raw.waitFor("listener\tt1\t");
    expect(t1.split("\t").slice(0, 4)).toEqual(["listener", "t1", "0", "0"]);
    expect(unhex(t1)).toBe('bad port "0"');
    expect(unhex(await raw.waitFor("listener\tt2\t"))).toBe("bad request: want <id> <hex host> <port>");

    const launcher = await nativeLauncher();
    await expect(launcher.watchListening("localhost", 80)).rejects.toThrow('not an IP address literal without a zone: "localhost"');
    await expect(launcher.lookupListener("localhost", 80)).rejects.toThrow("not an IP address literal");
  });

  it("pending watches are rejected when the launcher is closed, and when it dies", async () => {
    const closing = await nativeLauncher();
    const watching = expect(closing.watchListening("127.0.0.1", await freePort())).rejects.toThrow("the launcher is closed");
    await closing.close();
    await watching;

    const dying = await nativeLauncher();
    const orphaned = expect(dying.watchListening("127.0.0.1", await freePort())).rejects.toThrow(/the launcher \(native\) exited \(SIGKILL\)/);
    process.kill(dying.pid!, "SIGKILL");
    await orphaned;
    await expect(dying.lookupListener("127.0.0.1", 1)).rejects.toThrow();
  });

  it.runIf(process.getuid?.() === 0)("a stranger's listener (another user's process) is found with that user's uid", async () => {
    const launcher = await nativeLauncher();
    const port = await freePort();
    const child = spawn(
      "setpriv",
      [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "perl",
        "-MSocket",
        "-e",
        `socket(S, PF_INET, SOCK_STREAM, 0) or die; bind(S, sockaddr_in(${port}, INADDR_LOOPBACK)) or die "bind: $!"; listen(S, 5) or die; $| = 1; print "up\\n"; sleep 60`,
      ],
      { stdio: ["pipe", "pipe", "pipe"] },
    );
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout.once("data", () => resolve());
      child.once("exit", (code) => reject(new Error(`the stranger exited (${code})`)));
    });
    expect(await launcher.lookupListener("127.0.0.1", port)).toEqual({ inode: procInode(port)!.inode, uid: 65534 });
  });
});

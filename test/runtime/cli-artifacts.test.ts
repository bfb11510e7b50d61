/**
 * `cohort run --artifacts DIR` where DIR cannot hold a run (issue #16, left-over cases): it fails fast,
 * naming the path and the reason, before any member starts: `/proc/1` (Node's recursive mkdir used to spin
 * there forever), a read-only directory (reported as ENOENT before; with --lock, as the lock file's raw EROFS), and
 * a path under a file.
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { tempDir } from "./process-helpers";

const cliPath = path.resolve(__dirname, "../../runtime/cli.ts");
const tsxLoader = path.resolve(__dirname, "../../node_modules/tsx/dist/loader.mjs");

/** Runs the CLI from source in a child (so a hang cannot hang the test), killed after `timeoutMs`. */
function cohort(args: string[], timeoutMs = 20_000): Promise<{ code: number | null; stderr: string; ms: number; killed: boolean }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(process.execPath, ["--import", `file://${tsxLoader}`, cliPath, ...args], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    let killed = false;
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      killed = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, ms: Date.now() - started, killed });
    });
  });
}

function writeSpec(): string {
  const file = path.join(tempDir("spec"), "cohort.json");
  fs.writeFileSync(
    file,
    JSON.stringify({
      apiVersion: "cohort-lab/v1",
      kind: "Cohort",
      name: "t",
      roles: [{ name: "a", app: { command: ["node", "-e", "setInterval(() => {}, 1000)"] }, readiness: { tcp: {} } }],
    }),
  );
  return file;
}

const mounts: string[] = [];
afterAll(() => {
  for (const dir of mounts) spawnSync("umount", [dir]);
});

describe("cohort run --artifacts DIR that cannot hold a run", () => {
  it("/proc/1: fails fast naming the path and the reason (no hang in a recursive mkdir)", async () => {
    const r = await cohort(["run", "--spec", writeSpec(), "--artifacts", "/proc/1"]);
    expect(r.killed, "cohort run hung").toBe(false);
    expect(r.code).toBe(1);
    // EPERM from mkdir(2) in /proc/<pid> (Linux); ENOENT on kernels that answer so.
    expect(r.stderr).toMatch(
      /^cohort: --artifacts \/proc\/1: (not writable \(EPERM\): \/proc\/1 does not allow new directories|cannot create the run directory \/proc\/1\/t-\S+ there \(mkdir: ENOENT although \/proc\/1 exists)/m,
    );
    expect(r.ms).toBeLessThan(15_000);
  }, 60_000);

  it("a path under a file: names the file", async () => {
    const file = path.join(tempDir("file"), "f");
    fs.writeFileSync(file, "x\n");
    const r = await cohort(["run", "--spec", writeSpec(), "--artifacts", path.join(file, "runs")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cohort: --artifacts ${path.join(file, "runs")}: not a directory (${file} is a file)`);
  }, 60_000);

  it("a read-only directory is reported as not writable (EROFS or EACCES), not ENOENT", async () => {
    const dir = tempDir("ro");
    const target = path.join(dir, "mnt");
    fs.mkdirSync(path.join(dir, "src"));
    fs.mkdirSync(target);
    // A read-only bind mount when we may mount (root here); otherwise a mode-0555 directory (EACCES for a non-root user).
    const mounted = spawnSync("mount", ["--bind", path.join(dir, "src"), target]).status === 0;
    if (mounted) {
      mounts.push(target);
      expect(spawnSync("mount", ["-o", "remount,bind,ro", target]).status).toBe(0);
    } else {
      expect(process.getuid?.()).not.toBe(0);
      fs.chmodSync(target, 0o555);
    }
    // With --lock the same refusal, before the lock file is written (it was a raw `EROFS ... open '<root>/.cohort-run.lock.tmp-...'`).
    for (const artifacts of [target, path.join(target, "sub")]) {
      for (const lock of [[], ["--lock"]]) {
        const r = await cohort(["run", "--spec", writeSpec(), "--artifacts", artifacts, ...lock]);
        expect(r.code, lock.join(" ")).toBe(1);
        expect(r.stderr, lock.join(" ")).toMatch(new RegExp(`^cohort: --artifacts ${artifacts}: not writable \\((EROFS|EACCES)\\): ${target} `, "m"));
        expect(r.stderr).not.toContain("ENOENT");
        expect(r.stderr).not.toContain(".cohort-run.lock");
      }
    }
  }, 60_000);
});

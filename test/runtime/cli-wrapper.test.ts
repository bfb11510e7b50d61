/**
 * `bin/cohort.cjs` under a Node older than 22 (the system Node 20 that `npx cohort` finds) re-executes the
 * runtime bundle with the Node the build recorded (dist/cohort.node). These tests run that path with real
 * processes: the wrapper under the old Node, the runtime under the Node running the tests.
 *
 * - A SIGINT to the wrapper's whole process group (a terminal's Ctrl-C) reaches the runtime ONCE: one
 *   `SIGINT: stopping members`, never `killing members`, and a member that ignores SIGTERM is killed only at the
 *   end of the stop grace period (before the fix the runtime got the group's copy and the wrapper's, and
 *   killed the members at once).
 * - A SIGKILL of the wrapper mid-hold ends the run as interrupted, as a SIGTERM does: members stopped, ledger
 *   completed and verified, the cause named (before the fix the runtime held on to the end, parented by pid 1).
 */
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config";
import { buildBundle, processesOfRun, runBundle, tempDir } from "./process-helpers";

/** A Node older than 22 to run the wrapper with (the system Node), or the reason there is none. */
function oldNode(): string | { skip: string } {
  for (const candidate of [process.env.COHORT_TEST_OLD_NODE, "/usr/bin/node", "/usr/local/bin/node"]) {
    if (candidate === undefined || !fs.existsSync(candidate)) continue;
    try {
      const version = execFileSync(candidate, ["--version"], { encoding: "utf8" }).trim();
      if (Number(version.replace(/^v/, "").split(".")[0]) < 22) return candidate;
    } catch {
      // not runnable
    }
  }
  return { skip: "no Node older than 22 here (set COHORT_TEST_OLD_NODE)" };
}

const old = oldNode();
let wrapper = "";
let bundle = "";

beforeAll(async () => {
  if (typeof old !== "string") return;
  // The layout `npm run build` makes: <root>/bin/cohort.cjs, <root>/runtime/node-version.cjs, <root>/dist/{cohort.cjs,
  // cohort-launcher,cohort.node}, with dist/cohort.node naming the Node that runs these tests.
  bundle = await buildBundle({ shipped: true });
  const root = tempDir("wrapper");
  for (const dir of ["bin", "runtime", "dist"]) fs.mkdirSync(path.join(root, dir));
  fs.copyFileSync(path.join(PROJECT_DIR, "bin", "cohort.cjs"), path.join(root, "bin", "cohort.cjs"));
  fs.copyFileSync(path.join(PROJECT_DIR, "runtime", "node-version.cjs"), path.join(root, "runtime", "node-version.cjs"));
  fs.copyFileSync(bundle, path.join(root, "dist", "cohort.cjs"));
  fs.copyFileSync(path.join(path.dirname(bundle), "cohort-launcher"), path.join(root, "dist", "cohort-launcher"));
  fs.chmodSync(path.join(root, "dist", "cohort-launcher"), 0o755);
  fs.writeFileSync(path.join(root, "dist", "cohort.node"), `${process.execPath}\n`);
  wrapper = path.join(root, "bin", "cohort.cjs");
}, 300_000);

const GRACE_MS = 3_000;

/** One member that ignores SIGTERM (it is SIGKILLed at the end of the grace period), held for 60 s. */
function stubbornSpec(name: string): string {
  const file = path.join(tempDir("spec"), "cohort.json");
  const member = { app: { command: ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"], port: false }, readiness: { log: { pattern: "^ready$" } } };
  fs.writeFileSync(
    file,
    JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name, stopGracePeriod: `${GRACE_MS / 1000}s`, hold: "60s", roles: [{ name: "web", replicas: 1, ...member }] }),
  );
  return file;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves with the lock's run once all its members are ready. */
async function readyRun(artifacts: string): Promise<{ runId: string; runDir: string; pid: number }> {
  for (const deadline = Date.now() + 60_000; ; await sleep(25)) {
    if (Date.now() > deadline) throw new Error(`no ready run holds ${artifacts}/.cohort-run.lock after 60 s`);
    try {
      const lock = JSON.parse(fs.readFileSync(path.join(artifacts, ".cohort-run.lock"), "utf8")) as { runId: string; runDir: string; pid: number };
      if (fs.readFileSync(path.join(lock.runDir, "records.ndjson"), "utf8").includes('"kind":"roster-ready"')) return lock;
    } catch {
      // not yet
    }
  }
}

/** Starts `<old node> bin/cohort.cjs args` as the leader of a new process group (as a shell starts a job). */
function startWrapper(args: readonly string[]) {
  const { COHORT_LAUNCHER: _fromConfig, ...env } = process.env;
  const child = spawn(old as string, [wrapper, ...args], { detached: true, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  // `close`: both pipes at end of file, i.e. the runtime (which inherited them) has exited too.
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return { child, closed };
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};

describe.skipIf(typeof old !== "string")(`bin/cohort.cjs under an old Node${typeof old === "string" ? "" : ` (skipped: ${old.skip})`}`, () => {
  it("a SIGINT to the whole process group reaches the runtime once: one graceful stop, the grace period respected", async () => {
    const artifacts = tempDir("artifacts");
    const { child, closed } = startWrapper(["run", "--spec", stubbornSpec("groupint"), "--artifacts", artifacts, "--lock"]);
    const live = await readyRun(artifacts);
    const sentAt = Date.now();
    process.kill(-(child.pid as number), "SIGINT");
    const out = await closed;
    const ms = Date.now() - sentAt;
    console.log(`[cli-wrapper] group SIGINT -> wrapper and runtime gone in ${ms} ms`);
    expect(out.stderr.match(/SIGINT: stopping members/g)).toHaveLength(1);
    expect(out.stderr).not.toContain("killing members");
    expect(out.code).toBe(130);
    expect(ms).toBeGreaterThanOrEqual(GRACE_MS);
    const records = fs.readFileSync(path.join(live.runDir, "records.ndjson"), "utf8");
    expect(records.match(/"kind":"run-interrupted"/g)).toHaveLength(1);
    expect(JSON.parse(fs.readFileSync(path.join(live.runDir, "completion.json"), "utf8"))).toMatchObject({ outcome: "interrupted" });
    expect(processesOfRun(live.runId)).toEqual([]);
  }, 120_000);

  it("a SIGKILL of the wrapper mid-hold ends the run as interrupted (SIGTERM), names the cause, leaves no member and a ledger that verifies", async () => {
    const artifacts = tempDir("artifacts");
    const { child, closed } = startWrapper(["run", "--spec", stubbornSpec("wrapkill"), "--artifacts", artifacts, "--lock"]);
    const live = await readyRun(artifacts);
    expect(live.pid).not.toBe(child.pid);
    const killedAt = Date.now();
    process.kill(child.pid as number, "SIGKILL");
    const out = await closed;
    const ms = Date.now() - killedAt;
    console.log(`[cli-wrapper] wrapper SIGKILLed -> runtime gone in ${ms} ms`);
    expect(out.signal).toBe("SIGKILL");
    expect(out.stderr).toContain(`cohort: the cohort wrapper (pid ${child.pid}) exited: stopping members (SIGTERM)`);
    expect(ms).toBeLessThan(GRACE_MS + 5_000);
    expect(alive(live.pid)).toBe(false);
    expect(processesOfRun(live.runId)).toEqual([]);
    expect(JSON.parse(fs.readFileSync(path.join(live.runDir, "completion.json"), "utf8"))).toMatchObject({ outcome: "interrupted" });
    expect(fs.readFileSync(path.join(live.runDir, "records.ndjson"), "utf8")).toContain('"signal":"SIGTERM"');
    const verified = await runBundle(bundle, ["ledger", "verify", live.runDir]);
    expect(verified.code, verified.stderr).toBe(0);
  }, 120_000);
});

/**
 * End to end, real Pulumi engine (file backend in a temp dir), real command provider and runtime: how a
 * `pulumi up --stack host` ends when it is interrupted or its run fails (issue #12, findings 1, 2, 6).
 * Members are tiny Node HTTP servers; holds are long enough to interrupt in.
 *
 * - SIGKILL of the `pulumi` CLI mid-hold: within the grace period + a few seconds no member and no runtime is
 *   left (found by COHORT_RUN_ID in /proc/<pid>/environ), nor the provider; the ledger is completed as
 *   interrupted; the next `up` runs one new run (no second live run) after the printed fix for the stale lock.
 * - SIGINT to the process group, no terminal (a CI runner, `timeout`): Pulumi gets it once (its graceful
 *   cancel, not "terminating immediately"), the run ends interrupted, no `cohort-run.*` temp file is left.
 * - While a run holds, an `up` of another stack on the same artifact root is refused naming the live run.
 * - A failed `up`: `stack output --json` names the failed run (outcome, first failure) and its specSha256,
 *   and the next `up` runs it again.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config";
import { copyProject } from "./project";

const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-e2e-int-"));
const projectDir = path.join(tmp, "project");
const artifactRoot = path.join(tmp, "artifacts");
const tmpdir = path.join(tmp, "tmpdir");
const env = {
  ...process.env,
  COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`,
  PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local",
  NO_COLOR: "1",
  TMPDIR: tmpdir,
};
const GRACE_MS = 2_000;
const server = [process.execPath, "-e", "require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.env.COHORT_PORT), '127.0.0.1')"];
const roster = (name: string, hold: string) =>
  JSON.stringify({ name, hold, stopGracePeriod: `${GRACE_MS / 1000}s`, roles: [{ name: "web", replicas: 2, app: { command: server }, readiness: { http: { path: "/" } } }] });

interface Result {
  readonly exitCode: number;
  readonly stdout: string;
  readonly all: string;
}

async function pulumi(args: readonly string[]): Promise<Result> {
  const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, ...args], { cwd: PROJECT_DIR, env, reject: false, all: true, stdin: "ignore" });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), all: String(r.all) };
}

async function ok(args: readonly string[]): Promise<Result> {
  const r = await pulumi(args);
  if (r.exitCode !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${r.all.slice(-4000)}`);
  return r;
}

/** `up` in its own session (a CI job's process group), its output collected. */
function startUp(stack: string): { pgid: number; done: Promise<{ code: number | null; out: string }> } {
  const child = spawn("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, "up", "--yes", "--skip-preview", "--stack", stack], {
    cwd: PROJECT_DIR,
    env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  return { pgid: child.pid as number, done: new Promise((resolve) => child.on("close", (code) => resolve({ code, out }))) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The run directory of a run of `name` that is ready (roster-ready in its ledger) and not yet in `seen`. */
async function readyRun(name: string, seen: ReadonlySet<string>, timeoutMs = 240_000): Promise<string> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(100)) {
    for (const d of existsSync(artifactRoot) ? readdirSync(artifactRoot) : []) {
      if (!d.startsWith(`${name}-`) || seen.has(d)) continue;
      try {
        if (readFileSync(path.join(artifactRoot, d, "records.ndjson"), "utf8").includes('"kind":"hold-started"')) return path.join(artifactRoot, d);
      } catch {
        // not yet
      }
    }
  }
  throw new Error(`no ready run of ${name} under ${artifactRoot}`);
}

function procs(): { pid: number; cmdline: string; environ: string[] }[] {
  const found = [];
  for (const name of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      found.push({
        pid: Number(name),
        cmdline: readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" "),
        environ: readFileSync(`/proc/${name}/environ`, "utf8").split("\0"),
      });
    } catch {
      // gone, or not ours
    }
  }
  return found;
}

/** Processes of a run: members and anything else with its COHORT_RUN_ID, and its runtime (cmdline names the bundle copy). */
const runProcesses = (runId: string) =>
  procs().filter((p) => p.environ.includes(`COHORT_RUN_ID=${runId}`) || (p.cmdline.includes(path.join(artifactRoot, ".runtime")) && p.cmdline.includes(" run ")));
const runtimes = () => procs().filter((p) => p.cmdline.includes(path.join(artifactRoot, ".runtime")) && p.cmdline.includes(" run --spec"));
const providers = () => procs().filter((p) => p.cmdline.includes("command-provider-main.ts") && p.environ.includes(`TMPDIR=${tmpdir}`));

const completion = (runDir: string) => JSON.parse(readFileSync(path.join(runDir, "completion.json"), "utf8")) as { outcome: string; interruptedBy?: string };

async function outputs(stack = "host"): Promise<{ run: Record<string, unknown> }> {
  return JSON.parse((await ok(["stack", "output", "--json", "--stack", stack])).stdout) as { run: Record<string, unknown> };
}

beforeAll(async () => {
  if (!existsSync(path.join(PROJECT_DIR, "dist", "cohort.cjs"))) throw new Error("dist/cohort.cjs is missing: run `npm run build` before the e2e tests");
  copyProject(projectDir, ["host"]);
  mkdirSync(tmpdir);
  mkdirSync(path.join(tmp, "state"));
  await ok(["stack", "select", "--create", "host"]);
  await ok(["config", "set", "--stack", "host", "artifactRoot", artifactRoot]);
}, 600_000);

afterAll(async () => {
  for (const stack of ["host", "host2"]) await pulumi(["cancel", "--yes", "--stack", stack]);
  await pulumi(["destroy", "--yes", "--stack", "host", "--skip-preview"]);
  await pulumi(["destroy", "--yes", "--stack", "host2", "--skip-preview"]);
  if (process.env.COHORT_E2E_KEEP !== "1") rmSync(tmp, { recursive: true, force: true });
}, 600_000);

describe("host profile, interrupted and failed runs (real engine)", () => {
  const seen = new Set<string>();

  it("a failed up: stack outputs name the failed run, its first failure and specSha256; the next up runs it again", async () => {
    await ok([
      "config",
      "set",
      "--stack",
      "host",
      "cohort",
      JSON.stringify({ name: "broken", roles: [{ name: "web", replicas: 2, app: { command: [process.execPath, "-e", "process.exit(3)"] } }] }),
    ]);
    const r = await pulumi(["up", "--yes", "--skip-preview", "--stack", "host"]);
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toMatch(/cohort: run broken-\S+ failed: member web-[01] exited before it was ready \(exit code 3\)/);
    const o = await outputs();
    const runDir = path.join(artifactRoot, String(o.run.id));
    seen.add(String(o.run.id));
    const manifest = JSON.parse(readFileSync(path.join(runDir, "manifest.json"), "utf8")) as { specSha256: string };
    expect(o.run).toMatchObject({ outcome: "failed", size: 2, readyCount: 0, ledgerPath: runDir, specSha256: manifest.specSha256 });
    expect((o.run.firstFailure as { member: string; reason: string }).member).toMatch(/^web-[01]$/);
    expect((o.run.firstFailure as { reason: string }).reason).toMatch(/exited before it was ready \(exit code 3\)/);
    expect(completion(runDir).outcome).toBe("failed");

    const again = await pulumi(["up", "--yes", "--skip-preview", "--stack", "host"]);
    expect(again.exitCode).not.toBe(0);
    const o2 = await outputs();
    expect(o2.run.id).not.toBe(o.run.id);
    expect(o2.run.outcome).toBe("failed");
    seen.add(String(o2.run.id));
  }, 600_000);

  it("SIGINT to the up's process group (no terminal): Pulumi cancels gracefully once, the run ends interrupted, no temp file is left", async () => {
    await ok(["config", "set", "--stack", "host", "cohort", roster("sigint", "120s")]);
    const up = startUp("host");
    const runDir = await readyRun("sigint", seen);
    const runId = path.basename(runDir);
    seen.add(runId);
    const sentAt = Date.now();
    process.kill(-up.pgid, "SIGINT");
    const { code, out } = await up.done;
    console.log(`[e2e interrupt] SIGINT to the group -> up exited ${code} after ${Date.now() - sentAt} ms`);
    expect(code).not.toBe(0);
    expect(out).toContain("^C received; cancelling.");
    expect(out).not.toContain("^C received; terminating");
    expect(completion(runDir)).toMatchObject({ outcome: "interrupted" });
    expect(runProcesses(runId)).toEqual([]);
    expect(readdirSync(tmpdir).filter((f) => f.startsWith("cohort-run."))).toEqual([]);
    console.log(`[e2e interrupt] SIGINT up output tail:\n${out.split("\n").slice(-25).join("\n")}`);
    console.log(`[e2e interrupt] outputs after SIGINT: ${JSON.stringify((await outputs()).run)}`);
    const state = JSON.parse((await ok(["stack", "export", "--stack", "host"])).stdout) as {
      deployment: { resources: { urn: string; outputs?: { stdout?: string } }[]; pending_operations?: unknown[] };
    };
    const inState = state.deployment.resources.find((res) => res.urn.endsWith("::cohort-run"));
    console.log(`[e2e interrupt] cohort-run in state after SIGINT: ${inState?.outputs?.stdout ?? "(none)"}; pending: ${JSON.stringify(state.deployment.pending_operations ?? [])}`);
  }, 600_000);

  it("Ctrl-C at a terminal (a pty from script(1)): Pulumi cancels gracefully once, the run ends interrupted", async () => {
    await ok(["config", "set", "--stack", "host", "cohort", roster("ctrlc", "120s")]);
    const command = ["npm", "run", "-s", "pulumi", "--", "-C", projectDir, "up", "--yes", "--skip-preview", "--stack", "host"].join(" ");
    const child = spawn("script", ["-q", "-e", "-f", "-c", command, "/dev/null"], { cwd: PROJECT_DIR, env, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    const runDir = await readyRun("ctrlc", seen);
    seen.add(path.basename(runDir));
    child.stdin.write("\x03");
    const code = await done;
    console.log(`[e2e interrupt] Ctrl-C at a pty -> up exited ${code}; output tail:\n${out.split("\n").slice(-12).join("\n")}`);
    expect(code).not.toBe(0);
    expect(out).toContain("^C received; cancelling.");
    expect(out).not.toContain("^C received; terminating");
    expect(completion(runDir)).toMatchObject({ outcome: "interrupted" });
    expect(runProcesses(path.basename(runDir))).toEqual([]);
  }, 600_000);

  it("SIGKILL of the pulumi CLI mid-hold (after a concurrent up on the same artifact root was refused naming the live run): members, runtime and provider are gone within the grace period + a few seconds, the ledger is completed as interrupted, and the next up runs one new run", async () => {
    await ok(["config", "set", "--stack", "host", "cohort", roster("killed", "120s")]);
    const up = startUp("host");
    const runDir = await readyRun("killed", seen);
    const runId = path.basename(runDir);
    seen.add(runId);
    expect(runProcesses(runId).length).toBeGreaterThanOrEqual(3);
    const lock = JSON.parse(readFileSync(path.join(artifactRoot, ".cohort-run.lock"), "utf8")) as { runId: string; pid: number };
    expect(lock.runId).toBe(runId);

    // Another stack, same artifact root: its run is refused, naming the live one and how to stop it.
    await ok(["stack", "init", "host2"]);
    await ok(["config", "set", "--stack", "host2", "profile", "host"]);
    await ok(["config", "set", "--stack", "host2", "artifactRoot", artifactRoot]);
    await ok(["config", "set", "--stack", "host2", "cohort", roster("second", "0s")]);
    const second = await pulumi(["up", "--yes", "--skip-preview", "--stack", "host2"]);
    expect(second.exitCode).not.toBe(0);
    expect(second.all).toContain(`cohort: refused: run ${runId} (runtime pid ${lock.pid}) is still running under ${artifactRoot}`);
    expect(second.all).toContain(`npx cohort reap --artifacts ${artifactRoot}`);
    expect(readdirSync(artifactRoot).filter((d) => d.startsWith("second-"))).toEqual([]);

    const cli = procs().filter((p) => (p.cmdline.split(" ")[0] ?? "").endsWith("/pulumi") && p.cmdline.includes(" up ") && p.cmdline.includes(projectDir));
    expect(cli).toHaveLength(1);
    const killedAt = Date.now();
    process.kill((cli[0] as { pid: number }).pid, "SIGKILL");
    let goneMs = -1;
    while (Date.now() - killedAt < GRACE_MS + 8_000) {
      if (runProcesses(runId).length === 0 && providers().length === 0) {
        goneMs = Date.now() - killedAt;
        break;
      }
      await sleep(50);
    }
    console.log(
      `[e2e interrupt] SIGKILL of pulumi -> run processes and provider gone after ${goneMs} ms (left: ${JSON.stringify(runProcesses(runId).map((p) => p.cmdline.slice(0, 100)))})`,
    );
    expect(runProcesses(runId)).toEqual([]);
    expect(providers()).toEqual([]);
    expect(goneMs).toBeGreaterThanOrEqual(0);
    expect(completion(runDir)).toMatchObject({ outcome: "interrupted" });
    await up.done;

    // The stale Pulumi lock: the next up refuses with Pulumi's message and the launcher's fix.
    await ok(["config", "set", "--stack", "host", "cohort", roster("after", "0s")]);
    const locked = await pulumi(["up", "--yes", "--skip-preview", "--stack", "host"]);
    console.log(`[e2e interrupt] up after SIGKILL: exit ${locked.exitCode}\n${locked.all.slice(-3000)}`);
    expect(locked.exitCode).not.toBe(0);
    expect(locked.all).toContain("the stack is currently locked by 1 lock(s)");
    expect(locked.all).toMatch(/cohort-lab: \S+ is stale: pid \d+ on this host is gone \(a killed pulumi\); remove it with `npm run pulumi -- cancel --stack host --yes`/);
    {
      await ok(["cancel", "--yes", "--stack", "host"]);
      const r = await pulumi(["up", "--yes", "--skip-preview", "--stack", "host"]);
      console.log(`[e2e interrupt] up after cancel: exit ${r.exitCode}\n${r.all.slice(-3000)}`);
      expect(r.exitCode).toBe(0);
    }
    const o = await outputs();
    expect(o.run).toMatchObject({ outcome: "succeeded" });
    expect(String(o.run.id)).toMatch(/^after-/);
    expect(runtimes()).toEqual([]);
    console.log(`[e2e interrupt] killed run's completion: ${JSON.stringify(completion(runDir))}`);

    // The killed up's pending create stays in the state (Pulumi warns on up/destroy only, without the
    // non-interactive fix); the launcher names the fix on preview too, and the fix works.
    const preview = await ok(["preview", "--stack", "host"]);
    expect(preview.all).toContain(
      "cohort-lab: stack host holds 1 pending create(s) left by an interrupted `pulumi up` (urn:pulumi:host::cohort-lab::cohortlab:runtime:CohortRun$command:local:Command::cohort-run); Pulumi keeps them until they are cleared. Clear them with `npm run pulumi -- refresh --clear-pending-creates --stack host --yes`",
    );
    await ok(["refresh", "--clear-pending-creates", "--stack", "host", "--yes"]);
    const clean = await ok(["preview", "--stack", "host", "--expect-no-changes"]);
    expect(clean.all).not.toContain("pending create");
    const destroy = await ok(["destroy", "--yes", "--skip-preview", "--stack", "host"]);
    console.log(`[e2e interrupt] destroy:\n${destroy.all.slice(-2000)}`);
  }, 900_000);
  it("`pulumi cancel` then `destroy` while an up is still running: the run never reached the state, and destroy stops it anyway (the guard reaps what the run lock names)", async () => {
    await ok(["config", "set", "--stack", "host", "cohort", roster("orphan", "120s")]);
    const up = startUp("host");
    const runDir = await readyRun("orphan", seen);
    const runId = path.basename(runDir);
    seen.add(runId);
    const lock = JSON.parse(readFileSync(path.join(artifactRoot, ".cohort-run.lock"), "utf8")) as { runId: string; pid: number };
    expect(lock.runId).toBe(runId);
    await ok(["cancel", "--yes", "--stack", "host"]);
    const started = Date.now();
    const destroy = await ok(["destroy", "--yes", "--skip-preview", "--stack", "host"]);
    console.log(
      `[e2e interrupt] destroy of a run not in the state: ${Date.now() - started} ms\n${destroy.all
        .split("\n")
        .filter((l) => l.includes("cohort-guard"))
        .join("\n")}`,
    );
    expect(destroy.all).toContain(`stopped runtime pid ${lock.pid} of run ${runId}`);
    expect(runProcesses(runId)).toEqual([]);
    expect(completion(runDir)).toMatchObject({ outcome: "interrupted" });
    const { code } = await up.done;
    expect(code).not.toBe(0);
    for (let i = 0; i < 100 && providers().length > 0; i++) await sleep(100);
    expect(providers()).toEqual([]);
  }, 600_000);
});

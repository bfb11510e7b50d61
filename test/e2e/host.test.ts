/**
 * End to end: the `host` profile with the real Pulumi engine (the pinned CLI through the project's
 * launcher, `npm run pulumi`), the real command provider and runtime, the file backend in a temp dir,
 * a temp artifact root. The stack's project directory is a temp copy of Pulumi.yaml + Pulumi.host.yaml
 * whose `main` is this repository's index.ts, so nothing in the work tree changes.
 *
 * Covers: a real OpenClaw cohort at the default size 4 (outputs succeeded, readyCount == size, the
 * ledger verifies, a second `up` changes nothing, destroy leaves no process and an empty stack); the
 * lifecycle with the cheap http-server preset (a changed size runs a new run with a new ledger and keeps
 * the old one; keepLedgers false deletes the ledger on destroy); a failed run fails `up` with the
 * member named; invalid config fails `preview` naming the key. Wall times are printed.
 *
 * Needs the toolchain (`npm run toolchain`) and the bundle (`npm run build`); it fails, not skips, without them.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config";
import { copyProject } from "./project";

const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-e2e-host-"));
const projectDir = path.join(tmp, "project");
const artifactRoot = path.join(tmp, "artifacts");
const env = {
  ...process.env,
  COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`,
  PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local",
  NO_COLOR: "1",
};
/** Every run id this file saw, for the process scan. */
const runIds = new Set<string>();

interface Result {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly all: string;
  readonly ms: number;
}

/** `npm run -s pulumi -- -C <project> <args>` from the repository root. */
async function pulumi(args: readonly string[]): Promise<Result> {
  const started = performance.now();
  const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, ...args], {
    cwd: PROJECT_DIR,
    env,
    reject: false,
    all: true,
    stdin: "ignore",
  });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr), all: String(r.all), ms: performance.now() - started };
}

async function ok(args: readonly string[]): Promise<Result> {
  const r = await pulumi(args);
  if (r.exitCode !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${r.all.slice(-4000)}`);
  return r;
}

const config = (...kv: string[]) => ok(["config", "set", "--stack", "host", ...kv]);

interface RunOut {
  id: string;
  outcome: string;
  size: number;
  readyCount: number;
  timeToReadyMs: number;
  ledgerPath: string;
  reportPath: string | null;
}
interface Outputs {
  profile: string;
  artifactRoot: string;
  run: RunOut;
}

async function outputs(): Promise<Outputs> {
  const r = await ok(["stack", "output", "--json", "--stack", "host"]);
  const o = JSON.parse(r.stdout) as Outputs;
  if (o.run?.id !== undefined) runIds.add(o.run.id);
  return o;
}

async function up(label: string, extra: readonly string[] = []): Promise<{ r: Result; o: Outputs }> {
  const r = await ok(["up", "--yes", "--stack", "host", "--skip-preview", ...extra]);
  const o = await outputs();
  console.log(
    `[e2e host] ${label}: pulumi up ${(r.ms / 1000).toFixed(1)} s wall; run ${o.run.id} size ${o.run.size} ready ${o.run.readyCount} timeToReady ${o.run.timeToReadyMs} ms`,
  );
  return { r, o };
}

async function ledgerVerify(dir: string): Promise<Result> {
  const started = performance.now();
  const r = await execa("npx", ["cohort", "ledger", "verify", dir], { cwd: PROJECT_DIR, env, reject: false, all: true });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr), all: String(r.all), ms: performance.now() - started };
}

/** Processes whose environment carries one of `ids` as COHORT_RUN_ID, or whose command line runs our bundle copy. */
function leftovers(ids: Iterable<string>): string[] {
  const wanted = [...ids].map((id) => `COHORT_RUN_ID=${id}`);
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
      if (environ.some((entry) => wanted.includes(entry)) || cmdline.includes(path.join(artifactRoot, ".runtime"))) found.push(`${pid}: ${cmdline.slice(0, 160)}`);
    } catch {
      // the process exited while we looked, or is not ours to read
    }
  }
  return found;
}

/** URNs of the resources in the stack's state, without the stack itself. */
async function stackResources(): Promise<string[]> {
  const r = await ok(["stack", "export", "--stack", "host"]);
  const deployment = (JSON.parse(r.stdout) as { deployment?: { resources?: { urn: string; type: string }[] } }).deployment;
  return (deployment?.resources ?? []).filter((res) => res.type !== "pulumi:pulumi:Stack").map((res) => res.urn);
}

beforeAll(async () => {
  const bundle = path.join(PROJECT_DIR, "dist", "cohort.cjs");
  if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run build\` before the e2e tests`);
  copyProject(projectDir, ["host"]);
  mkdirSync(path.join(tmp, "state"));
  await ok(["stack", "select", "--create", "host"]);
  await config("artifactRoot", artifactRoot);
}, 600_000);

afterAll(async () => {
  // Best effort if a test failed half way: leave no stack resources or processes behind.
  if (existsSync(path.join(tmp, "state"))) await pulumi(["destroy", "--yes", "--stack", "host", "--skip-preview"]);
  if (process.env.COHORT_E2E_KEEP !== "1") rmSync(tmp, { recursive: true, force: true });
}, 600_000);

describe("host profile, real engine", () => {
  it("invalid config fails `pulumi preview` with the key named, before anything is created", async () => {
    const cases: [string[], string][] = [
      [["--path", "cohort.size", "0"], "cohort-lab:cohort.size: must be an integer >= 1 (got 0)"],
      [["--path", "cohort.memberTimeout", "--", "-5s"], 'cohort-lab:cohort.memberTimeout: must be a duration that is not negative (got "-5s")'],
      [["cohort.size", "16"], 'cohort-lab:cohort.size: set without --path, so Pulumi stored a flat key named "cohort.size"'],
    ];
    for (const [kv, message] of cases) {
      await config(...kv);
      const r = await pulumi(["preview", "--stack", "host"]);
      console.log(`[e2e host] invalid config ${kv.join(" ")}: preview exit ${r.exitCode} in ${(r.ms / 1000).toFixed(1)} s`);
      expect(r.exitCode).not.toBe(0);
      expect(r.all).toContain(message);
      await ok(["config", "rm", "--stack", "host", ...(kv[0] === "--path" ? ["--path", kv[1] as string] : [kv[0] as string])]);
    }
    // A role needing an unknown role (a custom roster, set as one JSON object).
    const roles = [
      { name: "router", app: { command: ["node", "-e", "0"] } },
      { name: "agent", needs: ["db"], app: { command: ["node", "-e", "0"] } },
    ];
    // A whole object may also be set as JSON text in one key.
    await config("cohort", JSON.stringify({ roles }));
    const r = await pulumi(["preview", "--stack", "host"]);
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toContain('cohort-lab:cohort.roles[1].needs[0]: unknown role "db" (known: router, agent)');
    await ok(["config", "rm", "--stack", "host", "cohort"]);
    expect(await stackResources()).toEqual([]);
    expect(existsSync(artifactRoot)).toBe(false);
  }, 600_000);

  it("OpenClaw, default size 4: up succeeds with every member ready; the ledger verifies; a second up changes nothing; destroy leaves nothing running", async () => {
    const { o } = await up("openclaw size 4");
    expect(o.profile).toBe("host");
    expect(o.artifactRoot).toBe(artifactRoot);
    expect(o.run.outcome).toBe("succeeded");
    expect(o.run.size).toBe(4);
    expect(o.run.readyCount).toBe(o.run.size);
    expect(o.run.ledgerPath).toBe(path.join(artifactRoot, o.run.id));
    // The runtime wrote the HTML report beside the ledger; the output names it.
    expect(o.run.reportPath).toBe(path.join(o.run.ledgerPath, "report.html"));
    expect(readFileSync(o.run.reportPath!, "utf8")).toContain(`<code>${o.run.id}</code>`);
    expect(o.run.timeToReadyMs).toBeGreaterThan(0);

    const verify = await ledgerVerify(o.run.ledgerPath);
    expect(verify.exitCode, verify.all).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(o.run.ledgerPath, "manifest.json"), "utf8")) as { profile?: string };
    expect(manifest.profile).toBe("host");
    const ledgerText = ["manifest.json", "records.ndjson", "completion.json"].map((f) => readFileSync(path.join(o.run.ledgerPath, f), "utf8")).join("\n");
    expect(ledgerText).not.toMatch(/OPENCLAW_GATEWAY_TOKEN["=:]+\s*"?[0-9a-f]{32,}/);
    expect(leftovers([o.run.id])).toEqual([]);

    // Nothing changed, so the preview proposes nothing and a second `up` neither runs nor replaces anything.
    // (A rebuilt dist/cohort.cjs would be a change: the runtime's digest is a trigger.)
    const preview = await pulumi(["preview", "--stack", "host", "--expect-no-changes", "--diff"]);
    expect(preview.exitCode, preview.all.slice(-3000)).toBe(0);
    const again = await ok(["up", "--yes", "--stack", "host", "--expect-no-changes"]);
    console.log(`[e2e host] second up (no changes): ${(again.ms / 1000).toFixed(1)} s wall`);
    expect(again.all).toMatch(/6 unchanged/);
    expect((await outputs()).run.id).toBe(o.run.id);

    const destroy = await ok(["destroy", "--yes", "--stack", "host", "--skip-preview"]);
    console.log(`[e2e host] destroy: ${(destroy.ms / 1000).toFixed(1)} s wall`);
    expect(await stackResources()).toEqual([]);
    expect(leftovers(runIds)).toEqual([]);
    expect(existsSync(path.join(o.run.ledgerPath, "completion.json"))).toBe(true);
    expect(existsSync(path.join(artifactRoot, ".runtime"))).toBe(false);
  }, 1_800_000);

  it("http-server: a changed size runs a new run with a new ledger, the old one kept; keepLedgers false deletes on destroy", async () => {
    await config("--path", "cohort.app", "http-server");
    await config("--path", "cohort.size", "2");
    const first = (await up("http-server size 2")).o;
    expect(first.run).toMatchObject({ outcome: "succeeded", size: 2, readyCount: 2 });

    const again = await ok(["up", "--yes", "--stack", "host", "--expect-no-changes"]);
    expect(again.all).toMatch(/6 unchanged/);
    expect((await outputs()).run.id).toBe(first.run.id);

    await config("--path", "cohort.size", "3");
    const second = (await up("http-server size 3")).o;
    expect(second.run).toMatchObject({ outcome: "succeeded", size: 3, readyCount: 3 });
    expect(second.run.id).not.toBe(first.run.id);
    expect(second.run.ledgerPath).not.toBe(first.run.ledgerPath);
    expect((await ledgerVerify(first.run.ledgerPath)).exitCode).toBe(0);
    expect((await ledgerVerify(second.run.ledgerPath)).exitCode).toBe(0);

    // keepLedgers changes nothing that runs: the run and its outputs stay.
    await config("keepLedgers", "false");
    await ok(["up", "--yes", "--stack", "host", "--skip-preview"]);
    expect((await outputs()).run.id).toBe(second.run.id);

    await ok(["destroy", "--yes", "--stack", "host", "--skip-preview"]);
    expect(await stackResources()).toEqual([]);
    expect(leftovers(runIds)).toEqual([]);
    expect(existsSync(second.run.ledgerPath)).toBe(false);
    expect(existsSync(first.run.ledgerPath)).toBe(true);
    await ok(["config", "rm", "--stack", "host", "keepLedgers"]);
  }, 900_000);

  it("a failed run fails `pulumi up` with the runtime's one-line reason naming the member; the stack outputs name the failed run; destroy leaves nothing behind", async () => {
    const roles = [{ name: "web", replicas: 2, app: { command: [process.execPath, "-e", "process.exit(3)"] } }];
    await ok(["config", "rm", "--stack", "host", "cohort"]);
    await config("cohort", JSON.stringify({ name: "broken", roles }));
    const r = await pulumi(["up", "--yes", "--stack", "host", "--skip-preview"]);
    console.log(
      `[e2e host] failing run: up exit ${r.exitCode} in ${(r.ms / 1000).toFixed(1)} s\n${r.all
        .split("\n")
        .filter((l) => l.includes("web-"))
        .join("\n")}`,
    );
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toMatch(/error: cohort: run broken-\S+ failed: member web-[01] exited before it was ready \(exit code 3\)/);
    // The failed run is in the state, so the outputs name it (never the previous success).
    const runs = readdirSync(artifactRoot).filter((d) => d.startsWith("broken-"));
    expect(runs).toHaveLength(1);
    const o = await outputs();
    expect(o.run).toMatchObject({ id: runs[0], outcome: "failed", readyCount: 0 });
    const completion = JSON.parse(readFileSync(path.join(artifactRoot, runs[0] as string, "completion.json"), "utf8")) as { outcome: string; firstFailure: { member: string } };
    expect(completion.outcome).toBe("failed");
    expect(completion.firstFailure.member).toMatch(/^web-[01]$/);
    runIds.add(runs[0] as string);
    await ok(["destroy", "--yes", "--stack", "host", "--skip-preview"]);
    expect(await stackResources()).toEqual([]);
    expect(leftovers(runIds)).toEqual([]);
  }, 600_000);
});

/**
 * End to end: `pulumi up --stack sim` with the real Pulumi engine (the pinned CLI through the launcher), the
 * real command and kubernetes providers, and the real control plane, Kueue and Agent Sandbox as local processes.
 * The project directory is a temp copy of Pulumi.yaml + Pulumi.sim.yaml whose `main` is this repository's
 * index.ts; state dir, artifacts and the file backend are in a temp dir; the ports are a free block.
 *
 * Covers the "must show": a 100-member cohort admitted all-or-nothing (one gang Workload) and Ready, the
 * stack outputs and the ledger saying so; a cohort larger than the quota refused up front with the arithmetic; a
 * member whose pod fails (kwok failure stage) fails `up` fast, naming it; 1,000 members on enough fake nodes
 * become Ready; `pulumi destroy` leaves no process and no state dir. Wall times are printed.
 *
 * Skipped, with the reason, when the sim binaries or manifests are not in the cache. Needs the default toolchain
 * (`npm run toolchain`) and the bundle (`npm run build`).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { portNames } from "../../simctl/ports";
import { isRunning } from "../../simctl/procs";
import { readState, type SimState } from "../../simctl/state";
import { PROJECT_DIR } from "../../stacks/config";
import { simUnavailableReason } from "./harness";

const unavailable = simUnavailableReason();
const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-e2e-sim-"));
const projectDir = path.join(tmp, "project");
const artifactRoot = path.join(tmp, "artifacts");
const stateDir = path.join(tmp, "sim-state");
const env = {
  ...process.env,
  COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`,
  PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local",
  NO_COLOR: "1",
};
/** Every process the sim recorded while it ran (checked after destroy). */
const seen: SimState["processes"] = [];

interface Result {
  readonly exitCode: number;
  readonly stdout: string;
  readonly all: string;
  readonly ms: number;
}

async function pulumi(args: readonly string[]): Promise<Result> {
  const started = performance.now();
  const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, ...args], { cwd: PROJECT_DIR, env, reject: false, all: true, stdin: "ignore" });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), all: String(r.all), ms: performance.now() - started };
}

async function ok(args: readonly string[]): Promise<Result> {
  const r = await pulumi(args);
  if (r.exitCode !== 0) {
    const diagnostics = r.all.indexOf("Diagnostics:");
    throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${(diagnostics >= 0 ? r.all.slice(diagnostics) : r.all).slice(0, 6000)}`);
  }
  return r;
}

const config = (...kv: string[]) => ok(["config", "set", "--stack", "sim", ...kv]);

interface Outputs {
  profile: string;
  run: { id: string; outcome: string; size: number; readyCount: number; timeToReadyMs: number; ledgerPath: string };
  kubeContext: string;
  queues: { clusterQueue: string; localQueue: string };
}

async function outputs(): Promise<Outputs> {
  return JSON.parse((await ok(["stack", "output", "--json", "--stack", "sim"])).stdout) as Outputs;
}

function records(ledgerPath: string): Record<string, unknown>[] {
  return readFileSync(path.join(ledgerPath, "records.ndjson"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

function noteProcesses(): void {
  const s = readState(path.join(stateDir, "sim-state.json"));
  for (const p of s?.processes ?? []) if (!seen.some((q) => q.pid === p.pid)) seen.push(p);
}

/** A block of free consecutive loopback ports below the ephemeral range. */
async function freeBlock(): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once("error", () => resolve(false));
      s.listen({ host: "127.0.0.1", port, exclusive: true }, () => s.close(() => resolve(true)));
    });
  for (let base = 21000 + (process.pid % 50) * 100; base < 32000; base += 100) {
    let all = true;
    for (let i = 0; i < portNames.length && all; i += 1) all = await free(base + i);
    if (all) return base;
  }
  throw new Error("no free block of loopback ports");
}

const roster = (agents: number, extra: unknown[] = []) =>
  JSON.stringify({
    name: "society",
    startupTimeout: "5m",
    memberTimeout: "5m",
    admissionTimeout: "2m",
    hold: "2s",
    concurrency: 1000,
    stopGracePeriod: "2s",
    roles: [
      { name: "router", replicas: 1, app: { command: ["router"] }, resources: { cpu: "250m", memory: "256Mi" } },
      { name: "agent", replicas: agents, needs: ["router"], app: { command: ["agent"] }, resources: { cpu: "100m", memory: "128Mi" } },
      ...extra,
    ],
  });

describe.skipIf(unavailable !== undefined)("sim stack, real engine", () => {
  beforeAll(async () => {
    const bundle = path.join(PROJECT_DIR, "dist", "cohort.cjs");
    if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run build\` first`);
    mkdirSync(projectDir, { recursive: true });
    const project = readFileSync(path.join(PROJECT_DIR, "Pulumi.yaml"), "utf8");
    writeFileSync(path.join(projectDir, "Pulumi.yaml"), `${project.trimEnd()}\nmain: ${path.join(PROJECT_DIR, "index.ts")}\n`);
    writeFileSync(path.join(projectDir, "Pulumi.sim.yaml"), readFileSync(path.join(PROJECT_DIR, "Pulumi.sim.yaml")));
    symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(projectDir, "node_modules"));
    mkdirSync(path.join(tmp, "state"));
    await ok(["stack", "select", "--create", "sim"]);
    await config("artifactRoot", artifactRoot);
    await config("--path", "sim.stateDir", stateDir);
    await config("--path", "sim.portBase", String(await freeBlock()));
  }, 600_000);

  afterAll(async () => {
    if (existsSync(path.join(tmp, "state"))) await pulumi(["destroy", "--yes", "--stack", "sim", "--skip-preview"]);
    if (process.env.COHORT_E2E_KEEP !== "1") rmSync(tmp, { recursive: true, force: true });
  }, 900_000);

  it("refuses a cohort larger than the quota at preview, with the arithmetic, before anything exists", async () => {
    await config("--path", "cohort", roster(1299));
    const r = await pulumi(["preview", "--stack", "sim"]);
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toContain(
      "cohort-lab:cohort: 1300 members need 130150m CPU (router 1 × 250m + agent 1299 × 100m), more than the ClusterQueue quota of 127120m " +
        "(8 nodes × 15890m allocatable − 0m reserved = 127120m); Kueue admits the cohort all-or-nothing, so it would wait forever. " +
        "lower cohort.roles[1].replicas to at most 1268",
    );
    expect(existsSync(stateDir)).toBe(false);
  }, 600_000);

  it("100 members (Pulumi.sim.yaml): admitted as one gang Workload and Ready; outputs and ledger say so", async () => {
    await ok(["config", "rm", "--stack", "sim", "cohort"]);
    writeFileSync(path.join(projectDir, "Pulumi.sim.yaml"), readFileSync(path.join(PROJECT_DIR, "Pulumi.sim.yaml")));
    await config("artifactRoot", artifactRoot);
    await config("--path", "sim.stateDir", stateDir);
    await config("--path", "sim.portBase", String(await freeBlock()));
    const up = await ok(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    noteProcesses();
    const o = await outputs();
    console.log(`[e2e sim] 100 members: pulumi up ${(up.ms / 1000).toFixed(1)} s wall; timeToReady ${o.run.timeToReadyMs} ms`);
    expect(o.profile).toBe("sim");
    expect(o.run).toMatchObject({ outcome: "succeeded", size: 100, readyCount: 100 });
    expect(o.kubeContext).toBe("cohort-lab-sim");
    expect(o.queues).toEqual({ clusterQueue: "cohort-lab", localQueue: "cohort" });
    // Live progress (issue #16): the runtime's progress lines on the cohort-run row (process executor, status pipe).
    const progressRows = up.all.split("\n").filter((l) => /command:local:Command\s+cohort-run\s+creating.*startup: started \d+\/100/.test(l));
    console.log(`[e2e sim] ${progressRows.length} progress rows, e.g.\n${progressRows.slice(0, 5).join("\n")}`);
    expect(
      progressRows.some((l) => /\((ready|waiting): /.test(l)),
      up.all.slice(-4000),
    ).toBe(true);
    const recs = records(o.run.ledgerPath);
    const admitted = recs.find((r) => r.kind === "roster-admitted")!;
    expect(admitted.size).toBe(100);
    const stats = (recs.find((r) => r.kind === "backend-stats") as { stats: { podGroup: string; members: number; localQueue: string; admission: { admittedMs?: number } } }).stats;
    expect(stats.members).toBe(100);
    expect(stats.localQueue).toBe("cohort");
    expect(stats.admission.admittedMs).toBeGreaterThan(0);
    expect(recs.filter((r) => r.kind === "member-ready")).toHaveLength(100);
    const manifest = JSON.parse(readFileSync(path.join(o.run.ledgerPath, "manifest.json"), "utf8")) as { profile: string; backend: string };
    expect([manifest.profile, manifest.backend]).toEqual(["sim", "kubernetes"]);
    const verify = await execa(process.execPath, [path.join(PROJECT_DIR, "dist", "cohort.cjs"), "ledger", "verify", o.run.ledgerPath], { reject: false });
    expect(verify.exitCode, String(verify.stderr)).toBe(0);
    for (const p of seen) expect(isRunning(p), p.component).toBe(true);
  }, 1_800_000);

  it("a member whose pod fails fails `up` fast, naming it", async () => {
    await config("--path", "cohort", roster(20, [{ name: "doomed", replicas: 1, app: { command: ["x"], env: { SIM_FAIL: "true" } }, resources: { cpu: "100m", memory: "64Mi" } }]));
    const r = await pulumi(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    noteProcesses();
    console.log(`[e2e sim] failing member: pulumi up exit ${r.exitCode} in ${(r.ms / 1000).toFixed(1)} s`);
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toMatch(/doomed-0/);
  }, 1_800_000);

  it("1,000 members on 12 fake nodes become Ready", async () => {
    await config("--path", "sim.nodes", "12");
    await config("--path", "cohort", roster(999));
    const up = await ok(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    noteProcesses();
    const o = await outputs();
    console.log(`[e2e sim] 1,000 members: pulumi up ${(up.ms / 1000).toFixed(1)} s wall; timeToReady ${o.run.timeToReadyMs} ms`);
    expect(o.run).toMatchObject({ outcome: "succeeded", size: 1000, readyCount: 1000 });
  }, 3_600_000);

  it("destroy stops every process the sim started and removes its state dir", async () => {
    const d = await ok(["destroy", "--yes", "--stack", "sim", "--skip-preview"]);
    console.log(`[e2e sim] destroy: ${(d.ms / 1000).toFixed(1)} s wall`);
    expect(seen.length).toBeGreaterThanOrEqual(7);
    for (const p of seen) expect(isRunning(p), `${p.component} pid ${p.pid}`).toBe(false);
    expect(existsSync(stateDir)).toBe(false);
  }, 900_000);
});

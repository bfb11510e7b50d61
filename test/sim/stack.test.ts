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
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isRunning } from "../../simctl/procs";
import { PROJECT_DIR } from "../../stacks/config";
import { simUnavailableReason } from "./harness";
import { ledgerRecords as records, SimStackProject } from "./pulumi-stack";

const unavailable = simUnavailableReason();
const project = new SimStackProject("cohort-e2e-sim-");
const { stateDir } = project;
/** Every process the sim recorded while it ran (checked after destroy). */
const seen = project.seen;
const pulumi = (args: readonly string[]) => project.pulumi(args);
const ok = (args: readonly string[]) => project.ok(args);
const config = (...kv: string[]) => project.config(...kv);
const noteProcesses = () => project.noteProcesses();

interface Outputs {
  profile: string;
  run: { id: string; outcome: string; size: number; readyCount: number; timeToReadyMs: number; ledgerPath: string };
  kubeContext: string;
  queues: { clusterQueue: string; localQueue: string; temporalTaskQueue?: string };
  temporalAddress: string;
}

const outputs = () => project.outputs<Outputs>();

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
  beforeAll(() => project.setUp(), 600_000);

  afterAll(() => project.tearDown(), 900_000);

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
    project.writeStackFile();
    await project.configureSim();
    const up = await ok(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    noteProcesses();
    const o = await outputs();
    console.log(`[e2e sim] 100 members: pulumi up ${(up.ms / 1000).toFixed(1)} s wall; timeToReady ${o.run.timeToReadyMs} ms`);
    expect(o.profile).toBe("sim");
    expect(o.run).toMatchObject({ outcome: "succeeded", size: 100, readyCount: 100 });
    expect(o.kubeContext).toBe("cohort-lab-sim");
    expect(o.queues).toEqual({ clusterQueue: "cohort-lab", localQueue: "cohort", temporalTaskQueue: "cohort-lab-sim-runs" });
    // The Temporal dev server simctl started with the control plane (docs/temporal.md).
    expect(o.temporalAddress).toMatch(/^127\.0\.0\.1:\d+$/);
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
    // A second `up` changes nothing: every object reads back as rendered (the ClusterQueue's quota is written in
    // the canonical form Kueue's webhook stores, `456Gi` rather than `466944Mi`), and the run is not run again.
    const again = await ok(["preview", "--stack", "sim", "--expect-no-changes"]);
    console.log(`[e2e sim] preview --expect-no-changes after the 100-member up: ${(again.ms / 1000).toFixed(1)} s`);
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

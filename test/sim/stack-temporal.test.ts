/**
 * End to end, `sim.runAs: workflow` (docs/temporal.md "The sim stack"): `pulumi up --stack sim` runs the cohort
 * as a Temporal workflow (`cohort submit`, a detached `cohort worker`). The `pulumi` CLI SIGKILLed mid-hold, its
 * lock cleared (`cancel`) and its pending create cleared (`refresh --clear-pending-creates`, docs/host.md
 * "Interruption"), then `up` again: the same run id in the outputs, one workflow (`temporal workflow list`
 * with the pinned CLI), one ledger; `destroy` leaves no process (the worker included). Real engine, real
 * providers, real control plane and Temporal dev server (test/sim/pulumi-stack.ts).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUN_WORKER_PID_FILE } from "../../components/run/CohortRun";
import { isRunning } from "../../simctl/procs";
import { readState } from "../../simctl/state";
import { PROJECT_DIR } from "../../stacks/config";
import { simUnavailableReason } from "./harness";
import { SimStackProject } from "./pulumi-stack";
import { pulumiUpPid, sigkillPulumi, stillRunningAfter } from "../e2e/project";

const unavailable =
  simUnavailableReason() ?? (existsSync(path.join(PROJECT_DIR, "dist", "cohort-temporal.cjs")) ? undefined : "dist/cohort-temporal.cjs is missing: npm run build");
const project = new SimStackProject("cohort-e2e-sim-temporal-");
/** A live, non-zombie process (the worker is no child of ours: no start time to compare). */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const cohort = JSON.stringify({
  name: "durable",
  startupTimeout: "2m",
  memberTimeout: "2m",
  admissionTimeout: "2m",
  hold: "30s",
  stopGracePeriod: "2s",
  roles: [{ name: "agent", replicas: 3, app: { command: ["agent"] }, resources: { cpu: "100m", memory: "64Mi" } }],
});

/** Run directories under the artifact root (dot files are the step script's and the lock's). */
const ledgers = () => (existsSync(project.artifactRoot) ? readdirSync(project.artifactRoot).filter((d) => !d.startsWith(".")) : []);

describe.skipIf(unavailable !== undefined)("sim stack as a Temporal workflow, real engine", () => {
  beforeAll(async () => {
    await project.setUp();
    await project.config("--path", "sim.nodes", "1");
    await project.config("--path", "sim.runAs", "workflow");
    await project.config("--path", "cohort", cohort);
  }, 600_000);

  afterAll(() => project.tearDown(), 900_000);

  it("a SIGKILLed `up` mid-hold, then `up`: the same run, one workflow, one ledger; destroy leaves no process", async () => {
    const first = project.pulumi(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    // Wait until the run's members are ready (its ledger says so), then kill the CLI mid-hold.
    let runDir: string | undefined;
    const deadline = Date.now() + 480_000;
    while (Date.now() < deadline) {
      const [dir] = ledgers();
      if (dir !== undefined) {
        const recs = path.join(project.artifactRoot, dir, "records.ndjson");
        if (
          existsSync(recs) &&
          readFileSync(recs, "utf8")
            .split("\n")
            .filter((l) => l.includes('"member-ready"')).length === 3
        ) {
          runDir = path.join(project.artifactRoot, dir);
          break;
        }
      }
      await sleep(250);
    }
    expect(runDir, "the run's members never became ready").toBeDefined();
    // Still mid-hold (30 s), with time for the ready members' progress line to travel: the run's progress file,
    // runCohort's heartbeat details (1 s poll, 1 s throttle), the submitter's describe (1 s), the status pipe.
    await sleep(4_000);
    project.noteProcesses();
    const pid = pulumiUpPid(project.projectDir);
    expect(pid).toBeDefined();
    const providers = sigkillPulumi(pid!);
    // The CLI's provider plugins are stopped with it (pulumi-resource-kubernetes, at least: seen left running before).
    expect(providers.length).toBeGreaterThanOrEqual(1);
    const killed = await first;
    expect(killed.exitCode).not.toBe(0);
    expect(await stillRunningAfter(providers), "provider plugins still running after the CLI was SIGKILLed").toEqual([]);
    expect(existsSync(path.join(runDir!, "completion.json")), "the run ended with the killed up").toBe(false);
    // Live progress in workflow mode: the submitter showed the run's progress lines (runCohort's heartbeat details,
    // read with describe) on the cohort-run row while it waited.
    const progressRows = killed.all.split("\n").filter((l) => /command:local:Command\s+cohort-run\s+creating.*(startup|hold): started \d+\/3/.test(l));
    console.log(`[e2e sim temporal] ${progressRows.length} progress rows before the kill, e.g.\n${progressRows.slice(0, 3).join("\n")}`);
    expect(progressRows.length, killed.all).toBeGreaterThan(0);

    await project.ok(["cancel", "--yes", "--stack", "sim"]);
    const refresh = await project.pulumi(["refresh", "--clear-pending-creates", "--stack", "sim", "--yes"]);
    console.log(`[e2e sim temporal] refresh --clear-pending-creates: exit ${refresh.exitCode}`);
    const again = await project.ok(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    console.log(`[e2e sim temporal] up after the kill: ${(again.ms / 1000).toFixed(1)} s wall`);
    project.noteProcesses();
    const o = await project.outputs<{ run: { id: string; outcome: string; size: number; readyCount: number; ledgerPath: string }; temporalAddress: string }>();
    expect(o.run).toMatchObject({ id: path.basename(runDir!), outcome: "succeeded", size: 3, readyCount: 3, ledgerPath: runDir });
    expect(ledgers()).toEqual([path.basename(runDir!)]);
    const verify = await execa(process.execPath, [path.join(PROJECT_DIR, "dist", "cohort.cjs"), "ledger", "verify", runDir!], { reject: false });
    expect(verify.exitCode, String(verify.stderr)).toBe(0);

    const binary = readState(path.join(project.stateDir, "sim-state.json"))?.processes.find((p) => p.component === "temporal")?.binary;
    expect(binary).toBeDefined();
    const list = await execa(binary!, ["workflow", "list", "--address", o.temporalAddress, "--namespace", "default", "--query", 'WorkflowType="cohortRun"', "--output", "json"]);
    const workflows = JSON.parse(String(list.stdout) || "[]") as { execution: { workflowId: string } }[];
    expect(workflows).toHaveLength(1);
    expect(workflows[0]!.execution.workflowId).toMatch(/^cohort-lab\/sim\/[0-9a-f]{12}$/);

    const workerPid = Number(readFileSync(path.join(project.artifactRoot, RUN_WORKER_PID_FILE), "utf8").trim());
    expect(alive(workerPid), `worker pid ${workerPid}`).toBe(true);
    const d = await project.ok(["destroy", "--yes", "--stack", "sim", "--skip-preview"]);
    console.log(`[e2e sim temporal] destroy: ${(d.ms / 1000).toFixed(1)} s wall`);
    for (const p of project.seen) expect(isRunning(p), `${p.component} pid ${p.pid}`).toBe(false);
    expect(alive(workerPid), `worker pid ${workerPid}`).toBe(false);
    expect(existsSync(project.stateDir)).toBe(false);
  }, 1_500_000);
});

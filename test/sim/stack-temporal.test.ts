/**
 * End to end, `sim.runAs: workflow` (the default; docs/temporal.md "The sim stack"): `pulumi up --stack sim` runs
 * the cohort as a Temporal workflow (`cohort submit`, a detached `cohort worker`). The `pulumi` CLI SIGKILLed
 * mid-hold, its lock cleared (`cancel`) and its pending create cleared (`refresh --clear-pending-creates`,
 * docs/host.md "Interruption"); an `up` with a changed RoleSpec is refused while the run is open (the worker would
 * roll), the worker and the run untouched; then `up` with the program as it was: the same run id in the outputs,
 * one workflow (`temporal workflow list` with the pinned CLI), one ledger; a new run rolls the worker (another pid,
 * the new key) and succeeds; `destroy` leaves no process (the worker included). Real engine, real providers, real
 * control plane and Temporal dev server (test/sim/pulumi-stack.ts).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUN_WORKER_KEY_FILE, RUN_WORKER_PID_FILE } from "../../components/run/CohortRun";
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

/** The cohort with a given hold (another hold is another RoleSpec: a new run). */
const cohortHolding = (hold: string) =>
  JSON.stringify({
    name: "durable",
    startupTimeout: "2m",
    memberTimeout: "2m",
    admissionTimeout: "2m",
    hold,
    stopGracePeriod: "2s",
    roles: [{ name: "agent", replicas: 3, app: { command: ["agent"] }, resources: { cpu: "100m", memory: "64Mi" } }],
  });
// Long enough for the kill, cancel, refresh and the refused up (about 70 s here) to happen while the run is open.
const cohort = cohortHolding("150s");

/** Run directories under the artifact root (dot files are the step script's and the lock's). */
const ledgers = () => (existsSync(project.artifactRoot) ? readdirSync(project.artifactRoot).filter((d) => !d.startsWith(".")) : []);

describe.skipIf(unavailable !== undefined)("sim stack as a Temporal workflow, real engine", () => {
  beforeAll(async () => {
    await project.setUp();
    await project.config("--path", "sim.nodes", "1");
    // sim.runAs unset: workflow is the default.
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
    // Still mid-hold (150 s), with time for the ready members' progress line to travel: the run's progress file,
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

    // A changed RoleSpec while the run is open: a new run, whose worker would roll (a new run namespace, so a new
    // backend config). Refused, naming the open workflow; the worker and the run go on.
    const workerPidFile = path.join(project.artifactRoot, RUN_WORKER_PID_FILE);
    const workerBefore = Number(readFileSync(workerPidFile, "utf8").trim());
    const keyBefore = readFileSync(path.join(project.artifactRoot, RUN_WORKER_KEY_FILE), "utf8");
    await project.config("--path", "cohort", cohortHolding("151s"));
    const refused = await project.pulumi(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    console.log(`[e2e sim temporal] up with a changed RoleSpec while the run is open: exit ${refused.exitCode}, ${(refused.ms / 1000).toFixed(1)} s wall`);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.all).toMatch(/the run worker cannot roll while runs are open on task queue cohort-lab-sim-runs .*cohort-lab\/sim\/[0-9a-f]{12}/);
    expect(Number(readFileSync(workerPidFile, "utf8").trim())).toBe(workerBefore);
    expect(alive(workerBefore), `worker pid ${workerBefore}`).toBe(true);
    expect(readFileSync(path.join(project.artifactRoot, RUN_WORKER_KEY_FILE), "utf8")).toBe(keyBefore);
    expect(existsSync(path.join(runDir!, "completion.json")), "the refused up ended the run").toBe(false);
    await project.config("--path", "cohort", cohort);

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

    expect(Number(readFileSync(workerPidFile, "utf8").trim()), "the attached run's worker was rolled").toBe(workerBefore);

    // A new run (another RoleSpec, so another run namespace and backend config): the worker rolls, since nothing is
    // open on the queue; the run succeeds in the new worker.
    await project.config("--path", "cohort", cohortHolding("2s"));
    const next = await project.ok(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    console.log(`[e2e sim temporal] a new run, the worker rolled: ${(next.ms / 1000).toFixed(1)} s wall`);
    project.noteProcesses();
    const workerPid = Number(readFileSync(workerPidFile, "utf8").trim());
    expect(workerPid).not.toBe(workerBefore);
    expect(alive(workerBefore), `old worker pid ${workerBefore}`).toBe(false);
    expect(alive(workerPid), `worker pid ${workerPid}`).toBe(true);
    expect(readFileSync(path.join(project.artifactRoot, RUN_WORKER_KEY_FILE), "utf8")).not.toBe(keyBefore);
    const o2 = await project.outputs<{ run: { id: string; outcome: string; readyCount: number; ledgerPath: string } }>();
    expect(o2.run).toMatchObject({ outcome: "succeeded", readyCount: 3 });
    expect(o2.run.id).not.toBe(o.run.id);
    expect(readFileSync(path.join(project.artifactRoot, ".cohort-worker.log"), "utf8")).toContain(`run worker ${workerBefore} serves another run: stopping it`);

    const d = await project.ok(["destroy", "--yes", "--stack", "sim", "--skip-preview"]);
    console.log(`[e2e sim temporal] destroy: ${(d.ms / 1000).toFixed(1)} s wall`);
    for (const p of project.seen) expect(isRunning(p), `${p.component} pid ${p.pid}`).toBe(false);
    expect(alive(workerPid), `worker pid ${workerPid}`).toBe(false);
    expect(existsSync(project.stateDir)).toBe(false);
  }, 1_500_000);
});

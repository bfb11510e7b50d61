/**
 * The Temporal side of the sim profile against a real control plane and a real `temporal server start-dev`
 * (simctl starts it with the control plane; docs/temporal.md): the dev server is ready when simctl returns, a
 * restart of the server keeps the history (SQLite file in the state dir), and stop takes it down.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { controlPlaneBinaries } from "../../simctl/binaries.js";
import { startController, stopController } from "../../simctl/cluster.js";
import { findSimBinaries } from "../../simctl/binaries.js";
import { isRunning } from "../../simctl/procs.js";
import { startSim, simUnavailableReason, type SimHarness } from "./harness.js";

const execFileP = promisify(execFile);
const unavailable = simUnavailableReason(controlPlaneBinaries);

async function temporalCli(sim: SimHarness, args: readonly string[]): Promise<string> {
  const binary = sim.state.processes.find((p) => p.component === "temporal")?.binary;
  if (binary === undefined) throw new Error("no temporal process in the sim state");
  const r = await execFileP(binary, [...args, "--address", sim.temporalAddress, "--namespace", "default"], { timeout: 30_000 });
  return r.stdout;
}

describe.skipIf(unavailable !== undefined)("the sim's Temporal dev server", () => {
  let sim: SimHarness;
  beforeAll(async () => {
    sim = await startSim();
  }, 300_000);
  afterAll(async () => {
    await sim?.stop();
  });

  it("is serving on the sim's temporal port when simctl start returns, with its database in the state dir", async () => {
    expect(sim.temporalAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(await temporalCli(sim, ["operator", "cluster", "health"])).toContain("SERVING");
    expect(fs.existsSync(path.join(sim.stateDir, "temporal.db"))).toBe(true);
    const rec = sim.state.processes.find((p) => p.component === "temporal");
    expect(rec?.args).toEqual(expect.arrayContaining(["--headless", "--ip", "127.0.0.1", "--db-filename", path.join(sim.stateDir, "temporal.db")]));
  });

  it("keeps a workflow's history across a restart of the server (stop-controller, start-controller)", async () => {
    const out = JSON.parse(await temporalCli(sim, ["workflow", "start", "--type", "probe", "--task-queue", "probe-q", "--workflow-id", "history-probe", "--output", "json"])) as {
      runId: string;
    };
    expect(out.runId).toMatch(/\S/);
    const before = sim.state.processes.find((p) => p.component === "temporal")!;
    expect(await stopController("temporal", sim.stateDir, 5_000)).toMatch(/temporal \(pid \d+\): /);
    expect(isRunning(before)).toBe(false);
    await expect(temporalCli(sim, ["operator", "cluster", "health", "--command-timeout", "2s"])).rejects.toThrow();
    await startController("temporal", { stateDir: sim.stateDir, binaries: findSimBinaries(process.env, ["temporal"]) });
    const described = JSON.parse(await temporalCli(sim, ["workflow", "describe", "--workflow-id", "history-probe", "--output", "json"])) as {
      workflowExecutionInfo: { execution: { runId: string }; type: { name: string } };
    };
    expect(described.workflowExecutionInfo.execution.runId).toBe(out.runId);
    expect(described.workflowExecutionInfo.type.name).toBe("probe");
  }, 120_000);
});

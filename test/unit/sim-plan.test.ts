/**
 * The `sim` profile's plan (stacks/sim.ts `planSim`): config parsing with defaults, the quota derived from the
 * fake nodes exactly as on `local`, and every refusal before any resource exists — a cohort larger than the
 * quota, than the pods the nodes take, or that fits the quota but not the nodes — with the exact arithmetic.
 */
import { describe, expect, it } from "vitest";
import { parseStackConfig, type RawConfig } from "../../stacks/config";
import { planSim, SIM_PLACEHOLDER_IMAGE } from "../../stacks/sim";

const cohort = (replicas: number, cpu = "100m", memory = "128Mi") =>
  JSON.stringify({ name: "big", roles: [{ name: "agent", replicas, app: { command: ["a"] }, resources: { cpu, memory } }] });

function plan(raw: RawConfig) {
  const config = parseStackConfig(raw, { stack: "sim", projectDir: "/p", profileKeys: ["sim"] });
  return planSim({ config, raw, projectDir: "/p", stack: "sim", manifests: { kueue: [], agentSandbox: [] }, bundle: Buffer.from("bundle") });
}

describe("planSim", () => {
  it("defaults: 8 nodes, ports from 26400, no simulated delay, state in .sim/<stack>, the run a workflow; quota = 8 × e2-standard-16", () => {
    const p = plan({ cohort: cohort(100) });
    expect(p.sim).toEqual({ shape: "agents", nodes: 8, portBase: 26400, podReadyDelayMs: 0, podReadyJitterMs: 0, stateDir: "/p/.sim/sim", runAs: "workflow", queue: {} });
    expect(p.quota.nominalQuota).toEqual({ cpu: "127120m", memory: "456Gi" });
    expect(p.quota.arithmetic.cpu).toBe("8 nodes × 15890m allocatable − 0m reserved = 127120m");
    expect(p.kueueConfiguration.waitForPodsReady).toEqual({ timeout: "6m", blockAdmission: false, requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: 0 } });
    expect(p.resolved.spec.roles[0]!.app.image).toBe(SIM_PLACEHOLDER_IMAGE);
    expect(p.namespace).toMatch(/^big-[0-9a-f]{10}$/);
  });

  it("reads delays as durations and lowers the quota on request", () => {
    const p = plan({ cohort: cohort(10), sim: JSON.stringify({ nodes: 2, podReadyDelay: "1s", podReadyJitter: "2s", queue: { cpu: "10" } }) });
    expect([p.sim.podReadyDelayMs, p.sim.podReadyJitterMs]).toEqual([1000, 2000]);
    expect(p.quota.nominalQuota.cpu).toBe("10");
  });

  it("refuses a cohort larger than the quota, with the arithmetic", () => {
    expect(() => plan({ cohort: cohort(1300) })).toThrow(
      "cohort-lab:cohort: 1300 members need 130000m CPU (agent 1300 × 100m), more than the ClusterQueue quota of 127120m " +
        "(8 nodes × 15890m allocatable − 0m reserved = 127120m); Kueue admits the cohort all-or-nothing, so it would wait forever. " +
        "lower cohort.roles[0].replicas to at most 1271, lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("refuses a cohort with more members than the nodes take pods", () => {
    expect(() => plan({ cohort: cohort(1000) })).toThrow(
      "cohort-lab:cohort: 1000 members need 1000 pods, but the nodes take 8 nodes × 110 pods − 0 reserved = 880; lower the cohort to at most 880 members or add nodes",
    );
  });

  it("refuses a cohort that fits the quota but not the nodes", () => {
    expect(() => plan({ cohort: cohort(3, "10", "1Gi"), sim: JSON.stringify({ nodes: 2 }) })).toThrow(
      "cohort-lab:cohort: the members fit the quota but not the nodes: after the reserved pods, first-fit placement puts 2 of 3 members " +
        "(agents-0000: 1, agents-0001: 1) and has no node for the next agent member (10000m CPU, 1Gi); lower cohort.roles[0].replicas to at most 2, " +
        "lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("refuses bad sim keys, naming each", () => {
    expect(() => plan({ cohort: cohort(10), sim: JSON.stringify({ nodes: 0, colour: "red" }) })).toThrow(
      "cohort-lab:sim.nodes: must be an integer from 1 to 5000 (got 0)\ncohort-lab:sim.colour: unknown field (known fields: shape, nodes, portBase, podReadyDelay, podReadyJitter, stateDir, runAs, goGC, waitForPodsReadyTimeout, queue)",
    );
  });

  it("goGC: unset leaves simctl's default (no --go-gc, the control plane's identity unchanged); set, it is passed on; out of range, refused by key", () => {
    expect(plan({ cohort: cohort(10) }).sim.goGC).toBeUndefined();
    expect(plan({ cohort: cohort(10), sim: JSON.stringify({ goGC: 800 }) }).sim.goGC).toBe(800);
    expect(() => plan({ cohort: cohort(10), sim: JSON.stringify({ goGC: 10 }) })).toThrow("cohort-lab:sim.goGC: must be an integer from 25 to 10000 (got 10)");
    expect(() => plan({ cohort: cohort(10), sim: JSON.stringify({ goGC: "off" }) })).toThrow("cohort-lab:sim.goGC: must be an integer from 25 to 10000");
  });

  it("refuses a waitForPodsReadyTimeout not longer than the cohort's startupTimeout", () => {
    expect(() => plan({ cohort: cohort(10), sim: JSON.stringify({ waitForPodsReadyTimeout: "30s" }) })).toThrow(
      "cohort-lab:sim.waitForPodsReadyTimeout: 30s is not longer than the cohort's startupTimeout 5m: Kueue would evict the roster's Workload before the runtime's own deadline names the member that is late; set it above startupTimeout or leave it unset",
    );
  });

  it("needs a custom roster", () => {
    expect(() => plan({})).toThrow(
      "cohort-lab:cohort.roles: the sim profile runs members as Pods on simulated nodes, so it needs a custom roster (cohort.roles in the RunSpec shape); the app presets (openclaw) run host programs. See Pulumi.sim.yaml for an example",
    );
  });
});

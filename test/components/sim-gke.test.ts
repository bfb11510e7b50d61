/**
 * The `sim` profile with `sim.shape: gke` under Pulumi mocks (`pulumi up` mode): the gke profile's Kubernetes side
 * on fake nodes. Asserts what the shape promises: two FakeNodePools shaped like gke's pools (system nodes without a
 * taint, tainted agent nodes, each with its machine type's allocatable), the ResourceFlavor and ClusterQueue of
 * the gke profile (its flavor name, label and toleration, its quota with the DaemonSet requests subtracted), the
 * Kueue manager started with gke's Configuration (excluded namespaces, frameworks), and the run gated on both pools.
 * Nothing of GCP is registered. The real-engine counterpart is test/sim/gke-shape.test.ts.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { find, installMocks, settle, simCommandStdout, valueOf, type Registration } from "./local-harness.js";

const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-sim-gke-mock-"));
const stateDir = path.join(projectDir, ".sim", "sim");
const summary = {
  runId: "gkesim-20261130T080000Z-a1b2c3",
  outcome: "succeeded",
  size: 6,
  readyCount: 6,
  timeToReadyMs: 1234,
  ledgerPath: "/l",
  reportPath: "/l/r",
  firstFailure: null,
};
const simSummary = {
  stateDir,
  kubeconfig: path.join(stateDir, "kubeconfig"),
  kubeconfigYaml: "apiVersion: v1\nkind: Config\n",
  apiserverUrl: "https://127.0.0.1:36502",
  contextName: "cohort-lab-sim",
  ports: {},
};

let regs: Registration[] = [];
let outputs: import("../../stacks/profiles.js").StackOutputs;
let skipReason: string | undefined;
const byType = (type: string) => regs.filter((r) => r.type === type);
const command = (name: string) => find(regs, "command:local:Command", name);

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    console.warn(`sim gke-shape mock test SKIPPED: ${skipReason}`);
    return;
  }
  regs = await installMocks({
    preview: false,
    stack: "sim",
    stdoutFor: simCommandStdout({ simSummary, stateDir, runSummary: summary }),
  });
  pulumi.runtime.setAllConfig({
    "cohort-lab:artifactRoot": path.join(projectDir, "artifacts"),
    "cohort-lab:cohort": JSON.stringify({ name: "gkesim", roles: [{ name: "agent", replicas: 6, app: { command: ["a"] }, resources: { cpu: "100m", memory: "64Mi" } }] }),
    "cohort-lab:sim": JSON.stringify({ shape: "gke", portBase: 40200 }),
    "cohort-lab:gke": JSON.stringify({
      project: "placeholder-project",
      zone: "us-central1-a",
      bucketName: "placeholder-bucket",
      agentMachineType: "e2-standard-4",
      agentMaxNodes: 3,
    }),
  });
  const { parseStackConfig, readRawConfig } = await import("../../stacks/config.js");
  const { buildSim, simProfile } = await import("../../stacks/sim.js");
  const raw = readRawConfig();
  const config = parseStackConfig(raw, { stack: "sim", projectDir, profileKeys: simProfile.configKeys });
  outputs = buildSim({ stack: "sim", projectDir, config, raw }, { bundle: Buffer.from("// stand-in for dist/cohort.cjs\n") });
  await valueOf(outputs.run);
  await settle(regs, 50);
}, 900_000);

describe("sim profile graph, sim.shape gke", () => {
  it("registers gke's two pools as fake nodes: one untainted system node, three tainted agent nodes, each gated", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const nodes = byType("kubernetes:core/v1:Node");
    expect(nodes.map((n) => n.name)).toEqual(["system-system-0000", "agents-agents-0000", "agents-agents-0001", "agents-agents-0002"]);
    const meta = (n: Registration) => n.inputs.metadata as { labels: Record<string, string>; annotations: Record<string, string> };
    const taints = (n: Registration) => (n.inputs.spec as { taints: unknown[] }).taints;
    expect(meta(nodes[0]!).labels["cohort-lab.dev/pool"]).toBe("system");
    expect(taints(nodes[0]!)).toEqual([]);
    expect(meta(nodes[1]!).labels).toMatchObject({ "cohort-lab.dev/pool": "agents", "node.kubernetes.io/instance-type": "e2-standard-4" });
    expect(meta(nodes[1]!).annotations["sim.cohort-lab.dev/allocatable"]).toBe(`{"cpu":"3920m","memory":"${13621 * 2 ** 20}","pods":"110"}`);
    expect(taints(nodes[1]!)).toEqual([{ key: "cohort-lab.dev/agents", value: "true", effect: "NoSchedule" }]);
    expect(command("system-ready").inputs.create).toContain("'--pool' 'system' '--count' '1'");
    expect(command("agents-ready").inputs.create).toContain("'--pool' 'agents' '--count' '3'");
    const cohortComponent = find(regs, "cohortlab:runtime:CohortRun", "cohort");
    expect(cohortComponent.dependencies).toEqual(expect.arrayContaining([command("system-ready").urn, command("agents-ready").urn]));
  });

  it("uses gke's ResourceFlavor and quota (the agent pool less the DaemonSet requests), and gke's Kueue Configuration", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const rf = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "kueue:cohort-lab-gke-agents");
    expect(rf.inputs.spec).toEqual({
      nodeLabels: { "cohort-lab.dev/pool": "agents" },
      tolerations: [{ key: "cohort-lab.dev/agents", operator: "Equal", value: "true", effect: "NoSchedule" }],
    });
    const cq = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab");
    expect((cq.inputs.spec as { resourceGroups: { flavors: unknown[] }[] }).resourceGroups[0]!.flavors).toEqual([
      {
        name: "cohort-lab-gke-agents",
        resources: [
          { name: "cpu", nominalQuota: "10260m" },
          { name: "memory", nominalQuota: "37791Mi" },
        ],
      },
    ]);
    const stdin = command("sim-kueue").inputs.stdin as string;
    for (const ns of ["gke-managed-system", "gmp-system", "kueue-system"]) expect(stdin).toContain(`- ${ns}`);
    expect(stdin).toContain("- batch/job");
    expect(regs.filter((r) => r.type.startsWith("gcp:"))).toEqual([]);
    expect(byType("kubernetes:apps/v1:Deployment")).toEqual([]);
  });

  it("exports the same queues as every cluster profile", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await valueOf(outputs.queues)).toEqual({ clusterQueue: "cohort-lab", localQueue: "cohort", temporalTaskQueue: "cohort-lab-sim-runs" });
    expect(await valueOf(outputs.run)).toMatchObject({ outcome: "succeeded", size: 6, readyCount: 6 });
  });
});

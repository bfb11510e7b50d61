/**
 * The `sim` profile's graph under Pulumi mocks (one program, `pulumi up` mode): every registration is recorded
 * with its parent, provider and dependency URNs (local-harness.ts), and the test asserts what the profile
 * promises:
 * - the control plane Command (simctl start/stop) exists before any Kubernetes resource: every Kubernetes
 *   resource has the sim's provider, which depends on that Command; its stdout (the kubeconfig) is a secret;
 * - the fake nodes carry the kwok annotation, pool label and taint, and a gate waits for them;
 * - Kueue and Agent Sandbox are the SAME components as `local`, in `external` mode: no Deployments, the webhook
 *   Service is ExternalName on the sim's Kueue port, the manager's start (with the profile's Configuration on
 *   stdin) depends on the install objects and gates the ResourceFlavor and ClusterQueue;
 * - the quota is derived from the fake nodes; the flavor injects the agent pool's node label and toleration;
 * - the run: a `RunNamespace` (the same component as `local`, no in-cluster runtime: no ConfigMap, no Job) whose
 *   objects are aliased to the stack root where they were before it, the ServiceAccount credentials
 *   (`SimCluster.runCredentials`, aliased likewise), then the runtime out of cluster with `--backend kubernetes`
 *   and the backend config file; outputs have the CI contract's shape.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { find, installMocks, settle, simCommandStdout, valueOf, type Registration } from "./local-harness.js";

const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-sim-mock-"));
const artifactRoot = path.join(projectDir, "artifacts");
const stateDir = path.join(projectDir, ".sim", "sim");
const summary = {
  runId: "society-20261130T080000Z-a1b2c3",
  outcome: "succeeded",
  size: 100,
  readyCount: 100,
  timeToReadyMs: 2345,
  ledgerPath: path.join(artifactRoot, "society-20261130T080000Z-a1b2c3"),
  reportPath: path.join(artifactRoot, "society-20261130T080000Z-a1b2c3", "report.html"),
  firstFailure: null,
};
const simSummary = {
  stateDir,
  kubeconfig: path.join(stateDir, "kubeconfig"),
  kubeconfigYaml: "apiVersion: v1\nkind: Config\n# sim\n",
  apiserverUrl: "https://127.0.0.1:36502",
  contextName: "cohort-lab-sim",
  ports: {},
  temporalAddress: "127.0.0.1:36513",
};
const roles = [
  { name: "router", app: { command: ["router"] }, resources: { cpu: "250m", memory: "256Mi" } },
  { name: "agent", replicas: 99, needs: ["router"], app: { command: ["agent"] }, resources: { cpu: "100m", memory: "128Mi" } },
];

let regs: Registration[] = [];
let outputs: import("../../stacks/profiles.js").StackOutputs;
let skipReason: string | undefined;

const byType = (type: string) => regs.filter((r) => r.type === type);
const isKubernetes = (r: Registration) => r.type.startsWith("kubernetes:");
const command = (name: string) => find(regs, "command:local:Command", name);

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    console.warn(`sim mock test SKIPPED: ${skipReason}`);
    return;
  }
  regs = await installMocks({
    preview: false,
    stack: "sim",
    stdoutFor: simCommandStdout({ simSummary, stateDir, runSummary: summary }),
  });
  pulumi.runtime.setAllConfig({
    "cohort-lab:artifactRoot": artifactRoot,
    "cohort-lab:cohort": JSON.stringify({ name: "society", roles }),
    "cohort-lab:sim": JSON.stringify({ nodes: 3, portBase: 40100, podReadyDelay: "1s", podReadyJitter: "2s", goGC: 250 }),
  });
  const { parseStackConfig, readRawConfig } = await import("../../stacks/config.js");
  const { buildSim, simProfile } = await import("../../stacks/sim.js");
  const raw = readRawConfig();
  const config = parseStackConfig(raw, { stack: "sim", projectDir, profileKeys: simProfile.configKeys });
  outputs = buildSim({ stack: "sim", projectDir, config, raw }, { bundle: Buffer.from("// stand-in for dist/cohort.cjs\n") });
  await valueOf(outputs.run);
  await settle(regs, 100);
}, 900_000);

describe("sim profile graph", () => {
  it("starts the control plane with simctl (state dir, ports, simulated delay, GOGC) and stops it on delete", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const cp = command("sim-control-plane");
    expect(cp.parent).toBe(find(regs, "cohortlab:sim:SimCluster", "sim").urn);
    const create = cp.inputs.create as string;
    expect(create).toContain("'scripts/sim/simctl.ts' 'start' '--state-dir' '" + stateDir + "'");
    expect(create).toContain("'--pod-ready-delay-ms' '1000' '--pod-ready-jitter-ms' '2000'");
    expect(create).toContain("'--port-base' '40100'");
    expect(create).toContain("'--go-gc' '250'");
    expect(cp.inputs.delete).toContain(`'stop' '--state-dir' '${stateDir}'`);
    expect(cp.inputs.dir).toBe(projectDir);
  });

  it("gives every Kubernetes resource the sim's provider, which waits for the control plane", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const provider = find(regs, "pulumi:providers:kubernetes", "sim-provider");
    expect(provider.dependencies).toContain(command("sim-control-plane").urn);
    const kube = regs.filter(isKubernetes);
    expect(kube.length).toBeGreaterThan(20);
    for (const r of kube) expect(r.provider, `${r.type} ${r.name}`).toBe(`${provider.urn}::sim-provider-id`);
  });

  it("registers the fake nodes (kwok annotation, pool label, taint) and a Ready gate after them", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const nodes = byType("kubernetes:core/v1:Node");
    expect(nodes.map((n) => n.name)).toEqual(["agents-agents-0000", "agents-agents-0001", "agents-agents-0002"]);
    const meta = nodes[0]!.inputs.metadata as { labels: Record<string, string>; annotations: Record<string, string> };
    expect(meta.annotations["kwok.x-k8s.io/node"]).toBe("fake");
    expect(meta.annotations["sim.cohort-lab.dev/allocatable"]).toBe('{"cpu":"15890m","ephemeral-storage":"43Gi","memory":"57Gi","pods":"110"}');
    expect(meta.labels["cohort-lab.dev/pool"]).toBe("agents");
    expect((nodes[0]!.inputs.spec as { taints: unknown[] }).taints).toEqual([{ key: "cohort-lab.dev/agents", value: "true", effect: "NoSchedule" }]);
    const gate = command("agents-ready");
    for (const n of nodes) expect(gate.dependencies).toContain(n.urn);
    expect(gate.inputs.create).toContain("'wait-nodes' '--state-dir' '" + stateDir + "' '--pool' 'agents' '--count' '3'");
  });

  it("runs Kueue and Agent Sandbox out of cluster: no Deployments, ExternalName webhook Service on the sim's port", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(byType("kubernetes:apps/v1:Deployment")).toEqual([]);
    const svc = find(regs, "kubernetes:core/v1:Service", "kueue:kueue-system/kueue-webhook-service");
    expect((svc.inputs.spec as { type: string; externalName: string }).type).toBe("ExternalName");
    expect((svc.inputs.spec as { externalName: string }).externalName).toBe("localhost");
    expect((svc.inputs.spec as { ports: { port: number }[] }).ports.map((p) => p.port)).toEqual([40106]);
    const sandboxCrd = find(regs, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "agent-sandbox:sandboxes.agents.x-k8s.io");
    expect((sandboxCrd.inputs.spec as { conversion: unknown }).conversion).toEqual({ strategy: "None" });
  });

  it("starts the Kueue manager after its install objects, with the profile's Configuration on stdin, and gates the queue on it", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const kueueStart = command("sim-kueue");
    expect(kueueStart.inputs.create).toContain("'start-controller' 'kueue' '--state-dir' '" + stateDir + "' '--configuration' '-'");
    expect(kueueStart.inputs.delete).toContain("'stop-controller' 'kueue'");
    expect(kueueStart.inputs.stdin).toContain("waitForPodsReady:");
    expect(kueueStart.inputs.stdin).toContain("timeout: 6m");
    for (const crd of byType("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition").filter((c) => c.name.startsWith("kueue:"))) {
      expect(kueueStart.dependencies).toContain(crd.urn);
    }
    const cq = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab");
    expect(cq.dependencies).toContain(kueueStart.urn);
    const sandboxStart = command("sim-agent-sandbox");
    expect(sandboxStart.dependencies).toContain(find(regs, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "agent-sandbox:sandboxes.agents.x-k8s.io").urn);
  });

  it("derives the ClusterQueue quota from the 3 fake nodes; the flavor pins members to the pool and tolerates its taint", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const cq = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab");
    const flavors = (cq.inputs.spec as { resourceGroups: { flavors: { name: string; resources: unknown[] }[] }[] }).resourceGroups[0]!.flavors;
    expect(flavors).toEqual([
      {
        name: "cohort-lab-agents",
        resources: [
          { name: "cpu", nominalQuota: "47670m" },
          { name: "memory", nominalQuota: "171Gi" },
        ],
      },
    ]);
    const rf = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "kueue:cohort-lab-agents");
    expect(rf.inputs.spec).toEqual({
      nodeLabels: { "cohort-lab.dev/pool": "agents" },
      tolerations: [{ key: "cohort-lab.dev/agents", operator: "Equal", value: "true", effect: "NoSchedule" }],
    });
  });

  it("creates the run's objects, its ServiceAccount credentials, then submits the run as a workflow whose worker runs out of cluster with the backend config", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const lq = byType("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue");
    expect(lq).toHaveLength(1);
    expect(lq[0]!.dependencies).toContain(find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab").urn);
    expect(byType("kubernetes:batch/v1:Job")).toEqual([]);
    expect(byType("kubernetes:core/v1:ConfigMap").filter((c) => c.name.startsWith("run:"))).toEqual([]);
    // One RunNamespace (the token of its former name Runtime); its children keep the names they had at the stack root.
    const runNamespace = find(regs, "cohortlab:runtime:Runtime", "run");
    const children = regs.filter((r) => r.parent === runNamespace.urn);
    expect(children.map((r) => `${r.type.split(":").slice(1).join(":")} ${r.name.replace(/society-[0-9a-f]{10}/, "<ns>")}`).sort()).toEqual([
      "core/v1:Namespace run:<ns>",
      "core/v1:ServiceAccount run:<ns>/cohort-runtime",
      "kueue.x-k8s.io/v1beta2:LocalQueue run:<ns>/cohort",
      "rbac.authorization.k8s.io/v1:Role run:<ns>/cohort-runtime",
      "rbac.authorization.k8s.io/v1:RoleBinding run:<ns>/cohort-runtime",
    ]);
    // (besides the type aliases @pulumi/kubernetes adds for older API versions)
    for (const child of children) expect(child.aliases, child.name).toContainEqual({ name: "", noParent: true, parentUrn: "" });
    const creds = command("sim-run-credentials");
    expect(creds.parent).toBe(find(regs, "cohortlab:sim:SimCluster", "sim").urn);
    expect(creds.aliases).toEqual([{ name: "run-credentials", noParent: true, parentUrn: "" }]);
    const sa = children.find((r) => r.type === "kubernetes:core/v1:ServiceAccount")!;
    const rb = children.find((r) => r.type === "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")!;
    expect(creds.dependencies).toEqual(expect.arrayContaining([sa.urn, rb.urn]));
    expect(creds.inputs.create).toContain("'run-credentials' '--state-dir' '" + stateDir + "'");
    expect(creds.inputs.create).toContain("'--service-account' 'cohort-runtime' '--queue' 'cohort'");
    // The default run mode (sim.runAs workflow): `cohort submit` of the workflow cohort-lab/sim/<identity> to the
    // sim's Temporal, the run worker started for this run's backend config and bundle.
    const run = command("cohort-run");
    const env = run.inputs.environment as Record<string, string>;
    expect(run.inputs.create).toBe("cohort submit");
    expect(env).toMatchObject({
      COHORT_PROFILE: "sim",
      COHORT_BACKEND_CONFIG: path.join(stateDir, "runs", "ns", "backend.json"),
      COHORT_TEMPORAL_ADDRESS: "127.0.0.1:36513",
      COHORT_TASK_QUEUE: "cohort-lab-sim-runs",
      COHORT_WORKFLOW_ID: "cohort-lab/sim/0123456789ab",
      COHORT_BUNDLE_SHA256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    // The identity checks the worker's rollout too, so it has the worker's inputs; it waits for the guard.
    const identity = command("cohort-identity");
    expect(identity.inputs.environment).toMatchObject({ COHORT_BACKEND_CONFIG: env.COHORT_BACKEND_CONFIG, COHORT_TASK_QUEUE: "cohort-lab-sim-runs" });
    expect(identity.dependencies).toContain(command("cohort-guard").urn);
    expect(run.dependencies).toEqual(expect.arrayContaining([identity.urn, command("cohort-guard").urn]));
    // Live progress in `pulumi up` (issue #16): the submitter writes runCohort's heartbeats to the status pipe.
    expect(env.COHORT_STATUS_FD).toBe("3");
    expect(regs.filter((r) => r.name.endsWith("-progress"))).toEqual([]);
    const cohortComponent = find(regs, "cohortlab:runtime:CohortRun", "cohort");
    expect(cohortComponent.dependencies).toEqual(expect.arrayContaining([creds.urn, command("sim-kueue").urn, command("sim-agent-sandbox").urn, command("agents-ready").urn]));
  });

  it("exports the CI contract: run, kube context, kubeconfig (secret), Temporal address, queues", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(outputs.profile).toBe("sim");
    expect(await valueOf(outputs.run)).toEqual({
      id: summary.runId,
      outcome: "succeeded",
      size: 100,
      readyCount: 100,
      timeToReadyMs: 2345,
      ledgerPath: summary.ledgerPath,
      reportPath: summary.reportPath,
      firstFailure: null,
      specSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(await valueOf(outputs.kubeContext)).toBe("cohort-lab-sim");
    expect(await pulumi.isSecret(outputs.kubeconfig!)).toBe(true);
    expect(await valueOf(outputs.temporalAddress)).toBe("127.0.0.1:36513");
    expect(await valueOf(outputs.queues)).toEqual({ clusterQueue: "cohort-lab", localQueue: "cohort", temporalTaskQueue: "cohort-lab-sim-runs" });
  });
});

describe("sim.shape (cohort-lab:sim.shape)", () => {
  const cohort = JSON.stringify({ name: "gkesim", roles: [{ name: "agent", replicas: 6, app: { command: ["a"] }, resources: { cpu: "100m", memory: "64Mi" } }] });
  const gkeKeys = { project: "placeholder-project", zone: "us-central1-a", bucketName: "placeholder-bucket" };
  async function plan(raw: Record<string, string>) {
    const { parseStackConfig } = await import("../../stacks/config.js");
    const { planSim, simProfile } = await import("../../stacks/sim.js");
    const config = parseStackConfig(raw, { stack: "sim", projectDir, profileKeys: simProfile.configKeys });
    return planSim({ config, raw, projectDir, stack: "sim", manifests: { kueue: [], agentSandbox: [] }, bundle: Buffer.from("bundle") });
  }

  it("defaults to agents: one pool of sim.nodes e2-standard-16 agent nodes, the sim's own flavor", async () => {
    const p = await plan({ cohort, sim: JSON.stringify({ nodes: 2 }) });
    expect(p.sim.shape).toBe("agents");
    expect(p.pools.map((x) => [x.component, x.pool, x.count])).toEqual([["agents", "agents", 2]]);
    expect(p.queueNames.resourceFlavor).toBe("cohort-lab-agents");
    expect(p.gke).toBeUndefined();
  });

  it("gke: gke's two pools, quota (DaemonSet requests subtracted), flavor and Kueue Configuration, from gke's plan", async () => {
    const gke = { ...gkeKeys, systemNodes: 1, agentMachineType: "e2-standard-4", agentMaxNodes: 3 };
    const raw = { cohort, sim: JSON.stringify({ shape: "gke" }), gke: JSON.stringify(gke) };
    const p = await plan(raw);
    expect(p.pools.map((x) => [x.component, x.pool, x.count])).toEqual([
      ["system", "system", 1],
      ["agents", "agents", 3],
    ]);
    const [system, agents] = p.pools;
    expect(system!.shape.labels["cohort-lab.dev/pool"]).toBe("system");
    expect(system!.shape.taints).toEqual([]);
    expect(agents!.shape.labels).toMatchObject({ "cohort-lab.dev/pool": "agents", "cloud.google.com/gke-nodepool": "agents", "node.kubernetes.io/instance-type": "e2-standard-4" });
    expect(agents!.shape.taints).toEqual([{ key: "cohort-lab.dev/agents", value: "true", effect: "NoSchedule" }]);
    // e2-standard-4: 4000m − 80m GKE reservation = 3920m; 16Gi − 2662Mi − 100Mi = 13621Mi; less 500m / 1Gi per node.
    expect(agents!.shape.allocatable).toEqual({ cpu: "3920m", memory: String(13621 * 2 ** 20), pods: "110" });
    expect(p.quota.nominalQuota).toEqual({ cpu: "10260m", memory: "37791Mi" });
    expect(p.quota.arithmetic.cpu).toBe("3 nodes × 3920m allocatable − 1500m reserved = 10260m");
    expect(p.queueNames).toEqual({ resourceFlavor: "cohort-lab-gke-agents", clusterQueue: "cohort-lab", localQueue: "cohort" });
    // The same plan as the gke profile's own (planGke, preview; its default run mode reads the worker's bundles).
    const { parseStackConfig } = await import("../../stacks/config.js");
    const { GKE_EXCLUDED_NAMESPACES, gkeFlavor, planGke } = await import("../../stacks/gke.js");
    const { gkePlanProjectDir } = await import("./gke-harness.js");
    const gkeProjectDir = gkePlanProjectDir("cohort-sim-gke-plan-");
    const gkeRaw = { cohort: JSON.stringify({ ...JSON.parse(cohort), startupTimeout: "10m" }), gke: JSON.stringify(gke) };
    const gkePlan = planGke({
      config: parseStackConfig(gkeRaw, { stack: "gke", projectDir: gkeProjectDir, profileKeys: ["gke", "images"] }),
      raw: gkeRaw,
      projectDir: gkeProjectDir,
      dryRun: true,
      warn: () => undefined,
      manifests: { kueue: [], agentSandbox: [] },
      bundle: Buffer.from("bundle"),
    });
    expect(p.quota.nominalQuota).toEqual(gkePlan.quota.nominalQuota);
    expect(p.flavor).toEqual(gkeFlavor());
    expect(p.kueueConfiguration.excludedNamespaces).toEqual(GKE_EXCLUDED_NAMESPACES);
    expect(p.kueueConfiguration.frameworks).toEqual(gkePlan.configuration.frameworks);
    expect(p.kueueConfiguration.frameworks).toEqual(["batch/job", "pod"]);
  });

  it("gke with gke.systemNodes 0 registers the agent pool only", async () => {
    const p = await plan({ cohort, sim: JSON.stringify({ shape: "gke" }), gke: JSON.stringify({ ...gkeKeys, systemNodes: 0, agentMaxNodes: 1 }) });
    expect(p.pools.map((x) => x.pool)).toEqual(["agents"]);
  });

  it("refuses a bad shape, naming cohort-lab:sim.shape", async () => {
    await expect(plan({ cohort, sim: JSON.stringify({ shape: "gcp" }) })).rejects.toThrow(
      'cohort-lab:sim.shape: must be agents (sim.nodes fake agent nodes, the default) or gke (the gke profile\'s pools, quota and Kueue objects from cohort-lab:gke) (got "gcp")',
    );
  });

  it("gke: refuses missing gke keys, naming each", async () => {
    await expect(plan({ cohort, sim: JSON.stringify({ shape: "gke" }) })).rejects.toThrow(/cohort-lab:gke\.project: .*\ncohort-lab:gke\.zone: .*\ncohort-lab:gke\.bucketName: /);
    await expect(plan({ cohort, sim: JSON.stringify({ shape: "gke" }), gke: JSON.stringify({ ...gkeKeys, agentMachineType: "e2-tiny" }) })).rejects.toThrow(
      /cohort-lab:gke\.agentMachineType: "e2-tiny" is not a machine type whose shape the profile knows/,
    );
  });

  it("gke: refuses the sim keys gke's config owns, and gke's config without the shape", async () => {
    await expect(plan({ cohort, sim: JSON.stringify({ shape: "gke", nodes: 4, queue: { cpu: "1" } }), gke: JSON.stringify(gkeKeys) })).rejects.toThrow(
      "cohort-lab:sim.nodes: does not apply with sim.shape gke: the pools are gke's: set gke.agentMaxNodes and gke.systemNodes\n" +
        "cohort-lab:sim.queue: does not apply with sim.shape gke: the quota is gke's: set gke.queue",
    );
    await expect(plan({ cohort, gke: JSON.stringify(gkeKeys) })).rejects.toThrow("cohort-lab:gke: is read on the sim profile only with sim.shape gke");
  });

  it("gke: a cohort larger than gke's quota is refused with gke's arithmetic", async () => {
    const big = JSON.stringify({ name: "big", roles: [{ name: "agent", replicas: 40, app: { command: ["a"] }, resources: { cpu: "1", memory: "64Mi" } }] });
    await expect(
      plan({ cohort: big, sim: JSON.stringify({ shape: "gke" }), gke: JSON.stringify({ ...gkeKeys, agentMachineType: "e2-standard-4", agentMaxNodes: 3 }) }),
    ).rejects.toThrow("(3 nodes × 3920m allocatable − 1500m reserved = 10260m)");
  });
});

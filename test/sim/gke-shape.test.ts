/**
 * The gke profile's Kubernetes side on the sim (issue #13, "a gke-on-sim test"): `pulumi up --stack sim` with
 * `sim.shape: gke`, the real Pulumi engine and a file backend (test/sim/pulumi-stack.ts, as stack.test.ts), and
 * `cohort-lab:gke` with placeholder project, zone and bucket (no GCP API is called). The sim registers kwok nodes
 * shaped and labelled like gke's two pools (an e2-standard-2 system node without a taint, three tainted
 * e2-standard-4 agent nodes) and applies gke's ResourceFlavor, ClusterQueue (quota = gke's planGke quota, the
 * DaemonSet requests subtracted) and Kueue Configuration, with the controllers as the sim's local processes.
 *
 * Asserted with the sim's kubeconfig (@kubernetes/client-node): the nodes, their labels, taints and allocatable;
 * the ClusterQueue's nominal quota equals what the gke profile's own planner derives from the same config; while
 * `up` runs, the cohort's Workload is admitted to `cohort-lab` in flavor `cohort-lab-gke-agents` and every member
 * Pod is bound to an agent node, none to the system node (the ledger's member-ready records say the same); the
 * run succeeds with every member Ready; `pulumi destroy` stops every process and removes the state dir.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isRunning } from "../../simctl/procs";
import { parseQuantityValue } from "../../components/k8s/quantity";
import { parseStackConfig, PROJECT_DIR } from "../../stacks/config";
import { planGke } from "../../stacks/gke";
import { simUnavailableReason } from "./harness";
import { ledgerRecords, saltOnlyStackFile, SimStackProject } from "./pulumi-stack";

const unavailable = simUnavailableReason();
const project = new SimStackProject("cohort-e2e-gkesim-");
const gke = {
  project: "placeholder-project",
  zone: "us-central1-a",
  bucketName: "placeholder-bucket",
  systemMachineType: "e2-standard-2",
  systemNodes: 1,
  agentMachineType: "e2-standard-4",
  agentMaxNodes: 3,
  // gke's cold-start refusal (startupTimeout below it) for the same config on gke; the sim's nodes exist from the start.
  coldStart: "1m",
};
const cohort = {
  name: "gkesim",
  startupTimeout: "2m",
  memberTimeout: "2m",
  admissionTimeout: "2m",
  // Long enough for the watcher below to see the admitted Workload and the bound Pods while `up` runs.
  hold: "6s",
  concurrency: 10,
  stopGracePeriod: "2s",
  roles: [
    { name: "router", replicas: 1, app: { command: ["router"] }, resources: { cpu: "100m", memory: "64Mi" } },
    { name: "agent", replicas: 5, needs: ["router"], app: { command: ["agent"] }, resources: { cpu: "100m", memory: "64Mi" } },
  ],
};
const SIZE = 6;
const FLAVOR = "cohort-lab-gke-agents";

interface Outputs {
  profile: string;
  run: { id: string; outcome: string; size: number; readyCount: number; ledgerPath: string };
  queues: { clusterQueue: string; localQueue: string };
}

type Obj = { metadata: { name: string; namespace?: string }; spec?: any; status?: any };

/** What the watcher saw of the run while `up` ran. */
interface Seen {
  /** Pod name → node it was bound to. */
  readonly pods: Map<string, string>;
  /** Admitted Workloads: cluster queue and the flavors of every pod set. */
  readonly workloads: Map<string, { clusterQueue: string; flavors: string[] }>;
}

/** Polls the sim's API server every 500 ms (once its kubeconfig exists) until `done` resolves. */
async function watchRun(kubeconfig: string, namespacePrefix: string, done: Promise<unknown>): Promise<Seen> {
  const seen: Seen = { pods: new Map(), workloads: new Map() };
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => undefined);
  let core: k8s.CoreV1Api | undefined;
  let custom: k8s.CustomObjectsApi | undefined;
  while (!finished) {
    try {
      if (core === undefined && existsSync(kubeconfig)) {
        const kc = new k8s.KubeConfig();
        kc.loadFromFile(kubeconfig);
        core = kc.makeApiClient(k8s.CoreV1Api);
        custom = kc.makeApiClient(k8s.CustomObjectsApi);
      }
      if (core !== undefined && custom !== undefined) {
        for (const pod of (await core.listPodForAllNamespaces()).items) {
          if (pod.metadata?.namespace?.startsWith(namespacePrefix) && pod.spec?.nodeName) seen.pods.set(pod.metadata.name!, pod.spec.nodeName);
        }
        const wls = (await custom.listClusterCustomObject({ group: "kueue.x-k8s.io", version: "v1beta2", plural: "workloads" })) as { items: Obj[] };
        for (const wl of wls.items) {
          const admission = wl.status?.admission as { clusterQueue: string; podSetAssignments?: { flavors?: Record<string, string> }[] } | undefined;
          if (!wl.metadata.namespace?.startsWith(namespacePrefix) || admission === undefined) continue;
          seen.workloads.set(`${wl.metadata.namespace}/${wl.metadata.name}`, {
            clusterQueue: admission.clusterQueue,
            flavors: (admission.podSetAssignments ?? []).flatMap((a) => Object.values(a.flavors ?? {})),
          });
        }
      }
    } catch {
      // The API server is not up yet, or is going away: keep polling until `up` ends.
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return seen;
}

describe.skipIf(unavailable !== undefined)("sim.shape gke, real engine", () => {
  let api: { core: k8s.CoreV1Api; custom: k8s.CustomObjectsApi } | undefined;

  beforeAll(async () => {
    await project.setUp(saltOnlyStackFile());
    await project.config("--path", "sim.shape", "gke");
    await project.config("--path", "cohort", JSON.stringify(cohort));
    await project.config("--path", "gke", JSON.stringify(gke));
  }, 600_000);

  afterAll(() => project.tearDown(), 900_000);

  it("up: gke's nodes, queue and Kueue objects on the sim; the cohort admitted in gke's flavor and Ready on agent nodes only", async () => {
    const upPromise = project.ok(["up", "--yes", "--stack", "sim", "--skip-preview"]);
    const watching = watchRun(path.join(project.stateDir, "kubeconfig"), `${cohort.name}-`, upPromise);
    const up = await upPromise;
    const seen = await watching;
    project.noteProcesses();
    const o = await project.outputs<Outputs>();
    console.log(`[e2e gke-on-sim] ${SIZE} members: pulumi up ${(up.ms / 1000).toFixed(1)} s wall`);
    expect(o.profile).toBe("sim");
    expect(o.run).toMatchObject({ outcome: "succeeded", size: SIZE, readyCount: SIZE });
    expect(o.queues).toEqual({ clusterQueue: "cohort-lab", localQueue: "cohort", temporalTaskQueue: "cohort-lab-sim-runs" });

    // gke's own planner, on the same config: the quota and the allocatable the nodes must show.
    const gkeRaw = { cohort: JSON.stringify(cohort), gke: JSON.stringify(gke) };
    const gkePlan = planGke({
      config: parseStackConfig(gkeRaw, { stack: "gke", projectDir: PROJECT_DIR, profileKeys: ["gke", "images"] }),
      raw: gkeRaw,
      projectDir: PROJECT_DIR,
      dryRun: true,
      warn: () => undefined,
    });

    const kc = new k8s.KubeConfig();
    kc.loadFromFile(path.join(project.stateDir, "kubeconfig"));
    api = { core: kc.makeApiClient(k8s.CoreV1Api), custom: kc.makeApiClient(k8s.CustomObjectsApi) };
    const nodes = (await api.core.listNode()).items.sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!));
    expect(nodes.map((n) => n.metadata!.name)).toEqual(["agents-0000", "agents-0001", "agents-0002", "system-0000"]);
    for (const n of nodes) {
      const agent = n.metadata!.name!.startsWith("agents-");
      expect(n.metadata!.labels).toMatchObject({
        "cohort-lab.dev/pool": agent ? "agents" : "system",
        "cloud.google.com/gke-nodepool": agent ? "agents" : "system",
        "node.kubernetes.io/instance-type": agent ? gke.agentMachineType : gke.systemMachineType,
      });
      expect(n.spec!.taints ?? []).toEqual(agent ? [{ key: "cohort-lab.dev/agents", value: "true", effect: "NoSchedule" }] : []);
      expect(n.status!.conditions!.find((c) => c.type === "Ready")?.status).toBe("True");
    }
    const agentNode = nodes[0]!.status!.allocatable!;
    expect(parseQuantityValue(agentNode.cpu!, 1000)).toBe(gkePlan.agentAllocatable.cpuMilli);
    expect(parseQuantityValue(agentNode.memory!, 1)).toBe(gkePlan.agentAllocatable.memoryBytes);

    const cq = (await api.custom.getClusterCustomObject({ group: "kueue.x-k8s.io", version: "v1beta2", plural: "clusterqueues", name: "cohort-lab" })) as Obj;
    expect(cq.spec.resourceGroups[0].flavors).toEqual([
      {
        name: FLAVOR,
        resources: [
          { name: "cpu", nominalQuota: gkePlan.quota.nominalQuota.cpu },
          { name: "memory", nominalQuota: gkePlan.quota.nominalQuota.memory },
        ],
      },
    ]);
    // 3 × (e2-standard-4's 3920m − 500m of DaemonSet requests).
    expect(gkePlan.quota.nominalQuota.cpu).toBe("10260m");
    const rf = (await api.custom.getClusterCustomObject({ group: "kueue.x-k8s.io", version: "v1beta2", plural: "resourceflavors", name: FLAVOR })) as Obj;
    expect(rf.spec).toMatchObject({
      nodeLabels: { "cohort-lab.dev/pool": "agents" },
      tolerations: [{ key: "cohort-lab.dev/agents", operator: "Equal", value: "true", effect: "NoSchedule" }],
    });

    // While `up` ran: one admitted Workload in gke's flavor; every member Pod on an agent node.
    console.log(`[e2e gke-on-sim] seen: ${seen.workloads.size} admitted workload(s), pods ${JSON.stringify(Object.fromEntries(seen.pods))}`);
    expect(seen.workloads.size).toBeGreaterThanOrEqual(1);
    for (const [name, wl] of seen.workloads) {
      expect(wl.clusterQueue, name).toBe("cohort-lab");
      expect(wl.flavors.length, name).toBeGreaterThan(0);
      for (const f of wl.flavors) expect(f, name).toBe(FLAVOR);
    }
    expect(seen.pods.size).toBe(SIZE);
    for (const [pod, node] of seen.pods) expect(node, pod).toMatch(/^agents-\d{4}$/);

    // The ledger says the same: admitted to cohort-lab in gke's flavor, every member Ready on an agent node.
    const recs = ledgerRecords(o.run.ledgerPath);
    const stats = (recs.find((r) => r.kind === "backend-stats") as { stats: { admission: { clusterQueue: string; flavors: Record<string, string> } } }).stats;
    expect(stats.admission.clusterQueue).toBe("cohort-lab");
    expect(Object.values(stats.admission.flavors)).toEqual(expect.arrayContaining([FLAVOR]));
    for (const f of Object.values(stats.admission.flavors)) expect(f).toBe(FLAVOR);
    const ready = recs.filter((r) => r.kind === "member-ready");
    expect(ready).toHaveLength(SIZE);
    for (const r of ready) expect(r.node, String(r.member)).toMatch(/^agents-\d{4}$/);
  }, 900_000);

  it("destroy stops every process the sim started and removes its state dir", async () => {
    const d = await project.ok(["destroy", "--yes", "--stack", "sim", "--skip-preview"]);
    console.log(`[e2e gke-on-sim] destroy: ${(d.ms / 1000).toFixed(1)} s wall`);
    expect(project.seen.length).toBeGreaterThanOrEqual(7);
    for (const p of project.seen) expect(isRunning(p), `${p.component} pid ${p.pid}`).toBe(false);
    expect(existsSync(project.stateDir)).toBe(false);
    const left = await project.ok(["stack", "export", "--stack", "sim"]);
    const resources = (JSON.parse(left.stdout) as { deployment: { resources?: unknown[] } }).deployment.resources ?? [];
    expect(resources).toEqual([]);
  }, 900_000);
});

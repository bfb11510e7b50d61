/**
 * components/k8s/quota.ts: quantities, the derived ClusterQueue quota with its arithmetic, the config override
 * (lower only), and the refusal of a cohort that cannot fit — exact numbers and exact messages.
 */
import { describe, expect, it } from "vitest";
import {
  checkCohortFits,
  deriveQuota,
  formatCpu,
  formatCpuCanonical,
  formatMemory,
  parseQuantity,
  QuotaError,
  type NodeCapacity,
  type ReservedPods,
} from "../../components/k8s/quota.js";

const GI = 2 ** 30;
const MI = 2 ** 20;

describe("parseQuantity", () => {
  it.each([
    ["100m", 1000, 100],
    ["1", 1000, 1000],
    ["0.5", 1000, 500],
    [".5", 1000, 500],
    ["1.", 1000, 1000],
    ["2.25", 1000, 2250],
    ["1e3", 1000, 1_000_000],
    ["100n", 1000, 1], // rounded up to 1m, as Kubernetes does for CPU
    ["1500u", 1000, 2],
    ["1k", 1000, 1_000_000],
    ["128Mi", 1, 128 * MI],
    ["1.5Gi", 1, 1.5 * GI],
    ["1G", 1, 1_000_000_000],
    ["1Ki", 1, 1024],
    ["1000", 1, 1000],
    ["+2Gi", 1, 2 * GI],
    ["33554432000", 1, 33_554_432_000],
  ])("%s × %d = %d", (text, scale, expected) => {
    expect(parseQuantity(text, scale, "k")).toBe(expected);
  });

  it.each([
    ["abc", 'k: "abc" is not a Kubernetes quantity (e.g. 500m, 2, 1.5, 512Mi, 4Gi)'],
    ["", 'k: "" is not a Kubernetes quantity (e.g. 500m, 2, 1.5, 512Mi, 4Gi)'],
    [".", 'k: "." is not a Kubernetes quantity (e.g. 500m, 2, 1.5, 512Mi, 4Gi)'],
    ["1 Gi", 'k: "1 Gi" is not a Kubernetes quantity (e.g. 500m, 2, 1.5, 512Mi, 4Gi)'],
    ["-1", 'k: "-1" is negative'],
    ["5GB", 'k: "5GB" is not a Kubernetes quantity (e.g. 500m, 2, 1.5, 512Mi, 4Gi)'],
  ])("refuses %j", (text, message) => {
    expect(() => parseQuantity(text, 1000, "k")).toThrow(new QuotaError("k", message.slice(3)));
    expect(() => parseQuantity(text, 1000, "k")).toThrow(message);
  });

  it("formats a quota's CPU in the API server's canonical DecimalSI form (what Kueue's webhook stores and reads back)", () => {
    expect([0, 1, 999, 14750, 1000, 8000, 10260, 1_000_000, 2_000_000_000].map(formatCpuCanonical)).toEqual(["0", "1m", "999m", "14750m", "1", "8", "10260m", "1k", "2M"]);
    expect(() => formatCpuCanonical(-1)).toThrow(RangeError);
    expect(() => formatCpuCanonical(1.5)).toThrow(/non-negative integer/);
  });

  it("formats CPU in millicores and memory in the largest dividing binary unit", () => {
    expect([formatCpu(0), formatCpu(14750)]).toEqual(["0m", "14750m"]);
    expect([formatMemory(0), formatMemory(1000), formatMemory(512 * MI), formatMemory(32 * GI), formatMemory(64400 * MI), formatMemory(2 ** 40)]).toEqual([
      "0",
      "1000",
      "512Mi",
      "32Gi",
      "64400Mi",
      "1Ti",
    ]);
  });
});

/** A kind cluster on an 8-CPU, 32 GiB machine (what stacks/local.ts feeds in). */
const kindNodes: NodeCapacity[] = [
  {
    name: "cohort-lab-control-plane",
    allocatable: { cpu: "8", memory: String(32 * GI), pods: "110" },
    taints: [{ key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" }],
  },
  { name: "cohort-lab-worker", allocatable: { cpu: "8", memory: String(32 * GI), pods: "110" } },
  { name: "cohort-lab-worker2", allocatable: { cpu: "8", memory: String(32 * GI), pods: "110" } },
];

const reserved: ReservedPods[] = [
  { name: "kindnet", placement: "daemonset", requests: { cpu: "100m", memory: "50Mi" }, source: "kind" },
  { name: "kube-proxy", placement: "daemonset", requests: {}, source: "kubeadm" },
  { name: "coredns", placement: "replicas", count: 2, requests: { cpu: "100m", memory: "70Mi" }, source: "kubeadm" },
  { name: "kueue-controller-manager", placement: "replicas", count: 1, requests: { cpu: "500m", memory: "512Mi" }, source: "kueue" },
  { name: "temporal", placement: "replicas", count: 1, requests: { cpu: "100m", memory: "128Mi" }, source: "ours" },
  { name: "cohort runtime Job", placement: "replicas", count: 1, requests: { cpu: "250m", memory: "256Mi" }, source: "ours" },
];

describe("deriveQuota", () => {
  it("derives the quota from the schedulable nodes less the reserved requests, with the arithmetic", () => {
    const q = deriveQuota({ nodes: kindNodes, reserved });
    expect(q.excluded).toEqual([{ name: "cohort-lab-control-plane", reason: "taint node-role.kubernetes.io/control-plane:NoSchedule" }]);
    expect(q.capacity).toEqual({ cpuMilli: 16000, memoryBytes: 64 * GI });
    // 2 × 100m kindnet + 2 × 100m coredns + 500m + 100m + 250m
    expect(q.reserved).toEqual({ cpuMilli: 1250, memoryBytes: (2 * 50 + 2 * 70 + 512 + 128 + 256) * MI });
    expect(q.derived).toEqual({ cpuMilli: 14750, memoryBytes: (65536 - 1136) * MI });
    expect(q.quota).toEqual(q.derived);
    expect(q.nominalQuota).toEqual({ cpu: "14750m", memory: "64400Mi" });
    expect(q.arithmetic).toEqual({
      cpu: "2 nodes × 8000m allocatable − 1250m reserved = 14750m",
      memory: "2 nodes × 32Gi allocatable − 1136Mi reserved = 64400Mi",
    });
    // DaemonSet pods take room on every node: 8000m − 100m, 32Gi − 50Mi; pods 110 − 2 DaemonSets.
    expect(q.nodes.map((n) => [n.name, n.cpuMilli, n.memoryBytes, n.pods])).toEqual([
      ["cohort-lab-worker", 7900, 32 * GI - 50 * MI, 108],
      ["cohort-lab-worker2", 7900, 32 * GI - 50 * MI, 108],
    ]);
    expect(q.podCapacity).toBe(220);
    expect(q.reservedPodCount).toBe(2 + 2 + 2 + 1 + 1 + 1);
    expect(q.reservedItems.find((i) => i.name === "kindnet")).toEqual({ name: "kindnet", pods: 2, amount: { cpuMilli: 200, memoryBytes: 100 * MI }, source: "kind" });
  });

  it("names each node when their allocatable differ", () => {
    const q = deriveQuota({
      nodes: [
        { name: "a", allocatable: { cpu: "4", memory: "8Gi" } },
        { name: "b", allocatable: { cpu: "3500m", memory: "6Gi" } },
      ],
      reserved: [],
    });
    expect(q.arithmetic.cpu).toBe("7500m allocatable (a 4000m + b 3500m) − 0m reserved = 7500m");
    expect(q.arithmetic.memory).toBe("14Gi allocatable (a 8Gi + b 6Gi) − 0 reserved = 14Gi");
    expect(q.podCapacity).toBe(Infinity);
  });

  it("feeds e2-standard-16 style fake nodes (the sim profile's numbers) through the same arithmetic", () => {
    const nodes = Array.from({ length: 4 }, (_, i): NodeCapacity => ({ name: `kwok-${i}`, allocatable: { cpu: "15890m", memory: "57Gi", pods: "110" } }));
    const q = deriveQuota({ nodes, reserved: [] });
    expect(q.nominalQuota).toEqual({ cpu: "63560m", memory: "228Gi" });
    expect(q.arithmetic.cpu).toBe("4 nodes × 15890m allocatable − 0m reserved = 63560m");
  });

  it("honours the flavor's node labels and tolerations", () => {
    const nodes: NodeCapacity[] = [
      { name: "system", allocatable: { cpu: "4", memory: "16Gi" }, labels: { pool: "system" } },
      { name: "agents-1", allocatable: { cpu: "8", memory: "32Gi" }, labels: { pool: "agents" }, taints: [{ key: "agents", value: "true", effect: "NoSchedule" }] },
      {
        name: "agents-2",
        allocatable: { cpu: "8", memory: "32Gi" },
        labels: { pool: "agents" },
        taints: [{ key: "agents", value: "true", effect: "NoSchedule" }],
        unschedulable: true,
      },
    ];
    const q = deriveQuota({
      nodes,
      reserved: [],
      flavorNodeLabels: { pool: "agents" },
      flavorTolerations: [{ key: "agents", operator: "Equal", value: "true", effect: "NoSchedule" }],
    });
    expect(q.nodes.map((n) => n.name)).toEqual(["agents-1"]);
    expect(q.excluded).toEqual([
      { name: "system", reason: "no label pool=agents" },
      { name: "agents-2", reason: "cordoned (spec.unschedulable)" },
    ]);
    const untolerated = deriveQuota({ nodes: nodes.slice(0, 2), reserved: [] });
    expect(untolerated.excluded).toEqual([{ name: "agents-1", reason: "taint agents=true:NoSchedule" }]);
  });

  it("lets config lower the quota", () => {
    const q = deriveQuota({ nodes: kindNodes, reserved, override: { cpu: "6", memory: "24Gi" }, overrideKey: "cohort-lab:local.queue" });
    expect(q.quota).toEqual({ cpuMilli: 6000, memoryBytes: 24 * GI });
    expect(q.nominalQuota).toEqual({ cpu: "6", memory: "24Gi" });
    expect(q.derived.cpuMilli).toBe(14750);
  });

  it("refuses an override above what the nodes hold, naming the key and the numbers", () => {
    expect(() => deriveQuota({ nodes: kindNodes, reserved, override: { cpu: "20" }, overrideKey: "cohort-lab:local.queue" })).toThrow(
      "cohort-lab:local.queue.cpu: 20 (20000m) is more than the nodes can hold: 2 nodes × 8000m allocatable − 1250m reserved = 14750m; set it to at most 14750m or leave it unset",
    );
    expect(() => deriveQuota({ nodes: kindNodes, reserved, override: { memory: "64Gi" }, overrideKey: "cohort-lab:local.queue" })).toThrow(
      "cohort-lab:local.queue.memory: 64Gi (64Gi) is more than the nodes can hold: 2 nodes × 32Gi allocatable − 1136Mi reserved = 64400Mi; set it to at most 64400Mi or leave it unset",
    );
  });

  it("refuses a cluster where no node can run the cohort", () => {
    expect(() => deriveQuota({ nodes: kindNodes.slice(0, 1), reserved })).toThrow(
      "cohort-lab:queue: no node can run the cohort: cohort-lab-control-plane (taint node-role.kubernetes.io/control-plane:NoSchedule)",
    );
    expect(() => deriveQuota({ nodes: [], reserved })).toThrow("cohort-lab:queue: no node can run the cohort: the cluster has no nodes");
  });

  it("refuses a malformed allocatable quantity", () => {
    expect(() => deriveQuota({ nodes: [{ name: "n", allocatable: { cpu: "lots", memory: "1Gi" } }], reserved: [] })).toThrow(
      'node n allocatable.cpu: "lots" is not a Kubernetes quantity (e.g. 500m, 2, 1.5, 512Mi, 4Gi)',
    );
  });
});

describe("checkCohortFits", () => {
  const quota = deriveQuota({ nodes: kindNodes, reserved });

  it("accepts a cohort that fits and places it first-fit decreasing", () => {
    const fit = checkCohortFits(quota, [
      { name: "router", replicas: 1, requests: { cpu: "500m", memory: "256Mi" }, replicasKey: "cohort-lab:cohort.roles[0].replicas" },
      { name: "agent", replicas: 12, requests: { cpu: "1", memory: "1Gi" }, replicasKey: "cohort-lab:cohort.roles[1].replicas" },
    ]);
    expect(fit.demand).toEqual({ cpuMilli: 12_500, memoryBytes: 12 * GI + 256 * MI });
    // Reserved replicas first (kueue 500m, runtime 250m, coredns 2 × 100m, temporal 100m) all land on worker 1
    // (7900m − 1050m = 6850m): 6 agents there, 6 on worker 2, and the router in worker 1's remaining 850m.
    expect(fit.placement).toEqual({ "cohort-lab-worker": 7, "cohort-lab-worker2": 6 });
  });

  it("refuses a cohort whose summed requests exceed the quota, with the arithmetic and the largest size that fits", () => {
    expect(() => checkCohortFits(quota, [{ name: "agent", replicas: 40, requests: { cpu: "1100m", memory: "1Gi" }, replicasKey: "cohort-lab:cohort.roles[0].replicas" }])).toThrow(
      "cohort-lab:cohort: 40 members need 44000m CPU (agent 40 × 1100m), more than the ClusterQueue quota of 14750m (2 nodes × 8000m allocatable − 1250m reserved = 14750m); " +
        "Kueue admits the cohort all-or-nothing, so it would wait forever. lower cohort.roles[0].replicas to at most 13, lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("refuses on memory too, counting the other roles", () => {
    expect(() =>
      checkCohortFits(quota, [
        { name: "db", replicas: 1, requests: { memory: "16Gi" }, replicasKey: "cohort-lab:cohort.roles[0].replicas" },
        { name: "agent", replicas: 30, requests: { cpu: "100m", memory: "2Gi" }, replicasKey: "cohort-lab:cohort.roles[1].replicas" },
      ]),
    ).toThrow(
      "cohort-lab:cohort: 31 members need 76Gi memory (db 1 × 16Gi + agent 30 × 2Gi), more than the ClusterQueue quota of 64400Mi (2 nodes × 32Gi allocatable − 1136Mi reserved = 64400Mi); " +
        "Kueue admits the cohort all-or-nothing, so it would wait forever. lower cohort.roles[1].replicas to at most 23, lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("says when the quota was lowered by config", () => {
    const lowered = deriveQuota({ nodes: kindNodes, reserved, override: { cpu: "2" }, overrideKey: "cohort-lab:local.queue" });
    expect(() => checkCohortFits(lowered, [{ name: "agent", replicas: 3, requests: { cpu: "1" }, replicasKey: "cohort-lab:cohort.roles[0].replicas" }])).toThrow(
      "cohort-lab:cohort: 3 members need 3000m CPU (agent 3 × 1000m), more than the ClusterQueue quota of 2000m (lowered by config; the nodes could hold 2 nodes × 8000m allocatable − 1250m reserved = 14750m); " +
        "Kueue admits the cohort all-or-nothing, so it would wait forever. lower cohort.roles[0].replicas to at most 2, lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("refuses a member bigger than any node", () => {
    const big = deriveQuota({ nodes: [...kindNodes, { name: "w3", allocatable: { cpu: "8", memory: "32Gi", pods: "110" } }], reserved: reserved.slice(0, 1) });
    expect(() => checkCohortFits(big, [{ name: "agent", replicas: 1, requests: { cpu: "7950m" }, replicasKey: "cohort-lab:cohort.roles[0].replicas" }])).toThrow(
      "cohort-lab:cohort: a agent member requests 7950m CPU and 0 memory, but the largest node has 7900m CPU and 32718Mi memory free after its DaemonSet pods; no node can run it. Lower that role's requests",
    );
  });

  it("refuses a cohort the nodes cannot place although its sum fits the quota", () => {
    const twoNodes = deriveQuota({
      nodes: [
        { name: "a", allocatable: { cpu: "8", memory: "8Gi", pods: "110" } },
        { name: "b", allocatable: { cpu: "8", memory: "8Gi", pods: "110" } },
      ],
      reserved: [],
    });
    expect(() => checkCohortFits(twoNodes, [{ name: "agent", replicas: 3, requests: { cpu: "5" }, replicasKey: "cohort-lab:cohort.roles[0].replicas" }])).toThrow(
      "cohort-lab:cohort: the members fit the quota but not the nodes: after the reserved pods, first-fit placement puts 2 of 3 members (a: 1, b: 1) and has no node for the next agent member (5000m CPU, 0); " +
        "lower cohort.roles[0].replicas to at most 2, lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("refuses more members than the nodes take pods", () => {
    expect(() => checkCohortFits(quota, [{ name: "agent", replicas: 300, requests: { cpu: "10m", memory: "16Mi" }, replicasKey: "cohort-lab:cohort.roles[0].replicas" }])).toThrow(
      "cohort-lab:cohort: 300 members need 300 pods, but the nodes take 2 nodes × 110 pods − 9 reserved = 211; lower the cohort to at most 211 members or add nodes",
    );
  });

  it("accepts members without requests (Kueue counts them as 0)", () => {
    expect(checkCohortFits(quota, [{ name: "web", replicas: 4, requests: {}, replicasKey: "k" }]).demand).toEqual({ cpuMilli: 0, memoryBytes: 0 });
  });
});

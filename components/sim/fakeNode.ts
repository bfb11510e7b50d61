/**
 * The shape of a simulated node and its Node manifest: shared by the `FakeNodePool` component (Pulumi) and by the
 * sim supervisor and test harness (`simctl start --nodes N`), so both register identical nodes.
 *
 * A Node's `status` cannot be set through the Pulumi Kubernetes provider (NodeArgs has no `status`), so the
 * wanted allocatable travels in the annotation `sim.cohort-lab.dev/allocatable`; the sim's kwok
 * `node-initialize` stage copies it into `status.allocatable` and `status.capacity` (simctl/render.ts).
 */

/** Kubernetes resource quantities by resource name, e.g. `{ cpu: "15890m", memory: "57Gi" }`. */
export type ResourceList = Readonly<Record<string, string>>;

/** A node taint. */
export interface NodeTaint {
  readonly key: string;
  readonly value: string;
  readonly effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

/** What every node of a simulated pool looks like. */
export interface FakeNodeShape {
  /** `status.allocatable` (also used as capacity). Must include `pods`. */
  readonly allocatable: ResourceList;
  /** Labels of every node (the pool label among them). */
  readonly labels: Readonly<Record<string, string>>;
  readonly taints: readonly NodeTaint[];
}

/** The agent pool's label: what the `local` and `gke` profiles put on the nodes members may run on. */
export const agentPoolLabel = { key: "cohort-lab.dev/pool", value: "agents" } as const;

/** The agent pool's taint: only members (which tolerate it) land on agent nodes. */
export const agentPoolTaint: NodeTaint = { key: "cohort-lab.dev/agents", value: "true", effect: "NoSchedule" };

/**
 * A GKE `e2-standard-16` node of the agent pool: allocatable 15890m CPU, 57Gi memory, 43Gi ephemeral storage
 * (measured on GKE by the public simulator this project descends from: docs/sim.md "Fake nodes and the quota") and the GKE default of 110 pods per node.
 *
 * @see https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes (allocatable on GKE)
 * @see https://cloud.google.com/kubernetes-engine/quotas (110 pods per node)
 */
export const e2Standard16AgentNode: FakeNodeShape = {
  allocatable: { cpu: "15890m", memory: "57Gi", "ephemeral-storage": "43Gi", pods: "110" },
  labels: {
    [agentPoolLabel.key]: agentPoolLabel.value,
    "cloud.google.com/gke-nodepool": "agents",
    "node.kubernetes.io/instance-type": "e2-standard-16",
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    type: "kwok",
  },
  taints: [agentPoolTaint],
};

/** The annotation that marks a Node as kwok-managed (kwok runs with this annotation selector). */
export const kwokNodeAnnotation = { key: "kwok.x-k8s.io/node", value: "fake" } as const;

/** Annotation carrying the wanted allocatable as JSON (read by the sim's node-initialize stage). */
export const allocatableAnnotation = "sim.cohort-lab.dev/allocatable";

/** A Node manifest (the fields we set). */
export interface FakeNodeManifest {
  readonly apiVersion: "v1";
  readonly kind: "Node";
  readonly metadata: {
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
  };
  readonly spec: { readonly taints: readonly NodeTaint[] };
  /** Honoured on create by the API server (a Node's create keeps status, as kubelet registration relies on). */
  readonly status: { readonly allocatable: ResourceList; readonly capacity: ResourceList };
}

/**
 * Name of the `index`-th node of a pool, e.g. `agents-0007`.
 */
export function fakeNodeName(pool: string, index: number): string {
  return `${pool}-${String(index).padStart(4, "0")}`;
}

/**
 * Renders the Node of one simulated node.
 *
 * @param pool - DNS-1123 label used as the name prefix.
 * @param index - 0-based index in the pool.
 */
export function fakeNodeManifest(pool: string, index: number, shape: FakeNodeShape): FakeNodeManifest {
  const name = fakeNodeName(pool, index);
  const allocatableJson = JSON.stringify(Object.fromEntries(Object.entries(shape.allocatable).sort(([a], [b]) => a.localeCompare(b))));
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      labels: { ...shape.labels, "kubernetes.io/hostname": name },
      annotations: {
        [kwokNodeAnnotation.key]: kwokNodeAnnotation.value,
        [allocatableAnnotation]: allocatableJson,
        "node.alpha.kubernetes.io/ttl": "0",
      },
    },
    spec: { taints: shape.taints },
    status: { allocatable: shape.allocatable, capacity: shape.allocatable },
  };
}

/**
 * A fake node as the quota arithmetic sees it (components/k8s/quota.ts `NodeCapacity`): the same allocatable,
 * labels and taints the node is registered with.
 */
export function toNodeCapacity(m: FakeNodeManifest): {
  name: string;
  allocatable: { cpu: string; memory: string; pods?: string };
  labels: Readonly<Record<string, string>>;
  taints: readonly NodeTaint[];
} {
  const a = m.status.allocatable;
  if (a.cpu === undefined || a.memory === undefined) throw new Error(`fake node ${m.metadata.name}: allocatable needs cpu and memory`);
  return {
    name: m.metadata.name,
    allocatable: { cpu: a.cpu, memory: a.memory, ...(a.pods !== undefined ? { pods: a.pods } : {}) },
    labels: m.metadata.labels,
    taints: m.spec.taints,
  };
}

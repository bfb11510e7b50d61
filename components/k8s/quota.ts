/**
 * Queue quota arithmetic (pure; no Pulumi, no I/O): how much CPU and memory a Kueue ClusterQueue may admit,
 * derived from what the cluster's nodes can actually hold, and whether a cohort fits in it.
 *
 * Why: a ClusterQueue whose `nominalQuota` exceeds what the nodes can schedule admits workloads whose pods
 * then stay Pending forever while still holding quota (kubernetes-sigs/kueue#1651, #1530).
 * So the quota is derived, never guessed:
 *
 *   quota = Σ allocatable of the eligible nodes − Σ requests of the pods that will run there besides the cohort
 *
 * - Eligible nodes: schedulable, no `NoSchedule`/`NoExecute` taint the flavor does not tolerate, and every
 *   `nodeLabels` entry of the ResourceFlavor present (a kind control-plane is tainted, so it is excluded).
 * - Reserved requests: DaemonSet pods once per eligible node; other system pods (Deployment replicas, the
 *   runtime Job) counted in full against the eligible nodes, since nothing keeps them off them.
 * - A configured quota may only lower the derived one; raising it above capacity is an error with the numbers.
 *
 * A cohort fits when (1) the summed requests of its members are within the quota (Kueue admits a pod group
 * all-or-nothing: a group bigger than the quota is never admitted), (2) every member fits on some node, and
 * (3) the members can be placed on the nodes' free capacity (first-fit decreasing, after the reserved pods).
 * Each refusal carries the arithmetic and the fix.
 *
 * @see https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#meaning-of-cpu (quantities)
 * @see https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#resources (nominalQuota)
 */
import { parseQuantityValue, QuantityError } from "./quantity.js";
import { CohortLabError } from "../errors.js";

/** Amounts in base units: CPU in millicores, memory in bytes. */
export interface Amount {
  readonly cpuMilli: number;
  readonly memoryBytes: number;
}

/** A node's taint (`spec.taints[]`). */
export interface Taint {
  readonly key: string;
  readonly value?: string;
  readonly effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

/** A pod's toleration (`spec.tolerations[]`), as a ResourceFlavor injects it. */
export interface Toleration {
  readonly key?: string;
  readonly operator?: "Exists" | "Equal";
  readonly value?: string;
  readonly effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

/** A node as the quota sees it (the fields of `v1.Node` that matter). */
export interface NodeCapacity {
  readonly name: string;
  /** `status.allocatable` quantities, e.g. `{ cpu: "8", memory: "32Gi", pods: "110" }`. */
  readonly allocatable: { readonly cpu: string; readonly memory: string; readonly pods?: string };
  readonly labels?: Readonly<Record<string, string>>;
  readonly taints?: readonly Taint[];
  /** `spec.unschedulable` (cordoned). @default false */
  readonly unschedulable?: boolean;
}

/** Pods that run on the nodes besides the cohort, with where each number comes from. */
export interface ReservedPods {
  /** Short name for the arithmetic, e.g. `kindnet`. */
  readonly name: string;
  /** `daemonset`: one pod per eligible node; `replicas`: `count` pods somewhere on the eligible nodes. */
  readonly placement: "daemonset" | "replicas";
  /** Pods for `replicas` placement. @default 1 */
  readonly count?: number;
  /** Requests of ONE pod (sum over its containers), Kubernetes quantities. Absent = 0. */
  readonly requests: { readonly cpu?: string; readonly memory?: string };
  /** Where the numbers come from (a URL or a file of a pinned release). */
  readonly source: string;
}

/** Inputs of {@link deriveQuota}. */
export interface QuotaInput {
  readonly nodes: readonly NodeCapacity[];
  readonly reserved: readonly ReservedPods[];
  /** The ResourceFlavor's `nodeLabels` (nodes must carry all). @default {} */
  readonly flavorNodeLabels?: Readonly<Record<string, string>>;
  /** The ResourceFlavor's `tolerations`. @default [] */
  readonly flavorTolerations?: readonly Toleration[];
  /** A lower quota from config (quantities). Raising it above the derived quota is an error. */
  readonly override?: { readonly cpu?: string; readonly memory?: string };
  /** Config key of the override, for messages. @default "cohort-lab:queue" */
  readonly overrideKey?: string;
}

/** One eligible node after the per-node reservations. */
export interface NodeRoom extends Amount {
  readonly name: string;
  /** `allocatable` of the node. */
  readonly allocatable: Amount;
  /** Pods the node still takes after its DaemonSet pods (`Infinity` when `allocatable.pods` is not given). */
  readonly pods: number;
  /** `allocatable.pods` (`Infinity` when not given). */
  readonly allocatablePods: number;
}

/** The derived quota with its arithmetic. */
export interface QuotaResult {
  /** Nodes that can run the cohort, with room left after DaemonSet pods. */
  readonly nodes: readonly NodeRoom[];
  /** Nodes left out and why. */
  readonly excluded: readonly { readonly name: string; readonly reason: string }[];
  /** Σ allocatable of the eligible nodes. */
  readonly capacity: Amount;
  /** Σ reserved requests. */
  readonly reserved: Amount;
  /** capacity − reserved (never below 0). */
  readonly derived: Amount;
  /** The quota to configure: `derived`, or the lower override. */
  readonly quota: Amount;
  /**
   * `nominalQuota` values for the ClusterQueue in the API server's canonical form (memory rounded down to Mi, then
   * {@link formatCpuCanonical} and {@link formatMemory}): `{ cpu: "14750m", memory: "64400Mi" }`, `{ cpu: "10",
   * memory: "456Gi" }`. Canonical, so the live object reads back the same text and a second `up` changes nothing.
   */
  readonly nominalQuota: { readonly cpu: string; readonly memory: string };
  /** One line per resource, e.g. `cpu: 2 nodes × 8000m allocatable − 1500m reserved = 14500m`. */
  readonly arithmetic: { readonly cpu: string; readonly memory: string };
  /** The reserved pods' contributions, for docs and messages. */
  readonly reservedItems: readonly { readonly name: string; readonly pods: number; readonly amount: Amount; readonly source: string }[];
  /** One entry per reserved pod that is not a DaemonSet pod (placed before the members in the fit check). */
  readonly reservedReplicaPods: readonly Amount[];
  /** Σ allocatable pods of the eligible nodes (`Infinity` when a node does not say). */
  readonly podCapacity: number;
  /** Reserved pods (DaemonSet pods on the eligible nodes + the other reserved pods). */
  readonly reservedPodCount: number;
}

/** A quantity or quota was refused; `key` names the config key or input field. */
export class QuotaError extends CohortLabError {
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(`${key}: ${reason}`, { propertyPath: key });
    this.name = "QuotaError";
  }
}

/**
 * Parses a Kubernetes quantity exactly (components/k8s/quantity.ts) and scales it.
 *
 * @param scale - 1000 for CPU in millicores, 1 for bytes
 * @returns the value × scale, rounded UP to an integer (Kubernetes rounds CPU requests up to 1m)
 * @throws {QuotaError} naming `key` for a malformed or negative quantity
 */
export function parseQuantity(text: string, scale: number, key: string): number {
  try {
    return parseQuantityValue(text, scale);
  } catch (error) {
    if (!(error instanceof QuantityError)) throw error;
    const reason = error.problem === "negative" ? "is negative" : error.problem === "too large" ? "is too large" : "is not a Kubernetes quantity (e.g. 500m, 2, 1.5, 512Mi, 4Gi)";
    throw new QuotaError(key, `${JSON.stringify(text)} ${reason}`);
  }
}

/** Millicores as text: `500m`, `8000m`. */
export function formatCpu(milli: number): string {
  return `${milli}m`;
}

/**
 * Millicores in the API server's canonical form: the largest decimal suffix (`m`, none, `k`, `M`) whose mantissa is
 * an integer (`14750m`, `8000m` → `8`, `2000000m` → `2k`, `0`). A quantity stored in another form is read back
 * canonicalized (`8000m` comes back as `8`), so a ClusterQueue rendered with it shows the same text the server
 * returns and a second `pulumi up` has nothing to change.
 *
 * @throws RangeError for a negative or non-integer millicore count.
 * @see https://github.com/kubernetes/apimachinery/blob/master/pkg/api/resource/quantity.go (`CanonicalizeBytes`, DecimalSI)
 */
export function formatCpuCanonical(milli: number): string {
  if (!Number.isSafeInteger(milli) || milli < 0) throw new RangeError(`millicores must be a non-negative integer, got ${milli}`);
  if (milli === 0) return "0";
  if (milli % 1000 !== 0) return `${milli}m`;
  let value = milli / 1000;
  for (const unit of ["", "k", "M", "G", "T", "P"]) {
    if (value % 1000 !== 0 || unit === "P") return `${value}${unit}`;
    value /= 1000;
  }
  return `${value}E`;
}

/**
 * Bytes as text in the largest binary unit that divides them (`512Mi`, `32Gi`, `1000` bytes stay bytes): for a
 * multiple of 1 Ki this is the API server's canonical BinarySI form (`466944Mi` is stored and read back as `456Gi`).
 *
 * @see https://github.com/kubernetes/apimachinery/blob/master/pkg/api/resource/quantity.go (`CanonicalizeBytes`, BinarySI)
 */
export function formatMemory(bytes: number): string {
  for (const [unit, size] of [
    ["Ti", 2 ** 40],
    ["Gi", 2 ** 30],
    ["Mi", 2 ** 20],
    ["Ki", 2 ** 10],
  ] as const) {
    if (bytes !== 0 && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes}`;
}

function tolerates(tolerations: readonly Toleration[], taint: Taint): boolean {
  return tolerations.some((t) => {
    if (t.effect !== undefined && t.effect !== taint.effect) return false;
    if (t.key === undefined || t.key === "") return t.operator === "Exists";
    if (t.key !== taint.key) return false;
    return t.operator === "Exists" || (t.value ?? "") === (taint.value ?? "");
  });
}

function amountOf(requests: ReservedPods["requests"], key: string): Amount {
  return {
    cpuMilli: requests.cpu === undefined ? 0 : parseQuantity(requests.cpu, 1000, `${key}.cpu`),
    memoryBytes: requests.memory === undefined ? 0 : parseQuantity(requests.memory, 1, `${key}.memory`),
  };
}

function describeCapacity(nodes: readonly NodeRoom[], pick: (a: Amount) => number, format: (n: number) => string): string {
  const values = nodes.map((n) => pick(n.allocatable));
  const total = values.reduce((a, b) => a + b, 0);
  const label = nodes.length === 1 ? "node" : "nodes";
  if (values.every((v) => v === values[0])) return `${nodes.length} ${label} × ${format(values[0] ?? 0)} allocatable`;
  return `${format(total)} allocatable (${nodes.map((n) => `${n.name} ${format(pick(n.allocatable))}`).join(" + ")})`;
}

/**
 * Derives the ClusterQueue quota from the nodes and the reserved pods.
 *
 * @throws {QuotaError} when a quantity is malformed, no node is eligible, or the override exceeds the derived quota
 */
export function deriveQuota(input: QuotaInput): QuotaResult {
  const overrideKey = input.overrideKey ?? "cohort-lab:queue";
  const flavorLabels = input.flavorNodeLabels ?? {};
  const tolerations = input.flavorTolerations ?? [];
  const excluded: { name: string; reason: string }[] = [];
  const eligible: NodeCapacity[] = [];
  for (const node of input.nodes) {
    const blocking = (node.taints ?? []).find((t) => t.effect !== "PreferNoSchedule" && !tolerates(tolerations, t));
    const missing = Object.entries(flavorLabels).find(([k, v]) => node.labels?.[k] !== v);
    if (node.unschedulable === true) excluded.push({ name: node.name, reason: "cordoned (spec.unschedulable)" });
    else if (blocking !== undefined) excluded.push({ name: node.name, reason: `taint ${blocking.key}${blocking.value ? `=${blocking.value}` : ""}:${blocking.effect}` });
    else if (missing !== undefined) excluded.push({ name: node.name, reason: `no label ${missing[0]}=${missing[1]}` });
    else eligible.push(node);
  }
  if (eligible.length === 0) {
    throw new QuotaError(overrideKey, `no node can run the cohort: ${excluded.map((e) => `${e.name} (${e.reason})`).join(", ") || "the cluster has no nodes"}`);
  }

  const items = input.reserved.map((r) => {
    const one = amountOf(r.requests, `reserved ${r.name}`);
    const pods = r.placement === "daemonset" ? eligible.length : (r.count ?? 1);
    return { name: r.name, pods, perPod: one, placement: r.placement, source: r.source, amount: { cpuMilli: one.cpuMilli * pods, memoryBytes: one.memoryBytes * pods } };
  });
  const perNodeDaemon = items
    .filter((i) => i.placement === "daemonset")
    .reduce((a, i) => ({ cpuMilli: a.cpuMilli + i.perPod.cpuMilli, memoryBytes: a.memoryBytes + i.perPod.memoryBytes }), { cpuMilli: 0, memoryBytes: 0 });
  const daemonPodsPerNode = items.filter((i) => i.placement === "daemonset").length;
  const nodes: NodeRoom[] = eligible.map((n) => {
    const allocatable = {
      cpuMilli: parseQuantity(n.allocatable.cpu, 1000, `node ${n.name} allocatable.cpu`),
      memoryBytes: parseQuantity(n.allocatable.memory, 1, `node ${n.name} allocatable.memory`),
    };
    const allocatablePods = n.allocatable.pods === undefined ? Infinity : parseQuantity(n.allocatable.pods, 1, `node ${n.name} allocatable.pods`);
    return {
      name: n.name,
      allocatable,
      cpuMilli: Math.max(0, allocatable.cpuMilli - perNodeDaemon.cpuMilli),
      memoryBytes: Math.max(0, allocatable.memoryBytes - perNodeDaemon.memoryBytes),
      allocatablePods,
      pods: Math.max(0, allocatablePods - daemonPodsPerNode),
    };
  });
  const capacity = nodes.reduce((a, n) => ({ cpuMilli: a.cpuMilli + n.allocatable.cpuMilli, memoryBytes: a.memoryBytes + n.allocatable.memoryBytes }), {
    cpuMilli: 0,
    memoryBytes: 0,
  });
  const reserved = items.reduce((a, i) => ({ cpuMilli: a.cpuMilli + i.amount.cpuMilli, memoryBytes: a.memoryBytes + i.amount.memoryBytes }), {
    cpuMilli: 0,
    memoryBytes: 0,
  });
  const derived = { cpuMilli: Math.max(0, capacity.cpuMilli - reserved.cpuMilli), memoryBytes: Math.max(0, capacity.memoryBytes - reserved.memoryBytes) };
  const arithmetic = {
    cpu: `${describeCapacity(nodes, (a) => a.cpuMilli, formatCpu)} − ${formatCpu(reserved.cpuMilli)} reserved = ${formatCpu(derived.cpuMilli)}`,
    memory: `${describeCapacity(nodes, (a) => a.memoryBytes, formatMemory)} − ${formatMemory(reserved.memoryBytes)} reserved = ${formatMemory(derived.memoryBytes)}`,
  };

  let quota: Amount = derived;
  if (input.override?.cpu !== undefined) {
    const cpu = parseQuantity(input.override.cpu, 1000, `${overrideKey}.cpu`);
    if (cpu > derived.cpuMilli) {
      throw new QuotaError(
        `${overrideKey}.cpu`,
        `${input.override.cpu} (${formatCpu(cpu)}) is more than the nodes can hold: ${arithmetic.cpu}; set it to at most ${formatCpu(derived.cpuMilli)} or leave it unset`,
      );
    }
    quota = { ...quota, cpuMilli: cpu };
  }
  if (input.override?.memory !== undefined) {
    const memory = parseQuantity(input.override.memory, 1, `${overrideKey}.memory`);
    if (memory > derived.memoryBytes) {
      throw new QuotaError(
        `${overrideKey}.memory`,
        `${input.override.memory} (${formatMemory(memory)}) is more than the nodes can hold: ${arithmetic.memory}; set it to at most ${formatMemory(derived.memoryBytes)} or leave it unset`,
      );
    }
    quota = { ...quota, memoryBytes: memory };
  }
  const mi = 2 ** 20;
  return {
    nodes,
    excluded,
    capacity,
    reserved,
    derived,
    quota,
    nominalQuota: { cpu: formatCpuCanonical(quota.cpuMilli), memory: formatMemory(Math.floor(quota.memoryBytes / mi) * mi) },
    arithmetic,
    reservedItems: items.map((i) => ({ name: i.name, pods: i.pods, amount: i.amount, source: i.source })),
    reservedReplicaPods: items.filter((i) => i.placement === "replicas").flatMap((i) => Array.from({ length: i.pods }, () => i.perPod)),
    podCapacity: nodes.reduce((a, n) => a + n.allocatablePods, 0),
    reservedPodCount: items.reduce((a, i) => a + i.pods, 0),
  };
}

/** One role of a cohort as the quota check sees it. */
export interface CohortRoleDemand {
  readonly name: string;
  readonly replicas: number;
  /** Requests of one member (Kubernetes quantities). Absent = 0. */
  readonly requests: { readonly cpu?: string; readonly memory?: string };
  /** Config key that sets this role's replicas, e.g. `cohort-lab:cohort.size` or `cohort-lab:cohort.roles[1].replicas`. */
  readonly replicasKey: string;
}

/** What {@link checkCohortFits} found (on success). */
export interface CohortFit {
  /** Σ member requests. */
  readonly demand: Amount;
  /** Members per node in the first-fit-decreasing placement. */
  readonly placement: Readonly<Record<string, number>>;
}

function demandText(roles: readonly (CohortRoleDemand & { one: Amount })[], pick: (a: Amount) => number, format: (n: number) => string): string {
  return roles
    .filter((r) => r.replicas > 0)
    .map((r) => `${r.name} ${r.replicas} × ${format(pick(r.one))}`)
    .join(" + ");
}

/**
 * Refuses a cohort that can never run under `quota`, with the arithmetic.
 *
 * @param cohortKey - config key the message starts with. @default "cohort-lab:cohort"
 * @throws {QuotaError} when the members' summed requests exceed the quota, a member fits on no node, or
 *   the members cannot be placed on the nodes' free capacity
 */
export function checkCohortFits(quota: QuotaResult, roles: readonly CohortRoleDemand[], cohortKey = "cohort-lab:cohort"): CohortFit {
  const withOne = roles.map((r) => ({ ...r, one: amountOf(r.requests, `${cohortKey} role ${r.name} requests`) }));
  const members = withOne.reduce((n, r) => n + r.replicas, 0);
  const demand = withOne.reduce((a, r) => ({ cpuMilli: a.cpuMilli + r.one.cpuMilli * r.replicas, memoryBytes: a.memoryBytes + r.one.memoryBytes * r.replicas }), {
    cpuMilli: 0,
    memoryBytes: 0,
  });
  const quotaLine = (resource: "cpu" | "memory") => {
    const overridden = resource === "cpu" ? quota.quota.cpuMilli !== quota.derived.cpuMilli : quota.quota.memoryBytes !== quota.derived.memoryBytes;
    const amount = resource === "cpu" ? formatCpu(quota.quota.cpuMilli) : formatMemory(quota.quota.memoryBytes);
    return overridden
      ? `${amount} (lowered by config; the nodes could hold ${resource === "cpu" ? quota.arithmetic.cpu : quota.arithmetic.memory})`
      : `${amount} (${quota.arithmetic[resource]})`;
  };
  const hint = (pick: (a: Amount) => number, limit: number) => {
    const biggest = [...withOne].filter((r) => pick(r.one) > 0).sort((a, b) => pick(b.one) * b.replicas - pick(a.one) * a.replicas)[0];
    if (biggest === undefined) return "";
    const others = withOne.filter((r) => r !== biggest).reduce((s, r) => s + pick(r.one) * r.replicas, 0);
    const max = Math.max(0, Math.floor((limit - others) / pick(biggest.one)));
    return `lower ${biggest.replicasKey.replace(/^cohort-lab:/, "")} to at most ${max}, lower the members' requests, or lower what else runs on the nodes`;
  };
  for (const [resource, pick, format] of [
    ["cpu", (a: Amount) => a.cpuMilli, formatCpu],
    ["memory", (a: Amount) => a.memoryBytes, formatMemory],
  ] as const) {
    const need = pick(demand);
    const limit = pick(quota.quota);
    if (need > limit) {
      const unit = resource === "cpu" ? "CPU" : "memory";
      throw new QuotaError(
        cohortKey,
        `${members} members need ${format(need)} ${unit} (${demandText(withOne, pick, format)}), more than the ClusterQueue quota of ${quotaLine(resource)}; ` +
          `Kueue admits the cohort all-or-nothing, so it would wait forever. ${hint(pick, limit)}`,
      );
    }
  }
  const freePods = quota.podCapacity - quota.reservedPodCount;
  if (members > freePods) {
    const perNode = quota.nodes.map((n) => n.allocatablePods);
    const capacityText = perNode.every((p) => p === perNode[0]) ? `${quota.nodes.length} nodes × ${perNode[0]} pods` : `${quota.podCapacity} pods`;
    throw new QuotaError(
      cohortKey,
      `${members} members need ${members} pods, but the nodes take ${capacityText} − ${quota.reservedPodCount} reserved = ${freePods}; ` +
        `lower the cohort to at most ${freePods} members or add nodes`,
    );
  }
  const largest = quota.nodes.reduce((a, n) => ({ cpuMilli: Math.max(a.cpuMilli, n.cpuMilli), memoryBytes: Math.max(a.memoryBytes, n.memoryBytes) }), {
    cpuMilli: 0,
    memoryBytes: 0,
  });
  for (const r of withOne) {
    if (r.replicas === 0) continue;
    if (r.one.cpuMilli > largest.cpuMilli || r.one.memoryBytes > largest.memoryBytes) {
      throw new QuotaError(
        cohortKey,
        `a ${r.name} member requests ${formatCpu(r.one.cpuMilli)} CPU and ${formatMemory(r.one.memoryBytes)} memory, but the largest node has ` +
          `${formatCpu(largest.cpuMilli)} CPU and ${formatMemory(largest.memoryBytes)} memory free after its DaemonSet pods; no node can run it. Lower that role's requests`,
      );
    }
  }
  // First-fit decreasing: reserved replicas first (largest first), then members (largest first).
  const room = quota.nodes.map((n) => ({ name: n.name, cpuMilli: n.cpuMilli, memoryBytes: n.memoryBytes, pods: n.pods, members: 0 }));
  const place = (one: Amount) => {
    const target = room.find((n) => n.cpuMilli >= one.cpuMilli && n.memoryBytes >= one.memoryBytes && n.pods >= 1);
    if (target === undefined) return undefined;
    target.cpuMilli -= one.cpuMilli;
    target.memoryBytes -= one.memoryBytes;
    target.pods -= 1;
    return target;
  };
  const size = (a: Amount) => a.cpuMilli * 1e9 + a.memoryBytes / 2 ** 20;
  for (const pod of [...quota.reservedReplicaPods].sort((a, b) => size(b) - size(a))) place(pod);
  const queue = withOne.flatMap((r) => Array.from({ length: r.replicas }, () => r)).sort((a, b) => size(b.one) - size(a.one));
  let placed = 0;
  const placedByRole = new Map<string, number>();
  for (const r of queue) {
    const target = place(r.one);
    if (target === undefined) {
      throw new QuotaError(
        cohortKey,
        `the members fit the quota but not the nodes: after the reserved pods, first-fit placement puts ${placed} of ${members} members ` +
          `(${room.map((n) => `${n.name}: ${n.members}`).join(", ")}) and has no node for the next ${r.name} member (${formatCpu(r.one.cpuMilli)} CPU, ${formatMemory(r.one.memoryBytes)}); ` +
          `lower ${r.replicasKey.replace(/^cohort-lab:/, "")} to at most ${placedByRole.get(r.name) ?? 0}, lower the members' requests, or lower what else runs on the nodes`,
      );
    }
    target.members += 1;
    placed += 1;
    placedByRole.set(r.name, (placedByRole.get(r.name) ?? 0) + 1);
  }
  return { demand, placement: Object.fromEntries(room.map((n) => [n.name, n.members])) };
}

/**
 * What a GKE node can hold (pure; no Pulumi, no I/O): the allocatable CPU and memory of a machine type after
 * GKE's published reservations, and the agent pool as the queue quota (components/k8s/quota.ts) sees it.
 *
 * GKE reserves, per node (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#node_allocatable):
 * - CPU: 6% of the first core, 1% of the next core (up to 2), 0.5% of the next 2 cores (up to 4), 0.25% of every
 *   core above 4;
 * - memory: 25% of the first 4 GiB, 20% of the next 4 GiB (up to 8), 10% of the next 8 GiB (up to 16), 6% of the
 *   next 112 GiB (up to 128), 2% of everything above 128 GiB;
 * - plus the kubelet's hard eviction threshold `memory.available` of 100 MiB.
 *
 * The machine types' vCPUs and memory are Compute Engine's published shapes
 * (https://cloud.google.com/compute/docs/general-purpose-machines; Compute Engine's "GB" of machine memory is
 * GiB, 2^30 bytes). The node's reported memory capacity can be below the machine's nominal memory (the kernel
 * keeps some before kubelet reports capacity), so where a measurement of a real node exists it is in the table
 * and the lower of the two is used: never a quota above what a real node reported.
 */
import { formatCpu, formatMemory, type NodeCapacity, type Taint } from "../k8s/quota.js";

const MI = 2 ** 20;
const GI = 2 ** 30;

/** A machine type's shape. */
export interface MachineType {
  readonly vcpus: number;
  /** Nominal memory in GiB. */
  readonly memoryGiB: number;
  /** Allocatable a real node of this type reported, with where the figure comes from. @default none */
  readonly measured?: { readonly cpuMilli: number; readonly memoryBytes: number; readonly source: string };
}

const GENERAL_PURPOSE = "https://cloud.google.com/compute/docs/general-purpose-machines";

/** The machine types the profile knows (vCPU, memory), from {@link GENERAL_PURPOSE}: e2-standard and n2-standard. */
export const MACHINE_TYPES: Readonly<Record<string, MachineType>> = {
  "e2-standard-2": { vcpus: 2, memoryGiB: 8 },
  "e2-standard-4": { vcpus: 4, memoryGiB: 16 },
  "e2-standard-8": { vcpus: 8, memoryGiB: 32 },
  "e2-standard-16": {
    vcpus: 16,
    memoryGiB: 64,
    measured: {
      cpuMilli: 15890,
      memoryBytes: 57 * GI,
      source: "measured on GKE by the public simulator this project descends from (https://github.com/chughtapan/moltzap, packages/simulator): 15890m CPU, 57Gi memory",
    },
  },
  "e2-standard-32": { vcpus: 32, memoryGiB: 128 },
  "n2-standard-2": { vcpus: 2, memoryGiB: 8 },
  "n2-standard-4": { vcpus: 4, memoryGiB: 16 },
  "n2-standard-8": { vcpus: 8, memoryGiB: 32 },
  "n2-standard-16": { vcpus: 16, memoryGiB: 64 },
  "n2-standard-32": { vcpus: 32, memoryGiB: 128 },
  "n2-standard-48": { vcpus: 48, memoryGiB: 192 },
  "n2-standard-64": { vcpus: 64, memoryGiB: 256 },
  "n2-standard-80": { vcpus: 80, memoryGiB: 320 },
  "n2-standard-96": { vcpus: 96, memoryGiB: 384 },
  "n2-standard-128": { vcpus: 128, memoryGiB: 512 },
};

/** The kubelet's hard eviction threshold on GKE (`memory.available<100Mi`). */
export const GKE_EVICTION_THRESHOLD_BYTES = 100 * MI;

/** GKE's CPU reservation tiers: [cores in the tier, fraction reserved]. */
export const GKE_CPU_TIERS: readonly (readonly [number, number])[] = [
  [1, 0.06],
  [1, 0.01],
  [2, 0.005],
  [Infinity, 0.0025],
];

/** GKE's memory reservation tiers: [GiB in the tier, fraction reserved]. */
export const GKE_MEMORY_TIERS: readonly (readonly [number, number])[] = [
  [4, 0.25],
  [4, 0.2],
  [8, 0.1],
  [112, 0.06],
  [Infinity, 0.02],
];

function tiered(total: number, tiers: readonly (readonly [number, number])[]): number {
  let left = total;
  let reserved = 0;
  for (const [size, fraction] of tiers) {
    const part = Math.min(left, size);
    reserved += part * fraction;
    left -= part;
    if (left <= 0) break;
  }
  return reserved;
}

/** A machine type's allocatable, with the arithmetic. */
export interface Allocatable {
  readonly machineType: string;
  /** What GKE's tiers leave (CPU rounded down to 1m, memory down to 1Mi). */
  readonly derived: { readonly cpuMilli: number; readonly memoryBytes: number };
  /** The figure used: {@link derived}, or the lower measurement of a real node. */
  readonly cpuMilli: number;
  readonly memoryBytes: number;
  /** One line per resource. */
  readonly arithmetic: { readonly cpu: string; readonly memory: string };
}

/** An unknown machine type or a problem with the GKE facts; `key` names the config key. */
export class GkeCapacityError extends Error {
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(`${key}: ${reason}`);
    this.name = "GkeCapacityError";
  }
}

/**
 * The allocatable of one node of `machineType`.
 *
 * @param key - the config key that names the machine type, for the refusal
 * @throws {GkeCapacityError} for a machine type not in {@link MACHINE_TYPES}
 */
export function gkeAllocatable(machineType: string, key: string): Allocatable {
  const m = Object.hasOwn(MACHINE_TYPES, machineType) ? MACHINE_TYPES[machineType] : undefined;
  if (m === undefined) {
    throw new GkeCapacityError(
      key,
      `${JSON.stringify(machineType)} is not a machine type whose shape the profile knows (${Object.keys(MACHINE_TYPES).join(", ")}; ${GENERAL_PURPOSE}); ` +
        "the queue quota is derived from it, so an unknown type is refused rather than guessed",
    );
  }
  const cpuReserveMilli = Math.ceil(tiered(m.vcpus, GKE_CPU_TIERS) * 1000);
  const memReserveBytes = Math.ceil(tiered(m.memoryGiB, GKE_MEMORY_TIERS) * GI);
  const cpuMilli = m.vcpus * 1000 - cpuReserveMilli;
  const memoryBytes = Math.floor((m.memoryGiB * GI - memReserveBytes - GKE_EVICTION_THRESHOLD_BYTES) / MI) * MI;
  const usedCpu = m.measured !== undefined ? Math.min(cpuMilli, m.measured.cpuMilli) : cpuMilli;
  const usedMem = m.measured !== undefined ? Math.min(memoryBytes, m.measured.memoryBytes) : memoryBytes;
  const note = (derived: number, used: number, format: (n: number) => string) =>
    used < derived ? `; a real node reported ${format(used)}, which is used (${m.measured!.source})` : "";
  return {
    machineType,
    derived: { cpuMilli, memoryBytes },
    cpuMilli: usedCpu,
    memoryBytes: usedMem,
    arithmetic: {
      cpu: `${machineType}: ${m.vcpus} vCPU = ${formatCpu(m.vcpus * 1000)} − ${formatCpu(cpuReserveMilli)} GKE reservation = ${formatCpu(cpuMilli)}${note(cpuMilli, usedCpu, formatCpu)}`,
      memory:
        `${machineType}: ${m.memoryGiB}Gi − ${Math.round(memReserveBytes / MI)}Mi GKE reservation − 100Mi eviction threshold = ${formatMemory(memoryBytes)}` +
        note(memoryBytes, usedMem, formatMemory),
    },
  };
}

/** The agent pool's node label and taint as Kubernetes sees them (the pool declares them; components/gke/GkeNodePool.ts). */
export interface PoolPlacement {
  readonly label: { readonly key: string; readonly value: string };
  readonly taint?: Taint;
}

/**
 * The agent pool at its maximum size, as the quota sees it: `maxNodes` nodes of `machineType`'s allocatable
 * ({@link gkeAllocatable}), with the pool's label and taint and GKE's default of 110 pods per node
 * (https://cloud.google.com/kubernetes-engine/quotas).
 */
export function agentPoolNodes(pool: string, machineType: string, maxNodes: number, placement: PoolPlacement, key: string): { nodes: NodeCapacity[]; allocatable: Allocatable } {
  const allocatable = gkeAllocatable(machineType, key);
  const nodes = Array.from({ length: maxNodes }, (_, i): NodeCapacity => ({
    name: `${pool}-${i}`,
    allocatable: { cpu: formatCpu(allocatable.cpuMilli), memory: String(allocatable.memoryBytes), pods: "110" },
    labels: { [placement.label.key]: placement.label.value, "cloud.google.com/gke-nodepool": pool },
    ...(placement.taint !== undefined ? { taints: [placement.taint] } : {}),
  }));
  return { nodes, allocatable };
}

/**
 * Refuses a `startupTimeout` that a cold start of the agent pool cannot meet: the pool scales from zero, so the
 * first members wait for node provisioning and their image pull before they can become ready.
 *
 * @param startupMs - the cohort's startupTimeout in ms; `coldStartMs` the assumed node provisioning + image pull
 * @throws {GkeCapacityError} naming `startupKey` with both figures and where the assumption is set
 */
export function checkColdStart(o: {
  readonly startupMs: number;
  readonly startupText: string;
  readonly coldStartMs: number;
  readonly coldStartText: string;
  readonly startupKey: string;
  readonly coldStartKey: string;
}): void {
  if (o.startupMs < o.coldStartMs) {
    throw new GkeCapacityError(
      o.startupKey,
      `${o.startupText} is shorter than a cold start of the agent pool (${o.coldStartText}: node provisioning plus image pull when the pool is at 0 nodes, ` +
        `the assumption set by ${o.coldStartKey}); the runtime would fail members that are still waiting for a node. Raise startupTimeout to at least ${o.coldStartText}`,
    );
  }
}

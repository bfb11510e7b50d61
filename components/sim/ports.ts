/**
 * The sim control plane's loopback port layout: which ports exist and the block `--port-base N` gives them
 * (N, N+1, ...). Pure: the supervisor (simctl/ports.ts) picks and checks free ports; the stack plans with this.
 */

/** Every port the sim uses, in allocation order (`--port-base N` gives them N, N+1, ...). */
export const portNames = [
  "etcdClient",
  "etcdPeer",
  "apiserver",
  "controllerManager",
  "scheduler",
  "kwok",
  "kueueWebhook",
  "kueueHealth",
  "kueueMetrics",
  "sandboxHealth",
  "sandboxMetrics",
  "temporal",
] as const;

/** Name of one sim port. */
export type PortName = (typeof portNames)[number];

/** Every sim port by name (TCP, bound on 127.0.0.1). */
export type PortMap = Readonly<Record<PortName, number>>;

/** How many consecutive ports a `portBase` block takes. */
export const SIM_PORT_BLOCK: number = portNames.length;

/** The ports of a consecutive block starting at `base` (what `--port-base` gives, before the free check). */
export function portsFromBase(base: number): PortMap {
  return Object.fromEntries(portNames.map((n, i) => [n, base + i])) as PortMap;
}

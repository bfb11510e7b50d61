/**
 * The `sim` profile's Kueue queue settings (pure): names, the ResourceFlavor that pins members to the agent pool
 * (node label) and lets them onto its tainted nodes (toleration injected by Kueue), and the namespaces Kueue leaves
 * alone (the Configuration itself is components/k8s/manifests/kueue.ts `kueueConfiguration`). Shared by
 * stacks/sim.ts, simctl/, the test harness and the benchmark.
 */
import { cohortQueueNames } from "../k8s/manifests/kueue.js";
import { agentPoolLabel, agentPoolTaint } from "./fakeNode.js";

/** Queue object names on `sim` (the ClusterQueue and LocalQueue are every cluster profile's, COHORT_QUEUES). */
export const simQueueNames = cohortQueueNames("cohort-lab-agents");

/** Namespaces Kueue never manages on `sim` (the pod integration must exclude kube-system and kueue-system). */
export const simExcludedNamespaces: readonly string[] = ["kube-system", "kube-public", "kube-node-lease", "kueue-system", "agent-sandbox-system"];

/** The agent-pool ResourceFlavor's `nodeLabels` and `tolerations`. */
export function simFlavor(): {
  nodeLabels: Record<string, string>;
  tolerations: { key: string; operator: "Equal"; value: string; effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute" }[];
} {
  return {
    nodeLabels: { [agentPoolLabel.key]: agentPoolLabel.value },
    tolerations: [{ key: agentPoolTaint.key, operator: "Equal", value: agentPoolTaint.value, effect: agentPoolTaint.effect }],
  };
}

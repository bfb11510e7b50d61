/**
 * The `sim` profile's Kueue queue settings (pure): names, the ResourceFlavor that pins members to the agent pool
 * (node label) and lets them onto its tainted nodes (toleration injected by Kueue), and the Kueue manager's
 * Configuration input. Shared by stacks/sim.ts, the test harness and the benchmark.
 */
import type { KueueConfigurationInput } from "../k8s/manifests/kueue.js";
import { agentPoolLabel, agentPoolTaint } from "./fakeNode.js";

/** Queue object names on `sim` (the ClusterQueue and LocalQueue names match the `local` profile's). */
export const simQueueNames = { resourceFlavor: "cohort-lab-agents", clusterQueue: "cohort-lab", localQueue: "cohort" } as const;

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

/**
 * Kueue's Configuration input on `sim`: the same choices as `local` (pod integration, deactivate on the first
 * eviction, no blocking admission; see stacks/local.ts `planLocal`).
 *
 * @param waitForPodsReadyTimeout - Go duration; the stack passes the cohort's startupTimeout + 1m. @default "5m"
 */
export function simKueueConfigurationInput(waitForPodsReadyTimeout = "5m"): KueueConfigurationInput {
  return {
    waitForPodsReady: { timeout: waitForPodsReadyTimeout, blockAdmission: false, requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: 0 } },
    excludedNamespaces: simExcludedNamespaces,
    frameworks: ["pod"],
  };
}

/**
 * Placement of the profile's controllers (pure): every Deployment's pod template in a set of release objects gets
 * a `nodeSelector` for the system pool, so Kueue, Agent Sandbox and Temporal never land on (or scale up) the
 * agent pool (whose taint they do not tolerate anyway) and stay where the quota does not count them.
 */
import type { KubernetesObject } from "../k8s/manifests/cache.js";

/** A copy of `objects` in which each Deployment's pod template selects `selector` (merged over its own nodeSelector). */
export function pinDeployments(objects: readonly KubernetesObject[], selector: Readonly<Record<string, string>>): KubernetesObject[] {
  return objects.map((obj) => {
    if (obj.kind !== "Deployment") return obj;
    const copy = structuredClone(obj) as KubernetesObject & { spec: { template: { spec: { nodeSelector?: Record<string, string> } } } };
    copy.spec.template.spec.nodeSelector = { ...(copy.spec.template.spec.nodeSelector ?? {}), ...selector };
    return copy;
  });
}

/**
 * The namespaced RBAC rules the Kubernetes backend needs, as plain data, derived from the table of
 * every call it makes (`counters.ts` API_CALLS). The Pulumi Role of the runtime's ServiceAccount
 * (`components/run/RunNamespace.ts`, via `renderRunObjects` in components/run/manifests.ts) imports {@link RUNTIME_POLICY_RULES}, so the rules and the code cannot drift;
 * `test/unit/k8s-backend-rbac.test.ts` checks the derivation.
 *
 * The rules are namespaced (a Role in the run namespace): the backend cannot create or delete its own
 * namespace. Pulumi owns the Namespace (created per run by the RunNamespace component, deleted on
 * destroy/replace); the backend's `close()` deletes every Sandbox it created (one deletecollection by
 * the run label) and the run's Secret, and waits by watch until their pods are gone.
 */
import { API_CALLS } from "./counters.js";

/** A Kubernetes `rbac.authorization.k8s.io/v1` PolicyRule (the subset used here). */
export interface PolicyRule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
}

/** Groups call kinds into one rule per (API group, resource), verbs sorted; rules sorted by group then resource. */
export function policyRulesFor(calls: readonly { verb: string; group: string; resource: string }[]): PolicyRule[] {
  const byResource = new Map<string, { group: string; resource: string; verbs: Set<string> }>();
  for (const call of calls) {
    const key = `${call.group}/${call.resource}`;
    const entry = byResource.get(key) ?? { group: call.group, resource: call.resource, verbs: new Set<string>() };
    entry.verbs.add(call.verb);
    byResource.set(key, entry);
  }
  return [...byResource.values()]
    .sort((a, b) => a.group.localeCompare(b.group) || a.resource.localeCompare(b.resource))
    .map((entry) => ({ apiGroups: [entry.group], resources: [entry.resource], verbs: [...entry.verbs].sort() }));
}

/** The rules of the runtime's Role in the run namespace. */
export const RUNTIME_POLICY_RULES: readonly PolicyRule[] = policyRulesFor(API_CALLS);

/** Whether `rules` allow `verb` on `resource` of `group` (wildcards `*` honoured). */
export function rulesAllow(rules: readonly PolicyRule[], verb: string, group: string, resource: string): boolean {
  return rules.some(
    (rule) =>
      (rule.apiGroups.includes(group) || rule.apiGroups.includes("*")) &&
      (rule.resources.includes(resource) || rule.resources.includes("*")) &&
      (rule.verbs.includes(verb) || rule.verbs.includes("*")),
  );
}

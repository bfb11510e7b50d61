import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { API_CALLS, apiCallKey } from "../../runtime/backends/kubernetes/counters";
import { RUNTIME_POLICY_RULES, policyRulesFor, rulesAllow } from "../../runtime/backends/kubernetes/rbac";

describe("RUNTIME_POLICY_RULES", () => {
  it("is exactly the namespaced rules the backend needs (one per resource, verbs sorted)", () => {
    expect(RUNTIME_POLICY_RULES).toEqual([
      { apiGroups: [""], resources: ["events"], verbs: ["list", "watch"] },
      { apiGroups: [""], resources: ["pods"], verbs: ["list", "patch", "watch"] },
      { apiGroups: [""], resources: ["pods/log"], verbs: ["get"] },
      { apiGroups: [""], resources: ["secrets"], verbs: ["create", "delete"] },
      { apiGroups: ["agents.x-k8s.io"], resources: ["sandboxes"], verbs: ["create", "deletecollection", "list", "watch"] },
      { apiGroups: ["kueue.x-k8s.io"], resources: ["localqueues"], verbs: ["get"] },
      { apiGroups: ["kueue.x-k8s.io"], resources: ["workloads"], verbs: ["create", "delete", "list", "watch"] },
      { apiGroups: ["kueue.x-k8s.io"], resources: ["workloads/status"], verbs: ["patch"] },
    ]);
  });

  it("covers every call kind in the table", () => {
    for (const call of API_CALLS) expect(rulesAllow(RUNTIME_POLICY_RULES, call.verb, call.group, call.resource), apiCallKey(call)).toBe(true);
  });

  it("does not allow what the backend never does (no namespace delete, no pod create, no secret read)", () => {
    expect(rulesAllow(RUNTIME_POLICY_RULES, "delete", "", "namespaces")).toBe(false);
    expect(rulesAllow(RUNTIME_POLICY_RULES, "create", "", "pods")).toBe(false);
    expect(rulesAllow(RUNTIME_POLICY_RULES, "get", "", "secrets")).toBe(false);
    expect(rulesAllow(RUNTIME_POLICY_RULES, "list", "", "secrets")).toBe(false);
  });

  it("every counter key used in the backend's source is a call kind of the table", () => {
    // Counter keys are typed (ApiCallKey) so tsc rejects unknown ones; this also checks the strings
    // literally present in the source, so a cast cannot smuggle in an uncovered call.
    const dir = path.join(__dirname, "../../runtime/backends/kubernetes");
    const known = new Set(API_CALLS.map(apiCallKey));
    const used = new Set<string>();
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
      const text = fs.readFileSync(path.join(dir, file), "utf8");
      for (const m of text.matchAll(/"((?:get|list|watch|create|patch|delete|deletecollection|update) [a-z.0-9/-]+)"/g)) used.add(m[1]!);
    }
    expect(used.size).toBeGreaterThanOrEqual(10);
    for (const key of used) expect(known.has(key), key).toBe(true);
  });

  it("policyRulesFor honours wildcards when checking", () => {
    const rules = policyRulesFor([{ verb: "get", group: "", resource: "pods" }]);
    expect(rulesAllow(rules, "get", "", "pods")).toBe(true);
    expect(rulesAllow([{ apiGroups: ["*"], resources: ["*"], verbs: ["*"] }], "delete", "x", "y")).toBe(true);
  });
});

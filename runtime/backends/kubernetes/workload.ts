/**
 * `admission: "workload"` and `"workloadGated"`: the runtime OWNS the roster's Kueue Workload (render.ts
 * `renderWorkload`).
 *
 * - **Admission** (`submitWorkload` in admit.ts): one create of the Workload in the LocalQueue; Kueue's
 *   scheduler admits it all or nothing against the ClusterQueue's quota (`QuotaReserved`, then `Admitted`,
 *   `status.admission.podSetAssignments`), exactly as it admits the Workload its pod integration builds.
 *   With `workload` no Sandbox exists before admission; each member's Sandbox is created by `start(member)`
 *   with the admitted flavors' placement ({@link placementsFor}) and no scheduling gate. With
 *   `workloadGated` every Sandbox is created first, its pod held by our start gate, and the Workload only once
 *   every pod exists; `start(member)` then patches the pod once: gate removed, placement added (start.ts
 *   `startPatch`).
 * - **waitForPodsReady** ({@link markPodsReady}): Kueue evicts an admitted Workload whose `PodsReady`
 *   condition is not True within `waitForPodsReady.timeout` of admission (kueue v0.17.0
 *   `pkg/controller/core/workload_controller.go` admittedNotReadyWorkload). Nothing in Kueue sets it for
 *   an owner-less Workload, so the runtime does, once every member is Ready: ONE server-side apply of the
 *   condition on the status subresource (the conditions list is a map keyed by `type`, so Kueue's own
 *   conditions are untouched). An eviction (a roster not Ready in time) is seen on the Workload watch and
 *   fails the run naming it (run.ts onWorkload).
 * - **Release**: `close()` deletes the Workload; Kueue removes its `resource-in-use` finalizer from an
 *   owner-less Workload being deleted ("manual deletion", workload_controller.go Reconcile) and the quota is
 *   released.
 */
import { HttpMethod } from "./client.js";
import type { Json, Placement } from "./render.js";
import { podSetNames } from "./render.js";
import type { Run } from "./run.js";
import { FIELD_MANAGER, KUEUE_GROUP, KUEUE_VERSION, WL_PODS_READY, WL_REASON_PODS_READY, WORKLOAD_PLURAL } from "./upstream.js";

/** Path of the roster's Workload. */
export function workloadPath(run: Run): string {
  return `/apis/${KUEUE_GROUP}/${KUEUE_VERSION}/namespaces/${encodeURIComponent(run.settings.namespace)}/${WORKLOAD_PLURAL}/${encodeURIComponent(run.settings.podGroup)}`;
}

/**
 * The placement of each role from the admitted Workload: for each pod set, the union of the `nodeLabels`
 * (as nodeSelector) and `tolerations` of the flavors Kueue assigned to its resources (what Kueue's
 * integrations inject, kueue `pkg/podset/podset.go` FromAssignment), looked up in the `flavors` setting.
 *
 * @returns role name -> placement, or a one-line problem naming the pod set and flavor not described
 */
export function placementsFor(run: Run, workload: Json): Map<string, Placement> | string {
  const assignments = (((workload.status as Json | undefined)?.admission as Json | undefined)?.podSetAssignments as Json[] | undefined) ?? [];
  const byPodSet = new Map<string, Placement>();
  const ref = `Workload ${run.settings.namespace}/${run.settings.podGroup}`;
  for (const a of assignments) {
    const flavors = [...new Set(Object.values((a.flavors as Record<string, string> | undefined) ?? {}))].sort();
    const nodeSelector: Record<string, string> = {};
    const tolerations: Json[] = [];
    for (const flavor of flavors) {
      const known = run.settings.flavors[flavor];
      if (known === undefined) {
        return (
          `Kueue admitted ${ref} pod set ${String(a.name)} to ResourceFlavor ${flavor}, which kubernetes.flavors does not describe ` +
          `(known: ${Object.keys(run.settings.flavors).sort().join(", ") || "none"}); give its nodeLabels and tolerations there (the runtime's Role cannot read cluster-scoped ResourceFlavors)`
        );
      }
      Object.assign(nodeSelector, known.nodeSelector);
      for (const t of known.tolerations) if (!tolerations.some((x) => JSON.stringify(x) === JSON.stringify(t))) tolerations.push(t);
    }
    byPodSet.set(String(a.name), { nodeSelector, tolerations });
  }
  const out = new Map<string, Placement>();
  for (const [role, podSet] of podSetNames(run.ctx)) {
    const placement = byPodSet.get(podSet);
    if (placement === undefined) return `Kueue admitted ${ref} without an assignment for pod set ${podSet} (role ${role})`;
    out.set(role, placement);
  }
  return out;
}

/**
 * Sets `PodsReady=True` on the roster's Workload (one server-side apply on `workloads/status`, field
 * manager `cohort-lab`, forced). Called once, when every member is Ready; a failure fails the run (Kueue
 * would evict the Workload at its timeout anyway), naming the call.
 */
export async function markPodsReady(run: Run): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const body = {
    apiVersion: `${KUEUE_GROUP}/${KUEUE_VERSION}`,
    kind: "Workload",
    metadata: { name: run.settings.podGroup, namespace: run.settings.namespace },
    status: {
      conditions: [
        { type: WL_PODS_READY, status: "True", reason: WL_REASON_PODS_READY, message: `All ${run.roster.length} members are Ready (set by cohort-lab)`, lastTransitionTime: now },
      ],
    },
  };
  await run.client.request("patch workloads/status.kueue.x-k8s.io", HttpMethod.PATCH, `${workloadPath(run)}/status`, {
    body,
    contentType: "application/apply-patch+yaml",
    query: { fieldManager: FIELD_MANAGER, force: true },
  });
}

/**
 * `stop(member)` and `close()`.
 *
 * **stop** deletes the member's Sandbox (the Agent Sandbox controller's owner reference makes the
 * garbage collector delete its pod and Service; the kubelet then sends SIGTERM and, after the pod's
 * `terminationGracePeriodSeconds` rendered from the run's stop grace, SIGKILL). Stops requested in the
 * same tick are batched into ONE `deletecollection` by label selector
 * (`cohort-lab.dev/member in (...)`), so a teardown in reverse dependency order costs one write per
 * level, not per member. It resolves when the watch has seen the member's Sandbox gone and its pod
 * terminated ({@link podTerminated}), or after `graceMs` + `stopExtraMs` (counted in
 * `stats().stopTimeouts`). Idempotent.
 *
 * **close** deletes every Sandbox of the run with one `deletecollection` by the run label (members
 * never started included), then the roster's Workload (with Kueue: only that makes Kueue release its
 * finalizer on the pods of a serving pod group), then the run's Secret, and waits by watch until the
 * run's pods and Sandboxes are gone (at most `closeTimeoutMs`; what remains is listed in `stats().leftovers`). It does
 * NOT delete the namespace: the runtime's ServiceAccount is bound by a namespaced Role (rbac.ts) that
 * cannot delete its own namespace. Pulumi owns the run Namespace (created per run by the
 * RunNamespace component, deleted on destroy/replace).
 */
import { HttpMethod, KubeApiError } from "./client.js";
import { paths } from "./admit.js";
import { secretName, type Json } from "./render.js";
import type { MemberState, Run } from "./run.js";
import { LABEL_MEMBER, LABEL_RUN } from "./upstream.js";

/** Most member names in one `in (...)` selector (keeps the request URL well under server limits). */
export const STOP_BATCH = 200;

const pending = new WeakMap<Run, { members: Set<string>; flushing: Promise<void> }>();

/**
 * Whether a pod has finished terminating on its node: gone, in a terminal phase, or deleted with a zero
 * grace period. The kubelet (and kwok's pod-delete stage) confirms a pod's termination by a final delete
 * with grace period 0; the object may then still exist, held by Kueue's `kueue.x-k8s.io/managed`
 * finalizer, which Kueue removes from a serving pod group's pods only once the group's Workload is
 * deleted (kueue keps/976-plain-pods "Tracking admitted and finished Pods"; `close()` deletes it).
 */
export function podTerminated(pod: Json | undefined): boolean {
  if (pod === undefined) return true;
  const meta = pod.metadata as Json | undefined;
  if (meta?.deletionTimestamp === undefined) return false;
  const phase = (pod.status as Json | undefined)?.phase;
  return meta.deletionGracePeriodSeconds === 0 || phase === "Failed" || phase === "Succeeded";
}

/** A stopped member: its Sandbox is gone and its pod has terminated. */
function gone(state: MemberState): boolean {
  return state.sandbox === undefined && podTerminated(state.pod);
}

/**
 * Resolves true when `predicate` holds (checked on every watch event, or only on `member`'s events), or
 * false after `timeoutMs`.
 */
export function until(run: Run, predicate: () => boolean, timeoutMs: number, member?: string): Promise<boolean> {
  if (predicate()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      unsubscribe();
      resolve(predicate());
    }, timeoutMs);
    const unsubscribe = run.onChange(() => {
      if (!predicate()) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(true);
    }, member);
  });
}

async function deleteSandboxes(run: Run, selector: string): Promise<void> {
  await run.client.request("deletecollection sandboxes.agents.x-k8s.io", HttpMethod.DELETE, paths(run.settings.namespace).sandboxes, {
    query: { labelSelector: selector, propagationPolicy: "Background" },
  });
}

function flush(run: Run): Promise<void> {
  const entry = pending.get(run)!;
  pending.delete(run);
  const names = [...entry.members].sort();
  const batches: string[][] = [];
  for (let i = 0; i < names.length; i += STOP_BATCH) batches.push(names.slice(i, i + STOP_BATCH));
  return Promise.all(batches.map((batch) => deleteSandboxes(run, `${LABEL_RUN}=${run.ctx.runLabel},${LABEL_MEMBER} in (${batch.join(",")})`))).then(() => undefined);
}

/**
 * Stops one member (see the module doc).
 *
 * @throws {KubeApiError} when the delete request fails (other than 404)
 */
export async function stopMember(run: Run, member: string, graceMs: number): Promise<void> {
  const state = run.members.get(member);
  if (state === undefined || run.phase === "new" || run.phase === "closed") return;
  state.stopping = true;
  run.evaluate(state); // clears grace timers: the member is no longer reported on
  if (gone(state)) return;
  let entry = pending.get(run);
  if (entry === undefined) {
    const members = new Set<string>();
    const created = { members, flushing: Promise.resolve() };
    created.flushing = new Promise<void>((resolve) => setImmediate(resolve)).then(() => flush(run));
    pending.set(run, created);
    entry = created;
  }
  entry.members.add(member);
  try {
    await entry.flushing;
  } catch (error) {
    if (!(error instanceof KubeApiError && error.status === 404)) throw error;
  }
  const ok = await until(run, () => gone(state), graceMs + run.settings.stopExtraMs, member);
  if (!ok) run.stopTimeouts += 1;
}

/** Releases the run's objects (see the module doc). Idempotent. */
export async function closeRun(run: Run): Promise<void> {
  if (run.phase === "closed" || run.phase === "closing") return;
  const watching = run.watches.length > 0;
  run.phase = "closing";
  run.clearTimers();
  try {
    if (!watching) return;
    // The core may close while admit() is still creating (an interrupt during admission): let the
    // creates in flight land (admit stops taking new ones when its signal aborts) before deleting.
    await run.createsSettled;
    await Promise.allSettled([...run.startsInFlight]);
    const [podWatch, sandboxWatch] = run.watches;
    const anything = (): boolean => (podWatch?.objects.size ?? 0) > 0 || (sandboxWatch?.objects.size ?? 0) > 0;
    if (anything() || run.sandboxesCreated > 0) {
      try {
        await deleteSandboxes(run, `${LABEL_RUN}=${run.ctx.runLabel}`);
      } catch (error) {
        if (!(error instanceof KubeApiError && error.status === 404)) throw error;
      }
    }
    if (run.workloadMode) {
      // The runtime's own Workload: deleting it releases the quota (Kueue drops the finalizer of an
      // owner-less Workload being deleted); its pods are not Kueue's, so nothing waits for them.
      if (run.workloadCreated) {
        try {
          await run.client.request(
            "delete workloads.kueue.x-k8s.io",
            HttpMethod.DELETE,
            `${paths(run.settings.namespace).workloads}/${encodeURIComponent(run.settings.podGroup)}`,
            {
              query: { propagationPolicy: "Background" },
            },
          );
        } catch (error) {
          if (!(error instanceof KubeApiError && error.status === 404)) throw error;
        }
      }
    } else if (run.kueue && (run.workload !== undefined || run.workloadVerdict !== undefined)) {
      // Kueue keeps its finalizer on the group's pods until the Workload is deleted. Delete it once
      // every pod is being deleted (so Kueue does not build a new Workload for pods still alive).
      await until(run, () => [...(podWatch?.objects.values() ?? [])].every((pod) => (pod.metadata as Json | undefined)?.deletionTimestamp !== undefined), 10_000);
      try {
        await run.client.request("delete workloads.kueue.x-k8s.io", HttpMethod.DELETE, `${paths(run.settings.namespace).workloads}/${encodeURIComponent(run.settings.podGroup)}`, {
          query: { propagationPolicy: "Background" },
        });
      } catch (error) {
        if (!(error instanceof KubeApiError && error.status === 404)) throw error;
      }
    }
    if (run.secretCreated) {
      try {
        await run.client.request("delete secrets", HttpMethod.DELETE, `${paths(run.settings.namespace).secrets}/${encodeURIComponent(secretName(run.ctx.runLabel))}`);
      } catch (error) {
        if (!(error instanceof KubeApiError && error.status === 404)) throw error;
      }
    }
    const clean = await until(run, () => !anything(), run.settings.closeTimeoutMs);
    if (!clean) {
      run.leftovers = [...[...(podWatch?.objects.keys() ?? [])].map((name) => `pod/${name}`), ...[...(sandboxWatch?.objects.keys() ?? [])].map((name) => `sandbox/${name}`)].sort();
    }
  } finally {
    for (const w of run.watches) w.stop();
    run.phase = "closed";
    await run.client.dispose();
  }
}

/**
 * `admit()`: submit the whole roster, then wait for Kueue to admit it as one Workload.
 *
 * 1. Validate and render every object in memory (`render.ts`); a bad roster is refused before any call.
 * 2. Start one list+watch per kind in the run namespace (pods and Sandboxes by the run label; the
 *    roster's Workload by name; TriggeredScaleUp events).
 * 3. Create the run's Secret (one write, only if some role has `secretEnv`), then every member's
 *    Sandbox (one write each), `createConcurrency` in flight over pooled keep-alive connections.
 * 4. Resolve once every member's pod exists and (with a LocalQueue) the Workload is `Admitted=True`.
 *
 * With `admission: "workload"` (workload.ts), steps 3-4 are instead: create the run's Secret and the
 * roster's one Workload (two writes), and resolve once Kueue has admitted it; Sandboxes are created by
 * `start(member)`. It fails fast when the Workload is Inadmissible or can never fit, is evicted or deleted,
 * is admitted to a flavor the `flavors` setting does not describe, or `admissionTimeoutMs` passes.
 *
 * With `admission: "workloadGated"`, steps 3-4 are: create the Secret and every Sandbox as in step 3 (no Kueue
 * metadata; our `cohort-lab.dev/start` gate holds each pod), wait until every member's pod exists (the same
 * diagnostics as step 4: a member failing meanwhile, no pod for any Sandbox within `controllerStallMs`), THEN
 * create the roster's Workload and resolve once Kueue has admitted it, with the same fast failures as
 * `workload`. So `admissionMs` (submission -> Admitted) includes materializing the roster, as with `podGroup`,
 * and Kueue's `waitForPodsReady` clock starts with every pod already there. A roster Kueue refuses (over the
 * quota) or that is not admitted in time leaves its Sandboxes behind for `close()` to delete (stop.ts).
 *
 * Fails fast, with Kueue's or the controller's own words, when: the Workload is Inadmissible
 * (LocalQueue/ClusterQueue missing or inactive) or can never fit its ClusterQueue; pods are not managed
 * by Kueue (pod integration off, namespace not selected); no pod appears for any Sandbox, or no
 * Workload appears for the complete pod group, within `controllerStallMs`; the Agent Sandbox controller
 * keeps failing to reconcile a Sandbox; the Workload is evicted or deactivated; `admissionTimeoutMs`
 * passes; or `signal` aborts.
 */
import type { MemberPlan } from "../../core/backend.js";
import { CohortError } from "../../core/errors.js";
import { HttpMethod, KubeApiError } from "./client.js";
import type { ApiCallKey } from "./counters.js";
import { renderSandbox, renderSecret, renderWorkload, validateRoster, type Json } from "./render.js";
import type { Run } from "./run.js";
import { objectRef } from "./status.js";
import { EVENT_TRIGGERED_SCALE_UP, KUEUE_GROUP, KUEUE_VERSION, LABEL_RUN, SANDBOX_GROUP, SANDBOX_PLURAL, SANDBOX_VERSION, WORKLOAD_PLURAL } from "./upstream.js";
import { ListWatch } from "./watch.js";
import { markPodsReady, placementsFor } from "./workload.js";

/**
 * The roster was not admitted (code `admission-failed`). The message is one line naming the object
 * (Workload, pod, Sandbox) and the upstream message; the core prefixes it with "admission failed: ".
 * (Kept with the backend: only cluster backends admit.)
 */
export class AdmissionError extends CohortError {
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super("admission-failed", reason, options);
    this.reason = reason;
  }
}

/** Collection paths in the run namespace. */
export function paths(namespace: string): { pods: string; sandboxes: string; workloads: string; events: string; secrets: string } {
  const ns = encodeURIComponent(namespace);
  return {
    pods: `/api/v1/namespaces/${ns}/pods`,
    sandboxes: `/apis/${SANDBOX_GROUP}/${SANDBOX_VERSION}/namespaces/${ns}/${SANDBOX_PLURAL}`,
    workloads: `/apis/${KUEUE_GROUP}/${KUEUE_VERSION}/namespaces/${ns}/${WORKLOAD_PLURAL}`,
    events: `/api/v1/namespaces/${ns}/events`,
    secrets: `/api/v1/namespaces/${ns}/secrets`,
  };
}

/** Starts the run's watches and waits for their first lists. */
export async function startWatches(run: Run): Promise<void> {
  const p = paths(run.settings.namespace);
  const runSelector = `${LABEL_RUN}=${run.ctx.runLabel}`;
  const options = { timeoutSeconds: run.settings.watchTimeoutSeconds };
  const onFatal = (what: string) => (error: Error) => run.failRun(`cannot watch ${what} in namespace ${run.settings.namespace}: ${error.message}`);
  const watches: ListWatch[] = [
    new ListWatch(run.client, { path: p.pods, listKey: "list pods", watchKey: "watch pods", labelSelector: runSelector }, run.onPod, onFatal("pods"), options),
    new ListWatch(
      run.client,
      { path: p.sandboxes, listKey: "list sandboxes.agents.x-k8s.io", watchKey: "watch sandboxes.agents.x-k8s.io", labelSelector: runSelector },
      run.onSandbox,
      onFatal("Sandboxes"),
      options,
    ),
    new ListWatch(
      run.client,
      { path: p.events, listKey: "list events", watchKey: "watch events", fieldSelector: `reason=${EVENT_TRIGGERED_SCALE_UP}` },
      run.onClusterEvent,
      onFatal("events"),
      options,
    ),
  ];
  if (run.kueue) {
    watches.push(
      new ListWatch(
        run.client,
        { path: p.workloads, listKey: "list workloads.kueue.x-k8s.io", watchKey: "watch workloads.kueue.x-k8s.io", fieldSelector: `metadata.name=${run.settings.podGroup}` },
        run.onWorkload,
        onFatal("Workloads"),
        options,
      ),
    );
  }
  run.watches = watches;
  const what = ["pods", "Sandboxes", "events", "Workloads"];
  await Promise.all(
    watches.map((w, i) =>
      w.start().catch((error: unknown) => {
        throw new AdmissionError(`cannot list ${what[i]} in namespace ${run.settings.namespace}: ${(error as Error).message}`, { cause: error });
      }),
    ),
  );
}

/** Runs `task` over `items` with at most `limit` in flight; stops taking new items after the first error. */
async function boundedEach<T>(items: readonly T[], limit: number, signal: AbortSignal, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const worker = async (): Promise<void> => {
    while (failure === undefined && !signal.aborted && next < items.length) {
      const item = items[next++]!;
      try {
        await task(item);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure;
}

export async function create(run: Run, key: ApiCallKey, path: string, body: Json, signal: AbortSignal): Promise<void> {
  try {
    await run.client.request(key, HttpMethod.POST, path, { body, signal });
  } catch (error) {
    const retried = (error as { attempts?: number }).attempts !== undefined;
    // A retried create that finds the object ours: the first attempt went through.
    if (error instanceof KubeApiError && error.status === 409 && retried) return;
    if (error instanceof KubeApiError && error.status === 409) {
      throw new AdmissionError(`${String(body.kind)} ${objectRef(body)} already exists; refusing to adopt an object this run did not create (the run namespace must be fresh)`, {
        cause: error,
      });
    }
    throw new AdmissionError(`creating ${String(body.kind)} ${objectRef(body)}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Submits the roster and waits for admission.
 *
 * @throws {SpecError} when the roster cannot run on Kubernetes (nothing was created)
 * @throws {AdmissionError} naming the cause when it is not admitted
 */
export async function admitRoster(run: Run, plans: readonly MemberPlan[], signal: AbortSignal): Promise<void> {
  if (run.phase !== "new") throw new AdmissionError(`admit() was already called (phase ${run.phase})`);
  if (run.createsAtStart) return admitWithWorkload(run, plans, signal);
  validateRoster(plans, run.ctx);
  const sandboxes = plans.map((plan) => renderSandbox(plan, run.ctx));
  const secret = renderSecret(plans, run.ctx);
  await beginAdmitting(run, plans);
  const p = paths(run.settings.namespace);

  const abort = new AbortController();
  const onAbort = (): void => abort.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    if (secret !== undefined) {
      await create(run, "create secrets", p.secrets, secret, abort.signal);
      run.secretCreated = true;
    }
    const creating = boundedEach(sandboxes, run.settings.createConcurrency, abort.signal, async (sandbox) => {
      await create(run, "create sandboxes.agents.x-k8s.io", p.sandboxes, sandbox, abort.signal);
      run.sandboxCreated();
    });
    // close() waits for creates still in flight, so that none lands after its deletecollection.
    run.createsSettled = creating.then(
      () => undefined,
      () => undefined,
    );
    await creating;
    if (signal.aborted) throw new AdmissionError(`aborted while creating Sandboxes (${run.sandboxesCreated} of ${plans.length} created)`, { cause: signal.reason });
    // podGroup: until Kueue admitted the group's Workload; workloadGated: until every pod exists, then our Workload.
    await waitForAdmission(run, signal);
    if (run.workloadMode) await submitWorkload(run, signal);
    run.phase = "admitted";
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/**
 * What both admission paths do first: take the roster, enter `admitting`, open the watches, and refuse a
 * namespace that already holds Sandboxes of this run or a run that already failed.
 *
 * @throws {AdmissionError} naming the namespace and a stale Sandbox, or the run's failure
 */
async function beginAdmitting(run: Run, plans: readonly MemberPlan[]): Promise<void> {
  run.setRoster(plans);
  run.phase = "admitting";
  run.admitStartedAt = run.now();
  await startWatches(run);
  const stale = [...(run.watches[1]?.objects.keys() ?? [])];
  if (stale.length > 0) {
    throw new AdmissionError(`namespace ${run.settings.namespace} already holds ${stale.length} Sandbox(es) of run ${run.ctx.runLabel} (e.g. ${stale[0]}); refusing to reuse them`);
  }
  if (run.runFailure !== undefined) throw new AdmissionError(run.runFailure);
}

/** `admission: "workload"`: the runtime's own Workload, no Sandbox before admission (see workload.ts). */
async function admitWithWorkload(run: Run, plans: readonly MemberPlan[], signal: AbortSignal): Promise<void> {
  validateRoster(plans, run.ctx);
  const secret = renderSecret(plans, run.ctx);
  await beginAdmitting(run, plans);
  if (secret !== undefined) {
    await create(run, "create secrets", paths(run.settings.namespace).secrets, secret, signal);
    run.secretCreated = true;
  }
  await submitWorkload(run, signal);
  run.phase = "admitted";
}

/**
 * `admission: "workload"` and `"workloadGated"`: creates the runtime's Workload for the roster, waits for Kueue
 * to admit it and derives each role's placement from the admitted flavors (workload.ts).
 *
 * @throws {AdmissionError} with Kueue's reason (inadmissible, admissionTimeout, a member failed meanwhile),
 *   or naming the pod set and flavor the `flavors` setting does not describe
 */
async function submitWorkload(run: Run, signal: AbortSignal): Promise<void> {
  await create(run, "create workloads.kueue.x-k8s.io", paths(run.settings.namespace).workloads, renderWorkload(run.ctx), signal);
  run.workloadCreated = true;
  run.admission.workloadCreatedMs = run.now() - run.admitStartedAt;
  await waitForWorkloadAdmission(run, signal);
  const placements = placementsFor(run, run.workload!);
  if (typeof placements === "string") throw new AdmissionError(placements);
  run.placements = placements;
  run.markPodsReady = () => markPodsReady(run);
}

/** Resolves once the runtime's Workload is admitted; rejects with Kueue's words when it cannot be. */
function waitForWorkloadAdmission(run: Run, signal: AbortSignal): Promise<void> {
  const ref = `Workload ${run.settings.namespace}/${run.settings.podGroup}`;
  return new Promise<void>((resolve, reject) => {
    const finish = (error?: Error): void => {
      clearTimeout(timer);
      off();
      signal.removeEventListener("abort", onAbort);
      if (error === undefined) resolve();
      else reject(error);
    };
    const describe = (): string => {
      const v = run.workloadVerdict;
      return v === undefined ? `${ref} not seen on the watch yet` : v.kind === "pending" ? `${ref} pending: ${v.message}` : v.kind;
    };
    const check = (): void => {
      if (run.admissionProblem !== undefined) return finish(new AdmissionError(run.admissionProblem));
      const v = run.workloadVerdict;
      if (v?.kind === "inadmissible" || v?.kind === "lost") return finish(new AdmissionError(v.reason));
      if (v?.kind === "admitted" && run.workload !== undefined) finish();
    };
    const onAbort = (): void => finish(new AdmissionError(`aborted while waiting for admission (${describe()})`, { cause: signal.reason }));
    const timer = setTimeout(
      () => finish(new AdmissionError(`the roster was not admitted within ${run.settings.admissionTimeoutMs} ms (admissionTimeout): ${describe()}`)),
      Math.max(0, run.settings.admissionTimeoutMs - (run.now() - run.admitStartedAt)),
    );
    const off = run.onChange(check);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    check();
  });
}

/** Where admission stands; O(1) (counters kept by the watch handlers), as it runs on every event. */
function admissionState(run: Run): { done: boolean; problem?: string } {
  if (run.admissionProblem !== undefined) return { done: false, problem: run.admissionProblem };
  const kueue = run.kueue;
  if (run.unmanagedPod !== undefined) {
    return {
      done: false,
      problem:
        `pod ${objectRef(run.unmanagedPod)} is not managed by Kueue (no kueue.x-k8s.io/managed label): ` +
        `check that Kueue's "pod" integration is enabled and that namespace ${run.settings.namespace} matches its managedJobsNamespaceSelector`,
    };
  }
  const present = run.podsPresent;
  if (present === run.roster.length) run.admission.allPodsObservedMs ??= run.now() - run.admitStartedAt;
  const verdict = run.workloadVerdict;
  if (verdict?.kind === "inadmissible" || verdict?.kind === "lost") return { done: false, problem: verdict.reason };
  if (present < run.roster.length) return { done: false };
  // workloadGated: the pods exist; the runtime's Workload is created next (submitWorkload).
  if (!kueue || run.workloadMode) return { done: true };
  return { done: verdict?.kind === "admitted" };
}

function describeWait(run: Run): string {
  const present = run.podsPresent;
  if (present < run.roster.length) return `${present} of ${run.roster.length} pods exist`;
  if (!run.kueue || run.workloadMode) return "all pods exist";
  const verdict = run.workloadVerdict;
  if (verdict === undefined) return `all ${present} pods exist but Kueue has not created Workload ${run.settings.namespace}/${run.settings.podGroup}`;
  return verdict.kind === "pending" ? `Workload ${run.settings.namespace}/${run.settings.podGroup} pending: ${verdict.message}` : verdict.kind;
}

/**
 * Waits until the roster is admitted by Kueue's pod integration (`podGroup`: every pod exists and the
 * group's Workload is Admitted) or, without a LocalQueue or with `workloadGated`, until every pod exists.
 * Exported for tests.
 *
 * @throws {AdmissionError} naming the cause: a member failed meanwhile, no pod for any Sandbox or no
 *   Workload for the complete group within `controllerStallMs`, Kueue's refusal, `admissionTimeout`, abort
 */
export function waitForAdmission(run: Run, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timers: NodeJS.Timeout[] = [];
    let unsubscribe = (): void => undefined;
    let stallArmedForWorkload = false;
    const finish = (error?: Error): void => {
      for (const t of timers) clearTimeout(t);
      unsubscribe();
      signal.removeEventListener("abort", onAbort);
      if (error === undefined) resolve();
      else reject(error);
    };
    const check = (): void => {
      const state = admissionState(run);
      if (state.problem !== undefined) return finish(new AdmissionError(state.problem));
      if (state.done) return finish();
      // All pods exist: Kueue must now create the group's Workload.
      if (run.kueue && !run.workloadMode && !stallArmedForWorkload && run.admission.allPodsObservedMs !== undefined && run.workload === undefined) {
        stallArmedForWorkload = true;
        timers.push(
          setTimeout(() => {
            if (run.workload === undefined && run.workloadVerdict === undefined) {
              finish(
                new AdmissionError(
                  `all ${run.roster.length} pods exist but Kueue created no Workload ${run.settings.namespace}/${run.settings.podGroup} within ${run.settings.controllerStallMs} ms: ` +
                    `check that Kueue's "pod" integration is enabled and running`,
                ),
              );
            }
          }, run.settings.controllerStallMs),
        );
      }
    };
    const onAbort = (): void => finish(new AdmissionError(`aborted while waiting for admission (${describeWait(run)})`, { cause: signal.reason }));
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    const off = run.onChange(check);
    unsubscribe = () => {
      off();
    };
    // No pod at all for any Sandbox: the Agent Sandbox controller is not doing its job.
    timers.push(
      setTimeout(() => {
        if (run.podsPresent === 0) {
          finish(
            new AdmissionError(
              `no pod was created for any of the ${run.roster.length} Sandboxes within ${run.settings.controllerStallMs} ms: ` +
                `check that the Agent Sandbox controller is running and can create pods in namespace ${run.settings.namespace}`,
            ),
          );
        }
      }, run.settings.controllerStallMs),
    );
    const elapsed = run.now() - run.admitStartedAt;
    timers.push(
      setTimeout(
        () => finish(new AdmissionError(`the roster was not admitted within ${run.settings.admissionTimeoutMs} ms (admissionTimeout): ${describeWait(run)}`)),
        Math.max(0, run.settings.admissionTimeoutMs - elapsed),
      ),
    );
    check();
  });
}

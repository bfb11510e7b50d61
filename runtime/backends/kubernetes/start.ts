/**
 * `start(member)`: ONE write per member. The member's pod already exists (created by the Agent Sandbox
 * controller at admission) and is held by our `cohort-lab.dev/start` scheduling gate; starting it is a
 * strategic-merge patch that deletes that gate by name. Deleting by merge key (not a JSON-patch index)
 * cannot remove Kueue's gate by mistake, whatever order the two gates end up in, and needs no
 * resourceVersion. Kubernetes allows removing scheduling gates from an existing pod (KEP-3521).
 * Readiness then arrives by watch (`run.ts`).
 *
 * With Kueue, the patch waits (by watch, no polling) until Kueue has removed its own
 * `kueue.x-k8s.io/admission` gate from that pod. Kueue ungates an admitted pod group with one
 * resourceVersion-guarded patch per pod (kueue v0.17.0 `pkg/controller/jobs/pod/pod_controller.go` Run ->
 * `pkg/util/client/client.go` Patch, strict mode) from its informer cache; a patch of ours landing first
 * makes Kueue's conflict, fails its whole group reconcile (an O(pods) pass) and requeues it with
 * controller-runtime's backoff. Waiting costs nothing: the pod cannot be scheduled before Kueue's gate is
 * gone anyway. Kueue's own ungating, at most 8 patches in flight, is the floor either way (the before/after
 * figures at 1,000 members: docs/sim.md "Measured").
 *
 * With `admission: "workload"` (workload.ts) no Sandbox exists before its member starts: `start` creates it
 * (ONE write, at most `createConcurrency` in flight), ungated, with its role's admitted flavor placement.
 *
 * With `admission: "workloadGated"` the member's pod exists (admit created every Sandbox before the Workload)
 * and carries only our gate, no Kueue metadata: `start` is ONE strategic-merge patch of the pod
 * ({@link startPatch}, at most `createConcurrency` in flight) that deletes our gate AND adds the admitted
 * flavor's placement. One patch can do both because the API server validates a pod update against the OLD
 * pod: while the old pod is gated, additions to `spec.nodeSelector` are allowed, and additions to
 * `spec.tolerations` are allowed on any pod (KEP-3838 "mutable pod scheduling directives", GA in 1.30;
 * kubernetes v1.35.4 `pkg/apis/core/validation/validation.go` ValidatePodSpecUpdate: `podIsGated :=
 * len(oldPod.Spec.SchedulingGates) > 0`, validateNodeSelectorMutation, validateOnlyAddedTolerations,
 * validateOnlyDeletedSchedulingGates). Kueue's own pod integration does the same in one update when it
 * ungates an admitted pod (kueue v0.17.0 `pkg/controller/jobs/pod/pod_controller.go` Run -> prepare:
 * `podset.Merge` of the flavor's nodeSelector and tolerations, then `Ungate`, in one patch).
 */
import type { MemberHandle, MemberPlan } from "../../core/backend.js";
import { MemberStartError } from "../../core/errors.js";
import { HttpMethod, KubeApiError } from "./client.js";
import { paths } from "./admit.js";
import { memberHost, renderSandbox, type Json, type Placement } from "./render.js";
import type { MemberState, Run } from "./run.js";
import { hasKueueGate, hasStartGate } from "./status.js";
import { CONTAINER_NAME, START_GATE } from "./upstream.js";

/** The strategic-merge patch that removes our scheduling gate (`schedulingGates` merges by `name`). */
export const REMOVE_START_GATE_PATCH = { spec: { schedulingGates: [{ $patch: "delete", name: START_GATE }] } } as const;

/** A toleration's identity for de-duplication (an absent `operator` means `Equal`, kubernetes core/v1 Toleration). */
function tolerationKey(t: Json): string {
  return JSON.stringify([t.key ?? "", t.operator ?? "Equal", t.value ?? "", t.effect ?? "", t.tolerationSeconds ?? null]);
}

/**
 * `admission: "workloadGated"`: the ONE strategic-merge patch that starts a gated member on its admitted
 * flavor: `schedulingGates` deletes our gate by name (the list merges by `name`), `nodeSelector` adds the
 * flavor's `nodeLabels` (a map: strategic merge adds keys), and `tolerations`, when the flavor adds any the
 * pod lacks, is the pod's current list plus those (the list is atomic, so a strategic merge REPLACES it;
 * the API server accepts only additions, so the current entries, including the ones the
 * DefaultTolerationSeconds admission plugin added at create, must be sent back as they are).
 *
 * @param pod - the member's pod as last seen on the watch (its tolerations can only have grown since, and
 *   only by this patch)
 * @param placement - the member's role's admitted placement (workload.ts placementsFor)
 * @returns `{ spec: { nodeSelector?, tolerations?, schedulingGates } }`
 */
export function startPatch(pod: Json | undefined, placement: Placement | undefined): Json {
  const spec: Json = {};
  if (placement !== undefined && Object.keys(placement.nodeSelector).length > 0) spec.nodeSelector = { ...placement.nodeSelector };
  const current = (((pod?.spec as Json | undefined)?.tolerations as Json[] | undefined) ?? []).map((t) => ({ ...t }));
  const have = new Set(current.map(tolerationKey));
  const missing = (placement?.tolerations ?? []).filter((t) => !have.has(tolerationKey(t)));
  if (missing.length > 0) spec.tolerations = [...current, ...missing.map((t) => ({ ...t }))];
  spec.schedulingGates = REMOVE_START_GATE_PATCH.spec.schedulingGates.map((g) => ({ ...g }));
  return { spec };
}

/**
 * Starts one admitted member.
 *
 * @throws {MemberStartError} when the roster was not admitted, the member is not in it, was already
 *   started (a restart needs a new Sandbox, which this backend does not do), has already failed, or the
 *   patch fails (e.g. its pod was deleted)
 */
export async function startMember(run: Run, plan: MemberPlan, signal: AbortSignal): Promise<MemberHandle> {
  const fail = (message: string, cause?: unknown): MemberStartError =>
    new MemberStartError(plan.id, "kubernetes", `member ${plan.id}: ${message}`, cause === undefined ? undefined : { cause });
  const state = run.members.get(plan.id);
  if (state === undefined) throw fail("not in the roster given to admit()");
  if (run.phase !== "admitted") throw fail(`cannot start before the roster is admitted (phase ${run.phase})`);
  if (state.started) throw fail("already started; the kubernetes backend does not restart members");
  if (state.exited) throw fail("its pod or Sandbox has already failed");
  const ns = run.settings.namespace;
  if (run.createsAtStart) {
    await createSandbox(run, plan, signal, fail);
  } else if (run.workloadMode) {
    await ungateOnFlavor(run, state, signal, fail);
  } else {
    if (run.kueue && state.pod !== undefined && hasKueueGate(state.pod)) await untilKueueUngated(run, plan.id, signal, fail);
    if (state.pod === undefined || hasStartGate(state.pod)) await patchPod(run, plan.id, REMOVE_START_GATE_PATCH, signal, fail);
  }
  state.started = true;
  state.startedAtMs = run.now();
  run.evaluate(state);
  const port = run.ctx.spec.roles.find((role) => role.name === plan.role)?.port === true ? run.ctx.containerPort : 0;
  return {
    member: plan.id,
    endpoint: { host: memberHost(plan.id, ns), port },
    detail: { namespace: ns, sandbox: plan.id, pod: plan.id },
    outputTail: (lines) => podLogTail(run, plan.id, lines),
  };
}

/**
 * One strategic-merge patch of the member's pod (`patch pods`).
 *
 * @throws {MemberStartError} naming the pod: gone (404), or the API server's refusal
 */
async function patchPod(run: Run, member: string, body: Json, signal: AbortSignal, fail: (message: string, cause?: unknown) => MemberStartError): Promise<void> {
  const ns = run.settings.namespace;
  try {
    await run.client.request("patch pods", HttpMethod.PATCH, `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(member)}`, {
      body,
      contentType: "application/strategic-merge-patch+json",
      signal,
    });
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 404) throw fail(`pod ${ns}/${member} no longer exists`, error);
    throw fail(`removing scheduling gate ${START_GATE} from pod ${ns}/${member}: ${(error as Error).message}`, error);
  }
}

/**
 * `admission: "workloadGated"`: {@link startPatch} on the member's pod, at most `createConcurrency` in flight
 * (the core may start a whole level at once). A patch still queued when the run closes or the member is
 * aborted is not sent.
 *
 * @throws {MemberStartError} when the pod is gone, the run is no longer admitted, or the patch fails
 */
async function ungateOnFlavor(run: Run, state: MemberState, signal: AbortSignal, fail: (message: string, cause?: unknown) => MemberStartError): Promise<void> {
  const member = state.plan.id;
  await run.createLimiter.run(async () => {
    if (signal.aborted || run.phase !== "admitted") throw fail(`not started: ${signal.aborted ? "aborted" : `the run is ${run.phase}`}`);
    if (state.pod === undefined) throw fail(`pod ${run.settings.namespace}/${member} no longer exists`);
    await patchPod(run, member, startPatch(state.pod, run.placements.get(state.plan.role)), signal, fail);
  });
}

/**
 * `admission: "workload"`: the member's Sandbox, created now (ONE write; at most `createConcurrency` in flight),
 * with its role's admitted placement and no scheduling gate (workload.ts). A retried create that finds the
 * object (409) is ours. A create still queued when the run closes is not sent.
 */
async function createSandbox(run: Run, plan: MemberPlan, signal: AbortSignal, fail: (message: string, cause?: unknown) => MemberStartError): Promise<void> {
  const body = renderSandbox(plan, run.ctx, run.placements.get(plan.role));
  const ns = run.settings.namespace;
  const creating = run.createLimiter.run(async () => {
    if (signal.aborted || run.phase !== "admitted") throw new Error(`not created: ${signal.aborted ? "aborted" : `the run is ${run.phase}`}`);
    return run.client.request("create sandboxes.agents.x-k8s.io", HttpMethod.POST, paths(ns).sandboxes, { body, signal });
  });
  run.startsInFlight.add(creating);
  try {
    await creating;
  } catch (error) {
    const retried = (error as { attempts?: number }).attempts !== undefined;
    if (!(error instanceof KubeApiError && error.status === 409 && retried)) {
      if (error instanceof KubeApiError && error.status === 409) {
        throw fail(`Sandbox ${ns}/${plan.id} already exists; refusing to adopt an object this run did not create (the run namespace must be fresh)`, error);
      }
      throw fail(`creating Sandbox ${ns}/${plan.id}: ${(error as Error).message}`, error);
    }
  } finally {
    run.startsInFlight.delete(creating);
  }
  run.sandboxCreated();
}

/**
 * Resolves once Kueue's admission gate is gone from the member's pod (watch-driven: a per-member
 * listener, O(1) per event).
 *
 * @throws {MemberStartError} (through `fail`) when the member exits or is being stopped, its pod is
 *   deleted, the run fails, or `signal` aborts first
 */
function untilKueueUngated(run: Run, member: string, signal: AbortSignal, fail: (message: string) => MemberStartError): Promise<void> {
  const state = run.members.get(member)!;
  return new Promise<void>((resolve, reject) => {
    const finish = (error?: MemberStartError): void => {
      off();
      signal.removeEventListener("abort", onAbort);
      if (error === undefined) resolve();
      else reject(error);
    };
    const check = (): void => {
      if (signal.aborted) return finish(fail("aborted while waiting for Kueue to remove its admission gate"));
      if (state.exited || state.stopping) return finish(fail("exited or stopped while waiting for Kueue to remove its admission gate"));
      if (run.runFailure !== undefined) return finish(fail(`the run failed while waiting for Kueue to remove its admission gate: ${run.runFailure}`));
      if (state.pod === undefined) return finish(fail(`pod ${run.settings.namespace}/${member} no longer exists`));
      if (!hasKueueGate(state.pod)) finish();
    };
    const onAbort = (): void => check();
    const off = run.onChange(check, member);
    signal.addEventListener("abort", onAbort, { once: true });
    check();
  });
}

/** Most time spent fetching a log tail for a failure message (a kwok node has no kubelet to answer). */
export const LOG_TAIL_TIMEOUT_MS = 2000;

/**
 * The last `lines` lines of the member's container log (one GET, only when the core asks, i.e. on a
 * failure), or "" when the log cannot be read within {@link LOG_TAIL_TIMEOUT_MS}.
 */
async function podLogTail(run: Run, member: string, lines: number): Promise<string> {
  if (lines <= 0) return "";
  const ns = encodeURIComponent(run.settings.namespace);
  try {
    return await run.client.requestText("get pods/log", HttpMethod.GET, `/api/v1/namespaces/${ns}/pods/${encodeURIComponent(member)}/log`, {
      query: { container: CONTAINER_NAME, tailLines: lines },
      signal: AbortSignal.timeout(LOG_TAIL_TIMEOUT_MS),
      retry: false,
    });
  } catch {
    return "";
  }
}

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
 */
import type { MemberHandle, MemberPlan } from "../../core/backend.js";
import { MemberStartError } from "../../core/errors.js";
import { HttpMethod, KubeApiError } from "./client.js";
import { paths } from "./admit.js";
import { memberHost, renderSandbox } from "./render.js";
import type { Run } from "./run.js";
import { hasKueueGate, hasStartGate } from "./status.js";
import { CONTAINER_NAME, START_GATE } from "./upstream.js";

/** The strategic-merge patch that removes our scheduling gate (`schedulingGates` merges by `name`). */
export const REMOVE_START_GATE_PATCH = { spec: { schedulingGates: [{ $patch: "delete", name: START_GATE }] } } as const;

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
  if (run.workloadMode) {
    await createSandbox(run, plan, signal, fail);
  } else if (run.kueue && state.pod !== undefined && hasKueueGate(state.pod)) {
    await untilKueueUngated(run, plan.id, signal, fail);
  }
  if (!run.workloadMode && (state.pod === undefined || hasStartGate(state.pod))) {
    try {
      await run.client.request("patch pods", HttpMethod.PATCH, `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(plan.id)}`, {
        body: REMOVE_START_GATE_PATCH,
        contentType: "application/strategic-merge-patch+json",
        signal,
      });
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) throw fail(`pod ${ns}/${plan.id} no longer exists`, error);
      throw fail(`removing scheduling gate ${START_GATE} from pod ${ns}/${plan.id}: ${(error as Error).message}`, error);
    }
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
  run.sandboxesCreated += 1;
  if (run.sandboxesCreated === run.roster.length) run.admission.sandboxesCreatedMs = run.now() - run.admitStartedAt;
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

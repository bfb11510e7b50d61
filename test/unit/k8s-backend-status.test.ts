import { afterEach, describe, expect, it, vi } from "vitest";
import type { MemberEvent } from "../../runtime/core/backend";
import { memberIdentities, planMembers } from "../../runtime/core/plan";
import { loadRunSpec } from "../../runtime/core/spec";
import { resolveKubernetesConfig } from "../../runtime/backends/kubernetes/index";
import type { Json } from "../../runtime/backends/kubernetes/render";
import { Run } from "../../runtime/backends/kubernetes/run";
import { classifyPod, classifySandbox, classifyWorkload, podProgress } from "../../runtime/backends/kubernetes/status";
import { podTerminated } from "../../runtime/backends/kubernetes/stop";

// Objects below follow the shapes written by kube-scheduler, the kubelet, kwok's stages
// (kustomize/stage/pod/fast/pod-ready.yaml, chaos/pod-container-running-failed.yaml), the Agent Sandbox
// controller (computeReadyCondition) and Kueue (workload_types.go conditions).

const T = "2026-01-01T12:00:00Z";
const RUN = "society-20260101t120000z-a1b2c3";

function pod(name: string, status: Json, spec: Json = {}, extraMeta: Json = {}): Json {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "run-1",
      resourceVersion: "1",
      labels: { "cohort-lab.dev/run": RUN, "cohort-lab.dev/member": name, "kueue.x-k8s.io/managed": "true" },
      ...extraMeta,
    },
    spec: { containers: [{ name: "member", image: "x" }], ...spec },
    status,
  };
}

const gated = (name: string) =>
  pod(
    name,
    {
      phase: "Pending",
      conditions: [{ type: "PodScheduled", status: "False", reason: "SchedulingGated", message: "Scheduling is blocked due to non-empty scheduling gates", lastTransitionTime: T }],
    },
    { schedulingGates: [{ name: "cohort-lab.dev/start" }] },
  );

const readyPod = (name: string) =>
  pod(
    name,
    {
      phase: "Running",
      podIP: "10.0.0.7",
      podIPs: [{ ip: "10.0.0.7" }],
      conditions: [
        { type: "Initialized", status: "True", lastTransitionTime: T },
        { type: "Ready", status: "True", lastTransitionTime: T },
        { type: "ContainersReady", status: "True", lastTransitionTime: T },
        { type: "PodScheduled", status: "True", lastTransitionTime: T },
      ],
      containerStatuses: [{ name: "member", ready: true, restartCount: 0, state: { running: { startedAt: T } } }],
    },
    { nodeName: "kwok-node-0" },
  );

const sandbox = (name: string, ready: { status: string; reason: string; message: string }, extra: Json[] = []): Json => ({
  apiVersion: "agents.x-k8s.io/v1beta1",
  kind: "Sandbox",
  metadata: { name, namespace: "run-1", resourceVersion: "2", labels: { "cohort-lab.dev/run": RUN, "cohort-lab.dev/member": name } },
  status: { podIPs: ["10.0.0.7"], conditions: [{ type: "Ready", lastTransitionTime: T, ...ready }, ...extra] },
});

describe("classifyPod", () => {
  it("a gated pod is pending", () => {
    expect(classifyPod(gated("agent-0"), true)).toEqual({ kind: "pending" });
  });

  it("Running + Ready=True is ready", () => {
    expect(classifyPod(readyPod("agent-0"), true)).toEqual({ kind: "ready" });
  });

  it("kwok's pod-container-running-failed stage: Failed with the container's exit code", () => {
    const failed = pod(
      "agent-3",
      {
        phase: "Failed",
        conditions: [{ type: "Ready", status: "False", reason: "", lastTransitionTime: T }],
        containerStatuses: [
          {
            name: "member",
            ready: false,
            restartCount: 0,
            state: { terminated: { exitCode: 1, reason: "containerFailed", message: "container failed", startedAt: T, finishedAt: T } },
          },
        ],
      },
      { nodeName: "kwok-node-0" },
    );
    expect(classifyPod(failed, true)).toEqual({
      kind: "exited",
      reason: 'pod run-1/agent-3 failed: container "member" terminated with exit code 1 (containerFailed): container failed',
      exitCode: 1,
    });
  });

  it("an evicted pod (phase Failed, no container state) names the pod's reason", () => {
    const evicted = pod("agent-1", { phase: "Failed", reason: "Evicted", message: "The node was low on resource: memory." });
    expect(classifyPod(evicted, true)).toEqual({ kind: "exited", reason: "pod run-1/agent-1 failed (Evicted): The node was low on resource: memory.", exitCode: null });
  });

  it("a long termination message (log tail, FallbackToLogsOnError) becomes the output tail, not the reason", () => {
    const log = "booting\nloading model\nError: listen EADDRINUSE :::8080\n";
    const failed = pod("agent-4", { phase: "Failed", containerStatuses: [{ name: "member", state: { terminated: { exitCode: 1, reason: "Error", message: log } } }] });
    expect(classifyPod(failed, true)).toEqual({
      kind: "exited",
      reason: 'pod run-1/agent-4 failed: container "member" terminated with exit code 1 (Error)',
      exitCode: 1,
      outputTail: "booting\nloading model\nError: listen EADDRINUSE :::8080",
    });
  });

  it("a member that exits 0 has exited (Succeeded)", () => {
    const done = pod("agent-2", { phase: "Succeeded", containerStatuses: [{ name: "member", state: { terminated: { exitCode: 0, reason: "Completed" } } }] });
    expect(classifyPod(done, false)).toEqual({ kind: "exited", reason: 'pod run-1/agent-2 exited: container "member" terminated with exit code 0 (Completed)', exitCode: 0 });
  });

  it("ErrImagePull / ImagePullBackOff fail at once with the kubelet's message", () => {
    const pulling = pod("router-0", {
      phase: "Pending",
      conditions: [{ type: "PodScheduled", status: "True", lastTransitionTime: T }],
      containerStatuses: [
        {
          name: "member",
          ready: false,
          state: { waiting: { reason: "ImagePullBackOff", message: 'Back-off pulling image "registry.example/agent@sha256:abc"' } },
        },
      ],
    });
    expect(classifyPod(pulling, true)).toEqual({
      kind: "exited",
      reason: 'pod run-1/router-0: container "member" cannot start (ImagePullBackOff): Back-off pulling image "registry.example/agent@sha256:abc"',
      exitCode: null,
    });
  });

  it("CreateContainerConfigError from a kubelet cache that has not synced yet is not a failure (the kubelet retries)", () => {
    const waiting = (message: string) =>
      pod("gateway-1", {
        phase: "Pending",
        conditions: [{ type: "PodScheduled", status: "True", lastTransitionTime: T }],
        containerStatuses: [{ name: "member", ready: false, state: { waiting: { reason: "CreateContainerConfigError", message } } }],
      });
    // Seen on a real kind cluster under load: the run's Secret existed, the kubelet's watch had not delivered it yet.
    expect(classifyPod(waiting("failed to sync secret cache: timed out waiting for the condition"), true)).toEqual({ kind: "pending" });
    expect(classifyPod(waiting("failed to sync configmap cache: timed out waiting for the condition"), true)).toEqual({ kind: "pending" });
    // A missing key stays a failure at once.
    expect(classifyPod(waiting("couldn't find key TOKEN in Secret run-1/cohort-secrets"), true)).toEqual({
      kind: "exited",
      reason: 'pod run-1/gateway-1: container "member" cannot start (CreateContainerConfigError): couldn\'t find key TOKEN in Secret run-1/cohort-secrets',
      exitCode: null,
    });
  });

  it("ContainerCreating is not a failure", () => {
    const creating = pod("router-0", { phase: "Pending", containerStatuses: [{ name: "member", state: { waiting: { reason: "ContainerCreating" } } }] });
    expect(classifyPod(creating, true)).toEqual({ kind: "pending" });
  });

  it("Unschedulable once ungated: admitted by Kueue but unschedulable, with the scheduler's message", () => {
    const stuck = pod("agent-9", {
      phase: "Pending",
      conditions: [
        {
          type: "PodScheduled",
          status: "False",
          reason: "Unschedulable",
          message: "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
          lastTransitionTime: T,
        },
      ],
    });
    expect(classifyPod(stuck, true)).toEqual({
      kind: "unschedulable",
      reason:
        "pod run-1/agent-9 was admitted by Kueue but is unschedulable: 0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
    });
    expect(classifyPod(stuck, false)).toEqual({
      kind: "unschedulable",
      reason:
        "pod run-1/agent-9 is unschedulable: 0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
    });
  });

  it("Kueue's TerminationTarget condition (eviction/preemption) wins over everything else", () => {
    const target = readyPod("agent-0");
    (target.status as any).conditions.push({
      type: "TerminationTarget",
      status: "True",
      reason: "WorkloadEvictedDueToPodsReadyTimeout",
      message: "Exceeded the PodsReady timeout run-1/society",
      lastTransitionTime: T,
    });
    expect(classifyPod(target, true)).toEqual({
      kind: "exited",
      reason: "pod run-1/agent-0 stopped by Kueue (WorkloadEvictedDueToPodsReadyTimeout): Exceeded the PodsReady timeout run-1/society",
      exitCode: null,
    });
  });

  it("podProgress explains a pod that is not ready", () => {
    expect(podProgress(undefined)).toBe("no pod yet");
    expect(podProgress(gated("a"))).toBe("gated by cohort-lab.dev/start");
    expect(podProgress(readyPod("a"))).toBe("Running on kwok-node-0, Ready=True");
  });
});

describe("classifySandbox", () => {
  it("Ready=True DependenciesReady is ready", () => {
    expect(classifySandbox(sandbox("a", { status: "True", reason: "DependenciesReady", message: "Pod is Ready; Service Exists" }))).toEqual({ kind: "ready" });
  });
  it("Ready=False is pending, with the controller's message", () => {
    expect(classifySandbox(sandbox("a", { status: "False", reason: "DependenciesNotReady", message: "Pod exists with phase: Pending; Service Exists" }))).toEqual({
      kind: "pending",
      message: "Pod exists with phase: Pending; Service Exists",
    });
  });
  it("Finished=True PodFailed has exited", () => {
    const finished = sandbox("agent-3", { status: "False", reason: "PodFailed", message: "Pod failed" }, [
      { type: "Finished", status: "True", reason: "PodFailed", message: "Pod failed", lastTransitionTime: T },
    ]);
    expect(classifySandbox(finished)).toEqual({ kind: "exited", reason: "Sandbox run-1/agent-3 finished (PodFailed): Pod failed" });
  });
  it("ReconcilerError is an error (fatal only if it persists): a refusal is permanent, a failed call is not", () => {
    const broken = sandbox("a", {
      status: "False",
      reason: "ReconcilerError",
      message: 'Error seen: admission webhook "vpod.kb.io" denied the request: metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value',
    });
    expect(classifySandbox(broken)).toEqual({
      kind: "error",
      reason:
        'Sandbox run-1/a: the Agent Sandbox controller cannot reconcile it: Error seen: admission webhook "vpod.kb.io" denied the request: metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value',
      permanent: true,
    });
    // Recorded on the sim at 1,000 members: Kueue's pod webhook did not answer in time.
    const flaky = sandbox("b", {
      status: "False",
      reason: "ReconcilerError",
      message:
        'Error seen: Internal error occurred: failed calling webhook "mpod.kb.io": failed to call webhook: Post "https://kueue-webhook-service.kueue-system.svc:36345/mutate--v1-pod?timeout=10s": write tcp 127.0.0.1:46444->127.0.0.1:36345: write: broken pipe',
    });
    expect(classifySandbox(flaky)).toMatchObject({ kind: "error", permanent: false });
  });
});

const wl = (conditions: Json[], extra: Json = {}): Json => ({
  apiVersion: "kueue.x-k8s.io/v1beta2",
  kind: "Workload",
  metadata: { name: RUN, namespace: "run-1", resourceVersion: "5" },
  spec: { active: true, queueName: "cohort" },
  status: { conditions: conditions.map((c) => ({ lastTransitionTime: T, ...c })), ...extra },
});

describe("classifyWorkload", () => {
  it("Admitted=True is admitted, with the ClusterQueue and flavors", () => {
    const admitted = wl(
      [
        { type: "QuotaReserved", status: "True", reason: "QuotaReserved", message: "Quota reserved in ClusterQueue cluster-queue" },
        { type: "Admitted", status: "True", reason: "Admitted", message: "The workload is admitted" },
      ],
      {
        admission: { clusterQueue: "cluster-queue", podSetAssignments: [{ name: "ab12cd34", flavors: { cpu: "kwok", memory: "kwok" }, count: 3 }] },
      },
    );
    expect(classifyWorkload(admitted)).toEqual({ kind: "admitted", clusterQueue: "cluster-queue", flavors: { cpu: "kwok", memory: "kwok" } });
  });
  it("waiting for quota is pending with Kueue's message", () => {
    const pending = wl([
      {
        type: "QuotaReserved",
        status: "False",
        reason: "Pending",
        message: "couldn't assign flavors to pod set ab12cd34: insufficient unused quota for cpu in flavor kwok, 2 more needed",
      },
    ]);
    expect(classifyWorkload(pending)).toEqual({
      kind: "pending",
      message: "couldn't assign flavors to pod set ab12cd34: insufficient unused quota for cpu in flavor kwok, 2 more needed",
    });
  });
  it("a missing LocalQueue is inadmissible at once (C4)", () => {
    const missing = wl([{ type: "QuotaReserved", status: "False", reason: "Inadmissible", message: "LocalQueue cohort doesn't exist" }]);
    expect(classifyWorkload(missing)).toEqual({ kind: "inadmissible", reason: `Kueue cannot admit Workload run-1/${RUN}: LocalQueue cohort doesn't exist` });
  });
  it("a roster above the queue's maximum capacity can never fit", () => {
    const message =
      "couldn't assign flavors to pod set ab12cd34: insufficient quota for cpu in flavor kwok, previously considered podsets requests (0) + current podset request (64) > maximum capacity (8)";
    expect(classifyWorkload(wl([{ type: "QuotaReserved", status: "False", reason: "Pending", message }]))).toEqual({
      kind: "inadmissible",
      reason: `Kueue cannot admit Workload run-1/${RUN}: the roster can never fit its ClusterQueue: ${message}`,
    });
  });
  it("Evicted (PodsReadyTimeout) is lost", () => {
    const evicted = wl([
      { type: "Admitted", status: "False", reason: "NoReservation" },
      { type: "Evicted", status: "True", reason: "PodsReadyTimeout", message: `Exceeded the PodsReady timeout run-1/${RUN}` },
    ]);
    expect(classifyWorkload(evicted)).toEqual({ kind: "lost", reason: `Kueue evicted Workload run-1/${RUN} (PodsReadyTimeout): Exceeded the PodsReady timeout run-1/${RUN}` });
  });
  it("spec.active=false is lost (deactivated)", () => {
    const off = wl([]);
    (off.spec as any).active = false;
    expect(classifyWorkload(off)).toEqual({ kind: "lost", reason: `Workload run-1/${RUN} was deactivated (spec.active is false)` });
  });
  it("the PodsReady timeout with backoffLimitCount 0 (DeactivationTarget RequeuingLimitExceeded, then spec.active=false) is named as the PodsReady eviction", () => {
    const expected = {
      kind: "lost",
      reason:
        `Kueue evicted Workload run-1/${RUN} (PodsReadyTimeout): its pods were not all Ready within waitForPodsReady.timeout of admission, ` +
        `and Kueue deactivated it (RequeuingLimitExceeded): exceeding the maximum number of re-queuing retries`,
    };
    const target = { type: "DeactivationTarget", status: "True", reason: "RequeuingLimitExceeded", message: "exceeding the maximum number of re-queuing retries" };
    expect(classifyWorkload(wl([{ type: "Admitted", status: "True", reason: "Admitted" }, target]))).toEqual(expected);
    const off = wl([
      { ...target, status: "False" },
      { type: "Evicted", status: "True", reason: "Deactivated", message: "The workload is deactivated" },
    ]);
    (off.spec as any).active = false;
    expect(classifyWorkload(off)).toEqual(expected);
    // Once PodsReady was True, a deactivation is not a PodsReady timeout.
    const ready = wl([{ type: "PodsReady", status: "True", reason: "PodsReady" }, target]);
    expect(JSON.stringify(classifyWorkload(ready))).not.toMatch(/PodsReadyTimeout/);
  });
});

// ---- event routing: recorded watch events in, MemberEvents out ----

const SPEC = `
apiVersion: cohort-lab/v1
kind: Cohort
name: society
roles:
  - name: router
    app: { image: "r@sha256:${"b".repeat(64)}", command: [serve] }
  - name: agent
    replicas: 2
    needs: [router]
    app: { image: "r@sha256:${"b".repeat(64)}", command: [agent] }
`;

function makeRun(overrides: Record<string, unknown> = {}): { run: Run; events: MemberEvent[] } {
  const spec = loadRunSpec(SPEC);
  const events: MemberEvent[] = [];
  const { settings, ctx } = resolveKubernetesConfig({
    spec,
    runId: "society-20260101T120000Z-a1b2c3",
    namespace: "run-1",
    queue: "cohort",
    events: (e) => events.push(e),
    ...overrides,
  });
  const endpoints = new Map(memberIdentities(spec).map((m) => [m.id, { host: `${m.id}.run-1.svc`, port: 8080 }]));
  const plans = planMembers({ spec, runId: "society-20260101T120000Z-a1b2c3", runDir: "/tmp/r", endpoints, secrets: new Map() });
  // The routing under test never touches the API client.
  const run = new Run(
    undefined as never,
    undefined as never,
    ctx,
    settings,
    (e) => events.push(e),
    () => 0,
  );
  run.setRoster(plans);
  run.phase = "admitted";
  return { run, events };
}

const readySandbox = (name: string) => sandbox(name, { status: "True", reason: "DependenciesReady", message: "Pod is Ready" });

describe("Run: watch events -> member events", () => {
  afterEach(() => vi.useRealTimers());

  it("ready only when started AND Pod Ready AND Sandbox Ready (in either order), once", () => {
    const { run, events } = makeRun();
    run.onPod({ type: "ADDED", object: readyPod("router-0") });
    expect(events).toEqual([]); // not started yet
    run.members.get("router-0")!.started = true;
    run.members.get("router-0")!.startedAtMs = 0;
    run.onPod({ type: "MODIFIED", object: readyPod("router-0") });
    expect(events).toEqual([]); // Sandbox not Ready yet
    run.onSandbox({ type: "MODIFIED", object: readySandbox("router-0") });
    run.onSandbox({ type: "MODIFIED", object: readySandbox("router-0") });
    expect(events).toEqual([{ kind: "ready", member: "router-0", detail: { node: "kwok-node-0", podIPs: ["10.0.0.7"] } }]);
  });

  it("a failed pod is reported once, naming the member", () => {
    const { run, events } = makeRun();
    const failed = pod("agent-1", { phase: "Failed", containerStatuses: [{ name: "member", state: { terminated: { exitCode: 137, reason: "OOMKilled" } } }] });
    run.onPod({ type: "MODIFIED", object: failed });
    run.onPod({ type: "DELETED", object: failed });
    expect(events).toEqual([{ kind: "exited", member: "agent-1", reason: 'pod run-1/agent-1 failed: container "member" terminated with exit code 137 (OOMKilled)' }]);
  });

  it("a pod deleted by someone else is an exit; a stopping member's deletion is not", () => {
    const { run, events } = makeRun();
    run.onPod({ type: "ADDED", object: gated("agent-0") });
    run.onPod({ type: "DELETED", object: gated("agent-0") });
    run.members.get("agent-1")!.stopping = true;
    run.onPod({ type: "ADDED", object: gated("agent-1") });
    run.onPod({ type: "DELETED", object: gated("agent-1") });
    expect(events).toEqual([{ kind: "exited", member: "agent-0", reason: "pod run-1/agent-0 was deleted" }]);
  });

  it("Unschedulable fails after the grace, unless it clears or cluster-autoscaler announced a scale-up", () => {
    vi.useFakeTimers();
    const { run, events } = makeRun({ unschedulableGraceMs: 2000 });
    const stuck = (name: string) =>
      pod(name, {
        phase: "Pending",
        conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message: "0/2 nodes are available: 2 Insufficient cpu.", lastTransitionTime: T }],
      });
    run.onPod({ type: "MODIFIED", object: stuck("agent-0") });
    run.onPod({ type: "MODIFIED", object: stuck("agent-1") });
    run.onClusterEvent({ type: "ADDED", object: { reason: "TriggeredScaleUp", involvedObject: { kind: "Pod", name: "agent-1" } } });
    run.onPod({ type: "MODIFIED", object: stuck("router-0") });
    vi.advanceTimersByTime(1000);
    run.onPod({ type: "MODIFIED", object: readyPod("router-0") }); // cleared within the grace
    vi.advanceTimersByTime(1500);
    expect(events).toEqual([
      { kind: "exited", member: "agent-0", reason: "pod run-1/agent-0 was admitted by Kueue but is unschedulable: 0/2 nodes are available: 2 Insufficient cpu." },
    ]);
  });

  it("a Workload lost after admission fails the run through the first started member not ready", () => {
    const { run, events } = makeRun();
    for (const id of ["router-0", "agent-0"]) {
      run.members.get(id)!.started = true;
      run.members.get(id)!.startedAtMs = 0;
    }
    run.onPod({ type: "ADDED", object: readyPod("router-0") });
    run.onSandbox({ type: "ADDED", object: readySandbox("router-0") });
    run.onPod({ type: "ADDED", object: gated("agent-0") });
    run.onWorkload({
      type: "MODIFIED",
      object: wl([{ type: "Evicted", status: "True", reason: "PodsReadyTimeout", message: `Exceeded the PodsReady timeout run-1/${RUN}` }]),
    });
    expect(events).toEqual([
      { kind: "ready", member: "router-0", detail: { node: "kwok-node-0", podIPs: ["10.0.0.7"] } },
      {
        kind: "exited",
        member: "agent-0",
        reason: `Kueue evicted Workload run-1/${RUN} (PodsReadyTimeout): Exceeded the PodsReady timeout run-1/${RUN}; not ready: agent-0 (gated by cohort-lab.dev/start), agent-1 (no pod yet)`,
      },
    ]);
  });

  it("ignores objects of other runs", () => {
    const { run, events } = makeRun();
    const foreign = pod("agent-0", { phase: "Failed" });
    (foreign.metadata as any).labels["cohort-lab.dev/run"] = "other-run";
    run.onPod({ type: "MODIFIED", object: foreign });
    expect(events).toEqual([]);
  });
});

describe("podTerminated (stop is done)", () => {
  it("a pod is terminated when gone, terminal, or deleted with grace 0 (the node's final delete; Kueue's finalizer may keep the object)", () => {
    const deleting = (grace: number, phase = "Running"): Json => ({
      metadata: { name: "a", deletionTimestamp: T, deletionGracePeriodSeconds: grace, finalizers: ["kueue.x-k8s.io/managed"] },
      status: { phase },
    });
    expect(podTerminated(undefined)).toBe(true);
    expect(podTerminated(readyPod("a"))).toBe(false);
    expect(podTerminated(deleting(30))).toBe(false);
    expect(podTerminated(deleting(0))).toBe(true);
    expect(podTerminated(deleting(30, "Failed"))).toBe(true);
    expect(podTerminated({ metadata: { name: "a" }, status: { phase: "Failed" } })).toBe(false);
  });
});

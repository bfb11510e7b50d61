/**
 * `admission: "workloadGated"` (runtime/backends/kubernetes/admit.ts, start.ts): every member's Sandbox is created
 * first, gated by our start gate and without Kueue metadata; the runtime's Workload is created only once every pod
 * exists; `start(member)` is ONE strategic-merge patch that removes our gate and adds the admitted flavor's
 * nodeSelector and tolerations (at most `createConcurrency` in flight); a roster Kueue refuses fails admission with
 * Kueue's words and `close()` deletes the Sandboxes it left; a member lost before admission fails admission naming
 * it. A fake API client records the calls and lets the test deliver watch events as the API server would.
 */
import { describe, expect, it } from "vitest";
import { memberIdentities, planMembers } from "../../runtime/core/plan";
import { loadRunSpec } from "../../runtime/core/spec";
import { admitRoster } from "../../runtime/backends/kubernetes/admit";
import { resolveKubernetesConfig } from "../../runtime/backends/kubernetes/index";
import { renderSandbox, type Json } from "../../runtime/backends/kubernetes/render";
import { Run } from "../../runtime/backends/kubernetes/run";
import { startMember, startPatch } from "../../runtime/backends/kubernetes/start";
import { closeRun } from "../../runtime/backends/kubernetes/stop";

const RUN_ID = "society-20260101T120000Z-a1b2c3";
const RUN = "society-20260101t120000z-a1b2c3";
const T = "2026-01-01T12:00:00Z";
const SPEC = `
apiVersion: cohort-lab/v1
kind: Cohort
name: society
roles:
  - name: agent
    replicas: 3
    app: { image: "r@sha256:${"b".repeat(64)}", command: [agent] }
    resources: { cpu: 10m, memory: 16Mi }
`;
const FLAVOR_TOLERATION = { key: "cohort-lab.dev/agents", operator: "Equal", value: "true", effect: "NoSchedule" } as const;
const FLAVORS = { agents: { nodeLabels: { "cohort-lab.dev/pool": "agents" }, tolerations: [FLAVOR_TOLERATION] } };
/** What the DefaultTolerationSeconds admission plugin adds to every pod at create. */
const DEFAULT_TOLERATIONS = [
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
];

interface Call {
  readonly key: string;
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
}

/** A fake KubeClient: lists are empty, watches deliver what `emit` sends, writes are recorded and answered `{}`. */
function fakeClient(): {
  client: unknown;
  calls: Call[];
  emit: (watchKey: string, type: string, object: Json) => void;
  onWrite: (hook: (call: Call) => void) => void;
  gate: (hold: boolean) => void;
} {
  const calls: Call[] = [];
  const watchers = new Map<string, (type: string, object: Json) => void>();
  let hook: (call: Call) => void = () => undefined;
  let held: (() => void)[] | undefined;
  const client = {
    server: "https://fake",
    request: async (key: string, method: string, path: string, options: { body?: unknown } = {}) => {
      if (method === "GET") return { items: [], metadata: { resourceVersion: "1" } };
      const call = { key, method, path, ...(options.body !== undefined ? { body: options.body } : {}) };
      calls.push(call);
      if (held !== undefined) await new Promise<void>((resolve) => held!.push(resolve));
      hook(call);
      return {};
    },
    watch: async (key: string, _path: string, _query: unknown, onEvent: (type: string, object: Json) => void) => {
      watchers.set(key, onEvent);
      return new AbortController();
    },
    dispose: async () => undefined,
  };
  return {
    client,
    calls,
    emit: (watchKey, type, object) => watchers.get(watchKey)!(type, object),
    onWrite: (h) => {
      hook = h;
    },
    gate: (hold) => {
      if (hold) held = [];
      else {
        const waiting = held ?? [];
        held = undefined;
        for (const resolve of waiting) resolve();
      }
    },
  };
}

function gatedRun(options: Record<string, unknown> = {}): { run: Run; fake: ReturnType<typeof fakeClient>; plans: ReturnType<typeof planMembers> } {
  const spec = loadRunSpec(SPEC);
  const { settings, ctx } = resolveKubernetesConfig({
    spec,
    runId: RUN_ID,
    namespace: "run-1",
    queue: "cohort",
    admission: "workloadGated",
    flavors: FLAVORS,
    events: () => undefined,
    closeTimeoutMs: 1000,
    ...options,
  });
  const fake = fakeClient();
  const run = new Run(
    fake.client as never,
    undefined as never,
    ctx,
    settings,
    () => undefined,
    () => Date.now(),
  );
  const endpoints = new Map(memberIdentities(spec).map((m) => [m.id, { host: `${m.id}.run-1.svc`, port: 8080 }]));
  return { run, fake, plans: planMembers({ spec, runId: RUN_ID, runDir: "/tmp/r", endpoints, secrets: new Map() }) };
}

const pod = (name: string, extra: Json = {}): Json => ({
  metadata: { name, namespace: "run-1", resourceVersion: "2", labels: { "cohort-lab.dev/run": RUN, "cohort-lab.dev/member": name } },
  spec: { schedulingGates: [{ name: "cohort-lab.dev/start" }], tolerations: DEFAULT_TOLERATIONS, ...extra },
  status: { phase: "Pending" },
});

const workload = (conditions: Json[]): Json => ({
  metadata: { name: RUN, namespace: "run-1", resourceVersion: "3" },
  spec: { active: true },
  status: {
    conditions: conditions.map((c) => ({ lastTransitionTime: T, ...c })),
    admission: { clusterQueue: "cohort-lab", podSetAssignments: [{ name: "agent", flavors: { cpu: "agents", memory: "agents" }, count: 3 }] },
  },
});

const tick = async (n = 3): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "ok";
  } catch (error) {
    return (error as Error).message;
  }
}

describe('admission: "workloadGated"', () => {
  it("renders the Sandbox with only our start gate: no Kueue metadata, no placement (added at start)", () => {
    const { run, plans } = gatedRun();
    const template = (renderSandbox(plans[0]!, run.ctx) as any).spec.podTemplate;
    expect(Object.keys(template.metadata.labels).filter((k: string) => k.startsWith("kueue.x-k8s.io/"))).toEqual([]);
    expect(template.metadata.annotations).toBeUndefined();
    expect(template.spec.schedulingGates).toEqual([{ name: "cohort-lab.dev/start" }]);
    expect(template.spec.nodeSelector).toBeUndefined();
    expect(template.spec.tolerations).toBeUndefined();
  });

  it("creates every Sandbox, then (once every pod exists) the Workload; admitted on Admitted=True; then one patch per start", async () => {
    const { run, fake, plans } = gatedRun();
    const admitting = outcome(admitRoster(run, plans, new AbortController().signal));
    await tick();
    expect(fake.calls.map((c) => `${c.key} ${c.path}`)).toEqual([
      "create sandboxes.agents.x-k8s.io /apis/agents.x-k8s.io/v1beta1/namespaces/run-1/sandboxes",
      "create sandboxes.agents.x-k8s.io /apis/agents.x-k8s.io/v1beta1/namespaces/run-1/sandboxes",
      "create sandboxes.agents.x-k8s.io /apis/agents.x-k8s.io/v1beta1/namespaces/run-1/sandboxes",
    ]);
    expect(fake.calls.map((c) => ((c.body as Json).metadata as Json).name)).toEqual(["agent-0", "agent-1", "agent-2"]);
    // Two of three pods: no Workload yet.
    fake.emit("watch pods", "ADDED", pod("agent-0"));
    fake.emit("watch pods", "ADDED", pod("agent-1"));
    await tick();
    expect(fake.calls.length).toBe(3);
    expect(run.admission.sandboxesCreatedMs).toBeDefined();
    expect(run.admission.membersCreatedMs).toBeUndefined();
    fake.emit("watch pods", "ADDED", pod("agent-2"));
    await tick();
    expect(run.admission.membersCreatedMs).toBeDefined();
    expect(fake.calls.map((c) => c.key)).toEqual([...Array(3).fill("create sandboxes.agents.x-k8s.io"), "create workloads.kueue.x-k8s.io"]);
    const wl = fake.calls[3]!.body as any;
    expect([wl.metadata.name, wl.spec.queueName, wl.spec.podSets.map((ps: Json) => [ps.name, ps.count])]).toEqual([RUN, "cohort", [["agent", 3]]]);
    fake.emit("watch workloads.kueue.x-k8s.io", "ADDED", workload([{ type: "QuotaReserved", status: "True", reason: "QuotaReserved" }]));
    await tick();
    expect(run.phase).toBe("admitting");
    fake.emit(
      "watch workloads.kueue.x-k8s.io",
      "MODIFIED",
      workload([
        { type: "QuotaReserved", status: "True", reason: "QuotaReserved" },
        { type: "Admitted", status: "True", reason: "Admitted" },
      ]),
    );
    expect(await admitting).toBe("ok");
    expect(run.phase).toBe("admitted");
    expect(run.admission.membersCreatedMs! <= run.admission.admittedMs!).toBe(true);

    // start: ONE patch, the gate removed and the flavor's placement added in the same body.
    await startMember(run, plans[0]!, new AbortController().signal);
    expect(fake.calls.slice(4)).toEqual([
      {
        key: "patch pods",
        method: "PATCH",
        path: "/api/v1/namespaces/run-1/pods/agent-0",
        body: {
          spec: {
            nodeSelector: { "cohort-lab.dev/pool": "agents" },
            tolerations: [...DEFAULT_TOLERATIONS, FLAVOR_TOLERATION],
            schedulingGates: [{ $patch: "delete", name: "cohort-lab.dev/start" }],
          },
        },
      },
    ]);
    expect(run.members.get("agent-0")!.started).toBe(true);
  });

  it("start()'s patches are bounded by createConcurrency, and one queued when the run closes is not sent", async () => {
    const { run, fake, plans } = gatedRun({ createConcurrency: 1 });
    run.setRoster(plans);
    for (const p of plans) run.onPod({ type: "ADDED", object: pod(p.id) });
    run.placements = new Map([["agent", { nodeSelector: { "cohort-lab.dev/pool": "agents" }, tolerations: [FLAVOR_TOLERATION] }]]);
    run.phase = "admitted";
    fake.gate(true);
    const starts = plans.map((p) => outcome(startMember(run, p, new AbortController().signal)));
    await tick();
    expect(fake.calls.map((c) => c.path)).toEqual(["/api/v1/namespaces/run-1/pods/agent-0"]);
    run.phase = "closing";
    fake.gate(false);
    expect(await Promise.all(starts)).toEqual(["ok", "member agent-1: not started: the run is closing", "member agent-2: not started: the run is closing"]);
    expect(fake.calls.length).toBe(1);
  });

  it("a roster Kueue refuses fails admission with Kueue's reason; close() deletes the Sandboxes and the Workload", async () => {
    const { run, fake, plans } = gatedRun();
    const admitting = outcome(admitRoster(run, plans, new AbortController().signal));
    await tick();
    for (const p of plans) fake.emit("watch pods", "ADDED", pod(p.id));
    await tick();
    fake.emit(
      "watch workloads.kueue.x-k8s.io",
      "ADDED",
      workload([
        {
          type: "QuotaReserved",
          status: "False",
          reason: "Pending",
          message:
            "couldn't assign flavors to pod set agent: insufficient quota for cpu in flavor agents, previously considered podsets requests (0) + current podset request (30m) > maximum capacity (20m)",
        },
      ]),
    );
    expect(await admitting).toMatch(new RegExp(`^Kueue cannot admit Workload run-1/${RUN}: the roster can never fit its ClusterQueue`));
    // The controllers delete what close() asks for: every pod goes.
    fake.onWrite((call) => {
      if (call.key === "deletecollection sandboxes.agents.x-k8s.io") for (const p of plans) fake.emit("watch pods", "DELETED", pod(p.id));
    });
    await closeRun(run);
    expect(fake.calls.slice(4).map((c) => `${c.method} ${c.path}`)).toEqual([
      "DELETE /apis/agents.x-k8s.io/v1beta1/namespaces/run-1/sandboxes",
      `DELETE /apis/kueue.x-k8s.io/v1beta2/namespaces/run-1/workloads/${RUN}`,
    ]);
    expect(run.leftovers).toEqual([]);
  });

  it("a member whose pod is deleted before admission fails admission naming it; no Workload is created", async () => {
    const { run, fake, plans } = gatedRun();
    const admitting = outcome(admitRoster(run, plans, new AbortController().signal));
    await tick();
    fake.emit("watch pods", "ADDED", pod("agent-0"));
    fake.emit("watch pods", "DELETED", pod("agent-0"));
    expect(await admitting).toBe("member agent-0: pod run-1/agent-0 was deleted");
    expect(fake.calls.map((c) => c.key)).toEqual(Array(3).fill("create sandboxes.agents.x-k8s.io"));
  });
});

describe("startPatch", () => {
  const placement = { nodeSelector: { "cohort-lab.dev/pool": "agents" }, tolerations: [FLAVOR_TOLERATION] };

  it("sends no tolerations when the pod already has the flavor's (an absent operator counts as Equal)", () => {
    const have = pod("agent-0", { tolerations: [...DEFAULT_TOLERATIONS, { key: "cohort-lab.dev/agents", value: "true", effect: "NoSchedule" }] });
    expect(startPatch(have, placement)).toEqual({
      spec: { nodeSelector: { "cohort-lab.dev/pool": "agents" }, schedulingGates: [{ $patch: "delete", name: "cohort-lab.dev/start" }] },
    });
  });

  it("is the bare gate removal with an empty placement", () => {
    expect(startPatch(pod("agent-0"), { nodeSelector: {}, tolerations: [] })).toEqual({ spec: { schedulingGates: [{ $patch: "delete", name: "cohort-lab.dev/start" }] } });
  });
});

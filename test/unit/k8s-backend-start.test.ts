/**
 * `start(member)` with Kueue (runtime/backends/kubernetes/start.ts): the one write per member (the patch that
 * removes our start gate) is sent only once Kueue has removed its own admission gate from that pod, so it never
 * races Kueue's resourceVersion-guarded ungate patch; it is sent at once when Kueue's gate is already gone; the
 * wait ends with a named error when the member's pod is deleted or the member is aborted. Watch events are fed
 * in as the API server would send them; the API client records calls.
 */
import { describe, expect, it } from "vitest";
import { memberIdentities, planMembers } from "../../runtime/core/plan";
import { loadRunSpec } from "../../runtime/core/spec";
import { resolveKubernetesConfig } from "../../runtime/backends/kubernetes/index";
import type { Json } from "../../runtime/backends/kubernetes/render";
import { Run } from "../../runtime/backends/kubernetes/run";
import { startMember } from "../../runtime/backends/kubernetes/start";

const RUN_ID = "society-20260101T120000Z-a1b2c3";
const RUN = "society-20260101t120000z-a1b2c3";
const SPEC = `
apiVersion: cohort-lab/v1
kind: Cohort
name: society
roles:
  - name: agent
    replicas: 2
    app: { image: "r@sha256:${"b".repeat(64)}", command: [agent] }
`;

interface Call {
  readonly key: string;
  readonly method: string;
  readonly path: string;
  readonly body: unknown;
}

function admittedRun(): { run: Run; calls: Call[] } {
  const spec = loadRunSpec(SPEC);
  const { settings, ctx } = resolveKubernetesConfig({ spec, runId: RUN_ID, namespace: "run-1", queue: "cohort", events: () => undefined });
  const endpoints = new Map(memberIdentities(spec).map((m) => [m.id, { host: `${m.id}.run-1.svc`, port: 8080 }]));
  const calls: Call[] = [];
  const client = {
    request: async (key: string, method: string, path: string, options: { body?: unknown }) => {
      calls.push({ key, method, path, body: options.body });
      return {};
    },
  };
  const run = new Run(
    client as never,
    undefined as never,
    ctx,
    settings,
    () => undefined,
    () => Date.now(),
  );
  run.setRoster(planMembers({ spec, runId: RUN_ID, runDir: "/tmp/r", endpoints, secrets: new Map() }));
  run.phase = "admitting";
  for (const name of ["agent-0", "agent-1"]) run.onPod({ type: "ADDED", object: pod(name, ["cohort-lab.dev/start", "kueue.x-k8s.io/admission"]) });
  run.phase = "admitted";
  return { run, calls };
}

function pod(name: string, gates: string[]): Json {
  return {
    metadata: { name, namespace: "run-1", resourceVersion: "1", labels: { "cohort-lab.dev/run": RUN, "cohort-lab.dev/member": name, "kueue.x-k8s.io/managed": "true" } },
    spec: { schedulingGates: gates.map((g) => ({ name: g })) },
    status: { phase: "Pending" },
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("startMember with Kueue", () => {
  it("waits for Kueue to remove its admission gate, then sends the one patch that removes ours", async () => {
    const { run, calls } = admittedRun();
    const plan = run.members.get("agent-0")!.plan;
    let started = false;
    const promise = startMember(run, plan, new AbortController().signal).then((h) => {
      started = true;
      return h;
    });
    await tick();
    expect(calls).toEqual([]);
    run.onPod({ type: "MODIFIED", object: pod("agent-1", ["cohort-lab.dev/start"]) }); // another member's pod: no effect
    await tick();
    expect([calls.length, started]).toEqual([0, false]);
    run.onPod({ type: "MODIFIED", object: pod("agent-0", ["cohort-lab.dev/start"]) });
    const handle = await promise;
    expect(handle.member).toBe("agent-0");
    expect(calls).toEqual([
      {
        key: "patch pods",
        method: "PATCH",
        path: "/api/v1/namespaces/run-1/pods/agent-0",
        body: { spec: { schedulingGates: [{ $patch: "delete", name: "cohort-lab.dev/start" }] } },
      },
    ]);
  });

  it("patches at once when Kueue's gate is already gone", async () => {
    const { run, calls } = admittedRun();
    run.onPod({ type: "MODIFIED", object: pod("agent-1", ["cohort-lab.dev/start"]) });
    await startMember(run, run.members.get("agent-1")!.plan, new AbortController().signal);
    expect(calls.map((c) => c.path)).toEqual(["/api/v1/namespaces/run-1/pods/agent-1"]);
  });

  it("ends the wait with a named error when the pod is deleted or the member is aborted", async () => {
    const { run, calls } = admittedRun();
    const deleted = startMember(run, run.members.get("agent-0")!.plan, new AbortController().signal).catch((e: Error) => e.message);
    const abort = new AbortController();
    const aborted = startMember(run, run.members.get("agent-1")!.plan, abort.signal).catch((e: Error) => e.message);
    await tick();
    run.onPod({ type: "DELETED", object: pod("agent-0", ["cohort-lab.dev/start", "kueue.x-k8s.io/admission"]) });
    abort.abort();
    expect(await deleted).toBe("member agent-0: exited or stopped while waiting for Kueue to remove its admission gate");
    expect(await aborted).toBe("member agent-1: aborted while waiting for Kueue to remove its admission gate");
    expect(calls).toEqual([]);
  });
});

/**
 * Admission of the roster (runtime/backends/kubernetes/admit.ts waitForAdmission): resolves on
 * Admitted=True with every pod present; fails fast, with Kueue's or the controllers' words, instead of
 * waiting for admissionTimeout. Watch events are fed in as the API server would send them.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { memberIdentities, planMembers } from "../../runtime/core/plan";
import { loadRunSpec } from "../../runtime/core/spec";
import { waitForAdmission } from "../../runtime/backends/kubernetes/admit";
import { resolveKubernetesConfig } from "../../runtime/backends/kubernetes/index";
import type { Json } from "../../runtime/backends/kubernetes/render";
import { Run } from "../../runtime/backends/kubernetes/run";

const RUN_ID = "society-20260101T120000Z-a1b2c3";
const RUN = "society-20260101t120000z-a1b2c3";
const T = "2026-01-01T12:00:00Z";
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

function admittingRun(options: Record<string, unknown> = {}): Run {
  const spec = loadRunSpec(SPEC);
  const { settings, ctx } = resolveKubernetesConfig({
    spec,
    runId: RUN_ID,
    namespace: "run-1",
    queue: "cohort",
    events: () => undefined,
    admissionTimeoutMs: 60_000,
    controllerStallMs: 30_000,
    ...options,
  });
  const endpoints = new Map(memberIdentities(spec).map((m) => [m.id, { host: `${m.id}.run-1.svc`, port: 8080 }]));
  const run = new Run(
    undefined as never,
    undefined as never,
    ctx,
    settings,
    () => undefined,
    () => Date.now(),
  );
  run.setRoster(planMembers({ spec, runId: RUN_ID, runDir: "/tmp/r", endpoints, secrets: new Map() }));
  run.phase = "admitting";
  run.admitStartedAt = Date.now();
  return run;
}

const pod = (name: string, managed = true): Json => ({
  metadata: {
    name,
    namespace: "run-1",
    resourceVersion: "1",
    labels: { "cohort-lab.dev/run": RUN, "cohort-lab.dev/member": name, ...(managed ? { "kueue.x-k8s.io/managed": "true" } : {}) },
  },
  spec: { schedulingGates: [{ name: "cohort-lab.dev/start" }, { name: "kueue.x-k8s.io/admission" }] },
  status: { phase: "Pending" },
});

const workload = (conditions: Json[]): Json => ({
  metadata: { name: RUN, namespace: "run-1", resourceVersion: "3" },
  spec: { active: true },
  status: {
    conditions: conditions.map((c) => ({ lastTransitionTime: T, ...c })),
    admission: { clusterQueue: "cohort-lab", podSetAssignments: [{ name: "x", flavors: { cpu: "agents" } }] },
  },
});

const allPods = (run: Run): void => {
  for (const name of ["router-0", "agent-0", "agent-1"]) run.onPod({ type: "ADDED", object: pod(name) });
};

async function outcome(promise: Promise<void>): Promise<string> {
  try {
    await promise;
    return "admitted";
  } catch (error) {
    return (error as Error).message;
  }
}

describe("waitForAdmission", () => {
  afterEach(() => vi.useRealTimers());

  it("resolves once every pod exists and the Workload is Admitted", async () => {
    const run = admittingRun();
    const waiting = waitForAdmission(run, new AbortController().signal);
    allPods(run);
    run.onWorkload({
      type: "ADDED",
      object: workload([
        { type: "QuotaReserved", status: "False", reason: "Pending", message: "couldn't assign flavors: insufficient unused quota for cpu in flavor agents, 1 more needed" },
      ]),
    });
    run.onWorkload({
      type: "MODIFIED",
      object: workload([
        { type: "QuotaReserved", status: "True", reason: "QuotaReserved" },
        { type: "Admitted", status: "True", reason: "Admitted" },
      ]),
    });
    expect(await outcome(waiting)).toBe("admitted");
    expect(run.admittedTo).toEqual({ clusterQueue: "cohort-lab", flavors: { cpu: "agents" } });
  });

  it("fails at once when Kueue says Inadmissible (LocalQueue/ClusterQueue missing)", async () => {
    const run = admittingRun();
    const waiting = waitForAdmission(run, new AbortController().signal);
    allPods(run);
    run.onWorkload({ type: "ADDED", object: workload([{ type: "QuotaReserved", status: "False", reason: "Inadmissible", message: "ClusterQueue cohort-lab doesn't exist" }]) });
    expect(await outcome(waiting)).toBe(`Kueue cannot admit Workload run-1/${RUN}: ClusterQueue cohort-lab doesn't exist`);
  });

  it("fails at once when a pod is not managed by Kueue (pod integration off or namespace not selected)", async () => {
    const run = admittingRun();
    const waiting = waitForAdmission(run, new AbortController().signal);
    run.onPod({ type: "ADDED", object: pod("router-0", false) });
    expect(await outcome(waiting)).toBe(
      'pod run-1/router-0 is not managed by Kueue (no kueue.x-k8s.io/managed label): check that Kueue\'s "pod" integration is enabled and that namespace run-1 matches its managedJobsNamespaceSelector',
    );
  });

  it("diagnoses a missing Agent Sandbox controller (no pod for any Sandbox) after controllerStallMs", async () => {
    vi.useFakeTimers();
    const run = admittingRun({ controllerStallMs: 5000 });
    const waiting = outcome(waitForAdmission(run, new AbortController().signal));
    await vi.advanceTimersByTimeAsync(5000);
    expect(await waiting).toBe(
      "no pod was created for any of the 3 Sandboxes within 5000 ms: check that the Agent Sandbox controller is running and can create pods in namespace run-1",
    );
  });

  it("diagnoses Kueue creating no Workload for the complete group after controllerStallMs", async () => {
    vi.useFakeTimers();
    const run = admittingRun({ controllerStallMs: 5000 });
    const waiting = outcome(waitForAdmission(run, new AbortController().signal));
    allPods(run);
    await vi.advanceTimersByTimeAsync(5000);
    expect(await waiting).toBe(`all 3 pods exist but Kueue created no Workload run-1/${RUN} within 5000 ms: check that Kueue's "pod" integration is enabled and running`);
  });

  it("names Kueue's last word when admissionTimeout passes", async () => {
    vi.useFakeTimers();
    const run = admittingRun({ admissionTimeoutMs: 10_000, controllerStallMs: 60_000 });
    const waiting = outcome(waitForAdmission(run, new AbortController().signal));
    allPods(run);
    run.onWorkload({
      type: "ADDED",
      object: workload([
        {
          type: "QuotaReserved",
          status: "False",
          reason: "Pending",
          message: "couldn't assign flavors to pod set x: insufficient unused quota for cpu in flavor agents, 3 more needed",
        },
      ]),
    });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(await waiting).toBe(
      `the roster was not admitted within 10000 ms (admissionTimeout): Workload run-1/${RUN} pending: couldn't assign flavors to pod set x: insufficient unused quota for cpu in flavor agents, 3 more needed`,
    );
  });

  it("a failed call (unreachable webhook) gets the longer transient grace; it clears when the controller retries", async () => {
    vi.useFakeTimers();
    const run = admittingRun({ reconcileErrorGraceMs: 3000, transientErrorGraceMs: 20_000 });
    const waiting = outcome(waitForAdmission(run, new AbortController().signal));
    const sb = (reason: string, message: string): Json => ({
      metadata: { name: "agent-1", namespace: "run-1", labels: { "cohort-lab.dev/run": RUN, "cohort-lab.dev/member": "agent-1" } },
      status: { conditions: [{ type: "Ready", status: "False", reason, message, lastTransitionTime: T }] },
    });
    run.onSandbox({ type: "MODIFIED", object: sb("ReconcilerError", 'Error seen: Internal error occurred: failed calling webhook "mpod.kb.io": context deadline exceeded') });
    await vi.advanceTimersByTimeAsync(10_000);
    run.onSandbox({ type: "MODIFIED", object: sb("DependenciesNotReady", "Pod exists with phase: Pending") });
    allPods(run);
    run.onWorkload({ type: "ADDED", object: workload([{ type: "Admitted", status: "True", reason: "Admitted" }]) });
    expect(await waiting).toBe("admitted");
  });

  it("a Sandbox the controller keeps failing to reconcile fails admission after the grace", async () => {
    vi.useFakeTimers();
    const run = admittingRun({ reconcileErrorGraceMs: 3000 });
    const waiting = outcome(waitForAdmission(run, new AbortController().signal));
    run.onSandbox({
      type: "MODIFIED",
      object: {
        metadata: { name: "agent-1", namespace: "run-1", labels: { "cohort-lab.dev/run": RUN, "cohort-lab.dev/member": "agent-1" } },
        status: {
          conditions: [
            { type: "Ready", status: "False", reason: "ReconcilerError", message: 'Error seen: pods "agent-1" is forbidden: exceeded quota: compute', lastTransitionTime: T },
          ],
        },
      },
    });
    await vi.advanceTimersByTimeAsync(3000);
    expect(await waiting).toBe(
      'member agent-1: Sandbox run-1/agent-1: the Agent Sandbox controller cannot reconcile it: Error seen: pods "agent-1" is forbidden: exceeded quota: compute',
    );
  });
});

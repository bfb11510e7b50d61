/**
 * Scale rehearsal of the Kubernetes backend on the sim: 1,000 members (1 router + 999 agents that need
 * it) on 12 fake e2-standard-16 nodes, no simulated start-up delay. Prints the figures of the issue's
 * targets (roster admitted as one gang Workload; admission -> all Ready; writes per member; per-member
 * reads; client-side throttle waits); asserts only what must hold at any speed (timed targets are
 * reported, not asserted).
 *
 * Skipped (with the reason) when the sim binaries are not built.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { simQueueNames } from "../../components/sim/queue";
import { simUnavailableReason, startSim, type SimHarness } from "./harness";
import { FAKE_IMAGE, adminClient, namespaceWithQueue, runCohort } from "./k8s-backend-helpers";
import type { KubeClient } from "../../runtime/backends/kubernetes/client";

const unavailable = simUnavailableReason();
const SIZE = Number(process.env.K8S_BACKEND_SCALE_SIZE ?? 1000);

describe.skipIf(unavailable !== undefined)(`kubernetes backend at ${SIZE} members on the sim`, () => {
  let sim: SimHarness;
  let admin: KubeClient;

  beforeAll(async () => {
    sim = await startSim({ nodes: Math.max(2, Math.ceil(SIZE / 90)), controllers: true, podReadyDelayMs: 0, jitterMs: 0 });
    admin = adminClient(sim.kubeconfigPath);
  }, 600_000);

  afterAll(async () => {
    await admin?.dispose();
    await sim?.stop();
  });

  it(`admits ${SIZE} members as one Workload and gets them Ready by watch, 2 writes per member`, async () => {
    await namespaceWithQueue(admin, "k8s-be-scale", simQueueNames.clusterQueue);
    const spec = `apiVersion: cohort-lab/v1
kind: Cohort
name: scale
startupTimeout: 10m
memberTimeout: 10m
admissionTimeout: 5m
concurrency: 128
stopGracePeriod: 1s
roles:
  - name: router
    app: { image: "${FAKE_IMAGE}", command: [serve] }
    resources: { cpu: 10m, memory: 16Mi }
  - name: agent
    replicas: ${SIZE - 1}
    needs: [router]
    app: { image: "${FAKE_IMAGE}", command: [agent] }
    resources: { cpu: 10m, memory: 16Mi }
`;
    const { result, stats, wallMs } = await runCohort(spec, { kubeconfig: sim.kubeconfigPath, namespace: "k8s-be-scale", queue: "cohort" });
    const figures = {
      members: SIZE,
      outcome: result.outcome,
      sandboxesCreatedMs: Math.round(stats.admission.sandboxesCreatedMs ?? -1),
      allPodsObservedMs: Math.round(stats.admission.allPodsObservedMs ?? -1),
      workloadObservedMs: Math.round(stats.admission.workloadObservedMs ?? -1),
      admittedMs: Math.round(stats.admission.admittedMs ?? -1),
      admissionToAllReadyMs: result.timeToReadyMs,
      teardownMs: result.phasesMs.teardown,
      wallMs: Math.round(wallMs),
      memberWritesPerMember: stats.memberWritesPerMember,
      writesPerMember: Number(stats.writesPerMember.toFixed(3)),
      calls: stats.apiCalls.calls,
      maxInFlight: stats.apiCalls.maxInFlight,
      throttled429: stats.apiCalls.throttled,
      conflicts: stats.apiCalls.conflicts,
      clientThrottleWaits: stats.apiCalls.clientThrottleWaits,
      watches: stats.watches,
      leftovers: stats.leftovers.length,
    };
    console.log(`k8s-backend scale figures: ${JSON.stringify(figures)}`);
    expect(result.firstFailure).toBeNull();
    expect(result.readyCount).toBe(SIZE);
    expect(stats.memberWritesPerMember).toBe(2);
    expect(stats.apiCalls.calls["list pods"]).toBe(1 + stats.watches.pods!.relists);
    expect(Object.keys(stats.apiCalls.calls).filter((k) => k === "get pods" || k === "get sandboxes.agents.x-k8s.io")).toEqual([]);
    expect(stats.apiCalls.clientThrottleWaits).toBe(0);
  }, 1_800_000);
});

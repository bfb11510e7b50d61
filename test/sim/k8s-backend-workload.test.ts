/**
 * The Kubernetes backend's `admission: "workload"` and `"workloadGated"` paths against the sim control plane (real kube-apiserver,
 * etcd, kube-scheduler, kwok, Kueue v0.17.0 with `waitForPodsReady` at 30 s, Agent Sandbox v0.5.5), driven by
 * the real scheduler and ledger: the runtime creates and owns ONE Workload for the roster (no owner reference,
 * no Kueue config change), Kueue admits it all or nothing, the members' Sandboxes carry no Kueue metadata and
 * no scheduling gate but the admitted flavor's placement, `PodsReady` is set by the runtime, a roster over the
 * quota is refused, one that cannot fit beside another Workload is not admitted at all, and a roster not Ready
 * within Kueue's timeout is evicted and fails the run naming the eviction. Every test runs for both paths; with
 * `workloadGated` the Sandboxes exist (their pods gated by our start gate only) before the Workload is created,
 * each start is ONE pod patch that removes the gate and adds the flavor's placement (checked on the pods as
 * first seen and as last seen), and a roster Kueue does not admit leaves Sandboxes that close() deletes.
 *
 * Skipped (with the reason) when the sim binaries are not built (`npm run toolchain -- sim`).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { simFlavor, simQueueNames } from "../../components/sim/queue";
import { HttpMethod, KubeClient } from "../../runtime/backends/kubernetes/client";
import { ApiCounters } from "../../runtime/backends/kubernetes/counters";
import type { Json } from "../../runtime/backends/kubernetes/render";
import { ListWatch } from "../../runtime/backends/kubernetes/watch";
import { simUnavailableReason, startSim, type SimHarness } from "./harness";
import { FAKE_IMAGE, adminClient, clusterQueue, ensure, eventually, list, namespaceWithQueue, runCohort } from "./k8s-backend-helpers";

const unavailable = simUnavailableReason();
if (unavailable !== undefined) console.warn(`k8s-backend workload-path sim tests skipped: ${unavailable}`);

function cohort(name: string, roles: string): string {
  return `apiVersion: cohort-lab/v1
kind: Cohort
name: ${name}
startupTimeout: 2m
memberTimeout: 90s
admissionTimeout: 2m
stopGracePeriod: 2s
roles:
${roles}`;
}

const role = (name: string, replicas: number, needs: string[] = [], resources = "{ cpu: 10m, memory: 16Mi }") =>
  `  - name: ${name}
    replicas: ${replicas}
${needs.length > 0 ? `    needs: [${needs.join(", ")}]\n` : ""}    app: { image: "${FAKE_IMAGE}", command: ["serve"] }
    readiness: { tcp: {} }
    resources: ${resources}
`;

const MODES = ["workload", "workloadGated"] as const;

describe.skipIf(unavailable !== undefined)("kubernetes backend on the sim, runtime-owned Workload", () => {
  let sim: SimHarness;
  let admin: KubeClient;
  let n = 0;
  const fresh = (): string => `k8s-wl-${++n}-${Math.random().toString(16).slice(2, 6)}`;
  const flavors = { [simQueueNames.resourceFlavor]: simFlavor() };
  const options = (ns: string, admission: (typeof MODES)[number], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    kubeconfig: sim.kubeconfigPath,
    namespace: ns,
    queue: "cohort",
    admission,
    flavors,
    ...extra,
  });

  beforeAll(async () => {
    sim = await startSim({ nodes: 4, controllers: true, podReadyDelayMs: 0, jitterMs: 0, waitForPodsReadyTimeout: "30s" });
    admin = adminClient(sim.kubeconfigPath);
  }, 600_000);

  afterAll(async () => {
    await admin?.dispose();
    await sim?.stop();
  });

  /** Every object ever seen (first state, and last state before deletion) in a collection while the returned watch runs. */
  async function observe(path: string, key: "list pods" | "list workloads.kueue.x-k8s.io"): Promise<{ seen: Map<string, Json>; first: Map<string, Json>; stop: () => void }> {
    const seen = new Map<string, Json>();
    const first = new Map<string, Json>();
    const client = KubeClient.load(sim.kubeconfigPath, new ApiCounters());
    const lw = new ListWatch(
      client,
      { path, listKey: key, watchKey: key === "list pods" ? "watch pods" : "watch workloads.kueue.x-k8s.io" },
      (e) => {
        const name = String((e.object.metadata as Json).name);
        if (e.type !== "DELETED") seen.set(name, e.object);
        if (!first.has(name)) first.set(name, e.object);
      },
      (error) => {
        throw error;
      },
    );
    await lw.start();
    return {
      seen,
      first,
      stop: () => {
        lw.stop();
        void client.dispose();
      },
    };
  }

  it.each(MODES)(
    "%s: admits 30 members through ONE Workload the runtime owns; pods without Kueue metadata, on the admitted flavor; PodsReady set; 1 (workload) or 2 (workloadGated) writes per member",
    async (mode) => {
      const ns = fresh();
      await namespaceWithQueue(admin, ns, simQueueNames.clusterQueue);
      const workloads = await observe(`/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/workloads`, "list workloads.kueue.x-k8s.io");
      const pods = await observe(`/api/v1/namespaces/${ns}/pods`, "list pods");
      const run = await runCohort(cohort("owned", role("router", 1) + role("agent", 29, ["router"])), options(ns, mode));
      workloads.stop();
      pods.stop();
      const { result, stats, records } = run;
      console.log(
        `${mode} path, 30 members: outcome ${result.outcome}, admission ${result.phasesMs.admission} ms (${JSON.stringify(stats.admission)}), time to ready ${result.timeToReadyMs} ms; calls ${JSON.stringify(stats.apiCalls.calls)}`,
      );
      expect(result.firstFailure).toBeNull();
      expect(result.outcome).toBe("succeeded");
      expect(result.readyCount).toBe(30);
      expect(stats.admissionMode).toBe(mode);
      // ONE Workload, the runtime's: no owner, one pod set per role, PodsReady=True set by cohort-lab.
      expect([...workloads.seen.keys()]).toEqual([stats.podGroup]);
      const wl = workloads.seen.get(stats.podGroup)!;
      expect((wl.metadata as Json).ownerReferences).toBeUndefined();
      expect(((wl.spec as Json).podSets as Json[]).map((ps) => [ps.name, ps.count])).toEqual([
        ["router", 1],
        ["agent", 29],
      ]);
      const podsReady = ((wl.status as Json).conditions as Json[]).find((c) => c.type === "PodsReady");
      expect(podsReady).toMatchObject({ status: "True", reason: "PodsReady" });
      expect(stats.admission.podsReadyMarkedMs).toBeDefined();
      // Pods: not Kueue's, ungated in the end, placed as the flavor says. workloadGated: created gated by our
      // start gate only, without the placement, which start()'s one patch added (KEP-3838).
      expect(pods.seen.size).toBe(30);
      const flavor = simFlavor();
      for (const pod of pods.first.values()) {
        const spec = pod.spec as Json;
        expect(spec.schedulingGates ?? []).toEqual(mode === "workload" ? [] : [{ name: "cohort-lab.dev/start" }]);
        if (mode === "workloadGated") expect(spec.nodeSelector).toBeUndefined();
      }
      for (const pod of pods.seen.values()) {
        const labels = ((pod.metadata as Json).labels ?? {}) as Record<string, string>;
        expect(Object.keys(labels).filter((k) => k.startsWith("kueue.x-k8s.io/"))).toEqual([]);
        const spec = pod.spec as Json;
        expect(spec.schedulingGates ?? []).toEqual([]);
        expect(spec.nodeSelector).toMatchObject(flavor.nodeLabels);
        expect(spec.tolerations).toEqual(expect.arrayContaining([expect.objectContaining(flavor.tolerations[0])]));
      }
      // Writes: one Sandbox create per member (+ one pod patch with workloadGated); per run the Workload's create,
      // PodsReady apply and delete.
      expect(stats.apiCalls.calls["create sandboxes.agents.x-k8s.io"]).toBe(30);
      expect(stats.apiCalls.calls["patch pods"]).toBe(mode === "workload" ? undefined : 30);
      expect(stats.memberWritesPerMember).toBe(mode === "workload" ? 1 : 2);
      // workloadGated: the Workload is created only once every member exists.
      if (mode === "workloadGated") expect(stats.admission.membersCreatedMs!).toBeLessThanOrEqual(stats.admission.workloadCreatedMs!);
      expect(stats.apiCalls.calls["create workloads.kueue.x-k8s.io"]).toBe(1);
      expect(stats.apiCalls.calls["patch workloads/status.kueue.x-k8s.io"]).toBe(1);
      expect(stats.apiCalls.calls["delete workloads.kueue.x-k8s.io"]).toBe(1);
      expect(stats.leftovers).toEqual([]);
      // Dependency order: no agent started before the router was ready.
      const routerReady = records.find((r) => r.kind === "member-ready" && r.member === "router-0")!.seq;
      const agentStarts = records.filter((r) => r.kind === "member-started" && r.member!.startsWith("agent-")).map((r) => r.seq);
      expect(agentStarts.length).toBe(29);
      expect(Math.min(...agentStarts)).toBeGreaterThan(routerReady);
      // The quota is released: the Workload is gone (Kueue dropped its finalizer), and so are the pods.
      await eventually("the Workload to be deleted", 30_000, async () =>
        (await list(admin, `/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/workloads`)).length === 0 ? true : undefined,
      );
      expect(await list(admin, `/api/v1/namespaces/${ns}/pods`)).toEqual([]);
    },
    300_000,
  );

  it.each(MODES)(
    "%s: a roster over the ClusterQueue's quota is refused at admission with Kueue's reason; no Sandbox left",
    async (mode) => {
      const ns = fresh();
      await clusterQueue(admin, `small-${ns}`, simQueueNames.resourceFlavor, { cpu: "500m", memory: "1Gi" });
      await namespaceWithQueue(admin, ns, `small-${ns}`);
      const run = await runCohort(cohort("over", role("agent", 10, [], "{ cpu: 100m, memory: 16Mi }")), options(ns, mode));
      const reason = run.result.firstFailure?.reason ?? "";
      console.log(`${mode} over quota: ${run.result.outcome} after ${run.wallMs.toFixed(0)} ms: ${reason}`);
      expect(run.result.outcome).not.toBe("succeeded");
      expect(reason).toMatch(new RegExp(`Kueue cannot admit Workload ${ns}/${run.stats.podGroup}: the roster can never fit its ClusterQueue`));
      // workload: nothing created; workloadGated: the roster existed (gated) before Kueue refused it, close() deleted it.
      expect(run.stats.apiCalls.calls["create sandboxes.agents.x-k8s.io"]).toBe(mode === "workload" ? undefined : 10);
      expect(run.stats.apiCalls.calls["patch pods"]).toBeUndefined();
      expect(run.stats.leftovers).toEqual([]);
      expect(run.wallMs).toBeLessThan(30_000);
      await eventually("the Workload to be deleted", 30_000, async () =>
        (await list(admin, `/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/workloads`)).length === 0 ? true : undefined,
      );
      expect(await list(admin, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`)).toEqual([]);
    },
    120_000,
  );

  it.each(MODES)(
    "%s: all or nothing: a roster that fits the quota only in part beside another Workload is not admitted, no member started",
    async (mode) => {
      const ns = fresh();
      await clusterQueue(admin, `part-${ns}`, simQueueNames.resourceFlavor, { cpu: "1", memory: "1Gi" });
      await namespaceWithQueue(admin, ns, `part-${ns}`);
      // Another tenant's Workload holds 600m of the 1 CPU.
      await ensure(admin, `/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/workloads`, {
        apiVersion: "kueue.x-k8s.io/v1beta2",
        kind: "Workload",
        metadata: { name: "other", namespace: ns },
        spec: {
          queueName: "cohort",
          podSets: [
            { name: "main", count: 1, template: { spec: { restartPolicy: "Never", containers: [{ name: "c", image: FAKE_IMAGE, resources: { requests: { cpu: "600m" } } }] } } },
          ],
        },
      });
      await eventually("the other Workload to be admitted", 30_000, async () => {
        const wl = await admin.request("admin get" as never, HttpMethod.GET, `/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/workloads/other`);
        return ((wl.status as Json | undefined)?.conditions as Json[] | undefined)?.some((c) => c.type === "Admitted" && c.status === "True") === true ? true : undefined;
      });
      // 5 x 100m = 500m: fits the ClusterQueue, not what is left of it.
      const run = await runCohort(cohort("partial", role("agent", 5, [], "{ cpu: 100m, memory: 16Mi }")), options(ns, mode, { admissionTimeoutMs: 8000 }));
      const reason = run.result.firstFailure?.reason ?? "";
      console.log(`${mode} partial fit: ${run.result.outcome}: ${reason}`);
      expect(run.result.outcome).not.toBe("succeeded");
      expect(reason).toMatch(/the roster was not admitted within 8000 ms \(admissionTimeout\): Workload .* pending: .*insufficient unused quota/);
      expect(run.stats.apiCalls.calls["create sandboxes.agents.x-k8s.io"]).toBe(mode === "workload" ? undefined : 5);
      expect(run.stats.apiCalls.calls["patch pods"]).toBeUndefined();
      expect(run.stats.leftovers).toEqual([]);
      expect(run.result.readyCount).toBe(0);
    },
    120_000,
  );

  it.each(MODES)(
    "%s: a roster not Ready within Kueue's waitForPodsReady timeout is evicted by Kueue, and the run fails naming the eviction",
    async (mode) => {
      const ns = fresh();
      await clusterQueue(admin, `big-${ns}`, simQueueNames.resourceFlavor, { cpu: "1000", memory: "4Ti" });
      await namespaceWithQueue(admin, ns, `big-${ns}`);
      // Each member asks for 20 CPUs (a node has 15890m): admitted, never scheduled; the backend's own
      // Unschedulable grace is longer than Kueue's 30 s timeout, so Kueue's eviction is what ends the run.
      const run = await runCohort(cohort("evicted", role("hog", 2, [], "{ cpu: '20', memory: 1Gi }")), options(ns, mode, { unschedulableGraceMs: 600_000 }));
      const { result, records } = run;
      const admitted = records.find((r) => r.kind === "roster-admitted");
      const failed = records.find((r) => r.kind === "run-failed");
      console.log(`${mode} eviction: ${result.outcome} ${((failed?.elapsedMs ?? 0) - (admitted?.elapsedMs ?? 0)).toFixed(0)} ms after admission: ${result.firstFailure?.reason}`);
      expect(admitted).toBeDefined();
      expect(result.outcome).toBe("failed");
      expect(result.firstFailure?.reason).toMatch(new RegExp(`Kueue evicted Workload ${ns}/${run.stats.podGroup} \\(PodsReadyTimeout\\)`));
      expect(failed!.elapsedMs - admitted!.elapsedMs).toBeGreaterThan(25_000);
      expect(failed!.elapsedMs - admitted!.elapsedMs).toBeLessThan(90_000);
      expect(run.stats.leftovers).toEqual([]);
    },
    300_000,
  );
});

/**
 * The Kubernetes backend against the sim control plane (real kube-apiserver, etcd, kube-scheduler,
 * kube-controller-manager, kwok, Kueue v0.17.0 and the Agent Sandbox controller v0.5.5), driven by the
 * real scheduler and ledger: gang admission as ONE Workload, readiness by watch, fast named failures,
 * admitted-but-unschedulable, API calls per member from the backend's own counters.
 *
 * Skipped (with the reason) when the sim binaries are not built (`npm run toolchain -- sim`).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { simQueueNames } from "../../components/sim/queue";
import { failLabel } from "../../simctl/render";
import { HttpMethod, KubeClient } from "../../runtime/backends/kubernetes/client";
import { ApiCounters } from "../../runtime/backends/kubernetes/counters";
import type { Json } from "../../runtime/backends/kubernetes/render";
import { ListWatch } from "../../runtime/backends/kubernetes/watch";
import { simUnavailableReason, startSim, type SimHarness } from "./harness";
import { FAKE_IMAGE, adminClient, clusterQueue, createKubernetesBackendFor, eventually, list, namespaceWithQueue, runCohort } from "./k8s-backend-helpers";

const unavailable = simUnavailableReason();
if (unavailable !== undefined) console.warn(`k8s-backend sim tests skipped: ${unavailable}`);

function cohort(name: string, roles: string, extra = ""): string {
  return `apiVersion: cohort-lab/v1
kind: Cohort
name: ${name}
startupTimeout: 2m
memberTimeout: 90s
admissionTimeout: 2m
stopGracePeriod: 2s
${extra}roles:
${roles}`;
}

const role = (name: string, replicas: number, needs: string[] = [], resources = "{ cpu: 10m, memory: 16Mi }") =>
  `  - name: ${name}
    replicas: ${replicas}
${needs.length > 0 ? `    needs: [${needs.join(", ")}]\n` : ""}    app: { image: "${FAKE_IMAGE}", command: ["serve"] }
    readiness: { tcp: {} }
    resources: ${resources}
`;

describe.skipIf(unavailable !== undefined)("kubernetes backend on the sim", () => {
  let sim: SimHarness;
  let admin: KubeClient;
  let n = 0;
  const fresh = (): string => `k8s-be-${++n}-${Math.random().toString(16).slice(2, 6)}`;

  beforeAll(async () => {
    sim = await startSim({ nodes: 8, controllers: true, podReadyDelayMs: 0, jitterMs: 0 });
    admin = adminClient(sim.kubeconfigPath);
  }, 600_000);

  afterAll(async () => {
    await admin?.dispose();
    await sim?.stop();
  });

  /** Every Workload ever seen in `namespace` while the returned watch runs. */
  async function observeWorkloads(namespace: string): Promise<{ seen: Map<string, Json>; stop: () => void }> {
    const seen = new Map<string, Json>();
    const client = KubeClient.load(sim.kubeconfigPath, new ApiCounters());
    const lw = new ListWatch(
      client,
      { path: `/apis/kueue.x-k8s.io/v1beta2/namespaces/${namespace}/workloads`, listKey: "list workloads.kueue.x-k8s.io", watchKey: "watch workloads.kueue.x-k8s.io" },
      (e) => {
        if (e.type !== "DELETED") seen.set(String((e.object.metadata as Json).name), e.object);
      },
      (error) => {
        throw error;
      },
    );
    await lw.start();
    return {
      seen,
      stop: () => {
        lw.stop();
        void client.dispose();
      },
    };
  }

  it("admits 50 members as ONE Workload, starts them in dependency order, ready by watch; 2 writes per member, no per-member reads", async () => {
    const ns = fresh();
    await namespaceWithQueue(admin, ns, simQueueNames.clusterQueue);
    const workloads = await observeWorkloads(ns);
    const run = await runCohort(cohort("fifty", role("router", 1) + role("agent", 49, ["router"])), { kubeconfig: sim.kubeconfigPath, namespace: ns, queue: "cohort" });
    workloads.stop();
    const { result, stats, records } = run;
    console.log(
      `50 members: outcome ${result.outcome}, admission ${result.phasesMs.admission} ms (Workload seen ${stats.admission.workloadObservedMs?.toFixed(0)} ms, admitted ${stats.admission.admittedMs?.toFixed(0)} ms), ` +
        `time to ready ${result.timeToReadyMs} ms, teardown ${result.phasesMs.teardown} ms; writes/member ${stats.memberWritesPerMember} (all writes ${stats.writesPerMember.toFixed(2)}); calls ${JSON.stringify(stats.apiCalls.calls)}`,
    );
    expect(result.firstFailure).toBeNull();
    expect(result.outcome).toBe("succeeded");
    expect(result.readyCount).toBe(50);
    // ONE gang Workload for the roster, admitted with all 50 pods in it.
    expect([...workloads.seen.keys()]).toEqual([stats.podGroup]);
    const wl = workloads.seen.get(stats.podGroup)!;
    const podSets = (wl.spec as Json).podSets as Json[];
    expect(podSets.reduce((sum, ps) => sum + Number(ps.count), 0)).toBe(50);
    expect(stats.admission.admittedMs).toBeDefined();
    // Writes: one Sandbox create and one gate-removing patch per member.
    expect(stats.apiCalls.calls["create sandboxes.agents.x-k8s.io"]).toBe(50);
    expect(stats.apiCalls.calls["patch pods"]).toBe(50);
    expect(stats.memberWritesPerMember).toBe(2);
    // Reads: one list per watched kind, no per-member GET, no polling.
    expect(stats.apiCalls.calls["list pods"]).toBe(1);
    expect(stats.apiCalls.calls["list sandboxes.agents.x-k8s.io"]).toBe(2); // available() + the watch's list
    expect(stats.apiCalls.calls["list workloads.kueue.x-k8s.io"]).toBe(1);
    expect(Object.keys(stats.apiCalls.calls).filter((k) => k.startsWith("get ") && k !== "get localqueues.kueue.x-k8s.io")).toEqual([]);
    expect(stats.apiCalls.clientThrottleWaits).toBe(0);
    expect(stats.leftovers).toEqual([]);
    // Dependency order: no agent started before the router was ready.
    const routerReady = records.find((r) => r.kind === "member-ready" && r.member === "router-0")!.seq;
    const agentStarts = records.filter((r) => r.kind === "member-started" && r.member!.startsWith("agent-")).map((r) => r.seq);
    expect(agentStarts.length).toBe(49);
    expect(Math.min(...agentStarts)).toBeGreaterThan(routerReady);
    // The ledger carries the backend's counters.
    const statsRecord = records.find((r) => r.kind === "backend-stats")!;
    expect((statsRecord.stats as Json).memberWritesPerMember).toBe(2);
    // Nothing of the run is left in the namespace.
    expect(await list(admin, `/api/v1/namespaces/${ns}/pods`)).toEqual([]);
    expect(await list(admin, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`)).toEqual([]);
  }, 300_000);

  it("a member whose pod fails fails the run fast, naming it and the reason", async () => {
    const ns = fresh();
    await namespaceWithQueue(admin, ns, simQueueNames.clusterQueue);
    const run = await runCohort(cohort("failing", role("router", 1) + role("agent", 9, ["router"])), {
      kubeconfig: sim.kubeconfigPath,
      namespace: ns,
      queue: "cohort",
      memberPodMetadata: { "agent-3": { labels: { [failLabel]: "true" } } },
    });
    const { result, records } = run;
    const started = records.find((r) => r.kind === "member-started" && r.member === "agent-3")!;
    const failed = records.find((r) => r.kind === "run-failed")!;
    console.log(`pod failure: named ${result.firstFailure?.member} ${(failed.elapsedMs - started.elapsedMs).toFixed(0)} ms after its start; run ${run.wallMs.toFixed(0)} ms`);
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure?.member).toBe("agent-3");
    expect(result.firstFailure?.reason).toBe(
      `member agent-3 exited before it was ready (pod ${ns}/agent-3 failed: container "member" terminated with exit code 1 (Error): simulated failure (sim fail stage))`,
    );
    // Fast: long before the member's (90 s) or the roster's (2 min) deadline.
    expect(failed.elapsedMs - started.elapsedMs).toBeLessThan(30_000);
    expect(run.stats.leftovers).toEqual([]);
  }, 300_000);

  it("a roster that fits the quota but not the nodes is reported as admitted-but-unschedulable, naming the member", async () => {
    const ns = fresh();
    await clusterQueue(admin, `big-${ns}`, simQueueNames.resourceFlavor, { cpu: "1000", memory: "4Ti" });
    await namespaceWithQueue(admin, ns, `big-${ns}`);
    // Each member asks for 20 CPUs; an e2-standard-16 node has 15890m allocatable.
    const run = await runCohort(cohort("hogs", role("hog", 2, [], "{ cpu: '20', memory: 1Gi }")), { kubeconfig: sim.kubeconfigPath, namespace: ns, queue: "cohort" });
    const { result, records } = run;
    const admitted = records.find((r) => r.kind === "roster-admitted");
    const failed = records.find((r) => r.kind === "run-failed")!;
    console.log(
      `admitted-but-unschedulable: named ${result.firstFailure?.member} ${(failed.elapsedMs - (admitted?.elapsedMs ?? 0)).toFixed(0)} ms after admission: ${result.firstFailure?.reason}`,
    );
    expect(admitted).toBeDefined();
    expect(result.outcome).toBe("failed");
    expect(["hog-0", "hog-1"]).toContain(result.firstFailure?.member);
    expect(result.firstFailure?.reason).toMatch(
      new RegExp(`^member hog-[01] exited before it was ready \\(pod ${ns}/hog-[01] was admitted by Kueue but is unschedulable: 0/8 nodes are available: .*Insufficient cpu`),
    );
    expect(failed.elapsedMs - admitted!.elapsedMs).toBeLessThan(30_000);
  }, 300_000);

  it("fails admission at once when the LocalQueue's ClusterQueue does not exist (Kueue: Inadmissible)", async () => {
    const ns = fresh();
    await namespaceWithQueue(admin, ns, "no-such-cq", "orphan", false); // never becomes active
    // Kueue marks it inactive (ClusterQueue missing) shortly after it is created.
    await eventually("LocalQueue orphan to have an Active condition", 30_000, async () => {
      const lq = await admin.request("admin get" as never, HttpMethod.GET, `/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/localqueues/orphan`);
      return ((lq.status as Json | undefined)?.conditions as Json[] | undefined)?.some((c) => c.type === "Active") === true ? true : undefined;
    });
    const run = await runCohort(cohort("orphan", role("solo", 2)), { kubeconfig: sim.kubeconfigPath, namespace: ns, queue: "orphan" }).catch((e: Error) => e);
    // available() refuses an inactive LocalQueue before anything is created.
    expect(run).toBeInstanceOf(Error);
    expect((run as Error).message).toMatch(new RegExp(`^LocalQueue ${ns}/orphan is not active \\(`));
  }, 120_000);

  it("without a LocalQueue: Sandboxes without Kueue metadata, still gated until started, ready by watch", async () => {
    const ns = fresh();
    await namespaceWithQueue(admin, ns, simQueueNames.clusterQueue);
    // Without Kueue nothing injects the agent pool's toleration and node label: the backend renders them.
    const run = await runCohort(cohort("plain", role("db", 1) + role("web", 4, ["db"])), {
      kubeconfig: sim.kubeconfigPath,
      namespace: ns,
      nodeSelector: { "cohort-lab.dev/pool": "agents" },
      tolerations: [{ key: "cohort-lab.dev/agents", operator: "Equal", value: "true", effect: "NoSchedule" }],
    });
    expect(run.result.firstFailure).toBeNull();
    expect(run.result.outcome).toBe("succeeded");
    expect(run.result.readyCount).toBe(5);
    expect(run.stats.apiCalls.calls["list workloads.kueue.x-k8s.io"]).toBeUndefined();
    expect(run.stats.memberWritesPerMember).toBe(2);
  }, 300_000);

  it("refuses a foreign Sandbox of the same name instead of adopting it", async () => {
    const ns = fresh();
    await namespaceWithQueue(admin, ns, simQueueNames.clusterQueue);
    const backend = createKubernetesBackendFor(cohort("taken", role("solo", 1)), { kubeconfig: sim.kubeconfigPath, namespace: ns, queue: "cohort" });
    await admin.request("admin create" as never, HttpMethod.POST, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`, {
      body: {
        apiVersion: "agents.x-k8s.io/v1beta1",
        kind: "Sandbox",
        metadata: { name: "solo-0", namespace: ns },
        spec: { podTemplate: { spec: { containers: [{ name: "x", image: FAKE_IMAGE }] } } },
      },
    });
    const error = await backend.admit(backend.plans, new AbortController().signal).catch((e: Error) => e);
    await backend.close();
    expect((error as Error).message).toBe(`Sandbox ${ns}/solo-0 already exists; refusing to adopt an object this run did not create (the run namespace must be fresh)`);
  }, 120_000);
});

/**
 * Helpers of the Kubernetes backend's sim tests: an admin client on the sim control plane, a fresh run
 * namespace with its Kueue queues, and one cohort run through the real scheduler, ledger and backend.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createKubernetesBackend, type KubernetesBackend, type KubernetesBackendStats } from "../../runtime/backends/kubernetes/index";
import { HttpMethod, KubeApiError, KubeClient } from "../../runtime/backends/kubernetes/client";
import { ApiCounters, type ApiCallKey } from "../../runtime/backends/kubernetes/counters";
import type { Json } from "../../runtime/backends/kubernetes/render";
import type { MemberPlan } from "../../runtime/core/backend";
import { LedgerWriter, readLedger, type LedgerRecord } from "../../runtime/core/ledger";
import { memberIdentities, planMembers } from "../../runtime/core/plan";
import { Scheduler, type RunResult } from "../../runtime/core/scheduler";
import { loadRunSpec } from "../../runtime/core/spec";

/** A digest-pinned image name; kwok never pulls it. */
export const FAKE_IMAGE = `registry.invalid/cohort/member@sha256:${"0".repeat(63)}1`;

/** An admin client on the sim (its own counters: setup calls are not the backend's). */
export function adminClient(kubeconfigPath: string): KubeClient {
  return KubeClient.load(kubeconfigPath, new ApiCounters());
}

/** The kube-apiserver's `/metrics` text (Prometheus exposition format), read with `admin`'s credential. */
export async function apiserverMetrics(admin: KubeClient): Promise<string> {
  return admin.requestText("admin get" as ApiCallKey, HttpMethod.GET, "/metrics", { retry: false });
}

/** Creates an object; an existing one is left as is. */
export async function ensure(admin: KubeClient, collectionPath: string, body: Json): Promise<void> {
  try {
    await admin.request("admin create" as ApiCallKey, HttpMethod.POST, collectionPath, { body });
  } catch (error) {
    if (!(error instanceof KubeApiError && error.status === 409)) throw error;
  }
}

/** Polls `check` every 100 ms until it returns a value (test setup only; the backend never polls). */
export async function eventually<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? "" : `: ${(last as Error).message}`}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A fresh namespace with a LocalQueue `queue` pointing at `clusterQueue`, once the LocalQueue is active.
 */
export async function namespaceWithQueue(admin: KubeClient, namespace: string, clusterQueue: string, queue = "cohort", waitActive = true): Promise<void> {
  await ensure(admin, "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } });
  await ensure(admin, `/apis/kueue.x-k8s.io/v1beta2/namespaces/${namespace}/localqueues`, {
    apiVersion: "kueue.x-k8s.io/v1beta2",
    kind: "LocalQueue",
    metadata: { name: queue, namespace },
    spec: { clusterQueue },
  });
  if (!waitActive) return;
  await eventually(`LocalQueue ${namespace}/${queue} to be active`, 30_000, async () => {
    const lq = await admin.request("admin get" as ApiCallKey, HttpMethod.GET, `/apis/kueue.x-k8s.io/v1beta2/namespaces/${namespace}/localqueues/${queue}`);
    const active = ((lq.status as Json | undefined)?.conditions as Json[] | undefined)?.find((c) => c.type === "Active");
    return active?.status === "True" ? true : undefined;
  });
}

/** A ClusterQueue on `flavor` with the given quota (e.g. far more than the nodes hold), for every namespace. */
export async function clusterQueue(admin: KubeClient, name: string, flavor: string, quota: { cpu: string; memory: string }): Promise<void> {
  await ensure(admin, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", {
    apiVersion: "kueue.x-k8s.io/v1beta2",
    kind: "ClusterQueue",
    metadata: { name },
    spec: {
      namespaceSelector: {},
      resourceGroups: [
        {
          coveredResources: ["cpu", "memory"],
          flavors: [
            {
              name: flavor,
              resources: [
                { name: "cpu", nominalQuota: quota.cpu },
                { name: "memory", nominalQuota: quota.memory },
              ],
            },
          ],
        },
      ],
    },
  });
}

/** Lists a collection (admin). */
export async function list(admin: KubeClient, collectionPath: string): Promise<Json[]> {
  const out = await admin.request("admin list" as ApiCallKey, HttpMethod.GET, collectionPath);
  return (out.items as Json[] | undefined) ?? [];
}

/** What one cohort run produced. */
export interface CohortRun {
  readonly result: RunResult;
  readonly stats: KubernetesBackendStats;
  readonly records: LedgerRecord[];
  readonly backend: KubernetesBackend;
  readonly wallMs: number;
}

/**
 * Runs a cohort through the real scheduler, ledger and Kubernetes backend.
 *
 * @param options - backend options as the CLI passes them (`kubeconfig`, `namespace`, `queue`, ...)
 */
export async function runCohort(specText: string, options: Record<string, unknown>): Promise<CohortRun> {
  const spec = loadRunSpec(specText);
  const runId = `${spec.name}-${new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+/, "")}-${Math.random().toString(16).slice(2, 8)}`;
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "k8s-backend-run-"));
  try {
    const ledger = await LedgerWriter.open(runDir, { runId, profile: "sim", backend: "kubernetes", spec: spec.spec, tools: {}, createdAt: new Date().toISOString() });
    let sink: (e: never) => void = () => undefined;
    const backend = createKubernetesBackend({ runId, runDir, spec, events: (e) => sink(e as never), options });
    await backend.available();
    const scheduler = new Scheduler({ spec, runId, runDir, backend, ledger });
    sink = scheduler.events as (e: never) => void;
    const t0 = performance.now();
    const result = await scheduler.run();
    const wallMs = performance.now() - t0;
    await ledger.close();
    const { records } = await readLedger(runDir);
    return { result, stats: backend.stats(), records, backend, wallMs };
  } finally {
    // The ledger is read back into `records` above; nothing after the run (or its failure) needs the dir.
    fs.rmSync(runDir, { recursive: true, force: true });
  }
}

/**
 * A backend for `specText` plus the member plans the core would give it (for tests that drive admit()
 * directly).
 */
export function createKubernetesBackendFor(specText: string, options: Record<string, unknown>): KubernetesBackend & { plans: MemberPlan[] } {
  const spec = loadRunSpec(specText);
  const runId = `${spec.name}-${new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+/, "")}-${Math.random().toString(16).slice(2, 8)}`;
  const backend = createKubernetesBackend({ runId, runDir: "/nonexistent", spec, events: () => undefined, options });
  const identities = memberIdentities(spec);
  const endpoints = new Map(identities.filter((m) => m.wantsPort).map((m) => [m.id, { host: `${m.id}.${String(options.namespace)}.svc`, port: 8080 }]));
  const plans = planMembers({ spec, runId, runDir: "/nonexistent", endpoints, secrets: new Map() });
  return Object.assign(backend, { plans });
}

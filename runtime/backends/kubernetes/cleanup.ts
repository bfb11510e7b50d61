/**
 * Deletes what one run created in its namespace, from outside the run (the Temporal workflow's `cleanupRun`
 * step, docs/temporal.md): every Sandbox labelled `cohort-lab.dev/run=<run label>` (the Agent Sandbox controller
 * deletes their pods), the run's Kueue Workload (named by the pod group) and its Secret, then waits until no
 * Sandbox and no pod of the run is left. Uses only calls of {@link API_CALLS}, so the run's own ServiceAccount
 * (rbac.ts) may run it. Idempotent: a run that left nothing (its own close already cleaned up) is success.
 */
import { z } from "zod";
import { paths } from "./admit.js";
import { HttpMethod, KubeApiError, KubeClient } from "./client.js";
import { ApiCounters } from "./counters.js";
import { runLabelValue, secretName, type Json } from "./render.js";
import { LABEL_RUN } from "./upstream.js";

/** The backend options cleanup reads (the same `--backend-config` mapping `cohort run` reads; others ignored). */
const cleanupOptions = z.object({
  kubeconfig: z.string().optional(),
  namespace: z.string().min(1, "the run namespace is required"),
  podGroup: z.string().optional(),
});

/** What {@link cleanupKubernetesRun} did. */
export interface KubernetesCleanupReport {
  readonly namespace: string;
  /** The run label value the objects were selected by. */
  readonly runLabel: string;
  /** Sandboxes and pods of the run seen at the first listing (names, `sandbox/x`, `pod/y`), sorted. */
  readonly found: readonly string[];
  /** Milliseconds until nothing of the run was left. */
  readonly elapsedMs: number;
}

/** Raised when the run's objects are still there at the deadline; the message names them. */
export class KubernetesCleanupError extends Error {
  constructor(
    message: string,
    readonly leftovers: readonly string[],
  ) {
    super(message);
    this.name = "KubernetesCleanupError";
  }
}

function ignore404(error: unknown): void {
  if (!(error instanceof KubeApiError && error.status === 404)) throw error;
}

/**
 * Deletes the run's Sandboxes, Workload and Secret and waits until none of its Sandboxes or pods is listed.
 *
 * @param options - the backend options (`kubeconfig` path, `namespace`, optional `podGroup`)
 * @param runId - the run id (`cohort run --run-id`)
 * @param timeoutMs - how long to wait for the objects to go. @default 120000
 * @throws {KubernetesCleanupError} naming what is left at the deadline
 * @throws {KubeApiError} when a call fails (other than 404)
 * @throws {Error} naming the option when `options` is not a backend config
 */
export async function cleanupKubernetesRun(options: Record<string, unknown>, runId: string, timeoutMs = 120_000, pollMs = 500): Promise<KubernetesCleanupReport> {
  const parsed = cleanupOptions.safeParse(options);
  if (!parsed.success) throw new Error(`cleanup: backend config: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  const { kubeconfig, namespace } = parsed.data;
  const runLabel = runLabelValue(runId);
  const podGroup = parsed.data.podGroup ?? runLabel;
  const client = KubeClient.load(kubeconfig, new ApiCounters());
  const p = paths(namespace);
  const labelSelector = `${LABEL_RUN}=${runLabel}`;
  const t0 = Date.now();
  const listNames = async (): Promise<string[]> => {
    const sandboxes = (await client.request("list sandboxes.agents.x-k8s.io", HttpMethod.GET, p.sandboxes, { query: { labelSelector } })) as { items?: Json[] };
    const pods = (await client.request("list pods", HttpMethod.GET, p.pods, { query: { labelSelector } })) as { items?: Json[] };
    const name = (o: Json): string => String((o.metadata as Json | undefined)?.name ?? "?");
    return [...(sandboxes.items ?? []).map((s) => `sandbox/${name(s)}`), ...(pods.items ?? []).map((o) => `pod/${name(o)}`)].sort();
  };
  const found = await listNames();
  await client
    .request("deletecollection sandboxes.agents.x-k8s.io", HttpMethod.DELETE, p.sandboxes, { query: { labelSelector, propagationPolicy: "Background" } })
    .catch(ignore404);
  await client
    .request("delete workloads.kueue.x-k8s.io", HttpMethod.DELETE, `${p.workloads}/${encodeURIComponent(podGroup)}`, { query: { propagationPolicy: "Background" } })
    .catch(ignore404);
  await client.request("delete secrets", HttpMethod.DELETE, `${p.secrets}/${encodeURIComponent(secretName(runLabel))}`).catch(ignore404);
  let left = await listNames();
  while (left.length > 0) {
    if (Date.now() - t0 > timeoutMs) {
      throw new KubernetesCleanupError(`cleanup of run ${runId} in namespace ${namespace}: still there after ${timeoutMs} ms: ${left.slice(0, 20).join(", ")}`, left);
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
    left = await listNames();
  }
  return { namespace, runLabel, found, elapsedMs: Date.now() - t0 };
}

/**
 * Runs a cohort on a running sim the way the `sim` stack does, without Pulumi: the per-run objects of
 * components/run/manifests.ts (Namespace, LocalQueue, ServiceAccount, Role, RoleBinding: `renderRunObjects` with
 * the input the stack's `RunNamespace` gets, no in-cluster runtime), the run's
 * ServiceAccount credentials, then the shipped runtime bundle out of cluster (`node dist/cohort.cjs run
 * --backend kubernetes --backend-config ...`). Used by the sim tier's scenario tests and `npm run bench:sim`.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { renderRunObjects, RUNTIME_NAMES, type RunObjectsInput } from "../components/run/manifests.js";
import { simQueueNames } from "../components/sim/queue.js";
import { parseRunSummary, readLedger, type LedgerRecord, type RunSummary } from "../runtime/index.js";
import { writeRunCredentials } from "./credentials.js";
import { applyObjects } from "./install.js";
import { waitUntil } from "./probe.js";
import { simLayout } from "./render.js";
import { readState } from "./state.js";

/** Options of {@link runCohortOnSim}. */
export interface SimRunOptions {
  readonly stateDir: string;
  /** The RunSpec (YAML or JSON text). */
  readonly specText: string;
  /** Run namespace (DNS-1123 label, new per run). */
  readonly namespace: string;
  /** Absolute path of the runtime bundle (`dist/cohort.cjs`). */
  readonly bundlePath: string;
  /** Artifact root (the ledger goes to `<root>/<runId>`). */
  readonly artifactRoot: string;
  /** Node binary. @default process.execPath */
  readonly nodePath?: string;
  /** The backend's `admission` setting (simctl/credentials.ts). @default "workload" */
  readonly admission?: "workload" | "workloadGated" | "podGroup";
  /** Extra `--backend-option KEY=VALUE` values (e.g. `memberPodMetadata=...`). @default none */
  readonly backendOptions?: readonly string[];
  /** LocalQueue name; `null` = run without Kueue. @default "cohort" */
  readonly queue?: string | null;
}

/** What a run on the sim produced. */
export interface SimRunResult {
  readonly exitCode: number;
  /** The runtime's JSON summary line (absent when it printed none). */
  readonly summary?: RunSummary;
  /** The runtime's last stderr line (its one-line reason on failure). */
  readonly reason: string;
  readonly stderr: string;
  /** Ledger records (when a ledger exists). */
  readonly records: readonly LedgerRecord[];
  /** Wall time of the runtime process, milliseconds. */
  readonly wallMs: number;
}

/**
 * Creates the per-run objects and credentials, then runs the runtime.
 *
 * @throws Error when the objects cannot be applied or the LocalQueue never becomes active
 */
export async function runCohortOnSim(o: SimRunOptions): Promise<SimRunResult> {
  const l = simLayout(path.resolve(o.stateDir));
  const state = readState(l.stateFile);
  if (state === undefined) throw new Error(`no sim in ${o.stateDir}`);
  const queue = o.queue === undefined ? simQueueNames.localQueue : o.queue;
  // The input RunNamespace gets on the `sim` stack (no in-cluster runtime: the runtime runs here).
  const run: RunObjectsInput = { namespace: o.namespace, localQueue: queue ?? simQueueNames.localQueue, clusterQueue: simQueueNames.clusterQueue };
  const objects = renderRunObjects(run);
  await applyObjects(state.kubeconfig, [objects.namespace, ...(queue !== null ? [objects.localQueue] : []), objects.serviceAccount, objects.role, objects.roleBinding]);
  if (queue !== null) await waitLocalQueueActive(state.kubeconfig, o.namespace, queue);
  const creds = await writeRunCredentials({
    stateDir: o.stateDir,
    namespace: o.namespace,
    serviceAccount: RUNTIME_NAMES.serviceAccount,
    ...(queue !== null ? { queue } : {}),
    ...(o.admission !== undefined ? { admission: o.admission } : {}),
  });
  const { execa } = await import("execa");
  const started = performance.now();
  const r = await execa(
    o.nodePath ?? process.execPath,
    [
      o.bundlePath,
      "run",
      "--spec",
      "-",
      "--artifacts",
      o.artifactRoot,
      "--profile",
      "sim",
      "--backend",
      "kubernetes",
      "--backend-config",
      creds.backendConfig,
      ...(o.backendOptions ?? []).flatMap((v) => ["--backend-option", v]),
    ],
    { input: o.specText, reject: false, env: { ...process.env, NO_COLOR: "1" } },
  );
  const wallMs = performance.now() - started;
  const stdout = String(r.stdout).trim();
  const stderr = String(r.stderr);
  const last = stdout
    .split("\n")
    .filter((x) => x.trim() !== "")
    .at(-1);
  const summary = last !== undefined && last.startsWith("{") ? parseRunSummary(last) : undefined;
  const records = summary !== undefined && fs.existsSync(summary.ledgerPath) ? (await readLedger(summary.ledgerPath)).records : [];
  return {
    exitCode: r.exitCode ?? -1,
    ...(summary !== undefined ? { summary } : {}),
    reason: stderr.trim().split("\n").at(-1) ?? "",
    stderr,
    records,
    wallMs,
  };
}

/** Waits until the LocalQueue reports Active (Kueue has seen it and its ClusterQueue). */
async function waitLocalQueueActive(kubeconfigPath: string, namespace: string, name: string): Promise<void> {
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const api = kc.makeApiClient(k8s.CustomObjectsApi);
  await waitUntil(
    async () => {
      const lq = (await api.getNamespacedCustomObject({ group: "kueue.x-k8s.io", version: "v1beta2", namespace, plural: "localqueues", name })) as {
        status?: { conditions?: { type: string; status: string; message?: string }[] };
      };
      const active = lq.status?.conditions?.find((c) => c.type === "Active");
      return active?.status === "True" ? true : `LocalQueue ${namespace}/${name} not active: ${active?.message ?? "no condition yet"}`;
    },
    { component: "LocalQueue", timeoutMs: 60_000, intervalMs: 100 },
  );
}

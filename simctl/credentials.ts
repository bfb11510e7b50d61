/**
 * Credentials of one run on the sim: a kubeconfig for the run's ServiceAccount (a bound token from the
 * TokenRequest API), so the out-of-cluster runtime has exactly the rights the in-cluster runtime Job has on
 * `local` (the namespaced Role of components/run/manifests.ts), plus the backend config file the runtime
 * reads (`--backend-config`: kubeconfig path, namespace, queue; with a queue also `admission: "workload"` and the
 * sim ResourceFlavor's placement as `flavors`: the `sim` profile's runtime owns the roster's Workload,
 * runtime/backends/kubernetes/workload.ts; docs/sim.md "Admission paths").
 *
 * @see https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-request-v1/
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { simFlavor, simQueueNames } from "../components/sim/queue.js";
import { readTokens } from "./pki";
import { httpGet } from "./probe";
import { kubeconfigYaml, simLayout } from "./render";
import { readState } from "./state";

/** Options of {@link writeRunCredentials}. */
export interface RunCredentialsOptions {
  readonly stateDir: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  /** LocalQueue name for the backend config (`queue`). */
  readonly queue?: string;
  /**
   * The backend's `admission` setting written with a queue: `"workload"` (the runtime owns the roster's Workload),
   * `"workloadGated"` (the same, the roster's Sandboxes created and gated before it) or `"podGroup"` (Kueue's pod
   * integration, the `local`/`gke` default). @default "workload"
   */
  readonly admission?: "workload" | "workloadGated" | "podGroup";
  /**
   * With `admission: "workload"` or `"workloadGated"`, each ResourceFlavor the roster may be admitted to, by name, with the placement the
   * runtime renders into member pods (the flavors are cluster-scoped, so the run's namespaced Role cannot read
   * them). @default the sim flavor only (`components/sim/queue.ts` `simFlavor()`); `sim.shape: gke` passes gke's
   */
  readonly flavors?: FlavorPlacements;
  /** Token lifetime in seconds. @default 86400 */
  readonly ttlSeconds?: number;
}

/** ResourceFlavor name → its `nodeLabels` and `tolerations` (Kueue `ResourceFlavor.spec`). */
export type FlavorPlacements = Readonly<Record<string, { readonly nodeLabels?: Readonly<Record<string, string>>; readonly tolerations?: readonly object[] }>>;

/** What {@link writeRunCredentials} wrote. */
export interface RunCredentials {
  /** `<state>/runs/<namespace>/kubeconfig` (0600). */
  readonly kubeconfig: string;
  /** `<state>/runs/<namespace>/backend.json` (0600). */
  readonly backendConfig: string;
}

/**
 * Requests a token for the ServiceAccount and writes its kubeconfig and the backend config.
 *
 * @throws Error naming the ServiceAccount and the API answer when the TokenRequest fails (e.g. it does not exist yet)
 */
export async function writeRunCredentials(o: RunCredentialsOptions): Promise<RunCredentials> {
  const l = simLayout(path.resolve(o.stateDir));
  const state = readState(l.stateFile);
  if (state === undefined) throw new Error(`no sim in ${l.stateDir}`);
  const ca = fs.readFileSync(l.apiserverCaFile, "utf8");
  const admin = readTokens(l).admin;
  const url = `${state.apiserverUrl}/api/v1/namespaces/${encodeURIComponent(o.namespace)}/serviceaccounts/${encodeURIComponent(o.serviceAccount)}/token`;
  const r = await httpGet(url, {
    ca,
    token: admin,
    method: "POST",
    body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: o.ttlSeconds ?? 86_400 } }),
    timeoutMs: 30_000,
  });
  if (r.status !== 201 && r.status !== 200) throw new Error(`TokenRequest for ServiceAccount ${o.namespace}/${o.serviceAccount}: HTTP ${r.status}: ${r.body.slice(0, 300)}`);
  const token = (JSON.parse(r.body) as { status?: { token?: string } }).status?.token;
  if (token === undefined || token === "") throw new Error(`TokenRequest for ServiceAccount ${o.namespace}/${o.serviceAccount} returned no token`);
  const dir = path.join(l.stateDir, "runs", o.namespace);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const kubeconfig = path.join(dir, "kubeconfig");
  fs.writeFileSync(kubeconfig, kubeconfigYaml(`${state.contextName}-${o.namespace}`, state.apiserverUrl, ca, token), { mode: 0o600 });
  const backendConfig = path.join(dir, "backend.json");
  const kueue = o.queue !== undefined ? { queue: o.queue, admission: o.admission ?? "workload", flavors: o.flavors ?? { [simQueueNames.resourceFlavor]: simFlavor() } } : {};
  fs.writeFileSync(backendConfig, `${JSON.stringify({ kubeconfig, namespace: o.namespace, ...kueue }, null, 2)}\n`, { mode: 0o600 });
  return { kubeconfig, backendConfig };
}

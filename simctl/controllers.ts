/**
 * The two out-of-cluster controllers of the sim: the Kueue manager and the Agent Sandbox controller. Each entry
 * says which ports it needs, how to prepare its config and arguments, and what proves it ready.
 *
 * Kueue runs with internal cert management on: its cert-controller generates a CA and a serving cert for
 * `kueue-webhook-service.kueue-system.svc`, writes them into its cert dir and injects the CA into the webhook
 * configurations and CRD conversion blocks. The API server reaches it through the ExternalName Service
 * `kueue-webhook-service` -> `localhost` on the sim's `kueueWebhook` port, which the `Kueue` component applies
 * in `controller: "external"` mode (docs/sim.md "What runs"). The Agent Sandbox controller runs with its webhook off;
 * its CRDs are applied with `conversion.strategy: None` (docs/sim.md "What runs").
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { parse, stringify } from "yaml";
import { KUEUE_MANIFESTS, loadManifests } from "../components/k8s/manifests/cache.js";
import { KUEUE_NAMESPACE, KUEUE_WEBHOOK_SECRET, kueueConfiguration, renderKueueConfiguration } from "../components/k8s/manifests/kueue.js";
import { simExcludedNamespaces } from "../components/sim/queue.js";
import type { PortName } from "./ports";
import { httpGet } from "./probe";
import { controllerClientQps, type ComponentName, type SimLayout } from "./render";
import type { SimState } from "./state";

/** Names accepted by `simctl start-controller`. */
export const controllerNames = ["kueue", "agent-sandbox", "temporal"] as const;
export type ControllerName = (typeof controllerNames)[number];

/**
 * The Kueue manager's Configuration for an out-of-cluster run: `base` (the profile's Configuration, rendered by
 * components/k8s/manifests/kueue.ts `renderKueueConfiguration` from the release's own, exactly as on `local`) with
 * only the process-specific fields replaced: leader election off, its own health/metrics/webhook ports on
 * loopback, its own cert dir, and client QPS raised so a 1,000-member cohort is not throttled client-side.
 *
 * @see https://kueue.sigs.k8s.io/docs/reference/kueue-config.v1beta2/
 */
export function externalKueueConfig(base: Readonly<Record<string, unknown>>, l: SimLayout, ports: SimState["ports"]): string {
  return stringify(
    {
      ...base,
      namespace: KUEUE_NAMESPACE,
      health: { healthProbeBindAddress: `127.0.0.1:${ports.kueueHealth}` },
      metrics: { bindAddress: `127.0.0.1:${ports.kueueMetrics}` },
      webhook: { port: ports.kueueWebhook, host: "127.0.0.1", certDir: l.kueueCertDir },
      leaderElection: { leaderElect: false },
      clientConnection: { qps: controllerClientQps.qps, burst: controllerClientQps.burst },
    },
    { lineWidth: 0 },
  );
}

/** The profile's base Configuration when none is given: the `sim` defaults over the release's own. */
function defaultKueueBase(): Record<string, unknown> {
  return renderKueueConfiguration(loadManifests(KUEUE_MANIFESTS), kueueConfiguration({ excludedNamespaces: simExcludedNamespaces })) as Record<string, unknown>;
}

/** Options a controller's start may take. */
export interface ControllerStartOptions {
  /** Kueue: a YAML file with the base Configuration. @default the sim defaults (components/sim/queue.ts) */
  readonly configurationFile?: string;
}

/** Credentials a readiness check may use. */
export interface ReadyContext {
  readonly ca: string;
  readonly adminToken: string;
}

/** How to run and check one controller. */
export interface ControllerSpec {
  readonly component: ComponentName;
  /** Ports it binds (checked free before start). */
  readonly ports: readonly PortName[];
  /** Writes its config files; returns its arguments and extra environment. */
  prepare(l: SimLayout, state: SimState, o: ControllerStartOptions): { args: string[]; env: Record<string, string> };
  /** One readiness attempt: `true`, or why not yet. */
  ready(l: SimLayout, state: SimState, c: ReadyContext): Promise<true | string>;
}

/** Name of the dry-run objects the Kueue readiness check sends through the API server. */
const probeName = "simctl-webhook-probe";

/**
 * Kueue is ready when (1) its /readyz passes (certs written, webhook server started) and (2) the API server can
 * call its webhooks: a server-side dry-run create of a v1beta1 LocalQueue (CRD conversion + validating webhook)
 * and of a Pod with a queue name that comes back gated by `kueue.x-k8s.io/admission` (the pod mutating webhook).
 */
async function kueueReady(l: SimLayout, state: SimState, c: ReadyContext): Promise<true | string> {
  const synced = await syncKueueCerts(l, state, c);
  if (synced !== true) return synced;
  const health = await httpGet(`http://127.0.0.1:${state.ports.kueueHealth}/readyz`);
  if (health.status !== 200) return `/readyz answered ${health.status}: ${health.body.trim().slice(0, 200)}`;
  const api = state.apiserverUrl;
  const lq = await httpGet(`${api}/apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues?dryRun=All`, {
    ca: c.ca,
    token: c.adminToken,
    method: "POST",
    body: JSON.stringify({
      apiVersion: "kueue.x-k8s.io/v1beta1",
      kind: "LocalQueue",
      metadata: { name: probeName, namespace: "default" },
      spec: { clusterQueue: probeName },
    }),
  });
  if (lq.status !== 201 && lq.status !== 200) return `dry-run LocalQueue create: HTTP ${lq.status}: ${lq.body.trim().slice(0, 300)}`;
  const pod = await httpGet(`${api}/api/v1/namespaces/default/pods?dryRun=All`, {
    ca: c.ca,
    token: c.adminToken,
    method: "POST",
    body: JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: probeName, namespace: "default", labels: { "kueue.x-k8s.io/queue-name": probeName } },
      spec: { containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }] },
    }),
  });
  if (pod.status !== 201 && pod.status !== 200) return `dry-run Pod create: HTTP ${pod.status}: ${pod.body.trim().slice(0, 300)}`;
  if (!pod.body.includes("kueue.x-k8s.io/admission")) return "dry-run Pod came back without Kueue's admission gate (pod webhook not called)";
  return true;
}

/**
 * Plays kubelet's part for Kueue's webhook cert: in a cluster the Secret `kueue-webhook-server-cert` is mounted
 * at the manager's cert dir, and Kueue's cert rotator (open-policy-agent/cert-controller) waits until
 * `tls.crt` appears there before it reports the certs ready (`ensureCertsMounted`). Out of cluster, this copies
 * the Secret's `tls.crt`, `tls.key` and `ca.crt` into the cert dir (atomically, 0600) whenever they differ.
 *
 * @returns `true` once the files match a complete Secret, or why not yet.
 * @see https://github.com/open-policy-agent/cert-controller/blob/v0.16.0/pkg/rotator/rotator.go (ensureCertsMounted)
 */
async function syncKueueCerts(l: SimLayout, state: SimState, c: ReadyContext): Promise<true | string> {
  const secretName = KUEUE_WEBHOOK_SECRET;
  const r = await httpGet(`${state.apiserverUrl}/api/v1/namespaces/${KUEUE_NAMESPACE}/secrets/${secretName}`, { ca: c.ca, token: c.adminToken });
  if (r.status !== 200) return `Secret ${KUEUE_NAMESPACE}/${secretName}: HTTP ${r.status}`;
  const data = (JSON.parse(r.body) as { data?: Record<string, string> }).data ?? {};
  const files = ["tls.crt", "tls.key", "ca.crt"] as const;
  if (files.some((f) => data[f] === undefined || data[f] === "")) return `Secret ${KUEUE_NAMESPACE}/${secretName} has no certificate yet`;
  fs.mkdirSync(l.kueueCertDir, { recursive: true, mode: 0o700 });
  for (const f of files) {
    const want = Buffer.from(data[f]!, "base64");
    const target = path.join(l.kueueCertDir, f);
    let have: Buffer | undefined;
    try {
      have = fs.readFileSync(target);
    } catch {
      have = undefined;
    }
    if (have === undefined || !have.equals(want)) {
      fs.writeFileSync(`${target}.tmp`, want, { mode: 0o600 });
      fs.renameSync(`${target}.tmp`, target);
    }
  }
  return true;
}

/** The Temporal dev server's SQLite file in a sim state dir: kept across a stop/start of the server (not of the sim). */
export function temporalDbFile(l: SimLayout): string {
  return path.join(l.stateDir, "temporal.db");
}

/** The Temporal frontend's address (`host:port`) of a sim, or `undefined` for a sim started without it. */
export function temporalAddress(state: SimState): string | undefined {
  return state.ports.temporal > 0 ? `127.0.0.1:${state.ports.temporal}` : undefined;
}

/**
 * The arguments of `temporal server start-dev` on a sim: frontend gRPC on the sim's `temporal` port on loopback,
 * no Web UI, the SQLite file in the state dir (a restart of the server keeps every workflow's history), the
 * `default` namespace. The HTTP API and metrics ports are left to the server (it picks free ones).
 *
 * @see https://github.com/temporalio/cli/blob/v1.5.1/temporalcli/commands.server.go
 */
export function temporalServerArgs(l: SimLayout, state: SimState): string[] {
  return [
    "server",
    "start-dev",
    "--headless",
    "--ip",
    "127.0.0.1",
    "--port",
    String(state.ports.temporal),
    "--db-filename",
    temporalDbFile(l),
    "--namespace",
    "default",
    "--log-level",
    "warn",
  ];
}

const execFileP = promisify(execFile);

/**
 * The Temporal dev server is ready when `temporal operator cluster health` answers SERVING and the `default`
 * namespace can be described (the server registers it at launch; a worker polling before that fails).
 */
async function temporalReady(_l: SimLayout, state: SimState): Promise<true | string> {
  const rec = state.processes.find((p) => p.component === "temporal");
  if (rec === undefined) return "no temporal process recorded";
  const address = `127.0.0.1:${state.ports.temporal}`;
  try {
    const h = await execFileP(rec.binary, ["operator", "cluster", "health", "--address", address, "--command-timeout", "5s"], { timeout: 10_000 });
    if (!h.stdout.includes("SERVING")) return `cluster health: ${h.stdout.trim().slice(0, 200)}`;
    await execFileP(rec.binary, ["operator", "namespace", "describe", "--address", address, "--namespace", "default", "--command-timeout", "5s"], { timeout: 10_000 });
    return true;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    return `temporal at ${address}: ${(e.stderr ?? e.message).trim().split("\n").slice(-2).join(" ").slice(0, 300)}`;
  }
}

/** Every controller the sim can run. */
export const controllerSpecs: Readonly<Record<ControllerName, ControllerSpec>> = {
  kueue: {
    component: "kueue",
    ports: ["kueueWebhook", "kueueHealth", "kueueMetrics"],
    prepare(l, state, o) {
      fs.mkdirSync(l.kueueCertDir, { recursive: true, mode: 0o700 });
      const base = o.configurationFile !== undefined ? (parse(fs.readFileSync(o.configurationFile, "utf8")) as Record<string, unknown>) : defaultKueueBase();
      if (base?.kind !== "Configuration") throw new Error(`${o.configurationFile ?? "Kueue base configuration"}: not a Kueue Configuration`);
      const file = path.join(l.configDir, "kueue.yaml");
      fs.writeFileSync(file, externalKueueConfig(base, l, state.ports), { mode: 0o600 });
      return {
        args: [`--config=${file}`, "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=info"],
        env: { KUBECONFIG: path.join(l.kubeconfigsDir, "kueue.kubeconfig") },
      };
    },
    ready: kueueReady,
  },
  "agent-sandbox": {
    component: "agent-sandbox-controller",
    ports: ["sandboxHealth", "sandboxMetrics"],
    prepare(l, state) {
      return {
        args: [
          "--enable-webhook=false",
          "--leader-elect=false",
          `--health-probe-bind-address=127.0.0.1:${state.ports.sandboxHealth}`,
          `--metrics-bind-address=127.0.0.1:${state.ports.sandboxMetrics}`,
          `--kube-api-burst=${controllerClientQps.burst}`,
        ],
        env: { KUBECONFIG: path.join(l.kubeconfigsDir, "agent-sandbox-controller.kubeconfig") },
      };
    },
    async ready(_l, state) {
      const r = await httpGet(`http://127.0.0.1:${state.ports.sandboxHealth}/readyz`);
      return r.status === 200 ? true : `/readyz answered ${r.status}: ${r.body.trim().slice(0, 200)}`;
    },
  },
  // Not a controller, but supervised the same way: started by startSim with the control plane, and restartable
  // alone (`simctl stop-controller temporal`, `simctl start-controller temporal`) with its history kept.
  temporal: {
    component: "temporal",
    ports: ["temporal"],
    prepare(l, state) {
      return { args: temporalServerArgs(l, state), env: {} };
    },
    ready: temporalReady,
  },
};

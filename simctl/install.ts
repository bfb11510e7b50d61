/**
 * Installs what the out-of-cluster controllers need into a running sim through the API (server-side apply) —
 * the path of the test harness and the benchmark. It applies the SAME objects the `Kueue` and `AgentSandbox`
 * components render in `controller: "external"` mode (components/k8s/manifests/kueue.ts, agentSandbox.ts) and the
 * SAME queue objects with the quota derived by components/k8s/quota.ts from the fake nodes; the Pulumi `sim` stack
 * applies them through the components instead.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as k8s from "@kubernetes/client-node";
import { parse, stringify } from "yaml";
import { renderAgentSandboxInstall } from "../components/k8s/manifests/agentSandbox.js";
import { AGENT_SANDBOX_MANIFESTS, KUEUE_MANIFESTS, loadManifests, type KubernetesObject } from "../components/k8s/manifests/cache.js";
import { kueueConfiguration, renderClusterQueue, renderKueueConfiguration, renderKueueInstall, renderResourceFlavor } from "../components/k8s/manifests/kueue.js";
import { deriveQuota, type QuotaResult } from "../components/k8s/quota.js";
import { toNodeCapacity, type FakeNodeManifest } from "../components/sim/fakeNode.js";
import { simExcludedNamespaces, simFlavor, simQueueNames } from "../components/sim/queue.js";
import { httpGet, waitUntil } from "./probe.js";

/** Field manager of the harness's server-side applies. */
export const FIELD_MANAGER = "cohort-lab-sim";

/** The queue objects a sim got. */
export interface SimQueue {
  readonly resourceFlavor: string;
  readonly clusterQueue: string;
  readonly nominalQuota: { readonly cpu: string; readonly memory: string };
  readonly quota: QuotaResult;
}

/** Server, CA and bearer token of a kubeconfig written by simctl (one cluster, one token user). */
interface SimApi {
  readonly server: string;
  readonly ca: string;
  readonly token: string;
}

function simApi(kubeconfigPath: string): SimApi {
  const kc = parse(fs.readFileSync(kubeconfigPath, "utf8")) as {
    clusters: { cluster: { server: string; "certificate-authority-data": string } }[];
    users: { user: { token: string } }[];
  };
  const cluster = kc.clusters[0]?.cluster;
  const token = kc.users[0]?.user.token;
  if (cluster === undefined || token === undefined) throw new Error(`${kubeconfigPath}: not a simctl kubeconfig (one cluster, one token user)`);
  return { server: cluster.server, ca: Buffer.from(cluster["certificate-authority-data"], "base64").toString("utf8"), token };
}

/** Discovery: `apiVersion` -> kind -> { plural, namespaced }. */
const discovery = new Map<string, Map<string, { plural: string; namespaced: boolean }>>();

async function resourceOf(api: SimApi, apiVersion: string, kind: string): Promise<{ plural: string; namespaced: boolean; base: string }> {
  const base = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  let kinds = discovery.get(`${api.server} ${apiVersion}`);
  if (kinds === undefined || !kinds.has(kind)) {
    const r = await httpGet(`${api.server}${base}`, { ca: api.ca, token: api.token, timeoutMs: 30_000 });
    if (r.status !== 200) throw new Error(`discovery of ${apiVersion}: HTTP ${r.status}: ${r.body.slice(0, 200)}`);
    kinds = new Map();
    for (const res of (JSON.parse(r.body) as { resources: { name: string; kind: string; namespaced: boolean }[] }).resources) {
      if (!res.name.includes("/")) kinds.set(res.kind, { plural: res.name, namespaced: res.namespaced });
    }
    discovery.set(`${api.server} ${apiVersion}`, kinds);
  }
  const found = kinds.get(kind);
  if (found === undefined) throw new Error(`the API server does not serve ${kind} in ${apiVersion}`);
  return { ...found, base };
}

/**
 * Server-side applies `objects` in order (forced: the sim is ours), through the raw API: a JSON body is valid
 * `application/apply-patch+yaml`, and no client-side model can drop fields it does not know (client-node's typed
 * serializer drops a CRD schema's `x-kubernetes-int-or-string`, which the API server then refuses).
 *
 * @throws Error naming the object and the API server's answer
 */
export async function applyObjects(kubeconfigPath: string, objects: readonly KubernetesObject[]): Promise<void> {
  const api = simApi(kubeconfigPath);
  for (const obj of objects) {
    const res = await resourceOf(api, obj.apiVersion, obj.kind);
    const ns = res.namespaced ? `/namespaces/${encodeURIComponent(obj.metadata.namespace ?? "default")}` : "";
    const url = `${api.server}${res.base}${ns}/${res.plural}/${encodeURIComponent(obj.metadata.name)}?fieldManager=${FIELD_MANAGER}&force=true`;
    const r = await httpGet(url, { ca: api.ca, token: api.token, method: "PATCH", body: JSON.stringify(obj), contentType: "application/apply-patch+yaml", timeoutMs: 60_000 });
    if (r.status !== 200 && r.status !== 201) {
      throw new Error(`applying ${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ""}${obj.metadata.name}: HTTP ${r.status}: ${r.body.slice(0, 400)}`);
    }
  }
}

/** Waits until every CRD among `objects` is Established. */
async function waitCrdsEstablished(kubeconfigPath: string, objects: readonly KubernetesObject[]): Promise<void> {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const names = objects.filter((o) => o.kind === "CustomResourceDefinition").map((o) => o.metadata.name);
  await waitUntil(
    async () => {
      for (const name of names) {
        const crd = await api.readCustomResourceDefinition({ name });
        if (!crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) return `CRD ${name} not Established`;
      }
      return true;
    },
    { component: "CRDs", timeoutMs: 60_000, intervalMs: 100 },
  );
}

/** Options of {@link installControllerObjects}. */
export interface InstallOptions {
  readonly kubeconfigPath: string;
  /** The sim's `kueueWebhook` port (the ExternalName Service and webhook clientConfigs point there). */
  readonly kueueWebhookPort: number;
  /** Where to write the Kueue manager's base Configuration (YAML) for `simctl start-controller kueue`. */
  readonly configurationFile: string;
  /** Kueue's `waitForPodsReady.timeout` (Go duration), e.g. a short one to test eviction. @default "5m" */
  readonly waitForPodsReadyTimeout?: string;
  readonly log?: (line: string) => void;
}

/**
 * Applies Kueue's and Agent Sandbox's install objects in `external` mode and writes Kueue's Configuration.
 * Start the controllers afterwards (their caches need the CRDs).
 *
 * @throws ManifestsMissingError when the pinned manifests are not in the tool cache
 */
export async function installControllerObjects(o: InstallOptions): Promise<void> {
  const kueueUpstream = loadManifests(KUEUE_MANIFESTS);
  const sandboxUpstream = loadManifests(AGENT_SANDBOX_MANIFESTS);
  const configuration = kueueConfiguration({
    excludedNamespaces: simExcludedNamespaces,
    ...(o.waitForPodsReadyTimeout !== undefined ? { waitForPodsReadyTimeout: o.waitForPodsReadyTimeout } : {}),
  });
  const kueue = renderKueueInstall(kueueUpstream, { controller: "external", image: "", configuration, externalWebhookPort: o.kueueWebhookPort });
  const sandbox = renderAgentSandboxInstall(sandboxUpstream, { controller: "external", image: "" });
  await applyObjects(o.kubeconfigPath, kueue);
  await applyObjects(o.kubeconfigPath, sandbox);
  await waitCrdsEstablished(o.kubeconfigPath, [...kueue, ...sandbox]);
  fs.mkdirSync(path.dirname(o.configurationFile), { recursive: true });
  fs.writeFileSync(o.configurationFile, stringify(renderKueueConfiguration(kueueUpstream, configuration)), { mode: 0o600 });
  o.log?.(`applied ${kueue.length} Kueue and ${sandbox.length} Agent Sandbox objects`);
}

/**
 * Creates the ResourceFlavor and ClusterQueue, with the quota derived from `nodes` exactly as the `sim` stack does.
 *
 * @throws QuotaError when no node is eligible or the override exceeds what the nodes hold
 */
export async function createQueue(kubeconfigPath: string, nodes: readonly FakeNodeManifest[], override?: { readonly cpu?: string; readonly memory?: string }): Promise<SimQueue> {
  const flavor = simFlavor();
  const quota = deriveQuota({
    nodes: nodes.map(toNodeCapacity),
    reserved: [],
    flavorNodeLabels: flavor.nodeLabels,
    flavorTolerations: flavor.tolerations,
    ...(override !== undefined ? { override } : {}),
  });
  const rf = renderResourceFlavor({ name: simQueueNames.resourceFlavor, nodeLabels: flavor.nodeLabels, tolerations: flavor.tolerations });
  const cq = renderClusterQueue({ name: simQueueNames.clusterQueue, flavor: simQueueNames.resourceFlavor, nominalQuota: quota.nominalQuota });
  await applyObjects(kubeconfigPath, [rf, cq]);
  return { resourceFlavor: simQueueNames.resourceFlavor, clusterQueue: simQueueNames.clusterQueue, nominalQuota: quota.nominalQuota, quota };
}

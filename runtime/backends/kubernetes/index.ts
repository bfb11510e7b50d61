/**
 * Package kubernetes: the runtime's Kubernetes backend. Every member is an Agent Sandbox `Sandbox` in
 * the run namespace; with a Kueue LocalQueue the whole roster is admitted all-or-nothing as ONE
 * Workload (Kueue's pod group, or the runtime's own: the `admission` setting); members start in
 * dependency order by removing a scheduling gate (or, `admission: "workload"`, by creating their
 * Sandbox); readiness and failures arrive by watch. See admit.ts, start.ts, stop.ts, run.ts (events), render.ts (objects), rbac.ts.
 */
import { z } from "zod";
import type { Backend, BackendContext, MemberEndpoint, MemberEventSink, MemberHandle, MemberIdentity, MemberPlan } from "../../core/backend.js";
import { BackendUnavailableError, SpecError } from "../../core/errors.js";
import type { CompiledRunSpec } from "../../core/spec.js";
import { admitRoster } from "./admit.js";
import { HttpMethod, KubeApiError, KubeClient } from "./client.js";
import { ApiCounters, type ApiCallStats } from "./counters.js";
import { memberHost, runLabelValue, secretName, type AdmissionMode, type Json, type PodMetadata, type RenderContext } from "./render.js";
import { Run, type AdmissionTimings, type RunSettings } from "./run.js";
import { startMember } from "./start.js";
import { condition } from "./status.js";
import { closeRun, stopMember } from "./stop.js";
import { KUEUE_GROUP, KUEUE_VERSION, LOCALQUEUE_PLURAL, SANDBOX_GROUP, SANDBOX_PLURAL, SANDBOX_VERSION } from "./upstream.js";

export { AdmissionError } from "./admit.js";
export { KubeApiError } from "./client.js";
export { API_CALLS, ApiCounters, apiCallKey, type ApiCallStats } from "./counters.js";
export { RUNTIME_POLICY_RULES, policyRulesFor, rulesAllow, type PolicyRule } from "./rbac.js";
export { cleanupKubernetesRun, KubernetesCleanupError, type KubernetesCleanupReport } from "./cleanup.js";

/** Registry name of this backend. */
export const KUBERNETES_BACKEND = "kubernetes";

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const tolerationSchema = z.strictObject({
  key: z.string().optional(),
  operator: z.enum(["Exists", "Equal"]).optional(),
  value: z.string().optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
  tolerationSeconds: z.number().int().optional(),
});
const metadataSchema = z.strictObject({
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

/**
 * The zod schema of the backend's plain settings (everything but `spec`, `runId` and `events`): the
 * CLI's `--kubeconfig`, `--namespace`, `--queue` and `--backend-option KEY=VALUE` / `--backend-config`.
 */
export const kubernetesSettingsSchema = z.strictObject({
  kubeconfig: z.string().min(1).optional(),
  namespace: z.string().max(63).regex(DNS1123_LABEL, "must be a DNS-1123 label (the run namespace)"),
  queue: z.string().max(253).regex(DNS1123_SUBDOMAIN, "must be a LocalQueue name (DNS-1123 subdomain)").optional(),
  podGroup: z.string().max(63).regex(DNS1123_LABEL, "must be a DNS-1123 label (it is a label value and the Workload's name)").optional(),
  admissionTimeoutMs: z.number().int().positive().optional(),
  containerPort: z.number().int().min(1).max(65535).optional(),
  runAsNonRoot: z.boolean().optional(),
  createConcurrency: z.number().int().min(1).max(256).optional(),
  unschedulableGraceMs: z.number().int().min(0).optional(),
  reconcileErrorGraceMs: z.number().int().min(0).optional(),
  transientErrorGraceMs: z.number().int().min(0).optional(),
  controllerStallMs: z.number().int().positive().optional(),
  closeTimeoutMs: z.number().int().positive().optional(),
  stopExtraMs: z.number().int().min(0).optional(),
  watchTimeoutSeconds: z.number().int().min(10).max(1800).optional(),
  nodeSelector: z.record(z.string(), z.string()).optional(),
  tolerations: z.array(tolerationSchema).optional(),
  admission: z.enum(["podGroup", "workload", "workloadGated"]).optional(),
  flavors: z.record(z.string(), z.strictObject({ nodeLabels: z.record(z.string(), z.string()).optional(), tolerations: z.array(tolerationSchema).optional() })).optional(),
  podMetadata: metadataSchema.optional(),
  memberPodMetadata: z.record(z.string(), metadataSchema).optional(),
});

/** Settings of the Kubernetes backend as given by the CLI/profile. */
export type KubernetesSettings = z.input<typeof kubernetesSettingsSchema>;

/**
 * Everything the backend is created with.
 *
 * - `kubeconfig`: path of a kubeconfig file (its current context is used). @default the in-cluster
 *   service account when `KUBERNETES_SERVICE_HOST` is set (the runtime's Job in the cluster), else
 *   `$KUBECONFIG` or `~/.kube/config`
 * - `namespace`: the run namespace (one per run, created by Pulumi; the backend never creates or deletes it).
 * - `queue`: Kueue LocalQueue in `namespace`; `undefined` = no Kueue (Sandboxes without Kueue
 *   metadata, no gang admission).
 * - `podGroup`: Kueue pod-group name = the Workload's name. @default the label-safe run id
 * - `admissionTimeoutMs`: @default the spec's `admissionTimeout` minus 1 s (the backend's deadline fires
 *   before the core's, so the failure names the Workload and Kueue's last message)
 * - `containerPort`: the port every member with `app.port` listens on in its pod (`COHORT_PORT`). @default 8080
 * - `runAsNonRoot`: pod `securityContext.runAsNonRoot`. @default true
 * - `createConcurrency`: Sandbox creates in flight (admit()'s, or start()'s with `admission: "workload"`), and start()'s pod
 *   patches with `admission: "workloadGated"`. @default 32
 * - `unschedulableGraceMs`: how long a started member's pod may stay Unschedulable before the run fails
 *   (an announced cluster-autoscaler scale-up suspends it). @default 2000
 * - `reconcileErrorGraceMs`: how long the Agent Sandbox controller's request for a Sandbox may keep being
 *   refused (webhook denial, forbidden, invalid) before the member fails. @default 5000
 * - `transientErrorGraceMs`: the same for failed calls (timeouts, an unreachable webhook), which the
 *   controller retries. @default 60000
 * - `controllerStallMs`: no pod for any Sandbox, or no Workload for the complete group, after this long
 *   fails admission with a diagnosis. @default 30000
 * - `closeTimeoutMs`: how long `close()` waits for the run's pods to disappear. @default 60000
 * - `stopExtraMs`: added to a stop's grace before `stop()` resolves anyway. @default 10000
 * - `watchTimeoutSeconds`: server-side timeout of each watch request (then re-opened). @default 300
 * - `nodeSelector`, `tolerations`: rendered into every pod. Leave them unset with a LocalQueue: Kueue injects
 *   the admitted ResourceFlavor's `nodeLabels` and `tolerations` itself. Without Kueue they are the only
 *   way onto tainted nodes (e.g. the agent pool's `cohort-lab.dev/agents` taint).
 * - `podMetadata`, `memberPodMetadata`: extra labels/annotations on every pod / one member's pod (e.g. a
 *   kwok failure stage on `sim`); reserved prefixes are refused.
 * - `admission`: how Kueue admits the roster (with a `queue` only). `"podGroup"`: Kueue's pod integration
 *   builds the Workload from the pods' pod-group metadata and gates/ungates every pod (Sandboxes created at
 *   admission, held by our gate until started). `"workload"`: the runtime creates and owns ONE Workload
 *   (one pod set per role), waits for Kueue to admit it, creates each member's Sandbox when it starts
 *   (no Kueue metadata, no scheduling gate, the admitted flavors' placement rendered in), sets the Workload's
 *   `PodsReady` condition once every member is Ready and deletes it at close. `"workloadGated"`: the same
 *   runtime-owned Workload, but `admit()` first creates every member's Sandbox held by our start gate (no
 *   Kueue metadata), waits until every pod exists, and only then creates the Workload; `start(member)` is
 *   one pod patch removing the gate and adding the admitted flavor's nodeSelector and tolerations (start.ts
 *   `startPatch`); a roster Kueue does not admit leaves Sandboxes for `close()` to delete. @default
 *   "podGroup" (the `sim` profile's credentials file sets "workload": simctl/credentials.ts)
 * - `flavors`: with `admission: "workload"` or `"workloadGated"`, the `nodeLabels` and `tolerations` of each ResourceFlavor the
 *   ClusterQueue may admit to, by flavor name (ResourceFlavors are cluster-scoped; the runtime's Role is
 *   namespaced and cannot read them). A roster admitted to a flavor not listed fails admission, naming it.
 */
export interface KubernetesBackendConfig extends KubernetesSettings {
  /** The compiled RunSpec (raw commands/env, readiness, needs, resources, images per role). */
  readonly spec: CompiledRunSpec;
  /** The run id the core made. */
  readonly runId: string;
  /** Where member events go. */
  readonly events: MemberEventSink;
  /** Monotonic clock in ms. @default performance.now */
  readonly now?: () => number;
}

/** What `stats()` returns: JSON-safe, no secrets; the core records it as a `backend-stats` ledger record. */
export interface KubernetesBackendStats {
  readonly backend: "kubernetes";
  readonly namespace: string;
  readonly localQueue: string | null;
  readonly podGroup: string;
  /** How the roster was admitted (the `admission` setting). */
  readonly admissionMode: AdmissionMode;
  readonly members: number;
  readonly apiCalls: ApiCallStats;
  /** Sandbox creates + pod patches, divided by members (target: <= 2; 2 with podGroup and workloadGated, 1 with workload). */
  readonly memberWritesPerMember: number;
  /** Every write (including the Secret and deletes), divided by members. */
  readonly writesPerMember: number;
  readonly admission: AdmissionTimings & { readonly clusterQueue: string | null; readonly flavors: Readonly<Record<string, string>> };
  readonly watches: Readonly<Record<string, { relists: number; reopens: number }>>;
  readonly stopTimeouts: number;
  /** Objects still present when `close()` gave up waiting (`pod/<name>`, `sandbox/<name>`). */
  readonly leftovers: readonly string[];
}

/**
 * Validates and defaults the config.
 *
 * @throws {SpecError} naming the field (`kubernetes.<field>`) and the reason
 */
export function resolveKubernetesConfig(config: KubernetesBackendConfig): { settings: RunSettings; ctx: RenderContext; kubeconfig: string | undefined } {
  const { spec, runId, events: _events, now: _now, ...plain } = config;
  const parsed = kubernetesSettingsSchema.safeParse(plain);
  if (!parsed.success) {
    throw new SpecError(parsed.error.issues.map((issue) => ({ path: `kubernetes.${issue.path.join(".")}`, reason: issue.message })));
  }
  const s = parsed.data;
  const runLabel = runLabelValue(runId);
  const podGroup = s.podGroup ?? runLabel;
  const settings: RunSettings = {
    namespace: s.namespace,
    localQueue: s.queue,
    podGroup,
    // 1 s before the core's own admission deadline, so that the reason given names what was awaited.
    admissionTimeoutMs: s.admissionTimeoutMs ?? Math.max(1, spec.admissionTimeoutMs - 1000),
    createConcurrency: s.createConcurrency ?? 32,
    unschedulableGraceMs: s.unschedulableGraceMs ?? 2000,
    reconcileErrorGraceMs: s.reconcileErrorGraceMs ?? 5000,
    transientErrorGraceMs: s.transientErrorGraceMs ?? 60_000,
    controllerStallMs: s.controllerStallMs ?? 30_000,
    closeTimeoutMs: s.closeTimeoutMs ?? 60_000,
    stopExtraMs: s.stopExtraMs ?? 10_000,
    watchTimeoutSeconds: s.watchTimeoutSeconds ?? 300,
    admission: s.admission ?? "podGroup",
    flavors: Object.fromEntries(Object.entries(s.flavors ?? {}).map(([name, f]) => [name, { nodeSelector: { ...f.nodeLabels }, tolerations: (f.tolerations ?? []) as Json[] }])),
  };
  const ctx: RenderContext = {
    namespace: s.namespace,
    runId,
    runLabel,
    spec,
    localQueue: s.queue,
    podGroup,
    admission: settings.admission,
    containerPort: s.containerPort ?? 8080,
    terminationGraceSeconds: Math.max(1, Math.ceil(spec.stopGraceMs / 1000)),
    runAsNonRoot: s.runAsNonRoot ?? true,
    secretName: secretName(runLabel),
    nodeSelector: s.nodeSelector ?? {},
    tolerations: (s.tolerations ?? []) as Json[],
    podMetadata: (s.podMetadata ?? {}) as PodMetadata,
    memberPodMetadata: (s.memberPodMetadata ?? {}) as Record<string, PodMetadata>,
  };
  return { settings, ctx, kubeconfig: s.kubeconfig };
}

/** The Kubernetes backend. Create with {@link createKubernetesBackend}. */
export class KubernetesBackend implements Backend {
  readonly name = KUBERNETES_BACKEND;
  /** Readiness is Pod Ready + Sandbox Ready by watch; the core runs no probes (kwok pods are not reachable). */
  readonly readiness = "backend" as const;
  readonly #run: Run;
  readonly #kubeconfig: string | undefined;
  readonly #counters: ApiCounters;
  #loadError: Error | undefined;

  /** @throws {SpecError} on an invalid config (see {@link resolveKubernetesConfig}) */
  constructor(config: KubernetesBackendConfig) {
    const { settings, ctx, kubeconfig } = resolveKubernetesConfig(config);
    this.#kubeconfig = kubeconfig;
    this.#counters = new ApiCounters();
    let client: KubeClient;
    try {
      client = KubeClient.load(kubeconfig, this.#counters);
    } catch (error) {
      // Reported by available(); every other call fails with the same error.
      this.#loadError = error as Error;
      client = undefined as unknown as KubeClient;
    }
    const now = config.now ?? (() => performance.now());
    this.#run = new Run(client, this.#counters, ctx, settings, config.events, now);
  }

  #client(): KubeClient {
    if (this.#loadError !== undefined) {
      throw new BackendUnavailableError(
        KUBERNETES_BACKEND,
        `cannot load ${this.#kubeconfig === undefined ? "the in-cluster service account" : `kubeconfig ${this.#kubeconfig}`}: ${this.#loadError.message}`,
        { cause: this.#loadError },
      );
    }
    return this.#run.client;
  }

  /**
   * Checks that the API server answers, that the Sandbox API (agents.x-k8s.io/v1beta1) is served and
   * readable in the namespace, and (with a LocalQueue) that the LocalQueue exists and is active.
   *
   * @throws {BackendUnavailableError} naming what is missing
   */
  async available(): Promise<void> {
    const client = this.#client();
    const { namespace, localQueue } = this.#run.settings;
    const ns = encodeURIComponent(namespace);
    const unavailable = (message: string, cause: unknown): BackendUnavailableError => new BackendUnavailableError(KUBERNETES_BACKEND, message, { cause });
    try {
      await client.request("list sandboxes.agents.x-k8s.io", HttpMethod.GET, `/apis/${SANDBOX_GROUP}/${SANDBOX_VERSION}/namespaces/${ns}/${SANDBOX_PLURAL}`, {
        query: { limit: 1 },
        retry: false,
      });
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) {
        throw unavailable(`the Sandbox API ${SANDBOX_GROUP}/${SANDBOX_VERSION} is not served by ${client.server}: install Agent Sandbox (v0.5.x)`, error);
      }
      if (error instanceof KubeApiError && error.status === 0) throw unavailable(`cannot reach the API server ${client.server}: ${error.serverMessage}`, error);
      throw unavailable(`cannot list Sandboxes in namespace ${namespace}: ${(error as Error).message}`, error);
    }
    if (localQueue === undefined) return;
    let queue;
    try {
      queue = await client.request(
        "get localqueues.kueue.x-k8s.io",
        HttpMethod.GET,
        `/apis/${KUEUE_GROUP}/${KUEUE_VERSION}/namespaces/${ns}/${LOCALQUEUE_PLURAL}/${encodeURIComponent(localQueue)}`,
        { retry: false },
      );
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) {
        throw unavailable(
          `LocalQueue ${namespace}/${localQueue} not found (${error.serverMessage}): create it (and its ClusterQueue), or Kueue will leave the roster's Workload Inadmissible`,
          error,
        );
      }
      throw unavailable(`cannot read LocalQueue ${namespace}/${localQueue}: ${(error as Error).message}`, error);
    }
    const active = condition(queue, "Active");
    if (active !== undefined && active.status !== "True") {
      throw unavailable(`LocalQueue ${namespace}/${localQueue} is not active (${active.reason ?? "no reason"}): ${active.message ?? ""}`.trim(), undefined);
    }
  }

  /** Every member listens on `<member>.<namespace>.svc:<containerPort>` (its Sandbox's headless Service). */
  async endpoints(members: readonly MemberIdentity[]): Promise<ReadonlyMap<string, MemberEndpoint>> {
    const out = new Map<string, MemberEndpoint>();
    for (const m of members) if (m.wantsPort) out.set(m.id, { host: memberHost(m.id, this.#run.settings.namespace), port: this.#run.ctx.containerPort });
    return out;
  }

  /** See admit.ts. @throws {SpecError} @throws {AdmissionError} */
  async admit(members: readonly MemberPlan[], signal: AbortSignal): Promise<void> {
    this.#client();
    await admitRoster(this.#run, members, signal);
  }

  /** See start.ts. @throws {MemberStartError} */
  async start(member: MemberPlan, signal: AbortSignal): Promise<MemberHandle> {
    this.#client();
    return startMember(this.#run, member, signal);
  }

  /** See stop.ts. */
  async stop(member: string, graceMs: number): Promise<void> {
    if (this.#loadError !== undefined) return;
    await stopMember(this.#run, member, graceMs);
  }

  /** See stop.ts. */
  async close(): Promise<void> {
    if (this.#loadError !== undefined) return;
    await closeRun(this.#run);
  }

  /** API calls by verb and resource, per-member write figures, admission milestones. */
  apiCalls(): ApiCallStats {
    return this.#counters.snapshot();
  }

  /** See {@link KubernetesBackendStats}. */
  stats(): KubernetesBackendStats {
    const run = this.#run;
    const calls = this.#counters.snapshot();
    const n = Math.max(1, run.roster.length);
    const memberWrites = (calls.calls["create sandboxes.agents.x-k8s.io"] ?? 0) + (calls.calls["patch pods"] ?? 0);
    const names = ["pods", "sandboxes", "events", "workloads"];
    return {
      backend: "kubernetes",
      namespace: run.settings.namespace,
      localQueue: run.settings.localQueue ?? null,
      podGroup: run.settings.podGroup,
      admissionMode: run.settings.admission,
      members: run.roster.length,
      apiCalls: calls,
      memberWritesPerMember: memberWrites / n,
      writesPerMember: calls.writes / n,
      admission: { ...run.admission, clusterQueue: run.admittedTo?.clusterQueue ?? null, flavors: run.admittedTo?.flavors ?? {} },
      watches: Object.fromEntries(run.watches.map((w, i) => [names[i] ?? String(i), w.stats])),
      stopTimeouts: run.stopTimeouts,
      leftovers: run.leftovers,
    };
  }
}

/**
 * The registry's factory (runtime/backends/index.ts): settings come from the CLI's backend options.
 *
 * @throws {SpecError} on an invalid option, naming it (`kubernetes.<option>`)
 */
export function createKubernetesBackend(context: BackendContext): KubernetesBackend {
  return new KubernetesBackend({ ...(context.options as KubernetesSettings), spec: context.spec, runId: context.runId, events: context.events });
}

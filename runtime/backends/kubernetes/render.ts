/**
 * Pure rendering of the Kubernetes objects of one run: a Sandbox (`agents.x-k8s.io/v1beta1`) per
 * member and at most one Secret per run. No I/O; golden-tested in `test/unit/k8s-backend-render.test.ts`.
 *
 * Why the objects look as they do:
 * - **Gang admission.** With a LocalQueue configured, every member's pod template carries Kueue's
 *   pod-group metadata (queue label, group-name label, total-count and serving annotations), so Kueue
 *   admits the whole roster as ONE Workload (see `upstream.ts`). Kueue groups a pod group's pods into
 *   pod sets by the shape of their spec (resource requests, ports, ...), at most 8: {@link podShapes}
 *   counts them and {@link validateRoster} refuses a roster with more, before anything is created.
 * - **Dependency order.** Every pod also carries our scheduling gate `cohort-lab.dev/start`. After Kueue
 *   admits the group and removes its own `kueue.x-k8s.io/admission` gate, a member's pod stays
 *   unscheduled until `start(member)` removes our gate, so the core scheduler keeps its dependency-graph
 *   semantics. The Sandbox controller never writes a pod's spec after creating it (its pod patches are
 *   metadata-only merge patches: agent-sandbox `controllers/sandbox_controller.go` PodCacheTransform,
 *   reconcilePod), so it does not fight the gate removal.
 * - **Kubernetes semantics for `$(VAR)`.** Commands and `app.env` values are rendered AS WRITTEN in the
 *   RunSpec and Kubernetes expands `$(VAR)` in the container (env entries may reference earlier ones,
 *   including the secretKeyRef entries), so a secret's value never appears in the Sandbox spec.
 * - **Secrets** (`app.secretEnv`): one Secret per run holds every member's generated values under keys
 *   `<member>.<NAME>`; pods reference them with `secretKeyRef`.
 * - `restartPolicy: Never`: a member whose process exits is a failed member (runtime/README.md "Scheduler"), so the pod must
 *   turn `Failed` rather than restart behind the scheduler's back. `terminationMessagePolicy:
 *   FallbackToLogsOnError` puts a failed container's log tail into its status (the exit's output tail).
 * - `enableServiceLinks: false`: each needed member gets a headless Service; without this every pod of a
 *   1,000-member run would receive ~7,000 service environment variables.
 * - Tolerations and nodeSelector are not rendered by default: Kueue injects them from the admitted
 *   ResourceFlavor (kueue pkg/controller/jobs/pod/pod_controller.go prepare). Without Kueue, the backend's
 *   `nodeSelector`/`tolerations` options are rendered as given.
 * - **`admission: "workload"`** (the `sim` default): the runtime owns the roster's Workload
 *   ({@link renderWorkload}: one pod set per role, `count` = replicas, a template with the members' requests),
 *   and each member's Sandbox is created only when it starts, after Kueue admitted that Workload, WITHOUT
 *   Kueue's pod-group metadata and WITHOUT any scheduling gate: its pods are not managed by Kueue at all.
 *   The admitted flavors' `nodeLabels` and `tolerations` are rendered into the pod template as Kueue's
 *   own integrations would inject them ({@link Placement}).
 * - **`admission: "workloadGated"`**: the same runtime-owned Workload, but every member's Sandbox is
 *   created BEFORE the Workload (the roster materialized first, as Kueue's pod-group integration does),
 *   without Kueue metadata and with only our `cohort-lab.dev/start` gate; the admitted placement is added
 *   to the pod by `start(member)`'s one patch (start.ts `startPatch`), not rendered here.
 */
import { createHash } from "node:crypto";
import type { MemberPlan } from "../../core/backend.js";
import { SpecError, type SpecIssue } from "../../core/errors.js";
import { expandEnv, expandVars } from "../../core/expand.js";
import { quantityValue } from "../../core/quantity.js";
import type { CompiledRole, CompiledRunSpec } from "../../core/spec.js";
import {
  CONTAINER_NAME,
  KUEUE_MAX_POD_SETS,
  KUEUE_POD_GROUP_NAME_LABEL,
  KUEUE_POD_GROUP_SERVING_ANNOTATION,
  KUEUE_POD_GROUP_TOTAL_COUNT_ANNOTATION,
  KUEUE_QUEUE_LABEL,
  LABEL_MANAGED_BY,
  LABEL_MEMBER,
  LABEL_ROLE,
  LABEL_RUN,
  MANAGED_BY,
  PORT_NAME,
  SANDBOX_GROUP,
  SANDBOX_KIND,
  SANDBOX_VERSION,
  START_GATE,
  KUEUE_GROUP,
  KUEUE_VERSION,
  WL_MAX_POD_SETS,
} from "./upstream.js";

/**
 * How the roster is admitted by Kueue: `podGroup` = Kueue's pod integration builds the Workload from the
 * pods' pod-group metadata and gates/ungates every pod; `workload` = the runtime creates and owns the Workload
 * and creates each member's Sandbox when it starts; `workloadGated` = the runtime creates every Sandbox
 * (held by our gate) first, then its own Workload, and starting a member is one pod patch.
 */
export type AdmissionMode = "podGroup" | "workload" | "workloadGated";

/** Whether the runtime owns the roster's Workload (`workload` or `workloadGated`, with a LocalQueue). */
export function ownsWorkload(ctx: Pick<RenderContext, "admission" | "localQueue">): boolean {
  return ctx.localQueue !== undefined && (ctx.admission === "workload" || ctx.admission === "workloadGated");
}

/** Where Kueue admitted a pod set: the admitted flavors' `nodeLabels` (as nodeSelector) and `tolerations`. */
export interface Placement {
  readonly nodeSelector: Readonly<Record<string, string>>;
  readonly tolerations: readonly Json[];
}

/** A JSON object as sent to the API server. */
export type Json = { [key: string]: unknown };

/** Everything rendering needs besides the members; built once per run by the backend. */
export interface RenderContext {
  /** Namespace of the run (one per run; created and deleted by Pulumi). */
  readonly namespace: string;
  /** The run id, as the core made it. */
  readonly runId: string;
  /** Label-safe form of the run id ({@link runLabelValue}); value of `cohort-lab.dev/run`. */
  readonly runLabel: string;
  /** The compiled RunSpec: the roles' raw commands, env, readiness, needs, resources and images. */
  readonly spec: CompiledRunSpec;
  /** Kueue LocalQueue in `namespace`; `undefined` renders no Kueue metadata (no gang admission). */
  readonly localQueue: string | undefined;
  /** Kueue pod-group name (the Workload's name); a DNS-1123 subdomain. */
  readonly podGroup: string;
  /** How Kueue admits the roster (see {@link AdmissionMode}). @default "podGroup" */
  readonly admission?: AdmissionMode;
  /** Port every member listens on inside its pod (`COHORT_PORT`), for roles with `app.port: true`. */
  readonly containerPort: number;
  /** Pod `terminationGracePeriodSeconds` (the SIGTERM -> SIGKILL grace on delete). */
  readonly terminationGraceSeconds: number;
  /** Pod `securityContext.runAsNonRoot`. */
  readonly runAsNonRoot: boolean;
  /** Name of the run's Secret ({@link secretName}). */
  readonly secretName: string;
  /** Pod `nodeSelector` (none by default: with Kueue, the admitted ResourceFlavor's nodeLabels are injected). */
  readonly nodeSelector: Readonly<Record<string, string>>;
  /** Pod `tolerations` (none by default: with Kueue, the ResourceFlavor's tolerations are injected). */
  readonly tolerations: readonly Json[];
  /** Extra labels/annotations for every member's pod (e.g. for network policy or a kwok stage). */
  readonly podMetadata: PodMetadata;
  /** Extra labels/annotations for one member's pod, by member id (fault injection on `sim`). */
  readonly memberPodMetadata: Readonly<Record<string, PodMetadata>>;
}

/** Extra pod labels and annotations. Keys under `cohort-lab.dev/`, `kueue.x-k8s.io/`, `agents.x-k8s.io/` are refused. */
export interface PodMetadata {
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

const LABEL_VALUE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const RESERVED_KEY_PREFIXES = ["cohort-lab.dev/", "kueue.x-k8s.io/", "agents.x-k8s.io/"];
/** Largest Secret the API server stores (1 MiB, `k8s.io/api` core/v1 MaxSecretSize). */
export const MAX_SECRET_BYTES = 1024 * 1024;

/**
 * The run id as a label value / DNS-1123 label: lower-cased (the run id's `T`/`Z` are upper case),
 * and when longer than 63 characters, its first 54 characters, `-`, and 8 hex of its SHA-256.
 *
 * @param runId - e.g. `society-20260101T120000Z-a1b2c3`
 * @returns e.g. `society-20260101t120000z-a1b2c3`
 */
export function runLabelValue(runId: string): string {
  const lower = runId.toLowerCase().replace(/[^-a-z0-9]/g, "-");
  if (lower.length <= 63 && LABEL_VALUE.test(lower)) return lower;
  const digest = createHash("sha256").update(runId).digest("hex").slice(0, 8);
  const head = lower
    .slice(0, 54)
    .replace(/^[^a-z0-9]+/, "")
    .replace(/[^a-z0-9]+$/, "");
  return `${head === "" ? "run" : head}-${digest}`;
}

/** Name of the run's Secret: `<runLabel>-env`. */
export function secretName(runLabel: string): string {
  return `${runLabel}-env`;
}

/** Key of one member's secret value in the run's Secret: `<member>.<NAME>`. */
export function secretKey(member: string, name: string): string {
  return `${member}.${name}`;
}

/** Stable DNS name of a member inside the cluster: `<member>.<namespace>.svc` (its Sandbox's headless Service). */
export function memberHost(member: string, namespace: string): string {
  return `${member}.${namespace}.svc`;
}

/** Kubernetes quantity -> base units for comparing shapes (one parser: runtime/core/quantity.ts). */
export { quantityValue };

/**
 * The pod shape of a role as Kueue's role hash sees it (resource requests and container ports; every
 * other shape field is identical for all members of a run): members with equal shapes share a pod set.
 */
export function podShapeKey(role: CompiledRole, ctx: Pick<RenderContext, "containerPort">): string {
  const requests = Object.keys(role.resources)
    .sort()
    .map((name) => `${name}=${quantityValue(role.resources[name]!)}`);
  return JSON.stringify({ requests, ports: role.port ? [ctx.containerPort] : [] });
}

/** Roles grouped by pod shape, in first-seen order: one entry per pod set Kueue will make. */
export function podShapes(roles: readonly CompiledRole[], ctx: Pick<RenderContext, "containerPort">): string[][] {
  const byShape = new Map<string, string[]>();
  for (const role of roles) {
    const key = podShapeKey(role, ctx);
    const list = byShape.get(key) ?? [];
    list.push(role.name);
    byShape.set(key, list);
  }
  return [...byShape.values()];
}

/** Roles some other role lists in `needs`: their members get a headless Service (stable DNS). */
export function neededRoles(spec: CompiledRunSpec): ReadonlySet<string> {
  const needed = new Set<string>();
  for (const role of spec.roles) for (const need of role.needs) needed.add(need);
  return needed;
}

/**
 * Checks that the roster can run on Kubernetes, before any object is created: images pinned by digest,
 * no `log` readiness, Service names valid, extra pod metadata not touching reserved keys, at most 8 pod
 * shapes for Kueue, the Secret within 1 MiB.
 *
 * @throws {SpecError} listing every problem, each with its RunSpec field path
 */
export function validateRoster(members: readonly MemberPlan[], ctx: RenderContext): void {
  const issues: SpecIssue[] = [];
  const needed = neededRoles(ctx.spec);
  for (const role of ctx.spec.roles) {
    const at = `roles[${role.index}]`;
    if (role.image === "") {
      issues.push({ path: `${at}.app.image`, reason: `role "${role.name}": the kubernetes backend needs an image pinned by digest (name@sha256:<64 hex>); none is set` });
    } else if (!/^[^\s@]+@sha256:[0-9a-f]{64}$/.test(role.image)) {
      issues.push({ path: `${at}.app.image`, reason: `role "${role.name}": the kubernetes backend needs an image pinned by digest (name@sha256:<64 hex>); got "${role.image}"` });
    }
    if (role.readiness.kind === "log") {
      issues.push({
        path: `${at}.readiness.log`,
        reason: `role "${role.name}": log readiness is not supported by the kubernetes backend (the kubelet probes pods; it does not match output lines); use an http, tcp or exec probe`,
      });
    }
    if (Object.keys(role.files).length > 0) {
      issues.push({
        path: `${at}.app.files`,
        reason: `role "${role.name}": app.files is not supported by the kubernetes backend (a pod has no member directory to write into); bake the files into the image`,
      });
    }
    if (needed.has(role.name) && !DNS1035_LABEL.test(role.name)) {
      issues.push({
        path: `${at}.name`,
        reason: `role "${role.name}" is needed by other roles, so its members get a Service, whose name must start with a letter (DNS-1035)`,
      });
    }
  }
  const checkMeta = (meta: PodMetadata, path: string): void => {
    for (const kind of ["labels", "annotations"] as const) {
      for (const key of Object.keys(meta[kind] ?? {})) {
        if (RESERVED_KEY_PREFIXES.some((prefix) => key.startsWith(prefix))) {
          issues.push({ path: `${path}.${kind}["${key}"]`, reason: `keys under ${RESERVED_KEY_PREFIXES.join(", ")} are set by cohort-lab, Kueue or Agent Sandbox` });
        }
      }
    }
  };
  checkMeta(ctx.podMetadata, "kubernetes.podMetadata");
  for (const [member, meta] of Object.entries(ctx.memberPodMetadata)) checkMeta(meta, `kubernetes.memberPodMetadata.${member}`);
  if (ctx.localQueue !== undefined) {
    const shapes = podShapes(ctx.spec.roles, ctx);
    if (shapes.length > KUEUE_MAX_POD_SETS) {
      issues.push({
        path: "roles",
        reason:
          `the roster has ${shapes.length} distinct pod shapes (resource requests + ports): ${shapes.map((roles) => roles.join("+")).join(", ")}; ` +
          `Kueue admits a pod group with at most ${KUEUE_MAX_POD_SETS} (kueue pkg/controller/jobs/pod/pod_controller.go), ` +
          `so give roles identical resources to share a pod set`,
      });
    }
  }
  let secretBytes = 0;
  const rolesByName = new Map(ctx.spec.roles.map((role) => [role.name, role]));
  for (const member of members) {
    for (const name of rolesByName.get(member.role)?.secretEnv ?? []) secretBytes += secretKey(member.id, name).length + Buffer.byteLength(member.env[name] ?? "");
  }
  if (secretBytes > MAX_SECRET_BYTES) {
    issues.push({ path: "roles", reason: `the members' secretEnv values take ${secretBytes} bytes; a Secret holds at most ${MAX_SECRET_BYTES}` });
  }
  if (issues.length > 0) throw new SpecError(issues);
}

/**
 * The `COHORT_NEEDS` value of a role's members on Kubernetes: JSON, needed role name -> the list of
 * `<member>.<namespace>.svc:<port>` (or just the host when that role has no port), members in index order.
 */
export function cohortNeeds(role: CompiledRole, ctx: RenderContext): string {
  const needs: Record<string, string[]> = {};
  for (const name of role.needs) {
    const needed = ctx.spec.roles.find((r) => r.name === name);
    if (needed === undefined) continue;
    needs[name] = needed.members.map((member) => {
      const host = memberHost(member, ctx.namespace);
      return needed.port ? `${host}:${ctx.containerPort}` : host;
    });
  }
  return JSON.stringify(needs);
}

/** The `COHORT_*` variables (runtime/README.md "Member environment") of a member on Kubernetes, in the order they are rendered. */
export function cohortVars(member: MemberPlan, role: CompiledRole, ctx: RenderContext): Record<string, string> {
  return {
    COHORT_RUN_ID: ctx.runId,
    COHORT_ROLE: role.name,
    COHORT_INDEX: String(member.index),
    COHORT_MEMBER: member.id,
    ...(role.port ? { COHORT_PORT: String(ctx.containerPort) } : {}),
    COHORT_NEEDS: cohortNeeds(role, ctx),
  };
}

function roleOf(member: MemberPlan, ctx: RenderContext): CompiledRole {
  const role = ctx.spec.roles.find((r) => r.name === member.role);
  if (role === undefined) throw new Error(`member ${member.id}: role "${member.role}" is not in the RunSpec`);
  return role;
}

function readinessProbe(member: MemberPlan, role: CompiledRole, ctx: RenderContext): Json {
  const timing = { periodSeconds: 1, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 };
  // The core's plan carries the probe with its exec command already expanded (runtime/core/plan.ts).
  if (member.readiness !== undefined && member.readiness.kind === "exec") {
    return { exec: { command: [...member.readiness.command] }, ...timing };
  }
  const r = role.readiness;
  switch (r.kind) {
    case "tcp":
      return { tcpSocket: { port: r.port ?? ctx.containerPort }, ...timing };
    case "http":
      return { httpGet: { path: r.path, port: r.port ?? ctx.containerPort }, ...timing };
    case "exec": {
      // The kubelet does not expand $(VAR) in probe commands: expand here, from the member's non-secret
      // variables only (a reference to a secret stays literal; the spec validator refuses those anyway).
      const vars = expandEnv(cohortVars(member, role, ctx), role.env);
      return { exec: { command: r.command.map((arg) => expandVars(arg, vars)) }, ...timing };
    }
    case "log":
      throw new Error(`role "${role.name}": log readiness is not supported by the kubernetes backend`);
  }
}

/**
 * The Sandbox of one member.
 *
 * @param member - the member as the core planned it (only `id`, `role`, `index` and `secretEnv` are used;
 *   command and env come from the RunSpec, see the module doc)
 * @throws {Error} when the member's role is not in the spec (a programming error)
 */
export function renderSandbox(member: MemberPlan, ctx: RenderContext, placement?: Placement): Json {
  const role = roleOf(member, ctx);
  // Kueue's pod-group metadata only when Kueue's pod integration admits the roster; our start gate unless the
  // Sandbox is created only when its member starts (admission "workload").
  const kueueMetadata = ctx.localQueue !== undefined && !ownsWorkload(ctx);
  const createdAtStart = ownsWorkload(ctx) && ctx.admission === "workload";
  const labels = { [LABEL_RUN]: ctx.runLabel, [LABEL_ROLE]: role.name, [LABEL_MEMBER]: member.id };
  const extra = ctx.memberPodMetadata[member.id] ?? {};
  const podLabels: Record<string, string> = { ...ctx.podMetadata.labels, ...extra.labels, ...labels };
  const podAnnotations: Record<string, string> = { ...ctx.podMetadata.annotations, ...extra.annotations };
  if (kueueMetadata) {
    podLabels[KUEUE_QUEUE_LABEL] = ctx.localQueue;
    podLabels[KUEUE_POD_GROUP_NAME_LABEL] = ctx.podGroup;
    podAnnotations[KUEUE_POD_GROUP_TOTAL_COUNT_ANNOTATION] = String(ctx.spec.size);
    podAnnotations[KUEUE_POD_GROUP_SERVING_ANNOTATION] = "true";
  }
  const env: Json[] = Object.entries(cohortVars(member, role, ctx)).map(([name, value]) => ({ name, value }));
  for (const name of role.secretEnv) {
    env.push({ name, valueFrom: { secretKeyRef: { name: ctx.secretName, key: secretKey(member.id, name) } } });
  }
  for (const [name, value] of Object.entries(role.env)) env.push({ name, value });
  const resources = Object.keys(role.resources).length > 0 ? { requests: { ...role.resources }, limits: { ...role.resources } } : {};
  const container: Json = {
    name: CONTAINER_NAME,
    image: role.image,
    command: [...role.command],
    env,
    ...(role.port ? { ports: [{ name: PORT_NAME, containerPort: ctx.containerPort, protocol: "TCP" }] } : {}),
    resources,
    readinessProbe: readinessProbe(member, role, ctx),
    // A failed container's last log lines land in its termination message (kubelet: at most 80 lines /
    // 2 KiB), so a failure reason can quote them without a log request.
    terminationMessagePolicy: "FallbackToLogsOnError",
    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
  };
  const nodeSelector = { ...ctx.nodeSelector, ...placement?.nodeSelector };
  const tolerations = [...ctx.tolerations, ...(placement?.tolerations ?? [])];
  const podSpec: Json = {
    // With admission "workload" the Sandbox is created when the member starts: nothing to hold.
    ...(createdAtStart ? {} : { schedulingGates: [{ name: START_GATE }] }),
    restartPolicy: "Never",
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    terminationGracePeriodSeconds: ctx.terminationGraceSeconds,
    securityContext: { runAsNonRoot: ctx.runAsNonRoot, seccompProfile: { type: "RuntimeDefault" } },
    ...(Object.keys(nodeSelector).length > 0 ? { nodeSelector } : {}),
    ...(tolerations.length > 0 ? { tolerations: tolerations.map((t) => ({ ...t })) } : {}),
    containers: [container],
  };
  return {
    apiVersion: `${SANDBOX_GROUP}/${SANDBOX_VERSION}`,
    kind: SANDBOX_KIND,
    metadata: { name: member.id, namespace: ctx.namespace, labels: { ...labels, [LABEL_MANAGED_BY]: MANAGED_BY } },
    spec: {
      ...(neededRoles(ctx.spec).has(role.name) ? { service: true } : {}),
      podTemplate: {
        metadata: { labels: podLabels, ...(Object.keys(podAnnotations).length > 0 ? { annotations: podAnnotations } : {}) },
        spec: podSpec,
      },
    },
  };
}

/**
 * The pod set of each role in the roster's Workload (`admission: "workload"` or `"workloadGated"`): the role's own name when the
 * roster has at most {@link WL_MAX_POD_SETS} roles and every name is a DNS-1123 label, else `ps-<i>` per pod
 * shape ({@link podShapes}; {@link validateRoster} refuses more than 8 shapes).
 */
export function podSetNames(ctx: Pick<RenderContext, "spec" | "containerPort">): ReadonlyMap<string, string> {
  const roles = ctx.spec.roles;
  const out = new Map<string, string>();
  if (roles.length <= WL_MAX_POD_SETS && roles.every((role) => role.name.length <= 63 && LABEL_VALUE.test(role.name))) {
    for (const role of roles) out.set(role.name, role.name);
    return out;
  }
  podShapes(roles, ctx).forEach((names, i) => {
    for (const name of names) out.set(name, `ps-${i}`);
  });
  return out;
}

/**
 * The roster's Workload (`kueue.x-k8s.io/v1beta2`, `admission: "workload"` or `"workloadGated"`), named `podGroup`, in the
 * LocalQueue: one pod set per role (or per pod shape, see {@link podSetNames}), `count` = its members, a
 * template carrying the members' resource requests (what Kueue's flavor assigner and quota check read:
 * kueue `pkg/workload/workload.go` NewInfo / totalRequests) and the configured nodeSelector/tolerations.
 * No owner reference: Kueue admits an owner-less Workload like any other and removes its finalizer when
 * it is deleted (kueue v0.17.0 `pkg/controller/core/workload_controller.go` Reconcile, "manual deletion").
 *
 * @throws {Error} when `ctx.localQueue` is unset (a programming error: no Workload without a queue)
 */
export function renderWorkload(ctx: RenderContext): Json {
  if (ctx.localQueue === undefined) throw new Error("renderWorkload: no LocalQueue configured");
  const names = podSetNames(ctx);
  const sets = new Map<string, { count: number; role: CompiledRole }>();
  for (const role of ctx.spec.roles) {
    const name = names.get(role.name)!;
    const entry = sets.get(name);
    if (entry === undefined) sets.set(name, { count: role.members.length, role });
    else entry.count += role.members.length;
  }
  const podSets = [...sets.entries()].map(([name, { count, role }]) => ({
    name,
    count,
    template: {
      spec: {
        restartPolicy: "Never",
        ...(Object.keys(ctx.nodeSelector).length > 0 ? { nodeSelector: { ...ctx.nodeSelector } } : {}),
        ...(ctx.tolerations.length > 0 ? { tolerations: ctx.tolerations.map((t) => ({ ...t })) } : {}),
        containers: [
          {
            name: CONTAINER_NAME,
            image: role.image,
            ...(Object.keys(role.resources).length > 0 ? { resources: { requests: { ...role.resources } } } : {}),
            ...(role.port ? { ports: [{ name: PORT_NAME, containerPort: ctx.containerPort, protocol: "TCP" }] } : {}),
          },
        ],
      },
    },
  }));
  return {
    apiVersion: `${KUEUE_GROUP}/${KUEUE_VERSION}`,
    kind: "Workload",
    metadata: { name: ctx.podGroup, namespace: ctx.namespace, labels: { [LABEL_RUN]: ctx.runLabel, [LABEL_MANAGED_BY]: MANAGED_BY } },
    spec: { queueName: ctx.localQueue, podSets },
  };
}

/**
 * The run's one Secret holding every member's `secretEnv` values, or `undefined` when no role has any.
 * The returned object holds secrets: never log it.
 */
export function renderSecret(members: readonly MemberPlan[], ctx: RenderContext): Json | undefined {
  const data: Record<string, string> = {};
  const roles = new Map(ctx.spec.roles.map((role) => [role.name, role]));
  for (const member of members) {
    // The role's generated tokens only: env entries that merely reference one (also listed in the
    // plan's secretEnv) are rendered as written and expanded by Kubernetes from the secretKeyRef entry.
    for (const name of roles.get(member.role)?.secretEnv ?? []) {
      const value = member.env[name];
      if (value === undefined) throw new Error(`member ${member.id}: secretEnv ${name} has no value in the member's env`);
      data[secretKey(member.id, name)] = value;
    }
  }
  if (Object.keys(data).length === 0) return undefined;
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: { name: ctx.secretName, namespace: ctx.namespace, labels: { [LABEL_RUN]: ctx.runLabel, [LABEL_MANAGED_BY]: MANAGED_BY } },
    stringData: data,
  };
}

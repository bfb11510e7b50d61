/**
 * Pure classification of the objects the backend watches (Pod, Sandbox, Workload) into what they mean
 * for a member or for the roster's admission, with the exact one-line reasons the backend reports.
 * No I/O and no clock: the backend feeds watch events in; `test/unit/k8s-backend-status.test.ts` feeds
 * recorded objects and checks the exact strings.
 */
import type { Json } from "./render.js";
import { cutUnits } from "../../core/text.js";
import {
  FATAL_WAITING_REASONS,
  KUEUE_ADMISSION_GATE,
  KUEUE_MANAGED_LABEL,
  KUEUE_MAY_FIT_FRAGMENT,
  KUEUE_NEVER_FITS_FRAGMENT,
  KUEUE_TERMINATION_TARGET,
  POD_DISRUPTION_TARGET,
  POD_READY,
  POD_SCHEDULED,
  REASON_SCHEDULING_GATED,
  REASON_UNSCHEDULABLE,
  SANDBOX_FINISHED,
  SANDBOX_READY,
  SANDBOX_REASON_EXPIRED,
  SANDBOX_REASON_RECONCILER_ERROR,
  START_GATE,
  WL_ADMITTED,
  WL_DEACTIVATION_TARGET,
  WL_EVICTED,
  WL_EVICTED_DEACTIVATED,
  WL_EVICTED_PODS_READY_TIMEOUT,
  WL_PODS_READY,
  WL_REASON_REQUEUING_LIMIT_EXCEEDED,
  WL_FINISHED,
  WL_QUOTA_RESERVED,
  WL_REASON_INADMISSIBLE,
} from "./upstream.js";

/** A status condition as the API returns it. */
export interface Condition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
  readonly lastTransitionTime?: string;
}

function get(obj: unknown, ...path: string[]): unknown {
  let cur: unknown = obj;
  for (const key of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

function str(obj: unknown, ...path: string[]): string | undefined {
  const v = get(obj, ...path);
  return typeof v === "string" ? v : undefined;
}

function arr(obj: unknown, ...path: string[]): unknown[] {
  const v = get(obj, ...path);
  return Array.isArray(v) ? v : [];
}

/** The conditions of an object's status. */
export function conditions(obj: unknown): Condition[] {
  return arr(obj, "status", "conditions").filter((c): c is Condition => typeof get(c, "type") === "string" && typeof get(c, "status") === "string");
}

/** The condition of `type`, if present. */
export function condition(obj: unknown, type: string): Condition | undefined {
  return conditions(obj).find((c) => c.type === type);
}

/** `<namespace>/<name>` of an object. */
export function objectRef(obj: unknown): string {
  return `${str(obj, "metadata", "namespace") ?? ""}/${str(obj, "metadata", "name") ?? ""}`;
}

/** One line: newlines and runs of spaces collapsed, trimmed, at most 400 characters. */
export function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > 400 ? `${cutUnits(flat, 399)}…` : flat;
}

function withMessage(head: string, message: string | undefined): string {
  const m = oneLine(message ?? "");
  return m === "" ? head : `${head}: ${m}`;
}

/** Names of the pod's scheduling gates. */
export function schedulingGates(pod: unknown): string[] {
  return arr(pod, "spec", "schedulingGates")
    .map((g) => str(g, "name"))
    .filter((n): n is string => n !== undefined);
}

/** Whether our `cohort-lab.dev/start` gate is still on the pod. */
export function hasStartGate(pod: unknown): boolean {
  return schedulingGates(pod).includes(START_GATE);
}

/** Whether Kueue's admission gate is still on the pod. */
export function hasKueueGate(pod: unknown): boolean {
  return schedulingGates(pod).includes(KUEUE_ADMISSION_GATE);
}

/** Whether Kueue's pod webhook took the pod under management (it adds `kueue.x-k8s.io/managed: "true"`). */
export function isKueueManaged(pod: unknown): boolean {
  return str(pod, "metadata", "labels", KUEUE_MANAGED_LABEL) === "true";
}

/** What a pod means for its member. */
export type PodVerdict =
  /** Pod Ready=True (the member's readiness needs the Sandbox too). */
  | { readonly kind: "ready" }
  /** Still on its way (gated, scheduled, pulling, starting, not yet ready). */
  | { readonly kind: "pending" }
  /** kube-scheduler found no node: fatal unless it clears within the backend's grace (autoscaling). */
  | { readonly kind: "unschedulable"; readonly reason: string }
  /** The member has failed or exited. `outputTail`: the container's log tail from its termination message. */
  | { readonly kind: "exited"; readonly reason: string; readonly exitCode: number | null; readonly outputTail?: string };

interface ContainerTermination {
  readonly container: string;
  readonly exitCode: number | null;
  readonly reason: string | undefined;
  readonly message: string | undefined;
  readonly signal: number | undefined;
}

function terminatedContainer(pod: unknown): ContainerTermination | undefined {
  const statuses = [...arr(pod, "status", "initContainerStatuses"), ...arr(pod, "status", "containerStatuses")];
  let found: ContainerTermination | undefined;
  for (const status of statuses) {
    const term = get(status, "state", "terminated");
    if (term === undefined || term === null) continue;
    const exitCode = get(term, "exitCode");
    const candidate: ContainerTermination = {
      container: str(status, "name") ?? "?",
      exitCode: typeof exitCode === "number" ? exitCode : null,
      reason: str(term, "reason"),
      message: str(term, "message"),
      signal: typeof get(term, "signal") === "number" ? (get(term, "signal") as number) : undefined,
    };
    // Init containers that completed with 0 are normal; prefer a non-zero exit.
    if (candidate.exitCode !== 0) return candidate;
    found ??= arr(pod, "status", "containerStatuses").includes(status) ? candidate : undefined;
  }
  return found;
}

function waitingFatal(pod: unknown): { container: string; reason: string; message: string | undefined } | undefined {
  for (const status of [...arr(pod, "status", "initContainerStatuses"), ...arr(pod, "status", "containerStatuses")]) {
    const reason = str(status, "state", "waiting", "reason");
    const message = str(status, "state", "waiting", "message");
    if (
      reason !== undefined &&
      FATAL_WAITING_REASONS.has(reason) &&
      !(reason === "CreateContainerConfigError" && message !== undefined && KUBELET_CACHE_NOT_SYNCED.test(message))
    ) {
      return { container: str(status, "name") ?? "?", reason, message };
    }
  }
  return undefined;
}

/**
 * The kubelet's CreateContainerConfigError message when its Secret or ConfigMap watch has not delivered an object
 * yet (`failed to sync secret cache: timed out waiting for the condition`, kubelet
 * `pkg/kubelet/util/manager/watch_based_manager.go`): the kubelet retries, so this one is not fatal (the member's
 * own deadline still bounds it). Seen on a real kind cluster under load for the run's Secret.
 */
const KUBELET_CACHE_NOT_SYNCED = /^failed to sync (secret|configmap) cache: /;

/**
 * One line about a terminated container. Its `message` is the termination message, which with
 * `terminationMessagePolicy: FallbackToLogsOnError` (render.ts) is the tail of the container's log when
 * it failed: a short single line is quoted here, anything longer is the exit's `outputTail` instead.
 */
function describeTermination(t: ContainerTermination): string {
  const how = t.exitCode !== null ? `exit code ${t.exitCode}` : t.signal !== undefined ? `signal ${t.signal}` : "no exit code";
  const head = `container "${t.container}" terminated with ${how}${t.reason !== undefined && t.reason !== "" ? ` (${t.reason})` : ""}`;
  const message = (t.message ?? "").trim();
  return message !== "" && !message.includes("\n") && message.length <= 200 ? `${head}: ${message}` : head;
}

/** The multi-line termination message (log tail) of a terminated container, if it has one. */
function terminationTail(t: ContainerTermination | undefined): string | undefined {
  const message = (t?.message ?? "").replace(/\s+$/, "");
  return message.includes("\n") || message.length > 200 ? message : undefined;
}

function withTail(verdict: Extract<PodVerdict, { kind: "exited" }>, term: ContainerTermination | undefined): PodVerdict {
  const tail = terminationTail(term);
  return tail === undefined ? verdict : { ...verdict, outputTail: tail };
}

/**
 * Classifies a pod for its member. Order of precedence: Kueue's or the cluster's stop marks
 * (`TerminationTarget`, `DisruptionTarget`), terminal phase, a terminated container, a container that
 * cannot start (image pull and config errors, crash loop), Unschedulable after our gate is gone, Ready.
 *
 * @param pod - the Pod as last seen on the watch
 * @param kueue - whether the run uses Kueue (changes the Unschedulable wording to "admitted ... but")
 */
export function classifyPod(pod: Json, kueue: boolean): PodVerdict {
  const ref = `pod ${objectRef(pod)}`;
  const phase = str(pod, "status", "phase");
  const termination = condition(pod, KUEUE_TERMINATION_TARGET);
  if (termination?.status === "True") {
    return { kind: "exited", reason: withMessage(`${ref} stopped by Kueue (${termination.reason ?? "no reason"})`, termination.message), exitCode: null };
  }
  const disruption = condition(pod, POD_DISRUPTION_TARGET);
  if (disruption?.status === "True") {
    return { kind: "exited", reason: withMessage(`${ref} disrupted (${disruption.reason ?? "no reason"})`, disruption.message), exitCode: null };
  }
  const term = terminatedContainer(pod);
  if (phase === "Failed") {
    if (term !== undefined) return withTail({ kind: "exited", reason: `${ref} failed: ${describeTermination(term)}`, exitCode: term.exitCode }, term);
    const podReason = str(pod, "status", "reason");
    return { kind: "exited", reason: withMessage(`${ref} failed${podReason !== undefined ? ` (${podReason})` : ""}`, str(pod, "status", "message")), exitCode: null };
  }
  if (phase === "Succeeded") {
    return withTail(
      { kind: "exited", reason: term !== undefined ? `${ref} exited: ${describeTermination(term)}` : `${ref} exited (phase Succeeded)`, exitCode: term?.exitCode ?? 0 },
      term,
    );
  }
  if (term !== undefined && term.exitCode !== 0) {
    return withTail({ kind: "exited", reason: `${ref} failed: ${describeTermination(term)}`, exitCode: term.exitCode }, term);
  }
  const fatal = waitingFatal(pod);
  if (fatal !== undefined) {
    return { kind: "exited", reason: withMessage(`${ref}: container "${fatal.container}" cannot start (${fatal.reason})`, fatal.message), exitCode: null };
  }
  const scheduled = condition(pod, POD_SCHEDULED);
  if (scheduled?.status === "False" && scheduled.reason === REASON_UNSCHEDULABLE && schedulingGates(pod).length === 0) {
    const head = kueue ? `${ref} was admitted by Kueue but is unschedulable` : `${ref} is unschedulable`;
    return { kind: "unschedulable", reason: withMessage(head, scheduled.message) };
  }
  if (condition(pod, POD_READY)?.status === "True" && phase === "Running") return { kind: "ready" };
  return { kind: "pending" };
}

/** Why a pod is not ready yet, one short phrase (for timeout messages and admission diagnostics). */
export function podProgress(pod: Json | undefined): string {
  if (pod === undefined) return "no pod yet";
  const gates = schedulingGates(pod);
  if (gates.length > 0) return `gated by ${gates.join(", ")}`;
  const scheduled = condition(pod, POD_SCHEDULED);
  if (scheduled?.status !== "True") return `not scheduled${scheduled?.reason !== undefined && scheduled.reason !== REASON_SCHEDULING_GATED ? ` (${scheduled.reason})` : ""}`;
  const phase = str(pod, "status", "phase") ?? "Pending";
  const ready = condition(pod, POD_READY);
  return `${phase} on ${str(pod, "spec", "nodeName") ?? "?"}, Ready=${ready?.status ?? "Unknown"}`;
}

/** What a Sandbox means for its member. */
export type SandboxVerdict =
  | { readonly kind: "ready" }
  | { readonly kind: "pending"; readonly message: string }
  /**
   * The Agent Sandbox controller reports an error reconciling it: fatal if it persists. `permanent`: the
   * API server refused the controller's request (an admission webhook denied it, RBAC forbids it, the
   * object is invalid), as opposed to a call that failed (timeout, unreachable webhook) and may succeed
   * on the controller's next retry.
   */
  | { readonly kind: "error"; readonly reason: string; readonly permanent: boolean }
  | { readonly kind: "exited"; readonly reason: string };

/** Classifies a Sandbox by its `Finished` and `Ready` conditions (agent-sandbox `api/v1beta1/sandbox_types.go`). */
export function classifySandbox(sandbox: Json): SandboxVerdict {
  const ref = `Sandbox ${objectRef(sandbox)}`;
  const finished = condition(sandbox, SANDBOX_FINISHED);
  if (finished?.status === "True") {
    return { kind: "exited", reason: withMessage(`${ref} finished (${finished.reason ?? "no reason"})`, finished.message) };
  }
  const ready = condition(sandbox, SANDBOX_READY);
  if (ready?.reason === SANDBOX_REASON_EXPIRED) return { kind: "exited", reason: withMessage(`${ref} expired`, ready.message) };
  if (ready?.status === "True") return { kind: "ready" };
  if (ready?.reason === SANDBOX_REASON_RECONCILER_ERROR) {
    const message = ready.message ?? "";
    const permanent = /denied the request|is forbidden|is invalid|Invalid value|Unsupported value|Required value/.test(message) && !/failed calling webhook/.test(message);
    return { kind: "error", reason: withMessage(`${ref}: the Agent Sandbox controller cannot reconcile it`, message), permanent };
  }
  return { kind: "pending", message: oneLine(ready?.message ?? "no Ready condition yet") };
}

/** What the roster's Workload means for admission and for the run. */
export type WorkloadVerdict =
  | { readonly kind: "admitted"; readonly clusterQueue: string | undefined; readonly flavors: Readonly<Record<string, string>> }
  /** Waiting for quota (or for Kueue to look at it); `message` is Kueue's latest word. */
  | { readonly kind: "pending"; readonly message: string }
  /** Can never be admitted as things stand (LocalQueue/ClusterQueue missing or inactive, request above the queue's maximum). */
  | { readonly kind: "inadmissible"; readonly reason: string }
  /** Admitted once, then evicted, deactivated or finished: the run cannot go on. */
  | { readonly kind: "lost"; readonly reason: string };

function admissionFlavors(wl: unknown): Record<string, string> {
  const flavors: Record<string, string> = {};
  for (const podSet of arr(wl, "status", "admission", "podSetAssignments")) {
    const byResource = get(podSet, "flavors");
    if (byResource !== null && typeof byResource === "object") {
      for (const [resource, flavor] of Object.entries(byResource as Record<string, unknown>)) {
        if (typeof flavor === "string") flavors[resource] = flavor;
      }
    }
  }
  return flavors;
}

/**
 * Classifies the roster's Workload (kueue `apis/kueue/v1beta2/workload_types.go` conditions).
 * Precedence: Finished, Evicted, `spec.active: false`, Admitted, QuotaReserved=False with reason
 * Inadmissible or a "> maximum capacity" message (never fits), otherwise pending.
 */
export function classifyWorkload(wl: Json): WorkloadVerdict {
  const ref = `Workload ${objectRef(wl)}`;
  const finished = condition(wl, WL_FINISHED);
  if (finished?.status === "True") return { kind: "lost", reason: withMessage(`Kueue finished ${ref} (${finished.reason ?? "no reason"})`, finished.message) };
  // Kueue's PodsReady timeout with backoffLimitCount 0 deactivates instead of evicting with PodsReadyTimeout
  // (upstream.ts WL_DEACTIVATION_TARGET): name the timeout, which is what happened.
  const target = condition(wl, WL_DEACTIVATION_TARGET);
  const evictedFirst = condition(wl, WL_EVICTED);
  if (
    target?.reason === WL_REASON_REQUEUING_LIMIT_EXCEEDED &&
    (target.status === "True" || (get(wl, "spec", "active") === false && evictedFirst?.reason === WL_EVICTED_DEACTIVATED)) &&
    condition(wl, WL_PODS_READY)?.status !== "True"
  ) {
    return {
      kind: "lost",
      reason: withMessage(
        `Kueue evicted ${ref} (${WL_EVICTED_PODS_READY_TIMEOUT}): its pods were not all Ready within waitForPodsReady.timeout of admission, and Kueue deactivated it (${target.reason})`,
        target.message,
      ),
    };
  }
  const evicted = condition(wl, WL_EVICTED);
  if (evicted?.status === "True") return { kind: "lost", reason: withMessage(`Kueue evicted ${ref} (${evicted.reason ?? "no reason"})`, evicted.message) };
  if (get(wl, "spec", "active") === false) return { kind: "lost", reason: `${ref} was deactivated (spec.active is false)` };
  const admitted = condition(wl, WL_ADMITTED);
  if (admitted?.status === "True") {
    return { kind: "admitted", clusterQueue: str(wl, "status", "admission", "clusterQueue"), flavors: admissionFlavors(wl) };
  }
  const quota = condition(wl, WL_QUOTA_RESERVED);
  const message = oneLine(quota?.message ?? admitted?.message ?? "");
  if (quota?.status === "False" && quota.reason === WL_REASON_INADMISSIBLE) {
    return { kind: "inadmissible", reason: withMessage(`Kueue cannot admit ${ref}`, quota.message) };
  }
  if (quota?.status === "False" && message.includes(KUEUE_NEVER_FITS_FRAGMENT) && !message.includes(KUEUE_MAY_FIT_FRAGMENT)) {
    return { kind: "inadmissible", reason: withMessage(`Kueue cannot admit ${ref}: the roster can never fit its ClusterQueue`, quota.message) };
  }
  return { kind: "pending", message: message === "" ? "waiting for Kueue" : message };
}

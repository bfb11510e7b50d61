/**
 * Upstream names the Kubernetes backend relies on: API groups, labels, annotations, scheduling gates and
 * condition types/reasons of Kueue v0.17.0 and Agent Sandbox v0.5.5, each with the source file it was
 * read from (module sources in the Go module cache, `sigs.k8s.io/kueue@v0.17.0`,
 * `sigs.k8s.io/agent-sandbox@v0.5.5`). The versions themselves are pinned in `common/pins.ts`.
 */

// ---- Kubernetes core ------------------------------------------------------------------------------

/** Pod condition types and reasons (k8s.io/api core/v1 types.go). */
export const POD_READY = "Ready";
export const POD_SCHEDULED = "PodScheduled";
/** `PodScheduled=False` reason while any scheduling gate remains (KEP-3521, pod scheduling readiness). */
export const REASON_SCHEDULING_GATED = "SchedulingGated";
/** `PodScheduled=False` reason set by kube-scheduler when no node fits. */
export const REASON_UNSCHEDULABLE = "Unschedulable";
/** Pod condition added before a pod is deleted by a disruption (preemption, eviction, taint manager). */
export const POD_DISRUPTION_TARGET = "DisruptionTarget";
/**
 * Container `waiting.reason` values that mean the container will not start without a change, reported
 * at once instead of waiting for a timeout (kubelet `pkg/kubelet/images/types.go`,
 * `pkg/kubelet/kuberuntime/kuberuntime_container.go`).
 */
export const FATAL_WAITING_REASONS: ReadonlySet<string> = new Set([
  "ErrImagePull",
  "ImagePullBackOff",
  "ErrImageNeverPull",
  "InvalidImageName",
  "ImageInspectError",
  "RegistryUnavailable",
  "CreateContainerConfigError",
  "CreateContainerError",
  "RunContainerError",
  "CrashLoopBackOff",
  "PreStartHookError",
  "PostStartHookError",
]);
/**
 * Event reason emitted by cluster-autoscaler on a pod whose scale-up it triggered
 * (kubernetes/autoscaler `cluster-autoscaler/core/scaleup/orchestrator`): an Unschedulable pod with this
 * event is waiting for a node, not stuck.
 */
export const EVENT_TRIGGERED_SCALE_UP = "TriggeredScaleUp";

// ---- Agent Sandbox v0.5.5 ---------------------------------------------------------------------------

/** API group/version of Sandbox (agent-sandbox `api/v1beta1/groupversion_info.go`). */
export const SANDBOX_GROUP = "agents.x-k8s.io";
export const SANDBOX_VERSION = "v1beta1";
export const SANDBOX_PLURAL = "sandboxes";
export const SANDBOX_KIND = "Sandbox";
/**
 * Sandbox condition types and reasons (agent-sandbox `api/v1beta1/sandbox_types.go`). `Ready=True`
 * (reason `DependenciesReady`) needs pod phase Running, pod `Ready=True`, non-empty `podIPs`, and the
 * headless Service when `spec.service` is true (`controllers/sandbox_controller.go` computeReadyCondition).
 * `Finished=True` with reason `PodFailed`/`PodSucceeded` mirrors a terminated pod (computeFinishedCondition).
 */
export const SANDBOX_READY = "Ready";
export const SANDBOX_FINISHED = "Finished";
export const SANDBOX_REASON_RECONCILER_ERROR = "ReconcilerError";
export const SANDBOX_REASON_EXPIRED = "SandboxExpired";

// ---- Kueue v0.17.0 ----------------------------------------------------------------------------------

/** API group/version of Workload and LocalQueue (kueue `apis/kueue/v1beta2`, the storage version at v0.17). */
export const KUEUE_GROUP = "kueue.x-k8s.io";
export const KUEUE_VERSION = "v1beta2";
export const WORKLOAD_PLURAL = "workloads";
export const LOCALQUEUE_PLURAL = "localqueues";
/** Pod label naming the LocalQueue (kueue `pkg/controller/constants/constants.go` QueueLabel). */
export const KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name";
/** Label Kueue's pod webhook adds to pods it manages (kueue `pkg/constants/constants.go` ManagedByKueueLabelKey). */
export const KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed";
/** Scheduling gate Kueue's pod webhook adds and removes on admission (kueue `pkg/controller/jobs/pod/constants/constants.go`). */
export const KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission";
/**
 * Pod-group metadata (kueue `pkg/controller/jobs/pod/constants/constants.go`): every pod of the group
 * carries the group-name LABEL and the total-count ANNOTATION; Kueue builds ONE Workload named after the
 * group once all `total-count` pods exist (`pod_controller.go` validatePodGroupMetadata,
 * ConstructComposableWorkload) and admits it all-or-nothing. `serving: "true"` marks a long-running group
 * whose Workload never finishes on its own (`pod_controller.go` Finished / isServing).
 */
export const KUEUE_POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name";
export const KUEUE_POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count";
export const KUEUE_POD_GROUP_SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving";
/**
 * Most pod sets one pod group may have: pods are grouped into pod sets by a "role hash" of their spec
 * shape (containers' resource requests and ports, nodeSelector, affinity, tolerations, ...:
 * kueue `pkg/util/pod/pod.go` GenerateRoleHash/SpecShape), and a group with more than 8 is refused
 * ("pod group can't include more than 8 roles", `pod_controller.go` errMsgIncorrectGroupRoleCount).
 */
export const KUEUE_MAX_POD_SETS = 8;
/** Pod condition Kueue sets on a pod it is about to delete (kueue `pod_controller.go` ConditionTypeTerminationTarget). */
export const KUEUE_TERMINATION_TARGET = "TerminationTarget";
/** Workload condition types (kueue `apis/kueue/v1beta2/workload_types.go`). */
export const WL_QUOTA_RESERVED = "QuotaReserved";
export const WL_ADMITTED = "Admitted";
export const WL_EVICTED = "Evicted";
export const WL_FINISHED = "Finished";
export const WL_PODS_READY = "PodsReady";
/**
 * Reason of the `PodsReady=True` condition the runtime sets on a Workload it owns (`admission: "workload"`),
 * the reason Kueue's own job reconciler uses (kueue `pkg/controller/jobframework/reconciler.go`,
 * `pkg/controller/core/workload_controller.go` admittedNotReadyWorkload accepts it).
 */
export const WL_REASON_PODS_READY = "PodsReady";
/** Workload `spec.podSets` has at most 8 entries (kueue `apis/kueue/v1beta2/workload_types.go`, `+kubebuilder:validation:MaxItems=8`). */
export const WL_MAX_POD_SETS = 8;
/** Field manager of the runtime's server-side apply of a Workload's `PodsReady` condition. */
export const FIELD_MANAGER = "cohort-lab";
/**
 * `QuotaReserved=False` reason when the LocalQueue or ClusterQueue is missing or inactive: the Workload
 * can never be admitted as things stand (kueue `pkg/controller/core/workload_controller.go`, messages
 * "LocalQueue %s doesn't exist", "ClusterQueue %s is inactive", ...).
 */
export const WL_REASON_INADMISSIBLE = "Inadmissible";
/** Eviction reasons (kueue `apis/kueue/v1beta2/workload_types.go`). */
export const WL_EVICTED_PODS_READY_TIMEOUT = "PodsReadyTimeout";
export const WL_EVICTED_DEACTIVATED = "Deactivated";
/**
 * Condition Kueue sets before deactivating a Workload, and its reason when the Workload exceeded the PodsReady
 * timeout more often than `waitForPodsReady.requeuingStrategy.backoffLimitCount` allows (every profile sets 0, so
 * the FIRST timeout deactivates: kueue v0.17.0 `pkg/controller/core/workload_controller.go`
 * reconcileNotReadyTimeout -> triggerDeactivation, the only place that reason is set). Kueue then sets
 * `spec.active: false` and evicts with reason `Deactivated`, never with `PodsReadyTimeout`.
 */
export const WL_DEACTIVATION_TARGET = "DeactivationTarget";
export const WL_REASON_REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded";
/**
 * Fragment of the Pending message when a request exceeds what the ClusterQueue (with borrowing) can
 * ever provide (kueue `pkg/scheduler/flavorassigner/flavorassigner.go` fitsResourceQuota: "... >
 * maximum capacity (...)"), as opposed to "insufficient unused quota" which may clear.
 */
export const KUEUE_NEVER_FITS_FRAGMENT = "> maximum capacity";
export const KUEUE_MAY_FIT_FRAGMENT = "insufficient unused quota";

// ---- cohort-lab's own names -------------------------------------------------------------------------

/** Label on every object the backend creates: the run (label-safe run id, see `runLabelValue`). */
export const LABEL_RUN = "cohort-lab.dev/run";
/** Label: the member's role. */
export const LABEL_ROLE = "cohort-lab.dev/role";
/** Label: the member id. */
export const LABEL_MEMBER = "cohort-lab.dev/member";
/** Standard label naming the tool that manages the object. */
export const LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "cohort-lab";
/**
 * Our scheduling gate: keeps an admitted member's pod unscheduled until `start(member)` removes it, so
 * the whole roster is admitted at once while members still start in dependency order.
 */
export const START_GATE = "cohort-lab.dev/start";
/** Name of the one container in a member's pod. */
export const CONTAINER_NAME = "member";
/** Name of the container port (and of the Sandbox's Service port) when the role listens on one. */
export const PORT_NAME = "cohort";

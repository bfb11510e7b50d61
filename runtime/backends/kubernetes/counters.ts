/**
 * Every Kubernetes API call the backend can make, as a static table (the single source of truth for
 * the RBAC rules in `rbac.ts`), and the counters that record each call by verb and resource.
 */
import { KUEUE_GROUP, LOCALQUEUE_PLURAL, SANDBOX_GROUP, SANDBOX_PLURAL, WORKLOAD_PLURAL } from "./upstream.js";

/** One kind of API call: an RBAC verb on a resource of an API group ("" = core). */
export interface ApiCallKind {
  readonly verb: "get" | "list" | "watch" | "create" | "patch" | "delete" | "deletecollection";
  readonly group: string;
  readonly resource: string;
  /** What the call is for (documentation). */
  readonly why: string;
}

/**
 * The calls, by purpose. Per member: `create sandboxes` (admit) and `patch pods` (start, removing our
 * scheduling gate): 2 writes; with `admission: "workload"`, `create sandboxes` at start only: 1 write, plus
 * per run the Workload's create, one `patch workloads/status` (PodsReady) and its delete. Per run: the Secret (create, delete), one `deletecollection sandboxes` per
 * batch of stops and one at close, the Workload's delete at close, and one list + one watch per watched
 * kind (re-opened on expiry).
 */
export const API_CALLS = [
  { verb: "create", group: SANDBOX_GROUP, resource: SANDBOX_PLURAL, why: "admit: one Sandbox per member" },
  { verb: "deletecollection", group: SANDBOX_GROUP, resource: SANDBOX_PLURAL, why: "stop (batched by label selector) and close" },
  { verb: "list", group: SANDBOX_GROUP, resource: SANDBOX_PLURAL, why: "available() probe; list+watch of the run's Sandboxes" },
  { verb: "watch", group: SANDBOX_GROUP, resource: SANDBOX_PLURAL, why: "Sandbox Ready/Finished conditions" },
  { verb: "patch", group: "", resource: "pods", why: "start: remove the cohort-lab.dev/start scheduling gate" },
  { verb: "list", group: "", resource: "pods", why: "list+watch of the run's pods" },
  { verb: "get", group: "", resource: "pods/log", why: "the last lines of a member's output when it misses its readiness deadline" },
  { verb: "watch", group: "", resource: "pods", why: "Pod Ready, failures, Unschedulable, image pull errors" },
  { verb: "create", group: "", resource: "secrets", why: "admit: the run's one Secret with the members' secretEnv values" },
  { verb: "delete", group: "", resource: "secrets", why: "close: delete the run's Secret" },
  { verb: "list", group: "", resource: "events", why: "list+watch of TriggeredScaleUp events" },
  { verb: "watch", group: "", resource: "events", why: "cluster-autoscaler scale-up for Unschedulable pods" },
  { verb: "list", group: KUEUE_GROUP, resource: WORKLOAD_PLURAL, why: "list+watch of the roster's Workload" },
  { verb: "watch", group: KUEUE_GROUP, resource: WORKLOAD_PLURAL, why: "admission, eviction, deactivation" },
  {
    verb: "delete",
    group: KUEUE_GROUP,
    resource: WORKLOAD_PLURAL,
    why: "close: Kueue keeps its finalizer on a serving pod group's pods until the group's Workload is deleted",
  },
  { verb: "create", group: KUEUE_GROUP, resource: WORKLOAD_PLURAL, why: 'admit (admission "workload"): the roster\'s one Workload, owned by the runtime' },
  {
    verb: "patch",
    group: KUEUE_GROUP,
    resource: "workloads/status",
    why: 'admission "workload": PodsReady=True once every member is Ready (Kueue\'s waitForPodsReady)',
  },
  { verb: "get", group: KUEUE_GROUP, resource: LOCALQUEUE_PLURAL, why: "available(): the LocalQueue exists and is active" },
] as const satisfies readonly ApiCallKind[];

type Call = (typeof API_CALLS)[number];
/** `"<verb> <resource>[.<group>]"`, e.g. `"create sandboxes.agents.x-k8s.io"`, `"patch pods"`. */
export type ApiCallKey = Call extends infer C ? (C extends Call ? `${C["verb"]} ${C["resource"]}${C["group"] extends "" ? "" : `.${C["group"]}`}` : never) : never;

/** The counter key of a call kind. */
export function apiCallKey(call: Pick<ApiCallKind, "verb" | "group" | "resource">): string {
  return `${call.verb} ${call.resource}${call.group === "" ? "" : `.${call.group}`}`;
}

/** Verbs that change state (counted as writes). */
export const WRITE_VERBS: ReadonlySet<string> = new Set(["create", "patch", "update", "delete", "deletecollection"]);

/** A snapshot of the counters (plain data, JSON-safe, no secrets). */
export interface ApiCallStats {
  /** Calls by key (`"create sandboxes.agents.x-k8s.io"`), including failed ones. */
  readonly calls: Readonly<Record<string, number>>;
  /** Sum of calls with a write verb. */
  readonly writes: number;
  /** Sum of get/list calls. */
  readonly reads: number;
  /** Watch requests opened (first and re-opened). */
  readonly watches: number;
  /** Responses by HTTP status class of note: 409 conflicts, 429 server-side throttling, 5xx. */
  readonly conflicts: number;
  readonly throttled: number;
  readonly serverErrors: number;
  /** Client-side rate-limit waits: always 0 (@kubernetes/client-node has no client-side limiter; none is added). */
  readonly clientThrottleWaits: 0;
  /** Largest number of requests in flight at once. */
  readonly maxInFlight: number;
}

/** Counts API calls by verb and resource. */
export class ApiCounters {
  readonly #calls = new Map<string, number>();
  #conflicts = 0;
  #throttled = 0;
  #serverErrors = 0;
  #inFlight = 0;
  #maxInFlight = 0;

  /** Records that a call of `key` starts; returns a function to call with the HTTP status when it ends. */
  begin(key: ApiCallKey): (status: number | undefined) => void {
    this.#calls.set(key, (this.#calls.get(key) ?? 0) + 1);
    this.#inFlight += 1;
    this.#maxInFlight = Math.max(this.#maxInFlight, this.#inFlight);
    let ended = false;
    return (status) => {
      if (ended) return;
      ended = true;
      this.#inFlight -= 1;
      if (status === 409) this.#conflicts += 1;
      else if (status === 429) this.#throttled += 1;
      else if (status !== undefined && status >= 500) this.#serverErrors += 1;
    };
  }

  /** Number of calls of one key so far. */
  count(key: ApiCallKey): number {
    return this.#calls.get(key) ?? 0;
  }

  /** A JSON-safe snapshot. */
  snapshot(): ApiCallStats {
    const calls: Record<string, number> = {};
    let writes = 0;
    let reads = 0;
    let watches = 0;
    for (const key of [...this.#calls.keys()].sort()) {
      const n = this.#calls.get(key)!;
      calls[key] = n;
      const verb = key.split(" ")[0]!;
      if (WRITE_VERBS.has(verb)) writes += n;
      else if (verb === "watch") watches += n;
      else reads += n;
    }
    return {
      calls,
      writes,
      reads,
      watches,
      conflicts: this.#conflicts,
      throttled: this.#throttled,
      serverErrors: this.#serverErrors,
      clientThrottleWaits: 0,
      maxInFlight: this.#maxInFlight,
    };
  }
}

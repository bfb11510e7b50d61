/**
 * The state of one run on Kubernetes and the routing of watch events to member events. One instance
 * per backend; `admit.ts`, `start.ts` and `stop.ts` act on it.
 *
 * Readiness is by watch only (never a ticker): a member is `ready` once it was started (our gate
 * removed) AND its Pod is `Ready=True` AND its Sandbox is `Ready=True`. A member has `exited` when its
 * pod fails or terminates, a container cannot start (image pull, config error), kube-scheduler keeps it
 * Unschedulable for longer than the grace (unless cluster-autoscaler announced a scale-up for it), the
 * Agent Sandbox controller keeps failing to reconcile it, or its pod or Sandbox is deleted by someone
 * else. Losing the roster's Workload after admission (eviction, deactivation) fails the run through the
 * first member that is not ready.
 */
import type { MemberEventSink, MemberPlan } from "../../core/backend.js";
import type { KubeClient } from "./client.js";
import type { ApiCounters } from "./counters.js";
import { ownsWorkload, type AdmissionMode, type Json, type Placement, type RenderContext } from "./render.js";
import { classifyPod, classifySandbox, classifyWorkload, isKueueManaged, oneLine, podProgress, type WorkloadVerdict } from "./status.js";
import { EVENT_TRIGGERED_SCALE_UP, LABEL_MEMBER, LABEL_RUN } from "./upstream.js";
import type { CacheEvent, ListWatch } from "./watch.js";

/**
 * Runs tasks at most `limit` at a time, in FIFO order (the `createConcurrency` bound on `start()`'s one write
 * with `admission: "workload"` (a Sandbox create) and `"workloadGated"` (a pod patch): the core may start
 * every member of a level at once).
 */
export class Limiter {
  readonly limit: number;
  #active = 0;
  readonly #waiting: (() => void)[] = [];

  /** @param limit - tasks in flight at once (>= 1) */
  constructor(limit: number) {
    this.limit = Math.max(1, limit);
  }

  /** Runs `task` once a slot is free; resolves or rejects with its outcome. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#active >= this.limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#active += 1;
    try {
      return await task();
    } finally {
      // Hand the slot to the next waiter, or free it.
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#active -= 1;
    }
  }
}

/** Resolved backend settings (every default applied). */
export interface RunSettings {
  readonly namespace: string;
  readonly localQueue: string | undefined;
  readonly podGroup: string;
  readonly admissionTimeoutMs: number;
  readonly createConcurrency: number;
  readonly unschedulableGraceMs: number;
  readonly reconcileErrorGraceMs: number;
  readonly transientErrorGraceMs: number;
  readonly controllerStallMs: number;
  readonly closeTimeoutMs: number;
  readonly stopExtraMs: number;
  readonly watchTimeoutSeconds: number;
  /** How Kueue admits the roster (render.ts {@link AdmissionMode}). */
  readonly admission: AdmissionMode;
  /** `admission: "workload"`: placement of each ResourceFlavor, by name (the `flavors` setting). */
  readonly flavors: Readonly<Record<string, Placement>>;
}

/** What the backend knows about one member. */
export interface MemberState {
  readonly plan: MemberPlan;
  pod: Json | undefined;
  sandbox: Json | undefined;
  /** Pod/Sandbox seen deleted (after having existed). */
  podDeleted: boolean;
  sandboxDeleted: boolean;
  started: boolean;
  startedAtMs: number | undefined;
  readyAtMs: number | undefined;
  stopping: boolean;
  exited: boolean;
  scaleUpSeen: boolean;
  /** Timer of a problem that is fatal only if it persists (Unschedulable, reconcile error). */
  graceTimer: NodeJS.Timeout | undefined;
  graceKind: "unschedulable" | "reconcile" | undefined;
}

/**
 * Milestones of admission, in ms since `admit()` was called (`undefined` until reached). With `podGroup` and
 * `workloadGated` the roster is materialized before admission (`membersCreatedMs` < `admittedMs`), with
 * `workload` after it (the Sandboxes are created by the starts).
 */
export interface AdmissionTimings {
  /** The last of the roster's Sandbox creates returned. */
  sandboxesCreatedMs?: number;
  /** Every member's pod seen on the watch (first time). */
  allPodsObservedMs?: number;
  /** Every member created: its Sandbox create returned AND its pod seen (the later of the two above). */
  membersCreatedMs?: number;
  workloadObservedMs?: number;
  /** The roster's Workload `Admitted=True` seen on the watch. */
  admittedMs?: number;
  /** `admission: "workload"`/`"workloadGated"`: the Workload's create returned. */
  workloadCreatedMs?: number;
  /** `admission: "workload"`/`"workloadGated"`: every member Ready, `PodsReady=True` applied (ms since admit). */
  podsReadyMarkedMs?: number;
}

type Phase = "new" | "admitting" | "admitted" | "closing" | "closed";

/** One run on Kubernetes. */
export class Run {
  readonly client: KubeClient;
  readonly counters: ApiCounters;
  readonly ctx: RenderContext;
  readonly settings: RunSettings;
  readonly sink: MemberEventSink;
  readonly members = new Map<string, MemberState>();
  /** Members in roster order (the order `admit` received them). */
  roster: MemberState[] = [];
  phase: Phase = "new";
  watches: ListWatch[] = [];
  workload: Json | undefined;
  workloadVerdict: WorkloadVerdict | undefined;
  admission: AdmissionTimings = {};
  admitStartedAt = 0;
  secretCreated = false;
  sandboxesCreated = 0;
  /** Settles when admit()'s Sandbox creates are over (done, failed or aborted). */
  createsSettled: Promise<void> = Promise.resolve();
  /** The run-level failure already reported (Workload lost, watch fatal), if any. */
  runFailure: string | undefined;
  stopTimeouts = 0;
  leftovers: string[] = [];
  /** Where Kueue admitted the roster (kept after the Workload is gone). */
  admittedTo: { clusterQueue: string | null; flavors: Readonly<Record<string, string>> } | undefined;
  /** A problem found during admission, reported by `admit()` instead of as a member event. */
  admissionProblem: string | undefined;
  /** `admission: "workload"`/`"workloadGated"`: the Workload was created by this run (close() deletes it). */
  workloadCreated = false;
  /** `admission: "workload"`/`"workloadGated"`: placement of each role's pods, from the admitted flavors. */
  placements = new Map<string, Placement>();
  /** `admission: "workload"`: Sandbox creates of `start()` in flight or queued (close() lets them land first). */
  readonly startsInFlight = new Set<Promise<unknown>>();
  /** `admission: "workload"`/`"workloadGated"`: at most `createConcurrency` of `start()`'s writes in flight. */
  readonly createLimiter: Limiter;
  /** `admission: "workload"`/`"workloadGated"`: sets the Workload's PodsReady condition (workload.ts markPodsReady, installed by admit). */
  markPodsReady: (() => Promise<void>) | undefined;
  /** Members that reported ready. */
  readyCount = 0;
  #podsReadyMarked = false;
  /** Called after every event; admission waits and stop/close waits hook in here. */
  readonly #listeners = new Set<() => void>();
  readonly #memberListeners = new Map<string, Set<() => void>>();
  readonly #now: () => number;

  constructor(client: KubeClient, counters: ApiCounters, ctx: RenderContext, settings: RunSettings, sink: MemberEventSink, now: () => number) {
    this.client = client;
    this.counters = counters;
    this.ctx = ctx;
    this.settings = settings;
    this.sink = sink;
    this.#now = now;
    this.createLimiter = new Limiter(settings.createConcurrency);
  }

  /** Monotonic ms. */
  now(): number {
    return this.#now();
  }

  /** Whether the run uses Kueue (a LocalQueue is configured). */
  get kueue(): boolean {
    return this.settings.localQueue !== undefined;
  }

  /** Whether the runtime owns the roster's Workload (`admission: "workload"` or `"workloadGated"`, with a LocalQueue). */
  get workloadMode(): boolean {
    return ownsWorkload({ admission: this.settings.admission, localQueue: this.settings.localQueue });
  }

  /** `admission: "workload"`: each member's Sandbox is created by its `start()` (after admission), not by `admit()`. */
  get createsAtStart(): boolean {
    return this.workloadMode && this.settings.admission === "workload";
  }

  /** Registers the roster (once, at admit). */
  setRoster(plans: readonly MemberPlan[]): void {
    for (const plan of plans) {
      const state: MemberState = {
        plan,
        pod: undefined,
        sandbox: undefined,
        podDeleted: false,
        sandboxDeleted: false,
        started: false,
        startedAtMs: undefined,
        readyAtMs: undefined,
        stopping: false,
        exited: false,
        scaleUpSeen: false,
        graceTimer: undefined,
        graceKind: undefined,
      };
      this.members.set(plan.id, state);
      this.roster.push(state);
    }
  }

  /**
   * Subscribes to changes: of one member's pod/Sandbox when `member` is given (O(1) per event, so 1,000
   * pending stops cost nothing per event), else of anything. Returns the unsubscribe function.
   */
  onChange(listener: () => void, member?: string): () => void {
    if (member === undefined) {
      this.#listeners.add(listener);
      return () => this.#listeners.delete(listener);
    }
    let set = this.#memberListeners.get(member);
    if (set === undefined) {
      set = new Set();
      this.#memberListeners.set(member, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  #changed(member?: MemberState): void {
    if (member !== undefined) {
      const set = this.#memberListeners.get(member.plan.id);
      if (set !== undefined) for (const listener of [...set]) listener();
    }
    for (const listener of [...this.#listeners]) listener();
  }

  /** Members whose pod exists now. */
  podsPresent = 0;
  /** A pod that Kueue's webhook did not take under management (with a LocalQueue), if any. */
  unmanagedPod: Json | undefined;

  #memberOf(obj: Json): MemberState | undefined {
    const labels = (obj.metadata as Json | undefined)?.labels as Record<string, string> | undefined;
    if (labels?.[LABEL_RUN] !== this.ctx.runLabel) return undefined;
    const id = labels[LABEL_MEMBER];
    return id === undefined ? undefined : this.members.get(id);
  }

  /**
   * Counts one Sandbox create that returned; sets `sandboxesCreatedMs` at the last one, and
   * `membersCreatedMs` once every pod has been seen too.
   */
  sandboxCreated(): void {
    this.sandboxesCreated += 1;
    if (this.sandboxesCreated === this.roster.length) {
      this.admission.sandboxesCreatedMs ??= this.now() - this.admitStartedAt;
      this.noteCreated();
    }
  }

  /** Sets `membersCreatedMs` once every Sandbox create has returned and every pod has been seen. */
  noteCreated(): void {
    if (this.admission.sandboxesCreatedMs !== undefined && this.admission.allPodsObservedMs !== undefined) this.admission.membersCreatedMs ??= this.now() - this.admitStartedAt;
  }

  /** Pod watch handler. */
  onPod = (event: CacheEvent): void => {
    const state = this.#memberOf(event.object);
    if (state !== undefined) {
      if (event.type === "DELETED") {
        if (state.pod !== undefined) this.podsPresent -= 1;
        state.podDeleted = true;
        state.pod = undefined;
        if (this.#reportable(state)) this.#exit(state, `pod ${this.ctx.namespace}/${state.plan.id} was deleted`);
      } else {
        if (state.pod === undefined) this.podsPresent += 1;
        if (this.podsPresent === this.roster.length) {
          this.admission.allPodsObservedMs ??= this.now() - this.admitStartedAt;
          this.noteCreated();
        }
        state.pod = event.object;
        if (this.kueue && !this.workloadMode && this.unmanagedPod === undefined && !isKueueManaged(event.object)) this.unmanagedPod = event.object;
        this.evaluate(state);
      }
    }
    this.#changed(state);
  };

  /** Sandbox watch handler. */
  onSandbox = (event: CacheEvent): void => {
    const state = this.#memberOf(event.object);
    if (state !== undefined) {
      if (event.type === "DELETED") {
        state.sandboxDeleted = true;
        state.sandbox = undefined;
        if (this.#reportable(state)) this.#exit(state, `Sandbox ${this.ctx.namespace}/${state.plan.id} was deleted`);
      } else {
        state.sandbox = event.object;
        this.evaluate(state);
      }
    }
    this.#changed(state);
  };

  /** Workload watch handler (the field selector limits it to the roster's Workload). */
  onWorkload = (event: CacheEvent): void => {
    if (event.type === "DELETED") {
      this.workload = undefined;
      const ref = `Workload ${this.ctx.namespace}/${this.settings.podGroup}`;
      this.workloadVerdict = { kind: "lost", reason: `${ref} was deleted` };
    } else {
      this.workload = event.object;
      this.admission.workloadObservedMs ??= this.now() - this.admitStartedAt;
      this.workloadVerdict = classifyWorkload(event.object);
      if (this.workloadVerdict.kind === "admitted") {
        this.admission.admittedMs ??= this.now() - this.admitStartedAt;
        this.admittedTo ??= { clusterQueue: this.workloadVerdict.clusterQueue ?? null, flavors: this.workloadVerdict.flavors };
      }
    }
    if (this.workloadVerdict.kind === "lost" && this.phase === "admitted") this.failRun(this.workloadVerdict.reason);
    this.#changed();
  };

  /** Event watch handler (cluster-autoscaler TriggeredScaleUp). */
  onClusterEvent = (event: CacheEvent): void => {
    if (event.type === "DELETED" || event.object.reason !== EVENT_TRIGGERED_SCALE_UP) return;
    const involved = event.object.involvedObject as Json | undefined;
    const state = involved?.kind === "Pod" ? this.members.get(String(involved.name)) : undefined;
    if (state === undefined || state.scaleUpSeen) return;
    state.scaleUpSeen = true;
    if (state.graceKind === "unschedulable") this.#clearGrace(state);
  };

  /** Whether an event about this member may still be reported to the core. */
  #reportable(state: MemberState): boolean {
    return !state.exited && !state.stopping && (this.phase === "admitting" || this.phase === "admitted");
  }

  #clearGrace(state: MemberState): void {
    if (state.graceTimer !== undefined) clearTimeout(state.graceTimer);
    state.graceTimer = undefined;
    state.graceKind = undefined;
  }

  #armGrace(state: MemberState, kind: "unschedulable" | "reconcile", ms: number): void {
    if (state.graceKind === kind) return;
    this.#clearGrace(state);
    state.graceKind = kind;
    state.graceTimer = setTimeout(() => {
      state.graceTimer = undefined;
      state.graceKind = undefined;
      this.evaluate(state, kind);
      this.#changed(state);
    }, ms);
  }

  /**
   * Re-derives a member's condition from its pod and Sandbox and reports what changed.
   *
   * @param expired - a grace period of this kind just ran out: report the problem if it persists
   */
  evaluate(state: MemberState, expired?: "unschedulable" | "reconcile"): void {
    if (!this.#reportable(state)) {
      this.#clearGrace(state);
      return;
    }
    const pod = state.pod === undefined ? undefined : classifyPod(state.pod, this.kueue);
    if (pod?.kind === "exited") {
      this.#exit(state, pod.reason, pod.outputTail);
      return;
    }
    const sandbox = state.sandbox === undefined ? undefined : classifySandbox(state.sandbox);
    if (sandbox?.kind === "exited") {
      this.#exit(state, sandbox.reason);
      return;
    }
    if (pod?.kind === "unschedulable" && !state.scaleUpSeen) {
      if (expired === "unschedulable" || this.settings.unschedulableGraceMs === 0) {
        this.#exit(state, pod.reason);
        return;
      }
      this.#armGrace(state, "unschedulable", this.settings.unschedulableGraceMs);
    } else if (sandbox?.kind === "error") {
      if (expired === "reconcile") {
        this.#exit(state, sandbox.reason);
        return;
      }
      // A refusal (webhook denial, forbidden, invalid) will not go away by itself; a failed call (an
      // unreachable webhook, a timeout) usually does on the controller's next retry.
      this.#armGrace(state, "reconcile", sandbox.permanent ? this.settings.reconcileErrorGraceMs : this.settings.transientErrorGraceMs);
    } else {
      this.#clearGrace(state);
    }
    if (state.started && state.readyAtMs === undefined && pod?.kind === "ready" && sandbox?.kind === "ready") {
      state.readyAtMs = this.now();
      this.readyCount += 1;
      if (this.workloadMode && this.readyCount === this.roster.length) this.#markPodsReady();
      const node = (state.pod?.spec as Json | undefined)?.nodeName;
      const podIPs = (state.sandbox?.status as Json | undefined)?.podIPs;
      this.sink({
        kind: "ready",
        member: state.plan.id,
        detail: {
          ...(typeof node === "string" ? { node } : {}),
          ...(Array.isArray(podIPs) ? { podIPs } : {}),
        },
      });
    }
  }

  /** Applies `PodsReady=True` to the roster's Workload once (workload.ts); a failure fails the run. */
  #markPodsReady(): void {
    if (this.#podsReadyMarked || this.markPodsReady === undefined) return;
    this.#podsReadyMarked = true;
    this.markPodsReady().then(
      () => {
        this.admission.podsReadyMarkedMs = this.now() - this.admitStartedAt;
      },
      (error: unknown) => {
        if (this.phase === "admitted") {
          this.failRun(
            `cannot set PodsReady on Workload ${this.settings.namespace}/${this.settings.podGroup} (Kueue would evict it at its waitForPodsReady timeout): ${(error as Error).message}`,
          );
        }
      },
    );
  }

  #exit(state: MemberState, reason: string, outputTail?: string): void {
    this.#clearGrace(state);
    state.exited = true;
    if (this.phase === "admitting") {
      this.admissionProblem ??= `member ${state.plan.id}: ${reason}`;
      return;
    }
    // The exit code, when there is one, is in `reason`; it is not passed as `exitCode` because the
    // core's failure summary quotes `reason` only when no exit code is given, and on Kubernetes the
    // reason (which container, which kubelet/Kueue reason) is the more useful line.
    this.sink({ kind: "exited", member: state.plan.id, reason, ...(outputTail !== undefined ? { outputTail } : {}) });
  }

  /**
   * Reports a run-level failure (Workload lost, a watch that cannot go on) through one member: the
   * first started member that is not ready, else the first member not ready, else the first member.
   */
  failRun(reason: string): void {
    if (this.runFailure !== undefined) return;
    this.runFailure = reason;
    if (this.phase === "admitting") {
      this.admissionProblem ??= reason;
      return;
    }
    const live = this.roster.filter((s) => !s.exited && !s.stopping);
    const notReady = live.filter((s) => s.readyAtMs === undefined);
    // The core acts on exits of members it started; name a started one whenever there is one.
    const culprit = notReady.find((s) => s.started) ?? live.find((s) => s.started) ?? notReady[0] ?? live[0];
    if (culprit === undefined) return;
    const waiting = notReady.slice(0, 3).map((s) => `${s.plan.id} (${podProgress(s.pod)})`);
    const more = notReady.length > 3 ? ` and ${notReady.length - 3} more` : "";
    const detail = notReady.length > 0 ? `; not ready: ${waiting.join(", ")}${more}` : "";
    this.#clearGrace(culprit);
    culprit.exited = true;
    this.sink({ kind: "exited", member: culprit.plan.id, reason: oneLine(`${reason}${detail}`) });
  }

  /** Stops every grace timer (at close). */
  clearTimers(): void {
    for (const state of this.roster) this.#clearGrace(state);
  }
}

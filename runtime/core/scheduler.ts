/**
 * The cohort scheduler: admits the roster, starts members as a dependency graph, waits for the whole
 * roster to be ready, holds it, and tears it down in reverse dependency order, recording every step in
 * the ledger (runtime/README.md "Scheduler").
 *
 * Semantics:
 * - Event-driven. A member is scheduled the moment every member of every role it needs is ready, and
 *   started as soon as fewer than `concurrency` members are starting (started, not yet ready). The only
 *   timers are the deadlines, the hold, and the probes' retry pauses (<= 100 ms, ./probes.ts).
 * - Deadlines: a member must be ready within its role's `readiness.timeout` or `memberTimeout`, counted
 *   from its start; the roster within `startupTimeout`, counted from admission. Whichever fires first
 *   fails the run, naming the member (for the roster deadline: the earliest-started member not ready).
 * - Fail fast: the first failure (a member exits before it is ready or while the roster is held, a
 *   deadline, a start error, a liveness failure, a ledger write error) stops scheduling, aborts in-flight
 *   starts and probes, and tears down. The failing member's reason carries the last lines of its output.
 * - Restarts (`roles[].restart`, backends with `restarts: true`): a member that exits, or is not ready by
 *   its member deadline, BEFORE it is ready is stopped (its group cleaned up) and started again after
 *   `backoff * 2^(k-1)` (k = 1, 2, ...; capped, see spec.ts `restartDelayMs`), up to `attempts` times; it
 *   keeps its start slot meanwhile. The member deadline covers ONE attempt (re-armed at each start); the
 *   roster deadline covers all of them. A start error (e.g. command not found) and a probe that cannot
 *   run are not restarted. A member that exits after it was ready fails the run (no restarts then).
 * - Liveness (`roles[].liveness`, backends with `readiness: "probe"`): once ready, a member's tcp/http/exec
 *   readiness probe is re-run every `period` (the first attempt after a random part of the period, so
 *   members that became ready together are spread out) until teardown begins; `failureThreshold` failures
 *   in a row fail the run (`member-unhealthy`). `log` readiness has nothing to re-run: only an exit counts.
 * - Teardown in reverse dependency order: a role's members are stopped (SIGTERM, then SIGKILL after
 *   `stopGracePeriod`, by the backend) once every started member of every role that needs it is stopped;
 *   members of one role stop in parallel, and independent branches do not wait for each other.
 * - Interrupt: {@link Scheduler.interrupt} (the CLI calls it on SIGINT/SIGTERM/SIGHUP) ends the run with
 *   outcome `interrupted` and tears down as above; a second call, or a call during teardown, stops every
 *   remaining member at once with no grace (SIGKILL). The completion is written in every case.
 *
 * The scheduler never imports a backend SDK; the backend, the clock and the ledger arrive in one
 * {@link SchedulerConfig}.
 */
import { randomBytes } from "node:crypto";
import type { Backend, MemberEndpoint, MemberEvent, MemberHandle, MemberIdentity, MemberPlan } from "./backend";
import { formatDurationMs } from "./duration";
import { CohortError, MemberExitedError, MemberStartError, MemberStartTimeoutError } from "./errors";
import { memberIdentities, planMembers } from "./plan";
import { PortAllocator } from "./ports";
import { ProbeAbortedError, probeStatus, waitReady, watchLiveness, type LivenessFailure, type ProbeStatus } from "./probes";
import { restartDelayMs, type CompiledRole, type CompiledRunSpec } from "./spec";
import type { Outcome } from "./summary";

/** Monotonic time and timers. */
export interface Clock {
  /** Monotonic milliseconds (any origin). */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The real clock: `performance.now()` and Node timers. */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** How a run ended (./summary.ts). */
export type { Outcome };

/** The first failure of a run. `reason`'s first line is a one-line summary naming the member. */
export interface FirstFailure {
  readonly member: string | null;
  readonly reason: string;
}

/** The part of the ledger writer (runtime/core/ledger/writer.ts `LedgerWriter`) the scheduler uses. */
export interface LedgerSink {
  append(kind: string, fields?: Record<string, unknown> & { member?: string }): Promise<unknown>;
  redact(secret: string): void;
  complete(completion: { outcome: Outcome; firstFailure: FirstFailure | null; phasesMs: Record<string, number>; [key: string]: unknown }): Promise<unknown>;
}

/** Counts reported to {@link SchedulerConfig.onProgress} after every change. */
export interface RunProgress {
  readonly size: number;
  /** Members whose needs are met (queued or started). */
  readonly scheduled: number;
  /** Members the backend started. */
  readonly started: number;
  readonly ready: number;
  readonly stopped: number;
  readonly phase: "admission" | "startup" | "hold" | "teardown" | "done";
}

/** What {@link Scheduler.run} resolves with. */
export interface RunResult {
  readonly runId: string;
  readonly outcome: Outcome;
  readonly size: number;
  /** Members that became ready. */
  readonly readyCount: number;
  /** Admission -> the last member ready, in ms; null when the roster never was ready. */
  readonly timeToReadyMs: number | null;
  readonly firstFailure: FirstFailure | null;
  /** `admission`, `startup`, `hold`, `teardown` in ms. */
  readonly phasesMs: Readonly<Record<string, number>>;
  /** Set when the ledger could not be written or completed (the run's record is then incomplete). */
  readonly ledgerError: string | null;
  /** Signal (or reason) given to {@link Scheduler.interrupt}, if any. */
  readonly interruptedBy: string | null;
}

/** Everything the scheduler needs. */
export interface SchedulerConfig {
  readonly spec: CompiledRunSpec;
  /** `<name>-<yyyymmddThhmmssZ>-<6 hex>`. */
  readonly runId: string;
  /** Absolute run directory; members' directories are `<runDir>/members/<member>`. */
  readonly runDir: string;
  readonly backend: Backend;
  readonly ledger: LedgerSink;
  /** @default realClock */
  readonly clock?: Clock;
  /** Generates one secret token. @default 32 random bytes as 64 lower-case hex characters */
  readonly secretToken?: () => string;
  /** Called after every progress change (synchronously; keep it cheap). */
  readonly onProgress?: (progress: RunProgress) => void;
  /** Lines of member output quoted in failure reasons. @default 20 */
  readonly outputTailLines?: number;
  /** Extra JSON fields for the `run-started` record (e.g. the runtime's pid and start time). */
  readonly runStartedFields?: Readonly<Record<string, unknown>>;
  /** Extra JSON fields for `completion.json`, computed when the run ends (e.g. the runtime's peak RSS). */
  readonly completionFields?: () => Readonly<Record<string, unknown>>;
  /** Uniform random numbers in [0, 1), for spreading liveness probes over their period. @default Math.random */
  readonly random?: () => number;
}

type MemberPhase = "waiting" | "queued" | "starting" | "ready" | "stopping" | "stopped";

interface MemberState {
  readonly id: string;
  readonly role: RoleState;
  plan: MemberPlan | null;
  phase: MemberPhase;
  /** backend.start was called (so teardown must call stop). */
  startCalled: boolean;
  handle: MemberHandle | null;
  startPromise: Promise<void> | null;
  exited: boolean;
  exitEvent: Extract<MemberEvent, { kind: "exited" }> | null;
  deadline: unknown;
  probe: ProbeStatus | null;
  /** First start (the first attempt's). */
  scheduledAt: number;
  readyAt: number;
  /** Aborts the current attempt's start and probe (replaced per attempt; the run's stop aborts it too). */
  abort: AbortController;
  stopPromise: Promise<void> | null;
  /** Starts so far (1 = the first start; 1 + restarts). */
  attempt: number;
  /** A restart of this member is under way (the old attempt is being stopped, or the backoff runs). */
  restarting: boolean;
  /** The liveness loop of a ready member, if any; settles once the run's stop aborted it. */
  liveness: Promise<void> | null;
}

interface RoleState {
  readonly spec: CompiledRole;
  readonly members: MemberState[];
  /** Roles it needs that are not fully ready yet. */
  pendingNeeds: number;
  readyCount: number;
}

class StopRequest {
  promise: Promise<void>;
  resolve!: () => void;
  done = false;
  constructor() {
    this.promise = new Promise((resolve) => (this.resolve = resolve));
  }
  fire(): void {
    if (this.done) return;
    this.done = true;
    this.resolve();
  }
}

/**
 * Runs one cohort. Create it, hand {@link Scheduler.events} to the backend as its event sink, then call
 * {@link Scheduler.run} once.
 *
 * @throws {TypeError} from the constructor when the config is unusable (e.g. concurrency < 1)
 */
export class Scheduler {
  /** The sink to give the backend: member events (exited, ready) flow back here. */
  readonly events: (event: MemberEvent) => void;

  private readonly config: SchedulerConfig;
  private readonly spec: CompiledRunSpec;
  private readonly backend: Backend;
  private readonly ledger: LedgerSink;
  private readonly clock: Clock;
  private readonly tailLines: number;
  private readonly random: () => number;
  private readonly roles = new Map<string, RoleState>();
  private readonly members = new Map<string, MemberState>();
  private readonly queue: MemberState[] = [];
  private readonly runAbort = new AbortController();
  private readonly stopRequest = new StopRequest();
  private readonly allReady = new StopRequest();
  private phase: RunProgress["phase"] = "admission";
  private started = false;
  private ran = false;
  private starting = 0;
  private counts = { scheduled: 0, started: 0, ready: 0, stopped: 0 };
  private firstFailure: FirstFailure | null = null;
  private interruptedBy: string | null = null;
  private forced = false;
  private ledgerError: string | null = null;
  private readonly pendingAppends = new Set<Promise<unknown>>();
  /** Recording of a first failure whose output tail is still being read. */
  private pendingFailure: Promise<void> = Promise.resolve();
  private t0 = 0;
  private admittedAt: number | null = null;
  private rosterReadyAt: number | null = null;
  private startupDeadline: unknown = null;

  constructor(config: SchedulerConfig) {
    if (!Number.isInteger(config.spec.concurrency) || config.spec.concurrency < 1) {
      throw new TypeError(`SchedulerConfig.spec.concurrency must be an integer >= 1; got ${config.spec.concurrency}`);
    }
    if (config.outputTailLines !== undefined && (!Number.isInteger(config.outputTailLines) || config.outputTailLines < 0)) {
      throw new TypeError(`SchedulerConfig.outputTailLines must be an integer >= 0; got ${config.outputTailLines}`);
    }
    this.config = config;
    this.spec = config.spec;
    this.backend = config.backend;
    this.ledger = config.ledger;
    this.clock = config.clock ?? realClock;
    this.tailLines = config.outputTailLines ?? 20;
    this.random = config.random ?? Math.random;
    for (const role of this.spec.roles) {
      const state: RoleState = { spec: role, members: [], pendingNeeds: role.needs.length, readyCount: 0 };
      this.roles.set(role.name, state);
      for (const id of role.members) {
        const member: MemberState = {
          id,
          role: state,
          plan: null,
          phase: "waiting",
          startCalled: false,
          handle: null,
          startPromise: null,
          exited: false,
          exitEvent: null,
          deadline: null,
          probe: null,
          scheduledAt: 0,
          readyAt: 0,
          abort: new AbortController(),
          stopPromise: null,
          attempt: 0,
          restarting: false,
          liveness: null,
        };
        state.members.push(member);
        this.members.set(id, member);
      }
    }
    this.events = (event) => this.onEvent(event);
  }

  /**
   * Ends the run early (SIGINT/SIGTERM to the runtime): outcome `interrupted` unless a failure came
   * first. A second call, or a call once teardown has begun, stops every remaining member at once
   * without grace.
   *
   * @param signal - e.g. `SIGTERM`; recorded in `run-interrupted`
   */
  interrupt(signal: string): void {
    if (!this.started) {
      this.interruptedBy ??= signal;
      this.stopRequest.fire();
      return;
    }
    if (this.phase === "teardown" || this.stopRequest.done) {
      this.interruptedBy ??= signal;
      this.force();
      return;
    }
    this.interruptedBy = signal;
    this.append("run-interrupted", { signal });
    this.requestStop();
  }

  /**
   * Runs the cohort to completion: admission, startup, hold, teardown, completion. Never rejects for a
   * member failure or an interrupt (see {@link RunResult.outcome}); rejects only when called twice.
   */
  async run(): Promise<RunResult> {
    if (this.ran) throw new Error("Scheduler.run() may be called once");
    this.ran = true;
    this.started = true;
    this.t0 = this.clock.now();
    const phasesMs: Record<string, number> = { admission: 0, startup: 0, hold: 0, teardown: 0 };
    this.append("run-started", {
      runId: this.config.runId,
      backend: this.backend.name,
      size: this.spec.size,
      concurrency: this.spec.concurrency,
      roles: this.spec.roles.map((role) => ({ name: role.name, replicas: role.replicas, level: role.level, needs: role.needs })),
      ...this.config.runStartedFields,
    });
    if (this.interruptedBy !== null) {
      this.append("run-interrupted", { signal: this.interruptedBy });
      this.requestStop();
    }
    try {
      this.checkRestartable();
      if (!this.stopRequest.done) await this.prepare();
      if (!this.stopRequest.done) await this.admit();
      phasesMs.admission = this.since(this.t0);
      if (!this.stopRequest.done) {
        this.phase = "startup";
        this.progress();
        this.startupDeadline = this.clock.setTimeout(() => this.onStartupDeadline(), this.spec.startupTimeoutMs);
        for (const role of this.roles.values()) if (role.pendingNeeds === 0) this.schedule(role);
        this.pump();
        await Promise.race([this.allReady.promise, this.stopRequest.promise]);
        this.clock.clearTimeout(this.startupDeadline);
      }
      phasesMs.startup = this.admittedAt === null ? 0 : (this.rosterReadyAt ?? this.clock.now()) - this.admittedAt;
      if (this.allReady.done && !this.stopRequest.done) await this.hold(phasesMs);
    } catch (error) {
      this.fail(null, `runtime error: ${(error as Error).message}`);
    }
    this.requestStop();
    await this.pendingFailure;
    const teardownStart = this.clock.now();
    await this.teardown();
    phasesMs.teardown = this.clock.now() - teardownStart;
    for (const key of Object.keys(phasesMs)) phasesMs[key] = round3(phasesMs[key]!);
    const timeToReadyMs = this.rosterReadyAt !== null && this.admittedAt !== null ? round3(this.rosterReadyAt - this.admittedAt) : null;
    this.phase = "done";
    this.progress();
    // Every record answered before the outcome is decided: a teardown record that could not be written fails it.
    await this.settleAppends();
    const outcome: Outcome = this.firstFailure !== null ? "failed" : this.interruptedBy !== null ? "interrupted" : "succeeded";
    try {
      await this.ledger.complete({
        outcome,
        firstFailure: this.firstFailure,
        phasesMs,
        size: this.spec.size,
        readyCount: this.counts.ready,
        timeToReadyMs,
        ...(this.interruptedBy !== null ? { interruptedBy: this.interruptedBy } : {}),
        ...this.config.completionFields?.(),
      });
    } catch (error) {
      this.ledgerError ??= `completion not written: ${(error as Error).message}`;
      this.firstFailure ??= { member: null, reason: this.ledgerError };
    }
    return {
      runId: this.config.runId,
      // Never `succeeded` without a ledger that says so: a failed append or completion fails the run.
      outcome: this.firstFailure !== null ? "failed" : outcome,
      size: this.spec.size,
      readyCount: this.counts.ready,
      timeToReadyMs,
      firstFailure: this.firstFailure,
      phasesMs,
      ledgerError: this.ledgerError,
      interruptedBy: this.interruptedBy,
    };
  }

  // ---- preparation and admission ------------------------------------------------------------

  /** A RunSpec that asks for restarts on a backend that cannot restart members fails before anything starts. */
  private checkRestartable(): void {
    if (this.backend.restarts === true) return;
    const role = this.spec.roles.find((r) => r.restart.attempts > 0);
    if (role === undefined) return;
    this.fail(
      null,
      `roles[${role.index}].restart: the ${this.backend.name} backend cannot restart members (role ${role.name} asks for ${role.restart.attempts}); remove restart or set restart.attempts: 0`,
    );
  }

  /** Secrets (registered for redaction before anything could carry them), endpoints, plans. */
  private async prepare(): Promise<void> {
    const token = this.config.secretToken ?? (() => randomBytes(32).toString("hex"));
    const secrets = new Map<string, Record<string, string>>();
    for (const role of this.spec.roles) {
      if (role.secretEnv.length === 0) continue;
      for (const id of role.members) {
        const values: Record<string, string> = {};
        for (const name of role.secretEnv) {
          const value = token();
          this.ledger.redact(value);
          values[name] = value;
        }
        secrets.set(id, values);
      }
    }
    const identities = memberIdentities(this.spec);
    const endpoints = await this.endpoints(identities);
    const plans = planMembers({ spec: this.spec, runId: this.config.runId, runDir: this.config.runDir, endpoints, secrets });
    for (const plan of plans) this.members.get(plan.id)!.plan = plan;
  }

  private async endpoints(identities: readonly MemberIdentity[]): Promise<ReadonlyMap<string, MemberEndpoint>> {
    if (this.backend.endpoints !== undefined) return this.backend.endpoints(identities, this.runAbort.signal);
    const ports = new PortAllocator();
    const out = new Map<string, MemberEndpoint>();
    try {
      for (const identity of identities) {
        if (identity.wantsPort) out.set(identity.id, { host: ports.host, port: await ports.reserve(identity.id) });
      }
    } finally {
      await ports.releaseAll();
    }
    return out;
  }

  private async admit(): Promise<void> {
    const started = this.clock.now();
    if (this.backend.admit !== undefined) {
      const plans = [...this.members.values()].map((member) => member.plan!);
      const timer = this.clock.setTimeout(() => {
        this.fail(null, `the roster was not admitted within ${formatDurationMs(this.spec.admissionTimeoutMs)} (admissionTimeout)`);
      }, this.spec.admissionTimeoutMs);
      try {
        await Promise.race([this.backend.admit(plans, this.runAbort.signal), this.stopRequest.promise]);
      } catch (error) {
        if (!this.stopRequest.done) this.fail(null, `admission failed: ${(error as Error).message}`);
      } finally {
        this.clock.clearTimeout(timer);
      }
      if (this.stopRequest.done) return;
    }
    this.admittedAt = this.clock.now();
    this.append("roster-admitted", { admissionMs: round3(this.admittedAt - started), size: this.spec.size });
  }

  // ---- startup ------------------------------------------------------------------------------

  /**
   * Queues every member of a role whose needs are all ready, and starts as many as the concurrency
   * allows BEFORE writing their `member-scheduled` records: the starts are not delayed by a burst of
   * ledger appends (each costs a serialization and a SHA-256), and `member-scheduled` still precedes
   * `member-started` (which is written only after the backend's start resolved).
   */
  private schedule(role: RoleState): void {
    for (const member of role.members) {
      member.phase = "queued";
      this.counts.scheduled++;
      this.queue.push(member);
    }
    this.pump();
    for (const member of role.members) this.append("member-scheduled", { member: member.id, role: role.spec.name, level: role.spec.level });
    this.progress();
  }

  /** Starts queued members while fewer than `concurrency` are starting. */
  private pump(): void {
    while (this.queue.length > 0 && this.starting < this.spec.concurrency && !this.stopRequest.done) {
      const member = this.queue.shift()!;
      this.starting++;
      member.phase = "starting";
      member.startCalled = true;
      member.scheduledAt = this.clock.now();
      member.attempt = 1;
      this.armDeadline(member);
      member.startPromise = this.startMember(member);
    }
  }

  /** The member deadline of the current attempt (`memberTimeout` or `readiness.timeout`, from this start). */
  private armDeadline(member: MemberState): void {
    member.deadline = this.clock.setTimeout(() => this.onMemberDeadline(member), member.role.spec.memberTimeoutMs);
  }

  /** One start attempt: backend start, then the readiness probe (or the backend's `ready` event). */
  private async startMember(member: MemberState): Promise<void> {
    const plan = member.plan!;
    const startCalledAt = this.clock.now();
    // This attempt's signal: aborted by the run's stop, or by a restart of the member (then it is not a failure).
    const signal = member.abort.signal;
    let handle: MemberHandle;
    try {
      handle = await this.backend.start(plan, signal);
    } catch (error) {
      if (signal.aborted && (this.stopRequest.done || member.restarting)) return;
      const message = error instanceof Error ? error.message : String(error);
      const failure = error instanceof CohortError ? error : new MemberStartError(member.id, this.backend.name, message, { cause: error });
      this.fail(member, `member ${member.id} could not be started: ${failure.message}`);
      return;
    }
    member.handle = handle;
    if (member.attempt === 1) this.counts.started++;
    this.append("member-started", {
      member: member.id,
      ...handle.detail,
      port: plan.port,
      endpoint: `${handle.endpoint.host}:${handle.endpoint.port}`,
      startMs: round3(this.clock.now() - startCalledAt),
      ...(member.attempt > 1 ? { attempt: member.attempt } : {}),
    });
    this.progress();
    if (member.exited) {
      this.onExitedBeforeReady(member);
      return;
    }
    if (this.stopRequest.done) return;
    if ((this.backend.readiness ?? "probe") === "backend") return; // a `ready` event will come
    const readiness = plan.readiness ?? member.role.spec.readiness;
    const status = probeStatus(readiness, handle);
    member.probe = status;
    try {
      await waitReady(readiness, handle, status, signal, this.clock);
    } catch (error) {
      if (error instanceof ProbeAbortedError || signal.aborted) return;
      this.fail(member, `member ${member.id}: readiness probe cannot run: ${(error as Error).message}`);
      return;
    }
    if (signal.aborted) return; // a restart of this member began while the last attempt was answering
    this.markReady(member, { probe: status.probe, attempts: status.attempts });
  }

  // ---- restarts -------------------------------------------------------------------------------

  /** Whether a member that failed before it was ready may be started again (restarts left, run not stopping). */
  private canRestart(member: MemberState): boolean {
    return !this.stopRequest.done && member.phase === "starting" && member.attempt - 1 < member.role.spec.restart.attempts;
  }

  /**
   * Starts `member` again: aborts its current attempt, stops what is left of it (the leader may be gone
   * and its group not), waits the backoff, writes `member-restarted` and starts it with a new member
   * deadline. A stop of the run at any point ends the restart (teardown stops the member).
   *
   * @param cause - why the attempt failed: `reason` one line, exit code and signal when it exited
   */
  private restartMember(member: MemberState, cause: { reason: string; exitCode: number | null; signal: string | null }): void {
    if (member.restarting) return;
    member.restarting = true;
    this.clock.clearTimeout(member.deadline);
    member.abort.abort();
    const previous = member.startPromise;
    const attempts = member.role.spec.restart.attempts;
    const delayMs = restartDelayMs(member.role.spec.restart, member.attempt);
    member.startPromise = (async () => {
      await previous;
      if (this.stopRequest.done) return;
      const stopStarted = this.clock.now();
      try {
        await this.backend.stop(member.id, this.spec.stopGraceMs);
      } catch (error) {
        this.fail(member, `member ${member.id} could not be stopped for a restart: ${(error as Error).message}`);
        return;
      }
      const cleanupMs = this.clock.now() - stopStarted;
      if (this.stopRequest.done) return;
      let timer: unknown = null;
      await Promise.race([new Promise<void>((resolve) => (timer = this.clock.setTimeout(resolve, delayMs))), this.stopRequest.promise]);
      this.clock.clearTimeout(timer);
      if (this.stopRequest.done) return;
      member.attempt++;
      member.handle = null;
      member.exited = false;
      member.exitEvent = null;
      member.probe = null;
      member.abort = new AbortController();
      member.restarting = false;
      this.append("member-restarted", {
        member: member.id,
        attempt: member.attempt,
        maxAttempts: attempts + 1,
        previousReason: cause.reason,
        exitCode: cause.exitCode,
        signal: cause.signal,
        backoffMs: delayMs,
        cleanupMs: round3(cleanupMs),
      });
      this.armDeadline(member);
      await this.startMember(member);
    })();
  }

  /** ` after N attempts` when the member was started more than once, else "". */
  private attemptsSuffix(member: MemberState): string {
    return member.attempt > 1 ? ` after ${member.attempt} attempts` : "";
  }

  // ---- liveness -------------------------------------------------------------------------------

  /** Starts the liveness loop of a member that just became ready (when its role and the backend allow one). */
  private watchLiveness(member: MemberState): void {
    const liveness = member.role.spec.liveness;
    const handle = member.handle;
    const status = member.probe;
    if (liveness === null || handle === null || status === null || (this.backend.readiness ?? "probe") === "backend") return;
    const readiness = member.plan!.readiness ?? member.role.spec.readiness;
    const signal = member.abort.signal;
    const options = { periodMs: liveness.periodMs, failureThreshold: liveness.failureThreshold, firstDelayMs: Math.floor(this.random() * liveness.periodMs) };
    member.liveness = watchLiveness(readiness, handle, options, signal, this.clock).then(
      (failure) => this.onUnhealthy(member, status, options, failure),
      (error: unknown) => {
        if (error instanceof ProbeAbortedError || signal.aborted) return;
        this.fail(member, `member ${member.id}: liveness probe cannot run: ${(error as Error).message}`);
      },
    );
  }

  private onUnhealthy(member: MemberState, status: ProbeStatus, options: { periodMs: number; failureThreshold: number }, failure: LivenessFailure): void {
    if (this.stopRequest.done || member.phase !== "ready" || member.exited) return;
    this.append("member-unhealthy", {
      member: member.id,
      probe: status.probe,
      target: status.target,
      failures: failure.failures,
      attempts: failure.attempts,
      lastError: failure.lastError,
      periodMs: options.periodMs,
      failureThreshold: options.failureThreshold,
    });
    const when = this.phase === "hold" ? "during hold" : "after it was ready, before the roster was ready";
    this.failWithTail(
      member,
      `member ${member.id} failed its liveness probe ${when}: ${failure.failures} ${status.target} probes in a row failed (period ${formatDurationMs(options.periodMs)}, failureThreshold ${options.failureThreshold}); last: ${failure.lastError}`,
    );
  }

  private markReady(member: MemberState, detail: Record<string, unknown>): void {
    if (member.phase !== "starting" || this.stopRequest.done || member.restarting) return;
    this.clock.clearTimeout(member.deadline);
    member.phase = "ready";
    member.readyAt = this.clock.now();
    this.starting--;
    this.counts.ready++;
    this.append("member-ready", {
      member: member.id,
      ...detail,
      startToReadyMs: round3(member.readyAt - member.scheduledAt),
      ...(member.attempt > 1 ? { startAttempt: member.attempt } : {}),
    });
    this.watchLiveness(member);
    const role = member.role;
    role.readyCount++;
    if (role.readyCount === role.spec.replicas) {
      for (const name of role.spec.dependants) {
        const dependant = this.roles.get(name)!;
        dependant.pendingNeeds--;
        if (dependant.pendingNeeds === 0) this.schedule(dependant);
      }
    }
    this.progress();
    if (this.counts.ready === this.spec.size) {
      this.rosterReadyAt = member.readyAt;
      this.append("roster-ready", { readyCount: this.counts.ready, timeToReadyMs: round3(this.rosterReadyAt - (this.admittedAt ?? this.t0)) });
      this.allReady.fire();
      return;
    }
    this.pump();
  }

  // ---- events from the backend ----------------------------------------------------------------

  private onEvent(event: MemberEvent): void {
    const member = this.members.get(event.member);
    if (member === undefined || this.phase === "done") return;
    if (event.kind === "ready") {
      if ((this.backend.readiness ?? "probe") === "backend") this.markReady(member, { probe: "backend", ...event.detail });
      return;
    }
    if (event.kind !== "exited" || member.exited) return;
    member.exited = true;
    member.exitEvent = event;
    this.append("member-exited", { member: member.id, exitCode: event.exitCode ?? null, signal: event.signal ?? null, reason: event.reason });
    if (member.phase === "stopping" || member.phase === "stopped") return;
    if (member.phase === "starting") {
      if (member.restarting) return; // the attempt being replaced, stopped by the restart
      if (member.handle !== null) this.onExitedBeforeReady(member);
      // else: startMember sees `exited` once start() resolves
      return;
    }
    if (member.phase === "ready" && !this.stopRequest.done) {
      const when = this.phase === "hold" ? "during hold" : "after it was ready, before the roster was ready";
      this.failExited(member, `member ${member.id} exited ${when}${exitSuffix(event)}`);
    }
  }

  private onExitedBeforeReady(member: MemberState): void {
    if (this.stopRequest.done || member.restarting) return;
    const event = member.exitEvent!;
    const summary = `member ${member.id} exited before it was ready${exitSuffix(event)}`;
    if (this.canRestart(member)) {
      this.restartMember(member, { reason: `exited before it was ready${exitSuffix(event)}`, exitCode: event.exitCode ?? null, signal: event.signal ?? null });
      return;
    }
    this.failExited(member, `${summary}${this.attemptsSuffix(member)}`);
  }

  private failExited(member: MemberState, summary: string): void {
    const event = member.exitEvent!;
    const tail = lastLines(event.outputTail ?? "", this.tailLines);
    const error = new MemberExitedError(member.id, this.backend.name, summary, {
      exitCode: event.exitCode ?? null,
      signal: event.signal ?? null,
      outputTail: tail,
    });
    this.fail(member, error.message, tail);
  }

  // ---- deadlines ------------------------------------------------------------------------------

  private onMemberDeadline(member: MemberState): void {
    if (member.phase !== "starting" || this.stopRequest.done || member.restarting) return;
    const role = member.role.spec;
    const notReady = `not ready within ${formatDurationMs(role.memberTimeoutMs)} (${role.memberTimeoutField})`;
    if (this.canRestart(member)) {
      this.restartMember(member, { reason: `${notReady}${probeSuffix(member)}`, exitCode: null, signal: null });
      return;
    }
    const error = new MemberStartTimeoutError(
      member.id,
      this.backend.name,
      role.memberTimeoutField,
      role.memberTimeoutMs,
      `member ${member.id} was ${notReady}${this.attemptsSuffix(member)}${probeSuffix(member)}`,
    );
    this.failWithTail(member, error.message);
  }

  private onStartupDeadline(): void {
    if (this.stopRequest.done || this.allReady.done) return;
    const notReady = [...this.members.values()].filter((member) => member.phase !== "ready");
    const starting = notReady.filter((member) => member.phase === "starting").sort((a, b) => a.scheduledAt - b.scheduledAt);
    const blamed = starting[0] ?? notReady[0]!;
    const names = notReady.slice(0, 5).map((member) => member.id);
    const more = notReady.length > names.length ? ` and ${notReady.length - names.length} more` : "";
    const state = blamed.phase === "starting" ? "" : ` (${blamed.phase === "waiting" ? "never started: its needs were not ready" : "still queued for a start slot"})`;
    const error = new MemberStartTimeoutError(
      blamed.id,
      this.backend.name,
      "startupTimeout",
      this.spec.startupTimeoutMs,
      `member ${blamed.id} was not ready within ${formatDurationMs(this.spec.startupTimeoutMs)} (startupTimeout)${state}${probeSuffix(blamed)}; ${notReady.length} of ${this.spec.size} members not ready: ${names.join(", ")}${more}`,
    );
    this.failWithTail(blamed, error.message);
  }

  /** Fails the run for `member` with its output tail (read from the backend) appended. */
  private failWithTail(member: MemberState, summary: string): void {
    // Claim the failure synchronously, so no later event can take the "first failure" slot.
    if (!this.claimFailure(member, summary)) return;
    this.pendingFailure = (async () => {
      let tail: string;
      try {
        tail = lastLines((await member.handle?.outputTail?.(this.tailLines)) ?? "", this.tailLines);
      } catch {
        tail = "";
      }
      this.recordFailure(member, summary, tail);
    })();
  }

  // ---- failure, stop, teardown ----------------------------------------------------------------

  /** Records the first failure and stops the run. Later failures are recorded per member only. */
  private fail(member: MemberState | null, summary: string, tail = ""): void {
    if (!this.claimFailure(member, summary)) return;
    this.recordFailure(member, summary, tail);
  }

  private claimFailure(member: MemberState | null, summary: string): boolean {
    if (this.firstFailure !== null || this.stopRequest.done) {
      if (member !== null && this.phase !== "teardown") this.append("member-failed", { member: member.id, reason: summary, secondary: true });
      return false;
    }
    this.firstFailure = { member: member?.id ?? null, reason: summary };
    this.requestStop();
    return true;
  }

  private recordFailure(member: MemberState | null, summary: string, tail: string): void {
    const reason = tail === "" ? summary : `${summary}\n${tail}`;
    this.firstFailure = { member: member?.id ?? null, reason };
    if (member !== null) this.append("member-failed", { member: member.id, reason: summary, outputTail: tail });
    this.append("run-failed", { ...(member !== null ? { member: member.id } : {}), reason });
  }

  private requestStop(): void {
    if (this.stopRequest.done) return;
    this.stopRequest.fire();
    this.clock.clearTimeout(this.startupDeadline);
    this.queue.length = 0;
    for (const member of this.members.values()) {
      this.clock.clearTimeout(member.deadline);
      member.abort.abort();
    }
    this.runAbort.abort();
  }

  private async hold(phasesMs: Record<string, number>): Promise<void> {
    this.phase = "hold";
    this.progress();
    const start = this.clock.now();
    this.append("hold-started", { holdMs: this.spec.holdMs });
    let timer: unknown = null;
    await Promise.race([new Promise<void>((resolve) => (timer = this.clock.setTimeout(resolve, this.spec.holdMs))), this.stopRequest.promise]);
    this.clock.clearTimeout(timer);
    phasesMs.hold = this.clock.now() - start;
    this.append("hold-ended", { heldMs: round3(phasesMs.hold), early: this.stopRequest.done });
  }

  /** Stops every member whose start was called, dependants before the roles they need. */
  private async teardown(): Promise<void> {
    this.phase = "teardown";
    this.progress();
    this.append("teardown-started", {});
    // In-flight starts (and restarts) were aborted; wait for them to settle so every started member is
    // known, and for liveness loops to let go of their sockets.
    await Promise.all([...this.members.values()].flatMap((member) => [member.startPromise, member.liveness]));
    const roleDone = new Map<string, Promise<void>>();
    const teardownRole = (name: string): Promise<void> => {
      const existing = roleDone.get(name);
      if (existing !== undefined) return existing;
      const role = this.roles.get(name)!;
      const promise = (async () => {
        await Promise.all(role.spec.dependants.map((dependant) => teardownRole(dependant)));
        await Promise.all(role.members.map((member) => this.stopMember(member, this.forced ? 0 : this.spec.stopGraceMs)));
      })();
      roleDone.set(name, promise);
      return promise;
    };
    await Promise.all(this.spec.roles.map((role) => teardownRole(role.name)));
    try {
      await this.backend.close?.();
    } catch (error) {
      this.teardownFailure(null, `backend ${this.backend.name} could not release run resources: ${(error as Error).message}`);
    }
    if (this.backend.stats !== undefined) {
      try {
        this.append("backend-stats", { backend: this.backend.name, stats: this.backend.stats() });
      } catch (error) {
        this.append("backend-stats", { backend: this.backend.name, error: (error as Error).message });
      }
    }
    this.append("teardown-finished", { stopped: this.counts.stopped });
  }

  private stopMember(member: MemberState, graceMs: number): Promise<void> {
    if (!member.startCalled) return Promise.resolve();
    if (member.stopPromise !== null) {
      if (graceMs === 0) void this.backend.stop(member.id, 0).catch(() => undefined);
      return member.stopPromise;
    }
    member.phase = "stopping";
    this.append("member-stopping", { member: member.id, graceMs });
    member.stopPromise = (async () => {
      try {
        await this.backend.stop(member.id, graceMs);
        member.phase = "stopped";
        this.counts.stopped++;
        this.append("member-stopped", { member: member.id });
      } catch (error) {
        const message = `member ${member.id} could not be stopped: ${(error as Error).message}`;
        this.append("member-stopped", { member: member.id, error: message });
        this.teardownFailure(member.id, message);
      }
      this.progress();
    })();
    return member.stopPromise;
  }

  /** A failure during teardown: the run's outcome becomes `failed` if nothing failed before. */
  private teardownFailure(member: string | null, message: string): void {
    if (this.firstFailure !== null) return;
    this.firstFailure = { member, reason: message };
    this.append("run-failed", { ...(member !== null ? { member } : {}), reason: message });
  }

  /** Stops every remaining member now, without grace (second signal). */
  private force(): void {
    if (this.forced) return;
    this.forced = true;
    // Members already stopping get SIGKILL now; the others are stopped with no grace when teardown
    // reaches them (teardown first waits for in-flight starts, so no started member is missed).
    for (const member of this.members.values()) {
      if (member.stopPromise !== null && member.phase !== "stopped") void this.backend.stop(member.id, 0).catch(() => undefined);
    }
  }

  // ---- ledger and progress ----------------------------------------------------------------------

  /** Appends without blocking the scheduler; a failed write fails the run (once) and is reported. */
  private append(kind: string, fields: Record<string, unknown> & { member?: string }): void {
    const promise = this.ledger.append(kind, fields).then(
      () => undefined,
      (error: unknown) => {
        if (this.ledgerError === null) {
          this.ledgerError = `ledger append (${kind}) failed: ${(error as Error).message}`;
          // A run whose records are lost did not succeed, whenever the write failed (in teardown too: a full disk
          // after the hold); a signal's interruption gives way to it, because the ledger cannot say how it ended.
          if (this.firstFailure === null) this.firstFailure = { member: null, reason: this.ledgerError };
          if (!this.stopRequest.done) this.requestStop();
        }
      },
    );
    this.pendingAppends.add(promise);
    void promise.finally(() => this.pendingAppends.delete(promise));
  }

  private async settleAppends(): Promise<void> {
    while (this.pendingAppends.size > 0) await Promise.all([...this.pendingAppends]);
  }

  private progress(): void {
    this.config.onProgress?.({ size: this.spec.size, ...this.counts, phase: this.phase });
  }

  private since(start: number): number {
    return this.clock.now() - start;
  }
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

function exitSuffix(event: Extract<MemberEvent, { kind: "exited" }>): string {
  const cause = event.cause ? `: ${event.cause}` : "";
  if (event.signal) return ` (killed by ${event.signal})${cause}`;
  if (event.exitCode !== undefined && event.exitCode !== null) return ` (exit code ${event.exitCode})${cause}`;
  return event.reason ? ` (${event.reason})` : "";
}

function probeSuffix(member: MemberState): string {
  const probe = member.probe;
  if (probe === null) return "";
  const last = probe.lastError === null ? "" : `: ${probe.lastError}`;
  return `; last ${probe.target} probe${last} (${probe.attempts} attempt${probe.attempts === 1 ? "" : "s"})`;
}

function lastLines(text: string, lines: number): string {
  if (lines === 0 || text === "") return "";
  const all = text.replace(/\n+$/, "").split("\n");
  return all.slice(-lines).join("\n");
}

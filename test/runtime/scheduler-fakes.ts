/**
 * In-memory test doubles for the scheduler tests: a Backend whose members "start" and become ready
 * after configured delays (real timers, a few ms), a LedgerSink that keeps records in memory, and a
 * manual clock with a Backend scripted on it (exec probe answers, exits per start attempt).
 * They implement the real interfaces; the scheduler under test is the real one.
 */
import type { Backend, MemberEndpoint, MemberEventSink, MemberHandle, MemberIdentity, MemberPlan } from "../../runtime/core/backend";
import type { Clock, FirstFailure, LedgerSink, Outcome } from "../../runtime/core/scheduler";

/** What a fake member does. */
export type FakeBehaviour =
  | { kind: "ready"; startMs: number; readyMs: number }
  | { kind: "exit-before-ready"; afterMs: number; exitCode: number; output: string }
  | { kind: "never-ready" }
  | { kind: "start-throws"; message: string }
  | { kind: "exit-after-ready"; readyMs: number; exitAfterMs: number };

export interface FakeLogEntry {
  readonly what: "start" | "started" | "ready" | "stop" | "stopped";
  readonly member: string;
  readonly at: number;
  /** Members starting (start called, not ready, not stopped) right after this entry. */
  readonly starting: number;
}

export class FakeBackend implements Backend {
  readonly name = "fake";
  readonly readiness = "backend" as const;
  events: MemberEventSink = () => undefined;
  readonly log: FakeLogEntry[] = [];
  readonly plans = new Map<string, MemberPlan>();
  maxStarting = 0;
  private starting = new Set<string>();
  private readonly timers = new Map<string, NodeJS.Timeout[]>();
  private readonly running = new Set<string>();

  constructor(private readonly behaviour: (member: string) => FakeBehaviour) {}

  async available(): Promise<void> {}

  async endpoints(members: readonly MemberIdentity[]): Promise<ReadonlyMap<string, MemberEndpoint>> {
    return new Map(members.map((member, i) => [member.id, { host: "fake.invalid", port: 10_000 + i }]));
  }

  private note(what: FakeLogEntry["what"], member: string): void {
    this.log.push({ what, member, at: performance.now(), starting: this.starting.size });
  }

  private later(member: string, ms: number, fn: () => void): void {
    const list = this.timers.get(member) ?? [];
    list.push(setTimeout(fn, ms));
    this.timers.set(member, list);
  }

  async start(plan: MemberPlan, signal: AbortSignal): Promise<MemberHandle> {
    this.plans.set(plan.id, plan);
    this.starting.add(plan.id);
    this.maxStarting = Math.max(this.maxStarting, this.starting.size);
    this.note("start", plan.id);
    const b = this.behaviour(plan.id);
    if (b.kind === "start-throws") {
      this.starting.delete(plan.id);
      throw new Error(b.message);
    }
    if (b.kind === "ready") await new Promise((resolve) => setTimeout(resolve, b.startMs));
    if (signal.aborted) {
      this.starting.delete(plan.id);
      throw new Error("aborted");
    }
    this.running.add(plan.id);
    this.note("started", plan.id);
    const ready = (): void => {
      this.starting.delete(plan.id);
      this.note("ready", plan.id);
      this.events({ kind: "ready", member: plan.id });
    };
    const exit = (code: number, output = ""): void => {
      this.starting.delete(plan.id);
      this.running.delete(plan.id);
      this.events({ kind: "exited", member: plan.id, reason: `exit code ${code}`, exitCode: code, signal: null, outputTail: output });
    };
    if (b.kind === "ready") this.later(plan.id, b.readyMs, ready);
    if (b.kind === "exit-before-ready") this.later(plan.id, b.afterMs, () => exit(b.exitCode, b.output));
    if (b.kind === "exit-after-ready") {
      this.later(plan.id, b.readyMs, ready);
      this.later(plan.id, b.readyMs + b.exitAfterMs, () => exit(0, "bye"));
    }
    return { member: plan.id, endpoint: { host: "fake.invalid", port: plan.port }, detail: { fake: true }, outputTail: async () => `tail of ${plan.id}` };
  }

  async stop(member: string, _graceMs: number): Promise<void> {
    for (const timer of this.timers.get(member) ?? []) clearTimeout(timer);
    this.starting.delete(member);
    this.note("stop", member);
    await new Promise((resolve) => setTimeout(resolve, 1));
    if (this.running.delete(member)) {
      this.events({ kind: "exited", member, reason: "killed by SIGTERM", exitCode: null, signal: "SIGTERM" });
    }
    this.note("stopped", member);
  }
}

export interface MemoryRecord {
  readonly seq: number;
  readonly kind: string;
  readonly member?: string;
  readonly [key: string]: unknown;
}

export class MemoryLedger implements LedgerSink {
  readonly records: MemoryRecord[] = [];
  readonly secrets: string[] = [];
  completion: { outcome: Outcome; firstFailure: FirstFailure | null; phasesMs: Record<string, number>; [key: string]: unknown } | null = null;

  async append(kind: string, fields: Record<string, unknown> = {}): Promise<unknown> {
    if (this.completion !== null) throw new Error(`append(${kind}) after complete`);
    const record = { seq: this.records.length + 1, kind, ...fields };
    this.records.push(record);
    return record;
  }

  redact(secret: string): void {
    this.secrets.push(secret);
  }

  async complete(completion: { outcome: Outcome; firstFailure: FirstFailure | null; phasesMs: Record<string, number> }): Promise<unknown> {
    if (this.completion !== null) throw new Error("complete() twice");
    this.completion = completion;
    return completion;
  }

  kinds(member?: string): string[] {
    return this.records.filter((r) => member === undefined || r.member === member).map((r) => r.kind);
  }
}

/**
 * A manual {@link Clock}: time moves only when a timer is fired. {@link FakeClock.run} drives a run to its
 * end: it lets every pending promise and I/O callback settle, then fires the earliest timer (moving `now`
 * to its time), and repeats.
 */
export class FakeClock implements Clock {
  private t = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Fires the earliest timer (ties: the first armed). @returns false when no timer is armed */
  step(): boolean {
    let next: [number, { at: number; fn: () => void }] | undefined;
    for (const entry of this.timers) if (next === undefined || entry[1].at < next[1].at) next = entry;
    if (next === undefined) return false;
    this.timers.delete(next[0]);
    this.t = next[1].at;
    next[1].fn();
    return true;
  }

  /** Drives `promise` to settlement, firing timers whenever nothing else is left to run. */
  async run<T>(promise: Promise<T>, maxSteps = 100_000): Promise<T> {
    let settled = false;
    void promise.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let i = 0; i < maxSteps; i++) {
      for (let k = 0; k < 3; k++) await new Promise((resolve) => setImmediate(resolve));
      if (settled) return promise;
      if (!this.step()) {
        await new Promise((resolve) => setTimeout(resolve, 1));
        if (!settled && this.timers.size === 0) throw new Error(`FakeClock.run: nothing left to run at ${this.t} ms and the promise has not settled`);
      }
    }
    throw new Error(`FakeClock.run: more than ${maxSteps} steps`);
  }
}

/** What one scripted member does, per start attempt (1-based). */
export interface ScriptedMember {
  /** Exit code of the `n`-th (1-based) exec probe of start `attempt`. @default always 0 */
  exec?(attempt: number, n: number): number;
  /** When start `attempt` exits by itself: ms after its start and the exit code; null: it keeps running. */
  exit?(attempt: number): { afterMs: number; code: number } | null;
}

/** One call the {@link ScriptedBackend} saw, at fake-clock time `at`. */
export interface ScriptedCall {
  readonly what: "start" | "stop" | "exec";
  readonly member: string;
  readonly attempt: number;
  readonly at: number;
}

/**
 * A Backend on a {@link FakeClock}: members "run" until stopped or until their scripted exit; exec probes
 * answer with scripted exit codes. `readiness: "probe"` (default: the core probes through `exec`) or
 * `"backend"` (a `ready` event right after each start; exec is then never called by the core).
 * `restarts` as given (default true).
 */
export class ScriptedBackend implements Backend {
  readonly name = "scripted";
  readonly readiness: "probe" | "backend";
  readonly restarts: boolean;
  events: MemberEventSink = () => undefined;
  readonly calls: ScriptedCall[] = [];
  private readonly attempts = new Map<string, number>();
  private readonly running = new Map<string, unknown>();

  constructor(
    private readonly clock: FakeClock,
    private readonly script: (member: string) => ScriptedMember,
    options: { readiness?: "probe" | "backend"; restarts?: boolean } = {},
  ) {
    this.readiness = options.readiness ?? "probe";
    this.restarts = options.restarts ?? true;
  }

  async available(): Promise<void> {}

  async endpoints(members: readonly MemberIdentity[]): Promise<ReadonlyMap<string, MemberEndpoint>> {
    return new Map(members.map((member, i) => [member.id, { host: "scripted.invalid", port: 10_000 + i }]));
  }

  /** Calls of one kind (and member). */
  callsOf(what: ScriptedCall["what"], member?: string): ScriptedCall[] {
    return this.calls.filter((c) => c.what === what && (member === undefined || c.member === member));
  }

  async start(plan: MemberPlan, _signal: AbortSignal): Promise<MemberHandle> {
    if (this.running.has(plan.id)) throw new Error(`${plan.id} is running (start twice without stop)`);
    const attempt = (this.attempts.get(plan.id) ?? 0) + 1;
    this.attempts.set(plan.id, attempt);
    this.calls.push({ what: "start", member: plan.id, attempt, at: this.clock.now() });
    const script = this.script(plan.id);
    const exit = script.exit?.(attempt) ?? null;
    const timer =
      exit === null
        ? null
        : this.clock.setTimeout(() => {
            this.running.delete(plan.id);
            this.events({ kind: "exited", member: plan.id, reason: `exit code ${exit.code}`, exitCode: exit.code, signal: null, outputTail: `attempt ${attempt} output` });
          }, exit.afterMs);
    this.running.set(plan.id, timer);
    if (this.readiness === "backend") this.clock.setTimeout(() => this.running.has(plan.id) && this.events({ kind: "ready", member: plan.id }), 0);
    let execs = 0;
    return {
      member: plan.id,
      endpoint: { host: "scripted.invalid", port: plan.port },
      outputTail: async () => `tail of ${plan.id} attempt ${attempt}`,
      exec: async () => {
        execs++;
        this.calls.push({ what: "exec", member: plan.id, attempt, at: this.clock.now() });
        return { exitCode: script.exec?.(attempt, execs) ?? 0 };
      },
    };
  }

  async stop(member: string, _graceMs: number): Promise<void> {
    this.calls.push({ what: "stop", member, attempt: this.attempts.get(member) ?? 0, at: this.clock.now() });
    if (!this.running.has(member)) return;
    this.clock.clearTimeout(this.running.get(member));
    this.running.delete(member);
    this.events({ kind: "exited", member, reason: "killed by SIGTERM", exitCode: null, signal: "SIGTERM" });
  }
}

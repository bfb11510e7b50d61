/**
 * In-memory test doubles for the scheduler tests: a Backend whose members "start" and become ready
 * after configured delays (real timers, a few ms), and a LedgerSink that keeps records in memory.
 * They implement the real interfaces; the scheduler under test is the real one.
 */
import type { Backend, MemberEndpoint, MemberEventSink, MemberHandle, MemberIdentity, MemberPlan } from "../../runtime/core/backend";
import type { FirstFailure, LedgerSink, Outcome } from "../../runtime/core/scheduler";

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

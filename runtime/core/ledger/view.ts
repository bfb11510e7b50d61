/**
 * One run directory read for the reports (`cohort ledger report`, `cohort ledger junit`): the ledger
 * files, the verification status, the per-member timeline and critical path (computed once, by
 * ./show.ts `timelineOf`), each member's failure with its output tail, and the run's markers.
 *
 * Unlike `ledger show`, a ledger that does NOT verify is still read when it parses: the reports show the
 * verification error prominently (a CI job wants to see what it can of a damaged run) instead of refusing.
 */
import * as path from "node:path";
import { LedgerVerifyError } from "../errors";
import { LEDGER_FILES, type Completion, type LedgerManifest, type LedgerRecord } from "./format";
import { parseManifest, readLedger, readOptional, splitLines } from "./read";
import { timelineOf, type LedgerTimeline } from "./show";
import { verifyLedger, type VerifyReport } from "./verify";

/** The verification status of a run directory: the report of `verifyLedger`, or the error it threw. */
export type Verification = { readonly ok: true; readonly report: VerifyReport } | { readonly ok: false; readonly error: string };

/** A member's failure as its first `member-failed` record has it. */
export interface MemberFailure {
  /** One-line summary, e.g. `member web-1 exited before it was ready (exit code 3)`. */
  readonly reason: string;
  /** The member's last output lines (may be empty). Untrusted text. */
  readonly outputTail: string;
  /** `elapsedMs` of the record (ms from run start). */
  readonly atMs: number;
}

/** Run-level markers, ms from run start (`elapsedMs` of the first record of each kind); absent when not reached. */
export interface RunMarkers {
  readonly admittedMs?: number;
  readonly rosterReadyMs?: number;
  readonly holdStartedMs?: number;
  readonly holdEndedMs?: number;
  readonly teardownStartedMs?: number;
  readonly finishedMs?: number;
}

/**
 * What a member's records say beyond {@link TimelineMember} (all ms from run start, `elapsedMs` of the record),
 * for the report's phases: restart attempts, liveness failure, stopping.
 */
export interface MemberEvents {
  /** First `member-started` (the first attempt; `TimelineMember.startedMs` is the last). */
  readonly firstStartedMs?: number;
  /** Each `member-restarted`, in order: `attempt` is the attempt it begins (2, 3, ...). */
  readonly restarts: readonly { readonly atMs: number; readonly attempt: number; readonly previousReason: string }[];
  /** First `member-unhealthy`: its liveness probe failed `failureThreshold` times in a row. */
  readonly unhealthy?: { readonly atMs: number; readonly lastError: string };
  /** First `member-stopping` (teardown asked it to stop). */
  readonly stoppingMs?: number;
}

/** Everything the reports render. */
export interface RunView {
  readonly manifest: LedgerManifest;
  readonly records: readonly LedgerRecord[];
  /** `null`: no completion.json (the run crashed or is still running). */
  readonly completion: Completion | null;
  readonly verification: Verification;
  readonly timeline: LedgerTimeline;
  /** Members in the roster (completion.size, else the sum of the spec's replicas, else the timeline's rows). */
  readonly size: number;
  /** Members that became ready (completion.readyCount, else counted from the records). */
  readonly readyCount: number;
  /** Admission to roster ready in ms (completion.timeToReadyMs), `null` when never ready or unknown. */
  readonly timeToReadyMs: number | null;
  /** First `member-failed` of each member that has one (secondary failures included). */
  readonly failures: ReadonlyMap<string, MemberFailure>;
  /** Restarts, liveness failure and stopping of each member that has any record (by member id). */
  readonly events: ReadonlyMap<string, MemberEvents>;
  /** The run's first failure: completion.firstFailure, else the last `run-failed` record; `null` if none. */
  readonly firstFailure: { readonly member: string | null; readonly reason: string } | null;
  readonly markers: RunMarkers;
  /** `elapsedMs` of the last record (ms): the run's length so far. */
  readonly lastMs: number;
}

/**
 * Read a run directory for the reports.
 * @param runDir - a run directory (`<artifacts>/<runId>`)
 * @throws {LedgerVerifyError} only when the ledger cannot be read at all (no manifest, an unparsable line
 *   other than a torn final one); a ledger that parses but does not verify, or whose final line is torn, is
 *   returned with `verification.ok === false`.
 */
export async function loadRunView(runDir: string): Promise<RunView> {
  let verification: Verification;
  try {
    verification = { ok: true, report: await verifyLedger(runDir) };
  } catch (error) {
    verification = { ok: false, error: (error as Error).message };
  }
  const { manifest, records, completion } = await readForView(runDir);
  return runViewOf(manifest, records, completion, verification);
}

/**
 * The pure part of {@link loadRunView}: a run's view from its parsed ledger (no file is read).
 * @param manifest - manifest.json, parsed
 * @param records - records.ndjson in order (complete lines only)
 * @param completion - completion.json, or `null` when there is none
 * @param verification - what `verifyLedger` said
 */
export function runViewOf(manifest: LedgerManifest, records: readonly LedgerRecord[], completion: Completion | null, verification: Verification): RunView {
  const timeline = timelineOf(manifest.spec, records);

  const failures = new Map<string, MemberFailure>();
  const markers: { -readonly [K in keyof RunMarkers]: RunMarkers[K] } = {};
  let runFailed: { member: string | null; reason: string } | null = null;
  let readyRecords = 0;
  type Mutable = {
    firstStartedMs?: number;
    restarts: { atMs: number; attempt: number; previousReason: string }[];
    unhealthy?: { atMs: number; lastError: string };
    stoppingMs?: number;
  };
  const events = new Map<string, Mutable>();
  const eventsOf = (member: string): Mutable => {
    let e = events.get(member);
    if (e === undefined) events.set(member, (e = { restarts: [] }));
    return e;
  };
  for (const r of records) {
    if (typeof r.member === "string") {
      const e = eventsOf(r.member);
      if (r.kind === "member-started") e.firstStartedMs ??= r.elapsedMs;
      else if (r.kind === "member-restarted")
        e.restarts.push({
          atMs: r.elapsedMs,
          attempt: typeof r.attempt === "number" ? r.attempt : e.restarts.length + 2,
          previousReason: typeof r.previousReason === "string" ? r.previousReason : "",
        });
      else if (r.kind === "member-unhealthy") e.unhealthy ??= { atMs: r.elapsedMs, lastError: typeof r.lastError === "string" ? r.lastError : "" };
      else if (r.kind === "member-stopping") e.stoppingMs ??= r.elapsedMs;
    }
    switch (r.kind) {
      case "member-failed":
        if (typeof r.member === "string" && !failures.has(r.member))
          failures.set(r.member, {
            reason: typeof r.reason === "string" ? r.reason : "failed",
            outputTail: typeof r.outputTail === "string" ? r.outputTail : "",
            atMs: r.elapsedMs,
          });
        break;
      case "member-ready":
        readyRecords++;
        break;
      case "run-failed":
        runFailed = { member: typeof r.member === "string" ? r.member : null, reason: typeof r.reason === "string" ? r.reason : "failed" };
        break;
      case "roster-admitted":
        markers.admittedMs ??= r.elapsedMs;
        break;
      case "roster-ready":
        markers.rosterReadyMs ??= r.elapsedMs;
        break;
      case "hold-started":
        markers.holdStartedMs ??= r.elapsedMs;
        break;
      case "hold-ended":
        markers.holdEndedMs ??= r.elapsedMs;
        break;
      case "teardown-started":
        markers.teardownStartedMs ??= r.elapsedMs;
        break;
      case "teardown-finished":
      case "run-finished":
        markers.finishedMs ??= r.elapsedMs;
        break;
    }
  }
  const specSize = specMembers(manifest.spec);
  const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
  return {
    manifest,
    records,
    completion,
    verification,
    timeline,
    size: num(completion?.size) ?? (specSize > 0 ? specSize : timeline.members.length),
    readyCount: num(completion?.readyCount) ?? readyRecords,
    timeToReadyMs: num(completion?.timeToReadyMs) ?? null,
    failures,
    events,
    firstFailure: completion?.firstFailure ?? runFailed,
    markers,
    lastMs: records.at(-1)?.elapsedMs ?? 0,
  };
}

/**
 * {@link readLedger}, except that a torn final line (a crash in the middle of a write) is left out instead of
 * refused: the reports show a crashed run as far as its complete records go (verification still reports the
 * torn line, and `cohort ledger recover` cuts it).
 */
async function readForView(runDir: string): ReturnType<typeof readLedger> {
  try {
    return await readLedger(runDir);
  } catch (error) {
    if (!(error instanceof LedgerVerifyError) || error.code !== "torn-final-line" || error.byteOffset === undefined) throw error;
    const dir = path.resolve(runDir);
    const manifest = parseManifest(dir, (await readOptional(path.join(dir, LEDGER_FILES.manifest)))!);
    const bytes = ((await readOptional(path.join(dir, LEDGER_FILES.records))) ?? Buffer.alloc(0)).subarray(0, error.byteOffset);
    const records: LedgerRecord[] = [];
    for (const line of splitLines(dir, bytes, false)) records.push(line.value);
    return { manifest, records, completion: null };
  }
}

/** Sum of `replicas` (default 1) over the spec's roles; 0 when the spec has none. */
function specMembers(spec: unknown): number {
  const roles = (spec as { roles?: unknown } | null)?.roles;
  if (!Array.isArray(roles)) return 0;
  return roles.reduce((n: number, r: unknown) => {
    const replicas = (r as { replicas?: unknown } | null)?.replicas;
    return n + (typeof replicas === "number" && Number.isInteger(replicas) && replicas >= 0 ? replicas : 1);
  }, 0);
}

/** A one-line statement of the outcome: `succeeded`, `failed`, `interrupted (SIGTERM)` or `unfinished: ...`. */
export function outcomeText(view: RunView): string {
  if (view.completion === null) return "unfinished: no completion.json (the run crashed or is still running)";
  const by = view.completion.interruptedBy;
  return view.completion.outcome === "interrupted" && typeof by === "string" ? `interrupted (${by})` : view.completion.outcome;
}

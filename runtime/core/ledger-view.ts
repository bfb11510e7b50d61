/**
 * One run directory read for the reports (`cohort ledger report`, `cohort ledger junit`): the ledger
 * files, the verification status, the per-member timeline and critical path (computed once, by
 * ./ledger-show.ts `timelineOf`), each member's failure with its output tail, and the run's markers.
 *
 * Unlike `ledger show`, a ledger that does NOT verify is still read when it parses: the reports show the
 * verification error prominently (a CI job wants to see what it can of a damaged run) instead of refusing.
 */
import * as path from "node:path";
import { LedgerVerifyError } from "./errors";
import { LEDGER_FILES, parseManifest, readLedger, readOptional, splitLines, type Completion, type LedgerManifest, type LedgerRecord } from "./ledger";
import { timelineOf, type LedgerTimeline } from "./ledger-show";
import { verifyLedger, type VerifyReport } from "./ledger-verify";

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
  readonly teardownStartedMs?: number;
  readonly finishedMs?: number;
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
  const timeline = timelineOf(manifest.spec, records);

  const failures = new Map<string, MemberFailure>();
  const markers: { -readonly [K in keyof RunMarkers]: RunMarkers[K] } = {};
  let runFailed: { member: string | null; reason: string } | null = null;
  let readyRecords = 0;
  for (const r of records) {
    switch (r.kind) {
      case "member-failed":
        if (typeof r.member === "string" && !failures.has(r.member))
          failures.set(r.member, { reason: typeof r.reason === "string" ? r.reason : "failed", outputTail: typeof r.outputTail === "string" ? r.outputTail : "", atMs: r.elapsedMs });
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

/**
 * Human-readable views of a run ledger (`cohort ledger show DIR`): a per-member timeline, the
 * critical path of the start-up graph, and the phase durations from completion.json.
 *
 * Members are derived from the manifest's RunSpec (`spec.roles[].name`, `.replicas` (default 1),
 * `.needs`): role `r` with `n` replicas has members `r-0` … `r-(n-1)`, and a member depends on every
 * member of every role its role needs. Members that appear only in records are listed too.
 */
import type { LedgerRecord } from "./format";
import { readLedger } from "./read";
import { verifyLedger } from "./verify";

/** One member's timeline; offsets are `elapsedMs` of its records (ms since run start). */
export interface TimelineMember {
  member: string;
  role: string;
  /** First `member-scheduled`. */
  scheduledMs?: number;
  /** Last `member-started` (the attempt that counts, when retried). */
  startedMs?: number;
  /** First `member-ready`. */
  readyMs?: number;
  /** Last `member-stopped`. */
  stoppedMs?: number;
  /** `reason` of the first `member-failed`. */
  failed?: string;
  /** Number of `member-started` records (start attempts). */
  attempts?: number;
}

/** Timeline of a run. */
export interface LedgerTimeline {
  /** Sorted by start (startedMs, then scheduledMs; members never started last), ties in spec order. */
  members: TimelineMember[];
  /**
   * The chain that decided when the roster was ready: it ends at the member whose `member-ready` is
   * latest, and each earlier link is the dependency (of the next) whose ready time was latest.
   * `members` runs from the root to that member; `readyMs` is its ready time. Empty (and 0) when no
   * member became ready.
   */
  criticalPath: { members: string[]; readyMs: number };
}

interface RoleInfo {
  name: string;
  replicas: number;
  needs: string[];
}

function rolesOf(spec: unknown): RoleInfo[] {
  const roles = (spec as { roles?: unknown } | null)?.roles;
  if (!Array.isArray(roles)) return [];
  const out: RoleInfo[] = [];
  for (const r of roles) {
    if (r === null || typeof r !== "object" || typeof (r as { name?: unknown }).name !== "string") continue;
    const { name, replicas, needs } = r as { name: string; replicas?: unknown; needs?: unknown };
    out.push({
      name,
      replicas: typeof replicas === "number" && Number.isInteger(replicas) && replicas >= 0 ? replicas : 1,
      needs: Array.isArray(needs) ? needs.filter((x): x is string => typeof x === "string") : [],
    });
  }
  return out;
}

/**
 * Build the per-member timeline and critical path of a run directory.
 * @throws {LedgerVerifyError} when the ledger does not verify ({@link verifyLedger}: hash chain, seq, digests) or cannot be read.
 */
export async function ledgerTimeline(runDir: string): Promise<LedgerTimeline> {
  // A timeline of a tampered ledger would present invented records as fact: verify first.
  await verifyLedger(runDir);
  const { manifest, records } = await readLedger(runDir);
  return timelineOf(manifest.spec, records);
}

/** @internal Pure part of {@link ledgerTimeline}. */
export function timelineOf(spec: unknown, records: readonly LedgerRecord[]): LedgerTimeline {
  const roles = rolesOf(spec);
  const byName = new Map<string, TimelineMember & { order: number }>();
  const deps = new Map<string, string[]>();
  const membersOfRole = new Map<string, string[]>();
  for (const role of roles) {
    const names: string[] = [];
    for (let i = 0; i < role.replicas; i++) {
      const member = `${role.name}-${i}`;
      names.push(member);
      byName.set(member, { member, role: role.name, order: byName.size });
    }
    membersOfRole.set(role.name, names);
  }
  for (const role of roles) {
    const d = role.needs.flatMap((n) => membersOfRole.get(n) ?? []);
    for (const m of membersOfRole.get(role.name) ?? []) deps.set(m, d);
  }

  for (const r of records) {
    if (typeof r.member !== "string") continue;
    let m = byName.get(r.member);
    if (!m) {
      m = { member: r.member, role: r.member.replace(/-\d+$/, ""), order: byName.size };
      byName.set(r.member, m);
    }
    switch (r.kind) {
      case "member-scheduled":
        m.scheduledMs ??= r.elapsedMs;
        break;
      case "member-started":
        m.startedMs = r.elapsedMs;
        m.attempts = (m.attempts ?? 0) + 1;
        break;
      case "member-ready":
        m.readyMs ??= r.elapsedMs;
        break;
      case "member-stopped":
        m.stoppedMs = r.elapsedMs;
        break;
      case "member-failed":
        m.failed ??= typeof r.reason === "string" ? r.reason : "failed";
        break;
    }
  }

  const all = [...byName.values()];
  const later = (a: number | undefined, b: number | undefined): number => (a === undefined ? (b === undefined ? 0 : 1) : b === undefined ? -1 : a - b);
  const sorted = [...all].sort((a, b) => later(a.startedMs, b.startedMs) || later(a.scheduledMs, b.scheduledMs) || a.order - b.order);

  // Critical path: end at the latest ready member, walk back through the latest-ready dependency.
  const latest = (names: Iterable<string>): (TimelineMember & { order: number }) | undefined => {
    let best: (TimelineMember & { order: number }) | undefined;
    for (const n of names) {
      const m = byName.get(n);
      if (m?.readyMs === undefined) continue;
      if (!best || m.readyMs > best.readyMs! || (m.readyMs === best.readyMs && m.order < best.order)) best = m;
    }
    return best;
  };
  const path: string[] = [];
  const end = latest(all.map((m) => m.member));
  const seen = new Set<string>();
  for (let cur = end; cur && !seen.has(cur.member); cur = latest(deps.get(cur.member) ?? [])) {
    seen.add(cur.member);
    path.unshift(cur.member);
  }

  return {
    members: sorted.map(({ order: _order, ...m }) => m),
    criticalPath: { members: path, readyMs: end?.readyMs ?? 0 },
  };
}

function ms(v: number | undefined): string {
  return v === undefined ? "-" : v.toFixed(1);
}

/** Render rows as aligned columns (2 spaces apart); `right[i]` right-aligns column i; no trailing spaces. */
function table(rows: string[][], right: boolean[]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 && !right[i] ? cell : right[i] ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd(),
  );
}

/**
 * Render a run directory for a terminal: header (run id, profile, backend, outcome, record count,
 * first failure), one aligned line per member sorted by start with scheduled/started/ready/stopped
 * offsets in ms from run start (plus a STARTS column when a member was restarted, STARTED being its last
 * start, and a FAILED column when a member failed), the critical path with
 * each link's ready time, and the phase durations from completion.json. Ends with a newline.
 * @throws {LedgerVerifyError} when the ledger does not verify ({@link verifyLedger}) or cannot be read.
 */
export async function showLedger(runDir: string): Promise<string> {
  // Refuse, never render, a ledger that does not verify (hash chain, seq, digests): throws LedgerVerifyError.
  await verifyLedger(runDir);
  const { manifest, records, completion } = await readLedger(runDir);
  const t = timelineOf(manifest.spec, records);
  const out: string[] = [];
  out.push(`run ${manifest.runId} (profile ${manifest.profile}, backend ${manifest.backend})`);
  out.push(completion ? `outcome ${completion.outcome}; ${records.length} records` : `outcome none: no completion.json (crashed or still running); ${records.length} records`);
  if (completion?.firstFailure) {
    // The reason is its summary line, then the member's output tail (runtime/README.md "CLI"): the tail is
    // labelled and quoted as `cohort run` quotes it on stderr, so it cannot be read as part of the timeline.
    const [summary = "", ...tail] = completion.firstFailure.reason.split("\n");
    out.push(`first failure: ${completion.firstFailure.member ?? "(run)"}: ${summary}`);
    const lines = tail.filter((line, i) => line !== "" || i < tail.length - 1);
    if (lines.length > 0) out.push("last output:", ...lines.map((line) => `  | ${line}`));
  }
  out.push("");

  out.push("members (ms from run start):");
  const anyFailed = t.members.some((m) => m.failed !== undefined);
  // Restarted members (roles[].restart): STARTED is the last start, STARTS how many there were.
  const anyRestarted = t.members.some((m) => (m.attempts ?? 0) > 1);
  const head = ["MEMBER", "ROLE", "SCHEDULED", "STARTED", ...(anyRestarted ? ["STARTS"] : []), "READY", "STOPPED", ...(anyFailed ? ["FAILED"] : [])];
  const rows = t.members.map((m) => [
    m.member,
    m.role,
    ms(m.scheduledMs),
    ms(m.startedMs),
    ...(anyRestarted ? [String(m.attempts ?? 0)] : []),
    ms(m.readyMs),
    ms(m.stoppedMs),
    ...(anyFailed ? [m.failed ?? ""] : []),
  ]);
  const right = [false, false, true, true, ...(anyRestarted ? [true] : []), true, true, false];
  out.push(...table([head, ...rows], right).map((l) => `  ${l}`));
  out.push("");

  if (t.criticalPath.members.length === 0) {
    out.push("critical path: none (no member became ready)");
  } else {
    out.push(`critical path: ${t.criticalPath.members.join(" -> ")} (last member ready at ${ms(t.criticalPath.readyMs)} ms)`);
    const ready = new Map(t.members.map((m) => [m.member, m.readyMs]));
    const links = t.criticalPath.members.map((m) => [m, "ready", `${ms(ready.get(m))} ms`]);
    out.push(...table(links, [false, false, true]).map((l) => `  ${l}`));
  }

  if (completion) {
    out.push("");
    const phases = Object.entries(completion.phasesMs);
    if (phases.length === 0) out.push("phases: none recorded");
    else {
      out.push("phases (ms):");
      out.push(
        ...table(
          phases.map(([k, v]) => [k, ms(v)]),
          [false, true],
        ).map((l) => `  ${l}`),
      );
    }
  }
  return `${out.join("\n")}\n`;
}

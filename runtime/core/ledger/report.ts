/**
 * `cohort ledger report DIR [--out FILE]`: one self-contained HTML file for a run directory (inline CSS
 * and an inline SVG Gantt chart; no script, no external asset, nothing fetched), default `DIR/report.html`.
 *
 * Sections: the run's identity and outcome (run id, profile, backend, outcome, size, ready count, time to
 * ready, created/completed, spec digest, tool versions), the ledger's verification status, the phases,
 * the first failure with its output tail, the critical path (from ./show.ts, the same computation
 * as `ledger show`) against the time to ready, the timeline as a Gantt chart, per-role statistics (members,
 * ready, failed, restarted, unhealthy, start-to-ready quantiles) and the members as a table.
 *
 * Timeline phases of a member (ms from run start, `elapsedMs` of its records): queued = scheduled -> first
 * start; starting = first start -> ready (red when it failed before ready; each failed attempt of a restarted
 * member shaded, a tick at each `member-restarted`); ready = ready -> stopping, with held = the part inside
 * hold-started -> hold-ended; failed = red from a failure after ready; a tick at `member-unhealthy` (liveness);
 * stopping = member-stopping -> member-stopped; stopped = a dark tick. Critical-path rows are outlined and
 * starred; admission, roster-ready, hold, hold-ended and teardown are dashed markers.
 *
 * Large runs stay readable: above {@link COLLAPSE_MEMBERS} members (or for a role over
 * {@link COLLAPSE_ROLE_MEMBERS}) each role with 2+ members is ONE row (median phase boundaries as the bar,
 * min..max of first start and of ready as thin whiskers, a tick per failure, restart and liveness failure,
 * counts in the label), the critical path's members (and the first failure's) are still drawn one by one, and
 * the member table becomes one `<details>` per role (open when the role has a failure). Every text from the ledger is HTML-escaped (member
 * output is untrusted). A run without completion.json (crashed or still running) is rendered with what
 * its records say, and says so.
 */
import { outcomeText, type RunView } from "./view";
import type { TimelineMember } from "./show";
import { escapeControls } from "../text";

/**
 * Escapes `& < > " '` for HTML text and attribute values, and writes C0 control characters other than tab and
 * newline (and DEL) as the visible `\xHH` ({@link escapeControls}): member output holds ESC and NUL bytes.
 */
export function escapeHtml(text: string): string {
  return escapeControls(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

const fmtMs = (v: number | undefined | null): string => (v === undefined || v === null ? "–" : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${v.toFixed(1)} ms`);

/** Quantile of sorted numbers (nearest rank). */
function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

const STYLE = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:8px;overflow:auto;max-height:24em;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}th{font-weight:600}
table.grid td,table.grid th{border-bottom:1px solid #eaeef2;padding:2px 8px}td.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;font-weight:600;color:#fff}
.succeeded{background:#1a7f37}.failed{background:#cf222e}.interrupted{background:#9a6700}.unfinished{background:#6e7781}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}.warn{background:#fff8c5;border:1px solid #d4a72c;padding:8px}
svg text{font:11px ui-monospace,Menlo,monospace;fill:#1b1f24}svg .crit text{font-weight:700}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}
`;

const COLORS = {
  queued: "#d0d7de",
  starting: "#d4a72c",
  retried: "#ffaba8",
  restart: "#bc4c00",
  ready: "#2da44e",
  held: "#116329",
  unhealthy: "#bf3989",
  failed: "#cf222e",
  stopping: "#8c959f",
  stopped: "#24292f",
  crit: "#0550ae",
  marker: "#8250df",
};

/** Above this many members in the run, every role with 2 or more members is drawn as one summary row. */
export const COLLAPSE_MEMBERS = 200;
/** A role with more members than this is drawn as one summary row whatever the run's size. */
export const COLLAPSE_ROLE_MEMBERS = 100;

/** Whether the report draws `role` (with `roleSize` members, in a run of `runSize`) as one summary row. */
export function collapsesRole(runSize: number, roleSize: number): boolean {
  return roleSize >= 2 && (runSize > COLLAPSE_MEMBERS || roleSize > COLLAPSE_ROLE_MEMBERS);
}

/** min / median / max of some numbers (ms), or `null` when there are none. */
function spread(values: readonly (number | undefined)[]): { min: number; median: number; max: number; n: number } | null {
  const v = values.filter((x): x is number => x !== undefined).sort((a, b) => a - b);
  return v.length === 0 ? null : { min: v[0]!, median: quantile(v, 0.5), max: v.at(-1)!, n: v.length };
}

/** Members in timeline order grouped by role (roles in the order their first member appears). */
function byRole(members: readonly TimelineMember[]): Map<string, TimelineMember[]> {
  const out = new Map<string, TimelineMember[]>();
  for (const m of members) {
    const list = out.get(m.role);
    if (list === undefined) out.set(m.role, [m]);
    else list.push(m);
  }
  return out;
}

/** Per-member facts the timeline and the table share. */
function factsOf(view: RunView, m: TimelineMember) {
  const ev = view.events.get(m.member);
  const failure = view.failures.get(m.member);
  return {
    firstStartedMs: ev?.firstStartedMs ?? m.startedMs,
    restarts: ev?.restarts ?? [],
    unhealthy: ev?.unhealthy,
    stoppingMs: ev?.stoppingMs,
    failedMs: failure?.atMs,
    failed: m.failed !== undefined || failure !== undefined,
  };
}

/**
 * The Gantt chart. Individual members are `<g class="row[ crit][ failed]" data-member="..." data-starts="N">`;
 * a collapsed role ({@link collapsesRole}) is one `<g class="role-row" data-role="..." data-members="N"
 * data-failed="F" data-restarted="R">`, followed by the rows of its critical-path members (and of the first
 * failure's member), which stay individual.
 */
function gantt(view: RunView): string {
  const members = view.timeline.members;
  const crit = new Set(view.timeline.criticalPath.members);
  const shownAlone = new Set([...crit, ...(view.firstFailure?.member ? [view.firstFailure.member] : [])]);
  const span = Math.max(view.lastMs, 1);
  const roles = byRole(members);
  const runSize = Math.max(view.size, members.length);
  type Row = { kind: "member"; m: TimelineMember } | { kind: "role"; role: string; ms: TimelineMember[] };
  const rows: Row[] = [];
  const collapsed = [...roles].some(([, ms]) => collapsesRole(runSize, ms.length));
  if (!collapsed) for (const m of members) rows.push({ kind: "member", m });
  else
    for (const [role, ms] of roles) {
      if (!collapsesRole(runSize, ms.length)) {
        for (const m of ms) rows.push({ kind: "member", m });
        continue;
      }
      rows.push({ kind: "role", role, ms });
      for (const m of ms) if (shownAlone.has(m.member)) rows.push({ kind: "member", m });
    }
  const labelW = collapsed ? 290 : 170;
  const plotW = 900;
  const dense = rows.length > 300;
  const rowH = dense ? 5 : 16;
  const roleH = 26;
  const top = 34;
  const height = top + rows.reduce((h, r) => h + (r.kind === "role" ? roleH : rowH), 0) + 24;
  const x = (ms: number): number => labelW + (Math.max(0, ms) / span) * plotW;
  const f1 = (v: number): string => v.toFixed(1);
  const rect = (from: number, to: number, y: number, h: number, color: string, title: string, cls = ""): string =>
    `<rect${cls === "" ? "" : ` class="${cls}"`} x="${f1(x(from))}" y="${f1(y)}" width="${f1(Math.max(1, x(to) - x(from)))}" height="${f1(h)}" fill="${color}"><title>${escapeHtml(title)}</title></rect>`;
  const tick = (at: number, y: number, h: number, color: string, title: string, cls: string): string =>
    `<rect class="${cls}" x="${f1(x(at) - 1)}" y="${f1(y)}" width="2.5" height="${f1(h)}" fill="${color}"><title>${escapeHtml(title)}</title></rect>`;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${labelW + plotW + 20}" height="${height}" role="img" aria-label="member timeline">`);
  // Axis: about 8 ticks at round values.
  const rough = span / 8;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? rough;
  for (let t = 0; t <= span; t += step) {
    out.push(`<line x1="${f1(x(t))}" y1="${top - 4}" x2="${f1(x(t))}" y2="${height - 20}" stroke="#eaeef2"/>`);
    out.push(`<text x="${f1(x(t))}" y="${height - 6}" text-anchor="middle">${escapeHtml(fmtMs(t))}</text>`);
  }
  const markers: [string, number | undefined][] = [
    ["admitted", view.markers.admittedMs],
    ["roster ready", view.markers.rosterReadyMs],
    ["hold", view.markers.holdStartedMs],
    ["hold ended", view.markers.holdEndedMs],
    ["teardown", view.markers.teardownStartedMs],
  ];
  let labelRow = 0;
  for (const [name, ms] of markers) {
    if (ms === undefined) continue;
    out.push(
      `<g class="marker" data-marker="${escapeHtml(name)}"><line x1="${f1(x(ms))}" y1="${top - 6}" x2="${f1(x(ms))}" y2="${height - 20}" stroke="${COLORS.marker}" stroke-dasharray="4 3"/>` +
        // Near the right edge the label goes left of its line (it would be cut off by the SVG's edge).
        (x(ms) > labelW + plotW * 0.75
          ? `<text x="${f1(x(ms) - 3)}" y="${10 + (labelRow++ % 2) * 12}" text-anchor="end" fill="${COLORS.marker}">`
          : `<text x="${f1(x(ms) + 3)}" y="${10 + (labelRow++ % 2) * 12}" fill="${COLORS.marker}">`) +
        `${escapeHtml(`${name} ${fmtMs(ms)}`)}</text></g>`,
    );
  }
  const holdFrom = view.markers.holdStartedMs;
  const holdTo = view.markers.holdEndedMs ?? view.markers.teardownStartedMs ?? view.lastMs;

  const memberRow = (m: TimelineMember, y: number): string => {
    const f = factsOf(view, m);
    const end = m.stoppedMs ?? view.lastMs;
    const h = rowH - 2;
    const y1 = y + 1;
    const parts: string[] = [];
    const startedAt = f.firstStartedMs;
    // queued: scheduled -> first start (to the end when it never started).
    if (m.scheduledMs !== undefined && (startedAt !== undefined || m.readyMs === undefined))
      parts.push(rect(m.scheduledMs, startedAt ?? end, y1, h, COLORS.queued, `${m.member} queued: ${fmtMs(m.scheduledMs)} → ${fmtMs(startedAt ?? end)}`, "queued"));
    if (startedAt !== undefined) {
      // starting: first start -> ready (or until it stopped); red when it failed before it was ready.
      const startEnd = m.readyMs ?? f.stoppingMs ?? end;
      const failedEarly = f.failed && m.readyMs === undefined;
      parts.push(
        rect(
          startedAt,
          startEnd,
          y1,
          h,
          failedEarly ? COLORS.failed : COLORS.starting,
          `${m.member} starting${failedEarly ? ", failed" : m.readyMs === undefined ? ", never ready" : ""}: ${fmtMs(startedAt)} → ${fmtMs(startEnd)}`,
          failedEarly ? "starting failed" : "starting",
        ),
      );
      // restart attempts: each failed attempt shaded, a tick where the next attempt began.
      let attemptFrom = startedAt;
      f.restarts.forEach((r, i) => {
        parts.push(rect(attemptFrom, r.atMs, y1, h, COLORS.retried, `${m.member} attempt ${i + 1} failed: ${r.previousReason}`, "retried"));
        parts.push(tick(r.atMs, y, rowH, COLORS.restart, `${m.member} restart attempt ${r.attempt} at ${fmtMs(r.atMs)}: ${r.previousReason}`, "restart"));
        attemptFrom = r.atMs;
      });
    }
    if (m.readyMs !== undefined) {
      const readyEnd = f.stoppingMs ?? end;
      parts.push(rect(m.readyMs, readyEnd, y1, h, COLORS.ready, `${m.member} ready: ${fmtMs(m.readyMs)} → ${fmtMs(readyEnd)}`, "ready"));
      if (holdFrom !== undefined) {
        const from = Math.max(holdFrom, m.readyMs);
        const to = Math.min(holdTo, readyEnd, f.failedMs ?? Infinity);
        if (to > from) parts.push(rect(from, to, y1, h, COLORS.held, `${m.member} held: ${fmtMs(from)} → ${fmtMs(to)}`, "held"));
      }
      // failed after it was ready (a liveness failure, an exit during hold): red from the failure on.
      if (f.failedMs !== undefined && f.failedMs >= m.readyMs && f.failedMs < readyEnd)
        parts.push(rect(f.failedMs, readyEnd, y1, h, COLORS.failed, `${m.member} failed at ${fmtMs(f.failedMs)}: ${m.failed ?? ""}`, "failed-after-ready"));
    }
    if (f.stoppingMs !== undefined) parts.push(rect(f.stoppingMs, end, y1, h, COLORS.stopping, `${m.member} stopping: ${fmtMs(f.stoppingMs)} → ${fmtMs(end)}`, "stopping"));
    if (m.stoppedMs !== undefined) parts.push(tick(m.stoppedMs, y, rowH, COLORS.stopped, `${m.member} stopped at ${fmtMs(m.stoppedMs)}`, "stopped"));
    if (f.unhealthy !== undefined)
      parts.push(
        tick(f.unhealthy.atMs, y - 1, rowH + 2, COLORS.unhealthy, `${m.member} unhealthy at ${fmtMs(f.unhealthy.atMs)} (liveness probe): ${f.unhealthy.lastError}`, "unhealthy"),
      );
    const isCrit = crit.has(m.member);
    const outline = isCrit ? `<rect x="${labelW - 2}" y="${y}" width="${plotW + 4}" height="${rowH}" fill="none" stroke="${COLORS.crit}" stroke-width="1.5"/>` : "";
    const label = dense ? "" : `<text x="${collapsed ? 14 : 4}" y="${y + rowH - 4}">${escapeHtml(`${isCrit ? "★ " : ""}${m.member}`)}</text>`;
    const starts = m.attempts ?? 0;
    return `<g class="row${isCrit ? " crit" : ""}${f.failed ? " failed" : ""}" data-member="${escapeHtml(m.member)}" data-starts="${starts}">${label}${parts.join("")}${outline}</g>`;
  };

  const roleRow = (role: string, ms: readonly TimelineMember[], y: number): string => {
    const facts = ms.map((m) => ({ m, f: factsOf(view, m) }));
    const failed = facts.filter(({ f }) => f.failed);
    const restarted = facts.filter(({ f }) => f.restarts.length > 0);
    const unhealthy = facts.filter(({ f }) => f.unhealthy !== undefined);
    const ready = facts.filter(({ m }) => m.readyMs !== undefined).length;
    const sched = spread(ms.map((m) => m.scheduledMs));
    const start = spread(facts.map(({ f }) => f.firstStartedMs));
    const rdy = spread(ms.map((m) => m.readyMs));
    const stopping = spread(facts.map(({ f }) => f.stoppingMs));
    const stopped = spread(ms.map((m) => m.stoppedMs));
    const line = (name: string, v: ReturnType<typeof spread>): string =>
      v === null ? `${name}: –` : `${name} (${v.n}): min ${fmtMs(v.min)}, median ${fmtMs(v.median)}, max ${fmtMs(v.max)}`;
    const title = [
      `${role}: ${ms.length} members, ${ready} ready, ${failed.length} failed, ${restarted.length} restarted, ${unhealthy.length} unhealthy (ms from run start)`,
      line("scheduled", sched),
      line("started", start),
      line("ready", rdy),
      line("stopping", stopping),
      line("stopped", stopped),
    ].join("\n");
    const parts: string[] = [];
    const midY = y + 8;
    const barH = 10;
    const med = (v: ReturnType<typeof spread>): number | undefined => v?.median;
    const seg = (from: number | undefined, to: number | undefined, color: string, what: string, cls: string): void => {
      if (from !== undefined && to !== undefined && to >= from)
        parts.push(rect(from, to, midY, barH, color, `${role} ${what} (medians): ${fmtMs(from)} → ${fmtMs(to)}\n${title}`, cls));
    };
    const lastMs = view.lastMs;
    seg(med(sched), med(start) ?? lastMs, COLORS.queued, "queued", "queued");
    seg(med(start), med(rdy) ?? med(stopping) ?? med(stopped) ?? lastMs, failed.length > 0 && rdy === null ? COLORS.failed : COLORS.starting, "starting", "starting");
    seg(med(rdy), med(stopping) ?? med(stopped) ?? lastMs, COLORS.ready, "ready", "ready");
    if (holdFrom !== undefined && rdy !== null) {
      const from = Math.max(holdFrom, rdy.median);
      const to = Math.min(holdTo, med(stopping) ?? lastMs);
      seg(from, to > from ? to : undefined, COLORS.held, "held", "held");
    }
    seg(med(stopping), med(stopped) ?? lastMs, COLORS.stopping, "stopping", "stopping");
    // Whiskers: first start min..max above the bar, ready min..max below it.
    const whisker = (v: ReturnType<typeof spread>, wy: number, color: string, what: string, cls: string): void => {
      if (v === null) return;
      parts.push(rect(v.min, v.max, wy, 3, color, `${role} ${what}: min ${fmtMs(v.min)}, median ${fmtMs(v.median)}, max ${fmtMs(v.max)} (${v.n} members)`, cls));
    };
    whisker(start, y + 3, COLORS.starting, "started", "whisker-started");
    whisker(rdy, y + 20, COLORS.ready, "ready", "whisker-ready");
    if (stopped !== null) parts.push(tick(stopped.median, y + 6, 14, COLORS.stopped, `${role} stopped (median) at ${fmtMs(stopped.median)}; max ${fmtMs(stopped.max)}`, "stopped"));
    for (const { m, f } of failed)
      if (f.failedMs !== undefined) parts.push(tick(f.failedMs, y + 2, roleH - 4, COLORS.failed, `${m.member} failed at ${fmtMs(f.failedMs)}: ${m.failed ?? ""}`, "failed-mark"));
    for (const { m, f } of restarted)
      for (const r of f.restarts)
        parts.push(tick(r.atMs, y + 2, roleH - 4, COLORS.restart, `${m.member} restart attempt ${r.attempt} at ${fmtMs(r.atMs)}: ${r.previousReason}`, "restart"));
    for (const { m, f } of unhealthy)
      parts.push(tick(f.unhealthy!.atMs, y + 2, roleH - 4, COLORS.unhealthy, `${m.member} unhealthy at ${fmtMs(f.unhealthy!.atMs)}: ${f.unhealthy!.lastError}`, "unhealthy"));
    const counts = [
      `${ready}/${ms.length} ready`,
      ...(failed.length > 0 ? [`${failed.length} failed`] : []),
      ...(restarted.length > 0 ? [`${restarted.length} restarted`] : []),
      ...(unhealthy.length > 0 ? [`${unhealthy.length} unhealthy`] : []),
    ];
    const label = `<text x="4" y="${y + 12}" font-weight="700">${escapeHtml(`${role} ×${ms.length}`)}</text><text x="4" y="${y + 23}">${escapeHtml(counts.join(", "))}</text>`;
    const band = `<rect x="0" y="${y}" width="${labelW + plotW + 20}" height="${roleH}" fill="#f6f8fa"/>`;
    return `<g class="role-row" data-role="${escapeHtml(role)}" data-members="${ms.length}" data-failed="${failed.length}" data-restarted="${restarted.length}" data-unhealthy="${unhealthy.length}">${band}${label}<title>${escapeHtml(title)}</title>${parts.join("")}</g>`;
  };

  let y = top;
  for (const row of rows) {
    if (row.kind === "role") {
      out.push(roleRow(row.role, row.ms, y));
      y += roleH;
    } else {
      out.push(memberRow(row.m, y));
      y += rowH;
    }
  }
  out.push("</svg>");
  return out.join("\n");
}

function roleStats(view: RunView): string {
  const rows = [...byRole(view.timeline.members)].map(([role, ms]) => {
    const times = ms
      .filter((m) => m.readyMs !== undefined && m.startedMs !== undefined)
      .map((m) => m.readyMs! - m.startedMs!)
      .sort((a, b) => a - b);
    const stat = (q: number) => (times.length === 0 ? "–" : escapeHtml(fmtMs(quantile(times, q))));
    const facts = ms.map((m) => factsOf(view, m));
    const count = (pred: (f: ReturnType<typeof factsOf>) => boolean): number => facts.filter(pred).length;
    return (
      `<tr><td>${escapeHtml(role)}</td><td class="n">${ms.length}</td><td class="n">${times.length}</td><td class="n">${count((f) => f.failed)}</td><td class="n">${count((f) => f.restarts.length > 0)}</td>` +
      `<td class="n">${count((f) => f.unhealthy !== undefined)}</td><td class="n">${stat(0)}</td><td class="n">${stat(0.5)}</td><td class="n">${stat(0.9)}</td><td class="n">${stat(1)}</td></tr>`
    );
  });
  return `<table class="grid"><tr><th>role</th><th>members</th><th>ready</th><th>failed</th><th>restarted</th><th>unhealthy</th><th>start→ready min</th><th>median</th><th>p90</th><th>max</th></tr>${rows.join("")}</table>`;
}

const MEMBER_HEAD = `<tr><th>member</th><th>role</th><th>scheduled</th><th>first started</th><th>starts</th><th>ready</th><th>unhealthy</th><th>stopping</th><th>stopped</th><th>failure</th></tr>`;

function memberRows(view: RunView, ms: readonly TimelineMember[]): string {
  const crit = new Set(view.timeline.criticalPath.members);
  const cell = (v: number | undefined): string => `<td class="n">${v === undefined ? "–" : v.toFixed(1)}</td>`;
  return ms
    .map((m) => {
      const f = factsOf(view, m);
      return (
        `<tr class="member${crit.has(m.member) ? " crit" : ""}" data-member="${escapeHtml(m.member)}"><td>${escapeHtml(m.member)}${crit.has(m.member) ? " ★" : ""}</td><td>${escapeHtml(m.role)}</td>` +
        cell(m.scheduledMs) +
        cell(f.firstStartedMs) +
        `<td class="n">${m.attempts ?? 0}</td>` +
        cell(m.readyMs) +
        cell(f.unhealthy?.atMs) +
        cell(f.stoppingMs) +
        cell(m.stoppedMs) +
        `<td>${m.failed === undefined ? "" : escapeHtml(m.failed)}</td></tr>`
      );
    })
    .join("");
}

/** The members as a table; when the timeline collapses roles, one `<details>` per role (no script needed). */
function memberTable(view: RunView): string {
  const roles = byRole(view.timeline.members);
  const runSize = Math.max(view.size, view.timeline.members.length);
  if (![...roles].some(([, ms]) => collapsesRole(runSize, ms.length))) return `<table class="grid">${MEMBER_HEAD}${memberRows(view, view.timeline.members)}</table>`;
  const crit = new Set(view.timeline.criticalPath.members);
  return [...roles]
    .map(([role, ms]) => {
      const failed = ms.filter((m) => factsOf(view, m).failed).length;
      const ready = ms.filter((m) => m.readyMs !== undefined).length;
      const onPath = ms.filter((m) => crit.has(m.member)).map((m) => m.member);
      const summary = `${role}: ${ms.length} member${ms.length === 1 ? "" : "s"}, ${ready} ready${failed > 0 ? `, ${failed} failed` : ""}${onPath.length > 0 ? `; critical path: ${onPath.join(", ")}` : ""}`;
      return `<details class="role" data-role="${escapeHtml(role)}"${failed > 0 ? " open" : ""}><summary>${escapeHtml(summary)}</summary><table class="grid">${MEMBER_HEAD}${memberRows(view, ms)}</table></details>`;
    })
    .join("\n");
}

/**
 * Render a run as one self-contained HTML document (UTF-8 text; see the module doc for its sections).
 * @param view - the run, from ./view.ts `loadRunView`
 * @returns the HTML text, ending with a newline
 */
export function renderReport(view: RunView): string {
  const { manifest, completion } = view;
  const outcome = outcomeText(view);
  const badgeClass = completion === null ? "unfinished" : completion.outcome;
  const facts: [string, string][] = [
    ["run id", manifest.runId],
    ["profile", manifest.profile],
    ["backend", manifest.backend],
    ["outcome", outcome],
    ["size", String(view.size)],
    ["ready", `${view.readyCount}/${view.size}`],
    ["time to ready", view.timeToReadyMs === null ? "never ready (or unknown)" : `${fmtMs(view.timeToReadyMs)} (admission → last member ready)`],
    ["created", manifest.createdAt],
    ["completed", typeof completion?.completedAt === "string" ? completion.completedAt : "–"],
    ["spec sha256", manifest.specSha256],
    [
      "tools",
      Object.entries(manifest.tools ?? {})
        .map(([k, v]) => `${k} ${v}`)
        .join(", "),
    ],
  ];
  const html: string[] = [];
  html.push(
    `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(`cohort run ${manifest.runId}: ${outcome}`)}</title><style>${STYLE}</style></head><body>`,
  );
  html.push(`<h1>cohort run <code>${escapeHtml(manifest.runId)}</code> <span class="badge ${badgeClass}" id="outcome">${escapeHtml(outcome)}</span></h1>`);
  if (completion === null)
    html.push(
      `<p class="warn" id="unfinished">This run has no completion.json: it crashed or is still running. What follows is what its ${view.records.length} records say so far.</p>`,
    );
  html.push(`<table class="facts">${facts.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join("")}</table>`);

  html.push(`<h2>Ledger</h2>`);
  html.push(
    view.verification.ok
      ? `<p id="verify" class="ok">verified: ${view.verification.report.records} records, hash chain and digests intact${view.verification.report.complete ? "" : " (no completion yet)"}</p>`
      : `<p id="verify" class="bad">does NOT verify: ${escapeHtml(view.verification.error)}</p><p class="warn">The records below were read without trusting them.</p>`,
  );

  html.push(`<h2>Phases</h2>`);
  const phases = Object.entries(completion?.phasesMs ?? {});
  html.push(
    phases.length === 0
      ? "<p>none recorded</p>"
      : `<table class="grid">${phases.map(([k, v]) => `<tr><td>${escapeHtml(k)}</td><td class="n">${escapeHtml(fmtMs(v))}</td></tr>`).join("")}</table>`,
  );

  if (view.firstFailure !== null) {
    const member = view.firstFailure.member;
    const detail = member !== null ? view.failures.get(member) : undefined;
    const [summary, ...tailFromReason] = view.firstFailure.reason.split("\n");
    const tail = detail?.outputTail ?? tailFromReason.join("\n");
    html.push(`<h2>First failure</h2><div id="first-failure"><p><b>${escapeHtml(member ?? "(the run)")}</b>: ${escapeHtml(summary ?? "")}</p>`);
    html.push(tail === "" ? "<p>no output</p>" : `<p>last output:</p><pre id="output-tail">${escapeHtml(tail)}</pre>`);
    html.push("</div>");
  }

  html.push(`<h2>Critical path</h2>`);
  const cp = view.timeline.criticalPath;
  if (cp.members.length === 0) html.push(`<p id="critical-path">none: no member became ready</p>`);
  else {
    const ready = new Map(view.timeline.members.map((m) => [m.member, m.readyMs]));
    html.push(
      `<p id="critical-path">${cp.members.map((m) => `<code>${escapeHtml(m)}</code>`).join(" → ")}: the last member was ready at ${escapeHtml(fmtMs(cp.readyMs))} from run start` +
        `${view.timeToReadyMs === null ? "" : `; time to ready (from admission) ${escapeHtml(fmtMs(view.timeToReadyMs))}`}.</p>`,
    );
    html.push(`<table class="grid">${cp.members.map((m) => `<tr><td>${escapeHtml(m)}</td><td class="n">ready at ${escapeHtml(fmtMs(ready.get(m)))}</td></tr>`).join("")}</table>`);
  }

  html.push(`<h2>Timeline</h2>`);
  const legend: [string, string][] = [
    ["queued", `background:${COLORS.queued}`],
    ["starting", `background:${COLORS.starting}`],
    ["failed attempt (restarted)", `background:${COLORS.retried}`],
    ["restart attempt", `background:${COLORS.restart};width:3px`],
    ["ready", `background:${COLORS.ready}`],
    ["held", `background:${COLORS.held}`],
    ["unhealthy (liveness)", `background:${COLORS.unhealthy};width:3px`],
    ["failed", `background:${COLORS.failed}`],
    ["stopping", `background:${COLORS.stopping}`],
    ["stopped", `background:${COLORS.stopped};width:3px`],
    ["critical path (★)", `border:2px solid ${COLORS.crit}`],
    ["markers", `border-left:2px dashed ${COLORS.marker}`],
  ];
  html.push(`<p class="legend">${legend.map(([name, css]) => `<span><i style="${css}"></i>${escapeHtml(name)}</span>`).join("")} ms from run start; hover a bar for its times</p>`);
  const runSize = Math.max(view.size, view.timeline.members.length);
  if ([...byRole(view.timeline.members)].some(([, ms]) => collapsesRole(runSize, ms.length)))
    html.push(
      `<p id="collapsed">Roles with many members are one row each (runs over ${COLLAPSE_MEMBERS} members, or roles over ${COLLAPSE_ROLE_MEMBERS}): the bar is the members' median phase boundaries, the thin lines above and below it span the first and last start and ready, ticks mark each failure, restart and liveness failure; the critical path's members are still drawn one by one. Every member is in the table below.</p>`,
    );
  html.push(view.timeline.members.length === 0 ? "<p>no members in the ledger</p>" : gantt(view));

  html.push(`<h2>Start to ready per role</h2>`, roleStats(view));
  html.push(`<h2>Members (ms from run start)</h2>`, memberTable(view));
  html.push(`</body></html>`);
  return `${html.join("\n")}\n`;
}

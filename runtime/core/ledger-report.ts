/**
 * `cohort ledger report DIR [--out FILE]`: one self-contained HTML file for a run directory (inline CSS
 * and an inline SVG Gantt chart; no script, no external asset, nothing fetched), default `DIR/report.html`.
 *
 * Sections: the run's identity and outcome (run id, profile, backend, outcome, size, ready count, time to
 * ready, created/completed, spec digest, tool versions), the ledger's verification status, the phases,
 * the first failure with its output tail, the critical path (from ./ledger-show.ts, the same computation
 * as `ledger show`) against the time to ready, the timeline of every member as a Gantt chart (queued =
 * scheduled -> started, starting = started -> ready, ready = ready -> stopped; a failed member's bar is
 * red; critical-path rows are outlined; admission, roster-ready, hold and teardown markers), per-role
 * start-to-ready statistics and the members as a table. Every text from the ledger is HTML-escaped (member
 * output is untrusted). A run without completion.json (crashed or still running) is rendered with what
 * its records say, and says so.
 */
import { outcomeText, type RunView } from "./ledger-view";
import type { TimelineMember } from "./ledger-show";

/** Escapes `& < > " '` for HTML text and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
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

const COLORS = { queued: "#d0d7de", starting: "#d4a72c", ready: "#2da44e", failed: "#cf222e", crit: "#0550ae", marker: "#8250df" };

/** The Gantt chart: one `<g class="row" data-member="...">` per member (timeline order). */
function gantt(view: RunView): string {
  const members = view.timeline.members;
  const crit = new Set(view.timeline.criticalPath.members);
  const span = Math.max(view.lastMs, 1);
  const labelW = 170;
  const plotW = 900;
  const dense = members.length > 300;
  const rowH = dense ? 5 : 16;
  const top = 34;
  const height = top + members.length * rowH + 24;
  const x = (ms: number): number => labelW + (Math.max(0, ms) / span) * plotW;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${labelW + plotW + 20}" height="${height}" role="img" aria-label="member timeline">`);
  // Axis: about 8 ticks at round values.
  const rough = span / 8;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? rough;
  for (let t = 0; t <= span; t += step) {
    out.push(`<line x1="${x(t).toFixed(1)}" y1="${top - 4}" x2="${x(t).toFixed(1)}" y2="${height - 20}" stroke="#eaeef2"/>`);
    out.push(`<text x="${x(t).toFixed(1)}" y="${height - 6}" text-anchor="middle">${escapeHtml(fmtMs(t))}</text>`);
  }
  const markers: [string, number | undefined][] = [
    ["admitted", view.markers.admittedMs],
    ["roster ready", view.markers.rosterReadyMs],
    ["hold", view.markers.holdStartedMs],
    ["teardown", view.markers.teardownStartedMs],
  ];
  let labelRow = 0;
  for (const [name, ms] of markers) {
    if (ms === undefined) continue;
    out.push(
      `<g class="marker" data-marker="${escapeHtml(name)}"><line x1="${x(ms).toFixed(1)}" y1="${top - 6}" x2="${x(ms).toFixed(1)}" y2="${height - 20}" stroke="${COLORS.marker}" stroke-dasharray="4 3"/>` +
        `<text x="${(x(ms) + 3).toFixed(1)}" y="${10 + (labelRow++ % 2) * 12}" fill="${COLORS.marker}">${escapeHtml(`${name} ${fmtMs(ms)}`)}</text></g>`,
    );
  }
  members.forEach((m, i) => {
    const y = top + i * rowH;
    const failed = m.failed !== undefined || view.failures.has(m.member);
    const end = m.stoppedMs ?? view.lastMs;
    const seg = (from: number | undefined, to: number | undefined, color: string, what: string): string =>
      from === undefined || to === undefined
        ? ""
        : `<rect x="${x(from).toFixed(1)}" y="${y + 1}" width="${Math.max(1, x(to) - x(from)).toFixed(1)}" height="${rowH - 2}" fill="${color}"><title>${escapeHtml(`${m.member} ${what}: ${fmtMs(from)} → ${fmtMs(to)}`)}</title></rect>`;
    const parts = [
      seg(m.scheduledMs, m.startedMs ?? (m.readyMs === undefined ? end : undefined), COLORS.queued, "queued"),
      seg(m.startedMs, m.readyMs ?? end, failed && m.readyMs === undefined ? COLORS.failed : COLORS.starting, m.readyMs === undefined ? (failed ? "starting, failed" : "starting, never ready") : "starting"),
      seg(m.readyMs, end, failed ? COLORS.failed : COLORS.ready, failed ? "ready, then failed" : "ready"),
    ];
    const isCrit = crit.has(m.member);
    const outline = isCrit ? `<rect x="${labelW - 2}" y="${y}" width="${plotW + 4}" height="${rowH}" fill="none" stroke="${COLORS.crit}" stroke-width="1.5"/>` : "";
    const label = dense ? "" : `<text x="4" y="${y + rowH - 4}">${escapeHtml(`${isCrit ? "★ " : ""}${m.member}`)}</text>`;
    out.push(`<g class="row${isCrit ? " crit" : ""}${failed ? " failed" : ""}" data-member="${escapeHtml(m.member)}">${label}${parts.join("")}${outline}</g>`);
  });
  out.push("</svg>");
  return out.join("\n");
}

function roleStats(view: RunView): string {
  const byRole = new Map<string, TimelineMember[]>();
  for (const m of view.timeline.members) byRole.set(m.role, [...(byRole.get(m.role) ?? []), m]);
  const rows = [...byRole].map(([role, ms]) => {
    const times = ms.filter((m) => m.readyMs !== undefined && m.startedMs !== undefined).map((m) => m.readyMs! - m.startedMs!).sort((a, b) => a - b);
    const stat = (q: number) => (times.length === 0 ? "–" : escapeHtml(fmtMs(quantile(times, q))));
    return `<tr><td>${escapeHtml(role)}</td><td class="n">${ms.length}</td><td class="n">${times.length}</td><td class="n">${stat(0)}</td><td class="n">${stat(0.5)}</td><td class="n">${stat(0.9)}</td><td class="n">${stat(1)}</td></tr>`;
  });
  return `<table class="grid"><tr><th>role</th><th>members</th><th>ready</th><th>start→ready min</th><th>median</th><th>p90</th><th>max</th></tr>${rows.join("")}</table>`;
}

function memberTable(view: RunView): string {
  const crit = new Set(view.timeline.criticalPath.members);
  const rows = view.timeline.members.map(
    (m) =>
      `<tr${crit.has(m.member) ? ' class="crit"' : ""}><td>${escapeHtml(m.member)}${crit.has(m.member) ? " ★" : ""}</td><td>${escapeHtml(m.role)}</td>` +
      [m.scheduledMs, m.startedMs, m.readyMs, m.stoppedMs].map((v) => `<td class="n">${v === undefined ? "–" : v.toFixed(1)}</td>`).join("") +
      `<td class="n">${m.attempts ?? 0}</td><td>${m.failed === undefined ? "" : escapeHtml(m.failed)}</td></tr>`,
  );
  return `<table class="grid"><tr><th>member</th><th>role</th><th>scheduled</th><th>started</th><th>ready</th><th>stopped</th><th>attempts</th><th>failure</th></tr>${rows.join("")}</table>`;
}

/**
 * Render a run as one self-contained HTML document (UTF-8 text; see the module doc for its sections).
 * @param view - the run, from ./ledger-view.ts `loadRunView`
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
    ["tools", Object.entries(manifest.tools ?? {}).map(([k, v]) => `${k} ${v}`).join(", ")],
  ];
  const html: string[] = [];
  html.push(`<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(`cohort run ${manifest.runId}: ${outcome}`)}</title><style>${STYLE}</style></head><body>`);
  html.push(`<h1>cohort run <code>${escapeHtml(manifest.runId)}</code> <span class="badge ${badgeClass}" id="outcome">${escapeHtml(outcome)}</span></h1>`);
  if (completion === null) html.push(`<p class="warn" id="unfinished">This run has no completion.json: it crashed or is still running. What follows is what its ${view.records.length} records say so far.</p>`);
  html.push(`<table class="facts">${facts.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join("")}</table>`);

  html.push(`<h2>Ledger</h2>`);
  html.push(
    view.verification.ok
      ? `<p id="verify" class="ok">verified: ${view.verification.report.records} records, hash chain and digests intact${view.verification.report.complete ? "" : " (no completion yet)"}</p>`
      : `<p id="verify" class="bad">does NOT verify: ${escapeHtml(view.verification.error)}</p><p class="warn">The records below were read without trusting them.</p>`,
  );

  html.push(`<h2>Phases</h2>`);
  const phases = Object.entries(completion?.phasesMs ?? {});
  html.push(phases.length === 0 ? "<p>none recorded</p>" : `<table class="grid">${phases.map(([k, v]) => `<tr><td>${escapeHtml(k)}</td><td class="n">${escapeHtml(fmtMs(v))}</td></tr>`).join("")}</table>`);

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
  html.push(
    `<p class="legend"><span><i style="background:${COLORS.queued}"></i>queued</span><span><i style="background:${COLORS.starting}"></i>starting</span>` +
      `<span><i style="background:${COLORS.ready}"></i>ready</span><span><i style="background:${COLORS.failed}"></i>failed</span>` +
      `<span><i style="border:2px solid ${COLORS.crit}"></i>critical path (★)</span><span><i style="border-left:2px dashed ${COLORS.marker}"></i>markers</span> ms from run start; hover a bar for its times</p>`,
  );
  html.push(view.timeline.members.length === 0 ? "<p>no members in the ledger</p>" : gantt(view));

  html.push(`<h2>Start to ready per role</h2>`, roleStats(view));
  html.push(`<h2>Members (ms from run start)</h2>`, memberTable(view));
  html.push(`</body></html>`);
  return `${html.join("\n")}\n`;
}

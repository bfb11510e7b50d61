/**
 * `cohort ledger junit DIR [--out FILE]`: a run as JUnit XML, in the de-facto schema the Jenkins JUnit
 * plugin, GitLab (`artifacts:reports:junit`) and the GitHub Actions reporters read:
 *
 *   <testsuites name="cohort" tests failures errors skipped time>
 *     <testsuite name="<run id>" tests failures errors skipped time timestamp hostname>
 *       <properties><property name="profile" value="host"/>...</properties>
 *       <testcase name="<member>" classname="<role>" time="<start -> ready, seconds>">
 *         <failure message="<one-line reason>" type="member-failed"><reason and output tail></failure>
 *         | <skipped message="never started"/>
 *       </testcase>
 *       <testcase name="run" classname="cohort"> (only when the run failed without a member, was interrupted
 *         or has no completion) <failure .../> or <error .../> </testcase>
 *       <testcase name="ledger" classname="cohort"> (only when the ledger does not verify) <error .../></testcase>
 *     </testsuite>
 *   </testsuites>
 *
 * Times are seconds with millisecond precision; `timestamp` is the manifest's createdAt in UTC without a zone
 * suffix (`2026-12-01T20:11:42`, the XSD's form). Every text is escaped, and characters XML 1.0 forbids
 * (C0 controls other than tab, newline and carriage return, lone surrogates, U+FFFE, U+FFFF) are removed.
 */
import { outcomeText, type RunView } from "./view";

/** Removes the characters XML 1.0 does not allow (https://www.w3.org/TR/xml/#charsets). */
export function stripInvalidXmlChars(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[^\u0009\u000A\u000D\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "");
}

/** Escapes text content (`& < >`) after {@link stripInvalidXmlChars}. */
export function xmlText(text: string): string {
  return stripInvalidXmlChars(text).replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]!);
}

/** Escapes an attribute value (also `"`, and tab/newline/CR as character references so they survive normalization). */
export function xmlAttr(text: string): string {
  return stripInvalidXmlChars(text).replace(/[&<>"\t\n\r]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;", "\r": "&#13;" })[c]!);
}

const seconds = (ms: number): string => (Math.max(0, ms) / 1000).toFixed(3);

/** One `<testcase>`: `result` null = passed; `message` is one line, `body` the element's text (reason, tail). */
export interface JunitCase {
  /** Member id, or `run` / `ledger`. */
  readonly name: string;
  /** The member's role, or `cohort`. */
  readonly classname: string;
  /** Duration in ms (written as seconds). */
  readonly timeMs: number;
  readonly result: null | { readonly kind: "failure" | "error" | "skipped"; readonly type?: string; readonly message: string; readonly body?: string };
}

/**
 * The testcases of a run: one per member (timeline order), then `run` and `ledger` when they apply.
 * A member's time is started -> ready; when it never became ready, started -> its failure or stop (0 if
 * never started). A member that failed has a `failure` (type `member-failed`); one never started is
 * `skipped`; one started but not ready when the run stopped (another member failed, an interrupt, a crash)
 * is `skipped` with that said.
 */
export function junitCases(view: RunView): JunitCase[] {
  const cases: JunitCase[] = [];
  const first = view.firstFailure;
  const stoppedBecause =
    view.completion === null
      ? "the run has no completion (crashed or still running)"
      : `the run ended ${outcomeText(view)}${first !== null ? ` (first failure: ${first.member ?? "the run"})` : ""}`;
  for (const m of view.timeline.members) {
    const failure = view.failures.get(m.member);
    const endMs = m.readyMs ?? failure?.atMs ?? m.stoppedMs ?? view.lastMs;
    const timeMs = m.startedMs === undefined ? 0 : endMs - m.startedMs;
    let result: JunitCase["result"] = null;
    if (failure !== undefined || m.failed !== undefined) {
      const reason = failure?.reason ?? m.failed ?? "failed";
      const tail = failure?.outputTail ?? "";
      result = { kind: "failure", type: "member-failed", message: reason.split("\n")[0]!, body: tail === "" ? reason : `${reason}\n\nlast output:\n${tail}` };
    } else if (m.startedMs === undefined) {
      result = { kind: "skipped", message: `never started: ${stoppedBecause}` };
    } else if (m.readyMs === undefined) {
      result = { kind: "skipped", message: `started but not ready: ${stoppedBecause}` };
    }
    cases.push({ name: m.member, classname: m.role, timeMs, result });
  }
  const runMs = view.lastMs;
  if (view.completion === null) {
    cases.push({
      name: "run",
      classname: "cohort",
      timeMs: runMs,
      result: { kind: "error", type: "unfinished", message: "no completion.json: the run crashed or is still running" },
    });
  } else if (view.completion.outcome === "interrupted") {
    cases.push({ name: "run", classname: "cohort", timeMs: runMs, result: { kind: "failure", type: "interrupted", message: `the run was ${outcomeText(view)}` } });
  } else if (first !== null && first.member === null) {
    cases.push({ name: "run", classname: "cohort", timeMs: runMs, result: { kind: "failure", type: "run-failed", message: first.reason.split("\n")[0]!, body: first.reason } });
  }
  if (!view.verification.ok) cases.push({ name: "ledger", classname: "cohort", timeMs: 0, result: { kind: "error", type: "ledger-verify", message: view.verification.error } });
  return cases;
}

/**
 * Render a run as a JUnit XML document (see the module doc).
 * @param view - the run, from ./view.ts `loadRunView`
 * @param hostname - the `hostname` attribute @default "localhost"
 * @returns the XML text (UTF-8, with an XML declaration), ending with a newline
 */
export function renderJunit(view: RunView, hostname = "localhost"): string {
  const cases = junitCases(view);
  const count = (kind: "failure" | "error" | "skipped") => cases.filter((c) => c.result?.kind === kind).length;
  const totals = `tests="${cases.length}" failures="${count("failure")}" errors="${count("error")}" skipped="${count("skipped")}" time="${seconds(view.lastMs)}"`;
  const created = Date.parse(view.manifest.createdAt);
  const timestamp = Number.isNaN(created) ? "" : new Date(created).toISOString().replace(/\.\d{3}Z$/, "");
  const properties: [string, string][] = [
    ["profile", view.manifest.profile],
    ["backend", view.manifest.backend],
    ["outcome", outcomeText(view)],
    ["size", String(view.size)],
    ["readyCount", String(view.readyCount)],
    ["timeToReadyMs", view.timeToReadyMs === null ? "" : String(view.timeToReadyMs)],
    ["criticalPath", view.timeline.criticalPath.members.join(" -> ")],
    ["specSha256", view.manifest.specSha256],
    ["ledgerVerified", String(view.verification.ok)],
  ];
  const out: string[] = ['<?xml version="1.0" encoding="UTF-8"?>'];
  out.push(`<testsuites name="cohort" ${totals}>`);
  out.push(`  <testsuite name="${xmlAttr(view.manifest.runId)}" ${totals}${timestamp === "" ? "" : ` timestamp="${timestamp}"`} hostname="${xmlAttr(hostname)}">`);
  out.push("    <properties>");
  for (const [name, value] of properties) out.push(`      <property name="${xmlAttr(name)}" value="${xmlAttr(value)}"/>`);
  out.push("    </properties>");
  for (const c of cases) {
    const open = `    <testcase name="${xmlAttr(c.name)}" classname="${xmlAttr(c.classname)}" time="${seconds(c.timeMs)}"`;
    if (c.result === null) {
      out.push(`${open}/>`);
      continue;
    }
    const r = c.result;
    const attrs = `message="${xmlAttr(r.message)}"${r.type === undefined ? "" : ` type="${xmlAttr(r.type)}"`}`;
    out.push(`${open}>`);
    out.push(r.body === undefined ? `      <${r.kind} ${attrs}/>` : `      <${r.kind} ${attrs}>${xmlText(r.body)}</${r.kind}>`);
    out.push("    </testcase>");
  }
  out.push("  </testsuite>");
  out.push("</testsuites>");
  return `${out.join("\n")}\n`;
}

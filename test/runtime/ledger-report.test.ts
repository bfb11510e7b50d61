/**
 * `cohort ledger report` (HTML) and `cohort ledger junit` (JUnit XML) on ledgers of REAL runs: the bundled CLI
 * runs small cohorts with the process backend (a success, a failure whose member prints HTML and control
 * characters, a runtime SIGKILLed mid-start), and the documents are checked against what the ledger says
 * (the timeline and critical path of `ledgerTimeline`, the records, completion.json). The JUnit XML is parsed by
 * Python's expat (strict XML 1.0: it refuses control characters and bad escapes).
 */
import { spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { COLLAPSE_MEMBERS, COLLAPSE_ROLE_MEMBERS, renderReport } from "../../runtime/core/ledger/report";
import { ledgerTimeline } from "../../runtime/core/ledger/show";
import { runViewOf } from "../../runtime/core/ledger/view";
import { syntheticRun } from "./ledger-fixtures";
import { buildBundle, processesOfRun, runBundle, tempDir, type CliExit } from "./process-helpers";

let bundle = "";

beforeAll(async () => {
  bundle = await buildBundle();
}, 300_000);

type Exit = CliExit;

const cohort = (args: string[], onStart?: (child: ChildProcess) => void): Promise<Exit> => runBundle(bundle, args, { onStart });

async function runCohort(spec: object, onStart?: (child: ChildProcess, artifacts: string) => void): Promise<{ exit: Exit; runDir: string }> {
  const artifacts = tempDir("artifacts");
  const file = path.join(tempDir("spec"), "cohort.json");
  fs.writeFileSync(file, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", stopGracePeriod: "2s", ...spec }));
  const exit = await cohort(["run", "--spec", file, "--artifacts", artifacts], onStart && ((child) => onStart(child, artifacts)));
  const entries = fs.readdirSync(artifacts);
  expect(entries).toHaveLength(1);
  return { exit, runDir: path.join(artifacts, entries[0]!) };
}

const onLog = { log: { pattern: "^ready$" } };
const member = (delay: string) => ({ command: ["sh", "-c", `sleep ${delay}; echo ready; exec sleep 1000`], port: false });

interface XmlNode {
  tag: string;
  attrs: Record<string, string>;
  text: string;
  children: XmlNode[];
}

/** Parses XML with Python's expat (strict) and returns the tree, or throws expat's error. */
function parseXml(file: string): XmlNode {
  const script = `
import json, sys, xml.etree.ElementTree as E
def node(e): return {"tag": e.tag, "attrs": dict(e.attrib), "text": e.text or "", "children": [node(c) for c in e]}
print(json.dumps(node(E.parse(sys.argv[1]).getroot())))
`;
  const r = spawnSync("python3", ["-c", script, file], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`XML does not parse: ${r.stderr || r.error?.message}`);
  return JSON.parse(r.stdout) as XmlNode;
}

const records = (runDir: string) =>
  fs
    .readFileSync(path.join(runDir, "records.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { kind: string; member?: string; elapsedMs: number; reason?: string; outputTail?: string });

describe("cohort ledger report / junit on real runs", () => {
  let success: { runDir: string; exit: Exit };
  let failure: { runDir: string; exit: Exit };

  beforeAll(async () => {
    success = await runCohort({
      name: "good",
      roles: [
        { name: "router", app: member("0.3"), readiness: onLog },
        { name: "agent", replicas: 3, needs: ["router"], app: member("0.$((COHORT_INDEX * 3 + 1))"), readiness: onLog },
      ],
    });
    // web-2 prints HTML, an XML CDATA end, control characters (BEL, ESC, NUL-free C0) and exits 3; `late` needs web.
    const evil = String.raw`printf '<script>alert("x")</script> & ]]> \001\007\033[31mred\033[0m\n'; exit 3`;
    failure = await runCohort({
      name: "bad",
      roles: [
        {
          name: "web",
          replicas: 3,
          app: { command: ["sh", "-c", `if [ "$COHORT_INDEX" = 2 ]; then sleep 0.5; ${evil}; fi; echo ready; exec sleep 1000`], port: false },
          readiness: onLog,
        },
        { name: "late", needs: ["web"], app: member("0"), readiness: onLog },
      ],
    });
  }, 120_000);

  it("cohort run writes report.html beside the ledger on every outcome; the summary's reportPath names it", () => {
    for (const [run, outcome] of [
      [success, "succeeded"],
      [failure, "failed"],
    ] as const) {
      const summary = JSON.parse(run.exit.stdout.trim()) as { outcome: string; ledgerPath: string; reportPath: string | null };
      expect(summary.outcome).toBe(outcome);
      expect(summary.reportPath).toBe(path.join(run.runDir, "report.html"));
      const html = fs.readFileSync(summary.reportPath!, "utf8");
      expect(html).toContain(`<span class="badge ${outcome}" id="outcome">${outcome}</span>`);
      // Written after completion.json: the report shows the completed run, not an unfinished one.
      expect(html).not.toContain('id="unfinished"');
      expect(run.exit.stderr).not.toContain("report not written");
    }
  });

  it("a report that cannot be written is noted on stderr and changes neither the outcome nor the exit code", async () => {
    // The member blocks the report's name with a non-empty directory (its cwd is <runDir>/members/<member>).
    const blocker = { command: ["sh", "-c", "mkdir -p ../../report.html/blocked && echo ready && exec sleep 1000"], port: false };
    const { exit, runDir } = await runCohort({ name: "blocked", roles: [{ name: "solo", app: blocker, readiness: onLog }] });
    expect(fs.statSync(path.join(runDir, "report.html")).isDirectory()).toBe(true);
    expect(exit.code, exit.stderr).toBe(0);
    const summary = JSON.parse(exit.stdout.trim()) as { outcome: string; reportPath: string | null };
    expect(summary).toMatchObject({ outcome: "succeeded", reportPath: null });
    const lines = exit.stderr.trimEnd().split("\n");
    expect(lines.some((l) => /^cohort: report not written: /.test(l))).toBe(true);
    // The last stderr line is still the run's own one-line result.
    expect(lines.at(-1)).toMatch(/^cohort: run blocked-\S+ succeeded: 1\/1 ready/);
    expect((await cohort(["ledger", "verify", runDir])).code).toBe(0);
  });

  it("report: default DIR/report.html, self-contained, the run's identity, one Gantt row per member, the critical path marked", async () => {
    const r = await cohort(["ledger", "report", success.runDir]);
    expect(r.code, r.stderr).toBe(0);
    const file = path.join(success.runDir, "report.html");
    expect(r.stdout).toBe(`wrote ${file} (run ${path.basename(success.runDir)}: succeeded)\n`);
    const html = fs.readFileSync(file, "utf8");
    const completion = JSON.parse(fs.readFileSync(path.join(success.runDir, "completion.json"), "utf8")) as { timeToReadyMs: number };
    expect(html).toContain(`<code>${path.basename(success.runDir)}</code>`);
    expect(html).toMatch(/<span class="badge succeeded" id="outcome">succeeded<\/span>/);
    expect(html).toContain("<tr><th>ready</th><td>4/4</td></tr>");
    expect(html).toContain(`<tr><th>time to ready</th><td>${completion.timeToReadyMs.toFixed(1)} ms`);
    expect(html).toMatch(/<p id="verify" class="ok">verified: \d+ records/);
    // Self-contained: no script, no external reference (the only URL is the SVG namespace).
    expect(html).not.toMatch(/<script|<link|<img|src=|href=|url\(|@import/i);
    expect(html.match(/https?:\/\/[^"]+/g)).toEqual(["http://www.w3.org/2000/svg"]);

    // One row per member in the timeline's order, and exactly the critical path's rows marked.
    const timeline = await ledgerTimeline(success.runDir);
    const rows = [...html.matchAll(/<g class="row( crit)?( failed)?" data-member="([^"]+)"/g)];
    expect(rows.map((m) => m[3])).toEqual(timeline.members.map((m) => m.member));
    expect(rows.filter((m) => m[1] !== undefined).map((m) => m[3])).toEqual(timeline.criticalPath.members);
    expect(timeline.criticalPath.members).toEqual(["router-0", "agent-2"]);
    expect(html).toContain(`<p id="critical-path"><code>router-0</code> → <code>agent-2</code>`);
    for (const marker of ["admitted", "roster ready", "hold", "teardown"]) expect(html).toContain(`data-marker="${marker}"`);
    // The ledger still verifies with the report beside it.
    expect((await cohort(["ledger", "verify", success.runDir])).code).toBe(0);
  });

  it("report: the first failure with its output tail, every untrusted text escaped", async () => {
    expect(failure.exit.code).toBe(1);
    const out = path.join(tempDir("out"), "r.html");
    const r = await cohort(["ledger", "report", failure.runDir, "--out", out]);
    expect(r.code, r.stderr).toBe(0);
    const html = fs.readFileSync(out, "utf8");
    const failed = records(failure.runDir).find((x) => x.kind === "member-failed")!;
    expect(failed.member).toBe("web-2");
    expect(failed.outputTail).toContain('<script>alert("x")</script>');
    expect(html).toMatch(/<span class="badge failed" id="outcome">failed<\/span>/);
    expect(html).toContain(`<p><b>web-2</b>: member web-2 exited before it was ready (exit code 3)`);
    expect(html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; ]]&gt;");
    expect(html).not.toMatch(/<script/i);
    expect(html).toMatch(/<g class="row failed" data-member="web-2" data-starts="1">/);
    // `late` was never started: a row with no bar.
    expect(html).toMatch(/<g class="row" data-member="late-0" data-starts="0"><text[^>]*>late-0<\/text><\/g>/);
  });

  it("control characters in a member's output (NUL, ESC, CR) reach neither the terminal nor report.html raw: both show them as \\xHH", async () => {
    const { exit, runDir } = await runCohort({
      name: "ctl",
      roles: [{ name: "web", app: { command: ["sh", "-c", String.raw`printf 'a\000b\033[31mred\033[0m\tc\rd\n'; exit 3`], port: false }, readiness: onLog }],
    });
    expect(exit.code).toBe(1);
    // eslint-disable-next-line no-control-regex
    const raw = /[\u0000-\u0008\u000b-\u001f\u007f]/;
    expect(exit.stderr).not.toMatch(raw);
    expect(exit.stderr).toContain("  | a\\x00b\\x1b[31mred\\x1b[0m\tc\\x0dd");
    const html = fs.readFileSync(path.join(runDir, "report.html"), "utf8");
    expect(html).not.toMatch(raw);
    expect(html).toContain("a\\x00b\\x1b[31mred\\x1b[0m\tc\\x0dd");
  }, 60_000);

  it("junit: one testcase per member (classname = role, time = start -> ready), failures with reason and tail, never-started skipped; valid XML despite control characters", async () => {
    const out = path.join(tempDir("out"), "junit.xml");
    const r = await cohort(["ledger", "junit", failure.runDir, "--out", out]);
    expect(r.code, r.stderr).toBe(0);
    const raw = fs.readFileSync(out, "utf8");
    // eslint-disable-next-line no-control-regex -- the report must carry no control characters
    expect(raw).not.toMatch(/[\u0000-\u0008\u000B\u000C\u000E-\u001F]/);
    const root = parseXml(out);
    expect(root.tag).toBe("testsuites");
    const suite = root.children[0]!;
    expect(suite.tag).toBe("testsuite");
    expect(suite.attrs).toMatchObject({ name: path.basename(failure.runDir), tests: "4", failures: "1", errors: "0", skipped: "1" });
    expect(suite.attrs.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/);
    expect(root.attrs).toMatchObject({ tests: "4", failures: "1", errors: "0", skipped: "1" });
    const cases = suite.children.filter((c) => c.tag === "testcase");
    expect(cases.map((c) => [c.attrs.name, c.attrs.classname]).sort()).toEqual([
      ["late-0", "late"],
      ["web-0", "web"],
      ["web-1", "web"],
      ["web-2", "web"],
    ]);

    const recs = records(failure.runDir);
    const at = (kind: string, m: string) => recs.find((x) => x.kind === kind && x.member === m)!.elapsedMs;
    const web0 = cases.find((c) => c.attrs.name === "web-0")!;
    expect(web0.children).toEqual([]);
    expect(Number(web0.attrs.time)).toBeCloseTo((at("member-ready", "web-0") - at("member-started", "web-0")) / 1000, 3);

    const web2 = cases.find((c) => c.attrs.name === "web-2")!;
    expect(web2.children).toHaveLength(1);
    const f = web2.children[0]!;
    expect(f.tag).toBe("failure");
    expect(f.attrs).toEqual({ message: "member web-2 exited before it was ready (exit code 3)", type: "member-failed" });
    // The tail survives, minus the characters XML cannot carry (BEL, ESC, \001).
    expect(recs.find((x) => x.kind === "member-failed")!.outputTail).toContain("]]> \u0001\u0007\u001b[31mred");
    expect(f.text).toContain('last output:\n<script>alert("x")</script> & ]]> [31mred[0m');
    expect(cases.find((c) => c.attrs.name === "late-0")!.children.map((c) => [c.tag, c.attrs.message])).toEqual([
      ["skipped", "never started: the run ended failed (first failure: web-2)"],
    ]);
  });

  it("junit: a succeeded run has only passing testcases and the run's facts as properties", async () => {
    const r = await cohort(["ledger", "junit", success.runDir]);
    expect(r.code).toBe(0);
    const root = parseXml(path.join(success.runDir, "junit.xml"));
    const suite = root.children[0]!;
    expect(suite.attrs).toMatchObject({ tests: "4", failures: "0", errors: "0", skipped: "0" });
    const props = Object.fromEntries(suite.children.find((c) => c.tag === "properties")!.children.map((p) => [p.attrs.name, p.attrs.value]));
    expect(props).toMatchObject({
      profile: "host",
      backend: "process",
      outcome: "succeeded",
      size: "4",
      readyCount: "4",
      criticalPath: "router-0 -> agent-2",
      ledgerVerified: "true",
    });
  });

  it("an unfinished run (runtime SIGKILLed, no completion.json): the report says so; junit has a `run` error", async () => {
    const { exit, runDir } = await runCohort({ name: "crash", roles: [{ name: "slow", replicas: 2, app: member("1000"), readiness: onLog }] }, (child, artifacts) => {
      void (async () => {
        for (;;) {
          const dirs = fs.readdirSync(artifacts);
          const recs = dirs.length === 1 ? path.join(artifacts, dirs[0]!, "records.ndjson") : "";
          if (recs !== "" && fs.existsSync(recs) && (fs.readFileSync(recs, "utf8").match(/"kind":"member-started"/g) ?? []).length >= 2) break;
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        child.kill("SIGKILL");
      })();
    });
    expect(exit.signal).toBe("SIGKILL");
    expect(fs.existsSync(path.join(runDir, "completion.json"))).toBe(false);
    await cohort(["reap", runDir, "--grace", "500"]);
    expect(processesOfRun(path.basename(runDir))).toEqual([]);

    const r = await cohort(["ledger", "report", runDir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("unfinished: no completion.json");
    const html = fs.readFileSync(path.join(runDir, "report.html"), "utf8");
    expect(html).toContain('<p class="warn" id="unfinished">This run has no completion.json');
    expect(html).toMatch(/<span class="badge unfinished" id="outcome">unfinished: no completion.json/);
    expect(html).toMatch(/<p id="verify" class="ok">verified: \d+ records, hash chain and digests intact \(no completion yet\)/);

    const j = await cohort(["ledger", "junit", runDir, "--out", "-"]);
    expect(j.code).toBe(0);
    const file = path.join(tempDir("out"), "j.xml");
    fs.writeFileSync(file, j.stdout);
    const suite = parseXml(file).children[0]!;
    expect(suite.attrs).toMatchObject({ tests: "3", failures: "0", errors: "1", skipped: "2" });
    const run = suite.children.find((c) => c.attrs.name === "run")!;
    expect(run.children.map((c) => [c.tag, c.attrs.message])).toEqual([["error", "no completion.json: the run crashed or is still running"]]);

    // A crash in the middle of a write (a torn final line): still rendered from the complete records, the torn line named.
    fs.appendFileSync(path.join(runDir, "records.ndjson"), '{"seq":99,"kind":"member-rea');
    const torn = await cohort(["ledger", "report", runDir, "--out", "-"]);
    expect(torn.code, torn.stderr).toBe(0);
    expect(torn.stdout).toMatch(/<p id="verify" class="bad">does NOT verify: ledger \S+: torn-final-line at line \d+/);
    expect([...torn.stdout.matchAll(/<g class="row[^"]*" data-member="(slow-\d)"/g)].map((m) => m[1]).sort()).toEqual(["slow-0", "slow-1"]);
  }, 60_000);

  it("a runtime killed during its FIRST record write (one torn line): torn-final-line at line 1 for verify, report and junit; recover cuts it", async () => {
    const copy = path.join(tempDir("torn1"), path.basename(success.runDir));
    fs.cpSync(success.runDir, copy, { recursive: true });
    fs.rmSync(path.join(copy, "completion.json"));
    const file = path.join(copy, "records.ndjson");
    const first = fs.readFileSync(file).subarray(0, fs.readFileSync(file).indexOf(0x0a));
    const cut = Math.min(300, first.length - 1);
    fs.writeFileSync(file, first.subarray(0, cut)); // `head -c 300` of a one-line ledger
    const verify = await cohort(["ledger", "verify", copy]);
    expect(verify.code).toBe(1);
    expect(verify.stderr).toContain(`torn-final-line at line 1: the final line has no terminating newline (${cut} bytes from offset 0)`);
    const report = await cohort(["ledger", "report", copy, "--out", "-"]);
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toMatch(/<p id="verify" class="bad">does NOT verify: ledger \S+: torn-final-line at line 1:/);
    const junit = await cohort(["ledger", "junit", copy, "--out", "-"]);
    expect(junit.code, junit.stderr).toBe(0);
    expect(junit.stdout).toContain("torn-final-line at line 1");
    const recover = await cohort(["ledger", "recover", copy]);
    expect(recover.code, recover.stderr).toBe(0);
    expect(recover.stdout).toContain(`recovered: cut a torn final line (${cut} bytes`);
    expect((await cohort(["ledger", "verify", copy])).code).toBe(0);
  }, 60_000);

  it("a ledger that does not verify: the report and junit say so (a `ledger` error testcase)", async () => {
    const copy = path.join(tempDir("tampered"), path.basename(success.runDir));
    fs.cpSync(success.runDir, copy, { recursive: true });
    const file = path.join(copy, "records.ndjson");
    fs.writeFileSync(file, fs.readFileSync(file, "utf8").replace('"kind":"member-ready","member":"agent-0"', '"kind":"member-ready","member":"agent-1"'));
    const r = await cohort(["ledger", "report", copy]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("the ledger does NOT verify");
    expect(fs.readFileSync(path.join(copy, "report.html"), "utf8")).toMatch(/<p id="verify" class="bad">does NOT verify: ledger \S+: hash-chain-broken at line \d+/);
    await cohort(["ledger", "junit", copy]);
    const suite = parseXml(path.join(copy, "junit.xml")).children[0]!;
    expect(suite.children.find((c) => c.attrs.name === "ledger")?.children[0]?.tag).toBe("error");
  });

  it("report: restart attempts, a liveness failure, held, stopping and stopped in the timeline of a real run", async () => {
    // flaky-0 exits 1 on its first start and is restarted; gate-0 closes its listener during the hold (liveness).
    const closes = `const s=require("net").createServer().listen(+process.env.COHORT_PORT,"127.0.0.1");setTimeout(()=>s.close(),1500);setInterval(()=>{},1e6)`;
    const { exit, runDir } = await runCohort({
      name: "phases",
      hold: "20s",
      roles: [
        { name: "peer", replicas: 2, app: member("0.1"), readiness: onLog },
        {
          name: "flaky",
          app: { command: ["sh", "-c", "if [ -e once ]; then sleep 0.2; echo ready; exec sleep 1000; fi; : > once; exit 1"], port: false },
          readiness: onLog,
          restart: { attempts: 1, backoff: "100ms" },
        },
        { name: "gate", app: { command: [process.execPath, "-e", closes] }, readiness: { tcp: {} }, liveness: { period: "150ms", failureThreshold: 2 } },
      ],
    });
    expect(exit.code, exit.stderr).toBe(1);
    const recs = records(runDir);
    expect(recs.filter((r) => r.kind === "member-restarted").map((r) => r.member)).toEqual(["flaky-0"]);
    expect(recs.filter((r) => r.kind === "member-unhealthy").map((r) => r.member)).toEqual(["gate-0"]);
    const html = fs.readFileSync(path.join(runDir, "report.html"), "utf8");
    const row = (m: string): string => html.match(new RegExp(`<g class="row[^"]*" data-member="${m}"[^]*?</g>`))![0];
    expect(row("flaky-0")).toContain('data-starts="2"');
    expect(row("flaky-0")).toMatch(/<rect class="retried"[^>]*><title>flaky-0 attempt 1 failed: exited before it was ready \(exit code 1\)<\/title>/);
    expect(row("flaky-0")).toMatch(/<rect class="restart"[^>]*><title>flaky-0 restart attempt 2 at /);
    expect(row("gate-0")).toMatch(/^<g class="row failed"/);
    expect(row("gate-0")).toMatch(/<rect class="unhealthy"[^>]*><title>gate-0 unhealthy at [\d.]+ ms \(liveness probe\)/);
    expect(row("gate-0")).toContain('<rect class="failed-after-ready"');
    for (const m of ["peer-0", "peer-1", "flaky-0", "gate-0"]) {
      expect(row(m)).toContain('<rect class="held"');
      expect(row(m)).toContain('<rect class="stopping"');
      expect(row(m)).toContain('<rect class="stopped"');
    }
    expect(html).toContain('data-marker="hold ended"');
    // Per role: failed, restarted, unhealthy counts.
    expect(html).toMatch(/<tr><td>flaky<\/td><td class="n">1<\/td><td class="n">1<\/td><td class="n">0<\/td><td class="n">1<\/td><td class="n">0<\/td>/);
    expect(html).toMatch(/<tr><td>gate<\/td><td class="n">1<\/td><td class="n">1<\/td><td class="n">1<\/td><td class="n">0<\/td><td class="n">1<\/td>/);
    // Small runs are never collapsed.
    expect(html).not.toContain('class="role-row"');
  }, 60_000);

  it("report at 1,000 members: each role with many members is one row, the critical path still drawn member by member, every member in a <details> table", () => {
    const { manifest, records: recs, completion } = syntheticRun(1000);
    const view = runViewOf(manifest, recs, completion, { ok: true, report: { runId: manifest.runId, records: recs.length, complete: true, outcome: "succeeded" } as never });
    expect(view.timeline.criticalPath.members).toEqual(["router-0", "agent-5", "ui-0"]);
    const html = renderReport(view);
    const roleRows = [...html.matchAll(/<g class="role-row" data-role="([^"]+)" data-members="(\d+)" data-failed="(\d+)" data-restarted="(\d+)"/g)].map((m) => [
      m[1],
      m[2],
      m[3],
      m[4],
    ]);
    expect(roleRows).toEqual([["agent", "998", "0", "2"]]);
    // Roles of one member stay rows; of agent only the critical path's member is drawn alone.
    const rows = [...html.matchAll(/<g class="row( crit)?[^"]*" data-member="([^"]+)"/g)].map((m) => [m[2], m[1] !== undefined]);
    expect(rows).toEqual([
      ["router-0", true],
      ["agent-5", true],
      ["ui-0", true],
    ]);
    // The role row's label and tooltip carry the counts and the min/median/max of the phase boundaries.
    expect(html).toContain(">agent ×998</text>");
    expect(html).toContain(">998/998 ready, 2 restarted</text>");
    expect(html).toMatch(
      /agent: 998 members, 998 ready, 0 failed, 2 restarted, 0 unhealthy \(ms from run start\)\nscheduled \(998\): min 9\.0 ms, median 9\.0 ms, max 9\.0 ms\nstarted \(998\): min 10\.0 ms, median [\d.]+ ms, max 106\.0 ms\nready \(998\): min [\d.]+ ms, median [\d.]+ ms, max 900\.0 ms/,
    );
    expect(html).toContain('<p id="collapsed">');
    // The SVG stays small: 3 member rows and one role row, not 1,000 rows.
    const svgHeight = Number(html.match(/<svg [^>]*height="(\d+)"/)![1]);
    expect(svgHeight).toBeLessThan(200);
    // The table: one <details> per role, 1,000 member rows in all.
    expect([...html.matchAll(/<details class="role" data-role="([^"]+)"/g)].map((m) => m[1])).toEqual(["router", "agent", "ui"]);
    expect(html.match(/<tr class="member[^"]*" data-member=/g)).toHaveLength(1000);
    expect(html).toContain("<summary>agent: 998 members, 998 ready; critical path: agent-5</summary>");

    // At the thresholds (a role of 100 in a run of 102) nothing collapses: one row per member.
    const small = syntheticRun(COLLAPSE_ROLE_MEMBERS + 2);
    const at = renderReport(runViewOf(small.manifest, small.records, small.completion, { ok: true, report: {} as never }));
    expect(at).not.toContain('class="role-row"');
    expect(at.match(/<g class="row[^"]*" data-member=/g)).toHaveLength(COLLAPSE_ROLE_MEMBERS + 2);
    expect(COLLAPSE_MEMBERS).toBe(200);
  });

  it("refuses a directory without a ledger (exit 1) and a missing DIR (usage, exit 2)", async () => {
    const empty = tempDir("empty");
    const r = await cohort(["ledger", "report", empty]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^cohort: ledger report failed: ledger \S+: manifest-missing/);
    expect((await cohort(["ledger", "junit"])).code).toBe(2);
  });

  it("--out: a directory or an empty path is a usage error naming --out; an unwritable target one line naming it; no temp file left", async () => {
    const outDir = tempDir("outdir");
    const rootTemps = () => fs.readdirSync("/").filter((f) => f.includes(".tmp-"));
    const before = rootTemps();
    for (const sub of ["report", "junit"]) {
      for (const out of [outDir, `${outDir}/`, "/tmp"]) {
        const r = await cohort(["ledger", sub, success.runDir, "--out", out]);
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr.split("\n")[0]).toBe(
          `cohort: ledger ${sub}: --out ${out} is a directory; name a file in it, e.g. --out ${path.join(out, sub === "report" ? "report.html" : "junit.xml")}`,
        );
      }
      const empty = await cohort(["ledger", sub, success.runDir, "--out", ""]);
      expect(empty.code).toBe(2);
      expect(empty.stderr.split("\n")[0]).toBe(`cohort: ledger ${sub}: --out expects a file path or - (stdout); got ""`);
      const denied = await cohort(["ledger", sub, success.runDir, "--out", "/proc/x"]);
      expect(denied.code).toBe(1);
      expect(denied.stderr).toMatch(new RegExp(`^cohort: ledger ${sub} failed: cannot write /proc/x: E[A-Z]+\n$`));
    }
    expect(fs.readdirSync(outDir)).toEqual([]);
    expect(rootTemps()).toEqual(before);
  });
});

/**
 * The HTML report in a real browser: headless Chromium (Debian's `chromium`; `bash scripts/chromium.sh`
 * installs it, `.ci/run` calls that) loads the `report.html` that `cohort run` wrote for a REAL 50-member run
 * (process backend, bundled CLI; one role restarted once, a hold) over the DevTools protocol (./chromium-cdp.ts)
 * and the rendered DOM is checked: no console error, exception or failed load; one laid-out timeline row per
 * member, in the ledger timeline's order; exactly the critical path's rows marked; one table row per member. A
 * control page with a `console.error` proves the error capture catches one. A synthetic 1,000-member report is
 * loaded too (collapsed roles). Without Chromium the tests skip and say why.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderReport } from "../../runtime/core/ledger/report";
import { ledgerTimeline } from "../../runtime/core/ledger/show";
import { runViewOf } from "../../runtime/core/ledger/view";
import { chromiumMissingReason, findChromium, openPage, type Page } from "./chromium-cdp";
import { syntheticRun } from "./ledger-fixtures";
import { buildBundle, tempDir } from "./process-helpers";

const chromium = findChromium();
if (chromium === null) console.warn(`ledger-report-chromium: skipped: ${chromiumMissingReason}`);

const onLog = { log: { pattern: "^ready$" } };

describe.skipIf(chromium === null)("the report in headless Chromium", () => {
  let runDir = "";
  let summary: { outcome: string; reportPath: string | null; size: number };
  let page: Page;

  beforeAll(async () => {
    const bundle = await buildBundle();
    const artifacts = tempDir("artifacts");
    const spec = path.join(tempDir("spec"), "cohort.json");
    fs.writeFileSync(
      spec,
      JSON.stringify({
        apiVersion: "cohort-lab/v1",
        kind: "Cohort",
        name: "fifty",
        stopGracePeriod: "2s",
        hold: "1s",
        roles: [
          { name: "router", app: { command: ["sh", "-c", "sleep 0.2; echo ready; exec sleep 1000"], port: false }, readiness: onLog },
          {
            name: "agent",
            replicas: 45,
            needs: ["router"],
            app: { command: ["sh", "-c", "sleep 0.$((COHORT_INDEX % 9 + 1)); echo ready; exec sleep 1000"], port: false },
            readiness: onLog,
          },
          {
            name: "flaky",
            replicas: 4,
            needs: ["router"],
            // Exits 1 on its first start (its directory survives the restart), ready on the second.
            app: { command: ["sh", "-c", "if [ -e once ]; then sleep 0.3; echo ready; exec sleep 1000; fi; : > once; exit 1"], port: false },
            readiness: onLog,
            restart: { attempts: 1, backoff: "100ms" },
          },
        ],
      }),
    );
    const exit = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [bundle, "run", "--spec", spec, "--artifacts", artifacts], { stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
    expect(exit.code, exit.stderr).toBe(0);
    summary = JSON.parse(exit.stdout.trim()) as typeof summary;
    runDir = path.join(artifacts, fs.readdirSync(artifacts)[0]!);
    page = await openPage(chromium!, pathToFileURL(summary.reportPath!).href);
  }, 180_000);

  afterAll(async () => {
    await page?.close();
  });

  it("the 50-member report renders without a console error, exception or failed load", async () => {
    expect(summary).toMatchObject({ outcome: "succeeded", size: 50, reportPath: path.join(runDir, "report.html") });
    // Let anything asynchronous the page might do surface (it has no script: nothing should).
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(page.errors).toEqual([]);
    expect(await page.evaluate<number>("document.scripts.length")).toBe(0);
    expect(await page.evaluate<string>("document.title")).toMatch(/^cohort run fifty-\S+: succeeded$/);
  });

  it("one laid-out timeline row per member in the ledger's order, exactly the critical path marked, one table row per member", async () => {
    const timeline = await ledgerTimeline(runDir);
    expect(timeline.members).toHaveLength(50);
    const rows = await page.evaluate<{ member: string; crit: boolean; top: number; height: number; width: number; bars: number; outlined: boolean; label: string }[]>(`
      [...document.querySelectorAll("svg g.row")].map((g) => {
        const box = g.getBoundingClientRect();
        return {
          member: g.dataset.member,
          crit: g.classList.contains("crit"),
          top: box.top,
          height: box.height,
          width: box.width,
          bars: g.querySelectorAll("rect[class]").length,
          outlined: [...g.querySelectorAll("rect:not([class])")].some((r) => r.getAttribute("stroke") === "#0550ae"),
          label: g.querySelector("text")?.textContent ?? "",
        };
      })`);
    expect(rows.map((r) => r.member)).toEqual(timeline.members.map((m) => m.member));
    // Laid out: every row has a box and bars, each below the previous one.
    for (const r of rows) {
      expect(r.height, r.member).toBeGreaterThan(10);
      expect(r.width, r.member).toBeGreaterThan(50);
      expect(r.bars, r.member).toBeGreaterThanOrEqual(4);
    }
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.top).toBeGreaterThan(rows[i - 1]!.top);
    // The critical path: those rows and no other are marked, outlined and starred, and named in #critical-path.
    expect(timeline.criticalPath.members.length).toBeGreaterThanOrEqual(2);
    expect(rows.filter((r) => r.crit).map((r) => r.member)).toEqual(timeline.criticalPath.members);
    for (const r of rows) {
      expect(r.outlined, r.member).toBe(r.crit);
      expect(r.label.startsWith("★ "), r.member).toBe(r.crit);
    }
    expect(await page.evaluate<string>(`document.getElementById("critical-path").textContent`)).toContain(timeline.criticalPath.members.join(" → "));
    // The restarted role: 2 starts, a restart tick, and the failed attempt shaded.
    const flaky = rows.filter((r) => r.member.startsWith("flaky-")).map((r) => r.member);
    expect(flaky).toHaveLength(4);
    for (const m of flaky) {
      expect(
        await page.evaluate<[string, number, number]>(
          `(() => { const g = document.querySelector('g.row[data-member="${m}"]'); return [g.dataset.starts, g.querySelectorAll("rect.restart").length, g.querySelectorAll("rect.retried").length]; })()`,
        ),
      ).toEqual(["2", 1, 1]);
    }
    expect(await page.evaluate<number>(`document.querySelectorAll("svg g.row rect.held").length`)).toBe(50);
    // The member table.
    expect(await page.evaluate<string[]>(`[...document.querySelectorAll("tr.member")].map((tr) => tr.dataset.member)`)).toEqual(timeline.members.map((m) => m.member));
    expect(await page.evaluate<number>(`document.querySelectorAll("svg g.role-row").length`)).toBe(0);
  });

  it("control: the error capture sees a console.error, an exception and a failed load", async () => {
    const file = path.join(tempDir("control"), "bad.html");
    fs.writeFileSync(
      file,
      `${fs.readFileSync(summary.reportPath!, "utf8")}<script>console.error("planted"); setTimeout(() => { throw new Error("thrown"); }, 0);</script><img src="missing.png">`,
    );
    const bad = await openPage(chromium!, pathToFileURL(file).href);
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(bad.errors.map((e) => e.source).sort()).toEqual(["console", "exception", "log"]);
      expect(bad.errors.find((e) => e.source === "console")?.text).toBe("planted");
    } finally {
      await bad.close();
    }
  }, 60_000);

  it("a 1,000-member report (synthetic ledger) renders collapsed: one role row, the critical path's members alone, 1,000 table rows in <details>", async () => {
    const { manifest, records, completion } = syntheticRun(1000);
    const file = path.join(tempDir("big"), "report.html");
    fs.writeFileSync(file, renderReport(runViewOf(manifest, records, completion, { ok: true, report: {} as never })));
    const big = await openPage(chromium!, pathToFileURL(file).href);
    try {
      expect(big.errors).toEqual([]);
      const facts = await big.evaluate<{ roles: string[]; rows: string[]; details: number; members: number; svgHeight: number }>(`({
        roles: [...document.querySelectorAll("svg g.role-row")].map((g) => g.dataset.role + " " + g.dataset.members),
        rows: [...document.querySelectorAll("svg g.row")].map((g) => g.dataset.member),
        details: document.querySelectorAll("details.role").length,
        members: document.querySelectorAll("tr.member").length,
        svgHeight: document.querySelector("svg").getBoundingClientRect().height,
      })`);
      expect(facts).toMatchObject({ roles: ["agent 998"], rows: ["router-0", "agent-5", "ui-0"], details: 3, members: 1000 });
      expect(facts.svgHeight).toBeLessThan(200);
    } finally {
      await big.close();
    }
  }, 60_000);
});

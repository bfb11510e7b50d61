import { describe, expect, it } from "vitest";
import { OUTCOMES, parseRunSummary, runSummarySchema, type RunSummary } from "../../runtime/core/summary";

describe("parseRunSummary (the runtime's one-line JSON summary)", () => {
  const summary: RunSummary = {
    runId: "society-20261130T080000Z-a1b2c3",
    outcome: "succeeded",
    size: 4,
    readyCount: 4,
    timeToReadyMs: 15234,
    ledgerPath: "/repo/artifacts/society-20261130T080000Z-a1b2c3",
    reportPath: "/repo/artifacts/society-20261130T080000Z-a1b2c3/report.html",
    firstFailure: null,
  };

  it("lists the three outcomes", () => {
    expect(OUTCOMES).toEqual(["succeeded", "failed", "interrupted"]);
  });

  it("parses the one JSON line", () => {
    expect(parseRunSummary(JSON.stringify(summary))).toEqual(summary);
  });

  it("parses a failure naming a member, or none (a run-level failure)", () => {
    const failed = { ...summary, outcome: "failed", readyCount: 1, timeToReadyMs: null, firstFailure: { member: "agent-0", reason: "exited" } };
    expect(parseRunSummary(JSON.stringify(failed))).toEqual(failed);
    const runLevel = { ...failed, firstFailure: { member: null, reason: "admission timed out" } };
    expect(parseRunSummary(JSON.stringify(runLevel))).toEqual(runLevel);
  });

  it("reads an older summary without reportPath (and a null one) as reportPath null, and drops unknown fields", () => {
    const { reportPath: _dropped, ...older } = summary;
    expect(parseRunSummary(JSON.stringify(older))).toEqual({ ...older, reportPath: null });
    expect(parseRunSummary(JSON.stringify({ ...summary, reportPath: null }))).toEqual({ ...older, reportPath: null });
    expect(parseRunSummary(JSON.stringify({ ...summary, extra: 1 }))).toEqual(summary);
  });

  it("takes the last non-empty line", () => {
    expect(parseRunSummary(`progress\n${JSON.stringify({ ...summary, runId: "x" })}\n${JSON.stringify(summary)}\n\n`).runId).toBe(summary.runId);
  });

  it.each<[string, string, string]>([
    ["no output", "", "the cohort runtime printed no summary line on stdout"],
    ["blank lines only", "\n  \n", "the cohort runtime printed no summary line on stdout"],
    ["not JSON", "hello", "the cohort runtime's summary line is not JSON: hello"],
    ["a JSON array", "[1]", "the cohort runtime's summary line is not a JSON object: [1]"],
    [
      "a bad outcome",
      JSON.stringify({ ...summary, outcome: "ok" }),
      `the cohort runtime's summary has no valid "outcome": ${JSON.stringify({ ...summary, outcome: "ok" }).slice(0, 200)}`,
    ],
    ["an empty run id", JSON.stringify({ ...summary, runId: "" }), `has no valid "runId"`],
    ["a fractional size", JSON.stringify({ ...summary, size: 1.5 }), `has no valid "size"`],
    ["a string readyCount", JSON.stringify({ ...summary, readyCount: "4" }), `has no valid "readyCount"`],
    ["a missing timeToReadyMs", JSON.stringify({ ...summary, timeToReadyMs: undefined }), `has no valid "timeToReadyMs"`],
    [
      "a relative ledger path",
      JSON.stringify({ ...summary, ledgerPath: "artifacts/x" }),
      `the cohort runtime's summary has no valid "ledgerPath": ${JSON.stringify({ ...summary, ledgerPath: "artifacts/x" }).slice(0, 200)} (expected an absolute path)`,
    ],
    ["a relative report path", JSON.stringify({ ...summary, reportPath: "x/report.html" }), `has no valid "reportPath"`],
    ["a failure without a reason", JSON.stringify({ ...summary, firstFailure: { member: "a" } }), `has no valid "firstFailure.reason"`],
  ])("refuses %s", (_what, stdout, message) => {
    expect(() => parseRunSummary(stdout)).toThrow(message);
  });

  it("is the schema's output shape", () => {
    expect(runSummarySchema.parse(summary)).toEqual(summary);
  });
});

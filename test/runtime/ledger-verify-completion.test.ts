/**
 * `ledger verify` checks completion.json against the hash-chained records (completion.json is not in the chain):
 * a failed run's completion edited to `succeeded` was reported `ok ... outcome succeeded` (found by review), and so
 * were an edited ready count and time to ready. The run itself is written by the real scheduler-facing writer.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { LedgerVerifyError } from "../../runtime/core/errors";
import { LedgerWriter } from "../../runtime/core/ledger";
import { verifyLedger } from "../../runtime/core/ledger/verify";
import { manifestFor, manualClock, tempRunDir } from "./ledger-fixtures";

type Rec = [kind: string, fields?: Record<string, unknown>];

/** Writes `records` and the completion `completion` (as the scheduler would) and returns the run directory. */
async function run(records: Rec[], completion: Record<string, unknown>): Promise<string> {
  const dir = tempRunDir();
  const clock = manualClock();
  const writer = await LedgerWriter.open(dir, manifestFor(), { ...clock.opts, fsync: "none" });
  records.forEach(([kind, fields], i) => {
    clock.set((i + 1) * 10);
    void writer.append(kind, fields ?? {});
  });
  await writer.complete({ outcome: "succeeded", firstFailure: null, phasesMs: { startup: 10 }, ...completion } as Parameters<LedgerWriter["complete"]>[0]);
  return dir;
}

/** Rewrites fields of completion.json in place, as a hand edit would. */
function edit(dir: string, fields: Record<string, unknown>): void {
  const file = path.join(dir, "completion.json");
  fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(fs.readFileSync(file, "utf8")), ...fields }));
}

async function mismatch(dir: string): Promise<string> {
  const error = await verifyLedger(dir).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LedgerVerifyError);
  expect((error as LedgerVerifyError).code).toBe("completion-mismatch");
  return (error as LedgerVerifyError).message;
}

const failedRun: Rec[] = [
  ["run-started"],
  ["member-started", { member: "web-0" }],
  ["member-failed", { member: "web-0", reason: "exited 1" }],
  ["run-failed", { member: "web-0", reason: "member web-0 exited 1" }],
  ["teardown-started"],
  ["teardown-finished"],
];
const succeededRun: Rec[] = [
  ["run-started"],
  ["roster-admitted"],
  ["member-started", { member: "web-0" }],
  ["member-ready", { member: "web-0" }],
  ["member-started", { member: "web-1" }],
  ["member-ready", { member: "web-1" }],
  ["roster-ready", { readyCount: 2, timeToReadyMs: 40 }],
  ["teardown-started"],
  ["teardown-finished"],
];

describe("ledger verify: completion.json against the records", () => {
  it("a failed run's completion edited to succeeded is refused, naming the record", async () => {
    const dir = await run(failedRun, { outcome: "failed", firstFailure: { member: "web-0", reason: "member web-0 exited 1" }, readyCount: 0, timeToReadyMs: null });
    expect((await verifyLedger(dir)).outcome).toBe("failed");
    edit(dir, { outcome: "succeeded", firstFailure: null, readyCount: 2 });
    expect(await mismatch(dir)).toContain("completion.json says outcome succeeded, but the records hold run-failed (line 4)");
    edit(dir, { outcome: "interrupted", firstFailure: null, readyCount: 0 });
    expect(await mismatch(dir)).toContain("says outcome interrupted, but the records hold run-failed");
  });

  it("a succeeded run's ready count and time to ready are the records' own", async () => {
    const dir = await run(succeededRun, { readyCount: 2, timeToReadyMs: 40 });
    expect(await verifyLedger(dir)).toMatchObject({ ok: true, outcome: "succeeded" });
    edit(dir, { readyCount: 5 });
    expect(await mismatch(dir)).toContain("says readyCount 5, but the records hold 2 member-ready");
    edit(dir, { readyCount: 2, timeToReadyMs: 1 });
    expect(await mismatch(dir)).toContain("says timeToReadyMs 1, but roster-ready (line 7) says 40");
  });

  it("succeeded beside an interruption or a member failure is refused; failed without run-failed is accepted (a lost ledger write)", async () => {
    const interrupted = await run([["run-started"], ["run-interrupted", { signal: "SIGTERM" }], ["teardown-finished"]], {});
    expect(await mismatch(interrupted)).toContain("says outcome succeeded, but the records hold run-interrupted (line 2)");
    const lostWrite = await run(succeededRun.slice(0, 7), {
      outcome: "failed",
      firstFailure: { member: null, reason: "ledger append (teardown-started) failed: ENOSPC" },
      readyCount: 2,
    });
    expect(await verifyLedger(lostWrite)).toMatchObject({ ok: true, outcome: "failed" });
  });
});

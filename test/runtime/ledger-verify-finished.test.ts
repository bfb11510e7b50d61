/**
 * `ledger verify` of a finished run whose completion.json is missing (issue #16, left-over case): the
 * records say the run finished (its last record is `teardown-finished`, which the scheduler writes just
 * before completion.json), so the missing completion is damage, not a crash or a run still going.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../runtime/cli";
import { LedgerVerifyError } from "../../runtime/core/errors";
import { LedgerWriter } from "../../runtime/core/ledger";
import { verifyLedger } from "../../runtime/core/ledger/verify";
import { manifestFor, manualClock, tempRunDir } from "./ledger-fixtures";

/** A ledger with the records of a whole run: started, one member, teardown started and finished. */
async function finishedRun(complete: boolean, last = "teardown-finished"): Promise<string> {
  const dir = tempRunDir();
  const clock = manualClock();
  const writer = await LedgerWriter.open(dir, manifestFor(), { ...clock.opts, fsync: "none" });
  const kinds = ["run-started", "member-started", "teardown-started", last];
  kinds.forEach((kind, i) => {
    clock.set((i + 1) * 10);
    void writer.append(kind, kind === "member-started" ? { member: "router-0" } : {});
  });
  if (complete) await writer.complete({ outcome: "succeeded", firstFailure: null, phasesMs: { startup: 10 } });
  else await writer.close();
  return dir;
}

/** Runs the CLI in-process and collects its output. */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const sink = (append: (s: string) => void) => ({ write: (chunk: string | Uint8Array) => (append(String(chunk)), true) }) as unknown as NodeJS.WritableStream;
  const code = await main(args, { stdout: sink((s) => (stdout += s)), stderr: sink((s) => (stderr += s)), stdin: () => "" });
  return { code, stdout, stderr };
}

describe("ledger verify: a finished run without completion.json", () => {
  it("is refused with completion-missing, naming the file and the record that shows the run finished", async () => {
    const dir = await finishedRun(true);
    expect((await verifyLedger(dir)).complete).toBe(true);
    fs.rmSync(path.join(dir, "completion.json"));
    const error = await verifyLedger(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerVerifyError);
    expect((error as LedgerVerifyError).code).toBe("completion-missing");
    expect((error as LedgerVerifyError).message).toContain("completion.json does not exist but the run finished (line 4 is teardown-finished)");
    const r = await cli(["ledger", "verify", dir]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("completion-missing");
    expect(r.stderr).toContain("completion.json does not exist but the run finished");
  });

  it("a run that did not finish (crashed, or still going) still verifies without completion.json", async () => {
    const dir = await finishedRun(false, "member-ready");
    const report = await verifyLedger(dir);
    expect(report).toMatchObject({ ok: true, complete: false, outcome: null, records: 4 });
    const r = await cli(["ledger", "verify", dir]);
    expect(r.code).toBe(0);
  });
});

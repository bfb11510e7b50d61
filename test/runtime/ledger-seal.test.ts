/**
 * Completing the ledger of a run that lost its runtime (runtime/core/ledger/seal.ts, `LedgerWriter.resume`): what
 * the workflow's cleanup step does when runCohort did not return. The lost run is a real `cohort run` (the shipped
 * bundle, host profile) SIGKILLed mid-hold; the live run is one still running in this PID namespace.
 */
import { type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { LedgerWriter, readLedger, LedgerBusyError, runProcessAlive, SEAL_LOCK_FILE, sealLostRun, verifyLedger } from "../../runtime/core/ledger";
import { LedgerExistsError, LedgerVerifyError } from "../../runtime/core/errors";
import { readProcStat } from "../../runtime/core/proc-stat";
import { buildLedger, crashedLedger, manifestFor, tempRunDir } from "./ledger-fixtures";
import { buildBundle, runBundle, tempDir, type CliExit } from "./process-helpers";

let bundle = "";

beforeAll(async () => {
  bundle = await buildBundle({ shipped: true });
}, 300_000);

/** A run id of this test's own (a run id is never reused: the process backend names the run's cgroups by it). */
const freshRunId = (): string => `sealed-20261204T000000Z-${randomBytes(3).toString("hex")}`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts `cohort run --run-id <runId>` of 2 members held 60 s; resolves once the roster is ready. */
async function heldRun(runId: string): Promise<{ child: ChildProcess; done: Promise<CliExit>; runDir: string }> {
  const artifacts = tempDir("seal-artifacts");
  const spec = path.join(tempDir("seal-spec"), "cohort.json");
  const member = { app: { command: ["sh", "-c", "echo ready; exec sleep 1000"], port: false }, readiness: { log: { pattern: "^ready$" } } };
  fs.writeFileSync(
    spec,
    JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "sealed", hold: "60s", stopGracePeriod: "2s", roles: [{ name: "web", replicas: 2, ...member }] }),
  );
  let child: ChildProcess | undefined;
  const done = runBundle(bundle, ["run", "--spec", spec, "--artifacts", artifacts, "--run-id", runId], { onStart: (c) => (child = c) });
  const runDir = path.join(artifacts, runId);
  let ended: CliExit | undefined;
  void done.then((exit) => (ended = exit));
  for (const deadline = Date.now() + 60_000; ; await sleep(25)) {
    if (ended !== undefined) throw new Error(`run ${runId} ended before its hold (${ended.code ?? ended.signal}): ${ended.stderr.slice(-3000).replace(/\n/g, " | ")}`);
    if (Date.now() > deadline) throw new Error(`run ${runId} not held after 60 s`);
    const recs = path.join(runDir, "records.ndjson");
    if (fs.existsSync(recs) && fs.readFileSync(recs, "utf8").includes('"kind":"hold-started"')) break;
  }
  return { child: child!, done, runDir };
}

function filesOf(dir: string): Record<string, string> {
  const files = fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isFile());
  return Object.fromEntries(files.map((e) => [e.name, fs.readFileSync(path.join(dir, e.name), "utf8")]));
}

describe("sealLostRun", () => {
  it("completes the ledger a SIGKILLed run left: its members recorded as stopped by the cleanup, run-interrupted, outcome interrupted; it verifies; a second call changes nothing", async () => {
    const runId = freshRunId();
    const run = await heldRun(runId);
    run.child.kill("SIGKILL");
    expect((await run.done).signal).toBe("SIGKILL");
    expect(fs.existsSync(path.join(run.runDir, "completion.json"))).toBe(false);
    expect(runProcessAlive(run.child.pid, runId)).toBe(false);
    const before = await readLedger(run.runDir);

    const report = await sealLostRun(run.runDir, "activity Heartbeat timeout");
    expect(report).toEqual({ runDir: run.runDir, state: "sealed", outcome: "interrupted", stopped: ["web-0", "web-1"] });
    expect(await verifyLedger(run.runDir)).toMatchObject({ ok: true, complete: true, outcome: "interrupted", records: before.records.length + 4 });
    const after = await readLedger(run.runDir);
    expect(after.records.slice(0, before.records.length)).toEqual(before.records);
    const added = after.records.slice(before.records.length);
    expect(added.map((r) => [r.kind, r.member ?? null])).toEqual([
      ["member-stopped", "web-0"],
      ["member-stopped", "web-1"],
      ["run-interrupted", null],
      ["teardown-finished", null],
    ]);
    expect(added[2]).toMatchObject({ lost: "activity Heartbeat timeout" });
    // elapsedMs goes on from the run's (its clock, plus the wall time since the last record).
    expect(added[0]!.elapsedMs).toBeGreaterThanOrEqual(before.records.at(-1)!.elapsedMs);
    expect(after.completion).toMatchObject({ outcome: "interrupted", firstFailure: null, interruptedBy: "runtime-lost", readyCount: 2, size: 2, sealedBy: "cleanup" });
    expect(after.completion!.phasesMs.hold).toBeGreaterThanOrEqual(0);
    expect(after.completion!.timeToReadyMs).toBeGreaterThan(0);
    // The shipped CLI agrees.
    const verify = await runBundle(bundle, ["ledger", "verify", run.runDir]);
    expect(verify.code, verify.stderr).toBe(0);

    const files = filesOf(run.runDir);
    expect(await sealLostRun(run.runDir, "again")).toEqual({ runDir: run.runDir, state: "complete", outcome: "interrupted", stopped: [] });
    expect(filesOf(run.runDir)).toEqual(files);
    // What the SIGKILLed runtime left besides its ledger (its members' cgroups) goes the usual way.
    const reap = await runBundle(bundle, ["reap", run.runDir]);
    expect(reap.code, reap.stderr).toBe(0);
  }, 120_000);

  it("a run still alive in this PID namespace is waited for and never written beside: refused after waitMs with nothing written; once it stops on its own, its own completion is kept", async () => {
    const runId = freshRunId();
    const run = await heldRun(runId);
    expect(runProcessAlive(run.child.pid, runId)).toBe(true);
    expect(runProcessAlive(run.child.pid, "another-run")).toBe(false);
    const files = filesOf(run.runDir);
    const refused = await sealLostRun(run.runDir, "lost?", { waitMs: 300 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LedgerBusyError);
    expect((refused as Error).message).toBe(`ledger ${run.runDir}: the run's runtime (waited 300 ms) is still running (pid ${run.child.pid}); the ledger is not sealed beside it`);
    expect(filesOf(run.runDir)).toEqual(files);

    const waiting = sealLostRun(run.runDir, "lost?", { waitMs: 60_000 });
    await sleep(200);
    run.child.kill("SIGTERM");
    expect((await run.done).code).toBe(143);
    const report = await waiting;
    expect(report).toEqual({ runDir: run.runDir, state: "complete", outcome: "interrupted", stopped: [] });
    const { records, completion } = await readLedger(run.runDir);
    expect(records.filter((r) => r.kind === "run-interrupted")).toEqual([expect.objectContaining({ signal: "SIGTERM" })]);
    expect(completion).not.toHaveProperty("sealedBy");
  }, 120_000);

  it("cuts a torn final line first (kept beside the file), then seals", async () => {
    const { dir, writer } = await buildLedger(4);
    await writer.close();
    fs.appendFileSync(path.join(dir, "records.ndjson"), '{"seq":5,"at":"2026-01-02T03:04:0');
    const report = await sealLostRun(dir, "node lost");
    expect(report).toMatchObject({ state: "sealed", outcome: "interrupted", stopped: ["agent-0", "agent-1", "agent-2"] });
    expect(fs.readdirSync(dir).filter((f) => f.startsWith("records.ndjson.torn-"))).toHaveLength(1);
    expect(await verifyLedger(dir)).toMatchObject({ complete: true, outcome: "interrupted", records: 4 + 5 });
  });

  it("a run whose records already say it failed is completed as failed, with that failure", async () => {
    const dir = await crashedLedger(tempRunDir(), [
      ["run-started", { size: 4 }],
      ["member-started", { member: "agent-0" }],
      ["member-started", { member: "agent-1" }],
      ["member-exited", { member: "agent-1", exitCode: 3, signal: null }],
      ["member-failed", { member: "agent-1", reason: "exited 3 before ready" }],
      ["run-failed", { member: "agent-1", reason: "exited 3 before ready" }],
    ]);
    const report = await sealLostRun(dir, "activity Heartbeat timeout");
    expect(report.outcome).toBe("failed");
    const { records, completion } = await readLedger(dir);
    expect(records.map((r) => r.kind)).not.toContain("run-interrupted");
    expect(completion).toMatchObject({ outcome: "failed", firstFailure: { member: "agent-1", reason: "exited 3 before ready" } });
    expect(completion).not.toHaveProperty("interruptedBy");
    expect(completion).toMatchObject({ size: 4, readyCount: 0 });
    // agent-1 had exited: only agent-0 is recorded as stopped by the cleanup.
    expect(report.stopped).toEqual(["agent-0"]);
    expect(await verifyLedger(dir)).toMatchObject({ outcome: "failed" });
  });

  it("a seal that died midway is finished by the next one without repeating itself: one run-interrupted, one teardown-finished", async () => {
    const { dir, writer } = await buildLedger(4);
    await writer.close();
    // The first seal wrote the first member's stop and the interruption, then died.
    const { writer: first, records: resumed } = await LedgerWriter.resume(dir);
    expect(resumed).toEqual((await readLedger(dir)).records);
    await first.append("member-stopped", { member: "agent-0", by: "cleanup" });
    await first.append("run-interrupted", { lost: "activity Heartbeat timeout" });
    await first.close();
    const report = await sealLostRun(dir, "activity Heartbeat timeout (attempt 2)");
    expect(report).toMatchObject({ state: "sealed", outcome: "interrupted", stopped: ["agent-1", "agent-2"] });
    const { records, completion } = await readLedger(dir);
    expect(records.filter((r) => r.kind === "run-interrupted")).toHaveLength(1);
    expect(records.filter((r) => r.kind === "member-stopped").map((r) => r.member)).toEqual(["agent-0", "agent-1", "agent-2"]);
    expect(records.at(-1)!.kind).toBe("teardown-finished");
    expect(completion).toMatchObject({ outcome: "interrupted", interruptedBy: "runtime-lost" });
    expect(await verifyLedger(dir)).toMatchObject({ complete: true, records: 4 + 2 + 3 });
  });

  it("records that already end the run (its writer died after teardown-finished) get only their completion: succeeded when nothing failed or interrupted it", async () => {
    const dir = await crashedLedger(tempRunDir(), [
      ["run-started", { size: 1 }],
      ["roster-admitted"],
      ["member-started", { member: "router-0" }],
      ["member-ready", { member: "router-0" }],
      ["roster-ready", { readyCount: 1, timeToReadyMs: 12.5 }],
      ["hold-started"],
      ["hold-ended"],
      ["teardown-started"],
      ["member-stopped", { member: "router-0" }],
      ["teardown-finished"],
    ]);
    await expect(verifyLedger(dir)).rejects.toMatchObject({ code: "completion-missing" });
    const report = await sealLostRun(dir, "activity Heartbeat timeout");
    expect(report).toEqual({ runDir: dir, state: "sealed", outcome: "succeeded", stopped: [] });
    const { records, completion } = await readLedger(dir);
    expect(records).toHaveLength(10);
    expect(completion).toMatchObject({ outcome: "succeeded", firstFailure: null, readyCount: 1, size: 1, timeToReadyMs: 12.5 });
    expect(completion).not.toHaveProperty("interruptedBy");
    expect(await verifyLedger(dir)).toMatchObject({ complete: true, outcome: "succeeded" });
  });

  it("a member restarted after an exit is running again: recorded stopped; the run's own run-interrupted names the interruption", async () => {
    const dir = await crashedLedger(tempRunDir(), [
      ["run-started", { size: 2 }],
      ["member-started", { member: "a-0" }],
      ["member-started", { member: "a-1" }],
      ["member-exited", { member: "a-0", exitCode: 0, signal: null }],
      ["member-exited", { member: "a-1", exitCode: 1, signal: null }],
      ["member-restarted", { member: "a-1", attempt: 2 }],
      ["member-started", { member: "a-1", attempt: 2 }],
      ["member-ready", { member: "a-1" }],
      ["run-interrupted", { signal: "SIGTERM" }],
    ]);
    const report = await sealLostRun(dir, "activity Heartbeat timeout");
    expect(report.stopped).toEqual(["a-1"]);
    const { records, completion } = await readLedger(dir);
    expect(records.filter((r) => r.kind === "run-interrupted")).toHaveLength(1);
    expect(completion).toMatchObject({ outcome: "interrupted", interruptedBy: "SIGTERM", readyCount: 1 });
  });

  it("two seals at once: one completes the ledger, the other finds it complete or busy; a stale seal lock is taken over; a manifest alone is sealed", async () => {
    const { dir, writer } = await buildLedger(4);
    await writer.close();
    const both = await Promise.allSettled([sealLostRun(dir, "a"), sealLostRun(dir, "b")]);
    const sealed = both.filter((r) => r.status === "fulfilled" && r.value.state === "sealed");
    expect(sealed).toHaveLength(1);
    for (const r of both) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(LedgerBusyError);
    expect(await verifyLedger(dir)).toMatchObject({ complete: true, records: 4 + 5 });
    expect(fs.existsSync(path.join(dir, SEAL_LOCK_FILE))).toBe(false);

    // A lock a dead sealer left (a pid that is not running).
    const stale = await buildLedger(2);
    await stale.writer.close();
    fs.writeFileSync(path.join(stale.dir, SEAL_LOCK_FILE), JSON.stringify({ pid: 2 ** 22 + 1, startTicks: 1 }));
    expect((await sealLostRun(stale.dir, "x")).state).toBe("sealed");
    expect(fs.existsSync(path.join(stale.dir, SEAL_LOCK_FILE))).toBe(false);
    // A lock this (live) process holds: busy, nothing written.
    const held = await buildLedger(2);
    await held.writer.close();
    fs.writeFileSync(path.join(held.dir, SEAL_LOCK_FILE), JSON.stringify({ pid: process.pid, startTicks: readProcStat(process.pid)!.startTicks }));
    await expect(sealLostRun(held.dir, "x")).rejects.toThrow(`ledger ${held.dir}: another seal of it is still running (pid ${process.pid})`);
    expect(fs.existsSync(path.join(held.dir, "completion.json"))).toBe(false);

    const bare = tempRunDir();
    await (await LedgerWriter.open(bare, manifestFor())).close();
    expect(await sealLostRun(bare, "x")).toMatchObject({ state: "sealed", outcome: "interrupted" });
    expect(await verifyLedger(bare)).toMatchObject({ complete: true, records: 2 });
  });

  it("damage beyond a torn line is named and nothing is written; no ledger is absent; a completed ledger is not resumed", async () => {
    const { dir, writer } = await buildLedger(4);
    await writer.close();
    const recs = path.join(dir, "records.ndjson");
    fs.writeFileSync(recs, fs.readFileSync(recs, "utf8").replace('"agent-1"', '"agent-9"'));
    const files = filesOf(dir);
    const error = await sealLostRun(dir, "x").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerVerifyError);
    expect((error as LedgerVerifyError).code).toBe("hash-chain-broken");
    expect(filesOf(dir)).toEqual(files);

    const nowhere = path.join(tempRunDir(), "never-created");
    expect(await sealLostRun(nowhere, "x")).toEqual({ runDir: nowhere, state: "absent", outcome: null, stopped: [] });
    expect(fs.existsSync(nowhere)).toBe(false);

    const done = await buildLedger(2, { complete: true });
    await expect(LedgerWriter.resume(done.dir)).rejects.toBeInstanceOf(LedgerExistsError);
  });
});

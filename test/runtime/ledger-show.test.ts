import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { LedgerWriter } from "../../runtime/core/ledger";
import { ledgerTimeline, showLedger } from "../../runtime/core/ledger/show";
import { THREE_LEVEL_SPEC, manifestFor, manualClock, tempRunDir } from "./ledger-fixtures";

/** Writes `[ms, kind, fields]` events with a manual clock. */
async function writeEvents(w: LedgerWriter, clock: ReturnType<typeof manualClock>, events: Array<[number, string, Record<string, unknown>?]>): Promise<void> {
  for (const [ms, kind, fields] of events) {
    clock.set(ms);
    await w.append(kind, fields);
  }
}

describe("ledger show on a 3-level cohort (router <- agent x2 <- ui)", () => {
  it("prints the per-member timeline sorted by start, the critical path and the phases", async () => {
    const dir = tempRunDir();
    const clock = manualClock();
    const w = await LedgerWriter.open(dir, manifestFor(THREE_LEVEL_SPEC), clock.opts);
    await writeEvents(w, clock, [
      [0, "run-started"],
      [0.2, "roster-admitted"],
      [0.5, "member-scheduled", { member: "router-0" }],
      [1.25, "member-started", { member: "router-0", pid: 101, pgid: 101, port: 20001 }],
      [20, "member-ready", { member: "router-0", probe: "http", attempts: 4 }],
      [20.5, "member-scheduled", { member: "agent-0" }],
      [20.5, "member-scheduled", { member: "agent-1" }],
      [22, "member-started", { member: "agent-1", pid: 103 }],
      [23, "member-started", { member: "agent-0", pid: 102 }],
      [45.5, "member-ready", { member: "agent-0" }],
      [60, "member-ready", { member: "agent-1" }],
      [60.5, "member-scheduled", { member: "ui-0" }],
      [61, "member-started", { member: "ui-0", pid: 104 }],
      [90, "member-ready", { member: "ui-0" }],
      [90, "roster-ready", { readyCount: 4, timeToReadyMs: 90 }],
      [90, "hold-started"],
      [190, "hold-ended"],
      [190, "teardown-started"],
      [190.5, "member-stopping", { member: "ui-0" }],
      [200, "member-stopped", { member: "ui-0" }],
      [201, "member-stopped", { member: "agent-0" }],
      [202, "member-stopped", { member: "agent-1" }],
      [1250.75, "member-stopped", { member: "router-0" }],
      [1251, "teardown-finished"],
    ]);
    clock.set(1252);
    await w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: { admission: 0.2, startup: 89.8, hold: 100, teardown: 1061 } });

    expect(await ledgerTimeline(dir)).toEqual({
      members: [
        { member: "router-0", role: "router", scheduledMs: 0.5, startedMs: 1.25, readyMs: 20, stoppedMs: 1250.75, attempts: 1 },
        { member: "agent-1", role: "agent", scheduledMs: 20.5, startedMs: 22, readyMs: 60, stoppedMs: 202, attempts: 1 },
        { member: "agent-0", role: "agent", scheduledMs: 20.5, startedMs: 23, readyMs: 45.5, stoppedMs: 201, attempts: 1 },
        { member: "ui-0", role: "ui", scheduledMs: 60.5, startedMs: 61, readyMs: 90, stoppedMs: 200, attempts: 1 },
      ],
      criticalPath: { members: ["router-0", "agent-1", "ui-0"], readyMs: 90 },
    });

    expect(await showLedger(dir)).toBe(
      [
        "run society-20260102T030405Z-abc123 (profile host, backend process)",
        "outcome succeeded; 24 records",
        "",
        "members (ms from run start):",
        "  MEMBER    ROLE    SCHEDULED  STARTED  READY  STOPPED",
        "  router-0  router        0.5      1.3   20.0   1250.8",
        "  agent-1   agent        20.5     22.0   60.0    202.0",
        "  agent-0   agent        20.5     23.0   45.5    201.0",
        "  ui-0      ui           60.5     61.0   90.0    200.0",
        "",
        "critical path: router-0 -> agent-1 -> ui-0 (last member ready at 90.0 ms)",
        "  router-0  ready  20.0 ms",
        "  agent-1   ready  60.0 ms",
        "  ui-0      ready  90.0 ms",
        "",
        "phases (ms):",
        "  admission     0.2",
        "  startup      89.8",
        "  hold        100.0",
        "  teardown   1061.0",
        "",
      ].join("\n"),
    );
  });

  it("a failed run shows the first failure, a FAILED column and the path up to the last ready member", async () => {
    const dir = tempRunDir();
    const clock = manualClock();
    const w = await LedgerWriter.open(dir, manifestFor(THREE_LEVEL_SPEC), clock.opts);
    await writeEvents(w, clock, [
      [0, "run-started"],
      [1, "member-scheduled", { member: "router-0" }],
      [2, "member-started", { member: "router-0" }],
      [10, "member-ready", { member: "router-0" }],
      [11, "member-scheduled", { member: "agent-0" }],
      [11, "member-scheduled", { member: "agent-1" }],
      [12, "member-started", { member: "agent-0" }],
      [12, "member-started", { member: "agent-1" }],
      [30, "member-ready", { member: "agent-0" }],
      [31, "member-exited", { member: "agent-1", exitCode: 3, signal: null }],
      [31, "member-failed", { member: "agent-1", reason: "exited with code 3 before ready", outputTail: "boom" }],
      [31, "run-failed", { member: "agent-1", reason: "exited with code 3 before ready" }],
      [32, "teardown-started"],
      [40, "member-stopped", { member: "agent-0" }],
      [41, "member-stopped", { member: "router-0" }],
      [41, "teardown-finished"],
    ]);
    // As the runtime writes it: the summary line, then the member's output tail.
    await w.complete({
      outcome: "failed",
      firstFailure: { member: "agent-1", reason: "exited with code 3 before ready\nstarting\nboom\n" },
      phasesMs: { startup: 31, teardown: 10 },
    });

    expect(await showLedger(dir)).toBe(
      [
        "run society-20260102T030405Z-abc123 (profile host, backend process)",
        "outcome failed; 16 records",
        "first failure: agent-1: exited with code 3 before ready",
        "last output:",
        "  | starting",
        "  | boom",
        "",
        "members (ms from run start):",
        "  MEMBER    ROLE    SCHEDULED  STARTED  READY  STOPPED  FAILED",
        "  router-0  router        1.0      2.0   10.0     41.0",
        "  agent-0   agent        11.0     12.0   30.0     40.0",
        "  agent-1   agent        11.0     12.0      -        -  exited with code 3 before ready",
        "  ui-0      ui              -        -      -        -",
        "",
        "critical path: router-0 -> agent-0 (last member ready at 30.0 ms)",
        "  router-0  ready  10.0 ms",
        "  agent-0   ready  30.0 ms",
        "",
        "phases (ms):",
        "  startup   31.0",
        "  teardown  10.0",
        "",
      ].join("\n"),
    );
  });

  it("a crashed run (no completion) says so and has no phases", async () => {
    const dir = tempRunDir();
    const clock = manualClock();
    const w = await LedgerWriter.open(dir, manifestFor({ roles: [{ name: "solo" }] }), clock.opts);
    await writeEvents(w, clock, [
      [0, "run-started"],
      [1, "member-scheduled", { member: "solo-0" }],
    ]);
    await w.close();
    expect(await showLedger(dir)).toBe(
      [
        "run society-20260102T030405Z-abc123 (profile host, backend process)",
        "outcome none: no completion.json (crashed or still running); 2 records",
        "",
        "members (ms from run start):",
        "  MEMBER  ROLE  SCHEDULED  STARTED  READY  STOPPED",
        "  solo-0  solo        1.0        -      -        -",
        "",
        "critical path: none (no member became ready)",
        "",
      ].join("\n"),
    );
  });

  it("refuses a tampered ledger instead of showing invented records (hash chain names the line)", async () => {
    const dir = tempRunDir();
    const clock = manualClock();
    const w = await LedgerWriter.open(dir, manifestFor({ roles: [{ name: "solo" }] }), clock.opts);
    await writeEvents(w, clock, [
      [0, "run-started"],
      [1, "member-scheduled", { member: "solo-0" }],
      [2, "member-started", { member: "solo-0" }],
    ]);
    await w.close();
    const file = path.join(dir, "records.ndjson");
    const lines = fs.readFileSync(file, "utf8").split("\n");
    lines[1] = lines[1].replace('"member":"solo-0"', '"member":"solo-9"');
    fs.writeFileSync(file, lines.join("\n"));
    await expect(showLedger(dir)).rejects.toMatchObject({ code: "hash-chain-broken" });
    await expect(ledgerTimeline(dir)).rejects.toMatchObject({ code: "hash-chain-broken" });
  });
});

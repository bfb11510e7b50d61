/** Shared helpers for the ledger tests: temp run directories and deterministic clocks. */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll } from "vitest";
import { LedgerWriter, type Completion, type LedgerManifest, type LedgerRecord, type LedgerWriterOptions } from "../../runtime/core/ledger";

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
});

/** A fresh temp directory (removed after the test file); the run directory inside it does not exist yet. */
export function tempRunDir(name = "run"): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-ledger-test-"));
  roots.push(root);
  return path.join(root, name);
}

/** The three-level cohort used by several tests: router(1) <- agent(2) <- ui(1). */
export const THREE_LEVEL_SPEC = {
  apiVersion: "cohort-lab/v1",
  kind: "Cohort",
  name: "society",
  roles: [
    { name: "router", replicas: 1, app: { command: ["router"] } },
    { name: "agent", replicas: 2, needs: ["router"], app: { command: ["agent"] } },
    { name: "ui", replicas: 1, needs: ["agent"], app: { command: ["ui"] } },
  ],
};

export function manifestFor(spec: unknown = THREE_LEVEL_SPEC): Omit<LedgerManifest, "specSha256"> {
  return {
    runId: "society-20260102T030405Z-abc123",
    profile: "host",
    backend: "process",
    spec,
    tools: { node: "24.0.0", "cohort-lab": "0.1.0" },
    createdAt: "2026-01-02T03:04:05.000Z",
    runtimePid: 4242,
  };
}

/** A manual clock: `set(ms)` moves both the monotonic and the wall clock (wall = 2026-01-02T03:04:05Z + ms). */
export function manualClock(): { opts: Pick<LedgerWriterOptions, "now" | "wallClock">; set(ms: number): void } {
  let t = 0;
  return {
    opts: { now: () => t, wallClock: () => new Date(Date.UTC(2026, 0, 2, 3, 4, 5) + t) },
    set(ms: number) {
      t = ms;
    },
  };
}

/**
 * Write a ledger of `n` records (`run-started`, then `member-started` for `agent-0..`) and optionally
 * complete it. Returns the run directory and the writer.
 */
export async function buildLedger(n: number, opts: { complete?: boolean; dir?: string } = {}): Promise<{ dir: string; writer: LedgerWriter }> {
  const dir = opts.dir ?? tempRunDir();
  const clock = manualClock();
  const writer = await LedgerWriter.open(dir, manifestFor(), { ...clock.opts, fsync: "none" });
  for (let i = 1; i <= n; i++) {
    clock.set(i * 10);
    void writer.append(i === 1 ? "run-started" : "member-started", i === 1 ? {} : { member: `agent-${i - 2}`, pid: 1000 + i, port: 20000 + i });
  }
  if (opts.complete) {
    clock.set(n * 10 + 5);
    await writer.complete({ outcome: "succeeded", firstFailure: null, phasesMs: { startup: n * 10 } });
  } else {
    await writer.close();
  }
  return { dir, writer };
}

/**
 * A crashed run's ledger in `dir`: the manifest ({@link manifestFor}), then `records` appended in order (`[kind,
 * fields]`), and the writer closed without a completion. Returns `dir`.
 */
export async function crashedLedger(dir: string, records: ReadonlyArray<readonly [kind: string, fields?: Record<string, unknown>]>): Promise<string> {
  const writer = await LedgerWriter.open(dir, manifestFor(), { fsync: "none" });
  for (const [kind, fields] of records) await writer.append(kind, fields);
  await writer.close();
  return dir;
}

/** Lines of records.ndjson (without the final empty string after the last `\n`). */
export function recordLines(dir: string): string[] {
  const text = fs.readFileSync(path.join(dir, "records.ndjson"), "utf8");
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

export function writeRecordLines(dir: string, lines: string[], trailingNewline = true): void {
  fs.writeFileSync(path.join(dir, "records.ndjson"), lines.join("\n") + (trailingNewline ? "\n" : ""));
}

/** Every file's bytes in a directory tree, as latin1 strings (for leak scans). */
export function allFileContents(dir: string): Array<{ file: string; text: string }> {
  const out: Array<{ file: string; text: string }> = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    out.push({ file, text: fs.readFileSync(file).toString("utf8") });
  }
  return out;
}

/**
 * A synthetic, succeeded run of `n` members (router-0 <- agent-0..agent-(n-3) <- ui-0) for rendering tests: the
 * parsed ledger parts `runViewOf` takes (records are not hash-chained; nothing is written). Times in ms from
 * run start: agent-i starts at 10 + i % 97 and is ready 200 + (i * 37) % 500 ms later; agent-5 is the latest
 * (so the critical path is router-0 -> agent-5 -> ui-0), agent-1 and agent-2 are restarted once; hold 1000 ms.
 */
export function syntheticRun(n: number): { manifest: LedgerManifest; records: LedgerRecord[]; completion: Completion } {
  const agents = n - 2;
  const spec = {
    apiVersion: "cohort-lab/v1",
    kind: "Cohort",
    name: "big",
    roles: [
      { name: "router", replicas: 1, app: { command: ["router"] } },
      { name: "agent", replicas: agents, needs: ["router"], app: { command: ["agent"] } },
      { name: "ui", replicas: 1, needs: ["agent"], app: { command: ["ui"] } },
    ],
  };
  const records: LedgerRecord[] = [];
  const add = (elapsedMs: number, kind: string, fields: Record<string, unknown> = {}): void => {
    records.push({ seq: records.length + 1, at: new Date(Date.UTC(2026, 0, 2) + elapsedMs).toISOString(), elapsedMs, kind, prev: "", ...fields });
  };
  add(0, "run-started");
  add(1, "roster-admitted");
  add(2, "member-scheduled", { member: "router-0" });
  add(3, "member-started", { member: "router-0" });
  add(8, "member-ready", { member: "router-0" });
  const readyAt = (i: number): number => (i === 5 ? 900 : 10 + (i % 97) + 200 + ((i * 37) % 500));
  let last = 0;
  for (let i = 0; i < agents; i++) {
    const m = `agent-${i}`;
    const start = 10 + (i % 97);
    add(9, "member-scheduled", { member: m });
    add(start, "member-started", { member: m });
    if (i === 1 || i === 2) {
      add(start + 50, "member-restarted", { member: m, attempt: 2, maxAttempts: 3, previousReason: `member ${m} exited before it was ready (exit code 1)` });
      add(start + 51, "member-started", { member: m, attempt: 2 });
    }
    add(readyAt(i), "member-ready", { member: m });
    last = Math.max(last, readyAt(i));
  }
  add(last + 1, "member-scheduled", { member: "ui-0" });
  add(last + 2, "member-started", { member: "ui-0" });
  add(last + 20, "member-ready", { member: "ui-0" });
  const ready = last + 20;
  add(ready, "roster-ready", { readyCount: n, timeToReadyMs: ready - 1 });
  add(ready + 1, "hold-started", { holdMs: 1000 });
  add(ready + 1001, "hold-ended");
  add(ready + 1002, "teardown-started");
  const members = ["ui-0", ...Array.from({ length: agents }, (_, i) => `agent-${i}`), "router-0"];
  members.forEach((m, k) => add(ready + 1003 + k * 0.1, "member-stopping", { member: m }));
  members.forEach((m, k) => add(ready + 1100 + k * 0.1, "member-stopped", { member: m }));
  add(ready + 1300, "teardown-finished");
  add(ready + 1301, "run-finished", { outcome: "succeeded" });
  const manifest = { ...manifestFor(spec), runId: "big-20260102T030405Z-000001", specSha256: "0".repeat(64) };
  const completion: Completion = {
    outcome: "succeeded",
    firstFailure: null,
    records: records.length,
    recordsSha256: "0".repeat(64),
    manifestSha256: "0".repeat(64),
    phasesMs: { admission: 1, startup: ready - 1, hold: 1000, teardown: 300 },
    completedAt: "2026-01-02T03:04:10.000Z",
    size: n,
    readyCount: n,
    timeToReadyMs: ready - 1,
  };
  return { manifest, records, completion };
}

/**
 * Ledger append throughput, per fsync policy, for one sequential appender and for 64 concurrent
 * appenders (each awaiting its own appends, as the scheduler's per-member flows do), 20,000 records
 * each. Also: the synchronous cost of `append()` (what the scheduler's event loop pays), a
 * scheduler-shaped run (1,000 members x 6 records from 1,000 concurrent flows) and the cost of
 * redaction with 1,000 registered secrets.
 *
 * Run: `tsx scripts/run.ts tsx bench/ledger.ts` (the pinned Node 24, like the npm bench scripts).
 * Env: LEDGER_BENCH_DIR (default os.tmpdir()) to measure another filesystem; LEDGER_BENCH_RECORDS (default 20000);
 * LEDGER_BENCH_REPS (default 3): every cell runs this many times and the median is printed (the dev VM is
 * shared, so single runs are noisy; the load average is printed before and after).
 *
 * The workload is member-level records (`member-started` with pid/pgid/port/endpoint) plus the
 * run-level transitions of one run (run-started first, roster-ready at the middle, teardown-started
 * and teardown-finished at the end), so the "transitions" policy syncs 4 times plus once at complete.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { DEFAULT_FSYNC_POLICY, LedgerWriter, verifyLedger, type FsyncPolicy } from "../runtime/index";

const N = Number(process.env.LEDGER_BENCH_RECORDS ?? 20_000);
const REPS = Number(process.env.LEDGER_BENCH_REPS ?? 3);

async function median<T>(run: () => Promise<T>, key: (t: T) => number): Promise<T> {
  const results: T[] = [];
  for (let i = 0; i < REPS; i++) results.push(await run());
  results.sort((a, b) => key(a) - key(b));
  return results[Math.floor((results.length - 1) / 2)]!;
}
const ROOT = fs.mkdtempSync(path.join(process.env.LEDGER_BENCH_DIR ?? os.tmpdir(), "cohort-ledger-bench-"));
const POLICIES: FsyncPolicy[] = [DEFAULT_FSYNC_POLICY, ...(["always", "none"] as FsyncPolicy[]).filter((p) => p !== DEFAULT_FSYNC_POLICY)];

let runs = 0;
async function openWriter(policy: FsyncPolicy, secrets: string[] = []): Promise<LedgerWriter> {
  const w = await LedgerWriter.open(
    path.join(ROOT, `run-${++runs}`),
    {
      runId: `bench-${runs}`,
      profile: "host",
      backend: "process",
      spec: { roles: [{ name: "agent", replicas: 1000 }] },
      tools: { node: process.version },
      createdAt: new Date().toISOString(),
    },
    { fsync: policy },
  );
  for (const s of secrets) w.redact(s);
  return w;
}

function kindFor(i: number, n: number): string {
  if (i === 0) return "run-started";
  if (i === Math.floor(n / 2)) return "roster-ready";
  if (i === n - 2) return "teardown-started";
  if (i === n - 1) return "teardown-finished";
  return "member-started";
}

function fields(i: number): Record<string, unknown> {
  const port = 20000 + (i % 40000);
  return { member: `agent-${i % 1000}`, pid: 10000 + i, pgid: 10000 + i, port, endpoint: `127.0.0.1:${port}` };
}

interface Result {
  recordsPerSec: number;
  batches: number;
  syncs: number;
  ms: number;
  /** Total and longest fdatasync time, ms (before complete). */
  syncMs: number;
  syncMsMax: number;
}

async function measure(policy: FsyncPolicy, appenders: number, n = N, secrets: string[] = []): Promise<Result> {
  const w = await openWriter(policy, secrets);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: appenders }, async () => {
      for (let i = next++; i < n; i = next++) await w.append(kindFor(i, n), fields(i));
    }),
  );
  const ms = performance.now() - t0;
  const st = w.stats;
  await w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} });
  const report = await verifyLedger(w.runDir);
  if (report.records !== n) throw new Error(`expected ${n} records, verify found ${report.records}`);
  return { recordsPerSec: (n / ms) * 1000, batches: st.batches, syncs: st.syncs, ms, syncMs: st.syncMs, syncMsMax: st.syncMsMax };
}

/**
 * Synchronous part of append(): enqueue n records without awaiting; the event loop is blocked for
 * this long. Wall and CPU (user+system) µs per record; CPU time is what contention cannot inflate.
 */
async function syncCost(n = N): Promise<{ wallUs: number; cpuUs: number }> {
  const w = await openWriter(DEFAULT_FSYNC_POLICY);
  const pending: Promise<unknown>[] = [];
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) pending.push(w.append(kindFor(i, n), fields(i)));
  const wallUs = ((performance.now() - t0) * 1000) / n;
  const c = process.cpuUsage(c0);
  await Promise.all(pending);
  await w.close();
  return { wallUs, cpuUs: (c.user + c.system) / n };
}

/** 1,000 member flows, each appending its 6 records in sequence (awaiting each), all at once. */
async function schedulerShaped(policy: FsyncPolicy): Promise<{ ms: number; batches: number; syncs: number }> {
  const w = await openWriter(policy);
  const kinds = ["member-scheduled", "member-started", "member-ready", "member-stopping", "member-exited", "member-stopped"];
  const t0 = performance.now();
  await w.append("run-started");
  await Promise.all(
    Array.from({ length: 1000 }, async (_, m) => {
      for (const k of kinds) await w.append(k, k === "member-started" ? fields(m) : { member: `agent-${m}` });
    }),
  );
  await w.append("teardown-finished");
  const ms = performance.now() - t0;
  const st = w.stats;
  await w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} });
  return { ms, batches: st.batches, syncs: st.syncs };
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

function pad(rows: string[][]): string {
  const w = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!))).join("  ")).join("\n");
}

async function main(): Promise<void> {
  console.log(`ledger bench: ${fmt(N)} records per cell, median of ${REPS}, dir ${ROOT}, node ${process.version}, ${os.cpus().length} cpus, load ${os.loadavg()[0]!.toFixed(2)}`);
  await measure("none", 64, 2000); // warm up the JIT
  const rows: string[][] = [["policy", "1 appender rec/s", "(batches/syncs)", "64 appenders rec/s", "(batches/syncs)", "fdatasync mean/max ms"]];
  for (const policy of POLICIES) {
    const one = await median(
      () => measure(policy, 1),
      (r) => r.recordsPerSec,
    );
    const many = await median(
      () => measure(policy, 64),
      (r) => r.recordsPerSec,
    );
    rows.push([
      policy + (policy === DEFAULT_FSYNC_POLICY ? " (default)" : ""),
      fmt(one.recordsPerSec),
      `(${fmt(one.batches)}/${fmt(one.syncs)})`,
      fmt(many.recordsPerSec),
      `(${fmt(many.batches)}/${fmt(many.syncs)})`,
      one.syncs + many.syncs === 0 ? "-" : `${((one.syncMs + many.syncMs) / (one.syncs + many.syncs)).toFixed(2)}/${Math.max(one.syncMsMax, many.syncMsMax).toFixed(1)}`,
    ]);
  }
  console.log(pad(rows));

  const cost = await median(
    () => syncCost(),
    (x) => x.cpuUs,
  );
  console.log(`\nsynchronous cost of append() (event loop blocked per record): ${cost.wallUs.toFixed(2)} us wall, ${cost.cpuUs.toFixed(2)} us CPU`);

  const srows: string[][] = [["policy", "1,000 members x 6 records, wall ms", "batches", "syncs"]];
  for (const policy of POLICIES) {
    const s = await median(
      () => schedulerShaped(policy),
      (r) => r.ms,
    );
    srows.push([policy, s.ms.toFixed(1), fmt(s.batches), fmt(s.syncs)]);
  }
  console.log(`\nscheduler-shaped run (1,000 concurrent member flows awaiting each append):\n${pad(srows)}`);

  const secrets = Array.from({ length: 1000 }, () => randomBytes(16).toString("hex"));
  const plain = await median(
    () => measure(DEFAULT_FSYNC_POLICY, 64),
    (r) => r.recordsPerSec,
  );
  const redacted = await median(
    () => measure(DEFAULT_FSYNC_POLICY, 64, N, secrets),
    (r) => r.recordsPerSec,
  );
  console.log(`\nredaction, 64 appenders, ${DEFAULT_FSYNC_POLICY}: no secrets ${fmt(plain.recordsPerSec)} rec/s, 1,000 registered secrets ${fmt(redacted.recordsPerSec)} rec/s`);
  console.log(`\nload average at the end: ${os.loadavg()[0]!.toFixed(2)}`);
  fs.rmSync(ROOT, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});

/**
 * Crash safety with a real writer process: a `node` child appends in a loop (with large records, so
 * batches span many pages and a kill can land mid-write) and is SIGKILLed. Afterwards the ledger must
 * verify (after recovering a torn final line, if the kill tore one), have no completion, and hold every
 * record the child had seen acknowledged.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { readLedger } from "../../runtime/core/ledger";
import { recoverLedger, verifyLedger } from "../../runtime/core/ledger/verify";
import { tempRunDir } from "./ledger-fixtures";

const repo = path.resolve(__dirname, "../..");

const CHILD = `
import { LedgerWriter } from ${JSON.stringify(path.join(repo, "runtime/core/ledger/index.ts"))};
const [dir, policy] = process.argv.slice(2);
(async () => {
  const w = await LedgerWriter.open(dir, {
    runId: "crash-test", profile: "host", backend: "process", spec: { roles: [{ name: "agent", replicas: 64 }] },
    tools: { node: process.version }, createdAt: new Date().toISOString(),
  }, { fsync: policy });
  await w.append("run-started");
  let acked = 0;
  const tail = "x".repeat(3000);
  const worker = async (id) => {
    for (let i = 0; ; i++) {
      const r = await w.append(i % 10 === 0 ? "roster-ready" : "member-started", { member: "agent-" + id, i, outputTail: tail });
      if (r.seq > acked) acked = r.seq;
      if (i % 5 === 0) process.stdout.write("acked " + acked + "\\n");
    }
  };
  for (let id = 0; id < 64; id++) void worker(id);
})();
`;

async function runAndKill(policy: string, killAfterAcked: number): Promise<{ dir: string; lastAcked: number }> {
  const dir = tempRunDir();
  const script = path.join(path.dirname(dir), "child.ts");
  fs.writeFileSync(script, CHILD);
  const child = spawn(process.execPath, ["--import", "tsx", script, dir, policy], { cwd: repo, stdio: ["ignore", "pipe", "pipe"] });
  let lastAcked = 0;
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
  await new Promise<void>((resolve, reject) => {
    let buf = "";
    child.stdout.on("data", (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split("\n");
      buf = lines.pop()!;
      for (const l of lines) lastAcked = Math.max(lastAcked, Number(l.split(" ")[1]));
      if (lastAcked >= killAfterAcked) {
        child.kill("SIGKILL");
        resolve();
      }
    });
    child.on("exit", () => reject(new Error(`child exited before being killed: ${stderr}`)));
  });
  expect(await exited).toBe("SIGKILL");
  return { dir, lastAcked };
}

describe("a writer killed with SIGKILL", () => {
  for (const [policy, at] of [
    ["transitions", 400],
    ["none", 1500],
    ["always", 150],
  ] as const) {
    it(`leaves a ledger that verifies after recovery, without completion, with every acknowledged record (fsync ${policy})`, async () => {
      const { dir, lastAcked } = await runAndKill(policy, at);
      expect(lastAcked).toBeGreaterThanOrEqual(at);
      const rec = await recoverLedger(dir);
      if (rec.recovered) {
        expect(rec.truncatedBytes).toBeGreaterThan(0);
        expect(fs.statSync(rec.movedTo!).size).toBe(rec.truncatedBytes);
      }
      const report = await verifyLedger(dir);
      expect(report).toMatchObject({ ok: true, runId: "crash-test", complete: false, outcome: null });
      expect(report.records).toBeGreaterThanOrEqual(lastAcked);
      expect(fs.existsSync(path.join(dir, "completion.json"))).toBe(false);
      const { records, completion } = await readLedger(dir);
      expect(completion).toBeNull();
      expect(records[0]!.kind).toBe("run-started");
      expect(records.map((r) => r.seq)).toEqual(Array.from({ length: records.length }, (_, i) => i + 1));
    });
  }
});

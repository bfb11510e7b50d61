import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { LedgerClosedError, LedgerExistsError, LedgerInputError, LedgerWriteError } from "../../runtime/core/errors";
import { LedgerWriter, canonicalJson, readLedger } from "../../runtime/core/ledger";
import { verifyLedger } from "../../runtime/core/ledger/verify";
import { THREE_LEVEL_SPEC, allFileContents, manifestFor, manualClock, recordLines, tempRunDir } from "./ledger-fixtures";

const sha = (b: string | Buffer): string => createHash("sha256").update(b).digest("hex");

describe("LedgerWriter round trip", () => {
  it("writes manifest, hash-chained records and completion that verify and read back", async () => {
    const dir = tempRunDir();
    const clock = manualClock();
    const w = await LedgerWriter.open(dir, manifestFor(), clock.opts);
    expect(w.runDir).toBe(dir);
    expect(fs.readdirSync(dir).sort()).toEqual(["manifest.json", "records.ndjson"]);

    clock.set(0);
    const r1 = await w.append("run-started");
    clock.set(12.34567);
    const r2 = await w.append("member-started", { member: "router-0", pid: 101, pgid: 101, port: 20001, endpoint: "127.0.0.1:20001" });
    clock.set(40);
    const r3 = await w.append("member-ready", { member: "router-0", probe: "http", attempts: 3 });
    clock.set(41);
    const r4 = await w.append("some-future-kind", { nested: { a: [1, "two", null] } });
    expect(w.recordCount).toBe(4);

    const manifestBytes = fs.readFileSync(path.join(dir, "manifest.json"));
    const lines = recordLines(dir);
    expect(lines).toEqual([
      `{"seq":1,"at":"2026-01-02T03:04:05.000Z","elapsedMs":0,"kind":"run-started","prev":"${sha(manifestBytes)}"}`,
      `{"seq":2,"at":"2026-01-02T03:04:05.012Z","elapsedMs":12.346,"kind":"member-started","member":"router-0","pid":101,"pgid":101,"port":20001,"endpoint":"127.0.0.1:20001","prev":"${sha(lines[0]!)}"}`,
      `{"seq":3,"at":"2026-01-02T03:04:05.040Z","elapsedMs":40,"kind":"member-ready","member":"router-0","probe":"http","attempts":3,"prev":"${sha(lines[1]!)}"}`,
      `{"seq":4,"at":"2026-01-02T03:04:05.041Z","elapsedMs":41,"kind":"some-future-kind","nested":{"a":[1,"two",null]},"prev":"${sha(lines[2]!)}"}`,
    ]);
    expect([r1, r2, r3, r4].map((r) => JSON.stringify(r))).toEqual(lines);

    clock.set(50);
    const c = await w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: { startup: 40, hold: 5, teardown: 5 }, readyCount: 1 });
    const recordsBytes = fs.readFileSync(path.join(dir, "records.ndjson"));
    expect(c).toEqual({
      outcome: "succeeded",
      firstFailure: null,
      records: 4,
      recordsSha256: sha(recordsBytes),
      manifestSha256: sha(manifestBytes),
      phasesMs: { startup: 40, hold: 5, teardown: 5 },
      completedAt: "2026-01-02T03:04:05.050Z",
      readyCount: 1,
    });
    expect(JSON.parse(fs.readFileSync(path.join(dir, "completion.json"), "utf8"))).toEqual(c);
    expect(fs.readdirSync(dir).sort()).toEqual(["completion.json", "manifest.json", "records.ndjson"]);

    await expect(verifyLedger(dir)).resolves.toEqual({ ok: true, runId: "society-20260102T030405Z-abc123", records: 4, complete: true, outcome: "succeeded" });
    const read = await readLedger(dir);
    expect(read.records).toEqual([r1, r2, r3, r4]);
    expect(read.completion).toEqual(c);
    expect(read.manifest.runId).toBe("society-20260102T030405Z-abc123");
    expect(read.manifest.runtimePid).toBe(4242);
  });

  it("computes specSha256 from the canonical JSON of the spec, ignoring key order and any caller value", async () => {
    const a = tempRunDir();
    const b = tempRunDir();
    const reordered = JSON.parse(JSON.stringify(THREE_LEVEL_SPEC, Object.keys(THREE_LEVEL_SPEC).reverse()));
    const wa = await LedgerWriter.open(a, { ...manifestFor(), specSha256: "0".repeat(64) } as never);
    const wb = await LedgerWriter.open(b, manifestFor({ ...reordered, roles: THREE_LEVEL_SPEC.roles }));
    await Promise.all([wa.close(), wb.close()]);
    const ma = JSON.parse(fs.readFileSync(path.join(a, "manifest.json"), "utf8"));
    const mb = JSON.parse(fs.readFileSync(path.join(b, "manifest.json"), "utf8"));
    expect(ma.specSha256).toBe(sha(canonicalJson(THREE_LEVEL_SPEC)));
    expect(mb.specSha256).toBe(ma.specSha256);
  });

  it("an empty ledger (opened, closed without records) verifies with zero records and no completion", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor());
    await w.close();
    await expect(verifyLedger(dir)).resolves.toEqual({ ok: true, runId: "society-20260102T030405Z-abc123", records: 0, complete: false, outcome: null });
  });

  it("refuses to open a directory that already holds a ledger, leaving it untouched", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor());
    await w.append("run-started");
    await w.close();
    const before = allFileContents(dir);
    const err = await LedgerWriter.open(dir, { ...manifestFor(), runId: "other" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LedgerExistsError);
    expect((err as LedgerExistsError).code).toBe("ledger-exists");
    expect((err as Error).message).toBe(`ledger ${dir}: refusing to open a new ledger: the directory already holds manifest.json`);
    expect(allFileContents(dir)).toEqual(before);
  });

  it("refuses a directory holding only records.ndjson without creating a manifest", async () => {
    const dir = tempRunDir();
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "records.ndjson"), "");
    await expect(LedgerWriter.open(dir, manifestFor())).rejects.toThrow(`ledger ${dir}: refusing to open a new ledger: the directory already holds records.ndjson`);
    expect(fs.readdirSync(dir)).toEqual(["records.ndjson"]);
  });
});

describe("LedgerWriter ordering and group commit", () => {
  it("64 concurrent appenders: seq is gap-free and in call order, batches coalesce", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor(), { fsync: "always" });
    let calls = 0;
    const appender = async (id: number): Promise<void> => {
      for (let i = 0; i < 40; i++) {
        const call = ++calls;
        const r = await w.append("member-started", { member: `agent-${id}`, call, i });
        expect(r.seq).toBe(call);
        if (i % 7 === id % 7) await new Promise((res) => setImmediate(res));
      }
    };
    await Promise.all(Array.from({ length: 64 }, (_, id) => appender(id)));
    const stats = w.stats;
    await w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} });
    const recs = recordLines(dir).map((l) => JSON.parse(l) as { seq: number; call: number });
    expect(recs.length).toBe(64 * 40);
    recs.forEach((r, i) => {
      expect(r.seq).toBe(i + 1);
      expect(r.call).toBe(i + 1);
    });
    expect(stats.records).toBe(2560);
    // every batch is one write()+fdatasync; 64 appenders must share them
    expect(stats.batches).toBeLessThan(2560 / 8);
    expect(stats.syncs).toBe(stats.batches);
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 2560, complete: true });
  });

  it("appends issued in one tick go out as one batch (one write)", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor(), { fsync: "none" });
    const all = Array.from({ length: 100 }, (_, i) => w.append("member-scheduled", { member: `agent-${i}` }));
    await Promise.all(all);
    expect(w.stats).toEqual({ records: 100, batches: 1, syncs: 0, bytes: fs.statSync(path.join(dir, "records.ndjson")).size, syncMs: 0, syncMsMax: 0 });
    await w.close();
  });

  it("fsync policies: always syncs every batch, transitions only batches with a transition, none never (complete always)", async () => {
    const counts: Record<string, [number, number]> = {};
    for (const policy of ["always", "transitions", "none"] as const) {
      const w = await LedgerWriter.open(tempRunDir(), manifestFor(), { fsync: policy });
      await w.append("run-started");
      await w.append("member-scheduled", { member: "agent-0" });
      await w.append("member-started", { member: "agent-0" });
      await w.append("member-ready", { member: "agent-0" });
      await w.append("roster-ready", { readyCount: 1 });
      const before = w.stats.syncs;
      await w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} });
      counts[policy] = [before, w.stats.syncs];
      expect(w.fsyncPolicy).toBe(policy);
    }
    expect(counts).toEqual({ always: [5, 6], transitions: [2, 3], none: [0, 1] });
  });

  it("defaults to the transitions policy", async () => {
    const w = await LedgerWriter.open(tempRunDir(), manifestFor());
    expect(w.fsyncPolicy).toBe("transitions");
    await w.close();
  });
});

describe("LedgerWriter refusals", () => {
  it("append after complete rejects with LedgerClosedError; complete twice too", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor());
    await w.append("run-started");
    await w.complete({ outcome: "interrupted", firstFailure: null, phasesMs: {} });
    const err = await w.append("member-started", { member: "agent-0" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LedgerClosedError);
    expect((err as LedgerClosedError).code).toBe("ledger-closed");
    expect((err as Error).message).toBe(`ledger ${dir}: append("member-started") after the ledger was completed`);
    await expect(w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} })).rejects.toThrow(`ledger ${dir}: complete() after the ledger was completed`);
    expect(recordLines(dir)).toHaveLength(1);
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 1, complete: true, outcome: "interrupted" });
  });

  it("close() releases the file without a completion; later calls say so; close during complete waits for it", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor());
    await w.append("run-started");
    await w.close();
    await w.close();
    await expect(w.append("member-started")).rejects.toThrow(`ledger ${dir}: append("member-started") after the ledger was closed without a completion`);
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 1, complete: false });

    const dir2 = tempRunDir();
    const w2 = await LedgerWriter.open(dir2, manifestFor());
    void w2.append("run-started");
    const done = w2.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} });
    await w2.close();
    await expect(done).resolves.toMatchObject({ records: 1 });
    await expect(verifyLedger(dir2)).resolves.toMatchObject({ records: 1, complete: true });
  });

  it("appends issued before complete are all written before completion.json", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor());
    const pending = Array.from({ length: 50 }, (_, i) => w.append("member-ready", { member: `agent-${i}` }));
    const c = await w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} });
    await Promise.all(pending);
    expect(c.records).toBe(50);
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 50, complete: true });
  });

  it("bad input is refused without consuming a seq; never throws synchronously", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor());
    await w.append("run-started");
    let p: Promise<unknown> | undefined;
    expect(() => {
      p = w.append(42 as unknown as string);
    }).not.toThrow();
    await expect(p).rejects.toThrow("record.kind: expected a kind matching ^[a-z][a-z0-9-]*$, got 42");
    await expect(w.append("member-started", { seq: 9 } as never)).rejects.toThrow("record(member-started).fields.seq: is reserved (assigned by the writer)");
    await expect(w.append("member-started", { member: "" })).rejects.toThrow('record(member-started).fields.member: expected a non-empty string, got ""');
    const big = await w.append("member-started", { pid: 10n } as never).catch((e: unknown) => e);
    expect(big).toBeInstanceOf(LedgerInputError);
    expect((big as Error).message).toBe("record(member-started): is not representable in JSON: Do not know how to serialize a BigInt");
    await expect(w.complete({ outcome: "failed", firstFailure: null, phasesMs: {} })).rejects.toThrow('completion.firstFailure: must name the failure when outcome is "failed"');
    await expect(w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {}, records: 3 })).rejects.toThrow(
      "completion.records: is computed by the writer and must not be given",
    );
    const r = await w.append("member-started", { member: "agent-0" });
    expect(r.seq).toBe(2);
    await w.complete({ outcome: "failed", firstFailure: { member: "agent-0", reason: "exited with code 1 before ready" }, phasesMs: { startup: 3 } });
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 2, complete: true, outcome: "failed" });
  });
});

describe("LedgerWriter write failure latches", () => {
  it("a failed write rejects that batch and every later append/complete; no completion is written", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor(), { fsync: "none" });
    await w.append("run-started");
    await w.append("member-started", { member: "router-0" });
    fs.closeSync(w.fd); // the descriptor disappears underneath the writer: the next write() fails with EBADF
    const inFlight = [w.append("member-ready", { member: "router-0" }), w.append("member-started", { member: "agent-0" })];
    const results = await Promise.allSettled(inFlight);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    const first = (results[0] as PromiseRejectedResult).reason as LedgerWriteError;
    expect(first).toBeInstanceOf(LedgerWriteError);
    expect(first.code).toBe("ledger-write-failed");
    expect(first.message).toBe(`ledger ${dir}: write of records 3..4 to records.ndjson failed: EBADF: bad file descriptor, write; the ledger is latched failed`);
    expect((first.cause as NodeJS.ErrnoException).code).toBe("EBADF");
    await expect(w.append("member-ready", { member: "agent-0" })).rejects.toBe(first);
    await expect(w.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} })).rejects.toBe(first);
    expect(fs.existsSync(path.join(dir, "completion.json"))).toBe(false);
    // what was written before the failure still verifies; the run reads as crashed
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 2, complete: false, outcome: null });
  });
});

describe("LedgerWriter redaction", () => {
  it("a registered secret never reaches any file of the run directory, in raw or JSON-escaped form", async () => {
    const dir = tempRunDir();
    const early = "tok-EARLY-7f3a9c1e5b";
    const late = 'pa"ss\\word-late-12';
    const numeric = "987654321012";
    const w = await LedgerWriter.open(dir, manifestFor({ ...THREE_LEVEL_SPEC, roles: [{ name: "router", replicas: 1, app: { command: ["r"], env: { TOKEN: early } } }] }), {
      secrets: [early],
    });
    w.redact(late);
    w.redact(numeric);
    w.redact(late); // idempotent
    await w.append("member-started", { member: "router-0", cmd: `serve --token=${early}`, [`k-${late}`]: 1, ...JSON.parse('{"__proto__": {"x": 1}}') });
    await w.append("member-failed", {
      member: "router-0",
      reason: `exited: bad password ${late}`,
      outputTail: `line1\nAuthorization: ${early}${early}\n"${late}"`,
      port: 987654321012,
      list: [late, { deep: early }],
    });
    await w.complete({ outcome: "failed", firstFailure: { member: "router-0", reason: `bad password ${late}` }, phasesMs: { startup: 1 } });

    const escaped = (s: string): string => JSON.stringify(s).slice(1, -1);
    for (const { file, text } of allFileContents(dir)) {
      for (const s of [early, late, escaped(late), numeric]) expect(text.includes(s), `${s} in ${file}`).toBe(false);
    }
    const [r1, r2] = recordLines(dir).map((l) => JSON.parse(l));
    expect(r1).toMatchObject({ cmd: "serve --token=[redacted]", "k-[redacted]": 1 });
    expect(recordLines(dir)[0]).toContain('"__proto__":{"x":1}');
    expect(r2).toMatchObject({
      reason: "exited: bad password [redacted]",
      outputTail: 'line1\nAuthorization: [redacted][redacted]\n"[redacted]"',
      port: "[redacted]",
      list: ["[redacted]", { deep: "[redacted]" }],
    });
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, "manifest.json"), "utf8"));
    expect(manifest.spec.roles[0].app.env.TOKEN).toBe("[redacted]");
    expect(JSON.parse(fs.readFileSync(path.join(dir, "completion.json"), "utf8")).firstFailure.reason).toBe("bad password [redacted]");
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 2, complete: true, outcome: "failed" });
  });

  it("with hundreds of secrets, each is found wherever it sits and other text is left exactly as it was", async () => {
    const dir = tempRunDir();
    const w = await LedgerWriter.open(dir, manifestFor());
    const secrets = Array.from({ length: 300 }, (_, i) =>
      createHash("sha256")
        .update(`s${i}`)
        .digest("base64url")
        .slice(0, 8 + (i % 30)),
    );
    for (const s of secrets) w.redact(s);
    const expected: string[] = [];
    for (let i = 0; i < 200; i++) {
      const s = secrets[(i * 7) % secrets.length]!;
      const before = `pre-${i}-`.repeat(i % 5);
      const after = `-post ${i}`;
      const text = i % 3 === 0 ? `${before}${after}` : `${before}${s}${after}`;
      expected.push(i % 3 === 0 ? text : `${before}[redacted]${after}`);
      await w.append("member-exited", { member: `agent-${i}`, outputTail: text });
    }
    await w.close();
    const tails = recordLines(dir).map((l) => JSON.parse(l).outputTail as string);
    expect(tails).toEqual(expected);
    const files = allFileContents(dir);
    for (const s of secrets) for (const { text } of files) expect(text.includes(s)).toBe(false);
  });

  it("refuses secrets too short to redact reliably", async () => {
    const w = await LedgerWriter.open(tempRunDir(), manifestFor());
    expect(() => w.redact("short")).toThrow("secret: a secret must be at least 8 characters to be redacted reliably (got 5)");
    expect(() => w.redact("redacted")).toThrow('secret: a secret must not be part of the replacement text "[redacted]"');
    await w.close();
  });
});

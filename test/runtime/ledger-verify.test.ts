import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { LedgerVerifyError } from "../../runtime/core/errors";
import { canonicalJson } from "../../runtime/core/ledger";
import { recoverLedger, verifyLedger } from "../../runtime/core/ledger/verify";
import { allFileContents, buildLedger, manifestFor, recordLines, tempRunDir, writeRecordLines } from "./ledger-fixtures";

const sha = (b: string | Buffer): string => createHash("sha256").update(b).digest("hex");

async function verifyError(dir: string): Promise<LedgerVerifyError> {
  const err = await verifyLedger(dir).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LedgerVerifyError);
  return err as LedgerVerifyError;
}

/** recover must refuse exactly like verify and leave every byte of the directory as it was. */
async function expectRecoverRefuses(dir: string, code: string): Promise<void> {
  const before = allFileContents(dir);
  await expect(recoverLedger(dir)).rejects.toMatchObject({ code });
  expect(allFileContents(dir)).toEqual(before);
}

describe("torn final line", () => {
  it("a line cut mid-way is torn-final-line; recover keeps the bytes aside and truncates", async () => {
    const { dir } = await buildLedger(8);
    const file = path.join(dir, "records.ndjson");
    const full = fs.readFileSync(file);
    const lastStart = full.lastIndexOf(0x0a, full.length - 2) + 1;
    fs.truncateSync(file, full.length - 20); // crash in the middle of line 8
    const err = await verifyError(dir);
    expect(err.code).toBe("torn-final-line");
    expect(err.line).toBe(8);
    const tornLen = full.length - 20 - lastStart;
    expect(err.message).toBe(
      `ledger ${dir}: torn-final-line at line 8: the final line has no terminating newline (${tornLen} bytes from offset ${lastStart}); recoverLedger can cut it`,
    );

    const rec = await recoverLedger(dir);
    expect(rec.recovered).toBe(true);
    expect(rec.truncatedBytes).toBe(tornLen);
    expect(path.dirname(rec.movedTo!)).toBe(dir);
    expect(path.basename(rec.movedTo!)).toMatch(/^records\.ndjson\.torn-\d{8}T\d{9}Z$/);
    expect(fs.readFileSync(rec.movedTo!)).toEqual(full.subarray(lastStart, full.length - 20));
    expect(fs.readFileSync(file)).toEqual(full.subarray(0, lastStart));
    await expect(verifyLedger(dir)).resolves.toMatchObject({ ok: true, records: 7, complete: false, outcome: null });
    // recovering a sound ledger is a no-op
    await expect(recoverLedger(dir)).resolves.toEqual({ recovered: false, truncatedBytes: 0 });
    expect(fs.readFileSync(file)).toEqual(full.subarray(0, lastStart));
  });

  it("a complete last line that lacks only its newline is torn-final-line and is cut whole", async () => {
    const { dir } = await buildLedger(5);
    const file = path.join(dir, "records.ndjson");
    const full = fs.readFileSync(file);
    fs.truncateSync(file, full.length - 1);
    const err = await verifyError(dir);
    expect(err).toMatchObject({ code: "torn-final-line", line: 5 });
    const lastStart = full.lastIndexOf(0x0a, full.length - 2) + 1;
    const rec = await recoverLedger(dir);
    expect(rec).toMatchObject({ recovered: true, truncatedBytes: full.length - 1 - lastStart });
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 4, complete: false });
  });

  it("an unparsable final line with a newline is torn-final-line too", async () => {
    const { dir } = await buildLedger(4);
    const lines = recordLines(dir);
    lines[3] = lines[3]!.slice(0, 30);
    writeRecordLines(dir, lines);
    const err = await verifyError(dir);
    expect(err).toMatchObject({ code: "torn-final-line", line: 4 });
    expect(err.detail).toMatch(/^the final line does not parse: /);
    await expect(recoverLedger(dir)).resolves.toMatchObject({ recovered: true, truncatedBytes: 31 });
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 3 });
  });

  it("a torn first line is cut back to an empty ledger", async () => {
    const { dir } = await buildLedger(1);
    fs.truncateSync(path.join(dir, "records.ndjson"), 10);
    await expect(recoverLedger(dir)).resolves.toMatchObject({ recovered: true, truncatedBytes: 10 });
    await expect(verifyLedger(dir)).resolves.toMatchObject({ records: 0, complete: false });
  });

  it("a completed ledger cannot be torn: a missing final newline is a hard error recover refuses", async () => {
    const { dir } = await buildLedger(3, { complete: true });
    const file = path.join(dir, "records.ndjson");
    fs.truncateSync(file, fs.statSync(file).size - 1);
    const err = await verifyError(dir);
    expect(err).toMatchObject({ code: "invalid-json", line: 3 });
    expect(err.detail).toBe("expected the line to end with a newline (the ledger is complete, so this is not a torn write)");
    await expectRecoverRefuses(dir, "invalid-json");
  });
});

describe("damage in the middle is a hard, named error", () => {
  it("a corrupted (unparsable) middle line is invalid-json naming the line; recover refuses", async () => {
    const { dir } = await buildLedger(8);
    const lines = recordLines(dir);
    lines[4] = lines[4]!.replace('"kind"', '"kind');
    writeRecordLines(dir, lines);
    const err = await verifyError(dir);
    expect(err.code).toBe("invalid-json");
    expect(err.line).toBe(5);
    expect(err.message).toMatch(new RegExp(`^ledger ${dir}: invalid-json at line 5: expected a JSON object, found unparsable text: `));
    await expectRecoverRefuses(dir, "invalid-json");
  });

  it("an altered middle line that still parses breaks the hash chain at the next line", async () => {
    const { dir } = await buildLedger(8);
    const lines = recordLines(dir);
    const original4 = lines[3]!;
    lines[3] = lines[3]!.replace('"member":"agent-2"', '"member":"agent-9"');
    expect(lines[3]).not.toBe(original4);
    writeRecordLines(dir, lines);
    const err = await verifyError(dir);
    expect(err.code).toBe("hash-chain-broken");
    expect(err.line).toBe(5);
    expect(err.message).toBe(
      `ledger ${dir}: hash-chain-broken at line 5: expected prev = SHA-256 of line 4 (${sha(lines[3]!)}), found ${sha(original4)}: line 4 was altered or line 5 does not follow it`,
    );
    await expectRecoverRefuses(dir, "hash-chain-broken");
  });

  it("a deleted middle line is seq-gap naming the line; recover refuses", async () => {
    const { dir } = await buildLedger(8);
    const lines = recordLines(dir);
    lines.splice(4, 1);
    writeRecordLines(dir, lines);
    const err = await verifyError(dir);
    expect(err).toMatchObject({ code: "seq-gap", line: 5 });
    expect(err.message).toBe(`ledger ${dir}: seq-gap at line 5: expected seq 5, found 6: 1 record(s) missing before it`);
    await expectRecoverRefuses(dir, "seq-gap");
  });

  it("a deleted final complete line is not detectable without completion, but is with it (count-mismatch)", async () => {
    const { dir } = await buildLedger(6, { complete: true });
    writeRecordLines(dir, recordLines(dir).slice(0, 5));
    const err = await verifyError(dir);
    expect(err.message).toBe(`ledger ${dir}: count-mismatch: completion.json says 6 records, records.ndjson has 5`);
  });

  it("a duplicated line is seq-mismatch", async () => {
    const { dir } = await buildLedger(5);
    const lines = recordLines(dir);
    lines.splice(2, 0, lines[1]!);
    writeRecordLines(dir, lines);
    const err = await verifyError(dir);
    expect(err.message).toBe(`ledger ${dir}: seq-mismatch at line 3: expected seq 3, found 2: a duplicated or reordered record`);
  });

  it("a blank line is blank-line", async () => {
    const { dir } = await buildLedger(4);
    const lines = recordLines(dir);
    lines.splice(2, 0, "");
    writeRecordLines(dir, lines);
    const err = await verifyError(dir);
    expect(err).toMatchObject({ code: "blank-line", line: 3 });
  });

  it("a record with a malformed field is record-invalid", async () => {
    const { dir } = await buildLedger(3);
    const lines = recordLines(dir);
    const r = JSON.parse(lines[2]!);
    r.at = "yesterday";
    lines[2] = JSON.stringify(r);
    writeRecordLines(dir, lines);
    const err = await verifyError(dir);
    expect(err.message).toBe(`ledger ${dir}: record-invalid at line 3: expected at to be an RFC 3339 date-time, found "yesterday"`);
  });
});

describe("manifest and completion tampering", () => {
  it("manifest missing", async () => {
    const { dir } = await buildLedger(2);
    fs.rmSync(path.join(dir, "manifest.json"));
    const err = await verifyError(dir);
    expect(err.message).toBe(`ledger ${dir}: manifest-missing: manifest.json does not exist`);
  });

  it("an artifact root or a missing directory instead of a run directory: manifest-missing says what to give", async () => {
    const { dir } = await buildLedger(2);
    const root = path.dirname(dir);
    expect((await verifyError(root)).message).toBe(
      `ledger ${root}: manifest-missing: manifest.json does not exist; this is an artifact root: give one of its 1 run directories, e.g. ${dir}`,
    );
    const nowhere = path.join(root, "no-such-run");
    expect((await verifyError(nowhere)).message).toBe(
      `ledger ${nowhere}: manifest-missing: manifest.json does not exist; no such directory: give a run directory, <artifactRoot>/<runId>`,
    );
  });

  it("manifest without a required field names the field", async () => {
    const { dir } = await buildLedger(2);
    const file = path.join(dir, "manifest.json");
    const m = JSON.parse(fs.readFileSync(file, "utf8"));
    delete m.profile;
    fs.writeFileSync(file, JSON.stringify(m));
    const err = await verifyError(dir);
    expect(err.code).toBe("manifest-invalid");
    expect(err.detail).toMatch(/^manifest\.profile: /);
  });

  it("an altered manifest breaks the chain at line 1", async () => {
    const { dir } = await buildLedger(2);
    const file = path.join(dir, "manifest.json");
    const original = fs.readFileSync(file);
    fs.writeFileSync(file, original.toString("utf8").replace('"profile": "host"', '"profile": "gke"'));
    const err = await verifyError(dir);
    expect(err.message).toBe(
      `ledger ${dir}: hash-chain-broken at line 1: expected prev = SHA-256 of manifest.json (${sha(fs.readFileSync(file))}), found ${sha(original)}: the manifest was altered or the records belong to another run`,
    );
  });

  it("an altered spec is spec-digest-mismatch", async () => {
    const { dir } = await buildLedger(2);
    const file = path.join(dir, "manifest.json");
    fs.writeFileSync(file, fs.readFileSync(file, "utf8").replace('"replicas": 2', '"replicas": 3'));
    expect((await verifyError(dir)).code).toBe("spec-digest-mismatch");
  });

  const tamper = async (edit: (c: Record<string, unknown>) => void): Promise<{ dir: string; err: LedgerVerifyError }> => {
    const { dir } = await buildLedger(4, { complete: true });
    const file = path.join(dir, "completion.json");
    const c = JSON.parse(fs.readFileSync(file, "utf8"));
    edit(c);
    fs.writeFileSync(file, JSON.stringify(c));
    return { dir, err: await verifyError(dir) };
  };

  it("records count", async () => {
    const { dir, err } = await tamper((c) => (c.records = 5));
    expect(err.message).toBe(`ledger ${dir}: count-mismatch: completion.json says 5 records, records.ndjson has 4`);
  });

  it("recordsSha256", async () => {
    const { dir, err } = await tamper((c) => (c.recordsSha256 = "a".repeat(64)));
    const actual = sha(fs.readFileSync(path.join(dir, "records.ndjson")));
    expect(err.message).toBe(`ledger ${dir}: records-digest-mismatch: completion.json recordsSha256 is ${"a".repeat(64)}, records.ndjson hashes to ${actual}`);
  });

  it("manifestSha256", async () => {
    const { dir, err } = await tamper((c) => (c.manifestSha256 = "b".repeat(64)));
    const actual = sha(fs.readFileSync(path.join(dir, "manifest.json")));
    expect(err.message).toBe(`ledger ${dir}: manifest-digest-mismatch: completion.json manifestSha256 is ${"b".repeat(64)}, manifest.json hashes to ${actual}`);
  });

  it("an unknown outcome is completion-invalid naming the field", async () => {
    const { err } = await tamper((c) => (c.outcome = "exploded"));
    expect(err.code).toBe("completion-invalid");
    expect(err.detail).toMatch(/^completion\.outcome: /);
  });

  it("succeeded with a first failure is completion-invalid", async () => {
    const { dir, err } = await tamper((c) => (c.firstFailure = { member: "agent-0", reason: "x" }));
    expect(err.message).toBe(`ledger ${dir}: completion-invalid: completion.firstFailure: must be null when outcome is "succeeded"`);
  });

  it("records appended after completion are count-mismatch, and recover refuses", async () => {
    const { dir } = await buildLedger(3, { complete: true });
    const lines = recordLines(dir);
    const r = JSON.parse(lines[2]!);
    lines.push(JSON.stringify({ ...r, seq: 4, prev: sha(lines[2]!) }));
    writeRecordLines(dir, lines);
    expect((await verifyError(dir)).code).toBe("count-mismatch");
    await expectRecoverRefuses(dir, "count-mismatch");
  });
});

/**
 * A hand-made complete ledger of 3 records (run-started, member-failed, run-failed) whose chain and
 * digests are all right, written from TEXT so that a test can put any JSON string literal (`raw`, e.g.
 * `"x\ud83d"` with a literal backslash escape) or any bytes into manifest.json, a record or
 * completion.json. Returns the run directory.
 */
function handMadeLedger(raw: { manifest?: string; record?: string; completion?: string } = {}, bytes: { record?: Buffer } = {}): string {
  const dir = tempRunDir();
  fs.mkdirSync(dir, { recursive: true });
  const base = manifestFor();
  const manifest = { ...base, specSha256: sha(canonicalJson(base.spec)) };
  const manifestText = `${JSON.stringify(manifest).slice(0, -1)},"note":${raw.manifest ?? '"ok"'}}\n`;
  fs.writeFileSync(path.join(dir, "manifest.json"), manifestText);
  const reason = raw.record ?? '"member agent-0 exited before it was ready"';
  const lines: Buffer[] = [];
  const push = (head: string, body: Buffer | string): void => {
    const prev = lines.length === 0 ? sha(manifestText) : sha(lines[lines.length - 1]!);
    lines.push(Buffer.concat([Buffer.from(head), Buffer.from(body), Buffer.from(`,"prev":"${prev}"}`)]));
  };
  push('{"seq":1,"at":"2026-01-02T03:04:05.010Z","elapsedMs":10,"kind":"run-started"', "");
  push('{"seq":2,"at":"2026-01-02T03:04:05.020Z","elapsedMs":20,"kind":"member-failed","member":"agent-0","reason":', bytes.record ?? reason);
  push('{"seq":3,"at":"2026-01-02T03:04:05.030Z","elapsedMs":30,"kind":"run-failed","member":"agent-0","reason":"x"', "");
  const records = Buffer.concat(lines.flatMap((line) => [line, Buffer.from("\n")]));
  fs.writeFileSync(path.join(dir, "records.ndjson"), records);
  const completion =
    `{"outcome":"failed","firstFailure":{"member":"agent-0","reason":${raw.completion ?? '"x"'}},"records":3,` +
    `"recordsSha256":"${sha(records)}","manifestSha256":"${sha(manifestText)}","phasesMs":{"startup":30},"completedAt":"2026-01-02T03:04:05.040Z"}\n`;
  fs.writeFileSync(path.join(dir, "completion.json"), completion);
  return dir;
}

describe("text is valid UTF-8 with no lone surrogates (issue #12, finding 7)", () => {
  it("the hand-made ledger verifies, with an emoji written raw or as an escaped surrogate PAIR", async () => {
    await expect(verifyLedger(handMadeLedger())).resolves.toMatchObject({ ok: true, records: 3, complete: true, outcome: "failed" });
    const pairs = handMadeLedger({ manifest: '"\\ud83d\\ude00"', record: '"tail \\ud83d\\ude00 ok"', completion: '"😀"' });
    await expect(verifyLedger(pairs)).resolves.toMatchObject({ ok: true, records: 3 });
  });

  it("a lone surrogate escape in a record is lone-surrogate naming the line and the field; recover refuses", async () => {
    const dir = handMadeLedger({ record: '"output tail cut here: \\ud83d"' });
    const err = await verifyError(dir);
    expect(err.code).toBe("lone-surrogate");
    expect(err.line).toBe(2);
    expect(err.message).toBe(
      `ledger ${dir}: lone-surrogate at line 2: records.ndjson record.reason holds a lone surrogate U+D83D at character 22 (half of a character cut in two; strict JSON and UTF-8 readers refuse it)`,
    );
    await expectRecoverRefuses(dir, "lone-surrogate");
  });

  it("a lone surrogate in manifest.json or completion.json (a value or a key) is lone-surrogate naming the file", async () => {
    const m = handMadeLedger({ manifest: '"\\ude00"' });
    expect((await verifyError(m)).message).toBe(
      `ledger ${m}: lone-surrogate: manifest.json manifest.note holds a lone surrogate U+DE00 at character 0 (half of a character cut in two; strict JSON and UTF-8 readers refuse it)`,
    );
    const c = handMadeLedger({ completion: '"tail \\ud83d"' });
    expect((await verifyError(c)).message).toBe(
      `ledger ${c}: lone-surrogate: completion.json completion.firstFailure.reason holds a lone surrogate U+D83D at character 5 (half of a character cut in two; strict JSON and UTF-8 readers refuse it)`,
    );
    const k = handMadeLedger({ record: '"x","\\ud83d":1' });
    const err = await verifyError(k);
    expect(err.code).toBe("lone-surrogate");
    expect(err.detail).toBe(
      'records.ndjson record (key "\\ud83d") holds a lone surrogate U+D83D at character 0 (half of a character cut in two; strict JSON and UTF-8 readers refuse it)',
    );
  });

  it("bytes that are not UTF-8 in a record, the manifest or the completion are invalid-utf8 with the byte offset", async () => {
    // a 4-byte sequence cut after its second byte, inside a string
    const cut = Buffer.from([0x22, 0x61, 0xf0, 0x9f, 0x22]); // "a<F0 9F>"
    const dir = handMadeLedger({}, { record: cut });
    const err = await verifyError(dir);
    expect(err.code).toBe("invalid-utf8");
    expect(err.line).toBe(2);
    const lineStart = fs.readFileSync(path.join(dir, "records.ndjson")).indexOf(0x0a) + 1;
    const at = fs.readFileSync(path.join(dir, "records.ndjson")).indexOf(Buffer.from([0xf0, 0x9f]));
    expect(err.detail).toBe(`records.ndjson is not valid UTF-8 at byte ${at} (line 2, byte ${at - lineStart} of the line): 0xf0 0x9f 0x22 is not a UTF-8 sequence`);
    await expectRecoverRefuses(dir, "invalid-utf8");

    for (const file of ["manifest.json", "completion.json"]) {
      const d = handMadeLedger();
      const bytes = fs.readFileSync(path.join(d, file));
      const i = bytes.indexOf(Buffer.from('"x"')) !== -1 && file === "completion.json" ? bytes.indexOf(Buffer.from('"x"')) + 1 : bytes.indexOf(Buffer.from('"ok"')) + 1;
      bytes[i] = 0xff; // one byte that is never UTF-8
      fs.writeFileSync(path.join(d, file), bytes);
      const e = await verifyError(d);
      expect(e.code).toBe("invalid-utf8");
      expect(e.detail).toBe(`${file} is not valid UTF-8 at byte ${i}: 0xff is not a UTF-8 sequence`);
    }
  });

  it("an encoded surrogate (ED A0 BD) is not UTF-8 either", async () => {
    const dir = handMadeLedger({}, { record: Buffer.from([0x22, 0xed, 0xa0, 0xbd, 0x22]) });
    expect((await verifyError(dir)).code).toBe("invalid-utf8");
  });

  it("a torn final line cut inside a character is still torn-final-line, and recover cuts it", async () => {
    const { dir } = await buildLedger(3);
    const file = path.join(dir, "records.ndjson");
    const lines = recordLines(dir);
    // the writer is gone: append a 4th record by hand whose write stopped after 2 bytes of an emoji
    const r = JSON.parse(lines[2]!);
    const full = JSON.stringify({ ...r, seq: 4, kind: "member-failed", reason: "😀", prev: sha(lines[2]!) });
    const bytes = Buffer.from(full);
    fs.appendFileSync(file, bytes.subarray(0, bytes.indexOf(Buffer.from("😀")) + 2));
    expect((await verifyError(dir)).code).toBe("torn-final-line");
    await expect(recoverLedger(dir)).resolves.toMatchObject({ recovered: true });
    await expect(verifyLedger(dir)).resolves.toMatchObject({ ok: true, records: 3 });
  });
});

/**
 * Text that leaves the runtime is valid UTF-8 (issue #12, finding 7): the cutting helpers of
 * runtime/core/text.ts (code-point boundaries, no lone surrogates) and the member output capture
 * (runtime/backends/process/start.ts) fed chunks that split 2-, 3- and 4-byte UTF-8 sequences.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { OutputCapture } from "../../runtime/backends/process/start";
import { LedgerWriter } from "../../runtime/core/ledger";
import { verifyLedger } from "../../runtime/core/ledger/verify";
import { loadRunSpec } from "../../runtime/core/spec";
import { cutUnits, findLoneSurrogate, hasLoneSurrogate, lastUnits, wellFormed, wellFormedValue } from "../../runtime/core/text";

const EMOJI = "\u{1F600}"; // 😀: 2 UTF-16 units, 4 UTF-8 bytes
const strict = new TextDecoder("utf-8", { fatal: true });
const roots: string[] = [];
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
});

describe("cutUnits / lastUnits", () => {
  it("never cut a surrogate pair: an emoji straddling the limit is left out whole", () => {
    const text = `${"a".repeat(1999)}${EMOJI}b`;
    expect(text.slice(0, 2000)).toBe(`${"a".repeat(1999)}\ud83d`); // what a plain slice does
    expect(cutUnits(text, 2000)).toBe("a".repeat(1999));
    expect(cutUnits(text, 2001)).toBe(`${"a".repeat(1999)}${EMOJI}`);
    expect(cutUnits(text, 5000)).toBe(text);
    expect(cutUnits(EMOJI, 1)).toBe("");
    expect(cutUnits("abc", 0)).toBe("");
    expect(lastUnits(`a${EMOJI}${"b".repeat(1999)}`, 2000)).toBe("b".repeat(1999));
    expect(lastUnits(`a${EMOJI}${"b".repeat(1999)}`, 2001)).toBe(`${EMOJI}${"b".repeat(1999)}`);
    expect(lastUnits("abc", 0)).toBe("");
    expect(lastUnits("abc", 10)).toBe("abc");
  });

  it("2- and 3-byte characters are one UTF-16 unit: cut anywhere, still whole characters", () => {
    const text = "é€é€"; // U+00E9 (2 bytes), U+20AC (3 bytes)
    for (let n = 0; n <= text.length; n++) {
      expect(cutUnits(text, n)).toBe(text.slice(0, n));
      expect(strict.decode(Buffer.from(cutUnits(text, n)))).toBe(text.slice(0, n));
    }
  });

  it("every cut of a mixed string is well formed and round-trips through strict UTF-8", () => {
    const text = `x${EMOJI}é€${EMOJI}${EMOJI}\u{10FFFF}z`;
    for (let n = 0; n <= text.length + 1; n++) {
      for (const cut of [cutUnits(text, n), lastUnits(text, n)]) {
        expect(hasLoneSurrogate(cut)).toBe(false);
        expect(cut.length).toBeLessThanOrEqual(n);
        expect(strict.decode(Buffer.from(cut, "utf8"))).toBe(cut);
      }
    }
  });
});

describe("wellFormed / findLoneSurrogate", () => {
  it("replaces lone surrogates with U+FFFD and leaves pairs alone", () => {
    expect(wellFormed(`a\ud83d`)).toBe("a\ufffd");
    expect(wellFormed(`\ude00b`)).toBe("\ufffdb");
    expect(wellFormed(`\ude00\ud83d`)).toBe("\ufffd\ufffd");
    expect(wellFormed(`${EMOJI}x`)).toBe(`${EMOJI}x`);
    expect(hasLoneSurrogate(`${EMOJI}`)).toBe(false);
    expect(hasLoneSurrogate(`x\ud83d`)).toBe(true);
  });

  it("finds the first lone surrogate in any key or string of a JSON value, with its path", () => {
    expect(findLoneSurrogate({ a: [1, "ok", { b: `x\ud83d` }] }, "record")).toEqual({ path: "record.a[2].b", index: 1, unit: 0xd83d });
    expect(findLoneSurrogate({ [`k\ude00`]: 1 }, "manifest")).toEqual({ path: 'manifest (key "k\\ude00")', index: 1, unit: 0xde00 });
    expect(findLoneSurrogate({ a: EMOJI, b: [null, true, 3] }, "x")).toBeUndefined();
    expect(wellFormedValue({ a: [`\ud83d`], [`k\ude00`]: { c: EMOJI } })).toEqual({ a: ["\ufffd"], "k\ufffd": { c: EMOJI } });
  });
});

/** A capture on a temp output.log, fed through one stream. */
function capture(secrets: readonly string[] = []): { output: OutputCapture; stream: PassThrough; log: string } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-text-test-"));
  roots.push(root);
  const log = path.join(root, "output.log");
  const output = new OutputCapture(log, secrets);
  return { output, stream: new PassThrough(), log };
}

async function finish(c: ReturnType<typeof capture>): Promise<string> {
  c.stream.end();
  await c.output.closed(5_000);
  await c.output.end();
  return strict.decode(fs.readFileSync(c.log));
}

describe("OutputCapture keeps characters whole", () => {
  it.each([
    ["2-byte", "é"],
    ["3-byte", "€"],
    ["4-byte", EMOJI],
  ])("a %s sequence split between the bytes read with the header and the next chunk", async (_name, char) => {
    const c = capture();
    const bytes = Buffer.from(`ab${char}cd\n`);
    // the launcher hands over the bytes that arrived with its header line as a Buffer: cut after the lead byte
    c.output.attach(c.stream, { initial: bytes.subarray(0, 3), expected: false });
    c.stream.write(bytes.subarray(3));
    expect(await finish(c)).toBe(`ab${char}cd\n`);
    expect(c.output.tail(1)).toBe(`ab${char}cd`);
  });

  it.each([
    ["2-byte", "é"],
    ["3-byte", "€"],
    ["4-byte", EMOJI],
  ])("a %s sequence split across stream chunks, one byte at a time", async (_name, char) => {
    const c = capture();
    c.output.attach(c.stream);
    for (const byte of Buffer.from(`${char}${char}\n`)) c.stream.write(Buffer.from([byte]));
    expect(await finish(c)).toBe(`${char}${char}\n`);
  });

  it("the 64 KiB flush of a line without newline never splits a surrogate pair (a secret keeps a tail back)", async () => {
    // 64 hex characters, like a secretEnv token: the capture keeps 63 characters back at each flush.
    const c = capture(["0123456789abcdef".repeat(4)]);
    c.output.attach(c.stream);
    const text = EMOJI.repeat(40_000); // 80,000 UTF-16 units, 160,000 bytes, no newline
    c.stream.write(Buffer.from(text));
    const written = await finish(c);
    // compared as facts, not as 80,000-unit strings (a failing diff would print them whole)
    expect({ length: written.length, replacements: written.split("\ufffd").length - 1, same: written === `${text}\n` }).toEqual({
      length: text.length + 1,
      replacements: 0,
      same: true,
    }); // + the newline added at the end
  });

  it("a line longer than 2,000 units is cut in the ring buffer on a code-point boundary", async () => {
    const c = capture();
    c.output.attach(c.stream);
    const line = `${"a".repeat(1999)}${EMOJI}tail`;
    c.stream.write(`${line}\n`);
    expect(await finish(c)).toBe(`${line}\n`);
    const tail = c.output.tail(1);
    expect(hasLoneSurrogate(tail)).toBe(false);
    expect(tail).toBe(`${"a".repeat(1999)}… (${line.length} characters)`);
  });
});

describe("backstops where text enters the ledger", () => {
  it("the ledger writer writes U+FFFD for a lone surrogate a caller passes, never the \\udXXX escape; the ledger verifies", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-text-test-"));
    roots.push(root);
    const dir = path.join(root, "run");
    const spec = { apiVersion: "cohort-lab/v1", kind: "Cohort", name: "t", roles: [{ name: "a", app: { command: ["x"] } }] };
    const writer = await LedgerWriter.open(
      dir,
      { runId: "t-20260101T000000Z-abcdef", profile: "test", backend: "process", spec, tools: {}, createdAt: "2026-01-01T00:00:00.000Z" },
      { fsync: "none" },
    );
    const written = await writer.append("member-failed", { member: "a-0", reason: "cut \ud83d", [`k\ude00`]: [`\ud83d${EMOJI}`] });
    expect(written).toMatchObject({ reason: "cut \ufffd", "k\ufffd": [`\ufffd${EMOJI}`] });
    await writer.complete({ outcome: "failed", firstFailure: { member: "a-0", reason: "tail \ud83d" }, phasesMs: {} });
    for (const file of ["records.ndjson", "completion.json"]) expect(fs.readFileSync(path.join(dir, file), "utf8")).not.toMatch(/\\ud[89a-f]/i);
    expect(JSON.parse(fs.readFileSync(path.join(dir, "completion.json"), "utf8")).firstFailure.reason).toBe("tail \ufffd");
    await expect(verifyLedger(dir)).resolves.toMatchObject({ ok: true, records: 1 });
  });

  it("a RunSpec with a lone surrogate is refused naming the path", () => {
    const text = '{"apiVersion":"cohort-lab/v1","kind":"Cohort","name":"t","roles":[{"name":"a","app":{"command":["echo","\\ud83d"]}}]}';
    expect(() => loadRunSpec(text)).toThrow("roles[0].app.command[1]: holds a lone surrogate U+D83D at character 0 (half of a character); text must be valid Unicode");
  });
});

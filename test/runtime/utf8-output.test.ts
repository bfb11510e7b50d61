/**
 * Issue #12, finding 7 with real processes: every text the runtime writes is valid UTF-8. A member writes
 * 4-byte characters across output.log's 64 KiB flush boundary (with and without a secret, which makes
 * the flush keep a tail back), and a failing member's last line puts an emoji across the 2,000-unit cut
 * of its output tail, which lands in the ledger, completion.json and the run's summary.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { verifyLedger } from "../../runtime/core/ledger/verify";
import { findLoneSurrogate } from "../../runtime/core/text";
import { nodeMember, runCohort as runWith } from "./process-helpers";

const EMOJI = "\u{1F600}"; // 4 UTF-8 bytes, 2 UTF-16 units
const strict = new TextDecoder("utf-8", { fatal: true });
/** What `plain` writes: the emoji's 4 bytes straddle byte 65,536 (bytes 65,534-65,537), twice over. */
const PLAIN = `${"a".repeat(65_534)}${EMOJI}b${"c".repeat(65_533)}${EMOJI}d\n`;
/** What `secret` writes: 400,000 bytes of emoji without a newline (more than 64 Ki units arrive before it), then one. */
const SECRET = `${EMOJI.repeat(100_000)}\n`;
/** The last line of `tail`: an emoji at UTF-16 units 1,999-2,000, across the ring buffer's 2,000-unit cut. */
const TAIL_LINE = `${"a".repeat(1_999)}${EMOJI}tail`;

/**
 * A member that writes `text` to stdout in one write, then prints `done` and sleeps. `text` travels as
 * JavaScript source that rebuilds it (`"a".repeat(n)` runs), not as one argv string: Linux refuses an
 * argument longer than 128 KiB (E2BIG).
 */
function writer(text: string): string[] {
  const runs: string[] = [];
  for (const match of text.matchAll(/(.)\1*/gsu)) runs.push(`${JSON.stringify(match[1])}.repeat(${[...match[0]].length})`);
  return nodeMember(`process.stdout.write(${runs.join("+")}, () => { console.log("done"); setInterval(() => {}, 1000); })`);
}

/** Facts about a file, compared instead of its (long) text so that a failure prints little. */
function decoded(file: string): { valid: boolean; replacements: number; text: string } {
  const bytes = fs.readFileSync(file);
  try {
    const text = strict.decode(bytes);
    return { valid: true, replacements: text.split("\ufffd").length - 1, text };
  } catch {
    return { valid: false, replacements: -1, text: "" };
  }
}

describe.each(["native", "perl", "direct"] as const)("text that leaves the runtime is valid UTF-8 (launcher: %s)", (launcher) => {
  it("output.log keeps characters whole across the 64 KiB flush; the cut output tail in the ledger, completion and summary has no lone surrogate", async () => {
    const { result, runDir, records } = await runWith(
      [
        { name: "plain", app: { command: writer(PLAIN), port: false }, readiness: { log: { pattern: "^done$" } } },
        { name: "secret", app: { command: writer(SECRET), port: false, secretEnv: ["TOKEN"] }, readiness: { log: { pattern: "^done$" } } },
        {
          name: "tail",
          needs: ["plain", "secret"],
          app: { command: nodeMember(`process.stdout.write("a".repeat(1999) + ${JSON.stringify(`${EMOJI}tail\n`)}, () => process.exit(3))`), port: false },
          readiness: { log: { pattern: "^never$" } },
        },
      ],
      {},
      { launcher },
    );

    for (const [member, text] of [
      ["plain-0", `${PLAIN}done\n`],
      ["secret-0", `${SECRET}done\n`],
      ["tail-0", `${TAIL_LINE}\n`],
    ] as const) {
      const log = decoded(path.join(runDir, "members", member, "output.log"));
      expect({ member, valid: log.valid, replacements: log.replacements, length: log.text.length, same: log.text === text }).toEqual({
        member,
        valid: true,
        replacements: 0,
        length: text.length,
        same: true,
      });
    }

    expect(result.outcome).toBe("failed");
    expect(result.firstFailure?.member).toBe("tail-0");
    const cutTail = `${"a".repeat(1_999)}… (${TAIL_LINE.length} characters)`;
    // the summary `cohort run` prints is JSON.stringify of these fields
    const summary = JSON.stringify({ firstFailure: result.firstFailure });
    expect(summary).not.toMatch(/\\ud[89a-f]/i);
    expect(result.firstFailure?.reason.endsWith(`\n${cutTail}`)).toBe(true);
    const failed = records.find((r) => r.kind === "member-failed" && r.member === "tail-0");
    expect(failed?.outputTail).toBe(cutTail);

    for (const file of ["manifest.json", "records.ndjson", "completion.json"]) {
      const text = decoded(path.join(runDir, file));
      expect({ file, valid: text.valid, loneEscape: /\\ud[89a-f]/i.test(text.text) }).toEqual({ file, valid: true, loneEscape: false });
    }
    const completion = JSON.parse(fs.readFileSync(path.join(runDir, "completion.json"), "utf8"));
    expect(findLoneSurrogate(completion, "completion")).toBeUndefined();
    expect(completion.firstFailure.reason.endsWith(cutTail)).toBe(true);
    await expect(verifyLedger(runDir)).resolves.toMatchObject({ ok: true, complete: true, outcome: "failed" });
  });
});

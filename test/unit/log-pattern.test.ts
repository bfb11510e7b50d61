/**
 * `log` readiness patterns (runtime/core/log-pattern.ts): RE2 syntax, matched in time linear in the line, so a
 * pattern such as `^(a+)+$` cannot freeze the runtime's event loop (deadlines, signals, ledger writes).
 */
import { describe, expect, it } from "vitest";
import type { MemberHandle } from "../../runtime/core/backend";
import { compileLogPattern, logPatternProblem } from "../../runtime/core/log-pattern";
import { probeStatus, waitReady } from "../../runtime/core/probes";
import type { CompiledReadiness } from "../../runtime/core/spec";

/** A line that makes a backtracking engine try 2^29 ways of splitting the a's against `^(a+)+$`. */
const EVIL_LINE = `${"a".repeat(29)}b`;

describe("logPatternProblem", () => {
  it.each([
    ["ready on port \\d+", undefined],
    ["^(a+)+$", undefined],
    ["(?i)listening", undefined],
    ["(?P<port>\\d+)", undefined],
    ["(a)\\1", "invalid or unsupported in RE2 syntax: invalid escape sequence: `\\1` (backreferences are not supported)"],
    ["(?=ready)", "invalid or unsupported in RE2 syntax: invalid or unsupported Perl syntax: `(?=` (lookaround is not supported)"],
    ["(?!x)y", "invalid or unsupported in RE2 syntax: invalid or unsupported Perl syntax: `(?!` (lookaround is not supported)"],
    ["(?<=x)y", "invalid or unsupported in RE2 syntax: invalid named capture: `(?<=x)y` (lookaround is not supported)"],
    ["([a-", "invalid or unsupported in RE2 syntax: missing closing ]: `[a-`"],
  ])("%j", (pattern, problem) => {
    expect(logPatternProblem(pattern)).toBe(problem);
  });
});

describe("compileLogPattern", () => {
  it("matches like a JavaScript RegExp on ordinary patterns (unanchored, ^ and $ at the line's ends)", () => {
    const re = compileLogPattern("listening on (port )?\\d+$");
    expect(re.test("server listening on port 8080")).toBe(true);
    expect(re.test("server listening on 8080 now")).toBe(false);
  });

  it("runs ^(a+)+$ on the adversarial line in linear time (a backtracking engine takes seconds)", () => {
    const re = compileLogPattern("^(a+)+$");
    const start = performance.now();
    expect(re.test(EVIL_LINE)).toBe(false);
    expect(re.test(`${"a".repeat(100_000)}b`)).toBe(false);
    expect(performance.now() - start).toBeLessThan(1_000);
  });

  it("throws the reason logPatternProblem gives", () => {
    expect(() => compileLogPattern("(a)\\1")).toThrow(logPatternProblem("(a)\\1"));
  });
});

describe("waitReady with a log probe", () => {
  it("does not stall the event loop on ^(a+)+$ and a line of a's ending in b", async () => {
    const listeners = new Set<(line: string) => void>();
    const handle: MemberHandle = {
      member: "m-0",
      endpoint: { host: "127.0.0.1", port: 1 },
      onOutputLine: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    } as MemberHandle;
    const readiness: CompiledReadiness = { kind: "log", pattern: "^(a+)+$" };
    const status = probeStatus(readiness, handle);
    const ready = waitReady(readiness, handle, status, new AbortController().signal);
    const start = performance.now();
    for (const listener of listeners) listener(EVIL_LINE);
    expect(performance.now() - start).toBeLessThan(1_000);
    for (const listener of listeners) listener("aaaa");
    await ready;
    expect(status.attempts).toBe(2);
    expect(listeners.size).toBe(0);
  });
});

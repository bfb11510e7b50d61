import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { CohortError, LedgerInputError, LedgerVerifyError } from "../../runtime/core/errors";
import { LedgerWriter, canonicalJson, isRfc3339, sha256Hex, type LedgerRecord } from "../../runtime/core/ledger";
import { timelineOf } from "../../runtime/core/ledger/show";

describe("canonicalJson", () => {
  it.each([
    [null, "null"],
    [true, "true"],
    [0, "0"],
    [-1.5, "-1.5"],
    [1e21, "1e+21"],
    ['é\n"', '"é\\n\\""'],
    [[3, "a", null], '[3,"a",null]'],
    [{ b: 1, a: { d: [1, { z: 0, y: 1 }], c: "x" } }, '{"a":{"c":"x","d":[1,{"y":1,"z":0}]},"b":1}'],
    [{ a: undefined, b: 2 }, '{"b":2}'],
    [{ "\u00e9": 1, z: 2, A: 3, "10": 4, "9": 5 }, '{"10":4,"9":5,"A":3,"z":2,"é":1}'],
  ])("%j -> %s", (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it("refuses values JSON cannot represent, naming the path", () => {
    expect(() => canonicalJson({ a: [1, Number.NaN] })).toThrow(new LedgerInputError("value.a[1]", "NaN is not representable in JSON"));
    expect(() => canonicalJson({ n: 10n })).toThrow("value.n: a bigint is not representable in JSON");
    const cyc: Record<string, unknown> = {};
    cyc.self = cyc;
    expect(() => canonicalJson(cyc)).toThrow("value.self: circular reference");
  });

  it("the SHA-256 of the canonical form does not depend on key order", () => {
    expect(sha256Hex(canonicalJson({ x: 1, y: [2] }))).toBe(sha256Hex(canonicalJson({ y: [2], x: 1 })));
    expect(sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  });
});

describe("isRfc3339", () => {
  it.each([
    ["2026-01-02T03:04:05Z", true],
    ["2026-01-02T03:04:05.678Z", true],
    ["2026-01-02T03:04:05+02:00", true],
    ["2026-01-02 03:04:05Z", false],
    ["2026-13-02T03:04:05Z", false],
    ["yesterday", false],
    [1767323045000, false],
  ])("%s -> %s", (v, ok) => expect(isRfc3339(v)).toBe(ok));
});

describe("errors", () => {
  it("carry stable codes and names", () => {
    const e = new LedgerVerifyError("seq-gap", "/x", "expected seq 5, found 7", 5, 100);
    expect(e).toBeInstanceOf(CohortError);
    expect(e.name).toBe("LedgerVerifyError");
    expect(e.code).toBe("seq-gap");
    expect(e.message).toBe("ledger /x: seq-gap at line 5: expected seq 5, found 7");
    expect([e.line, e.byteOffset, e.detail]).toEqual([5, 100, "expected seq 5, found 7"]);
    expect(new LedgerInputError("manifest.runId", "required").code).toBe("ledger-input-invalid");
  });
});

describe("LedgerWriter.open input validation (before anything is created)", () => {
  const base = {
    runId: "r",
    profile: "host",
    backend: "process",
    spec: { roles: [] },
    tools: {},
    createdAt: "2026-01-02T03:04:05Z",
  };
  it.each([
    [{ ...base, runId: "" }, "manifest.runId: expected a non-empty string"],
    [{ ...base, createdAt: "2026-01-02" }, "manifest.createdAt: expected an RFC 3339 date-time, e.g. 2026-01-02T03:04:05.678Z"],
    [{ ...base, spec: undefined }, "manifest.spec: required"],
    [{ ...base, runtimePid: -1 }, "manifest.runtimePid: Too small: expected number to be >0"],
  ])("%j is refused", async (manifest, message) => {
    const dir = path.join(os.tmpdir(), `cohort-ledger-unit-${process.pid}-${Math.random().toString(16).slice(2)}`);
    const err = await LedgerWriter.open(dir, manifest as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LedgerInputError);
    expect((err as Error).message).toBe(message);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("refuses an unknown fsync policy and a short secret", async () => {
    await expect(LedgerWriter.open("/nonexistent/x", base, { fsync: "sometimes" as never })).rejects.toThrow(
      'options.fsync: expected "always", "transitions" or "none", got "sometimes"',
    );
    await expect(LedgerWriter.open("/nonexistent/x", base, { secrets: ["longenough", "abc"] })).rejects.toThrow(
      "options.secrets[1]: a secret must be at least 8 characters to be redacted reliably (got 3)",
    );
  });
});

describe("timelineOf (critical path)", () => {
  let seq = 0;
  const rec = (elapsedMs: number, kind: string, member?: string, extra: Record<string, unknown> = {}): LedgerRecord => ({
    seq: ++seq,
    at: "2026-01-02T03:04:05.000Z",
    elapsedMs,
    kind,
    ...(member ? { member } : {}),
    ...extra,
    prev: "0".repeat(64),
  });
  const diamond = {
    roles: [
      { name: "db", replicas: 1 },
      { name: "cache", replicas: 1 },
      { name: "api", replicas: 2, needs: ["db", "cache"] },
      { name: "web", needs: ["api"] },
    ],
  };

  it("walks back through the latest-ready dependency across roles", () => {
    const t = timelineOf(diamond, [
      rec(5, "member-ready", "db-0"),
      rec(9, "member-ready", "cache-0"),
      rec(20, "member-ready", "api-0"),
      rec(18, "member-ready", "api-1"),
      rec(25, "member-ready", "web-0"),
    ]);
    expect(t.criticalPath).toEqual({ members: ["cache-0", "api-0", "web-0"], readyMs: 25 });
  });

  it("ties go to the member earlier in spec order; members missing from the spec are kept", () => {
    const t = timelineOf(diamond, [
      rec(9, "member-ready", "db-0"),
      rec(9, "member-ready", "cache-0"),
      rec(20, "member-ready", "api-1"),
      rec(20, "member-ready", "api-0"),
      rec(1, "member-started", "sidecar-7"),
    ]);
    expect(t.criticalPath).toEqual({ members: ["db-0", "api-0"], readyMs: 20 });
    expect(t.members.find((m) => m.member === "sidecar-7")).toEqual({ member: "sidecar-7", role: "sidecar", startedMs: 1, attempts: 1 });
  });

  it("retries: first scheduled, last started, attempts counted, first failure reason kept", () => {
    const t = timelineOf({ roles: [{ name: "a", replicas: 1 }] }, [
      rec(1, "member-scheduled", "a-0"),
      rec(2, "member-started", "a-0"),
      rec(3, "member-failed", "a-0", { reason: "exited with code 1 before ready" }),
      rec(4, "member-scheduled", "a-0"),
      rec(5, "member-started", "a-0"),
      rec(6, "member-failed", "a-0", { reason: "timed out" }),
    ]);
    expect(t.members).toEqual([{ member: "a-0", role: "a", scheduledMs: 1, startedMs: 5, attempts: 2, failed: "exited with code 1 before ready" }]);
    expect(t.criticalPath).toEqual({ members: [], readyMs: 0 });
  });

  it("a spec without roles yields members from records only and no dependencies", () => {
    const t = timelineOf({}, [rec(3, "member-ready", "x-0"), rec(4, "member-ready", "y-0")]);
    expect(t.members.map((m) => m.member)).toEqual(["x-0", "y-0"]);
    expect(t.criticalPath).toEqual({ members: ["y-0"], readyMs: 4 });
  });
});

import { describe, expect, it } from "vitest";
import { durationProblem, formatDurationMs, parseDurationMs } from "../../runtime/core/duration";

describe("parseDurationMs", () => {
  it.each([
    ["250ms", 250],
    ["0s", 0],
    ["90s", 90_000],
    ["1.5m", 90_000],
    ["2m", 120_000],
    ["1h", 3_600_000],
    ["1h30m", 5_400_000],
    ["1m30s", 90_000],
    ["0.1s", 100],
    ["1.001s", 1_001],
    ["1h30m15s250ms", 5_415_250],
    ["1.5m30s", 120_000],
    ["0.0010s", 1],
    ["0.1s", 100],
    ["0.7s", 700],
    ["2147483.647s", 2_147_483_647],
  ])("%s -> %d ms", (text, ms) => {
    expect(parseDurationMs(text)).toBe(ms);
  });

  it.each([
    [90, 'must be a duration with a unit (ms, s, m or h), e.g. "90s" (got 90)'],
    ["90", 'must be a duration with a unit (ms, s, m or h), e.g. "90s" (got "90")'],
    ["-5s", 'must be a duration that is not negative (got "-5s")'],
    ["5d", 'must be a duration of <number><unit> segments with unit ms, s, m or h, e.g. "90s", "1.5m", "1h30m" (got "5d")'],
    ["5 s", 'must be a duration of <number><unit> segments with unit ms, s, m or h, e.g. "90s", "1.5m", "1h30m" (got "5 s")'],
    ["", 'must be a duration such as "90s" (got an empty string)'],
    ["0.5ms", 'must be a whole number of milliseconds (got "0.5ms")'],
    ["0.0001ms", 'must be a whole number of milliseconds (got "0.0001ms")'],
    ["0.0004s", 'must be a whole number of milliseconds (got "0.0004s")'],
    ["1.0000001s", 'must be a whole number of milliseconds (got "1.0000001s")'],
    ["1s1s", 'must be a duration with each unit at most once, largest first (h, m, s, ms), e.g. "1h30m" (got "1s1s")'],
    ["1m1h", 'must be a duration with each unit at most once, largest first (h, m, s, ms), e.g. "1h30m" (got "1m1h")'],
    ["500ms1s", 'must be a duration with each unit at most once, largest first (h, m, s, ms), e.g. "1h30m" (got "500ms1s")'],
    ["600h", 'must be at most 2147483647ms, about 24.8 days (got "600h")'],
    ["2147483.6475s", 'must be a whole number of milliseconds (got "2147483.6475s")'],
    [`${"9".repeat(400)}h`, `must be at most 2147483647ms, about 24.8 days (got "${"9".repeat(400)}h")`],
    [null, 'must be a duration such as "90s" (got null)'],
    [[], 'must be a duration such as "90s" (got an array)'],
  ])("refuses %j", (value, reason) => {
    expect(durationProblem(value)).toBe(reason);
    expect(() => parseDurationMs(value)).toThrow(new RangeError(reason));
  });
});

describe("formatDurationMs", () => {
  it.each([
    [60_000, "60s"],
    [90_000, "90s"],
    [120_000, "2m"],
    [3_600_000, "1h"],
    [1_500, "1500ms"],
    [0, "0s"],
  ])("%d -> %s", (ms, text) => {
    expect(formatDurationMs(ms)).toBe(text);
    expect(parseDurationMs(text)).toBe(ms);
  });
});

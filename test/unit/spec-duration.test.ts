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
  ])("%s -> %d ms", (text, ms) => {
    expect(parseDurationMs(text)).toBe(ms);
  });

  it.each([
    [90, 'a duration needs a unit (ms, s, m or h), e.g. "90s"; got 90'],
    ["90", 'a duration needs a unit (ms, s, m or h), e.g. "90s"; got "90"'],
    ["-5s", 'a duration cannot be negative; got "-5s"'],
    ["5d", '"5d" is not a duration: expected <number><unit> segments with unit ms, s, m or h (e.g. "90s", "1.5m", "1h30m")'],
    ["5 s", '"5 s" is not a duration: expected <number><unit> segments with unit ms, s, m or h (e.g. "90s", "1.5m", "1h30m")'],
    ["", 'expected a duration such as "90s"; got an empty string'],
    ["0.5ms", '"0.5ms" is 0.5ms: durations must be whole milliseconds'],
    ["600h", '"600h" is too long: the maximum is 2147483647ms (about 24.8 days)'],
    [null, 'expected a duration string such as "90s"; got null'],
    [[], 'expected a duration string such as "90s"; got an array'],
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

/**
 * Durations in a RunSpec: strings such as `"90s"`, `"1.5m"`, `"250ms"` or `"1h30m"`.
 *
 * Format: one or more `<number><unit>` segments, no spaces, no sign. `<number>` is a decimal
 * (`1`, `0.5`, `1.25`); `<unit>` is `ms`, `s`, `m` or `h`. Segments add up (`"1m30s"` = 90,000 ms),
 * as in Go's `time.ParseDuration` (https://pkg.go.dev/time#ParseDuration), minus the units below
 * a millisecond, and with each unit at most once, largest first (`"1h30m"`, not `"30m1h"` or `"1s1s"`,
 * which Go accepts but are most likely typos). The result must be a whole number of milliseconds,
 * computed exactly (no floating-point rounding), and at most 2^31-1 ms.
 *
 * Refused, with a reason naming the rule: numbers without a unit (`90`, `"90"`), negative values,
 * unknown units (`"5d"`), a unit repeated or out of order (`"1s1s"`, `"1m1h"`), empty strings and
 * sub-millisecond results (`"0.5ms"`, `"0.0001ms"`, `"1.0000001s"`).
 */

/** Milliseconds per unit, largest first (the order segments must follow). */
const UNIT_MS: Readonly<Record<string, bigint>> = { h: 3_600_000n, m: 60_000n, s: 1_000n, ms: 1n };
/** Rank of each unit in the required order (0: `h`). */
const UNIT_RANK: Readonly<Record<string, number>> = Object.fromEntries(Object.keys(UNIT_MS).map((unit, rank) => [unit, rank]));
/** The largest delay, in ms, a Node.js timer keeps (`setTimeout`, `AbortSignal.timeout`): 2^31-1, about 24.8 days. */
export const MAX_TIMER_MS = 2_147_483_647;
/** Largest duration, in ms: {@link MAX_TIMER_MS}. */
const MAX_DURATION_MS = BigInt(MAX_TIMER_MS);

const SEGMENT = /(\d+)(?:\.(\d+))?(ms|s|m|h)/y;

/**
 * Why `value` is not a valid duration, or `undefined` if it is one.
 *
 * @param value - anything (a RunSpec field as parsed from YAML/JSON)
 * @returns a one-line reason, e.g. `must be a duration with a unit (ms, s, m or h), e.g. "90s" (got 90)`
 *   (every reason is `must be ... (got <value>)`)
 */
export function durationProblem(value: unknown): string | undefined {
  const parsed = parse(value);
  return typeof parsed === "string" ? parsed : undefined;
}

/**
 * Parses a duration string into milliseconds.
 *
 * @param value - e.g. `"90s"`, `"1.5m"`, `"1h30m"`, `"0s"`
 * @returns whole milliseconds, >= 0
 * @throws {RangeError} with the same reason as {@link durationProblem} when `value` is not a duration
 */
export function parseDurationMs(value: unknown): number {
  const parsed = parse(value);
  if (typeof parsed === "string") throw new RangeError(parsed);
  return parsed;
}

/**
 * Formats milliseconds as the shortest exact duration string (`60000` -> `"60s"`, `90000` -> `"90s"`,
 * `120000` -> `"2m"`, `1500` -> `"1500ms"`). Inverse of {@link parseDurationMs} for whole units.
 */
export function formatDurationMs(ms: number): string {
  if (ms !== 0 && ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms !== 0 && ms % 60_000 === 0 && ms >= 120_000) return `${ms / 60_000}m`;
  if (ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}

function parse(value: unknown): number | string {
  if (typeof value === "number") {
    return `must be a duration with a unit (ms, s, m or h), e.g. "${Number.isFinite(value) && value >= 0 ? value : 90}s" (got ${String(value)})`;
  }
  if (typeof value !== "string") return `must be a duration such as "90s" (got ${describe(value)})`;
  const text = value.trim();
  if (text === "") return `must be a duration such as "90s" (got an empty string)`;
  if (/^-/.test(text)) return `must be a duration that is not negative (got "${value}")`;
  if (/^\+?\d+(\.\d+)?$/.test(text)) return `must be a duration with a unit (ms, s, m or h), e.g. "${text}s" (got "${value}")`;
  // Exact arithmetic: each segment is digits / 10^fraction-digits x unit, summed over a common 10^scale.
  const segments: { digits: bigint; scale: number; unitMs: bigint }[] = [];
  let lastRank = -1;
  let position = 0;
  while (position < text.length) {
    SEGMENT.lastIndex = position;
    const match = SEGMENT.exec(text);
    if (match === null) {
      return `must be a duration of <number><unit> segments with unit ms, s, m or h, e.g. "90s", "1.5m", "1h30m" (got "${value}")`;
    }
    const unit = match[3]!;
    const rank = UNIT_RANK[unit]!;
    if (rank <= lastRank) return `must be a duration with each unit at most once, largest first (h, m, s, ms), e.g. "1h30m" (got "${value}")`;
    lastRank = rank;
    const fraction = match[2] ?? "";
    segments.push({ digits: BigInt(`${match[1]!}${fraction}`), scale: fraction.length, unitMs: UNIT_MS[unit]! });
    position = SEGMENT.lastIndex;
  }
  const scale = Math.max(...segments.map((segment) => segment.scale));
  let scaled = 0n;
  for (const segment of segments) scaled += segment.digits * segment.unitMs * 10n ** BigInt(scale - segment.scale);
  const denominator = 10n ** BigInt(scale);
  if (scaled % denominator !== 0n) return `must be a whole number of milliseconds (got "${value}")`;
  const ms = scaled / denominator;
  if (ms > MAX_DURATION_MS) return `must be at most ${MAX_DURATION_MS}ms, about 24.8 days (got "${value}")`;
  return Number(ms);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `${typeof value} ${String(value)}`;
}

/**
 * Durations in a RunSpec: strings such as `"90s"`, `"1.5m"`, `"250ms"` or `"1h30m"`.
 *
 * Format: one or more `<number><unit>` segments, no spaces, no sign. `<number>` is a decimal
 * (`1`, `0.5`, `1.25`); `<unit>` is `ms`, `s`, `m` or `h`. Segments add up (`"1m30s"` = 90,000 ms),
 * as in Go's `time.ParseDuration` (https://pkg.go.dev/time#ParseDuration), minus the units below
 * a millisecond. The result must be a whole number of milliseconds.
 *
 * Refused, with a reason naming the rule: numbers without a unit (`90`, `"90"`), negative values,
 * unknown units (`"5d"`), empty strings and sub-millisecond results (`"0.5ms"`).
 */

/** Milliseconds per unit. */
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

const SEGMENT = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;

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
  let total = 0;
  SEGMENT.lastIndex = 0;
  let position = 0;
  while (position < text.length) {
    SEGMENT.lastIndex = position;
    const match = SEGMENT.exec(text);
    if (match === null) {
      return `must be a duration of <number><unit> segments with unit ms, s, m or h, e.g. "90s", "1.5m", "1h30m" (got "${value}")`;
    }
    total += Number(match[1]) * (UNIT_MS[match[2]!] as number);
    position = SEGMENT.lastIndex;
  }
  // Decimal segments can give float noise (0.1s * 3): round to a microsecond before the whole-ms check.
  const rounded = Math.round(total * 1_000) / 1_000;
  if (!Number.isInteger(rounded)) return `must be a whole number of milliseconds (got "${value}")`;
  if (!Number.isSafeInteger(rounded) || rounded > 2_147_483_647) {
    return `must be at most 2147483647ms, about 24.8 days (got "${value}")`;
  }
  return rounded;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `${typeof value} ${String(value)}`;
}

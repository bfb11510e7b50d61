/**
 * Text that leaves the runtime (stdout summary, stderr, the ledger, output.log) must be valid UTF-8, so
 * every cut is made on a code-point boundary and no string carries a lone surrogate: a JavaScript string
 * is UTF-16, `JSON.stringify` writes a lone surrogate as the escape `\udXXX` (which strict JSON readers,
 * Python's `json` + UTF-8 encoding among them, refuse), and Node writes one to a file as U+FFFD.
 *
 * Units: lengths and indexes here are UTF-16 code units (JavaScript string length) unless named bytes.
 */

/** True for a UTF-16 high (leading) surrogate, 0xD800-0xDBFF. */
function isHigh(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

/** True for a UTF-16 low (trailing) surrogate, 0xDC00-0xDFFF. */
function isLow(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

/**
 * The longest prefix of `text` of at most `maxUnits` UTF-16 code units that does not end between the
 * two halves of a surrogate pair (a character outside the BMP, e.g. an emoji, is kept whole or left out).
 *
 * @param text - any string
 * @param maxUnits - limit in UTF-16 code units (>= 0; fractions round down)
 * @returns `text` itself when it fits, otherwise a prefix of `maxUnits` or `maxUnits - 1` units
 */
export function cutUnits(text: string, maxUnits: number): string {
  const max = Math.max(0, Math.floor(maxUnits));
  if (text.length <= max) return text;
  const end = max > 0 && isHigh(text.charCodeAt(max - 1)) && isLow(text.charCodeAt(max)) ? max - 1 : max;
  return text.slice(0, end);
}

/**
 * The longest suffix of `text` of at most `maxUnits` UTF-16 code units that does not start between the
 * two halves of a surrogate pair.
 *
 * @param text - any string
 * @param maxUnits - limit in UTF-16 code units (>= 0; fractions round down)
 * @returns `text` itself when it fits, otherwise a suffix of `maxUnits` or `maxUnits - 1` units
 */
export function lastUnits(text: string, maxUnits: number): string {
  const max = Math.max(0, Math.floor(maxUnits));
  if (text.length <= max) return text;
  if (max === 0) return "";
  let start = text.length - max;
  if (isLow(text.charCodeAt(start)) && isHigh(text.charCodeAt(start - 1))) start++;
  return text.slice(start);
}

/**
 * Index of the first lone surrogate in `text` (a high surrogate not followed by a low one, or a low one
 * not preceded by a high one), or -1 when `text` is well formed (encodes to valid UTF-8 unchanged).
 */
export function loneSurrogateIndex(text: string): number {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    if (isHigh(unit) && i + 1 < text.length && isLow(text.charCodeAt(i + 1))) {
      i++;
      continue;
    }
    return i;
  }
  return -1;
}

/** True when `text` holds a lone surrogate ({@link loneSurrogateIndex} >= 0). */
export function hasLoneSurrogate(text: string): boolean {
  return loneSurrogateIndex(text) !== -1;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** C0 control characters other than tab and newline, and DEL. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f]/g;

/**
 * `text` with every C0 control character except tab (U+0009) and newline (U+000A), and DEL (U+007F), written
 * as the visible escape `\xHH` (ESC is `\x1b`, NUL `\x00`, CR `\x0d`), so that member output quoted on a
 * terminal or in a report cannot move the cursor, recolour, retitle or clear it. A backslash already in the text
 * is left as it is. Text without such characters is returned unchanged (same string).
 * Example: `escapeControls("\u001b[31mred")` is the 10 characters `\x1b[31mred`.
 */
export function escapeControls(text: string): string {
  return text.replace(CONTROLS, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/**
 * `text` with every lone surrogate replaced by U+FFFD (what `String.prototype.toWellFormed` does, and
 * what a UTF-8 encoder writes for one); well-formed text is returned unchanged (same string).
 */
export function wellFormed(text: string): string {
  return hasLoneSurrogate(text) ? text.replace(LONE_SURROGATE, "\ufffd") : text;
}

/**
 * A deep copy of a JSON-like value (objects, arrays, primitives) with {@link wellFormed} applied to every
 * string and object key. Values without a lone surrogate come back as they are (not copied).
 */
export function wellFormedValue(value: unknown): unknown {
  if (typeof value === "string") return wellFormed(value);
  if (value === null || typeof value !== "object") return value;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return wellFormedValue((value as { toJSON(): unknown }).toJSON());
  if (findLoneSurrogate(value, "") === undefined) return value;
  if (Array.isArray(value)) return value.map((item) => wellFormedValue(item));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    // defineProperty: a "__proto__" key (JSON.parse makes it an own property) must stay a property.
    Object.defineProperty(out, wellFormed(key), { value: wellFormedValue(item), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** Where {@link findLoneSurrogate} found a lone surrogate. */
export interface LoneSurrogate {
  /** Dotted path of the string (`record.reason`, `manifest.tools.node`), or of the object holding the key (`(key "...")`). */
  readonly path: string;
  /** Index (UTF-16 code units) of the lone surrogate in that string. */
  readonly index: number;
  /** The surrogate code unit, 0xD800-0xDFFF. */
  readonly unit: number;
}

/**
 * The first lone surrogate in any string value or object key of a JSON-like value, depth first in key
 * order, or `undefined` when there is none.
 *
 * @param value - a parsed JSON value (or any plain object tree; cycles are not followed twice)
 * @param at - path prefix of `value` in the result, e.g. `"record"`
 */
export function findLoneSurrogate(value: unknown, at: string, seen: Set<object> = new Set()): LoneSurrogate | undefined {
  if (typeof value === "string") {
    const index = loneSurrogateIndex(value);
    return index === -1 ? undefined : { path: at, index, unit: value.charCodeAt(index) };
  }
  if (value === null || typeof value !== "object" || seen.has(value)) return undefined;
  seen.add(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findLoneSurrogate(value[i], `${at}[${i}]`, seen);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    const index = loneSurrogateIndex(key);
    if (index !== -1) return { path: `${at} (key ${JSON.stringify(key)})`, index, unit: key.charCodeAt(index) };
    const found = findLoneSurrogate(item, at === "" ? key : `${at}.${key}`, seen);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Where {@link invalidUtf8} found bytes that are not UTF-8. */
export interface InvalidUtf8 {
  /** Byte offset of the first byte of the ill-formed sequence. */
  readonly offset: number;
  /** The ill-formed sequence: its lead byte up to and including the first byte that breaks it (1-4 bytes). */
  readonly bytes: Uint8Array;
}

/**
 * The first ill-formed UTF-8 sequence in `bytes` (Unicode 15, Table 3-7 "Well-Formed UTF-8 Byte
 * Sequences": no overlong forms, no encoded surrogates ED A0-BF, nothing above U+10FFFF, no sequence
 * cut short), or `undefined` when all of `bytes` is well-formed UTF-8 (what
 * `new TextDecoder("utf-8", { fatal: true })` accepts).
 *
 * @param bytes - the bytes to check
 * @param from - byte offset to start at (a sequence boundary)
 * @param to - byte offset to stop at, exclusive (a sequence cut short by `to` is ill-formed)
 */
export function invalidUtf8(bytes: Uint8Array, from = 0, to = bytes.length): InvalidUtf8 | undefined {
  let i = from;
  while (i < to) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      continue;
    }
    // [length, low, high] of the byte after the lead; later continuation bytes are 80-BF.
    let need: number;
    let low = 0x80;
    let high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) need = 2;
    else if (lead >= 0xe0 && lead <= 0xef) {
      need = 3;
      if (lead === 0xe0) low = 0xa0;
      if (lead === 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      need = 4;
      if (lead === 0xf0) low = 0x90;
      if (lead === 0xf4) high = 0x8f;
    } else return { offset: i, bytes: bytes.slice(i, i + 1) };
    for (let k = 1; k < need; k++) {
      if (i + k >= to) return { offset: i, bytes: bytes.slice(i, to) };
      const b = bytes[i + k]!;
      const ok = k === 1 ? b >= low && b <= high : b >= 0x80 && b <= 0xbf;
      if (!ok) return { offset: i, bytes: bytes.slice(i, i + k + 1) };
    }
    i += need;
  }
  return undefined;
}

/** `0xf0 0x9f 0x22`: bytes as lower-case hex, for messages. */
export function hexBytes(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => `0x${b.toString(16).padStart(2, "0")}`).join(" ");
}

/**
 * A cheap pre-check for JSON text written by `JSON.stringify`, which writes a lone surrogate as the
 * escape `\udXXX` and a well-formed pair as the character itself: false means the text holds no lone
 * surrogate; true means it may (a literal `\\ud83d` in a string also matches), so check the value
 * with {@link findLoneSurrogate} or clean it with {@link wellFormedValue}.
 */
export function mayHoldLoneSurrogateEscape(json: string): boolean {
  return /\\ud[89a-f]/i.test(json);
}

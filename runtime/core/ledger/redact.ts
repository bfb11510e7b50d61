/**
 * Redaction of secrets in the run ledger.
 *
 * ## Secrets
 *
 * {@link LedgerWriter.redact} registers a secret; every later record (and the completion) has each
 * occurrence in any string value or key replaced with `"[redacted]"`, numbers/booleans whose text
 * contains it become `"[redacted]"`, and a line that would still contain it anywhere (in its raw or
 * JSON-escaped form) is refused, never written. Secrets known before the run starts go in
 * {@link LedgerWriterOptions.secrets} so that the manifest is redacted too.
 */
import { LedgerInputError } from "../errors";

/** Minimum length of a secret given to {@link LedgerWriter.redact}. */
export const MIN_SECRET_LENGTH = 8;

/** Replacement text for a secret. */
export const REDACTED = "[redacted]";

/** Multiplier of the rolling window hash (the 32-bit FNV prime). */
const ROLL_BASE = 0x01000193;
/** ROLL_BASE^(MIN_SECRET_LENGTH-1) mod 2^32, to drop the outgoing character. */
const ROLL_OUT = Array.from({ length: MIN_SECRET_LENGTH - 1 }).reduce<number>((acc) => Math.imul(acc, ROLL_BASE), 1);

/** Polynomial hash of `text[i .. i+MIN_SECRET_LENGTH)` mod 2^32. */
function windowHash(text: string, i: number): number {
  let h = 0;
  for (let j = i; j < i + MIN_SECRET_LENGTH; j++) h = (Math.imul(h, ROLL_BASE) + text.charCodeAt(j)) | 0;
  return h;
}

/**
 * Finds and replaces registered secrets. Every pattern (raw and JSON-escaped form of each secret)
 * puts the rolling hash of its first {@link MIN_SECRET_LENGTH} characters into a 2^20-bit filter;
 * checking a line rolls the hash across it (a few integer operations per character, no allocation)
 * and only looks a window up in the prefix map when its filter bit is set (Rabin–Karp). The cost per
 * line is therefore O(line length) however many secrets are registered (a 1,000-member run may
 * register one per member).
 */
export class Redactor {
  private readonly secrets = new Set<string>();
  /** 2^20-bit filter of prefix window hashes. */
  private readonly filter = new Uint32Array(1 << 15);
  /** prefix -> raw secrets starting with it */
  private readonly raw = new Map<string, string[]>();
  /** prefix -> raw and JSON-escaped forms starting with it */
  private readonly any = new Map<string, string[]>();

  get size(): number {
    return this.secrets.size;
  }

  add(secret: string, at: string): void {
    if (typeof secret !== "string") throw new LedgerInputError(at, `expected a string, got ${typeof secret}`);
    if (secret.length < MIN_SECRET_LENGTH)
      throw new LedgerInputError(at, `a secret must be at least ${MIN_SECRET_LENGTH} characters to be redacted reliably (got ${secret.length})`);
    if (REDACTED.includes(secret)) throw new LedgerInputError(at, `a secret must not be part of the replacement text "${REDACTED}"`);
    if (this.secrets.has(secret)) return;
    this.secrets.add(secret);
    index(this.raw, secret);
    index(this.any, secret);
    this.mark(secret);
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) {
      index(this.any, escaped);
      this.mark(escaped);
    }
  }

  private mark(pattern: string): void {
    const bit = windowHash(pattern, 0) >>> 12;
    this.filter[bit >>> 5]! |= 1 << (bit & 31);
  }

  /** True if `text` contains any secret in raw or JSON-escaped form. */
  foundIn(text: string): boolean {
    if (this.secrets.size === 0 || text.length < MIN_SECRET_LENGTH) return false;
    const filter = this.filter;
    let h = windowHash(text, 0);
    for (let i = 0; ; i++) {
      const bit = h >>> 12;
      if ((filter[bit >>> 5]! & (1 << (bit & 31))) !== 0 && matchOne(this.any, text, i) !== undefined) return true;
      const next = i + MIN_SECRET_LENGTH;
      if (next >= text.length) return false;
      h = (Math.imul(h - Math.imul(text.charCodeAt(i), ROLL_OUT), ROLL_BASE) + text.charCodeAt(next)) | 0;
    }
  }

  /** `s` with every raw occurrence replaced by {@link REDACTED} (longest match first, left to right). */
  redactString(s: string): string {
    if (this.secrets.size === 0 || s.length < MIN_SECRET_LENGTH) return s;
    let out = "";
    let from = 0;
    for (let i = 0; i + MIN_SECRET_LENGTH <= s.length;) {
      const hit = matchOne(this.raw, s, i);
      if (hit === undefined) {
        i++;
        continue;
      }
      out += s.slice(from, i) + REDACTED;
      i += hit.length;
      from = i;
    }
    return from === 0 ? s : out + s.slice(from);
  }

  /** Deep copy of a JSON value with secrets redacted from strings, keys and the text of numbers/booleans. */
  redactValue(v: unknown): unknown {
    if (typeof v === "string") return this.redactString(v);
    if (typeof v === "number" || typeof v === "boolean") return this.foundIn(String(v)) ? REDACTED : v;
    if (v === null || typeof v !== "object") return v;
    if (typeof (v as { toJSON?: unknown }).toJSON === "function") return this.redactValue((v as { toJSON(): unknown }).toJSON());
    if (Array.isArray(v)) return v.map((x) => this.redactValue(x));
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      // defineProperty: a "__proto__" key (JSON.parse makes it an own property) must stay a property.
      Object.defineProperty(out, this.redactString(k), { value: this.redactValue(x), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
}

function index(map: Map<string, string[]>, pattern: string): void {
  const key = pattern.slice(0, MIN_SECRET_LENGTH);
  const list = map.get(key);
  if (list) {
    list.push(pattern);
    list.sort((a, b) => b.length - a.length);
  } else map.set(key, [pattern]);
}

function matchOne(map: Map<string, string[]>, text: string, i: number): string | undefined {
  const list = map.get(text.slice(i, i + MIN_SECRET_LENGTH));
  if (list) for (const p of list) if (text.startsWith(p, i)) return p;
  return undefined;
}

/**
 * Hashing and canonical JSON: the digests of the run ledger (runtime/core/ledger/), of a RunSpec
 * (`specSha256`) and of the stacks' and components' inputs.
 */
import * as crypto from "node:crypto";
import { createHash } from "node:crypto";
import { LedgerInputError } from "./errors";

/** Lower-case hex SHA-256 of a string (UTF-8) or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  // crypto.hash (Node >= 20.12/21.7) is the one-shot form, about 3x cheaper than createHash for a record line.
  return oneShotHash ? oneShotHash("sha256", data, "hex") : createHash("sha256").update(data).digest("hex");
}

const oneShotHash = (crypto as { hash?: (algorithm: string, data: string | Uint8Array, encoding: "hex") => string }).hash;

/**
 * Canonical JSON: object keys sorted by UTF-16 code units, no whitespace, strings and numbers as
 * `JSON.stringify` writes them (this is RFC 8785 JCS for JSON values, https://www.rfc-editor.org/rfc/rfc8785).
 * `undefined` object members are skipped, as in JSON.
 * @throws {LedgerInputError} for values JSON cannot represent (non-finite numbers, bigint, functions, symbols, cycles).
 */
export function canonicalJson(value: unknown, at = "value", seen: Set<object> = new Set()): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new LedgerInputError(at, `${value} is not representable in JSON`);
      return JSON.stringify(value);
    case "object": {
      if (seen.has(value)) throw new LedgerInputError(at, "circular reference");
      seen.add(value);
      let out: string;
      if (Array.isArray(value)) {
        out = `[${value.map((v, i) => canonicalJson(v, `${at}[${i}]`, seen)).join(",")}]`;
      } else {
        const obj = value as Record<string, unknown>;
        const keys = Object.keys(obj)
          .filter((k) => obj[k] !== undefined)
          .sort();
        out = `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k], `${at}.${k}`, seen)}`).join(",")}}`;
      }
      seen.delete(value);
      return out;
    }
    default:
      throw new LedgerInputError(at, `a ${typeof value} is not representable in JSON`);
  }
}

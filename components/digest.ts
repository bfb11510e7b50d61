/**
 * The digest the components put into `triggers` and identifiers: lower-case hex SHA-256 of `JSON.stringify(value)`
 * (key order as written, not canonical: changing it would replace what the triggers guard).
 */
import { createHash } from "node:crypto";

/** Lower-case hex SHA-256 of a JSON value (`JSON.stringify`). */
export function jsonDigest(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex");
}

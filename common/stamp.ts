/**
 * The stamp file that marks a finished tool directory, and the atomic write that produces it.
 *
 * Node-20-safe (only `node:` built-ins).
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { stampFileName } from "./paths";

/**
 * How a tool directory was produced: a source build, a verified official download, a verified npm package, or
 * cohort-lab's substitute (only for pulumi-resource-command, when upstream cannot be obtained).
 */
export type StampSource = "build" | "official" | "npm" | "substitute";

/** One executable recorded in a stamp. */
export interface StampBinary {
  /** Path relative to the tool directory, e.g. `bin/pulumi`. */
  readonly path: string;
  /** Size in bytes at the time the stamp was written. */
  readonly size: number;
  /** Lower-case hex SHA-256 of the file at the time the stamp was written. */
  readonly sha256: string;
}

/** Contents of `cohort-lab-stamp.json`, written last into a tool directory. */
export interface Stamp {
  /** Format version of this file. */
  readonly schema: 1;
  /** Tool name, e.g. `pulumi`. */
  readonly tool: string;
  /** Tool version as used in the directory name. */
  readonly version: string;
  /** The pin the tool was produced from; a stamp whose pin differs from the current one is stale. */
  readonly pin: unknown;
  readonly source: StampSource;
  /** RFC 3339 time the stamp was written. */
  readonly createdAt: string;
  /** Wall time the build or download took, in seconds. */
  readonly buildSeconds: number;
  /** Executables by logical name (e.g. `pulumi`). */
  readonly binaries: Readonly<Record<string, StampBinary>>;
}

/**
 * Serialises a JSON value with object keys sorted, so that two pins compare equal regardless of key order.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * Reads the stamp of a tool directory.
 *
 * @returns the stamp, or `undefined` when the file is missing or is not a valid stamp (an unfinished directory).
 */
export function readStamp(dir: string): Stamp | undefined {
  let text: string;
  try {
    text = fs.readFileSync(path.join(dir, stampFileName), "utf8");
  } catch {
    return undefined;
  }
  try {
    const parsed = JSON.parse(text) as Partial<Stamp>;
    if (parsed.schema !== 1 || typeof parsed.tool !== "string" || typeof parsed.version !== "string") return undefined;
    if (parsed.binaries === null || typeof parsed.binaries !== "object") return undefined;
    return parsed as Stamp;
  } catch {
    return undefined;
  }
}

/**
 * Writes `data` to `file` atomically: a temporary sibling, fsync, rename, then fsync of the directory.
 */
export function writeFileAtomic(file: string, data: string): void {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = fs.openSync(tmp, "w", 0o644);
  try {
    fs.writeSync(fd, data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  const dirFd = fs.openSync(path.dirname(file), "r");
  try {
    fs.fsyncSync(dirFd);
  } finally {
    fs.closeSync(dirFd);
  }
}

/** Writes the stamp of a tool directory (atomically, see {@link writeFileAtomic}). */
export function writeStamp(dir: string, stamp: Stamp): void {
  writeFileAtomic(path.join(dir, stampFileName), `${JSON.stringify(stamp, null, 2)}\n`);
}

/** Streams a file through SHA-256. @returns lower-case hex. */
export async function sha256File(file: string): Promise<string> {
  const hash = crypto.createHash("sha256");
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

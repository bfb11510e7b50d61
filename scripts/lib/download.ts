/**
 * Verified downloads of official release archives (`COHORT_TOOLCHAIN_SOURCE=official|auto`).
 *
 * An artifact is fetched only when its SHA-256 is pinned; the archive is hashed while it streams to disk
 * and nothing is unpacked unless the sum matches. Node-20-safe (global `fetch`, `node:` built-ins, `tar`).
 */
import { spawnSync } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { OfficialArtifact } from "../../common/pins";

/** Where the toolchain takes its binaries from. */
export type ToolchainSource = "official" | "build" | "auto";

/**
 * Reads `COHORT_TOOLCHAIN_SOURCE`.
 *
 * @default "auto" (download where a SHA-256 is pinned, otherwise build)
 * @throws Error naming the variable when the value is not `official`, `build` or `auto`.
 */
export function toolchainSource(env: NodeJS.ProcessEnv = process.env): ToolchainSource {
  const raw = env.COHORT_TOOLCHAIN_SOURCE;
  if (raw === undefined || raw === "") return "auto";
  if (raw === "official" || raw === "build" || raw === "auto") return raw;
  throw new Error(`COHORT_TOOLCHAIN_SOURCE: expected one of official, build, auto; got ${JSON.stringify(raw)}`);
}

/** Raised when an official artifact may not be downloaded or did not verify. */
export class ArtifactRefusedError extends Error {
  constructor(
    message: string,
    /** The artifact's URL. */
    readonly url: string,
  ) {
    super(message);
    this.name = "ArtifactRefusedError";
  }
}

/**
 * Downloads `artifact.url` to `destFile`, verifying its SHA-256 against the pin.
 *
 * @throws ArtifactRefusedError when the pin is `null` (no request is made), on an HTTP error, or on a sum
 *   mismatch (the partial file is removed; the message gives both sums).
 */
export async function downloadVerified(artifact: OfficialArtifact, destFile: string): Promise<void> {
  if (artifact.sha256 === null) {
    throw new ArtifactRefusedError(`refusing to download ${artifact.url}: no SHA-256 is pinned for it in common/pins.ts`, artifact.url);
  }
  let response: Response;
  try {
    response = await fetch(artifact.url, { redirect: "follow", signal: AbortSignal.timeout(600_000) });
  } catch (err) {
    throw new ArtifactRefusedError(`download of ${artifact.url} failed: ${(err as Error).message}`, artifact.url);
  }
  if (!response.ok || response.body === null) {
    throw new ArtifactRefusedError(`download of ${artifact.url} failed: HTTP ${response.status}`, artifact.url);
  }
  const hash = crypto.createHash("sha256");
  const source = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
  source.on("data", (chunk: Buffer) => hash.update(chunk));
  await pipeline(source, fs.createWriteStream(destFile));
  const actual = hash.digest("hex");
  if (actual !== artifact.sha256) {
    fs.rmSync(destFile, { force: true });
    throw new ArtifactRefusedError(`SHA-256 mismatch for ${artifact.url}: pinned ${artifact.sha256}, downloaded ${actual}`, artifact.url);
  }
}

/**
 * Extracts one member of a tar archive (gzip/xz detected by `tar`) to `destFile`, executable.
 *
 * @throws Error quoting tar's stderr when extraction fails or the member is missing.
 */
export function extractTarMember(archive: string, member: string, destFile: string): void {
  fs.mkdirSync(path.dirname(destFile), { recursive: true });
  const scratch = fs.mkdtempSync(path.join(path.dirname(destFile), ".extract-"));
  try {
    const result = spawnSync("tar", ["-xf", archive, "-C", scratch, member], { encoding: "utf8" });
    if (result.error !== undefined) throw new Error(`tar could not start: ${result.error.message}`);
    if (result.status !== 0) {
      throw new Error(`tar -xf ${archive} ${member} failed (exit ${result.status}): ${result.stderr.trim()}`);
    }
    const extracted = path.join(scratch, member);
    if (!fs.existsSync(extracted)) throw new Error(`${archive} has no member ${member}`);
    fs.renameSync(extracted, destFile);
    fs.chmodSync(destFile, 0o755);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

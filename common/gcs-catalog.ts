/**
 * Cache identity of the `gcs` tool set (the GCS emulator fake-gcs-server), derived from `common/pins.ts`; shared
 * by the builder (`scripts/toolchain-gcs.ts`) and the lookup the GCS-ledger tests use ({@link findGcsEmulator}).
 *
 * Node-20-safe (only `node:` built-ins).
 */
import { findToolBinaries, type BinaryLocation } from "./find-binaries";
import { gcs, type VerifiedGoProgramPin } from "./pins";
import type { SimToolId } from "./sim-catalog";

/** `<cache>/fake-gcs-server-v1.56.1/bin/fake-gcs-server`. */
export const fakeGcsServerId: SimToolId & { readonly pin: VerifiedGoProgramPin } = {
  name: "fake-gcs-server",
  version: gcs.fakeGcsServer.goModuleVersion,
  binaries: { "fake-gcs-server": "bin/fake-gcs-server" },
  pin: gcs.fakeGcsServer,
};

/** Env var naming a directory that holds a self-built `fake-gcs-server` (overrides the cache). */
export const gcsBinDirEnv = "COHORT_GCS_BIN_DIR";

/**
 * Finds the emulator without building it.
 *
 * @returns `{ path }`, or `{ reason }` saying what is missing and how to build it (for a test's skip line).
 */
export function findGcsEmulator(env: NodeJS.ProcessEnv = process.env): { readonly path: string } | { readonly reason: string } {
  const locations = new Map<"fake-gcs-server", BinaryLocation>([["fake-gcs-server", { tool: fakeGcsServerId, relPath: "bin/fake-gcs-server" }]]);
  const { found, missing } = findToolBinaries({ env, needed: ["fake-gcs-server"], locations, overrideEnv: gcsBinDirEnv });
  const p = found["fake-gcs-server"];
  if (p !== undefined) return { path: p };
  return { reason: `GCS emulator not built: ${missing.join("; ")}; run \`npm run toolchain -- gcs\`` };
}

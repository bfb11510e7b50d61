/**
 * Where the sim's executables are: the `sim` tool set in the toolchain cache (`npm run toolchain -- sim`), or a
 * directory named by `COHORT_SIM_BIN_DIR` holding binaries you built yourself (same names).
 */
import { simToolIds } from "../common/sim-catalog";
import { findToolBinaries, type BinaryLocation } from "../common/find-binaries";

/** Logical names of the sim executables. */
export const simBinaryNames = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kueue", "agent-sandbox-controller", "temporal"] as const;
export type SimBinaryName = (typeof simBinaryNames)[number];

/** Absolute paths of every sim executable. */
export type SimBinaries = Readonly<Record<SimBinaryName, string>>;

/**
 * The control plane's executables (what `simctl start` needs): the Kubernetes control plane, kwok and the Temporal
 * dev server (`temporal server start-dev`, started with the control plane; docs/temporal.md).
 */
export const controlPlaneBinaries: readonly SimBinaryName[] = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "temporal"];

/** Raised when sim executables are missing; the message says how to build them. */
export class SimBinariesMissingError extends Error {
  constructor(readonly missing: readonly string[]) {
    super(
      `sim binaries not built: ${missing.join("; ")}. Run \`npm run toolchain -- sim\` (a cold build was not timed here; a rebuild with a warm Go build cache took 204 s on 2 shared cores)`,
    );
    this.name = "SimBinariesMissingError";
  }
}

/** Env var naming a directory of self-built sim binaries (overrides the cache). */
export const binDirEnv = "COHORT_SIM_BIN_DIR";

/**
 * Finds the sim executables without building anything.
 *
 * @param needed - which ones must exist. @default all (the returned map holds only the needed ones)
 * @throws SimBinariesMissingError listing each missing tool (and why: no stamp, missing file).
 */
export function findSimBinaries(env: NodeJS.ProcessEnv = process.env, needed: readonly SimBinaryName[] = simBinaryNames): SimBinaries {
  const locations = new Map<SimBinaryName, BinaryLocation>();
  for (const id of simToolIds) {
    for (const [logical, rel] of Object.entries(id.binaries)) locations.set(logical as SimBinaryName, { tool: id, relPath: rel });
  }
  const { found, missing } = findToolBinaries({ env, needed, locations, overrideEnv: binDirEnv });
  if (missing.length > 0) throw new SimBinariesMissingError(missing);
  return found as SimBinaries;
}

/**
 * Where the sim's executables are: the `sim` tool set in the toolchain cache (`npm run toolchain -- sim`), or a
 * directory named by `COHORT_SIM_BIN_DIR` holding binaries you built yourself (same names).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { simToolIds } from "./catalog";
import { cacheRoot, toolDir } from "../lib/paths";
import { readStamp } from "../lib/stamp";

/** Logical names of the sim executables. */
export const simBinaryNames = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kwok",
  "kueue",
  "agent-sandbox-controller",
] as const;
export type SimBinaryName = (typeof simBinaryNames)[number];

/** Absolute paths of every sim executable. */
export type SimBinaries = Readonly<Record<SimBinaryName, string>>;

/** The control plane's executables (what `simctl start` needs). */
export const controlPlaneBinaries: readonly SimBinaryName[] = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"];

/** Raised when sim executables are missing; the message says how to build them. */
export class SimBinariesMissingError extends Error {
  constructor(readonly missing: readonly string[]) {
    super(`sim binaries not built: ${missing.join("; ")}. Run \`npm run toolchain -- sim\` (a cold build was not timed here; a rebuild with a warm Go build cache took 204 s on 2 shared cores)`);
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
  const out: Partial<Record<SimBinaryName, string>> = {};
  const missing: string[] = [];
  const dirOverride = env[binDirEnv];
  if (dirOverride !== undefined && dirOverride !== "") {
    for (const name of needed) {
      const p = path.resolve(dirOverride, name);
      if (fs.existsSync(p)) out[name] = p;
      else missing.push(`${name} (not in ${binDirEnv}=${dirOverride})`);
    }
  } else {
    const root = cacheRoot(env);
    for (const id of simToolIds) {
      const dir = toolDir(root, id.name, id.version);
      const stamp = readStamp(dir);
      for (const [logical, rel] of Object.entries(id.binaries)) {
        if (!(needed as readonly string[]).includes(logical)) continue;
        const p = path.join(dir, rel);
        if (stamp === undefined) missing.push(`${logical} (${id.name}-${id.version}: not built)`);
        else if (!fs.existsSync(p)) missing.push(`${logical} (${p} missing)`);
        else out[logical as SimBinaryName] = p;
      }
    }
  }
  if (missing.length > 0) throw new SimBinariesMissingError(missing);
  return out as SimBinaries;
}

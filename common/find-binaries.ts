/**
 * Finds built executables of a tool set without building anything: each logical name maps to a file in a tool
 * directory `<cache>/<tool>-<version>/` that holds a valid stamp, or, when an override directory is named by an
 * environment variable, to the file of that name there. Shared by the `sim` and `local` sets
 * (simctl/binaries.ts, common/local-catalog.ts).
 *
 * Node-20-safe (only `node:` built-ins).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { cacheRoot, toolDir } from "./paths";
import { readStamp } from "./stamp";

/** Where one logical executable lives: its tool's cache identity and its path inside the tool directory. */
export interface BinaryLocation {
  readonly tool: { readonly name: string; readonly version: string };
  /** Path relative to the tool directory, e.g. `bin/kubelet`. */
  readonly relPath: string;
}

/** Options of {@link findToolBinaries}. */
export interface FindBinariesOptions<N extends string> {
  /** Environment: the cache root (`cacheRoot(env)`) and the override directory. */
  readonly env: NodeJS.ProcessEnv;
  /** Which executables must exist; the result holds exactly these. */
  readonly needed: readonly N[];
  /** Where each logical name lives (a name absent from the map is reported as provided by no tool). */
  readonly locations: ReadonlyMap<N, BinaryLocation>;
  /** Environment variable that names a directory of self-built executables (overrides the cache). */
  readonly overrideEnv: string;
}

/**
 * Resolves the `needed` executables.
 *
 * @returns `{ found, missing }`: absolute paths by logical name, and one line per missing executable
 *   (`<name> (<tool>-<version>: not built)`, `<name> (<path> missing)`, `<name> (not in <ENV>=<dir>)`,
 *   `<name> (no tool provides it)`); the caller raises its own named error when `missing` is not empty.
 */
export function findToolBinaries<N extends string>(o: FindBinariesOptions<N>): { found: Partial<Record<N, string>>; missing: string[] } {
  const found: Partial<Record<N, string>> = {};
  const missing: string[] = [];
  const dirOverride = o.env[o.overrideEnv];
  if (dirOverride !== undefined && dirOverride !== "") {
    for (const name of o.needed) {
      const p = path.resolve(dirOverride, name);
      if (fs.existsSync(p)) found[name] = p;
      else missing.push(`${name} (not in ${o.overrideEnv}=${dirOverride})`);
    }
    return { found, missing };
  }
  const root = cacheRoot(o.env);
  for (const name of o.needed) {
    const loc = o.locations.get(name);
    if (loc === undefined) {
      missing.push(`${name} (no tool provides it)`);
      continue;
    }
    const dir = toolDir(root, loc.tool.name, loc.tool.version);
    const p = path.join(dir, loc.relPath);
    if (readStamp(dir) === undefined) missing.push(`${name} (${loc.tool.name}-${loc.tool.version}: not built)`);
    else if (!fs.existsSync(p)) missing.push(`${name} (${p} missing)`);
    else found[name] = p;
  }
  return { found, missing };
}

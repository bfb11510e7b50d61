/**
 * Where the toolchain lives: the cache root outside the work tree, one directory per tool and version, and
 * the repo-local Pulumi home and state directories.
 *
 * Node-20-safe: this module uses only `node:` built-ins, because `scripts/run.ts` and `scripts/toolchain.ts`
 * load it before a Node >= 22 runtime is known to exist.
 */
import * as os from "node:os";
import * as path from "node:path";

/** Absolute path of the repository root (the directory holding package.json). */
export const repoRoot: string = path.resolve(__dirname, "..");

/** Environment variables the toolchain reads (all optional). */
export const envNames = {
  /** Cache root override. @default `${XDG_CACHE_HOME:-~/.cache}/cohort-lab` */
  cacheRoot: "COHORT_LAB_CACHE",
  /** `official`, `build` or `auto`. @default `auto` */
  source: "COHORT_TOOLCHAIN_SOURCE",
  /** Repo-local Pulumi home override. @default `<repo>/.pulumi-home` */
  pulumiHome: "COHORT_PULUMI_HOME",
  /** Backend URL override. @default `file://<repo>/.pulumi-state` */
  backendUrl: "COHORT_PULUMI_BACKEND_URL",
  /** Set by the launcher in the re-executed stage; never set it by hand. */
  stage2: "COHORT_LAB_STAGE2",
  /** Version of the Node that started the launcher chain (set when it re-executes under the cached Node). */
  systemNodeVersion: "COHORT_LAB_SYSTEM_NODE_VERSION",
} as const;

/**
 * The cache root: `$COHORT_LAB_CACHE`, else `$XDG_CACHE_HOME/cohort-lab`, else `~/.cache/cohort-lab`.
 *
 * @param env - environment to read. @default process.env
 * @returns an absolute path (relative overrides are resolved against the current directory).
 * @see https://specifications.freedesktop.org/basedir-spec/latest/ (XDG_CACHE_HOME)
 */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env[envNames.cacheRoot];
  if (explicit !== undefined && explicit !== "") return path.resolve(explicit);
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg !== undefined && xdg !== "" ? path.resolve(xdg) : path.join(os.homedir(), ".cache");
  return path.join(base, "cohort-lab");
}

/**
 * Directory of one tool at one version inside the cache, e.g. `<cache>/pulumi-v3.259.0`.
 *
 * @param root - cache root from {@link cacheRoot}.
 * @param name - tool name, e.g. `pulumi-resource-command`.
 * @param version - version as the tool spells it, e.g. `v1.2.1` or `24.22.3`.
 */
export function toolDir(root: string, name: string, version: string): string {
  return path.join(root, `${name}-${version}`);
}

/** Name of the stamp file written last into every finished tool directory. */
export const stampFileName = "cohort-lab-stamp.json";

/**
 * The repo-local `PULUMI_HOME` (`$COHORT_PULUMI_HOME` or `<repo>/.pulumi-home`, gitignored).
 *
 * @param env - environment to read. @default process.env
 */
export function pulumiHome(env: NodeJS.ProcessEnv = process.env, root: string = repoRoot): string {
  const explicit = env[envNames.pulumiHome];
  return explicit !== undefined && explicit !== "" ? path.resolve(explicit) : path.join(root, ".pulumi-home");
}

/**
 * The Pulumi backend URL: `$COHORT_PULUMI_BACKEND_URL` or the DIY file backend `file://<repo>/.pulumi-state`
 * (gitignored). The ambient `PULUMI_BACKEND_URL` is deliberately not used, so a shell logged in to Pulumi
 * Cloud cannot redirect this project's state.
 *
 * @param env - environment to read. @default process.env
 * @see https://www.pulumi.com/docs/iac/concepts/state-and-backends/#local-filesystem
 */
export function backendUrl(env: NodeJS.ProcessEnv = process.env, root: string = repoRoot): string {
  const explicit = env[envNames.backendUrl];
  return explicit !== undefined && explicit !== "" ? explicit : `file://${path.join(root, ".pulumi-state")}`;
}

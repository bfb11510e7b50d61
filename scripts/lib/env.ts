/**
 * Finds the finished toolchain (without building anything) and computes the environment every Pulumi
 * invocation of this project runs with. This is the function other code calls: the launcher
 * (`scripts/run.ts`), e2e tests that spawn `npm run pulumi`, and tests that use the Automation API.
 *
 * Node-20-safe (only `node:` built-ins): the launcher's first stage runs it under the system Node.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { toolchain as pins } from "../../common/pins";
import { pluginDirName, pluginId, pluginPins, pulumiId } from "./catalog";
import { findNodeRuntime, systemNodeVersion, type NodeRuntime } from "./node-tool";
import { backendUrl, cacheRoot, envNames, pulumiHome, repoRoot, toolDir } from "../../common/paths";
import { sdkPinMismatches, type PackageJsonLike, type SdkCoupling } from "./pin-checks";
import { readStamp } from "../../common/stamp";

/**
 * Default `PULUMI_CONFIG_PASSPHRASE` when neither it nor `PULUMI_CONFIG_PASSPHRASE_FILE` is set. It protects
 * only the secrets in this repository's local file-backend state (`.pulumi-state/`, gitignored); set your
 * own passphrase for anything else.
 */
export const defaultLocalPassphrase = "cohort-lab-local";

/** Raised when the toolchain is missing or does not match package.json; the message says how to fix it. */
export class ToolchainError extends Error {
  constructor(
    /** Every problem found, one sentence each. */
    readonly problems: readonly string[],
    /** True when nothing is built yet (as opposed to a version mismatch). */
    readonly missing: boolean,
  ) {
    super(problems.join("\n"));
    this.name = "ToolchainError";
  }
}

/** The Pulumi CLI found in the cache. */
export interface PulumiCli {
  /** Absolute path of the `pulumi` executable. */
  readonly bin: string;
  /** Directory holding it (first on PATH for children). */
  readonly binDir: string;
  /** The tool directory; pass it as `PulumiCommand.get({ root })` in the Automation API. */
  readonly root: string;
  /** Version the CLI prints for `pulumi version`, e.g. `v3.259.0`. */
  readonly version: string;
}

/** A provider plugin installed in `PULUMI_HOME`. */
export interface InstalledPlugin {
  readonly kind: "resource";
  readonly name: string;
  /** Version without `v`. */
  readonly version: string;
  /** Executable inside `$PULUMI_HOME/plugins/<kind>-<name>-v<version>/`. */
  readonly path: string;
}

/** The resolved toolchain. */
export interface Toolchain {
  readonly repoRoot: string;
  readonly cacheRoot: string;
  /** Repo-local `PULUMI_HOME`. */
  readonly pulumiHome: string;
  /** Backend URL (`file://<repo>/.pulumi-state` unless overridden). */
  readonly backendUrl: string;
  /** Node >= 22 for children. */
  readonly node: NodeRuntime;
  /** The pinned CLI (absent only when resolved with `needPulumi: false` and not built). */
  readonly pulumi?: PulumiCli;
  /** The pinned plugins (empty when resolved with `needPulumi: false` and not installed). */
  readonly plugins: readonly InstalledPlugin[];
}

/** Options of {@link resolveToolchain}. */
export interface ResolveOptions {
  /** Environment to read overrides from. @default process.env */
  readonly env?: NodeJS.ProcessEnv;
  /** Repository root (package.json, node_modules). @default the repository holding this file */
  readonly repoRoot?: string;
  /**
   * Whether the Pulumi CLI and plugins are required; when false only Node is required and the rest is
   * reported if present. @default true
   */
  readonly needPulumi?: boolean;
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as T;
  } catch {
    return undefined;
  }
}

/** The npm SDK packages whose versions the built binaries must match. */
export const sdkCouplings: readonly SdkCoupling[] = [
  { npmPackage: pins.pulumi.npmPackage, version: pins.pulumi.version, binary: "pulumi (CLI)" },
  ...pluginPins.map((p) => ({ npmPackage: p.npmPackage, version: p.version, binary: pluginId(p).name })),
];

/**
 * Resolves the finished toolchain and checks it against package.json, node_modules and the pins.
 *
 * @throws ToolchainError listing every problem, each with its fix (`npm run toolchain`, `npm ci`, or a pins
 *   update). `missing` is true when a required tool is simply not built yet.
 */
export function resolveToolchain(options: ResolveOptions = {}): Toolchain {
  const env = options.env ?? process.env;
  const root = options.repoRoot ?? repoRoot;
  const needPulumi = options.needPulumi ?? true;
  const cache = cacheRoot(env);
  const home = pulumiHome(env, root);
  const problems: string[] = [];
  let missing = false;

  const node = findNodeRuntime(cache, env);
  if (node === undefined) {
    missing = true;
    problems.push(
      `Node ${systemNodeVersion(env)} is older than ${pins.node.minSystemMajor} and the cached Node ${pins.node.version} ` + `is not in ${cache}: run \`npm run toolchain\``,
    );
  }

  let pulumi: PulumiCli | undefined;
  const plugins: InstalledPlugin[] = [];
  const packageJson = readJson<PackageJsonLike>(path.join(root, "package.json")) ?? {};
  const pulumiDir = toolDir(cache, pulumiId.name, pulumiId.version);
  const pulumiStamp = readStamp(pulumiDir);
  const pulumiBin = path.join(pulumiDir, pulumiId.binaryPath);
  if (pulumiStamp !== undefined && fs.existsSync(pulumiBin)) {
    pulumi = { bin: pulumiBin, binDir: path.dirname(pulumiBin), root: pulumiDir, version: pulumiId.version };
  }

  if (needPulumi) {
    problems.push(...sdkPinMismatches(sdkCouplings, packageJson, undefined));
    for (const c of sdkCouplings) {
      const declared = packageJson.dependencies?.[c.npmPackage];
      const installed = readJson<{ version?: string }>(path.join(root, "node_modules", c.npmPackage, "package.json"))?.version;
      if (declared !== undefined && installed !== declared) {
        problems.push(`node_modules has ${c.npmPackage} ${installed ?? "(not installed)"} but package.json pins ${declared}: run \`npm ci\``);
      }
    }
    if (pulumi === undefined) {
      missing = true;
      problems.push(`the Pulumi CLI ${pulumiId.version} is not built in ${pulumiDir}: run \`npm run toolchain\``);
    }
    for (const pin of pluginPins) {
      const declared = packageJson.dependencies?.[pin.npmPackage] ?? pin.version;
      const id = pluginId(pin);
      const pluginsDir = path.join(home, "plugins");
      const dir = path.join(pluginsDir, pluginDirName(pin.plugin.kind, pin.plugin.name, declared));
      const exe = path.join(dir, id.binary);
      let ok: boolean;
      try {
        const real = fs.realpathSync(exe);
        fs.accessSync(real, fs.constants.X_OK);
        ok = !fs.existsSync(`${dir}.partial`);
        // A plugin linked from our cache must come from a finished build of exactly that version.
        if (ok && real.startsWith(cache + path.sep)) {
          const stamp = readStamp(path.dirname(path.dirname(real)));
          if (stamp === undefined || stamp.version !== `v${declared}`) {
            ok = false;
            problems.push(`${exe} points at ${real}, which is not a finished build of ${id.name} v${declared}: run \`npm run toolchain\``);
            continue;
          }
        }
      } catch {
        ok = false;
      }
      if (!ok) {
        missing = true;
        const others = (fs.existsSync(pluginsDir) ? fs.readdirSync(pluginsDir) : [])
          .filter((d) => d.startsWith(`${pin.plugin.kind}-${pin.plugin.name}-v`) && !d.endsWith(".partial") && !d.endsWith(".lock"))
          .map((d) => d.slice(`${pin.plugin.kind}-${pin.plugin.name}-`.length));
        const found = others.length > 0 ? `has ${id.name} ${others.join(", ")} but not v${declared}` : `has no ${id.name}`;
        problems.push(`PULUMI_HOME (${home}) ${found}, and package.json pins ${pin.npmPackage} ${declared}: run \`npm run toolchain\``);
      } else {
        plugins.push({ kind: pin.plugin.kind, name: pin.plugin.name, version: declared, path: exe });
      }
    }
  }

  if (problems.length > 0) throw new ToolchainError(problems, missing);
  return { repoRoot: root, cacheRoot: cache, pulumiHome: home, backendUrl: backendUrl(env, root), node: node as NodeRuntime, pulumi, plugins };
}

/**
 * The environment for a child that runs Pulumi or the project's tooling: `base` plus
 * - `PATH`: the cached Node's directory (when used), the Pulumi CLI's directory, `<repo>/node_modules/.bin`,
 *   then the inherited PATH;
 * - `PULUMI_HOME` (repo-local), `PULUMI_BACKEND_URL` (file backend), `PULUMI_CONFIG_PASSPHRASE` (unless it or
 *   `PULUMI_CONFIG_PASSPHRASE_FILE` is set: {@link defaultLocalPassphrase});
 * - `PULUMI_SKIP_UPDATE_CHECK`, `PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION`, `PULUMI_DISABLE_REGISTRY_RESOLVE`
 *   and `PULUMI_IGNORE_AMBIENT_PLUGINS` set to `true`, so Pulumi never downloads and uses only the pinned plugins;
 * - `COHORT_LAB_SYSTEM_NODE_VERSION`, so a re-executed launcher knows which Node started the chain;
 * - `COHORT_LAB_REPO` and `COHORT_LAB_NODE` (the repository and the Node >= 22 executable), read by the substitute
 *   command provider's plugin script.
 *
 * @see https://www.pulumi.com/docs/iac/cli/environment-variables/
 */
export function toolchainEnv(tc: Toolchain, base: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined) env[k] = v;
  const front = [...(tc.node.fromCache ? [path.dirname(tc.node.bin)] : []), ...(tc.pulumi !== undefined ? [tc.pulumi.binDir] : []), path.join(tc.repoRoot, "node_modules", ".bin")];
  const rest = (env.PATH ?? "").split(path.delimiter).filter((p) => p !== "" && !front.includes(p));
  env.PATH = [...front, ...rest].join(path.delimiter);
  env.PULUMI_HOME = tc.pulumiHome;
  env.PULUMI_BACKEND_URL = tc.backendUrl;
  if (env.PULUMI_CONFIG_PASSPHRASE === undefined && env.PULUMI_CONFIG_PASSPHRASE_FILE === undefined) {
    env.PULUMI_CONFIG_PASSPHRASE = defaultLocalPassphrase;
  }
  env.PULUMI_SKIP_UPDATE_CHECK = "true";
  env.PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION = "true";
  env.PULUMI_DISABLE_REGISTRY_RESOLVE = "true";
  env.PULUMI_IGNORE_AMBIENT_PLUGINS = "true";
  env[envNames.systemNodeVersion] = systemNodeVersion(base);
  // Read by the substitute command provider's plugin script (scripts/lib/default-tools.ts).
  env.COHORT_LAB_REPO = tc.repoRoot;
  env.COHORT_LAB_NODE = tc.node.bin;
  return env;
}

/**
 * Convenience for tests and tools: resolves the toolchain (Pulumi required) and returns it with its environment.
 *
 * @throws ToolchainError as {@link resolveToolchain}.
 */
export function getToolchainEnv(options: ResolveOptions = {}): { toolchain: Toolchain; env: Record<string, string> } {
  const toolchain = resolveToolchain(options);
  return { toolchain, env: toolchainEnv(toolchain, options.env ?? process.env) };
}

/** Creates the local state directory of a `file://` backend URL (the DIY backend expects it to exist). */
export function ensureBackendDir(url: string): void {
  if (url.startsWith("file://")) fs.mkdirSync(url.slice("file://".length), { recursive: true });
}

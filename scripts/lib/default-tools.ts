/**
 * The `default` tool set: Node 24 (when the system Node is too old), the Pulumi CLI, and the command and
 * kubernetes provider plugins, each built from the Go module proxy at the version of its npm SDK package.
 *
 * Requires Node >= 22 for the Go builds (execa); see `scripts/toolchain.ts` for the bootstrap.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { toolchain as pins, type GoProgramPin, type PluginPin, type SourceCopyPluginPin } from "../../common/pins";
import { pluginDirName, pluginId, pulumiId } from "./catalog";
import { checkGo, goBuild, goBuildSourceCopy } from "./go";
import { nodeTool } from "./node-tool";
import type { BuildContext, ReadyTool, Tool, ToolContext } from "./tool";

/** Keeps the wrapper module's go.mod and go.sum (the exact build list) in the tool directory, for provenance. */
function keepBuildList(fromDir: string, outDir: string): void {
  const dest = path.join(outDir, "build");
  fs.mkdirSync(dest, { recursive: true });
  for (const f of ["go.mod", "go.sum"]) {
    if (fs.existsSync(path.join(fromDir, f))) fs.copyFileSync(path.join(fromDir, f), path.join(dest, f));
  }
}

async function buildWrapped(pin: GoProgramPin, label: string, binaryPath: string, ctx: BuildContext): Promise<"build"> {
  await checkGo(pins.goMinVersion, ctx.env);
  const workDir = path.join(ctx.workDir, "wrapper");
  await goBuild({
    env: ctx.env,
    log: ctx.log,
    label,
    workDir,
    module: { path: pin.goModule, ref: pin.goModuleRef },
    require: pin.require,
    replace: pin.replace,
    mainPackage: pin.mainPackage,
    output: path.join(ctx.outDir, binaryPath),
    versionVars: { [pin.versionVar]: pin.versionValue },
    tags: pin.tags,
  });
  keepBuildList(workDir, ctx.outDir);
  return "build";
}

/**
 * Links a plugin binary into `$PULUMI_HOME/plugins/<kind>-<name>-v<version>/` (a symlink to the cache), removing
 * a stale `.partial` marker. Idempotent and cheap, so it runs on every `npm run toolchain`.
 *
 * @see https://github.com/pulumi/pulumi/blob/master/sdk/go/common/workspace/plugins.go (cache layout, `.partial`)
 */
export function installPlugin(pin: PluginPin, binary: string, home: string): string {
  const id = pluginId(pin);
  const dir = path.join(home, "plugins", pluginDirName(pin.plugin.kind, pin.plugin.name, pin.version));
  fs.mkdirSync(dir, { recursive: true });
  fs.rmSync(`${dir}.partial`, { force: true });
  const link = path.join(dir, id.binary);
  let current: string | undefined;
  try {
    current = fs.readlinkSync(link);
  } catch {
    current = undefined;
  }
  if (current !== binary) {
    const tmp = `${link}.tmp-${process.pid}`;
    fs.rmSync(tmp, { force: true });
    fs.symlinkSync(binary, tmp);
    fs.renameSync(tmp, link);
  }
  return link;
}

function pluginAfterReady(pin: PluginPin) {
  return (ready: ReadyTool, ctx: ToolContext) => {
    const bin = ready.binaries[pluginId(pin).binary];
    if (bin === undefined) return;
    const link = installPlugin(pin, bin, ctx.pulumiHome);
    ctx.log(`${pluginId(pin).name} v${pin.version}: plugin in ${path.dirname(link)}`);
  };
}

/** The Pulumi CLI, version-stamped so that `pulumi version` prints `v<version>`. */
export const pulumiTool: Tool = {
  name: pulumiId.name,
  version: pulumiId.version,
  pin: pins.pulumi,
  binaries: { [pulumiId.binary]: pulumiId.binaryPath },
  versionCheck: { binary: pulumiId.binary, args: ["version"], expect: pins.pulumi.versionValue },
  buildDescription: `a Go module proxy build of ${pins.pulumi.goModule}@${pins.pulumi.goModuleRef}`,
  official: { artifact: pins.pulumi.official, binary: pulumiId.binary },
  build: (ctx) => buildWrapped(pins.pulumi, pulumiId.name, pulumiId.binaryPath, ctx),
};

/**
 * A provider built through a wrapper module (command). Provider binaries have no `--version`; the version is
 * the `-X` stamp and is checked by the engine when it loads the plugin (GetPluginInfo).
 */
function wrappedPluginTool(pin: PluginPin): Tool {
  const id = pluginId(pin);
  return {
    name: id.name,
    version: id.version,
    pin,
    binaries: { [id.binary]: id.binaryPath },
    buildDescription: `a Go module proxy build of ${pin.goModule}@${pin.goModuleRef}`,
    official: { artifact: pin.official, binary: id.binary },
    build: (ctx) => buildWrapped(pin, id.name, id.binaryPath, ctx),
    afterReady: pluginAfterReady(pin),
  };
}

/** A provider built from a source copy with a generate step (kubernetes). */
function sourceCopyPluginTool(pin: SourceCopyPluginPin): Tool {
  const id = pluginId(pin);
  return {
    name: id.name,
    version: id.version,
    pin,
    binaries: { [id.binary]: id.binaryPath },
    buildDescription: `a Go module proxy build of a source copy of ${pin.goModule}@${pin.goModuleRef}`,
    official: { artifact: pin.official, binary: id.binary },
    async build(ctx) {
      await checkGo(pins.goMinVersion, ctx.env);
      await goBuildSourceCopy({
        env: ctx.env,
        log: ctx.log,
        label: id.name,
        workDir: ctx.workDir,
        module: { path: pin.goModule, ref: pin.goModuleRef },
        dropReplace: pin.dropReplace,
        generate: [{ dir: pin.generateDir, args: ["run", "./generate.go"], env: { VERSION: pin.version } }],
        mainPackage: pin.mainPackage,
        output: path.join(ctx.outDir, id.binaryPath),
        versionVars: { [pin.versionVar]: pin.versionValue },
        tags: pin.tags,
      });
      keepBuildList(path.join(ctx.workDir, "src"), ctx.outDir);
      return "build";
    },
    afterReady: pluginAfterReady(pin),
  };
}

/** True when a Go build failed because the module proxy does not serve the module (rather than a real build error). */
function proxyRefused(err: unknown): boolean {
  const m = (err as Error).message ?? "";
  return /This module version is not available|403 Forbidden|404 Not Found|410 Gone/.test(m);
}

/**
 * The plugin script of the substitute command provider. It is independent of the checkout and of the Node
 * location (both come from `COHORT_LAB_REPO` and `COHORT_LAB_NODE`, which `toolchainEnv()` sets), so one cache
 * entry serves every clone.
 */
export function substituteCommandScript(version: string): string {
  return [
    "#!/bin/sh",
    `# pulumi-resource-command ${version}: cohort-lab substitute implementing command:local:Command and`,
    "# command:local:run (scripts/lib/command-provider.ts). Written by `npm run toolchain`; see docs/toolchain.md.",
    'if [ -z "${COHORT_LAB_REPO:-}" ] || [ -z "${COHORT_LAB_NODE:-}" ]; then',
    `  echo "pulumi-resource-command ${version} (cohort-lab substitute): COHORT_LAB_REPO and COHORT_LAB_NODE are not set; run Pulumi through 'npm run pulumi' or with the environment of scripts/lib/env.ts toolchainEnv()" >&2`,
    "  exit 1",
    "fi",
    'exec "$COHORT_LAB_NODE" --import "file://$COHORT_LAB_REPO/node_modules/tsx/dist/loader.mjs" "$COHORT_LAB_REPO/scripts/lib/command-provider-main.ts" "$@"',
    "",
  ].join("\n");
}

/**
 * The command provider, matching `@pulumi/command`: the official archive when its SHA-256 is pinned, else a Go
 * module proxy build of upstream; when the proxy does not serve the provider module (the case on this network),
 * cohort-lab's substitute (see scripts/lib/command-provider.ts), recorded as `source: "substitute"` in the stamp.
 */
export const commandTool: Tool = (() => {
  const base = wrappedPluginTool(pins.command);
  const id = pluginId(pins.command);
  return {
    ...base,
    async build(ctx: BuildContext) {
      try {
        return await base.build(ctx);
      } catch (err) {
        if (!proxyRefused(err)) throw err;
        ctx.log(
          `${id.name} v${pins.command.version}: the Go module proxy does not serve ${pins.command.goModule}; ` +
            "installing the cohort-lab substitute provider (command:local:Command and command:local:run only)",
        );
        const file = path.join(ctx.outDir, id.binaryPath);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, substituteCommandScript(pins.command.version), { mode: 0o755 });
        return "substitute";
      }
    },
  };
})();

/** The kubernetes provider, matching `@pulumi/kubernetes`. */
export const kubernetesTool: Tool = sourceCopyPluginTool(pins.kubernetes);

/** The `default` set, in build order. */
export const defaultTools: readonly Tool[] = [nodeTool, pulumiTool, commandTool, kubernetesTool];

/**
 * Names, versions and binary paths of the default tool set, derived from `common/pins.ts`, shared by the
 * builders (`default-tools.ts`) and the launcher's checks (`env.ts`).
 *
 * Node-20-safe (no imports beyond the pins).
 */
import { toolchain as pins, type PluginPin } from "../../common/pins";

/** Where one tool lives in the cache and which executable it provides. */
export interface ToolId {
  /** Cache directory prefix, e.g. `pulumi-resource-command`. */
  readonly name: string;
  /** Cache directory version, e.g. `v1.2.1`. */
  readonly version: string;
  /** Logical name of the executable (a key of the tool's `binaries`). */
  readonly binary: string;
  /** Executable path relative to the tool directory. */
  readonly binaryPath: string;
}

/** The Pulumi CLI: `<cache>/pulumi-v<version>/bin/pulumi` (a `PulumiCommand.get({ root })` layout). */
export const pulumiId: ToolId = {
  name: "pulumi",
  version: `v${pins.pulumi.version}`,
  binary: "pulumi",
  binaryPath: "bin/pulumi",
};

/** A provider plugin's cache identity. */
export function pluginId(pin: PluginPin): ToolId {
  const exe = `pulumi-${pin.plugin.kind}-${pin.plugin.name}`;
  return { name: exe, version: `v${pin.version}`, binary: exe, binaryPath: `bin/${exe}` };
}

/** The provider plugins of the default set, in install order. */
export const pluginPins: readonly PluginPin[] = [pins.command, pins.kubernetes];

/**
 * Directory name of a plugin in `$PULUMI_HOME/plugins`: `<kind>-<name>-v<version>`.
 *
 * @see https://github.com/pulumi/pulumi/blob/master/sdk/go/common/workspace/plugins.go (plugin cache layout)
 */
export function pluginDirName(kind: string, name: string, version: string): string {
  return `${kind}-${name}-v${version}`;
}

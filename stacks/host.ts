/**
 * The `host` profile: this machine, no Docker. Members run as child processes of the runtime, each in
 * its own process group, bound to loopback; the ledger goes to the artifact root on local disk.
 *
 * Build order (everything that can fail on config or host prerequisites fails before any resource):
 * 1. resolve the RunSpec from `cohort-lab:cohort` (app preset or custom roles) and validate it with the
 *    runtime's schema -> `StackConfigError` naming the key;
 * 2. check the member program (pinned npm package installed) and the Node version it needs (the pinned
 *    Node from the toolchain cache runs the runtime and the members, see {@link resolveHostNode});
 * 3. check the runtime bundle exists (`npm run build`);
 * 4. `HostProfile` (artifact root + runtime bundle copy), then `CohortRun` (the run, during `pulumi up`).
 */
import { existsSync } from "node:fs";
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import semver from "semver";
import { CohortRun } from "../components/run/CohortRun.js";
import { HostPrerequisiteError, HostProfile, inspectRuntimeBundle } from "../components/host/index.js";
import { cacheRoot, toolDir } from "../common/paths.js";
import { resolveRunSpec, RUNTIME_BUNDLE } from "./config.js";
import { MEMBER_PRESETS } from "./members.js";
import { toolchain } from "../common/pins.js";
import type { ProfileContext, ProfileDefinition, RunOutputs, StackOutputs } from "./profile.js";

/** The Node binary that runs the runtime and the members. */
export interface HostNode {
  /** Absolute path of the executable. */
  readonly path: string;
  /** Its version without `v`, e.g. `24.22.3`. */
  readonly version: string;
  /** `toolchain`: the pinned Node from `npm run toolchain`'s cache; `current`: the Node running this program. */
  readonly source: "toolchain" | "current";
}

/**
 * Picks the Node binary for the runtime and the members: the pinned Node (common/pins.ts `toolchain.node`)
 * from the toolchain cache (`<cache>/node-<version>/bin/node`, see common/paths.ts) when it is there,
 * else the Node running this program. The pinned one comes first because the launcher runs Pulumi under
 * any system Node >= 22, while OpenClaw needs Node 24, and because its path does not depend on the
 * caller's PATH: the path is part of the RunSpec and so of the run's identity (another Node = another run).
 *
 * @param env - environment to read the cache location from (`COHORT_LAB_CACHE`, `XDG_CACHE_HOME`). @default process.env
 */
export function resolveHostNode(env: NodeJS.ProcessEnv = process.env): HostNode {
  const cached = path.join(toolDir(cacheRoot(env), "node", toolchain.node.version), "bin", "node");
  if (existsSync(cached)) return { path: cached, version: toolchain.node.version, source: "toolchain" };
  return { path: process.execPath, version: process.versions.node, source: "current" };
}

/**
 * Checks that the Node binary chosen by {@link resolveHostNode} can run the preset's member program.
 *
 * @param nodeVersion - e.g. `24.22.3`
 * @throws {HostPrerequisiteError} naming the required range, the version and binary found, and the fix
 */
export function checkMemberNode(app: keyof typeof MEMBER_PRESETS, nodeVersion: string, nodePath: string): void {
  const program = MEMBER_PRESETS[app].program;
  if (!semver.satisfies(nodeVersion, program.nodeRange)) {
    throw new HostPrerequisiteError(
      `the ${app} members (${program.npmPackage}@${program.version}) need Node ${program.nodeRange}, but the Node found is ${nodeVersion} (${nodePath}); ` +
        `run \`npm run toolchain\` (it caches the pinned Node ${toolchain.node.version}) and run Pulumi through \`npm run pulumi -- <args>\` or \`npm run host\``,
    );
  }
}

/**
 * Builds the `host` profile: a {@link HostProfile} named `host` and a {@link CohortRun} named `cohort`.
 *
 * @throws {StackConfigError} | {MemberProgramError} | {HostPrerequisiteError} before any resource exists
 */
export function buildHost(ctx: ProfileContext): StackOutputs {
  const { config, projectDir } = ctx;
  const node = resolveHostNode();
  const nodePath = node.path;
  const presetCtx = { nodePath, projectDir };
  const resolved = resolveRunSpec(config.cohort, presetCtx);
  if (config.cohort.roles === undefined && config.cohort.app !== undefined) checkMemberNode(config.cohort.app, node.version, nodePath);
  const bundleSource = path.join(projectDir, RUNTIME_BUNDLE);
  inspectRuntimeBundle(bundleSource);

  const hostProfile = new HostProfile("host", { artifactRoot: config.artifactRoot, runtimeBundleSource: bundleSource, nodePath });
  const run = new CohortRun("cohort", {
    spec: resolved.spec,
    keepLedgers: config.keepLedgers,
    execution: { kind: "process", runtime: hostProfile, artifactRoot: config.artifactRoot, profile: "host", backend: "process", fallbackRuntimeBundlePath: bundleSource },
  });
  const runOutputs: pulumi.Output<RunOutputs> = run.summary;
  return { profile: "host", artifactRoot: hostProfile.artifactRoot, run: runOutputs };
}

/** The `host` profile entry of stacks/profiles.ts. It reads only the common keys. */
export const host: ProfileDefinition = {
  description: "this machine, no Docker: members are child processes in their own process groups; ledger on local disk",
  configKeys: [],
  build: buildHost,
};

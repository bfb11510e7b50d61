/**
 * The `host` profile: this machine, no Docker. Members run as child processes of the runtime, each in
 * its own process group, bound to loopback; the ledger goes to the artifact root on local disk.
 *
 * Build order (everything that can fail on config or host prerequisites fails before any resource):
 * 1. resolve the RunSpec from `cohort-lab:cohort` (app preset or custom roles) and validate it with the
 *    runtime's schema -> `StackConfigError` naming the key;
 * 2. check the member program (pinned npm package installed) and the Node version it needs;
 * 3. check the runtime bundle exists (`npm run build`);
 * 4. `HostProfile` (artifact root + runtime bundle copy), then `CohortRun` (the run, during `pulumi up`).
 */
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import semver from "semver";
import { CohortRun } from "../components/CohortRun.js";
import { HostPrerequisiteError, HostProfile, inspectRuntimeBundle } from "../components/HostProfile.js";
import { resolveRunSpec } from "./config.js";
import { MEMBER_PRESETS } from "./members.js";
import type { ProfileContext, ProfileDefinition, RunOutputs, StackOutputs } from "./profiles.js";

/** Where `npm run build` writes the runtime bundle, relative to the project directory. */
export const RUNTIME_BUNDLE_RELATIVE_PATH = path.join("dist", "cohort.cjs");

/**
 * Checks that the Node binary running this program can run the preset's member program.
 *
 * @param nodeVersion - e.g. `process.versions.node` (`24.22.3`)
 * @throws {HostPrerequisiteError} naming the required range, the version found and the fix
 */
export function checkMemberNode(app: keyof typeof MEMBER_PRESETS, nodeVersion: string, nodePath: string): void {
  const program = MEMBER_PRESETS[app].program;
  if (!semver.satisfies(nodeVersion, program.nodeRange)) {
    throw new HostPrerequisiteError(
      `the ${app} members (${program.npmPackage}@${program.version}) need Node ${program.nodeRange}, but this program runs on Node ${nodeVersion} (${nodePath}); ` +
        "run Pulumi through the project's launcher (`npm run pulumi -- <args>`, or `npm run host`), which puts the pinned Node first",
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
  const nodePath = process.execPath;
  const presetCtx = { nodePath, projectDir };
  const resolved = resolveRunSpec(config.cohort, presetCtx);
  if (config.cohort.roles === undefined && config.cohort.app !== undefined) checkMemberNode(config.cohort.app, process.versions.node, nodePath);
  const bundleSource = path.join(projectDir, RUNTIME_BUNDLE_RELATIVE_PATH);
  inspectRuntimeBundle(bundleSource);

  const hostProfile = new HostProfile("host", { artifactRoot: config.artifactRoot, runtimeBundleSource: bundleSource, nodePath });
  const run = new CohortRun("cohort", {
    spec: resolved.spec,
    runtime: hostProfile,
    artifactRoot: config.artifactRoot,
    profile: "host",
    backend: "process",
    keepLedgers: config.keepLedgers,
    fallbackRuntimeBundlePath: bundleSource,
  });
  const runOutputs: pulumi.Output<RunOutputs> = pulumi
    .all([run.runId, run.outcome, run.size, run.readyCount, run.timeToReadyMs, run.ledgerPath])
    .apply(([id, outcome, size, readyCount, timeToReadyMs, ledgerPath]) => ({ id, outcome, size, readyCount, timeToReadyMs, ledgerPath }));
  return { profile: "host", artifactRoot: hostProfile.artifactRoot, run: runOutputs };
}

/** The `host` profile entry of stacks/profiles.ts. It reads only the common keys. */
export const host: ProfileDefinition = {
  description: "this machine, no Docker: members are child processes in their own process groups; ledger on local disk",
  configKeys: [],
  build: buildHost,
};

/**
 * The `multipass` profile: Ubuntu VMs launched by Multipass (`MultipassFleet`, components/multipass/), the cohort's
 * members as real systemd units on them (the runtime's `systemd` backend, runtime/backends/systemd/), the runtime
 * and the ledger on this machine as on `host`. See docs/multipass.md.
 *
 * Config keys besides the common ones: `cohort-lab:multipass` (stacks/multipass-plan.ts: machines, placement, cli,
 * environment, image, prefix, launchTimeout, basePort, stateDir); `cohort-lab:cohort.roles` is required (members run
 * stock programs on the VMs, not the host's app presets).
 *
 * Build order, everything refusable before any resource exists: config → RunSpec → placement (every role on a known
 * machine) → each machine's fit (the members' cpu/memory requests) → the CLI found → the runtime bundle →
 * MultipassFleet (launch, owner marker, `cloud-init status --wait`) → the backend config file
 * (`<stateDir>/backend.json`: the fleet's instances and IPv4s, the placement, the CLI and its environment) →
 * CohortRun (process executor, `--backend systemd --backend-config <stateDir>/backend.json`).
 */
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import { LEGACY_LAUNCH_ID, MultipassFleet } from "../components/multipass/index.js";
import { CohortRun } from "../components/run/CohortRun.js";
import { multipass as multipassPins } from "../common/pins.js";
import { readRuntimeBundle, RUNTIME_BUNDLE } from "./cluster.js";
import { configKey, resolveRunSpec, StackConfigError, type ResolvedRunSpec } from "./config.js";
import { refusing } from "./errors.js";
import {
  checkBackendLimits,
  checkMachineFit,
  defaultPrefix,
  instanceName,
  parseMultipassConfig,
  placeRoles,
  resolveMultipassCli,
  systemdBackendConfig,
  type MultipassConfig,
} from "./multipass-plan.js";
import type { ProfileContext, ProfileDefinition, RunOutputs, StackOutputs } from "./profile.js";

/**
 * The VMs' cloud-init user-data: Multipass's default user kept (`multipass exec` runs as `ubuntu`; replacing it breaks
 * exec, canonical/multipass #160, #965) and the instance's hostname in /etc/hosts (`manage_etc_hosts`: without it
 * `sudo` waits ~20 s per call for a DNS answer about its own hostname where no resolver answers, as on the stand-in).
 * Members need nothing more: the systemd backend brings each member's unit, environment and files through
 * `multipass exec` at run time.
 */
export const MULTIPASS_USER_DATA = "#cloud-config\nusers:\n  - default\nmanage_etc_hosts: true\n";

/** Everything the profile decided before creating resources. */
export interface MultipassPlan {
  readonly multipass: MultipassConfig;
  readonly resolved: ResolvedRunSpec;
  /** Role -> machine. */
  readonly placement: Readonly<Record<string, string>>;
  /** Absolute path of the CLI. */
  readonly cli: string;
  readonly image: string;
  readonly prefix: string;
  /** Absolute. */
  readonly stateDir: string;
  /** `<stateDir>/backend.json`. */
  readonly backendConfigFile: string;
  readonly bundleSha256: string;
}

/** Inputs of {@link planMultipass}. */
export interface MultipassPlanInput {
  readonly ctx: ProfileContext;
  /** @default reads `<projectDir>/dist/cohort.cjs` */
  readonly bundle?: Buffer;
  /** @default process.env (PATH for the CLI) */
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * Validates everything with no resource created.
 *
 * @throws {StackConfigError} naming the key of every problem (placement, machine fit, CLI, roster)
 * @throws {pulumi.RunError} for a missing runtime bundle
 */
export function planMultipass(input: MultipassPlanInput): MultipassPlan {
  const { config, raw, projectDir, stack } = input.ctx;
  const multipass = parseMultipassConfig(raw);
  if (config.cohort.roles === undefined) {
    throw new StackConfigError([
      {
        key: configKey("cohort.roles"),
        reason: `the multipass profile runs members as systemd units on the VMs, so it needs a custom roster (cohort.roles in the RunSpec shape, stock programs of the VM's image); the app presets (${config.cohort.app ?? "openclaw"}) run host programs. See Pulumi.multipass.yaml for an example`,
      },
    ]);
  }
  const resolved = resolveRunSpec(config.cohort, { nodePath: process.execPath, projectDir });
  const placement = placeRoles(resolved.spec, multipass.machines, multipass.placement);
  checkMachineFit(resolved.spec, multipass.machines, placement);
  checkBackendLimits(resolved.spec, multipass.machines, placement, multipass.basePort);
  const cli = resolveMultipassCli(multipass.cli, input.env);
  const prefix = multipass.prefix ?? defaultPrefix(stack);
  const tooLong = multipass.machines.filter((m) => instanceName(prefix, m.name).length > 63);
  if (tooLong.length > 0) {
    throw new StackConfigError(tooLong.map((m) => ({ key: configKey("multipass.prefix"), reason: `instance name ${instanceName(prefix, m.name)} is longer than 63 characters` })));
  }
  const stateDir = path.resolve(projectDir, multipass.stateDir ?? path.join(".multipass", stack));
  const { bundleSha256 } = readRuntimeBundle(projectDir, input.bundle);
  return {
    multipass,
    resolved,
    placement,
    cli,
    image: multipass.image ?? multipassPins.image,
    prefix,
    stateDir,
    backendConfigFile: path.join(stateDir, "backend.json"),
    bundleSha256,
  };
}

/** POSIX-shell single quoting. */
function q(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * Builds the `multipass` profile: `MultipassFleet` `fleet`, the backend config file `backend-config` (a
 * `command:local:Command` writing `<stateDir>/backend.json` from stdin, mode 0600) and `CohortRun` `cohort`.
 *
 * @param inject - tests only: the runtime bundle and the environment the CLI is looked up in
 * @throws {StackConfigError} and the other refusals of {@link planMultipass}, before any resource exists
 */
export function buildMultipass(ctx: ProfileContext, inject: Pick<MultipassPlanInput, "bundle" | "env"> = {}): StackOutputs {
  const plan = refusing(() => planMultipass({ ctx, ...inject }));
  const { config, projectDir } = ctx;
  const fleet = new MultipassFleet("fleet", {
    prefix: plan.prefix,
    image: plan.image,
    machines: plan.multipass.machines,
    userData: MULTIPASS_USER_DATA,
    multipass: plan.cli,
    environment: { ...plan.multipass.environment },
    ...(plan.multipass.launchTimeoutSeconds !== undefined ? { launchTimeoutSeconds: plan.multipass.launchTimeoutSeconds } : {}),
    nodePath: process.execPath,
    projectDir,
  });
  const backendJson = fleet.instances.apply((instances) =>
    JSON.stringify(
      systemdBackendConfig({ cli: plan.cli, environment: plan.multipass.environment, instances, placement: plan.placement, basePort: plan.multipass.basePort }),
      null,
      2,
    ),
  );
  const file = plan.backendConfigFile;
  const write = `set -eu; umask 077; mkdir -p ${q(path.dirname(file))}; cat > ${q(`${file}.tmp`)}; mv -f ${q(`${file}.tmp`)} ${q(file)}`;
  const backendConfig = new command.local.Command(
    "backend-config",
    { interpreter: ["/bin/sh", "-c"], create: write, update: write, delete: `rm -f ${q(file)}`, stdin: backendJson, logging: "stderr" },
    { dependsOn: [...fleet.ready] },
  );
  const nodePath = process.execPath;
  const bundlePath = path.join(projectDir, RUNTIME_BUNDLE);
  const cohort = new CohortRun(
    "cohort",
    {
      spec: plan.resolved.spec,
      keepLedgers: config.keepLedgers,
      execution: {
        kind: "process",
        runtime: { runtimeBundlePath: bundlePath, runtimeBundleSha256: plan.bundleSha256, nodePath },
        artifactRoot: config.artifactRoot,
        profile: "multipass",
        backend: "systemd",
        backendConfigFile: file,
        fallbackRuntimeBundlePath: bundlePath,
        // A VM launched again (deleted by hand) runs the cohort again; a fleet of VMs made before launch ids adds
        // nothing (existing stacks see no diff).
        runAgainOn: fleet.launchIds.apply((ids) =>
          Object.values(ids).every((id) => id === LEGACY_LAUNCH_ID)
            ? ""
            : `launch-ids:${Object.entries(ids)
                .map(([m, id]) => `${m}=${id}`)
                .join(",")}`,
        ),
      },
    },
    { dependsOn: [backendConfig, ...fleet.ready] },
  );
  const runOutputs: pulumi.Output<RunOutputs> = cohort.summary;
  return { profile: "multipass", artifactRoot: config.artifactRoot, run: runOutputs };
}

/** The `multipass` profile entry of stacks/profiles.ts. */
export const multipassProfile: ProfileDefinition = {
  description: "Multipass VMs (Ubuntu 24.04): members are transient systemd units on the VMs their roles are placed on; runtime and ledger on this machine",
  configKeys: ["multipass"],
  build: (ctx) => buildMultipass(ctx),
};

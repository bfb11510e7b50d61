/**
 * Profile dispatch: one entry per simulator profile (docs/architecture.md "How to add a profile"), keyed by the name a stack
 * selects with `cohort-lab:profile` (default: the stack name). The types a profile implements and returns
 * (docs/architecture.md "Run summary and stack outputs", the CI contract) are in stacks/profile.ts, which the profiles import instead of
 * this registry.
 *
 * To add a profile: write `stacks/<profile>.ts` exporting a {@link ProfileDefinition}, import it here and
 * add one line to {@link PROFILES}.
 */
import * as pulumi from "@pulumi/pulumi";
import { gkeProfile } from "./gke.js";
import { host } from "./host.js";
import { localProfile } from "./local.js";
import { multipassProfile } from "./multipass.js";
import { simProfile } from "./sim.js";
import { PROJECT_DIR, StackConfigError, artifactRootProblem, configCommand, configKey, parseStackConfig, readRawConfig, type RawConfig } from "./config.js";
import type { ProfileDefinition, StackOutputs } from "./profile.js";

export type { ProfileContext, ProfileDefinition, QueueNames, RunOutputs, StackOutputs } from "./profile.js";

/** Every profile by name. */
export const PROFILES: Readonly<Record<string, ProfileDefinition>> = {
  host,
  local: localProfile,
  sim: simProfile,
  gke: gkeProfile,
  multipass: multipassProfile,
};

/** Inputs of {@link buildStack}; defaults read the Pulumi runtime. */
export interface BuildStackInput {
  /** @default pulumi.getStack() */
  readonly stack?: string;
  /** @default readRawConfig() */
  readonly raw?: RawConfig;
  /** @default PROJECT_DIR */
  readonly projectDir?: string;
  /** @default PROFILES */
  readonly profiles?: Readonly<Record<string, ProfileDefinition>>;
}

/**
 * Reads and validates the stack config, picks the profile and builds it.
 *
 * @throws {StackConfigError} for an unknown profile (listing the known ones) or any invalid config key,
 *   including an artifact root that cannot be a writable directory ({@link artifactRootProblem})
 */
export function buildStack(input: BuildStackInput = {}): StackOutputs {
  const stack = input.stack ?? pulumi.getStack();
  const raw = input.raw ?? readRawConfig();
  const projectDir = input.projectDir ?? PROJECT_DIR;
  const profiles = input.profiles ?? PROFILES;
  const profileName = raw.profile ?? stack;
  const definition = Object.hasOwn(profiles, profileName) ? profiles[profileName] : undefined;
  if (definition === undefined) {
    const known = Object.keys(profiles).sort().join(", ");
    throw new StackConfigError([
      {
        key: configKey("profile"),
        reason:
          raw.profile === undefined
            ? `unset, and the stack name "${stack}" is not a profile (known profiles: ${known}); run \`${configCommand(stack, "set profile <name>")}\` or use a stack named after a profile`
            : `unknown profile "${profileName}" (known profiles: ${known})`,
      },
    ]);
  }
  const config = parseStackConfig(raw, { stack, projectDir, profileKeys: definition.configKeys, checkArtifactRoot: artifactRootProblem });
  return definition.build({ stack, projectDir, config, raw });
}

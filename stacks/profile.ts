/**
 * The contract between the profile registry (stacks/profiles.ts) and each profile (stacks/host.ts, local.ts,
 * sim.ts, …): what a profile builder gets and the stack-output shape every profile returns (docs/architecture.md "Run
 * summary and stack outputs", the CI contract). Types only, so that the profiles import this and not the registry that imports them.
 */
import type * as pulumi from "@pulumi/pulumi";
import type { CohortRunSummary } from "../components/run/CohortRun.js";
import type { RawConfig, StackConfig } from "./config.js";

/**
 * The run, as every profile reports it: the `run` stack output CI jobs read (`run.id`, `run.outcome`, ...), one
 * shape on every profile ({@link CohortRunSummary}, built once by `CohortRun.summary`).
 */
export type RunOutputs = CohortRunSummary;

/** Queue names of cluster profiles. */
export interface QueueNames {
  /** Kueue ClusterQueue that holds the profile's quota. */
  readonly clusterQueue: string;
  /** Kueue LocalQueue that runs submit to. */
  readonly localQueue: string;
  /** Temporal task queue of the run workflow (only profiles whose run is a Temporal workflow; `local` has none). */
  readonly temporalTaskQueue?: string;
}

/**
 * Stack outputs of every profile (the CI contract; keep names and shapes stable). `index.ts` exports
 * each field as a stack output of the same name; fields a profile does not have are left out.
 */
export interface StackOutputs {
  /** The profile the stack built, e.g. `host`. */
  readonly profile: string;
  /** Where ledgers go: an absolute path (host, local) or a `gs://` URI (gke). */
  readonly artifactRoot: pulumi.Input<string>;
  /** The cohort run of this stack. */
  readonly run: pulumi.Output<RunOutputs>;
  /** Cluster profiles: the kube context name the cluster was written under. */
  readonly kubeContext?: pulumi.Output<string>;
  /** Cluster profiles: the kubeconfig (a Pulumi secret). */
  readonly kubeconfig?: pulumi.Output<string>;
  /** Cluster profiles: `host:port` of the Temporal frontend. */
  readonly temporalAddress?: pulumi.Output<string>;
  /** Cluster profiles: queue names. */
  readonly queues?: pulumi.Output<QueueNames>;
}

/** What a profile builder gets. */
export interface ProfileContext {
  /** The stack name. */
  readonly stack: string;
  /** The Pulumi project directory. */
  readonly projectDir: string;
  /** The common config, validated. */
  readonly config: StackConfig;
  /** Every key of the `cohort-lab` namespace as stored (without the prefix), for the profile's own keys. */
  readonly raw: RawConfig;
}

/** A profile. */
export interface ProfileDefinition {
  /** One line for docs and errors. */
  readonly description: string;
  /** Top-level `cohort-lab:` keys this profile reads besides the common ones (others are refused as unknown). */
  readonly configKeys: readonly string[];
  /**
   * Validates the profile's config (throwing stacks/config.ts `StackConfigError` before any resource exists), then
   * builds the profile's resources and returns the stack outputs.
   */
  readonly build: (ctx: ProfileContext) => StackOutputs;
}

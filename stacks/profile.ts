/**
 * The contract between the profile registry (stacks/profiles.ts) and each profile (stacks/host.ts, local.ts,
 * sim.ts, …): what a profile builder gets and the stack-output shape every profile returns (DESIGN.md "Stack
 * outputs", the CI contract). Types only, so that the profiles import this and not the registry that imports them.
 */
import type * as pulumi from "@pulumi/pulumi";
import type { RawConfig, StackConfig } from "./config.js";

/** The run, as every profile reports it. */
export interface RunOutputs {
  /** Run id, `<cohort name>-<UTC yyyymmddThhmmssZ>-<6 hex>`. */
  readonly id: string;
  /**
   * `succeeded`, `failed` or `interrupted`. `host`: a run that did not succeed is recorded too (its `up` fails
   * with the reason), so the outputs never keep naming an earlier success.
   */
  readonly outcome: "succeeded" | "failed" | "interrupted";
  /** Members in the roster. */
  readonly size: number;
  /** Members that became ready (equals `size` on success). */
  readonly readyCount: number;
  /** Milliseconds from admission until the whole roster was ready; `null` if it never was. */
  readonly timeToReadyMs: number | null;
  /** Absolute path (host) or URI (gs://, cluster profiles) of the run's ledger directory. */
  readonly ledgerPath: string;
  /** `host`: `null`, or the first failure: the member and the first line of its reason. */
  readonly firstFailure?: { readonly member: string; readonly reason: string } | null;
  /** `host`: SHA-256 of the canonical RunSpec, equal to the ledger manifest's `specSha256`. */
  readonly specSha256?: string;
  /** Absolute path of the run's HTML report (`report.html` in the ledger directory); `null` when it was not written. */
  readonly reportPath: string | null;
}

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

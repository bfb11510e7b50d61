/**
 * What every way of executing a {@link CohortRun} shares: the plan it is given, what it returns, and the
 * runtime's one-line summary it parses. Kept apart from the executors so that neither imports the other.
 */
import * as pulumi from "@pulumi/pulumi";

/**
 * The environment key that asks the command provider for a status pipe on fd 3 (scripts/lib/command-provider.ts
 * `STATUS_FD_ENV`; kept here as a literal so the program does not import the provider).
 */
export const STATUS_FD_ENV = "COHORT_STATUS_FD";

/**
 * The run contract is the runtime's (runtime/core/summary.ts, through the door): the summary line `cohort run`
 * prints, its schema and parser, and the outcome. Re-exported for the components that consume it.
 */
export { parseRunSummary, type Outcome as RunOutcome, type RunSummary } from "../../runtime/index.js";
import type { RunSummary } from "../../runtime/index.js";

/** What an executor returns: the resource that runs the cohort and its parsed summary. */
export interface CohortExecution {
  readonly resource: pulumi.CustomResource;
  readonly summary: pulumi.Output<RunSummary>;
  /**
   * The runtime's one-line reason when the run did not succeed (`""` when it did): the process executor's
   * step records failed and interrupted runs in the state and the program fails the deployment with it.
   * Executors without it fail their resource instead. @default none
   */
  readonly reason?: pulumi.Output<string>;
}

/** What every executor is given: the CohortRun's name, the RunSpec as JSON (one line) and its digest. */
export interface ExecutionPlan {
  readonly name: string;
  readonly specJson: string;
  readonly specSha256: string;
  /** `false`: deleting the run (destroy, replacement) removes its ledger directory too. */
  readonly keepLedgers: boolean;
}

/**
 * The `cohortRun` workflow (docs/temporal.md). Bundled at build time (scripts/bundle.mjs, `bundleWorkflowCode`)
 * into `dist/cohort-temporal-workflows.js`, which the worker loads into its deterministic sandbox: this file may
 * import only `@temporalio/workflow` and SDK-free modules.
 *
 * 1. `runCohort(input)`: one attempt (a cohort is never replayed), heartbeat timeout {@link HEARTBEAT_TIMEOUT_S},
 *    start-to-close from the RunSpec's budgets (`input.runTimeoutS`).
 * 2. Always, in a non-cancellable scope (so it runs when the workflow is cancelled or the run failed):
 *    `cleanupRun({ runId })`, which deletes the run's Kubernetes objects and waits until they are gone; when
 *    `runCohort` did not return, with `lost: { artifacts, reason }`, so the cleanup also completes the ledger
 *    the lost run left without a completion (runtime/core/ledger/seal.ts).
 *
 * Result: {@link CohortRunResult} of `runCohort`. When `runCohort` did not return (worker lost, heartbeat or
 * start-to-close timeout), the workflow fails with an `ApplicationFailure` of type `CohortRunLost` naming the
 * cause, after the cleanup.
 */
import { ApplicationFailure, CancellationScope, proxyActivities } from "@temporalio/workflow";
import type { CohortActivities } from "./activities.js";
import { CLEANUP_TIMEOUT_S, HEARTBEAT_TIMEOUT_S, type CohortRunInput, type CohortRunResult } from "./contract.js";

const cleanup = proxyActivities<CohortActivities>({
  startToCloseTimeout: `${CLEANUP_TIMEOUT_S}s`,
  // Idempotent: retried until it succeeds or the workflow's run timeout (none by default) ends it.
  retry: { initialInterval: "2s", maximumInterval: "30s" },
});

/** The cohort run workflow. */
export async function cohortRun(input: CohortRunInput): Promise<CohortRunResult> {
  const { runCohort } = proxyActivities<CohortActivities>({
    startToCloseTimeout: `${input.runTimeoutS}s`,
    heartbeatTimeout: `${HEARTBEAT_TIMEOUT_S}s`,
    retry: { maximumAttempts: 1 },
  });
  let result: CohortRunResult | undefined;
  let failure: unknown;
  try {
    result = await runCohort(input);
  } catch (error) {
    failure = error;
  }
  const cause =
    result !== undefined ? undefined : failure instanceof Error ? `${failure.message}${failure.cause instanceof Error ? `: ${failure.cause.message}` : ""}` : String(failure);
  await CancellationScope.nonCancellable(() => cleanup.cleanupRun({ runId: input.runId, ...(cause !== undefined ? { lost: { artifacts: input.artifacts, reason: cause } } : {}) }));
  if (result !== undefined) return result;
  throw ApplicationFailure.create({
    type: "CohortRunLost",
    message: `run ${input.runId}: runCohort did not return a result (${cause})`,
    nonRetryable: true,
    cause: failure instanceof Error ? failure : undefined,
  });
}

/**
 * The records a run's host-side step keeps under the artifact root between `pulumi up`s, shared by the process
 * executor (components/run/CohortRun.ts, its step scripts) and the cluster workflow executor
 * (components/run/clusterWorkflow.ts, components/kind/steps.cjs `run-submit`). Each is a trigger of the run, so a
 * run that did not succeed, or a workflow that lost its run, is run again by the next `up`.
 */
import { readFileSync } from "node:fs";
import path from "node:path";

/**
 * File under the artifact root where the step script records the summary of the last run that did not succeed
 * (failed or interrupted). Its run id is a trigger of the run resource, so the next `up` replaces (re-runs) a run
 * that is in the state but did not succeed, and a later success keeps the trigger unchanged.
 */
export const UNSUCCESSFUL_RUN_FILE = ".cohort-last-unsuccessful-run.json";

/**
 * File under the artifact root where the workflow mode's step script records the id of a workflow that lost its
 * run (no summary: `cohort submit` printed `lost the run`). It is a trigger of the identity and the run, so the
 * next `up` runs the cohort again under a new workflow id instead of reading the lost one's failure forever
 * (REJECT_DUPLICATE).
 */
export const LOST_WORKFLOW_FILE = ".cohort-last-lost-workflow";

/** The id {@link LOST_WORKFLOW_FILE} records, or `""`. */
export function lastLostWorkflowId(artifactRoot: string): string {
  try {
    return readFileSync(path.join(artifactRoot, LOST_WORKFLOW_FILE), "utf8").trim();
  } catch {
    return "";
  }
}

/**
 * The run id of the artifact root's last unsuccessful run (see {@link UNSUCCESSFUL_RUN_FILE}), or `""`.
 */
export function lastUnsuccessfulRunId(artifactRoot: string): string {
  try {
    const v = JSON.parse(readFileSync(path.join(artifactRoot, UNSUCCESSFUL_RUN_FILE), "utf8")) as { runId?: unknown };
    return typeof v.runId === "string" ? v.runId : "";
  } catch {
    return "";
  }
}

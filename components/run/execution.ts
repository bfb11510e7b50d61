/**
 * What every way of executing a {@link CohortRun} shares: the plan it is given, what it returns, and the
 * runtime's one-line summary it parses. Kept apart from the executors so that neither imports the other.
 */
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";

/**
 * The environment key that asks the command provider for a status pipe on fd 3 (scripts/lib/command-provider.ts
 * `STATUS_FD_ENV`; kept here as a literal so the program does not import the provider).
 */
export const STATUS_FD_ENV = "COHORT_STATUS_FD";

/** Outcome of a run, as in the ledger's `completion.json`. */
export type RunOutcome = "succeeded" | "failed" | "interrupted";

/** The runtime CLI's one-line JSON summary on stdout (`cohort run`). */
export interface RunSummary {
  /** `<cohort name>-<UTC yyyymmddThhmmssZ>-<6 hex>`. */
  readonly runId: string;
  readonly outcome: RunOutcome;
  /** Members in the roster (sum of replicas). */
  readonly size: number;
  /** Members that became ready. */
  readonly readyCount: number;
  /** Milliseconds from admission until the whole roster was ready; `null` if it never was. */
  readonly timeToReadyMs: number | null;
  /** Absolute path of the run's ledger directory (`<artifactRoot>/<runId>`). */
  readonly ledgerPath: string;
  /**
   * Absolute path of the run's HTML report (`<ledgerPath>/report.html`, written by `cohort run` on every
   * outcome); `null` when the runtime could not write it, or when the summary predates the field (a stored
   * summary of an older runtime).
   */
  readonly reportPath: string | null;
  /** `null`, or the first failure: the member and a one-line reason. */
  readonly firstFailure: { readonly member: string; readonly reason: string } | null;
}

/**
 * Parses the runtime's stdout summary line.
 *
 * @throws {Error} naming the field when stdout is not the expected JSON object
 */
export function parseRunSummary(stdout: string): RunSummary {
  const lines = stdout.split("\n").filter((line) => line.trim() !== "");
  const last = lines.at(-1);
  if (last === undefined) throw new Error("the cohort runtime printed no summary line on stdout");
  let value: unknown;
  try {
    value = JSON.parse(last);
  } catch {
    throw new Error(`the cohort runtime's summary line is not JSON: ${last.slice(0, 200)}`);
  }
  const v = value as Record<string, unknown>;
  const need = (field: string, ok: boolean) => {
    if (!ok) throw new Error(`the cohort runtime's summary has no valid "${field}": ${last.slice(0, 200)}`);
  };
  need("runId", typeof v.runId === "string" && v.runId !== "");
  need("outcome", v.outcome === "succeeded" || v.outcome === "failed" || v.outcome === "interrupted");
  need("size", Number.isInteger(v.size));
  need("readyCount", Number.isInteger(v.readyCount));
  need("timeToReadyMs", v.timeToReadyMs === null || typeof v.timeToReadyMs === "number");
  need("ledgerPath", typeof v.ledgerPath === "string" && path.isAbsolute(v.ledgerPath));
  // Optional: a summary stored by an older runtime has no reportPath.
  need("reportPath", v.reportPath === undefined || v.reportPath === null || (typeof v.reportPath === "string" && path.isAbsolute(v.reportPath)));
  return {
    runId: v.runId as string,
    outcome: v.outcome as RunOutcome,
    size: v.size as number,
    readyCount: v.readyCount as number,
    timeToReadyMs: v.timeToReadyMs as number | null,
    ledgerPath: v.ledgerPath as string,
    reportPath: (v.reportPath as string | null | undefined) ?? null,
    firstFailure: (v.firstFailure as RunSummary["firstFailure"]) ?? null,
  };
}

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

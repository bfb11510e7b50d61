/**
 * The run contract: how a run ended ({@link Outcome}) and the one-line JSON summary `cohort run` prints
 * on stdout as its last line ({@link RunSummary}, written by runtime/cli.ts `report()`). The ledger's
 * `completion.json` carries the same outcome; the Pulumi components and the sim harness read the summary
 * back with {@link parseRunSummary}. This module is the one definition of both; its field names and
 * values are a contract (stack outputs and tests depend on them).
 */
import * as path from "node:path";
import { z } from "zod";

/** The outcomes, in the order they are documented. */
export const OUTCOMES = ["succeeded", "failed", "interrupted"] as const;

/** How a run ended (the ledger's `completion.json` `outcome`, the summary's `outcome`). */
export type Outcome = (typeof OUTCOMES)[number];

const absolutePath = z.string().refine((p) => path.isAbsolute(p), { message: "expected an absolute path" });

/**
 * Schema of the summary line. Unknown fields are dropped. `reportPath` and `firstFailure` may be absent (a
 * summary stored by an older runtime has no `reportPath`) and then read as `null`.
 */
export const runSummarySchema = z.object({
  /** `<cohort name>-<UTC yyyymmddThhmmssZ>-<6 hex>`. */
  runId: z.string().min(1, { message: "expected a non-empty string" }),
  outcome: z.enum(OUTCOMES),
  /** Members in the roster (sum of replicas). */
  size: z.number().int(),
  /** Members that became ready. */
  readyCount: z.number().int(),
  /** Milliseconds from admission until the whole roster was ready; `null` if it never was. */
  timeToReadyMs: z.number().nullable(),
  /** Absolute path of the run's ledger directory (`<artifactRoot>/<runId>`). */
  ledgerPath: absolutePath,
  /** Absolute path of the run's HTML report (`<ledgerPath>/report.html`); `null` when it was not written. */
  reportPath: absolutePath
    .nullable()
    .optional()
    .transform((v) => v ?? null),
  /** `null`, or the first failure: the member (`null` for a run-level failure) and its reason. */
  firstFailure: z
    .object({ member: z.string().nullable(), reason: z.string() })
    .nullable()
    .optional()
    .transform((v) => v ?? null),
  /** Optional: the run's exported ledger, `gs://<bucket>/<prefix>/<runId>`, present only when `--ledger-export` succeeded. */
  ledgerUri: z
    .string()
    .regex(/^gs:\/\/[^/]+\/.+$/, { message: "expected gs://<bucket>/<prefix>/<runId>" })
    .optional(),
});

/** The runtime CLI's one-line JSON summary on stdout (`cohort run`). */
export interface RunSummary {
  /** `<cohort name>-<UTC yyyymmddThhmmssZ>-<6 hex>`. */
  readonly runId: string;
  readonly outcome: Outcome;
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
   * outcome); `null` when the runtime could not write it, or when the summary predates the field.
   */
  readonly reportPath: string | null;
  /** `null`, or the first failure: the member (`null` when the run as a whole failed) and its reason. */
  readonly firstFailure: { readonly member: string | null; readonly reason: string } | null;
  /**
   * Optional (absent unless `cohort run --ledger-export gs://…` was given and the upload succeeded): the run's
   * exported ledger, `gs://<bucket>/<prefix>/<runId>` (its `manifest.json`, `records.ndjson`, `completion.json`).
   */
  readonly ledgerUri?: string;
}

// The interface is the documented shape; this line keeps it equal to what the schema produces.
const _sameShape: (s: z.output<typeof runSummarySchema>) => RunSummary = (s) => s;
void _sameShape;

/**
 * Parses the runtime's stdout: the last non-empty line must be the JSON summary.
 *
 * @param text - the runtime's stdout (or just the summary line)
 * @returns the validated summary (`reportPath` and `firstFailure` default to `null`)
 * @throws Error `the cohort runtime printed no summary line on stdout`, `the cohort runtime's summary line is
 *   not JSON: <line>`, or `the cohort runtime's summary has no valid "<field>": <line> (<reason>)`
 */
export function parseRunSummary(text: string): RunSummary {
  const last = text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .at(-1);
  if (last === undefined) throw new Error("the cohort runtime printed no summary line on stdout");
  let value: unknown;
  try {
    value = JSON.parse(last);
  } catch {
    throw new Error(`the cohort runtime's summary line is not JSON: ${last.slice(0, 200)}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(`the cohort runtime's summary line is not a JSON object: ${last.slice(0, 200)}`);
  const parsed = runSummarySchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.map((p) => (typeof p === "number" ? `[${p}]` : String(p))).join(".") || "summary";
    throw new Error(`the cohort runtime's summary has no valid "${field}": ${last.slice(0, 200)} (${issue.message})`);
  }
  return parsed.data;
}

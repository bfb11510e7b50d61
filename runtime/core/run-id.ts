/**
 * What a run id may be: a Kubernetes label value (letters, digits, `-`, `_`, `.`, starting and ending with
 * a letter or digit, at most 63 characters). The run id names the run's directory under the artifact root,
 * its cgroups (`<hierarchy>/cohort/<runId>`, runtime/backends/process/cgroup.ts) and its Kubernetes labels,
 * so one that is not a label value (`../victim`, `a/b`, `.`) must never reach a path.
 *
 * The one check of a run id: `cohort run --run-id` (runtime/cli.ts), `reap` and the cgroup paths use it.
 */

/** Longest run id (a Kubernetes label value). */
export const MAX_RUN_ID_LENGTH = 63;

const RUN_ID_PATTERN = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** Whether `value` is a run id (module doc). A run id contains no `/` and is never `.` or `..`. */
export function isRunId(value: unknown): value is string {
  return typeof value === "string" && value.length <= MAX_RUN_ID_LENGTH && RUN_ID_PATTERN.test(value);
}

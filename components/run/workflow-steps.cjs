// @ts-check
/**
 * The host side of the cluster workflow execution of `CohortRun` (components/run/clusterWorkflow.ts): ONE copy of
 * the steps every cluster profile registers in its steps file (components/kind/steps.cjs for `local`). Plain
 * CommonJS with Node built-ins only (the steps run without a build step). They run `cohort open-runs` and
 * `cohort submit` with this machine's runtime (`COHORT_BUNDLE`, dist/cohort.cjs, whose Temporal half resolves
 * `@temporalio/*` from the project's node_modules) under the Node that runs the step.
 *
 * - {@link workerGuard} (`worker-guard`): refuses a worker rollout while the task queue has running workflows.
 *   (The same listing, `submit --sole`, keeps `run-submit` from starting a second run beside one still open.)
 * - {@link runIdentity} (`run-identity`): the run identity, 12 random hex digits, kept once created.
 * - {@link runSubmit} (`run-submit`): start or attach, wait, print the summary with the ledger's host path.
 * - {@link runKeep} (`run-keep`): the run Command's update: its previous summary, unchanged.
 *
 * Environment: COHORT_BUNDLE, COHORT_TEMPORAL_ADDRESS, COHORT_TASK_QUEUE (guard and submit); the submit step also
 * COHORT_WORKFLOW_ID, COHORT_PROFILE, COHORT_ARTIFACTS_DIR, COHORT_ARTIFACTS_NODE_PATH, COHORT_UNSUCCESSFUL_RUN_FILE,
 * COHORT_LOST_WORKFLOW_FILE (the record files' names, components/run/run-records.ts), COHORT_STATUS_FD (fd 3: the
 * command provider's status pipe) and the RunSpec on stdin.
 */
"use strict";

const { spawn } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { StepError, env, log, statusPipeFd } = require("./job-steps.cjs");

/** `cohort open-runs`' exit code when runs are open (runtime/temporal/cli.ts `OPEN_RUNS_EXIT`). */
const OPEN_RUNS_EXIT = 3;

/**
 * Runs the runtime bundle with `args` and collects its output; signals to this step (SIGTERM, SIGINT, SIGHUP) go to
 * it. `onStderrLine` sees each stderr line as it arrives.
 *
 * @param {readonly string[]} args
 * @param {{ input?: string, statusFd?: boolean, onStderrLine?: (line: string) => void }} o
 * @returns {Promise<{ code: number, stdout: string, stderr: string[] }>} `code` is 128 + N for a child killed by signal N
 * @throws {StepError} when COHORT_BUNDLE is unset or names no file
 */
function runBundle(args, o) {
  const bundle = env("COHORT_BUNDLE");
  // Node's own report of a missing entry ends in its version line, which is all a failure would quote.
  if (!fs.existsSync(bundle)) return Promise.reject(new StepError(`the runtime bundle ${bundle} (COHORT_BUNDLE) does not exist; run \`npm run build\``));
  return new Promise((resolve, reject) => {
    const childEnv = { ...process.env };
    if (!o.statusFd) delete childEnv.COHORT_STATUS_FD;
    const child = spawn(process.execPath, [bundle, ...args], { stdio: ["pipe", "pipe", "pipe", ...(o.statusFd ? [3] : [])], env: childEnv });
    const forward = (/** @type {NodeJS.Signals} */ signal) => () => child.kill(signal);
    const handlers = /** @type {const} */ (["SIGTERM", "SIGINT", "SIGHUP"]).map((s) => /** @type {const} */ ([s, forward(s)]));
    for (const [s, h] of handlers) process.on(s, h);
    let stdout = "";
    /** @type {string[]} */
    const stderr = [];
    let pending = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => {
      const lines = (pending + d).split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) {
        if (line.trim() === "") continue;
        stderr.push(line);
        o.onStderrLine?.(line);
      }
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      for (const [s, h] of handlers) process.off(s, h);
      if (pending.trim() !== "") stderr.push(pending);
      const signo = signal !== null ? (os.constants.signals[signal] ?? 0) : 0;
      resolve({ code: code ?? 128 + signo, stdout, stderr });
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(o.input ?? "");
  });
}

/** Whether fd 3 is the command provider's status pipe (job-steps.cjs `statusPipeFd`; submit is given it as its fd 3). */
function statusPipeOpen() {
  return process.env.COHORT_STATUS_FD === "3" && statusPipeFd() === 3;
}

/**
 * `worker-guard`: `cohort open-runs` on the task queue (retrying an unreachable Temporal for 120 s); exits 0 when no
 * run is open.
 *
 * @throws {StepError} naming each open workflow and what to do, or the reason `open-runs` failed
 */
async function workerGuard() {
  const queue = env("COHORT_TASK_QUEUE");
  const address = env("COHORT_TEMPORAL_ADDRESS");
  // The retry notes as they come (the guard's stderr is its row in `pulumi up`): up to 120 s would pass silently.
  const open = await openRuns((line) => process.stderr.write(`${line}\n`));
  if (open.length === 0) {
    log(`worker guard: no run open on task queue ${queue}; the run worker may roll`);
    return;
  }
  throw new StepError(
    `the run worker cannot roll while runs are open on task queue ${queue} (a rollout would hand a running activity to a pod being deleted): ` +
      `${open.join("; ")}. Let them finish (\`pulumi up\` with the unchanged program attaches to a run and waits for it), ` +
      `or cancel one: temporal workflow cancel --address ${address} --workflow-id ${open[0]?.split(" ")[0]}`,
  );
}

/**
 * The task queue's running workflows (`cohort open-runs`, retrying an unreachable Temporal for 120 s): one
 * `<workflow id> <run id> <start time>` line each.
 *
 * @param {(line: string) => void} [onStderrLine] - sees each stderr line of `open-runs` (its retry notes) as it comes
 * @returns {Promise<string[]>}
 * @throws {StepError} when `open-runs` fails (Temporal unreachable, bad task queue), with its last stderr line
 */
async function openRuns(onStderrLine) {
  const r = await runBundle(
    ["open-runs", "--temporal-address", env("COHORT_TEMPORAL_ADDRESS"), "--task-queue", env("COHORT_TASK_QUEUE"), "--wait-s", "120"],
    onStderrLine ? { onStderrLine } : {},
  );
  if (r.code !== 0 && r.code !== OPEN_RUNS_EXIT) throw new StepError(`cohort open-runs exited with status ${r.code}: ${r.stderr.at(-1) ?? "no output"}`);
  return r.stdout.split("\n").filter((l) => l.trim() !== "");
}

/** `run-keep`: the update of the run Command: its previous summary (`PULUMI_COMMAND_STDOUT`), unchanged (the run is not submitted again). */
async function runKeep() {
  process.stdout.write(process.env.PULUMI_COMMAND_STDOUT ?? "");
}

/** `run-identity`: the previous identity (`PULUMI_COMMAND_STDOUT`, an update) or 12 new random hex digits. */
async function runIdentity() {
  const previous = (process.env.PULUMI_COMMAND_STDOUT ?? "").trim();
  process.stdout.write(`${/^[0-9a-f]{12}$/.test(previous) ? previous : crypto.randomBytes(6).toString("hex")}\n`);
}

/**
 * Writes `text` to `file` by a rename (a reader never sees half of it).
 *
 * @param {string} file
 * @param {string} text
 * @returns {string} `""`, or a note for the reason line when it could not be written: without the record the next
 *   `up` would not run the cohort again (it would read the same run or lost workflow)
 */
function record(file, text) {
  try {
    fs.writeFileSync(`${file}.tmp`, text);
    fs.renameSync(`${file}.tmp`, file);
    return "";
  } catch (error) {
    fs.rmSync(`${file}.tmp`, { force: true });
    return ` (and ${file} could not be written: ${/** @type {Error} */ (error).message}; until it can, the next \`pulumi up\` does not run the cohort again)`;
  }
}

/**
 * `run-submit`: `cohort submit --sole` (refused while a workflow of another id is open on the task queue: no second
 * run beside a live one; otherwise start or attach, then wait) with the ledger root the worker sees; prints the
 * summary `mapSummary` gives (the ledger's host path). A run that did not succeed prints its summary, its reason on
 * stderr, records the summary (COHORT_UNSUCCESSFUL_RUN_FILE) and exits 0, as the process executor does; a workflow
 * that lost its run records its id (COHORT_LOST_WORKFLOW_FILE) and fails with the cause. A signal ends the
 * submitter only: the workflow and the run in the worker go on.
 *
 * @param {(summary: Record<string, unknown>) => Record<string, unknown>} mapSummary - from the worker's paths to this
 *   machine's; throws a StepError when the ledger did not reach this machine
 */
async function runSubmit(mapSummary) {
  const hostRoot = env("COHORT_ARTIFACTS_DIR");
  const workflowId = env("COHORT_WORKFLOW_ID");
  // Read before the run, so a missing one is named at once, not after a run of an hour.
  const unsuccessfulRunFile = path.join(hostRoot, env("COHORT_UNSUCCESSFUL_RUN_FILE"));
  const lostWorkflowFile = path.join(hostRoot, env("COHORT_LOST_WORKFLOW_FILE"));
  const spec = fs.readFileSync(0, "utf8");
  const statusFd = statusPipeOpen();
  const args = [
    "submit",
    "--temporal-address",
    env("COHORT_TEMPORAL_ADDRESS"),
    "--task-queue",
    env("COHORT_TASK_QUEUE"),
    "--workflow-id",
    workflowId,
    "--artifacts",
    env("COHORT_ARTIFACTS_NODE_PATH"),
    "--profile",
    env("COHORT_PROFILE"),
    // One run at a time on the task queue (one per cluster): submit refuses, after it accepted the spec, while a
    // workflow of another id is open (an `up` killed mid-run, then the RunSpec changed): two cohorts would run side by side.
    "--sole",
    "--spec",
    "-",
  ];
  // The submitter's notes (attached, retrying) on the status pipe as they come; only the reason goes to stderr.
  const note = (/** @type {string} */ line) => {
    if (!statusFd) return;
    try {
      fs.writeSync(3, `${line}\n`);
    } catch {
      /* the provider stopped reading */
    }
  };
  const r = await runBundle(args, { input: spec, statusFd, onStderrLine: note });
  const summaryLine = r.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .at(-1);
  const reasonLine = r.stderr.filter((l) => !/^cohort: (run .* succeeded; ledger |workflow .* (started or attached|is closed))/.test(l)).at(-1);
  if (summaryLine !== undefined && summaryLine.startsWith('{"runId":')) {
    const summary = mapSummary(JSON.parse(summaryLine));
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    if (r.code !== 0) {
      const unrecorded = record(unsuccessfulRunFile, `${JSON.stringify(summary)}\n`);
      process.stderr.write(`${reasonLine ?? `the cohort runtime exited with status ${r.code} and printed no reason`}${unrecorded}\n`);
    }
    return;
  }
  const unrecorded = r.stderr.some((l) => /^cohort: workflow .* lost the run: /.test(l)) ? record(lostWorkflowFile, `${workflowId}\n`) : "";
  const signal = r.code > 128 ? Object.entries(os.constants.signals).find(([, n]) => n === r.code - 128)?.[0] : undefined;
  const silent =
    signal !== undefined
      ? `cohort submit ended by ${signal}: the workflow ${workflowId} goes on in the run worker; \`pulumi up\` attaches to it`
      : `cohort submit exited with status ${r.code} and printed no reason`;
  process.stderr.write(`${reasonLine ?? silent}${unrecorded}\n`);
  process.exit(r.code === 0 ? 1 : r.code);
}

module.exports = { workerGuard, runIdentity, runSubmit, runKeep, runBundle, OPEN_RUNS_EXIT };

/**
 * `cohort worker` and `cohort submit` (docs/temporal.md): the entry of `dist/cohort-temporal.cjs`, which
 * `dist/cohort.cjs` loads for these two commands only (so the host profile's one-file runtime needs no
 * `node_modules`). The `@temporalio/*` packages are not bundled: they (and the native `@temporalio/core-bridge`)
 * resolve from the `node_modules` next to `dist/`.
 *
 *   cohort worker --temporal-address HOST:PORT [--namespace default] --task-queue Q --backend-config FILE
 *   cohort submit --temporal-address HOST:PORT [--namespace default] --task-queue Q --workflow-id ID
 *                 --artifacts DIR [--profile P] [--run-id R] [--progress-fd N] [--sole] (--spec FILE | SPEC)
 *
 *   cohort open-runs --temporal-address HOST:PORT [--namespace default] --task-queue Q [--wait-s S]
 *
 * `worker --ready-file FILE` writes FILE (its pid) once the worker is created and about to poll, and removes it
 * when the worker stops: a pod's readiness probe (`test -f FILE`) then means "this worker polls", not "its
 * container started" (components/run/worker-manifests.ts).
 *
 * `open-runs` lists the running `cohortRun` workflows of a task queue (Temporal's visibility query
 * `WorkflowType = 'cohortRun' AND TaskQueue = 'Q' AND ExecutionStatus = 'Running'`), one
 * `<workflow id> <run id> <start time>` line each: exit 0 when there are none, 3 when there are some. A worker
 * rollout is refused while it exits 3 (the `worker-guard` host step). An unreachable server is retried for
 * `--wait-s` seconds (default 60), then exit 1 with one line naming the address.
 *
 * `submit` starts the `cohortRun` workflow with `workflowIdConflictPolicy: USE_EXISTING` (a running workflow of
 * that id is attached to, not started twice) and `workflowIdReusePolicy: REJECT_DUPLICATE` (a closed one is never
 * started again: its result is read instead). It waits for the result, retrying a lost connection to Temporal
 * for as long as it takes (a dropped connection is never reported as a failed run), prints the run summary line
 * `cohort run` prints and exits with `cohort run`'s exit code. A workflow that ended without a result (the run
 * was lost) prints `cohort: run <id> lost: <cause>` and exits 1. While it waits it shows the run's progress: every
 * {@link PROGRESS_POLL_MS} it describes the workflow and writes the `progress` of `runCohort`'s last heartbeat
 * ({@link RunCohortHeartbeat}), when it changed, to `--progress-fd N` (default: the descriptor named by
 * `COHORT_STATUS_FD`, the command provider's status pipe; otherwise stderr).
 *
 * `submit --sole` keeps one run per task queue: after the spec is accepted and before anything starts, the same
 * visibility query as `open-runs` lists the queue's running `cohortRun` workflows; one with another workflow id
 * (an `up` killed mid-run, then its RunSpec changed) refuses the submit with exit 3 ({@link OPEN_RUNS_EXIT}) and one
 * line naming it and the `temporal workflow cancel` command. The workflow's own id is attached to as usual.
 */
import * as path from "node:path";
import { parseArgs } from "node:util";
import { Client, Connection, WorkflowFailedError, type WorkflowHandle } from "@temporalio/client";
import { defaultPayloadConverter, WorkflowExecutionAlreadyStartedError } from "@temporalio/common";
import { NativeConnection, Worker } from "@temporalio/worker";
import * as fs from "node:fs";
import { SpecError } from "../core/errors.js";
import { ENTRY_FDS, unusableProgressFd } from "../core/inherited-fd.js";
import { loadRunSpec } from "../core/spec.js";
import { wellFormedValue } from "../core/text.js";
import { createActivities, readBackendConfig } from "./activities.js";
import { HEARTBEAT_THROTTLE_MS, PROGRESS_POLL_MS, runBudgetSeconds, WORKFLOW_TYPE, type CohortRunInput, type CohortRunResult, type RunCohortHeartbeat } from "./contract.js";

/** Where the commands write. */
export interface TemporalCliIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly stdin: () => string;
  /**
   * The descriptors open when the process started (runtime/core/inherited-fd.ts `ENTRY_FDS` of the entry bundle,
   * dist/cohort.cjs); `--progress-fd` must be one of them. @default this bundle's own `ENTRY_FDS`
   */
  readonly entryFds?: ReadonlySet<number>;
}

/** A usage error: exit 2 with the message. */
export class TemporalUsageError extends Error {}

/** The pre-bundled workflow code, next to this bundle (scripts/bundle.mjs). */
export const WORKFLOW_BUNDLE_FILE = "cohort-temporal-workflows.js";

const RUN_ID = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

function need(values: Record<string, unknown>, name: string, command: string): string {
  const v = values[name];
  if (typeof v !== "string" || v === "") throw new TemporalUsageError(`${command}: --${name} is required`);
  return v;
}

/**
 * The `--temporal-address` of `command`, checked before anything connects: `HOST:PORT` (an IPv6 host in
 * brackets, `[::1]:7233`), HOST not empty and without spaces, PORT a decimal integer from 1 to 65535. (An
 * out-of-range port was retried forever as "unreachable" by `submit` and `open-runs`, and threw a raw
 * `TypeError` in `worker`.)
 *
 * @returns the address as given
 * @throws TemporalUsageError `<command>: --temporal-address must be HOST:PORT ...: <reason> (got "<value>")`
 */
function temporalAddress(values: Record<string, unknown>, command: string): string {
  const address = need(values, "temporal-address", command);
  const refuse = (reason: string): never => {
    throw new TemporalUsageError(`${command}: --temporal-address must be HOST:PORT with a port from 1 to 65535: ${reason} (got ${JSON.stringify(address)})`);
  };
  const m = /^(\[[^\]]*\]|[^:\s[\]]*):([^:]*)$/.exec(address);
  if (m === null) return refuse(address.includes(":") ? "not in the form HOST:PORT" : "no port");
  const [, host, port] = m as unknown as [string, string, string];
  if (host === "" || host === "[]") refuse("no host");
  if (!/^[0-9]{1,5}$/.test(port)) refuse(`port "${port}" is not a decimal number`);
  const n = Number(port);
  if (n < 1 || n > 65535) refuse(`port ${n} is out of range`);
  return address;
}

/**
 * The `--task-queue` of `command`: letters, digits and `- _ . /`, at most 200 characters ({@link TASK_QUEUE}),
 * the same rule for `worker`, `submit` and `open-runs` (the name goes into a visibility query's string literal).
 *
 * @throws TemporalUsageError naming the flag when it is missing or breaks the rule
 */
function taskQueueOf(values: Record<string, unknown>, command: string): string {
  const taskQueue = need(values, "task-queue", command);
  if (!TASK_QUEUE.test(taskQueue))
    throw new TemporalUsageError(`${command}: --task-queue must be letters, digits and - _ . / (at most 200, not starting with a symbol; got ${JSON.stringify(taskQueue)})`);
  return taskQueue;
}

/** `--namespace` (default `default`). @throws TemporalUsageError when it is given empty */
function namespaceOf(values: Record<string, unknown>, command: string): string {
  if (values.namespace === "") throw new TemporalUsageError(`${command}: --namespace must not be empty`);
  return typeof values.namespace === "string" ? values.namespace : "default";
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Errors of the transport (Temporal unreachable, connection dropped), which are retried, never a run's failure. */
function isTransient(error: unknown): boolean {
  if (error instanceof WorkflowFailedError || error instanceof WorkflowExecutionAlreadyStartedError) return false;
  const e = error as { name?: string; code?: number; cause?: unknown; message?: string };
  // gRPC UNAVAILABLE 14, DEADLINE_EXCEEDED 4, CANCELLED 1, UNKNOWN 2 on a torn stream, RESOURCE_EXHAUSTED 8.
  if (typeof e.code === "number" && [1, 2, 4, 8, 14].includes(e.code)) return true;
  if (e.name === "ServiceError" || e.name === "TransportError" || e.name === "ConnectionError") return true;
  if (/ECONNREFUSED|ECONNRESET|UNAVAILABLE|DEADLINE_EXCEEDED|Failed to connect|connection/i.test(e.message ?? "")) return true;
  return e.cause !== undefined && e.cause !== error && isTransient(e.cause);
}

/**
 * Runs `what` until it succeeds or fails with a non-transient error; transient failures are logged and retried
 * every `intervalMs` (1 s, doubling to 10 s).
 */
async function retrying<T>(what: string, io: TemporalCliIo, fn: () => Promise<T>): Promise<T> {
  let delay = 1_000;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (!isTransient(error)) throw error;
      io.stderr.write(`cohort: ${what}: Temporal unreachable (${(error as Error).message.split("\n")[0]}); retrying in ${delay} ms (attempt ${attempt})\n`);
      await sleep(delay);
      delay = Math.min(delay * 2, 10_000);
    }
  }
}

async function workerCommand(args: readonly string[], io: TemporalCliIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      "temporal-address": { type: "string" },
      namespace: { type: "string" },
      "task-queue": { type: "string" },
      "backend-config": { type: "string" },
      identity: { type: "string" },
      "ready-file": { type: "string" },
    },
    strict: true,
  });
  const address = temporalAddress(values, "worker");
  const readyFile = values["ready-file"] !== undefined ? path.resolve(values["ready-file"]) : undefined;
  const taskQueue = taskQueueOf(values, "worker");
  const namespace = namespaceOf(values, "worker");
  // A file left by a worker that died without its `finally` (SIGKILL, OOM kill) must not mark this one ready: the
  // pod's /tmp is an emptyDir, which outlives a container restart.
  // Its directory is checked here, before connecting: a worker that cannot write it would poll but never be Ready.
  if (readyFile !== undefined) {
    try {
      fs.mkdirSync(path.dirname(readyFile), { recursive: true });
      fs.accessSync(path.dirname(readyFile), fs.constants.W_OK);
      fs.rmSync(readyFile, { force: true });
    } catch (error) {
      throw new TemporalUsageError(`worker: --ready-file ${readyFile} cannot be written: ${(error as Error).message}`);
    }
  }
  const backendConfigFile = path.resolve(need(values, "backend-config", "worker"));
  try {
    readBackendConfig(backendConfigFile);
  } catch (error) {
    throw new TemporalUsageError(`worker: ${(error as Error).message}`, { cause: error });
  }
  const here = __dirname;
  const runtimeBundle = path.join(here, "cohort.cjs");
  const workflowBundle = path.join(here, WORKFLOW_BUNDLE_FILE);
  for (const f of [runtimeBundle, workflowBundle]) if (!fs.existsSync(f)) throw new TemporalUsageError(`worker: ${f} is missing (npm run build writes it)`);
  const connection = await retrying("worker connect", io, () => NativeConnection.connect({ address }));
  const worker = await Worker.create({
    connection,
    namespace,
    taskQueue,
    workflowBundle: { codePath: workflowBundle },
    activities: createActivities({ runtimeBundle, backendConfigFile }),
    ...(values.identity !== undefined ? { identity: values.identity } : {}),
    // Cancel running activities at shutdown at once: runCohort then stops its run (SIGTERM), which completes the ledger.
    shutdownGraceTime: "1s",
    // Progress travels in heartbeat details: send them within a second, not at the SDK's 80% of the timeout.
    maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE_MS,
    defaultHeartbeatThrottleInterval: HEARTBEAT_THROTTLE_MS,
  });
  io.stderr.write(`cohort: worker polling task queue ${taskQueue} at ${address} (pid ${process.pid})\n`);
  if (readyFile !== undefined) {
    fs.mkdirSync(path.dirname(readyFile), { recursive: true });
    fs.writeFileSync(readyFile, `${process.pid}\n`);
  }
  try {
    await worker.run();
  } finally {
    if (readyFile !== undefined) fs.rmSync(readyFile, { force: true });
    await connection.close();
  }
  return 0;
}

/** A task queue name `open-runs` puts in a visibility query: no quote can end the string literal. */
const TASK_QUEUE = /^[A-Za-z0-9][-A-Za-z0-9_./]{0,199}$/;

/** Exit code of `open-runs` when runs are open. */
export const OPEN_RUNS_EXIT = 3;

/**
 * The running `cohortRun` workflows of `taskQueue` (the visibility query
 * `WorkflowType = 'cohortRun' AND TaskQueue = 'Q' AND ExecutionStatus = 'Running'`,
 * https://docs.temporal.io/list-filter), one `<workflow id> <run id> <start time ISO 8601>` line each.
 *
 * @param taskQueue - matches {@link TASK_QUEUE} (checked by the callers), so no quote ends the string literal
 * @throws the client's error when the query fails (a transient one when Temporal is unreachable)
 */
async function openRunLines(client: Client, taskQueue: string): Promise<string[]> {
  const query = `WorkflowType = '${WORKFLOW_TYPE}' AND TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Running'`;
  const open: string[] = [];
  for await (const w of client.workflow.list({ query })) open.push(`${w.workflowId} ${w.runId} ${w.startTime.toISOString()}`);
  return open;
}

async function openRunsCommand(args: readonly string[], io: TemporalCliIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: { "temporal-address": { type: "string" }, namespace: { type: "string" }, "task-queue": { type: "string" }, "wait-s": { type: "string" } },
    strict: true,
  });
  const address = temporalAddress(values, "open-runs");
  const taskQueue = taskQueueOf(values, "open-runs");
  const namespace = namespaceOf(values, "open-runs");
  const waitS = values["wait-s"] === undefined ? 60 : /^[0-9]{1,6}$/.test(values["wait-s"]) ? Number(values["wait-s"]) : NaN;
  if (!Number.isInteger(waitS) || waitS < 0) throw new TemporalUsageError(`open-runs: --wait-s must be an integer >= 0 (got ${JSON.stringify(values["wait-s"])})`);
  const deadline = Date.now() + waitS * 1000;
  for (let delay = 1_000; ; delay = Math.min(delay * 2, 10_000)) {
    let connection: Connection | undefined;
    try {
      connection = await Connection.connect({ address, connectTimeout: 5_000 });
      const client = new Client({ connection, namespace });
      const open = await openRunLines(client, taskQueue);
      for (const line of open) io.stdout.write(`${line}\n`);
      return open.length === 0 ? 0 : OPEN_RUNS_EXIT;
    } catch (error) {
      if (!isTransient(error)) throw error;
      if (Date.now() + delay > deadline) {
        // One line naming the address (the worker-guard step reports the last lines; a gRPC stack names nothing).
        io.stderr.write(`cohort: open-runs: Temporal at ${address} unreachable for ${waitS} s (--wait-s): ${(error as Error).message.split("\n")[0]}\n`);
        return 1;
      }
      io.stderr.write(`cohort: open-runs: Temporal unreachable (${(error as Error).message.split("\n")[0]}); retrying in ${delay} ms\n`);
      await sleep(delay);
    } finally {
      await connection?.close();
    }
  }
}

async function submitCommand(args: readonly string[], io: TemporalCliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: {
      "temporal-address": { type: "string" },
      namespace: { type: "string" },
      "task-queue": { type: "string" },
      "workflow-id": { type: "string" },
      spec: { type: "string" },
      artifacts: { type: "string" },
      profile: { type: "string" },
      "run-id": { type: "string" },
      "progress-fd": { type: "string" },
      sole: { type: "boolean" },
    },
    allowPositionals: true,
    strict: true,
  });
  const address = temporalAddress(values, "submit");
  const taskQueue = taskQueueOf(values, "submit");
  const namespace = namespaceOf(values, "submit");
  const workflowId = need(values, "workflow-id", "submit");
  const artifacts = path.resolve(need(values, "artifacts", "submit"));
  if (positionals.length > 1 || (positionals.length === 1 && values.spec !== undefined))
    throw new TemporalUsageError("submit: give the spec once (--spec FILE or one SPEC argument)");
  const specFile = values.spec ?? positionals[0];
  if (specFile === undefined) throw new TemporalUsageError("submit: the spec is required (--spec FILE, - for stdin, or one SPEC argument)");
  let specText: string;
  try {
    specText = specFile === "-" ? io.stdin() : fs.readFileSync(specFile, "utf8");
  } catch (error) {
    throw new TemporalUsageError(`submit: cannot read the spec ${specFile}: ${(error as Error).message}`);
  }
  // Refused before anything is submitted (SpecError names the field).
  const spec = loadRunSpec(specText);
  const runId = values["run-id"] ?? newRunId(spec.name);
  if (!RUN_ID.test(runId)) throw new TemporalUsageError(`submit: --run-id must be a Kubernetes label value; got "${runId}"`);
  const progress = progressSink(values["progress-fd"], io);
  const input: CohortRunInput = { specText, runId, artifacts, profile: values.profile ?? "sim", runTimeoutS: runBudgetSeconds(spec) };

  const connection = await retrying("submit connect", io, () => Connection.connect({ address }));
  try {
    const client = new Client({ connection, namespace });
    if (values.sole === true) {
      const others = (await retrying("list open runs", io, () => openRunLines(client, taskQueue))).filter((line) => line.split(" ")[0] !== workflowId);
      if (others.length > 0) {
        io.stderr.write(
          `cohort: another run is still open on task queue ${taskQueue}: ${others.join("; ")}; a second run is not started beside it. ` +
            `Let it finish (it goes on in its worker), or cancel it: temporal workflow cancel --address ${address} --workflow-id ${others[0]!.split(" ")[0]}\n`,
        );
        return OPEN_RUNS_EXIT;
      }
    }
    const handle: WorkflowHandle = await retrying("start", io, async () => {
      try {
        const h = await client.workflow.start(WORKFLOW_TYPE, {
          taskQueue,
          workflowId,
          args: [input],
          workflowIdConflictPolicy: "USE_EXISTING",
          workflowIdReusePolicy: "REJECT_DUPLICATE",
        });
        io.stderr.write(`cohort: workflow ${workflowId} (run ${h.firstExecutionRunId}) started or attached\n`);
        return h;
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        io.stderr.write(`cohort: workflow ${workflowId} is closed: reading its result\n`);
        return client.workflow.getHandle(workflowId);
      }
    });
    let result: CohortRunResult;
    const following = followProgress(handle, progress);
    try {
      result = (await retrying("wait for the result", io, () => handle.result())) as CohortRunResult;
    } catch (error) {
      if (error instanceof WorkflowFailedError) {
        const cause = error.cause?.message ?? error.message;
        io.stderr.write(`cohort: workflow ${workflowId} lost the run: ${cause}\n`);
        return 1;
      }
      throw error;
    } finally {
      await following.stop();
    }
    // The run's last line (`done: ...`) from the result: no heartbeat carries it.
    if (typeof result.progress === "string") following.last(result.progress);
    io.stdout.write(`${JSON.stringify(wellFormedValue(result.summary))}\n`);
    io.stderr.write(`cohort: run ${result.summary.runId} ${result.summary.outcome}; ledger ${result.summary.ledgerPath} (workflow ${workflowId})\n`);
    return result.exitCode;
  } finally {
    await connection.close();
  }
}

/**
 * Where `submit` writes progress lines: `--progress-fd N` (an open descriptor >= 3), else the descriptor in
 * `COHORT_STATUS_FD` when that is set (the command provider's status pipe, scripts/lib/command-provider.ts),
 * else stderr.
 *
 * @throws TemporalUsageError naming `--progress-fd` or `COHORT_STATUS_FD` when the value is not an integer >= 3,
 *   or the descriptor is not one the caller passed in (runtime/core/inherited-fd.ts `unusableProgressFd`)
 */
function progressSink(flag: string | undefined, io: TemporalCliIo): (line: string) => void {
  const raw = flag ?? process.env.COHORT_STATUS_FD;
  if (raw === undefined || raw === "") return (line) => io.stderr.write(`${line}\n`);
  const source = flag !== undefined ? "--progress-fd" : "COHORT_STATUS_FD";
  const fd = /^[0-9]+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(fd) || fd < 3) throw new TemporalUsageError(`submit: ${source} expects an open file descriptor number >= 3; got "${raw}"`);
  // Node's and libuv's own descriptors (epoll, eventfd, internal pipes) pass fstat: writing into one corrupts
  // or crashes the process, so only a descriptor inherited from the caller is used (the rules of `cohort run`).
  const unusable = unusableProgressFd(fd, io.entryFds ?? ENTRY_FDS);
  if (unusable !== undefined) throw new TemporalUsageError(`submit: ${source} ${fd} ${unusable}`);
  let broken = false;
  return (line) => {
    if (broken) return;
    try {
      fs.writeSync(fd, `${line}\n`);
    } catch {
      // A closed status pipe (the provider stopped reading) ends the progress, never the wait for the result.
      broken = true;
    }
  };
}

/**
 * Polls `describe` every {@link PROGRESS_POLL_MS} and writes the `progress` of `runCohort`'s last heartbeat when
 * it changed. Errors of a poll (Temporal unreachable) are ignored: the wait for the result retries on its own.
 *
 * @returns `stop()`, which ends the polling and waits for a poll in flight, at most {@link PROGRESS_POLL_MS}; and
 *   `last(line)`, which writes the run's final line (from {@link CohortRunResult.progress}) unless it was the last
 *   one written
 */
function followProgress(handle: WorkflowHandle, write: (line: string) => void): { stop(): Promise<void>; last(line: string): void } {
  let last: string | undefined;
  let stopped = false;
  let inFlight: Promise<void> | undefined;
  const poll = async (): Promise<void> => {
    const d = await handle.describe();
    for (const a of d.raw.pendingActivities ?? []) {
      if (a.activityType?.name !== "runCohort") continue;
      const payload = a.heartbeatDetails?.payloads?.[0];
      if (payload === undefined) continue;
      const beat = defaultPayloadConverter.fromPayload<RunCohortHeartbeat>(payload);
      if (!stopped && typeof beat?.progress === "string" && beat.progress !== last) {
        last = beat.progress;
        write(beat.progress);
      }
    }
  };
  const timer = setInterval(() => {
    // One poll at a time: a slow describe skips ticks instead of queueing them.
    if (stopped || inFlight !== undefined) return;
    inFlight = poll()
      .catch(() => undefined)
      .finally(() => (inFlight = undefined));
  }, PROGRESS_POLL_MS);
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      // A describe that hangs must not hold the summary: its late line is dropped (`stopped`).
      if (inFlight !== undefined) await Promise.race([inFlight, sleep(PROGRESS_POLL_MS)]);
    },
    last(line: string) {
      if (line !== last) write(line);
      last = line;
    },
  };
}

/** `<name>-<yyyymmddThhmmssZ>-<6 hex>` (as runtime/cli.ts newRunId). */
function newRunId(name: string): string {
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}Z$/, "Z");
  return `${name}-${stamp}-${Math.floor(Math.random() * 0xffffff)
    .toString(16)
    .padStart(6, "0")}`;
}

/**
 * Runs `worker`, `submit` or `open-runs`.
 *
 * @returns the exit code (2 on a usage error)
 */
export async function main(argv: readonly string[], io: TemporalCliIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "worker") return await workerCommand(rest, io);
    if (command === "submit") return await submitCommand(rest, io);
    if (command === "open-runs") return await openRunsCommand(rest, io);
    throw new TemporalUsageError(`expected worker, submit or open-runs, got ${JSON.stringify(command ?? "")}`);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (
      error instanceof TemporalUsageError ||
      code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ||
      code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" ||
      code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL"
    ) {
      io.stderr.write(`cohort: ${(error as Error).message}\n`);
      return 2;
    }
    if (error instanceof SpecError) {
      for (const issue of error.issues) io.stderr.write(`spec error: ${issue.path === "" ? "" : `${issue.path}: `}${issue.reason}\n`);
      return 2;
    }
    io.stderr.write(`cohort: ${command ?? ""}: ${(error as Error).stack ?? String(error)}\n`);
    return 1;
  }
}

if (require.main === module) {
  void main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, stdin: () => fs.readFileSync(0, "utf8") }).then((code) => {
    process.exitCode = code;
  });
}

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
 * Temporal is reached at COHORT_TEMPORAL_ADDRESS, or, with COHORT_TEMPORAL_PORT_FORWARD (a cluster whose frontend
 * is not published: `gke`), through a `kubectl port-forward` the step starts and supervises ({@link withTemporal}).
 *
 * Environment: COHORT_BUNDLE, COHORT_TASK_QUEUE and COHORT_TEMPORAL_ADDRESS, or COHORT_TEMPORAL_PORT_FORWARD with
 * COHORT_KUBECONFIG and the pinned kubectl's COHORT_KUBECTL_* (guard and submit); the submit step also
 * COHORT_WORKFLOW_ID, COHORT_PROFILE, COHORT_ARTIFACTS_DIR, COHORT_ARTIFACTS_NODE_PATH, COHORT_UNSUCCESSFUL_RUN_FILE,
 * COHORT_LOST_WORKFLOW_FILE (the record files' names, components/run/run-records.ts), COHORT_STATUS_FD (fd 3: the
 * command provider's status pipe) and the RunSpec on stdin.
 */
"use strict";

const { spawn } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const { StepError, env, log, statusPipeFd, pinnedTool, withKubeconfig } = require("./job-steps.cjs");

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

/** How long the first `kubectl port-forward` may take to listen (it is retried within this budget), ms. */
const PORT_FORWARD_READY_MS = 60_000;
/** How long one kubectl may take to listen before it is killed and counted as failed, ms (an API server or exec credential that hangs). */
const PORT_FORWARD_ATTEMPT_MS = 20_000;
/** The restart backoff of a port-forward that ended, ms: doubling from the first to the second. */
const PORT_FORWARD_BACKOFF_MS = [500, 5_000];
/** A kubectl that stayed up this long resets the backoff, ms. */
const PORT_FORWARD_STABLE_MS = 60_000;
/** "an error occurred forwarding" lines within {@link PORT_FORWARD_ERROR_WINDOW_MS} that make a kubectl be replaced. */
const PORT_FORWARD_ERRORS = 3;
const PORT_FORWARD_ERROR_WINDOW_MS = 30_000;
/** How long a stopped kubectl gets between SIGTERM and SIGKILL, ms. */
const PORT_FORWARD_KILL_MS = 5_000;

/**
 * Parses COHORT_TEMPORAL_PORT_FORWARD, `{"namespace":"…","service":"…","port":N}`.
 *
 * @param {string} text
 * @returns {{ namespace: string, service: string, port: number }}
 * @throws {StepError} naming the field that is missing or malformed
 */
function parsePortForward(text) {
  /** @type {any} */
  let v;
  try {
    v = JSON.parse(text);
  } catch (error) {
    throw new StepError(`COHORT_TEMPORAL_PORT_FORWARD is not JSON: ${/** @type {Error} */ (error).message}`);
  }
  const name = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
  if (typeof v?.namespace !== "string" || !name.test(v.namespace))
    throw new StepError(`COHORT_TEMPORAL_PORT_FORWARD.namespace must be a namespace name (got ${JSON.stringify(v?.namespace)})`);
  if (typeof v.service !== "string" || !name.test(v.service)) throw new StepError(`COHORT_TEMPORAL_PORT_FORWARD.service must be a Service name (got ${JSON.stringify(v.service)})`);
  if (!Number.isInteger(v.port) || v.port < 1 || v.port > 65535) throw new StepError(`COHORT_TEMPORAL_PORT_FORWARD.port must be a port 1-65535 (got ${JSON.stringify(v.port)})`);
  return { namespace: v.namespace, service: v.service, port: v.port };
}

/**
 * A supervised `kubectl port-forward --address 127.0.0.1 --namespace NS service/SVC :PORT` behind a local TCP proxy:
 * the step listens on one loopback port of its own ({@link PortForward.localPort}, for the whole step) and pipes each
 * connection to the port of the kubectl currently running, so a restarted kubectl (on whatever port it picks) never
 * competes for the address a child was given. kubectl resolves the Service to ONE pod when it starts and exits when
 * it loses that pod ("lost connection to pod", since kubernetes/kubernetes#103526); it is restarted (backoff 0.5 s
 * doubling to 5 s, reset after a kubectl stayed up 60 s) until {@link PortForward.stop}. One that reports
 * "an error occurred forwarding" {@link PORT_FORWARD_ERRORS} times within 30 s is replaced too (one such line is a
 * single failed stream, e.g. a refused connection while Temporal starts). A connection that arrives while no kubectl
 * listens is closed at once: the submitter retries (runtime/temporal/cli.ts), and a dropped connection is never a
 * failed run. What it does not survive: a Temporal pod REPLACED mid-run (its history is on an emptyDir,
 * components/k8s/manifests/temporal.ts), which loses the workflow whatever the transport.
 */
class PortForward {
  /**
   * @param {{ kubectl: string, kubeconfig: string, namespace: string, service: string, port: number, note: (line: string) => void, readyMs?: number }} o
   *   `kubectl` the binary, `kubeconfig` a file, `port` the Service's, `readyMs` the first process's budget
   *   (@default {@link PORT_FORWARD_READY_MS})
   */
  constructor(o) {
    this.o = o;
    /** @type {number | undefined} the step's own loopback port, once {@link start} resolved */
    this.localPort = undefined;
    /** @type {number | undefined} the running kubectl's port, while one listens */
    this.kubectlPort = undefined;
    /** kubectl processes started after the first listened (each end of a listening one is one restart). */
    this.restarts = 0;
    /** Consecutive restarts since a kubectl last stayed up {@link PORT_FORWARD_STABLE_MS} (the backoff's exponent). */
    this.failures = 0;
    this.stopping = false;
    /** @type {import("node:child_process").ChildProcess | undefined} */
    this.child = undefined;
    /** @type {Promise<void>} resolves when the current kubectl exited */
    this.exited = Promise.resolve();
    /** @type {import("node:net").Server | undefined} */
    this.proxy = undefined;
    /** @type {Set<import("node:net").Socket>} */
    this.sockets = new Set();
  }

  /** `service/SVC in NS`, for notes. */
  target() {
    return `service/${this.o.service} in ${this.o.namespace}`;
  }

  /**
   * Starts one kubectl on a port it picks; resolves with that port once it prints `Forwarding from
   * 127.0.0.1:<port>`, rejects when it exits first, or does not listen within `attemptMs` (then it is killed).
   *
   * @param {number} attemptMs
   * @returns {Promise<number>}
   */
  spawnOnce(attemptMs) {
    const o = this.o;
    const child = spawn(o.kubectl, ["--kubeconfig", o.kubeconfig, "port-forward", "--address", "127.0.0.1", "--namespace", o.namespace, `service/${o.service}`, `:${o.port}`], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    /** @type {string[]} this process's stderr lines */
    const stderr = [];
    let resolveExit = () => {};
    this.exited = new Promise((r) => (resolveExit = r));
    const startedAt = Date.now();
    return new Promise((resolve, reject) => {
      let listening = false;
      let out = "";
      /** @type {number[]} times of "an error occurred forwarding" lines */
      let errors = [];
      const timer = setTimeout(() => {
        if (listening) return;
        stderr.push(`did not listen within ${attemptMs} ms`);
        child.kill("SIGKILL");
      }, attemptMs);
      child.stdout.setEncoding("utf8").on("data", (d) => {
        if (listening) return;
        out += d;
        const m = /Forwarding from 127\.0\.0\.1:(\d+) ->/.exec(out);
        if (m !== null) {
          listening = true;
          clearTimeout(timer);
          out = "";
          this.kubectlPort = Number(m[1]);
          resolve(this.kubectlPort);
        }
      });
      let pending = "";
      child.stderr.setEncoding("utf8").on("data", (d) => {
        const lines = (pending + d).split("\n");
        pending = lines.pop() ?? "";
        for (const line of lines.filter((l) => l.trim() !== "")) {
          stderr.push(line);
          if (stderr.length > 20) stderr.shift();
          if (!listening || !/an error occurred forwarding/.test(line)) continue;
          const now = Date.now();
          errors = [...errors.filter((t) => now - t < PORT_FORWARD_ERROR_WINDOW_MS), now];
          // A forwarder whose streams keep failing: replace it (a new one resolves the Service again).
          if (errors.length >= PORT_FORWARD_ERRORS && child.exitCode === null) child.kill("SIGTERM");
        }
      });
      child.on("error", (error) => {
        clearTimeout(timer);
        resolveExit();
        reject(new StepError(`kubectl port-forward to ${this.target()} did not start: ${error.message}`));
      });
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        if (pending.trim() !== "") stderr.push(pending);
        if (this.child === child) this.kubectlPort = undefined;
        resolveExit();
        const why = stderr.at(-1) ?? `exited with ${signal ?? `status ${code}`}`;
        if (!listening) reject(new StepError(`kubectl port-forward to ${this.target()} did not listen: ${why}`));
        else if (!this.stopping) {
          if (Date.now() - startedAt >= PORT_FORWARD_STABLE_MS) this.failures = 0;
          this.restart(why);
        }
      });
    });
  }

  /** The step's loopback listener: each connection piped to the running kubectl, or closed when none listens. */
  listen() {
    return new Promise((resolve, reject) => {
      const server = net.createServer((socket) => {
        const port = this.kubectlPort;
        if (port === undefined || this.stopping) {
          socket.destroy();
          return;
        }
        const upstream = net.connect(port, "127.0.0.1");
        this.sockets.add(socket);
        socket.on("close", () => this.sockets.delete(socket));
        socket.on("error", () => upstream.destroy());
        upstream.on("error", () => socket.destroy());
        socket.pipe(upstream).pipe(socket);
      });
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        this.proxy = server;
        resolve(/** @type {import("node:net").AddressInfo} */ (server.address()).port);
      });
    });
  }

  /**
   * The listener, then the first kubectl: retried (1 s apart) until one listens or the ready budget passed.
   *
   * @returns {Promise<number>} the step's loopback port ({@link localPort})
   * @throws {StepError} naming the target and kubectl's last stderr line, or that the step was stopped
   */
  async start() {
    const deadline = Date.now() + (this.o.readyMs ?? PORT_FORWARD_READY_MS);
    this.localPort = await this.listen();
    for (;;) {
      if (this.stopping) throw new StepError(`kubectl port-forward to ${this.target()} stopped before it listened`);
      try {
        await this.spawnOnce(Math.max(1_000, Math.min(PORT_FORWARD_ATTEMPT_MS, deadline - Date.now())));
        return this.localPort;
      } catch (error) {
        if (Date.now() >= deadline || this.stopping) throw error;
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  }

  /** @param {string} why - the ended process's last stderr line */
  restart(why) {
    this.restarts += 1;
    const delay = Math.min(PORT_FORWARD_BACKOFF_MS[0] * 2 ** Math.min(this.failures, 10), PORT_FORWARD_BACKOFF_MS[1]);
    this.failures += 1;
    this.o.note(`port-forward to ${this.target()} ended (${why}); restarting it behind 127.0.0.1:${this.localPort} (restart ${this.restarts}, in ${delay} ms)`);
    setTimeout(() => {
      if (this.stopping) return;
      this.spawnOnce(PORT_FORWARD_ATTEMPT_MS).catch((error) => {
        if (!this.stopping) this.restart(/** @type {Error} */ (error).message);
      });
    }, delay).unref();
  }

  /** Stops the listener, the current kubectl (SIGKILL after 5 s) and every restart; resolves once kubectl exited. */
  async stop() {
    this.stopping = true;
    this.proxy?.close();
    for (const socket of this.sockets) socket.destroy();
    const child = this.child;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const escalate = setTimeout(() => child.kill("SIGKILL"), PORT_FORWARD_KILL_MS);
      await this.exited;
      clearTimeout(escalate);
    }
  }

  /** Synchronous last resort for a step that exits without {@link stop} (an uncaught error): SIGKILL kubectl. */
  kill() {
    this.stopping = true;
    if (this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

/**
 * Calls `fn` with Temporal's frontend address as this machine reaches it: COHORT_TEMPORAL_ADDRESS, or, with
 * COHORT_TEMPORAL_PORT_FORWARD, `127.0.0.1:<port>` of a supervised {@link PortForward} (the pinned kubectl,
 * COHORT_KUBECTL_*, with COHORT_KUBECONFIG), stopped when `fn` settles. Its notes (a restart) go to `note`. A signal
 * (SIGTERM, SIGINT, SIGHUP) before `fn` starts stops the forwarder and fails the step naming the signal; once `fn`
 * runs, the signal goes to whatever `fn` runs (runBundle forwards it to the runtime) and the forwarder stops after.
 *
 * @template T
 * @param {(address: string, via: string) => Promise<T>} fn - `via` is `""` or ` (through kubectl port-forward to service/S in N)`
 * @param {(line: string) => void} [note] @default a log line on stderr
 * @returns {Promise<T>}
 * @throws {StepError} a malformed COHORT_TEMPORAL_PORT_FORWARD, a port-forward that never listened, a signal before `fn`
 */
async function withTemporal(fn, note = log) {
  const forward = process.env.COHORT_TEMPORAL_PORT_FORWARD;
  if (forward === undefined || forward === "") return fn(env("COHORT_TEMPORAL_ADDRESS"), "");
  const target = parsePortForward(forward);
  const kubectl = await pinnedTool("kubectl", "COHORT_KUBECTL");
  return withKubeconfig(env("COHORT_KUBECONFIG"), async (kubeconfig) => {
    const pf = new PortForward({ kubectl, kubeconfig, ...target, note });
    /** @type {NodeJS.Signals | undefined} */
    let signalled;
    const signals = /** @type {const} */ (["SIGTERM", "SIGINT", "SIGHUP"]);
    const handlers = signals.map((s) => /** @type {const} */ ([s, () => ((signalled = s), void pf.stop())]));
    for (const [s, h] of handlers) process.on(s, h);
    const lastResort = () => pf.kill();
    process.once("exit", lastResort);
    try {
      let port;
      try {
        port = await pf.start();
      } catch (error) {
        if (signalled !== undefined) throw new StepError(`stopped by ${signalled} before the port-forward to ${pf.target()} listened`);
        throw error;
      }
      if (signalled !== undefined) throw new StepError(`stopped by ${signalled} before the port-forward to ${pf.target()} listened`);
      // From here a signal is the child's to handle (runBundle forwards it); the forwarder outlives it until fn settles.
      for (const [s, h] of handlers) process.off(s, h);
      return await fn(`127.0.0.1:${port}`, ` (through kubectl port-forward to ${pf.target()})`);
    } finally {
      for (const [s, h] of handlers) process.off(s, h);
      await pf.stop();
      process.off("exit", lastResort);
    }
  });
}

/**
 * How a person reaches Temporal when the step went through its port-forward (the step's own port is gone once it
 * ended): `--address 127.0.0.1:7233 (with kubectl port-forward -n NS service/SVC 7233:PORT running)`.
 */
function forwardedAddressHint() {
  const pf = parsePortForward(env("COHORT_TEMPORAL_PORT_FORWARD"));
  return `--address 127.0.0.1:7233 (with kubectl port-forward -n ${pf.namespace} service/${pf.service} 7233:${pf.port} running)`;
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
  // The retry notes as they come (the guard's stderr is its row in `pulumi up`): up to 120 s would pass silently.
  const printed = (/** @type {string} */ line) => process.stderr.write(`${line}\n`);
  const { open, address, via } = await withTemporal(async (address, via) => ({ open: await openRuns(address, printed), address, via }));
  if (open.length === 0) {
    log(`worker guard: no run open on task queue ${queue}; the run worker may roll`);
    return;
  }
  const at = via === "" ? `--address ${address}` : forwardedAddressHint();
  throw new StepError(
    `the run worker cannot roll while runs are open on task queue ${queue} (a rollout would hand a running activity to a pod being deleted): ` +
      `${open.join("; ")}. Let them finish (\`pulumi up\` with the unchanged program attaches to a run and waits for it), ` +
      `or cancel one: temporal workflow cancel ${at} --workflow-id ${open[0]?.split(" ")[0]}`,
  );
}

/**
 * The task queue's running workflows (`cohort open-runs`, retrying an unreachable Temporal for 120 s): one
 * `<workflow id> <run id> <start time>` line each.
 *
 * @param {string} address - Temporal's frontend, `HOST:PORT` ({@link withTemporal})
 * @param {(line: string) => void} [onStderrLine] - sees each stderr line of `open-runs` (its retry notes) as it comes
 * @returns {Promise<string[]>}
 * @throws {StepError} when `open-runs` fails (Temporal unreachable, bad task queue), with its last stderr line
 */
async function openRuns(address, onStderrLine) {
  const r = await runBundle(["open-runs", "--temporal-address", address, "--task-queue", env("COHORT_TASK_QUEUE"), "--wait-s", "120"], onStderrLine ? { onStderrLine } : {});
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
    fs.mkdirSync(path.dirname(file), { recursive: true });
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
 * submitter only: the workflow and the run in the worker go on. The records are kept in COHORT_ARTIFACTS_DIR.
 *
 * @param {(summary: Record<string, unknown>) => Record<string, unknown>} mapSummary - from the worker's summary to the
 *   one the stack stores (the ledger's host path, or its verified bucket copy); throws a StepError when the ledger
 *   did not reach this machine or the bucket
 */
async function runSubmit(mapSummary) {
  const hostRoot = env("COHORT_ARTIFACTS_DIR");
  const workflowId = env("COHORT_WORKFLOW_ID");
  // Read before the run, so a missing one is named at once, not after a run of an hour.
  const unsuccessfulRunFile = path.join(hostRoot, env("COHORT_UNSUCCESSFUL_RUN_FILE"));
  const lostWorkflowFile = path.join(hostRoot, env("COHORT_LOST_WORKFLOW_FILE"));
  const spec = fs.readFileSync(0, "utf8");
  const statusFd = statusPipeOpen();
  const args = (/** @type {string} */ address) => [
    "submit",
    "--temporal-address",
    address,
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
  // Through a supervised port-forward where Temporal is not published (its restarts are notes on the status pipe).
  let forwarded = false;
  const r = await withTemporal((address, via) => {
    forwarded = via !== "";
    return runBundle(args(address), { input: spec, statusFd, onStderrLine: note });
  }, note);
  // The runtime's hints name the address it was given: through the port-forward, one that is gone with this step.
  if (forwarded) r.stderr = r.stderr.map((l) => l.replace(/--address 127\.0\.0\.1:\d+/g, forwardedAddressHint()));
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

module.exports = { workerGuard, runIdentity, runSubmit, runKeep, runBundle, withTemporal, PortForward, parsePortForward, OPEN_RUNS_EXIT };

// @ts-check
/**
 * The host side of the Kubernetes-Job execution of `CohortRun` (components/run/kubernetesJob.ts) that every cluster
 * profile shares: ONE copy, required by components/kind/steps.cjs (`local`) and components/gke/steps.cjs (`gke`).
 * Plain CommonJS with Node built-ins only (the steps run without a build step).
 *
 * - {@link pinnedTool}: a binary of the tool cache (kubectl, kind), checked against its SHA-256 before every use,
 *   downloaded from its pinned URL when the toolchain did not build it.
 * - {@link jobSummary}: waits for the runtime Job to finish and takes the runtime's one-line JSON summary from its
 *   log (the `run-summary` steps; each profile then checks where the ledger went).
 * - {@link followJobProgress}: the `run-progress` follower (progress lines of the Job's log to the status pipe).
 * - {@link runStepProgram}: the entry point of a steps file (the step named on the command line, exit status, reports).
 * - the helpers they use: {@link log} (with {@link setLogPrefix}), {@link env}, {@link run}, {@link tail}, {@link withKubeconfig}, {@link sleep}, {@link StepError}.
 */
"use strict";

const { spawnSync } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

/** A refusal or failure of a step: its message is the whole report (no stack trace). */
class StepError extends Error {}

/** The runtime Job ended Failed ({@link jobSummary}): the message names its last log line; `lines` is the whole log. */
class JobFailedError extends StepError {
  /**
   * @param {string} message
   * @param {string[]} lines - the log's non-empty lines
   */
  constructor(message, lines) {
    super(message);
    this.lines = lines;
  }
}

let PREFIX = "[cohort-lab]";

/**
 * Sets the prefix of every {@link log} line (`[cohort-lab local]`, `[cohort-lab gke]`): the profile's steps file calls it once.
 *
 * @param {string} prefix
 */
function setLogPrefix(prefix) {
  PREFIX = prefix;
}

/**
 * One progress line on stderr, with the profile's prefix.
 *
 * @param {string} line
 */
function log(line) {
  process.stderr.write(`${PREFIX} ${line}\n`);
}

/**
 * @param {string} name
 * @returns {string}
 */
function env(name) {
  const value = process.env[name];
  if (value === undefined || value === "") throw new StepError(`missing environment variable ${name}`);
  return value;
}

/** @param {string} file */
function sha256File(file) {
  return crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

/**
 * Makes sure `file` holds the pinned binary: reuse when its SHA-256 matches, otherwise download from `url`
 * to a temporary file (mode 0600), verify, rename, chmod 0755.
 *
 * @param {string} label
 * @param {string} file
 * @param {string} url
 * @param {string} sha256
 */
async function ensureBinary(label, file, url, sha256) {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new StepError(`${label}: pinned SHA-256 ${JSON.stringify(sha256)} is not 64 lower-case hex digits`);
  if (fs.existsSync(file)) {
    const found = sha256File(file);
    if (found === sha256) return file;
    log(`${label}: ${file} has SHA-256 ${found}, pinned ${sha256}; downloading a fresh copy`);
  }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  log(`${label}: downloading ${url}`);
  let response;
  try {
    response = await fetch(url, { redirect: "follow", signal: AbortSignal.timeout(300_000) });
  } catch (err) {
    throw new StepError(`${label}: download of ${url} failed: ${/** @type {Error} */ (err).message}`);
  }
  if (!response.ok) throw new StepError(`${label}: download of ${url} failed: HTTP ${response.status}`);
  const bytes = Buffer.from(await response.arrayBuffer());
  const actual = crypto.createHash("sha256").update(bytes).digest("hex");
  if (actual !== sha256) throw new StepError(`${label}: SHA-256 mismatch for ${url}: pinned ${sha256}, downloaded ${actual}; refusing to use it`);
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, bytes, { mode: 0o600 });
  fs.renameSync(tmp, file);
  fs.chmodSync(file, 0o755);
  return file;
}

/**
 * A binary the toolchain built (`npm run toolchain -- local`): no download, only the SHA-256 its stamp recorded.
 *
 * @param {string} label
 * @param {string} file
 * @param {string} sha256
 */
function verifyBuilt(label, file, sha256) {
  if (!fs.existsSync(file)) throw new StepError(`${label}: ${file} is missing; run \`npm run toolchain -- local\``);
  const found = sha256File(file);
  if (found !== sha256) {
    throw new StepError(`${label}: ${file} has SHA-256 ${found}, but its toolchain stamp records ${sha256}; run \`npm run toolchain -- local\` again`);
  }
  return file;
}

/**
 * A pinned binary: built by the toolchain when `<prefix>_URL` is empty (verified against the stamp's SHA-256 in
 * `<prefix>_SHA256`), otherwise the pinned official download (`<prefix>_URL`, checked against `<prefix>_SHA256`) into
 * `<prefix>_BIN`. The environment comes from components/kind/KindCluster.ts `localTools`.
 *
 * @param {string} label - for messages, e.g. `kubectl`
 * @param {string} prefix - e.g. `COHORT_KUBECTL`
 * @returns {Promise<string>} the binary's path
 * @throws {StepError} a missing or mismatching binary, a failed download
 */
async function pinnedTool(label, prefix) {
  const url = process.env[`${prefix}_URL`] ?? "";
  return url === "" ? verifyBuilt(label, env(`${prefix}_BIN`), env(`${prefix}_SHA256`)) : ensureBinary(label, env(`${prefix}_BIN`), url, env(`${prefix}_SHA256`));
}

/**
 * Runs a program to completion.
 *
 * @param {string} file
 * @param {readonly string[]} args
 * @param {{ input?: string, passStderr?: boolean, env?: NodeJS.ProcessEnv }} [options]
 */
function run(file, args, options = {}) {
  const result = spawnSync(file, args, {
    input: options.input,
    encoding: "utf8",
    env: options.env ?? process.env,
    maxBuffer: 256 * 1024 * 1024,
    stdio: ["pipe", "pipe", options.passStderr ? "inherit" : "pipe"],
  });
  if (result.error !== undefined) throw new StepError(`${path.basename(file)} could not start: ${result.error.message}`);
  return { status: result.status ?? 1, stdout: result.stdout ?? "", stderr: result.stderr ?? "" };
}

/** @param {string} text */
function tail(text, lines = 15) {
  return text.trim().split("\n").slice(-lines).join("\n");
}

/**
 * Writes the kubeconfig to a private temporary file (mode 0600, in a fresh directory) and calls `fn` with its path;
 * the file lives until `fn` returns or, for a promise, settles.
 *
 * @template T
 * @param {string} kubeconfig
 * @param {(file: string) => T} fn
 * @returns {T}
 */
function withKubeconfig(kubeconfig, fn) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-lab-kube-"));
  const file = path.join(dir, "config");
  const cleanup = () => fs.rmSync(dir, { recursive: true, force: true });
  let result;
  try {
    fs.writeFileSync(file, kubeconfig, { mode: 0o600 });
    result = fn(file);
  } catch (error) {
    cleanup();
    throw error;
  }
  if (result instanceof Promise) return /** @type {T} */ (/** @type {unknown} */ (result.finally(cleanup)));
  cleanup();
  return result;
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Waits until the runtime Job is Complete or Failed, then takes the runtime's JSON summary line (the last line of
 * the runtime container's log that is a JSON object with a string `runId`) from its log.
 *
 * Environment: COHORT_KUBECONFIG, COHORT_NAMESPACE, COHORT_JOB, COHORT_CONTAINER, COHORT_WAIT_MS (how long to wait, ms).
 *
 * @param {string} kubectl - the kubectl binary
 * @returns {Promise<{ summary: any, lines: string[] }>} the parsed summary line (fields unchecked: the Pulumi side
 *   parses it with the runtime's schema) and the log's non-empty lines
 * @throws {StepError} the Job unreadable or not finished in time, or no summary line in the log; {@link JobFailedError}
 *   `the cohort runtime Job <ns>/<job> failed: <its last log line>`
 */
async function jobSummary(kubectl) {
  const ns = env("COHORT_NAMESPACE");
  const job = env("COHORT_JOB");
  const container = env("COHORT_CONTAINER");
  const deadline = Date.now() + Number(env("COHORT_WAIT_MS"));
  return withKubeconfig(env("COHORT_KUBECONFIG"), async (file) => {
    const kubectlArgs = ["--kubeconfig", file, "--namespace", ns, "--request-timeout=20s"];
    /** @type {string} */
    let state;
    for (;;) {
      const r = run(kubectl, [...kubectlArgs, "get", "job", job, "-o", "json"]);
      if (r.status !== 0) throw new StepError(`kubectl get job ${ns}/${job} failed: ${tail(r.stderr, 3)}`);
      const conditions = JSON.parse(r.stdout).status?.conditions ?? [];
      const done = conditions.find((/** @type {any} */ c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True");
      if (done !== undefined) {
        state = done.type;
        break;
      }
      if (Date.now() > deadline) throw new StepError(`Job ${ns}/${job} did not finish in time`);
      await sleep(1000);
    }
    const logs = run(kubectl, [...kubectlArgs, "logs", `job/${job}`, "-c", container]);
    if (logs.status !== 0) throw new StepError(`kubectl logs job/${job} failed: ${tail(logs.stderr, 3)}`);
    const lines = logs.stdout.split("\n").filter((line) => line.trim() !== "");
    if (state === "Failed") {
      throw new JobFailedError(`the cohort runtime Job ${ns}/${job} failed: ${lines.at(-1) ?? "no output"}`, lines);
    }
    /** @type {any} */
    let summary;
    for (const line of [...lines].reverse()) {
      try {
        const value = JSON.parse(line);
        if (value !== null && typeof value === "object" && typeof value.runId === "string") {
          summary = value;
          break;
        }
      } catch {
        // progress line
      }
    }
    if (summary === undefined) throw new StepError(`the cohort runtime Job ${ns}/${job} printed no JSON summary line`);
    return { summary, lines };
  });
}

/**
 * Whether a line of the runtime's stderr (what the Job's log holds, stdout and stderr interleaved) is one of its
 * progress lines (runtime/cli.ts `ProgressReporter`): `<phase>: started S/N ready R/N…`, `failed: <member>: …`,
 * or a note `cohort: SIGTERM: …`. Not the JSON summary, not the closing `cohort: run … succeeded` line, not the
 * member output the runtime quotes on a failure (`  | …`), not anything else the runtime or Node prints.
 *
 * @param {string} line
 */
function isProgressLine(line) {
  return /^(admission|startup|hold|teardown|done): started \d+\/\d+ ready \d+\/\d+/.test(line) || /^failed: [^\s:]+: /.test(line) || /^cohort: SIG[A-Z]+(:| again)/.test(line);
}

/**
 * Splits a stream of text into progress lines: `push(chunk)` returns the complete progress lines it finished.
 *
 * @returns {{ push: (chunk: string) => string[], end: () => string[] }}
 */
function progressFilter() {
  let pending = "";
  /** @param {string[]} lines */
  const keep = (lines) => lines.map((l) => l.replace(/\r$/, "")).filter(isProgressLine);
  return {
    push(chunk) {
      const parts = (pending + chunk).split("\n");
      pending = parts.pop() ?? "";
      return keep(parts);
    },
    end() {
      const rest = pending;
      pending = "";
      return rest === "" ? [] : keep([rest]);
    },
  };
}

/** Grace after the Job finished for the log stream to deliver its last lines (ms). */
const FOLLOW_GRACE_MS = 2000;

/**
 * The command provider's status pipe: the descriptor COHORT_STATUS_FD names (an integer >= 3) when it is a pipe or
 * socket the provider opened, not a descriptor Node opened for itself in its place (the upstream provider passes
 * none, and Node's epoll instance then takes the lowest free number).
 *
 * @returns {number | undefined}
 */
function statusPipeFd() {
  const fd = Number(process.env.COHORT_STATUS_FD ?? "");
  if (!Number.isInteger(fd) || fd < 3) return undefined;
  try {
    const st = fs.fstatSync(fd);
    return st.isFIFO() || st.isSocket() ? fd : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The `run-progress` step of every cluster profile: follows the runtime container's log while the Job runs and writes every progress line to
 * fd 3 (COHORT_STATUS_FD, the substitute command provider's status pipe: ephemeral info on the row, stored
 * nowhere). Returns when the Job is Complete/Failed (after at most {@link FOLLOW_GRACE_MS} for the stream to
 * drain), when the stream ended with the container, or at COHORT_WAIT_MS. `kubectl logs -f` fails until the
 * runtime container started (no pod yet, init container running), or ends at once with no line while the Job runs:
 * it is retried every second; after lines
 * arrived, a retry asks for new lines only (`--tail=0`). Never fails `pulumi up`: a missing status pipe, tool,
 * or API (the Job unreadable for 30 s, COHORT_FOLLOW_GIVE_UP_MS) is one note on stderr and exit 0. Stdout stays
 * empty.
 *
 * Environment: COHORT_KUBECONFIG, COHORT_NAMESPACE, COHORT_JOB, COHORT_CONTAINER, COHORT_WAIT_MS, COHORT_STATUS_FD.
 *
 * @param {() => Promise<string>} resolveKubectl - the profile's kubectl (a failure is one note, exit 0)
 * @returns {Promise<void>}
 */
async function followJobProgress(resolveKubectl) {
  const { spawn } = require("node:child_process");
  const fd = statusPipeFd();
  if (fd === undefined) {
    log("no status pipe (COHORT_STATUS_FD): the runtime's progress is in the Job's log only");
    return;
  }
  let kubectl;
  let ns, job, container, waitMs, kubeconfig;
  try {
    kubectl = await resolveKubectl();
    ns = env("COHORT_NAMESPACE");
    job = env("COHORT_JOB");
    container = env("COHORT_CONTAINER");
    waitMs = Number(env("COHORT_WAIT_MS"));
    kubeconfig = env("COHORT_KUBECONFIG");
  } catch (err) {
    log(`progress not shown: ${err instanceof Error ? err.message : String(err)}`);
    return;
  }
  const deadline = Date.now() + waitMs;
  // The Job cannot be read for this long (API gone, Job never created): give up rather than hold `pulumi up`.
  const giveUpMs = Number(process.env.COHORT_FOLLOW_GIVE_UP_MS || 30_000);
  let broken = false;
  /** @type {import("node:child_process").ChildProcess | undefined} */
  let follower;
  /** @param {string} line */
  const emit = (line) => {
    if (broken) return;
    try {
      fs.writeSync(fd, `${line}\n`);
    } catch {
      // The reader went away (`pulumi up` interrupted): nobody to show progress to, stop following.
      broken = true;
      follower?.kill("SIGTERM");
    }
  };
  await withKubeconfig(kubeconfig, async (file) => {
    const base = ["--kubeconfig", file, "--namespace", ns];
    /** @type {string | undefined} */
    let finished;
    let lines = 0;
    let lastError = "";
    let noted = false;
    // The Job's state, every 2 s: the stream can outlive the Job (a pod the API never reports terminated).
    const watchJob = async () => {
      let lastSeen = Date.now();
      while (finished === undefined && Date.now() < deadline && !broken) {
        const r = await runAsync(kubectl, [...base, "--request-timeout=20s", "get", "job", job, "-o", "json"]);
        if (r.status !== 0 && Date.now() - lastSeen > giveUpMs) {
          finished = "unreachable";
          log(`progress not shown: kubectl get job ${ns}/${job} failed for ${Math.round(giveUpMs / 1000)} s: ${tail(r.stderr, 1)}`);
          noted = true;
          break;
        }
        if (r.status === 0) {
          lastSeen = Date.now();
          try {
            const conditions = JSON.parse(r.stdout).status?.conditions ?? [];
            const done = conditions.find((/** @type {any} */ c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True");
            if (done !== undefined) finished = done.type;
          } catch {
            // keep polling
          }
        }
        if (finished === undefined) await sleep(2000);
      }
      // Job finished (or the deadline passed): the stream gets a moment to deliver its last lines, then ends.
      finished ??= "deadline";
      if (follower !== undefined) {
        const child = follower;
        setTimeout(() => child.kill("SIGTERM"), FOLLOW_GRACE_MS).unref();
      }
    };
    const watching = watchJob();
    while (finished === undefined && Date.now() < deadline && !broken) {
      const args = [...base, "logs", "--follow", `job/${job}`, "-c", container, "--pod-running-timeout=5s", ...(lines > 0 ? ["--tail=0"] : [])];
      const child = spawn(kubectl, args, { stdio: ["ignore", "pipe", "pipe"] });
      follower = child;
      const filter = progressFilter();
      let stderr = "";
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (/** @type {string} */ chunk) => {
        for (const line of filter.push(chunk)) {
          lines += 1;
          emit(line);
        }
      });
      child.stderr.setEncoding("utf8");
      child.stderr.on("data", (/** @type {string} */ chunk) => (stderr += chunk));
      const code = await new Promise((resolve) => {
        child.on("error", (err) => resolve(`could not start: ${err.message}`));
        child.on("close", (status) => resolve(status));
      });
      for (const line of filter.end()) emit(line);
      follower = undefined;
      if (code === 0 && (lines > 0 || finished !== undefined)) {
        lastError = "";
        break; // the container terminated: the stream ended
      }
      // An empty stream that ended while the Job runs: kubectl answered before the runtime container had started
      // (seen on kind: exit 0, no line, with the pod in its init container); follow again.
      if (typeof code === "string") {
        lastError = code;
        break;
      }
      lastError = code === 0 ? "the log stream ended before the runtime container wrote a line" : tail(stderr, 1);
      if (finished === undefined) await sleep(1000);
    }
    finished ??= "";
    await watching;
    if (lines === 0 && lastError !== "" && !noted) log(`no progress from ${ns}/job/${job}: ${lastError}`);
  });
}

/**
 * Runs a program without blocking the event loop (the log stream keeps flowing).
 *
 * @param {string} file
 * @param {readonly string[]} args
 * @returns {Promise<{ status: number, stdout: string, stderr: string }>}
 */
function runAsync(file, args) {
  const { execFile } = require("node:child_process");
  return new Promise((resolve) => {
    execFile(file, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const status = err === null ? 0 : typeof (/** @type {any} */ (err).code) === "number" ? /** @type {any} */ (err).code : 1;
      resolve({ status, stdout: stdout ?? "", stderr: stderr ?? "" });
    });
  });
}

/**
 * Runs the step of `steps` named by `process.argv[2]` and exits: the entry point of every profile's steps file.
 *
 * - an unknown step name (or none): the usage line on stderr, exit status 2;
 * - a step that fails: its report on stderr, exit status 1: a {@link StepError}'s message (a refusal is the whole
 *   report), any other error's stack; with `prefixFailures` the report carries the {@link log} prefix;
 * - `run-progress` never fails `pulumi up`: a failure is one `progress not shown: …` note and exit status 0.
 *
 * @param {Record<string, () => unknown>} steps - step name -> step
 * @param {{ prefixFailures: boolean }} o - `false` when the steps' refusals begin with the config key they name
 */
function runStepProgram(steps, o) {
  const name = process.argv[2] ?? "";
  if (!Object.hasOwn(steps, name)) {
    process.stderr.write(`usage: steps.cjs ${Object.keys(steps).join("|")}\n`);
    process.exit(2);
  }
  Promise.resolve()
    .then(steps[name])
    .catch((error) => {
      if (name === "run-progress") {
        log(`progress not shown: ${error instanceof Error ? error.message : String(error)}`);
        process.exit(0);
      }
      const report = error instanceof StepError || !(error instanceof Error) ? String(error instanceof Error ? error.message : error) : (error.stack ?? error.message);
      process.stderr.write(o.prefixFailures ? `${PREFIX} ${report}\n` : `${report}\n`);
      process.exit(1);
    });
}

module.exports = {
  StepError,
  JobFailedError,
  setLogPrefix,
  log,
  env,
  run,
  tail,
  withKubeconfig,
  sleep,
  pinnedTool,
  jobSummary,
  followJobProgress,
  statusPipeFd,
  isProgressLine,
  progressFilter,
  runStepProgram,
};

/**
 * The activities of the `cohortRun` workflow (docs/temporal.md), run by `cohort worker`:
 *
 * - `runCohort(input)`: runs the cohort exactly as `cohort run` does, as a child process of the worker
 *   (`node <dist>/cohort.cjs run --spec - --artifacts A --run-id R --profile P --backend kubernetes
 *   --backend-config F --watch-pid <worker pid>`): the same code path, the ledger where `cohort run` puts it, and
 *   when the worker dies the run notices (`--watch-pid`) and ends `interrupted` with its members stopped and its
 *   ledger completed. It heartbeats on its own timer from its first line, every {@link HEARTBEAT_INTERVAL_MS},
 *   whatever the cohort is doing (the cohort runs in another process, so nothing it does can delay the timer).
 *   The run's progress lines (`--progress-fd 3`, a file) are read every {@link PROGRESS_POLL_MS}, and a changed
 *   last line is sent at once as the heartbeat's details ({@link RunCohortHeartbeat}), which `cohort submit`
 *   shows. A cancellation (workflow cancelled, worker shutting down) sends SIGTERM to the run, which stops its
 *   members and completes the ledger; the activity returns what the run printed.
 * - `cleanupRun({ runId, lost? })`: deletes the run's Kubernetes objects and waits until they are gone
 *   (runtime/backends/kubernetes/cleanup.ts), with the worker's backend config. With `lost` (runCohort did not
 *   return: its worker, and the run inside the worker's container, may be gone), it then completes the run's
 *   ledger if nobody did (runtime/core/ledger/seal.ts `sealLostRun`: the run's unstopped members recorded as
 *   stopped by the cleanup, `run-interrupted`, completion `interrupted`), so a lost worker never leaves a ledger
 *   without its completion where the run directory outlives the container (the `local` host mount; not an
 *   emptyDir).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ApplicationFailure, Context } from "@temporalio/activity";
import { parse as parseYaml } from "yaml";
import { cleanupKubernetesRun, type KubernetesCleanupReport } from "../backends/kubernetes/index.js";
import { sealLostRun, type SealReport } from "../core/ledger/seal.js";
import type { RunSummary } from "../core/summary.js";
import { HEARTBEAT_INTERVAL_MS, PROGRESS_POLL_MS, type CohortRunInput, type CohortRunResult, type RunCohortHeartbeat } from "./contract.js";

/** Input of `cleanupRun`. */
export interface CleanupRunInput {
  readonly runId: string;
  /** Set when `runCohort` did not return: where its ledger is (`CohortRunInput.artifacts`) and why it was lost. */
  readonly lost?: { readonly artifacts: string; readonly reason: string };
}

/** Result of `cleanupRun`: the Kubernetes cleanup, and with `lost` what became of the ledger. */
export type CleanupRunReport = KubernetesCleanupReport & { readonly ledger?: SealReport };

/** What the worker gives its activities. */
export interface WorkerActivityConfig {
  /** The runtime bundle `runCohort` runs (`dist/cohort.cjs`, next to the worker's bundle). */
  readonly runtimeBundle: string;
  /** The Node binary that runs it. @default process.execPath */
  readonly nodePath?: string;
  /** The kubernetes backend's `--backend-config` file (kubeconfig path, namespace, queue, ...). */
  readonly backendConfigFile: string;
}

/**
 * Reads a `--backend-config` mapping (YAML or JSON).
 *
 * @param file - the file's path (absolute, or relative to the working directory)
 * @returns the top-level mapping
 * @throws Error with one line, `--backend-config <file>: <reason>`, when the file cannot be read (does not exist,
 *   is a directory, ...), is not valid YAML, or is not a mapping
 */
export function readBackendConfig(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === "EISDIR" ? "is a directory" : code === "ENOENT" ? "does not exist" : code === "EACCES" ? "cannot be read (EACCES)" : (error as Error).message;
    throw new Error(`--backend-config ${file}: ${reason}`, { cause: error });
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new Error(`--backend-config ${file}: not valid YAML: ${(error as Error).message.split("\n")[0]}`, { cause: error });
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new Error(`--backend-config ${file}: expected a mapping`);
  return doc as Record<string, unknown>;
}

/** The last non-empty line of `text` parsed as a run summary, or `undefined`. */
function summaryLine(text: string): RunSummary | undefined {
  const last = text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .at(-1);
  if (last === undefined) return undefined;
  try {
    const v = JSON.parse(last) as RunSummary;
    return typeof v === "object" && v !== null && typeof v.runId === "string" && typeof v.outcome === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Follows a file another process appends lines to: {@link ProgressTail.poll} returns the last complete line
 * written since the previous call (`undefined` when none: no new complete line, or the file does not exist yet),
 * reading only the new bytes (64 KiB at a time); a line still being written is kept until its newline arrives.
 */
export class ProgressTail {
  private offset = 0;
  private pending = "";
  private readonly buf = Buffer.alloc(64 * 1024);
  constructor(private readonly file: string) {}

  poll(): string | undefined {
    let fd: number;
    try {
      fd = fs.openSync(this.file, "r");
    } catch {
      return undefined;
    }
    try {
      const buf = this.buf;
      let last: string | undefined;
      for (;;) {
        const n = fs.readSync(fd, buf, 0, buf.length, this.offset);
        if (n === 0) break;
        this.offset += n;
        const lines = (this.pending + buf.toString("utf8", 0, n)).split("\n");
        this.pending = lines.pop() ?? "";
        const complete = lines.filter((l) => l.trim() !== "").at(-1);
        if (complete !== undefined) last = complete;
      }
      return last;
    } finally {
      fs.closeSync(fd);
    }
  }
}

/**
 * The activities bound to one worker's configuration.
 *
 * @returns `{ runCohort, cleanupRun }` (register with `Worker.create({ activities })`)
 */
export function createActivities(config: WorkerActivityConfig) {
  return {
    async runCohort(input: CohortRunInput): Promise<CohortRunResult> {
      const ctx = Context.current();
      let details: RunCohortHeartbeat = { phase: "starting", runId: input.runId };
      ctx.heartbeat(details);
      const beat = setInterval(() => ctx.heartbeat(details), HEARTBEAT_INTERVAL_MS);
      let follow: NodeJS.Timeout | undefined;
      try {
        const args = [
          config.runtimeBundle,
          "run",
          "--spec",
          "-",
          "--artifacts",
          input.artifacts,
          "--run-id",
          input.runId,
          "--profile",
          input.profile ?? "sim",
          "--backend",
          "kubernetes",
          "--backend-config",
          config.backendConfigFile,
          "--watch-pid",
          String(process.pid),
          "--progress-fd",
          "3",
        ];
        // The run's output goes to files, not pipes: when the worker dies, a pipe would break under the run
        // (EPIPE on its next progress line) before it completes its ledger; a file does not.
        const outDir = fs.mkdtempSync(path.join(os.tmpdir(), `cohort-worker-${input.runId}-`));
        const outFile = path.join(outDir, "stdout");
        const errFile = path.join(outDir, "stderr");
        const progressFile = path.join(outDir, "progress");
        const out = fs.openSync(outFile, "w");
        const err = fs.openSync(errFile, "w");
        const prog = fs.openSync(progressFile, "w");
        let child: ChildProcess;
        try {
          child = spawn(config.nodePath ?? process.execPath, args, { stdio: ["pipe", out, err, prog] });
        } finally {
          fs.closeSync(out);
          fs.closeSync(err);
          fs.closeSync(prog);
        }
        details = { phase: "running", runId: input.runId };
        const tail = new ProgressTail(progressFile);
        follow = setInterval(() => {
          const line = tail.poll();
          if (line === undefined || line === details.progress) return;
          details = { phase: "running", runId: input.runId, progress: line };
          ctx.heartbeat(details);
        }, PROGRESS_POLL_MS);
        process.stderr.write(`cohort: worker: run ${input.runId} started (pid ${child.pid}); its output in ${outDir}\n`);
        child.stdin!.end(input.specText);
        const exited = new Promise<number>((resolve, reject) => {
          child.once("error", reject);
          child.once("close", (code, signal) => resolve(code ?? 128 + (signal === "SIGKILL" ? 9 : 15)));
        });
        // Cancellation (the workflow was cancelled, the heartbeat timed out, the worker shuts down): stop the run
        // the way a signal stops `cohort run`; it completes its ledger and prints its summary.
        ctx.cancelled.catch(() => {
          if (child.exitCode === null) child.kill("SIGTERM");
        });
        const exitCode = await exited;
        const summary = summaryLine(fs.readFileSync(outFile, "utf8"));
        const stderrTail = fs.readFileSync(errFile, "utf8").slice(-4000).trim();
        if (summary === undefined) {
          throw ApplicationFailure.nonRetryable(`cohort run exited ${exitCode} without a summary line; its last output (${errFile}):\n${stderrTail}`, "CohortRunNoSummary");
        }
        // The line written after the last tick (the run's `done:` line): the result carries it (CohortRunResult.progress).
        const progress = tail.poll() ?? details.progress;
        fs.rmSync(outDir, { recursive: true, force: true });
        return { summary, exitCode, ...(progress !== undefined ? { progress } : {}) };
      } finally {
        clearInterval(beat);
        if (follow !== undefined) clearInterval(follow);
      }
    },

    async cleanupRun(input: CleanupRunInput): Promise<CleanupRunReport> {
      const report = await cleanupKubernetesRun(readBackendConfig(config.backendConfigFile), input.runId);
      if (input.lost === undefined) return report;
      // After the members are reclaimed: what the sealed ledger says about them is then true.
      const ledger = await sealLostRun(path.join(input.lost.artifacts, input.runId), input.lost.reason);
      process.stderr.write(
        `cohort: worker: run ${input.runId} lost its runtime (${input.lost.reason}); ledger ${ledger.runDir}: ${ledger.state}${ledger.outcome !== null ? ` (${ledger.outcome})` : ""}${ledger.problem !== undefined ? `; it does not verify: ${ledger.problem}` : ""}\n`,
      );
      return { ...report, ledger };
    },
  };
}

/** The activity functions' type (what the workflow proxies). */
export type CohortActivities = ReturnType<typeof createActivities>;

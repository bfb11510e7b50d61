/**
 * `cohort`: the cohort runtime's command line (runtime/README.md "CLI").
 *
 *   cohort run --spec FILE|- --artifacts DIR [--backend NAME] [--profile NAME] [--run-id ID]
 *              [--backend-config FILE] [--backend-option KEY=VALUE]...
 *              [--kubeconfig FILE] [--namespace NS] [--queue LOCALQUEUE]   (kubernetes backend options)
 *              [--progress-fd N]   (progress lines to descriptor N instead of stderr)
 *   cohort ledger verify [--json] DIR|gs://… | ledger show DIR|gs://… | ledger recover DIR
 *   cohort ledger delete gs://BUCKET/PREFIX/RUN_ID   (an exported ledger's objects, completion.json first)
 *   cohort ledger delete --all gs://BUCKET[/PREFIX] | ledger list [--json] gs://BUCKET[/PREFIX]   (every object under it)
 *   cohort ledger report DIR [--out FILE|-] | ledger junit DIR [--out FILE|-]   (HTML report, JUnit XML)
 *   cohort reap DIR [--grace MS]
 *   cohort --help | cohort <command> --help | cohort help [<command>]   (texts in ./core/cli-help.ts)
 *
 * `run` prints progress on stderr (a bar on a terminal, otherwise event-driven lines such as
 * `started 12/200 ready 8/200`) and exactly ONE JSON line on stdout once a run directory exists:
 * `{"runId","outcome","size","readyCount","timeToReadyMs","ledgerPath","reportPath","firstFailure"}`, after it
 * wrote `report.html` into the run directory (on every outcome; `reportPath` is its absolute path, or `null`
 * when the report could not be written: that is noted on stderr and changes neither outcome nor exit code). On failure the
 * LAST stderr line is a one-line reason naming the member. Exit codes: 0 succeeded; 1 failed (or the
 * backend is unavailable); 2 bad usage or a refused RunSpec (`spec error: <path>: <reason>` lines);
 * 128 + signal number when interrupted (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
 */
// First import: under Node < 22, one stderr line and exit 1 (./core/require-node.ts).
import "./core/require-node";
// Next: records the descriptors open at start-up, before the runtime opens any (./core/inherited-fd.ts).
import { ENTRY_FDS, forgetEntryFd, unusableProgressFd } from "./core/inherited-fd";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { parseArgs } from "node:util";
import * as v8 from "node:v8";
import cliProgress from "cli-progress";
import { parse as parseYaml } from "yaml";
import { backendNames, createBackend } from "./backends/index";
import { readProcStat } from "./backends/process/status";
import { checkArtifactsDir, prepareRunDir } from "./core/artifacts";
import { COMMAND_HELP, OVERVIEW_HELP, shortUsage } from "./core/cli-help";
import { CohortError, SpecError } from "./core/errors";
import { LedgerWriter } from "./core/ledger/writer";
import { recoverLedger, verifyLedger, type VerifyReport } from "./core/ledger/verify";
import type { Completion } from "./core/ledger/format";
import {
  deleteAllRemote,
  deleteRemoteLedger,
  exportLedger,
  fetchLedger,
  isLedgerUri,
  listRemoteLedgers,
  parseLedgerUri,
  remoteError,
  verifyFetchedLedger,
  type LedgerStoreFactory,
  type LedgerUri,
} from "./core/ledger/remote";
import { acquireRunLock, takeoverMessage, type HeldRunLock } from "./core/run-lock";
import { isRunId } from "./core/run-id";
import { onWrapperGone, takeWrapperLink, watchWrapper } from "./core/wrapper-link";
import { showLedger } from "./core/ledger/show";
import { renderJunit } from "./core/ledger/junit";
import { renderReport } from "./core/ledger/report";
import { loadRunView, outcomeText } from "./core/ledger/view";
import { writeFileAtomic } from "./core/atomic";
import { Scheduler, type LedgerSink, type RunProgress, type RunResult } from "./core/scheduler";
import { loadRunSpec, type CompiledRunSpec } from "./core/spec";
import type { RunSummary } from "./core/summary";
import { escapeControls, wellFormed, wellFormedValue } from "./core/text";
// eslint-disable-next-line no-restricted-imports -- the package manifest (data, for the version), not code of another floor
import packageJson from "../package.json";

/** The runtime's version (package.json). */
export const COHORT_VERSION: string = packageJson.version;

/** Where the CLI writes; injectable for tests. */
export interface CliIo {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stdin: () => string;
}

const defaultIo: CliIo = {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: () => fs.readFileSync(0, "utf8"),
};

class UsageError extends Error {}

const isHelpFlag = (arg: string | undefined): boolean => arg === "--help" || arg === "-h";
const LEDGER_SUBCOMMANDS = ["verify", "show", "recover", "report", "junit", "delete", "list"];

/** The {@link COMMAND_HELP} key of a command line (`["ledger", "verify", "x"]` -> `ledger verify`), if any. */
function helpKey(argv: readonly string[]): string | undefined {
  const [command, sub] = argv;
  if (command === "ledger") return sub !== undefined && LEDGER_SUBCOMMANDS.includes(sub) ? `ledger ${sub}` : "ledger";
  return command !== undefined && Object.hasOwn(COMMAND_HELP, command) ? command : undefined;
}

const SIGNAL_NUMBERS: Readonly<Record<string, number>> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };

/**
 * Runs the CLI.
 *
 * @param argv - arguments after the program name
 * @returns the exit code
 */
export async function main(argv: readonly string[], io: CliIo = defaultIo): Promise<number> {
  const err = (line: string): void => void io.stderr.write(`${line}\n`);
  // Started by bin/cohort.cjs under an older Node: its exit (even a SIGKILL) stops this runtime (./core/wrapper-link.ts).
  const wrapper = takeWrapperLink();
  if (wrapper !== undefined) {
    forgetEntryFd(wrapper.fd);
    watchWrapper(wrapper, io.stderr);
  }
  try {
    const [command, ...rest] = argv;
    // `cohort <command> [<sub>] --help` (also `-h`), anywhere after the command words.
    const key = helpKey(argv);
    if (key !== undefined && argv.slice(key.split(" ").length).some(isHelpFlag)) {
      io.stdout.write(`${COMMAND_HELP[key]}\n`);
      return 0;
    }
    switch (command) {
      case "run":
        return await runCommand(rest, io);
      case "ledger":
        return await ledgerCommand(rest, io);
      case "reap":
        return await reapCommand(rest, io);
      case "worker":
      case "submit":
      case "open-runs":
        return await temporalCommand(command, rest, io);
      case "--version":
      case "version":
        io.stdout.write(`${COHORT_VERSION}\n`);
        return 0;
      case "--help":
      case "-h":
      case "help": {
        if (rest.length === 0) {
          io.stdout.write(`${OVERVIEW_HELP}\n`);
          return 0;
        }
        const wanted = helpKey(rest);
        if (wanted === undefined || wanted.split(" ").length !== rest.length) throw new UsageError(`help: unknown command "${rest.join(" ")}"`);
        io.stdout.write(`${COMMAND_HELP[wanted]}\n`);
        return 0;
      }
      case undefined:
        throw new UsageError("missing command");
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      err(`cohort: ${error.message}`);
      err(shortUsage(helpKey(argv)));
      return 2;
    }
    if (error instanceof SpecError) {
      for (const issue of error.issues) err(`spec error: ${issue.path === "" ? "" : `${issue.path}: `}${issue.reason}`);
      return 2;
    }
    err(`cohort: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

function parse<T extends Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string }>>(args: readonly string[], options: T, positionals: number) {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options, allowPositionals: positionals > 0, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(positionals === 0 ? `unexpected argument "${parsed.positionals[0]}"` : `expected ${positionals} argument(s), got ${parsed.positionals.length}`);
  }
  return parsed;
}

// ---- worker, submit ----

/** The Temporal bundle `cohort worker` and `cohort submit` load, next to this file (scripts/bundle.mjs). */
export const TEMPORAL_BUNDLE_FILE = "cohort-temporal.cjs";

/**
 * `cohort worker`, `cohort submit` (runtime/temporal/cli.ts, docs/temporal.md): loaded from
 * `<dir of this bundle>/cohort-temporal.cjs` at run time, never bundled here, so this file needs no node_modules.
 */
async function temporalCommand(command: string, rest: readonly string[], io: CliIo): Promise<number> {
  const file = path.join(__dirname, TEMPORAL_BUNDLE_FILE);
  if (!fs.existsSync(file)) throw new UsageError(`${command}: ${file} is missing: the Temporal commands run from dist/ (npm run build) with node_modules/@temporalio next to it`);
  // A computed path: esbuild leaves this require alone, so the Temporal SDK never enters dist/cohort.cjs.
  const load = require as (id: string) => { main(argv: readonly string[], io: CliIo & { entryFds?: ReadonlySet<number> }): Promise<number> };
  // The descriptors open at this process's start: the Temporal bundle's `--progress-fd` check needs them.
  return load(file).main([command, ...rest], { ...io, ...(ENTRY_FDS !== undefined ? { entryFds: ENTRY_FDS } : {}) });
}

// ---- run --------------------------------------------------------------------------------------

/** `<name>-<yyyymmddThhmmssZ>-<6 hex>`, e.g. `society-20261130T072301Z-3fa9c1`. */
export function newRunId(name: string, now: Date = new Date(), hex: string = randomBytes(3).toString("hex")): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}Z$/, "Z");
  return `${name}-${stamp}-${hex}`;
}

function parseBackendOptions(configFile: string | undefined, pairs: readonly string[]): Record<string, unknown> {
  let options: Record<string, unknown> = {};
  if (configFile !== undefined) {
    let doc: unknown;
    try {
      doc = parseYaml(fs.readFileSync(configFile, "utf8"));
    } catch (error) {
      throw new UsageError(`--backend-config ${configFile}: ${(error as Error).message}`);
    }
    if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new UsageError(`--backend-config ${configFile}: expected a mapping`);
    options = { ...(doc as Record<string, unknown>) };
  }
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--backend-option expects KEY=VALUE; got "${pair}"`);
    const raw = pair.slice(eq + 1);
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      value = raw;
    }
    options[pair.slice(0, eq)] = value;
  }
  return options;
}

/**
 * Keeps V8's young generation from growing (it grows to 64 MiB by default under allocation pressure), so the
 * runtime's RSS stays small (~95 instead of ~135 MiB after starting 200 members), at the price of more
 * scavenges. With `launcher: direct` the runtime forks every member itself, and fork(2) copies the page tables
 * of every resident page, so there a smaller RSS also makes each spawn cheaper (the compiled and perl launchers
 * fork from their own small processes). Figures: docs/host.md "Measured: the runtime and the process backend".
 * https://v8.dev/blog/orinoco-parallel-scavenger explains the young generation.
 */
function keepYoungGenerationSmall(): void {
  try {
    v8.setFlagsFromString("--semi-space-growth-factor=1");
  } catch {
    // an engine without the flag: only the memory footprint differs
  }
}

async function runCommand(args: readonly string[], io: CliIo): Promise<number> {
  keepYoungGenerationSmall();
  const { values } = parse(
    args,
    {
      spec: { type: "string" },
      artifacts: { type: "string" },
      backend: { type: "string" },
      profile: { type: "string" },
      "run-id": { type: "string" },
      "backend-config": { type: "string" },
      "backend-option": { type: "string", multiple: true },
      // Shorthands for the kubernetes backend's options of the same names (runtime/backends/kubernetes).
      kubeconfig: { type: "string" },
      namespace: { type: "string" },
      queue: { type: "string" },
      "progress-fd": { type: "string" },
      lock: { type: "boolean" },
      "watch-pid": { type: "string", multiple: true },
      "ledger-export": { type: "string" },
    },
    0,
  );
  const pidMax = readPidMax();
  const watchPids = (values["watch-pid"] ?? []).map((raw) => {
    const pid = /^[1-9][0-9]{0,9}$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isInteger(pid)) throw new UsageError(`run: --watch-pid expects a process id; got "${raw}"`);
    if (pid > pidMax) throw new UsageError(`run: --watch-pid ${raw} exceeds the largest process id ${pidMax} (/proc/sys/kernel/pid_max)`);
    return pid;
  });
  if (values.spec === undefined) throw new UsageError("run: --spec FILE (or - for stdin) is required");
  if (values.artifacts === undefined) throw new UsageError("run: --artifacts DIR is required");
  const backendName = values.backend ?? "process";
  if (!backendNames().includes(backendName)) throw new UsageError(`run: unknown backend "${backendName}" (known: ${backendNames().join(", ")})`);
  const backendOptions = parseBackendOptions(values["backend-config"], values["backend-option"] ?? []);
  for (const key of ["kubeconfig", "namespace", "queue"] as const) if (values[key] !== undefined) backendOptions[key] = values[key];
  // The export destination: --ledger-export, else `ledgerExport` of the --backend-config mapping (the key is the
  // runtime's, not the backend's: it is taken out before the backend sees its options).
  const configExport = backendOptions.ledgerExport;
  delete backendOptions.ledgerExport;
  if (configExport !== undefined && typeof configExport !== "string") throw new UsageError(`run: --backend-config ledgerExport expects a gs:// address string`);
  const exportTarget = values["ledger-export"] ?? configExport;
  let ledgerExport: LedgerUri | undefined;
  if (exportTarget !== undefined) {
    try {
      ledgerExport = parseLedgerUri(exportTarget);
    } catch (error) {
      throw new UsageError(`run: ${values["ledger-export"] !== undefined ? "--ledger-export" : "--backend-config ledgerExport"} ${(error as Error).message}`);
    }
  }
  const progressFd = values["progress-fd"] === undefined ? undefined : Number(values["progress-fd"]);
  if (progressFd !== undefined && (!Number.isInteger(progressFd) || progressFd < 3)) {
    throw new UsageError(`run: --progress-fd expects an open file descriptor number >= 3; got "${values["progress-fd"]}"`);
  }

  // Everything below up to the ledger is free of side effects: the spec is refused before any exists.
  let text: string;
  try {
    text = values.spec === "-" ? io.stdin() : fs.readFileSync(values.spec, "utf8");
  } catch (error) {
    throw new UsageError(`run: cannot read the spec ${values.spec === "-" ? "from stdin" : values.spec}: ${(error as Error).message}`);
  }
  const spec = loadRunSpec(text);
  const runId = values["run-id"] ?? newRunId(spec.name);
  if (!isRunId(runId)) {
    throw new UsageError(`run: --run-id must be a Kubernetes label value (letters, digits, "-", "_", ".", at most 63 characters); got "${runId}"`);
  }
  const runDir = path.resolve(values.artifacts, runId);
  if (fs.existsSync(runDir)) throw new UsageError(`run: ${runDir} already exists; choose another --run-id`);

  // --lock: one live run per artifact root; a dead holder's leftovers are reaped first (runtime/core/run-lock.ts).
  // The root is checked first, so that an unusable one is refused as without --lock (not by the lock file's write).
  if (values.lock === true) checkArtifactsDir(values.artifacts, runDir);
  const lock = values.lock === true ? await takeRunLock(values.artifacts, runId, runDir, io) : null;
  try {
    return await runLocked({ values, spec, runId, runDir, backendName, backendOptions, watchPids, progressFd, ledgerExport }, io);
  } finally {
    lock?.release();
  }
}

async function takeRunLock(artifacts: string, runId: string, runDir: string, io: CliIo): Promise<HeldRunLock> {
  const held = await acquireRunLock(path.resolve(artifacts), runId, runDir, async (dir) => {
    const { reapRun } = await import("./backends/process/reap.js");
    const reaped = await reapRun(dir);
    return (reaped.runtime === null ? 0 : 1) + reaped.groups.length;
  });
  if (held.reaped !== null) io.stderr.write(`${takeoverMessage(held.path, held.reaped)}\n`);
  return held;
}

/**
 * Watches processes the run depends on (`--watch-pid`, e.g. the step script and the Pulumi provider that
 * started it): when one is gone, or its pid now names another process (its `/proc` start time changed), the run
 * is interrupted as by SIGHUP. Linux has no PR_SET_PDEATHSIG from Node, and a pipe from the provider would need
 * every provider to pass one; one `/proc/<pid>/stat` read per watched pid every {@link WATCH_INTERVAL_MS}
 * works with any parent and costs nothing measurable.
 */
const WATCH_INTERVAL_MS = 250;

function watchParents(pids: readonly number[], onGone: (pid: number) => void): () => void {
  if (pids.length === 0) return () => undefined;
  const initial = new Map(pids.map((pid) => [pid, readProcStat(pid)?.startTicks ?? null]));
  const alive = (pid: number): boolean => {
    const stat = readProcStat(pid);
    if (stat !== undefined) return stat.state !== "Z" && (initial.get(pid) === null || stat.startTicks === initial.get(pid));
    try {
      process.kill(pid, 0);
      return !fs.existsSync("/proc/self/stat");
    } catch {
      return false;
    }
  };
  for (const pid of pids) {
    if (!alive(pid)) {
      setImmediate(() => onGone(pid));
      return () => undefined;
    }
  }
  const timer = setInterval(() => {
    for (const pid of pids) {
      if (!alive(pid)) {
        clearInterval(timer);
        onGone(pid);
        return;
      }
    }
  }, WATCH_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

interface RunPlan {
  readonly values: { artifacts?: string; profile?: string };
  readonly spec: CompiledRunSpec;
  readonly runId: string;
  readonly runDir: string;
  readonly backendName: string;
  readonly backendOptions: Record<string, unknown>;
  readonly watchPids: readonly number[];
  /** `--progress-fd N`: the progress lines go to this open descriptor (>= 3) instead of stderr. */
  readonly progressFd: number | undefined;
  /** `--ledger-export gs://<bucket>[/<prefix>]`: where the finished ledger is uploaded (`<prefix>/<runId>/`). */
  readonly ledgerExport: LedgerUri | undefined;
}

async function runLocked(plan: RunPlan, io: CliIo): Promise<number> {
  const { values, spec, runId, runDir, backendName, backendOptions, watchPids, progressFd, ledgerExport } = plan;
  let scheduler: Scheduler | null = null;
  let ledgerSink: LedgerWriter | null = null;
  const backend = await createBackend(backendName, {
    runId,
    runDir,
    spec,
    events: (event) => scheduler?.events(event),
    options: backendOptions,
    // Backend records before the ledger exists are dropped (none are written before the first start).
    record: (kind, fields) => void ledgerSink?.append(kind, fields).catch(() => undefined),
  });
  await backend.available();

  // One mkdir at a time, each refusal named (not Node's recursive mkdir: it spins on /proc/1, says ENOENT for EROFS).
  prepareRunDir(values.artifacts!, runDir);
  const ledger = await LedgerWriter.open(runDir, {
    runId,
    profile: values.profile ?? "host",
    backend: backend.name,
    spec: spec.spec,
    tools: { cohort: COHORT_VERSION, node: process.version },
    createdAt: new Date().toISOString(),
    runtimePid: process.pid,
  });
  ledgerSink = ledger;
  const progress = new ProgressReporter(progressFd === undefined ? io.stderr : progressStream(progressFd, io), spec);
  // The reporter learns which member became ready or failed from the records the scheduler appends.
  const sink: LedgerSink = {
    append: (kind, fields) => {
      progress.record(kind, fields);
      return ledger.append(kind, fields);
    },
    redact: (secret) => ledger.redact(secret),
    complete: (completion) => ledger.complete(completion),
  };
  scheduler = new Scheduler({
    spec,
    runId,
    runDir,
    backend,
    ledger: sink,
    onProgress: (p) => progress.update(p),
    runStartedFields: { runtimePid: process.pid, runtimeStartTicks: readProcStat(process.pid)?.startTicks ?? null },
    completionFields: () => {
      const usage = process.resourceUsage();
      return { runtime: { maxRssKiB: usage.maxRSS, cpuUserMs: Math.round(usage.userCPUTime / 1000), cpuSystemMs: Math.round(usage.systemCPUTime / 1000) } };
    },
  });

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++;
    if (signals >= 3) {
      // Third signal: leave now. The process backend's exit handler SIGKILLs every member group.
      io.stderr.write(`cohort: ${signal} again: exiting without completing the ledger\n`);
      process.exit(128 + (SIGNAL_NUMBERS[signal] ?? 15));
    }
    progress.note(signals === 1 ? `${signal}: stopping members (send again to kill them now)` : `${signal}: killing members`);
    scheduler!.interrupt(signal);
  };
  const handled: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const signal of handled) process.on(signal, onSignal);
  const unwatch = watchParents(watchPids, (pid) => {
    progress.note(`process ${pid} (--watch-pid) is gone: stopping members`);
    signals++;
    scheduler!.interrupt("SIGHUP");
  });
  // The wrapper that started this runtime (bin/cohort.cjs) is gone: stop as a SIGTERM does, once; a stop already
  // under way goes on (its grace period is not cut short).
  const unwrap = onWrapperGone((cause) => {
    if (signals > 0) {
      progress.note(`${cause}; the stop under way goes on`);
      return;
    }
    progress.note(`${cause}: stopping members (SIGTERM)`);
    signals++;
    scheduler!.interrupt("SIGTERM");
  });
  let result: RunResult;
  try {
    result = await scheduler.run();
  } finally {
    unwrap();
    unwatch();
    for (const signal of handled) process.off(signal, onSignal);
    progress.stop();
  }
  const reportPath = await writeRunReport(runDir, io);
  const exported = ledgerExport === undefined ? undefined : await exportRunLedger(runDir, runId, ledgerExport, io);
  return report(result, spec, runDir, reportPath, io, exported);
}

/** Opens a `gs://` bucket: runtime/gcs/ and `@google-cloud/storage` are loaded here, on first use only. */
const openGcsStore: LedgerStoreFactory = async (bucket) => (await import("./gcs/index.js")).createGcsLedgerStore(bucket);

/**
 * `--ledger-export`: uploads the finished ledger (./core/ledger/remote.ts, completion.json last). A failure is one
 * `cohort: ledger export failed: <reason>` line on stderr; it does not change the outcome, but a succeeded run then
 * exits 1 (the profile that asked for the export cannot read its result back).
 *
 * @returns the run's `gs://` address, or `null` when the export failed
 */
async function exportRunLedger(runDir: string, runId: string, destination: LedgerUri, io: CliIo): Promise<string | null> {
  try {
    const done = await exportLedger(runDir, runId, destination, await openGcsStore(destination.bucket));
    io.stderr.write(`cohort: ledger exported to ${done.uri}/ (${done.objects.length} objects, ${done.bytes} bytes, completion.json last)\n`);
    return done.uri;
  } catch (error) {
    io.stderr.write(`cohort: ledger export failed: ${wellFormed(error instanceof Error ? error.message : String(error))}\n`);
    return null;
  }
}

/** The file name of the HTML report `cohort run` writes into the run directory. */
export const RUN_REPORT_FILE = "report.html";

/**
 * Writes `<runDir>/report.html` (./core/ledger/report.ts) once the run's completion is written, on every
 * outcome. A failure (the ledger cannot be read, a full disk) is one `cohort: report not written: <reason>`
 * line on stderr and never changes the run's outcome or exit code.
 *
 * @param runDir - absolute path of the run directory
 * @returns the report's absolute path, or `null` when it was not written
 */
async function writeRunReport(runDir: string, io: CliIo): Promise<string | null> {
  const file = path.join(runDir, RUN_REPORT_FILE);
  try {
    await writeFileAtomic(file, renderReport(await loadRunView(runDir)));
    return file;
  } catch (error) {
    io.stderr.write(`cohort: report not written: ${wellFormed(error instanceof Error ? error.message : String(error))}\n`);
    return null;
  }
}

function report(result: RunResult, spec: CompiledRunSpec, runDir: string, reportPath: string | null, io: CliIo, exported?: string | null): number {
  const summary: RunSummary = {
    runId: result.runId,
    outcome: result.outcome,
    size: spec.size,
    readyCount: result.readyCount,
    timeToReadyMs: result.timeToReadyMs,
    ledgerPath: runDir,
    reportPath,
    firstFailure: result.firstFailure,
    ...(typeof exported === "string" ? { ledgerUri: exported } : {}),
  };
  // wellFormedValue: a lone surrogate (half of a character cut upstream) is written as U+FFFD, never as `\udXXX`.
  io.stdout.write(`${JSON.stringify(wellFormedValue(summary))}\n`);
  const lines: string[] = [];
  if (result.ledgerError !== null) lines.push(`cohort: ledger: ${result.ledgerError}`);
  if (result.outcome === "succeeded") {
    lines.push(`cohort: run ${result.runId} succeeded: ${result.readyCount}/${spec.size} ready in ${result.timeToReadyMs}ms; ledger ${runDir}`);
  } else if (result.outcome === "interrupted") {
    lines.push(`cohort: run ${result.runId} interrupted by ${result.interruptedBy}; ${result.readyCount}/${spec.size} were ready; ledger ${runDir}`);
  } else {
    const [first, ...tail] = (result.firstFailure?.reason ?? "unknown failure").split("\n");
    if (tail.length > 0) {
      lines.push(`cohort: last output of ${result.firstFailure?.member ?? "the run"}:`);
      for (const line of tail) lines.push(`  | ${line}`);
    }
    lines.push(`cohort: run ${result.runId} failed: ${first}`);
  }
  // escapeControls: the quoted output tail holds the member's raw bytes (ESC sequences, NUL, CR): `\xHH` on the terminal.
  for (const line of lines) io.stderr.write(`${escapeControls(wellFormed(line))}\n`);
  if (result.outcome === "succeeded") return result.ledgerError === null && exported !== null ? 0 : 1;
  if (result.outcome === "interrupted") return 128 + (SIGNAL_NUMBERS[result.interruptedBy ?? ""] ?? 15);
  return 1;
}

/** `/proc/sys/kernel/pid_max` (4194304, the kernel's ceiling, when it cannot be read). */
function readPidMax(): number {
  try {
    const n = Number(fs.readFileSync("/proc/sys/kernel/pid_max", "utf8").trim());
    return Number.isInteger(n) && n > 0 ? n : 4_194_304;
  } catch {
    return 4_194_304;
  }
}

/**
 * The stream of `--progress-fd N`: progress lines only (never a bar), written asynchronously; a write
 * error (the reader went away) silences it and never fails the run. A descriptor the caller did not hand
 * over (not open, or one of Node's/libuv's own: rules in ./core/inherited-fd.ts) is reported in one stderr
 * line, `cohort: --progress-fd N <reason>; progress lines are dropped`, and the run goes on without progress.
 */
function progressStream(fd: number, io: CliIo): NodeJS.WritableStream & { isTTY?: boolean } {
  const unusable = unusableProgressFd(fd);
  if (unusable !== undefined) {
    io.stderr.write(`cohort: --progress-fd ${fd} ${unusable}; progress lines are dropped\n`);
    return new Writable({ write: (_chunk, _encoding, callback) => callback() });
  }
  const stream = fs.createWriteStream("", { fd, autoClose: false });
  let broken = false;
  stream.on("error", () => (broken = true));
  const out = {
    isTTY: false,
    write: (chunk: string): boolean => (broken ? true : stream.write(chunk)),
  };
  return out as unknown as NodeJS.WritableStream & { isTTY?: boolean };
}

/**
 * Progress: a cli-progress bar on a terminal; otherwise one line per change, at most one every
 * {@link ProgressReporter.LINE_INTERVAL_MS} (a single trailing timer is armed only when a change is
 * pending: event-driven, no ticker), plus one line at each phase change and one per member failure.
 *
 * A line is `<phase>: started S/N ready R/N[ [role r/n, ...]][ stopped T/S][ (ready: a, b; waiting: c)]`: the
 * bracket lists, during start-up of a roster with several roles, the roles not all ready yet (at most
 * {@link ProgressReporter.MAX_ROLES}) with their ready/size counts; `ready:` names
 * the members that became ready since the previous line (at most {@link ProgressReporter.MAX_NAMES},
 * then `+k more`), `waiting:` the members not ready yet once at most {@link ProgressReporter.MAX_NAMES}
 * remain during start-up. A failure is `failed: <member>: <first line of its reason>`.
 */
class ProgressReporter {
  static readonly LINE_INTERVAL_MS = 500;
  static readonly MAX_NAMES = 5;
  /** Roles listed at most in the per-role part. */
  static readonly MAX_ROLES = 4;
  /** Failure lines printed at most (later failures of the same run are consequences, counted). */
  static readonly MAX_FAILURE_LINES = 3;
  /** With nothing else to say during start-up or the hold, the line is repeated this often (ms), with the time. */
  static readonly HEARTBEAT_MS = 10_000;
  private readonly bar: cliProgress.SingleBar | null;
  private readonly size: number;
  /** Every member id in spec order: the waiting list is those not in {@link ready}. */
  private readonly members: readonly string[];
  /** Role of each member, and each role's size and ready count (spec order), for the per-role part. */
  private readonly roleOf = new Map<string, string>();
  private readonly roles = new Map<string, { size: number; ready: number }>();
  private readonly ready = new Set<string>();
  /** Members with a `member-started` record: started, so not queued. */
  private readonly started = new Set<string>();
  private newlyReady: string[] = [];
  private readonly holdMs: number;
  private holdStartedAt: number | null = null;
  private startupStartedAt: number | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private failures = 0;
  private last: RunProgress | null = null;
  private lastLineAt = 0;
  private lastLine = "";
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly out: NodeJS.WritableStream & { isTTY?: boolean },
    spec: Pick<CompiledRunSpec, "size" | "roles"> & Partial<Pick<CompiledRunSpec, "holdMs">>,
  ) {
    this.size = spec.size;
    this.holdMs = spec.holdMs ?? 0;
    this.members = spec.roles.flatMap((role) => role.members);
    for (const role of spec.roles) {
      this.roles.set(role.name, { size: role.members.length, ready: 0 });
      for (const m of role.members) this.roleOf.set(m, role.name);
    }
    this.bar =
      out.isTTY === true
        ? new cliProgress.SingleBar(
            { stream: out, format: "{phase} |{bar}| started {started}/{total} ready {value}/{total}", hideCursor: true, clearOnComplete: false, noTTYOutput: false },
            cliProgress.Presets.shades_classic,
          )
        : null;
    this.bar?.start(this.size, 0, { phase: "admission", started: 0 });
  }

  /** A ledger record the scheduler appended: member readiness and failures name members in the lines. */
  record(kind: string, fields: { member?: string; reason?: unknown; secondary?: unknown } | undefined): void {
    const member = fields?.member;
    if (member === undefined) return;
    if (kind === "member-started") this.started.add(member);
    else if (kind === "member-ready" && !this.ready.has(member)) {
      this.ready.add(member);
      this.newlyReady.push(member);
      const role = this.roles.get(this.roleOf.get(member) ?? "");
      if (role !== undefined) role.ready++;
    } else if (kind === "member-failed" && this.bar === null) {
      this.failures++;
      if (this.failures <= ProgressReporter.MAX_FAILURE_LINES) {
        const reason = typeof fields?.reason === "string" ? wellFormed(fields.reason.split("\n")[0]!) : "failed";
        this.out.write(`failed: ${member}: ${reason}\n`);
      }
    }
  }

  update(progress: RunProgress): void {
    const phaseChanged = this.last?.phase !== progress.phase;
    this.last = progress;
    if (phaseChanged && progress.phase === "startup") this.startupStartedAt = Date.now();
    if (phaseChanged && progress.phase === "hold") this.holdStartedAt = Date.now();
    if (this.bar !== null) {
      this.bar.update(progress.ready, { phase: progress.phase, started: progress.started });
      return;
    }
    const now = Date.now();
    if (phaseChanged || now - this.lastLineAt >= ProgressReporter.LINE_INTERVAL_MS) this.line();
    else this.timer ??= setTimeout(() => this.line(), ProgressReporter.LINE_INTERVAL_MS - (now - this.lastLineAt));
  }

  /** A one-off message (e.g. a signal was received). */
  note(message: string): void {
    if (this.bar !== null) this.bar.stop();
    this.out.write(`cohort: ${message}\n`);
    if (this.bar !== null && this.last !== null) this.bar.start(this.size, this.last.ready, { phase: this.last.phase, started: this.last.started });
  }

  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.heartbeat !== null) clearTimeout(this.heartbeat);
    this.heartbeat = null;
    if (this.bar !== null) this.bar.stop();
    else if (this.last !== null) this.line();
  }

  private names(list: readonly string[]): string {
    const max = ProgressReporter.MAX_NAMES;
    return list.length <= max ? list.join(", ") : `${list.slice(0, max).join(", ")}, +${list.length - max} more`;
  }

  /**
   * Writes the current line: `<phase>: started S/N ready R/N [<role> r/n, ...] (<details>)`, details being
   * `ready: <members ready since the last line>`, during start-up `waiting: <started, not ready yet>` and
   * `queued: <not started yet>` (names once at most {@link MAX_NAMES} members are left, else a count), and
   * during the hold `<s>s of <s>s left`. A line equal to the previous one is not written. While start-up or
   * the hold goes on, it is rewritten every {@link HEARTBEAT_MS} with the time (`<s>s in start-up`), so a
   * quiet minute still shows the run is alive.
   */
  private line(heartbeat = false): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.heartbeat !== null) clearTimeout(this.heartbeat);
    this.heartbeat = null;
    const p = this.last;
    if (p === null) return;
    const now = Date.now();
    const details: string[] = [];
    if (this.newlyReady.length > 0) details.push(`ready: ${this.names(this.newlyReady)}`);
    this.newlyReady = [];
    if (p.phase === "startup" && this.ready.size < this.size) {
      const waiting = this.members.filter((m) => this.started.has(m) && !this.ready.has(m));
      const queued = this.members.filter((m) => !this.started.has(m) && !this.ready.has(m));
      const few = waiting.length + queued.length <= ProgressReporter.MAX_NAMES;
      if (waiting.length > 0) details.push(`waiting: ${this.names(waiting)}`);
      if (queued.length > 0) details.push(`queued: ${few ? this.names(queued) : queued.length}`);
      if (heartbeat && this.startupStartedAt !== null) details.push(`${Math.round((now - this.startupStartedAt) / 1000)}s in start-up`);
    }
    if (p.phase === "hold" && this.holdStartedAt !== null && this.holdMs > 0) {
      const left = Math.max(0, Math.ceil((this.holdMs - (now - this.holdStartedAt)) / 1000));
      details.push(`${left}s of ${Math.round(this.holdMs / 1000)}s left`);
    }
    // With several roles during start-up: the roles not all ready yet, e.g. `; agent 4/8, ui 0/2`.
    const pendingRoles = p.phase === "startup" && this.roles.size > 1 ? [...this.roles].filter(([, r]) => r.ready < r.size) : [];
    const roleText =
      pendingRoles.length === 0
        ? ""
        : ` [${pendingRoles
            .slice(0, ProgressReporter.MAX_ROLES)
            .map(([name, r]) => `${name} ${r.ready}/${r.size}`)
            .join(", ")}${pendingRoles.length > ProgressReporter.MAX_ROLES ? `, +${pendingRoles.length - ProgressReporter.MAX_ROLES} more` : ""}]`;
    const text =
      `${p.phase}: started ${p.started}/${p.size} ready ${p.ready}/${p.size}${roleText}` +
      `${p.phase === "teardown" || p.phase === "done" ? ` stopped ${p.stopped}/${p.started}` : ""}` +
      `${details.length > 0 ? ` (${details.join("; ")})` : ""}`;
    this.lastLineAt = now;
    if (p.phase === "startup" || p.phase === "hold") {
      this.heartbeat = setTimeout(() => this.line(true), ProgressReporter.HEARTBEAT_MS);
      this.heartbeat.unref();
    }
    if (text === this.lastLine) return;
    this.lastLine = text;
    this.out.write(`${text}\n`);
  }
}

// ---- ledger, reap -----------------------------------------------------------------------------

async function ledgerCommand(args: readonly string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined || !LEDGER_SUBCOMMANDS.includes(sub)) {
    throw new UsageError(sub === undefined ? `ledger: missing subcommand (${LEDGER_SUBCOMMANDS.join(", ")})` : `ledger: unknown subcommand "${sub}"`);
  }
  const writes = sub === "report" || sub === "junit";
  const flags: Record<string, { type: "string" | "boolean" }> = writes
    ? { out: { type: "string" } }
    : sub === "verify" || sub === "list"
      ? { json: { type: "boolean" } }
      : sub === "delete"
        ? { all: { type: "boolean" } }
        : {};
  const { positionals, values } = parse(rest, flags, 1);
  const target = positionals[0]!;
  const json = (values as { json?: boolean }).json === true;
  const all = (values as { all?: boolean }).all === true;
  if (isLedgerUri(target)) {
    if (sub === "delete") return deleteLedgerCommand(target, io, all);
    if (sub === "list") return listLedgerCommand(target, io, json);
    if (sub !== "verify" && sub !== "show")
      throw new UsageError(`ledger ${sub}: works on a local directory only; gs:// ledgers: \`cohort ledger verify|show|delete gs://<bucket>/<prefix>/<run id>\``);
    return remoteLedgerCommand(sub, target, io, json);
  }
  if (sub === "delete") throw new UsageError(`ledger delete: works on a gs:// ledger only (gs://<bucket>/<prefix>/<run id>); got ${JSON.stringify(target)}`);
  if (sub === "list") throw new UsageError(`ledger list: works on a gs:// address only (gs://<bucket>[/<prefix>]); got ${JSON.stringify(target)}`);
  const dir = target;
  try {
    switch (sub) {
      case "verify": {
        const verified = await verifyLedger(dir);
        if (json) {
          const completion = verified.complete ? await readCompletionFile(dir) : null;
          io.stdout.write(`${JSON.stringify(verifiedJson(verified, path.resolve(dir), completion))}\n`);
          return 0;
        }
        io.stdout.write(
          `ok: ${verified.runId}: ${verified.records} records, ${verified.complete ? `outcome ${verified.outcome}` : "no completion.json (crashed or still running)"}\n`,
        );
        return 0;
      }
      case "show":
        io.stdout.write(await showLedger(dir));
        return 0;
      case "recover": {
        const recovered = await recoverLedger(dir);
        io.stdout.write(recovered.recovered ? `recovered: cut a torn final line (${recovered.truncatedBytes} bytes, kept in ${recovered.movedTo})\n` : "ok: nothing to recover\n");
        return 0;
      }
      case "report":
      case "junit": {
        const out = (values as { out?: string }).out ?? path.join(dir, sub === "report" ? "report.html" : "junit.xml");
        checkOutPath(sub, out);
        const view = await loadRunView(dir);
        const text = sub === "report" ? renderReport(view) : renderJunit(view, os.hostname());
        if (out === "-") {
          io.stdout.write(text);
          return 0;
        }
        try {
          await writeFileAtomic(path.resolve(out), text);
        } catch (error) {
          const e = error as NodeJS.ErrnoException;
          // One line; writeFileAtomic has removed its temp file.
          throw new CohortError("write-failed", `cannot write ${path.resolve(out)}: ${e.code ?? e.message}`);
        }
        const status = view.verification.ok ? outcomeText(view) : `${outcomeText(view)}; the ledger does NOT verify`;
        io.stdout.write(`wrote ${path.resolve(out)} (run ${view.manifest.runId}: ${status})\n`);
        return 0;
      }
      default:
        throw new UsageError(`ledger: unknown subcommand "${sub}"`);
    }
  } catch (error) {
    if (error instanceof CohortError) {
      io.stderr.write(`cohort: ledger ${sub} failed: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

/**
 * `ledger verify|show gs://<bucket>/<prefix>/<run id>`: the three objects are downloaded into a temporary
 * directory (removed after) and checked as a local directory is, with the stricter rules of an exported ledger
 * (every object present, records.ndjson not truncated: ./core/ledger/remote.ts). Errors name the `gs://` object.
 */
async function remoteLedgerCommand(sub: "verify" | "show", uri: string, io: CliIo, json = false): Promise<number> {
  try {
    const at = parseLedgerUri(uri);
    const fetched = await fetchLedger(at, await openGcsStore(at.bucket));
    try {
      if (sub === "verify") {
        const verified = await verifyFetchedLedger(fetched);
        if (json) io.stdout.write(`${JSON.stringify(verifiedJson(verified, fetched.uri, await readCompletionFile(fetched.dir)))}\n`);
        else io.stdout.write(`ok: ${verified.runId}: ${verified.records} records, outcome ${verified.outcome} (${fetched.uri})\n`);
      } else {
        try {
          io.stdout.write(await showLedger(fetched.dir));
        } catch (error) {
          throw remoteError(error, fetched);
        }
      }
    } finally {
      fetched.remove();
    }
    return 0;
  } catch (error) {
    if (error instanceof CohortError) {
      io.stderr.write(`cohort: ledger ${sub} failed: ${error.message}\n`);
      return 1;
    }
    // The store's own errors (credentials, network): one line naming the address.
    io.stderr.write(`cohort: ledger ${sub} failed: ${uri}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

/**
 * The one JSON line of `ledger verify --json`: `{"ledger", "runId", "records", "outcome", "firstFailure",
 * "completion"}`; `ledger` is the directory (absolute) or the `gs://` address verified, `completion` the parsed
 * completion.json (`null`, with `outcome` `null`, for a local run without one: crashed or still running).
 */
export interface VerifiedLedgerJson {
  readonly ledger: string;
  readonly runId: string;
  readonly records: number;
  readonly outcome: RunSummary["outcome"] | null;
  readonly firstFailure: RunSummary["firstFailure"];
  readonly completion: Completion | null;
}

function verifiedJson(verified: VerifyReport, ledger: string, completion: Completion | null): VerifiedLedgerJson {
  return { ledger, runId: verified.runId, records: verified.records, outcome: verified.outcome, firstFailure: completion?.firstFailure ?? null, completion };
}

/** completion.json of a verified run directory (it was just checked, so it parses). */
async function readCompletionFile(dir: string): Promise<Completion> {
  return JSON.parse(await fs.promises.readFile(path.join(dir, "completion.json"), "utf8")) as Completion;
}

/**
 * `ledger delete gs://<bucket>/<prefix>/<run id>`: deletes the run's exported objects, completion.json first
 * (./core/ledger/remote.ts `deleteRemoteLedger`); objects already gone are skipped. Prints
 * `deleted N object(s) of gs://…`; a failure is one stderr line naming the object, exit 1. With `--all`
 * (`gs://<bucket>[/<prefix>]`): every object under the address, every completion.json first (`deleteAllRemote`),
 * printing `deleted N object(s) under gs://…`.
 */
async function deleteLedgerCommand(uri: string, io: CliIo, all = false): Promise<number> {
  try {
    if (all) {
      const done = await deleteAllRemote(uri, openGcsStore);
      io.stdout.write(`deleted ${done.deleted.length} object(s) under ${done.uri}\n`);
      return 0;
    }
    const done = await deleteRemoteLedger(uri, openGcsStore);
    io.stdout.write(`deleted ${done.deleted.length} object(s) of ${done.uri}\n`);
    return 0;
  } catch (error) {
    io.stderr.write(`cohort: ledger delete failed: ${error instanceof CohortError ? error.message : `${uri}: ${error instanceof Error ? error.message : String(error)}`}\n`);
    return 1;
  }
}

/**
 * `ledger list gs://<bucket>[/<prefix>] [--json]`: every object under the address (./core/ledger/remote.ts
 * `listRemoteLedgers`), one `gs://` address a line, or with --json one line `{"uri","objects","runs"}`. A listing
 * that fails (no bucket, no credentials, the store unreachable) is one stderr line, exit 1: never an empty listing.
 */
async function listLedgerCommand(uri: string, io: CliIo, json: boolean): Promise<number> {
  try {
    const listed = await listRemoteLedgers(uri, openGcsStore);
    if (json) io.stdout.write(`${JSON.stringify(listed)}\n`);
    else for (const object of listed.objects) io.stdout.write(`${object}\n`);
    return 0;
  } catch (error) {
    io.stderr.write(`cohort: ledger list failed: ${error instanceof CohortError ? error.message : `${uri}: ${error instanceof Error ? error.message : String(error)}`}\n`);
    return 1;
  }
}

/**
 * `ledger report|junit --out PATH`: `-` (stdout) or a file path. An empty path, or one that names an existing
 * directory or ends with `/`, is a usage error naming `--out` (the atomic write would otherwise put its temp file
 * beside the directory and rename it onto it).
 * @throws {UsageError}
 */
function checkOutPath(sub: string, out: string): void {
  if (out === "") throw new UsageError(`ledger ${sub}: --out expects a file path or - (stdout); got ""`);
  if (out === "-") return;
  let isDir = out.endsWith("/");
  try {
    isDir ||= fs.statSync(out).isDirectory();
  } catch {
    // not there yet: the write creates it (or says why it cannot)
  }
  if (isDir) throw new UsageError(`ledger ${sub}: --out ${out} is a directory; name a file in it, e.g. --out ${path.join(out, sub === "report" ? "report.html" : "junit.xml")}`);
}

async function reapCommand(args: readonly string[], io: CliIo): Promise<number> {
  const withArtifacts = args.includes("--artifacts");
  const { positionals, values } = parse(args, { grace: { type: "string" }, artifacts: { type: "string" } }, withArtifacts ? 0 : 1);
  const graceMs = values.grace === undefined ? undefined : Number(values.grace);
  const { reapRun, MAX_GRACE_MS } = await import("./backends/process/reap.js");
  if (graceMs !== undefined && (!Number.isInteger(graceMs) || graceMs < 0 || graceMs > MAX_GRACE_MS)) {
    throw new UsageError(`reap: --grace expects a whole number of milliseconds from 0 to ${MAX_GRACE_MS}; got "${values.grace}"`);
  }
  let runDir = positionals[0];
  if (values.artifacts !== undefined) {
    // The run the artifact root's lock names (cohort run --lock), live or not: the host profile's destroy.
    const { readRunLock, lockHolderAlive, inspectRunLock, lockIsDirectoryError, RUN_LOCK_FILE } = await import("./core/run-lock.js");
    const lockPath = path.join(path.resolve(values.artifacts), RUN_LOCK_FILE);
    const found = inspectRunLock(values.artifacts);
    if (found.kind === "none") {
      io.stdout.write(`no run holds ${lockPath}\n`);
      return 0;
    }
    if (found.kind === "directory") throw lockIsDirectoryError(lockPath);
    if (found.kind === "unreadable") {
      // No lock this code wrote (it is created with its content in one link()): nothing it names can be stopped.
      fs.rmSync(lockPath, { force: true });
      io.stdout.write(`removed ${lockPath}: it held no readable run lock\n`);
      return 0;
    }
    const { holder } = found;
    runDir = holder.runDir;
    if (!fs.existsSync(path.join(runDir, "manifest.json"))) {
      if (found.state === "alive") {
        // A run between taking the lock and writing its manifest: its pid is proven (start time), stop it.
        try {
          process.kill(holder.pid, "SIGTERM");
          io.stdout.write(`stopped runtime pid ${holder.pid} of run ${holder.runId}\n`);
        } catch {
          io.stdout.write(`nothing left running for run ${holder.runId}\n`);
        }
        return 0;
      }
      fs.rmSync(lockPath, { force: true });
      io.stdout.write(
        `nothing left running for run ${holder.runId}; removed ${lockPath} (runtime pid ${holder.pid} ${found.state === "ended" ? "had ended" : "now names another process"})\n`,
      );
      return 0;
    }
    const reaped = await reapRun(runDir, graceMs === undefined ? {} : { graceMs });
    if (!lockHolderAlive(holder) && readRunLock(values.artifacts)?.runId === holder.runId) fs.rmSync(lockPath, { force: true });
    printReaped(reaped, io);
    return 0;
  }
  const reaped = await reapRun(runDir!, graceMs === undefined ? {} : { graceMs });
  printReaped(reaped, io);
  return 0;
}

function printReaped(reaped: import("./backends/process/reap.js").ReapReport, io: CliIo): void {
  if (reaped.runtime !== null) io.stdout.write(`stopped runtime pid ${reaped.runtime} of run ${reaped.runId}\n`);
  for (const group of reaped.groups) io.stdout.write(`stopped member ${group.member} (process group ${group.pgid}, ${group.processes} process(es))\n`);
  const busy = reaped.cgroups.filter((cgroup) => cgroup.processes > 0);
  for (const cgroup of busy) io.stdout.write(`stopped member ${cgroup.member} (cgroup ${cgroup.dir}, ${cgroup.processes} process(es))\n`);
  if (reaped.runtime === null && reaped.groups.length === 0 && busy.length === 0) io.stdout.write(`nothing left running for run ${reaped.runId}\n`);
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
    // Anything still holding the event loop open past this point is a leak; do not hang on it.
    setTimeout(() => process.exit(code), 2_000).unref();
  });
}

/**
 * Helpers for the process-backend tests: run a cohort in-process with the REAL scheduler, process
 * backend and ledger writer (real child processes), and find processes a run left behind.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { cgroupHierarchies, type CgroupHierarchy, type CgroupKind } from "../../runtime/backends/process/cgroup";
import { ProcessBackend } from "../../runtime/backends/process/index";
import { groupAlive, listProcesses, readProcEnviron } from "../../runtime/backends/process/status";
import { LedgerWriter, readLedger } from "../../runtime/core/ledger";
import { Scheduler, type RunResult } from "../../runtime/core/scheduler";
import { loadRunSpec, type RunSpecInput } from "../../runtime/core/spec";

/** A node one-liner as a member command: argv for `node -e <script>`. */
export function nodeMember(script: string): string[] {
  return [process.execPath, "-e", script];
}

/** A member that listens on COHORT_PORT after `delayMs` and answers every HTTP request with 200. */
export function httpListener(delayMs = 0, extra = ""): string[] {
  return nodeMember(
    `${extra};setTimeout(()=>require("http").createServer((q,s)=>s.end("ok")).listen(+process.env.COHORT_PORT,"127.0.0.1",()=>console.log("listening")),${delayMs})`,
  );
}

/** A port nothing listens on now: the kernel's choice for 127.0.0.1:0, listened on and closed. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `cohort-${prefix}-`));
}

/**
 * Builds the runtime bundle (`dist/cohort.cjs` as `npm run build` makes it, scripts/bundle.mjs) into a temp
 * directory and returns the bundle's path. `shipped: true` copies it alone, with the member launcher beside it,
 * into a directory holding nothing else: the way the cluster profiles ship it.
 */
export async function buildBundle(options: { readonly shipped?: boolean } = {}): Promise<string> {
  const { bundle: build } = await import("../../scripts/bundle.mjs");
  const built = await build({ outfile: path.join(tempDir("bundle"), "cohort.cjs") });
  if (options.shipped !== true) return built.outfile;
  const shipped = path.join(tempDir("shipped"), "cohort.cjs");
  fs.copyFileSync(built.outfile, shipped);
  fs.copyFileSync(built.launcher.file, path.join(path.dirname(shipped), "cohort-launcher"));
  fs.chmodSync(path.join(path.dirname(shipped), "cohort-launcher"), 0o755);
  return shipped;
}

/** How a `cohort` CLI process ended, with everything it printed. */
export interface CliExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the bundle at `bundle` ({@link buildBundle}) as the `cohort` CLI with `args`, from the bundle's directory
 * and without COHORT_LAUNCHER (vitest.config.mts sets it for runtime code run from source): the bundle finds the
 * member launcher beside itself, as when shipped. `stdin` is written and closed (default: empty); `env` is
 * added to this process's environment; `onStart` gets the child as soon as it is spawned (to signal it).
 */
export function runBundle(
  bundle: string,
  args: readonly string[],
  options: { stdin?: string; env?: Record<string, string>; onStart?: (child: ChildProcess) => void } = {},
): Promise<CliExit> {
  return new Promise((resolve) => {
    const { COHORT_LAUNCHER: _fromConfig, ...inherited } = process.env;
    const env = { ...inherited, ...options.env };
    const child = spawn(process.execPath, [bundle, ...args], { cwd: path.dirname(bundle), env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.stdin.end(options.stdin ?? "");
    options.onStart?.(child);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/**
 * The cgroup hierarchy of `kind` the cgroup tests can use here, or the reason they cannot (to print when they
 * are skipped): Linux, root, the hierarchy mounted and writable (probed by creating and removing a cgroup).
 */
export function usableCgroupHierarchy(kind: CgroupKind): CgroupHierarchy | string {
  if (process.platform !== "linux") return `cgroups are Linux only (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "not root: cannot create cgroups";
  const hierarchy = cgroupHierarchies().find((h) => h.kind === kind);
  if (hierarchy === undefined) return `no writable ${kind} hierarchy is mounted`;
  const probe = path.join(hierarchy.mount, `cohort-test-probe-${process.pid}`);
  try {
    fs.mkdirSync(probe);
    fs.rmdirSync(probe);
  } catch (error) {
    return `cannot create a cgroup in ${hierarchy.mount}: ${(error as Error).message}`;
  }
  return hierarchy;
}

/** Processes on this host started with COHORT_RUN_ID=<runId> (not zombies). Linux. */
export function processesOfRun(runId: string): number[] {
  return listProcesses()
    .filter((p) => p.state !== "Z" && readProcEnviron(p.pid)?.COHORT_RUN_ID === runId)
    .map((p) => p.pid);
}

/** Whether any process of group `pgid` is alive (zombies excluded). */
export function groupExists(pgid: number): boolean {
  return groupAlive(pgid);
}

let counter = 0;

/** Runs a cohort in-process: real Scheduler + ProcessBackend + LedgerWriter. */
export async function runCohort(
  roles: RunSpecInput["roles"],
  extra: Partial<RunSpecInput> = {},
  hooks: {
    onScheduler?: (scheduler: Scheduler) => void;
    launcher?: "native" | "perl" | "direct";
    cgroup?: "auto" | "v2" | "freezer" | "off";
    mountsFile?: string;
    portOwner?: "check" | "off";
    procNetTcp?: readonly string[];
    /** Called with the run directory before the run starts. */
    onRunDir?: (runDir: string) => void;
  } = {},
): Promise<{ result: RunResult; runDir: string; runId: string; records: Awaited<ReturnType<typeof readLedger>>["records"] }> {
  const spec = loadRunSpec(JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "t", stopGracePeriod: "2s", roles, ...extra }));
  const runId = `t-20260101T000000Z-${(process.pid % 0xfff).toString(16).padStart(3, "0")}${(counter++).toString(16).padStart(3, "0")}`;
  const runDir = path.join(tempDir("run"), runId);
  const ledger = await LedgerWriter.open(runDir, {
    runId,
    profile: "test",
    backend: "process",
    spec: spec.spec,
    tools: { node: process.version },
    createdAt: new Date().toISOString(),
  });
  let scheduler: Scheduler | null = null;
  hooks.onRunDir?.(runDir);
  const backend = new ProcessBackend({
    runDir,
    events: (event) => scheduler?.events(event),
    launcher: hooks.launcher ?? "auto",
    ...(hooks.cgroup !== undefined ? { cgroup: hooks.cgroup } : {}),
    ...(hooks.mountsFile !== undefined ? { mountsFile: hooks.mountsFile } : {}),
    ...(hooks.portOwner !== undefined ? { portOwner: hooks.portOwner } : {}),
    ...(hooks.procNetTcp !== undefined ? { procNetTcp: hooks.procNetTcp } : {}),
    record: (kind, fields) => void ledger.append(kind, fields).catch(() => undefined),
  });
  await backend.available();
  scheduler = new Scheduler({ spec, runId, runDir, backend, ledger });
  hooks.onScheduler?.(scheduler);
  const result = await scheduler.run();
  const { records } = await readLedger(runDir);
  if (hooks.launcher !== undefined) {
    const stats = records.find((r) => r.kind === "backend-stats")?.stats as { launcher?: string } | undefined;
    if (stats?.launcher !== hooks.launcher) throw new Error(`expected launcher ${hooks.launcher}, the run used ${stats?.launcher}`);
  }
  return { result, runDir, runId, records };
}

/** Every regular file under `dir`, recursively. */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(full));
    else if (entry.isFile()) out.push(full);
  }
  return out;
}

/**
 * The sim supervisor: starts the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
 * kwok) as detached local processes in a state dir, adds the out-of-cluster controllers (Kueue, Agent Sandbox)
 * once their CRDs exist, reports status, and stops everything it started. Each step is gated by a real readiness
 * signal (health endpoints, the API server's /readyz, the `default` ServiceAccount, a request through Kueue's
 * webhooks), never by sleeping. A start that fails part-way stops every process it started and removes the
 * state dir, so nothing is left behind; the error carries the failing component's log tail.
 *
 * Used by `simctl` (simctl/main.ts), by the sim test harness (test/sim/harness.ts) and by the
 * `SimCluster` component through `simctl`. Linux only; Node >= 22.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { GO_RUNTIME_DEFAULTS, goRuntimeEnv, isGoGcInRange, SIM_GO_GC_DEFAULT, SIM_GO_GC_RANGE } from "../components/sim/goRuntime";
import { controlPlaneBinaries, type SimBinaries, type SimBinaryName } from "./binaries";
import { controllerSpecs, type ControllerName, type ControllerStartOptions } from "./controllers";
import { readServingCa, readTokens, writeCredentials } from "./pki";
import { assertFree, resolvePorts, type PortName, type PortRequest } from "./ports";
import { httpCheck, httpGet, waitUntil } from "./probe";
import { isRunning, logTail, rssBytes, spawnDetached, stopGroup, type SpawnedProcess } from "./procs";
import {
  apiserverArgs,
  clientNames,
  controllerManagerArgs,
  etcdArgs,
  kubeconfigYaml,
  kwokArgs,
  kwokConfig,
  schedulerArgs,
  schedulerConfig,
  simLayout,
  type ClientName,
  type ComponentName,
  type SimLayout,
} from "./render";
import { isEmptyOrAbsent, readState, withStateLock, writeState, type ProcessRecord, type SimState } from "./state";

/** Default kube context (and kubeconfig cluster/user) name. */
export const defaultContextName = "cohort-lab-sim";

/** Options of {@link startSim}. */
export interface StartSimOptions {
  /** State dir (created; must be absent, empty, or a stopped sim's state dir). */
  readonly stateDir: string;
  /** Executables. */
  readonly binaries: SimBinaries;
  /** Port choice. @default free ports picked below the kernel's ephemeral range (simctl/ports.ts resolvePorts) */
  readonly ports?: PortRequest;
  /** Simulated pod start-up: minimum delay, milliseconds. @default 0 */
  readonly podReadyDelayMs?: number;
  /** Simulated pod start-up: width of the uniform random extra, milliseconds. @default 0 */
  readonly podReadyJitterMs?: number;
  /** `GOGC` of every process ({@link SIM_GO_GC_RANGE}). @default SIM_GO_GC_DEFAULT (400) */
  readonly goGC?: number;
  /** Deadline for each component's readiness, milliseconds. @default 180000 */
  readonly readyTimeoutMs?: number;
  /** Kube context name in the kubeconfig. @default "cohort-lab-sim" */
  readonly contextName?: string;
  /** Progress lines. @default none */
  readonly log?: (line: string) => void;
  /** Keep the state dir (logs) when start fails, for diagnosis; processes are stopped either way. @default false */
  readonly keepOnFailure?: boolean;
}

/** Raised when a sim cannot be started; start has already rolled back (no process left). */
export class SimStartError extends Error {
  constructor(
    message: string,
    /** The component that failed, when one did. */
    readonly component?: string,
  ) {
    super(message);
    this.name = "SimStartError";
  }
}

/** Grace period between SIGTERM and SIGKILL when stopping a component, milliseconds. */
export const stopGraceMs = 10_000;

interface Running {
  readonly record: ProcessRecord;
  readonly proc: SpawnedProcess;
}

function deadReason(r: Running): string | undefined {
  if (!r.proc.hasExited()) return undefined;
  const tail = logTail(r.record.log, 15);
  return `exited before it was ready (log ${r.record.log}):\n${tail}`;
}

async function spawnComponent(state: SimState, l: SimLayout, component: ComponentName, binary: string, args: string[], env?: Record<string, string>): Promise<Running> {
  const log = path.join(l.logsDir, `${component}.log`);
  if (state.goGC !== undefined && !isGoGcInRange(state.goGC)) {
    throw new SimStartError(
      `${l.stateFile}: goGC must be an integer from ${SIM_GO_GC_RANGE.min} to ${SIM_GO_GC_RANGE.max} (got ${state.goGC}); ${component} not started`,
      component,
    );
  }
  // A sim started before goGC was recorded ran its processes with Go's defaults; a controller restarted in it gets
  // them too, explicitly, whatever simctl's own environment says.
  const goEnv = state.goGC !== undefined ? goRuntimeEnv(state.goGC, os.totalmem()) : GO_RUNTIME_DEFAULTS;
  const proc = await spawnDetached({ file: binary, args, logFile: log, env: { ...goEnv, ...env }, cwd: l.stateDir });
  const record: ProcessRecord = {
    component,
    pid: proc.pid,
    startTicks: proc.startTicks,
    binary,
    args,
    log,
    startedAt: new Date().toISOString(),
  };
  state.processes.push(record);
  writeState(l.stateFile, state);
  return { record, proc };
}

function markReady(state: SimState, l: SimLayout, r: Running, ms: number): void {
  const rec = state.processes.find((p) => p.pid === r.record.pid);
  if (rec !== undefined) rec.readyAfterMs = ms;
  writeState(l.stateFile, state);
}

/**
 * Stops the given processes in reverse start order (controllers first, etcd last).
 *
 * @returns one line per process saying how it ended.
 */
async function stopProcesses(records: readonly ProcessRecord[], graceMs: number): Promise<string[]> {
  const lines: string[] = [];
  for (const rec of [...records].reverse()) {
    const how = await stopGroup({ pid: rec.pid, startTicks: rec.startTicks }, graceMs);
    lines.push(`${rec.component} (pid ${rec.pid}): ${how}`);
  }
  return lines;
}

/** Writes the admin kubeconfig and one per component, with `ca`: the serving bundle the API server's readiness was verified against. */
function writeKubeconfigs(l: SimLayout, server: string, contextName: string, ca: string, tokens: Record<ClientName, string>): void {
  fs.mkdirSync(l.kubeconfigsDir, { recursive: true, mode: 0o700 });
  for (const c of clientNames) {
    const file = c === "admin" ? l.kubeconfig : path.join(l.kubeconfigsDir, `${c}.kubeconfig`);
    fs.writeFileSync(file, kubeconfigYaml(contextName, server, ca, tokens[c]), { mode: 0o600 });
  }
}

/**
 * Prepares the state dir: refuses a dir that is not ours or a sim that still runs; clears a stopped one.
 *
 * @throws SimStartError naming the dir and what to do.
 */
function claimStateDir(l: SimLayout, log: (line: string) => void): void {
  const existing = fs.existsSync(l.stateFile) ? readState(l.stateFile) : undefined;
  if (existing !== undefined) {
    const live = existing.processes.filter((p) => isRunning(p));
    if (live.length > 0) {
      throw new SimStartError(
        `a sim is already running in ${l.stateDir} (${live.map((p) => `${p.component} pid ${p.pid}`).join(", ")}); ` + `stop it first: simctl stop --state-dir ${l.stateDir}`,
      );
    }
    log(`removing the state of a stopped sim in ${l.stateDir}`);
    fs.rmSync(l.stateDir, { recursive: true, force: true });
  } else if (!isEmptyOrAbsent(l.stateDir)) {
    throw new SimStartError(`${l.stateDir} exists, is not empty and holds no sim state (${path.basename(l.stateFile)}); refusing to use it`);
  }
  fs.mkdirSync(l.logsDir, { recursive: true, mode: 0o700 });
  fs.mkdirSync(l.configDir, { recursive: true, mode: 0o700 });
}

/**
 * Starts the control plane: etcd, kube-apiserver, then kube-controller-manager, kube-scheduler and kwok in
 * parallel, then the Temporal dev server (SQLite file `<stateDir>/temporal.db`, frontend on the `temporal` port).
 * Resolves when the API server is ready, the `default` ServiceAccount exists (the controller manager works), the
 * scheduler and kwok report healthy and Temporal answers SERVING with its `default` namespace.
 *
 * @returns the state (also in `<stateDir>/sim-state.json`); the admin kubeconfig is at `state.kubeconfig`.
 * @throws SimStartError (after rolling back: every started process stopped, the state dir removed unless
 *   `keepOnFailure`) when a port is busy, a binary is missing, or a component fails or times out.
 */
export async function startSim(o: StartSimOptions): Promise<SimState> {
  return withStateLock(o.stateDir, () => startSimLocked(o));
}

async function startSimLocked(o: StartSimOptions): Promise<SimState> {
  const log = o.log ?? (() => {});
  const l = simLayout(path.resolve(o.stateDir));
  const timeoutMs = o.readyTimeoutMs ?? 180_000;
  const contextName = o.contextName ?? defaultContextName;
  const goGC = o.goGC ?? SIM_GO_GC_DEFAULT;
  if (!isGoGcInRange(goGC)) {
    throw new SimStartError(`goGC must be an integer from ${SIM_GO_GC_RANGE.min} to ${SIM_GO_GC_RANGE.max} (got ${goGC})`);
  }
  for (const name of controlPlaneBinaries) {
    try {
      fs.accessSync(o.binaries[name], fs.constants.X_OK);
    } catch {
      throw new SimStartError(`${name}: ${o.binaries[name]} is not an executable file; run \`npm run toolchain -- sim\``, name);
    }
  }
  claimStateDir(l, log);
  let state: SimState | undefined;
  try {
    const ports = await resolvePorts(o.ports ?? {});
    const server = `https://127.0.0.1:${ports.apiserver}`;
    state = {
      schema: 1,
      stateDir: l.stateDir,
      createdAt: new Date().toISOString(),
      ports,
      podReadyDelayMs: o.podReadyDelayMs ?? 0,
      podReadyJitterMs: o.podReadyJitterMs ?? 0,
      goGC,
      apiserverUrl: server,
      kubeconfig: l.kubeconfig,
      contextName,
      processes: [],
    };
    writeState(l.stateFile, state);
    const tokens = writeCredentials(l);
    const st = state;
    const t0 = Date.now();

    const etcd = await spawnComponent(st, l, "etcd", o.binaries.etcd, etcdArgs(l, ports));
    markReady(
      st,
      l,
      etcd,
      await waitUntil(httpCheck(`http://127.0.0.1:${ports.etcdClient}/health`, { expectBody: (b) => /"health":\s*"true"/.test(b) }), {
        component: "etcd",
        timeoutMs,
        dead: () => deadReason(etcd),
      }),
    );
    log(`etcd ready (${Date.now() - t0} ms)`);

    const apiserver = await spawnComponent(st, l, "kube-apiserver", o.binaries["kube-apiserver"], apiserverArgs(l, ports));
    const adminToken = tokens.admin;
    let ca: string | undefined;
    markReady(
      st,
      l,
      apiserver,
      await waitUntil(
        async () => {
          // Read on every try: the file can be seen empty or cut while kube-apiserver writes it (readServingCa).
          ca = readServingCa(l.apiserverCaFile);
          if (ca === undefined) return "serving certificate not written yet";
          return httpCheck(`${server}/readyz`, { ca, token: adminToken, expectBody: (b) => b.trim() === "ok" })();
        },
        { component: "kube-apiserver", timeoutMs, dead: () => deadReason(apiserver) },
      ),
    );
    log(`kube-apiserver ready at ${server} (${Date.now() - t0} ms)`);
    const caPem = ca as string;
    writeKubeconfigs(l, server, contextName, caPem, tokens);
    fs.writeFileSync(path.join(l.configDir, "kube-scheduler.yaml"), schedulerConfig(l), { mode: 0o600 });
    fs.writeFileSync(path.join(l.configDir, "kwok.yaml"), kwokConfig({ podReadyDelayMs: st.podReadyDelayMs, podReadyJitterMs: st.podReadyJitterMs }), { mode: 0o600 });

    const kcm = await spawnComponent(st, l, "kube-controller-manager", o.binaries["kube-controller-manager"], controllerManagerArgs(l, ports));
    const sched = await spawnComponent(st, l, "kube-scheduler", o.binaries["kube-scheduler"], schedulerArgs(l, ports));
    const kwok = await spawnComponent(st, l, "kwok", o.binaries.kwok, kwokArgs(l, ports));
    await Promise.all([
      waitUntil(
        async () => {
          const h = await httpCheck(`https://127.0.0.1:${ports.controllerManager}/healthz`, { insecure: true, expectBody: (b) => b.trim() === "ok" })();
          if (h !== true) return h;
          // The ServiceAccount admission plugin rejects pods until this exists: the real signal that the
          // controller manager's service-account controller runs.
          const sa = await httpGet(`${server}/api/v1/namespaces/default/serviceaccounts/default`, { ca: caPem, token: adminToken });
          return sa.status === 200 ? true : `ServiceAccount default/default: HTTP ${sa.status}`;
        },
        { component: "kube-controller-manager", timeoutMs, dead: () => deadReason(kcm) },
      ).then((ms) => markReady(st, l, kcm, ms)),
      waitUntil(httpCheck(`https://127.0.0.1:${ports.scheduler}/healthz`, { insecure: true, expectBody: (b) => b.trim() === "ok" }), {
        component: "kube-scheduler",
        timeoutMs,
        dead: () => deadReason(sched),
      }).then((ms) => markReady(st, l, sched, ms)),
      waitUntil(httpCheck(`http://127.0.0.1:${ports.kwok}/healthz`, {}), {
        component: "kwok",
        timeoutMs,
        dead: () => deadReason(kwok),
      }).then((ms) => markReady(st, l, kwok, ms)),
    ]);
    log(`kube-controller-manager, kube-scheduler and kwok ready (${Date.now() - t0} ms)`);
    const temporalSpec = controllerSpecs.temporal;
    const temporal = await spawnComponent(st, l, "temporal", o.binaries.temporal, temporalSpec.prepare(l, st, {}).args);
    markReady(st, l, temporal, await waitUntil(() => temporalSpec.ready(l, st, { ca: caPem, adminToken }), { component: "temporal", timeoutMs, dead: () => deadReason(temporal) }));
    log(`temporal dev server ready at 127.0.0.1:${ports.temporal} (${Date.now() - t0} ms)`);
    return st;
  } catch (err) {
    const stopped = state !== undefined ? await stopProcesses(state.processes, 3_000) : [];
    if (!o.keepOnFailure) fs.rmSync(l.stateDir, { recursive: true, force: true });
    const e = err as Error & { component?: string };
    throw new SimStartError(
      `sim start failed: ${e.message}\nrolled back: ${stopped.length > 0 ? stopped.join("; ") : "no process was started"}` +
        (o.keepOnFailure ? `; state kept in ${l.stateDir}` : "; state dir removed"),
      e.component,
    );
  }
}

/** Options of {@link startController}. */
export interface StartControllerOptions extends ControllerStartOptions {
  readonly stateDir: string;
  readonly binaries: Pick<SimBinaries, SimBinaryName>;
  /** Deadline for readiness, milliseconds. @default 180000 */
  readonly readyTimeoutMs?: number;
  readonly log?: (line: string) => void;
}

/**
 * Starts one out-of-cluster controller (Kueue or the Agent Sandbox controller) against a running sim. Its CRDs
 * (and, for Kueue, the webhook configurations and the ExternalName webhook Service) must already be applied.
 * Idempotent: a controller that already runs is left alone.
 *
 * @returns the state after the start.
 * @throws SimStartError when the sim is not running, a port is busy, or the controller fails or times out
 *   (the controller's process is stopped again; the rest of the sim is untouched).
 */
export async function startController(name: ControllerName, o: StartControllerOptions): Promise<SimState> {
  return withStateLock(o.stateDir, () => startControllerLocked(name, o));
}

async function startControllerLocked(name: ControllerName, o: StartControllerOptions): Promise<SimState> {
  const log = o.log ?? (() => {});
  const l = simLayout(path.resolve(o.stateDir));
  const state = readState(l.stateFile);
  if (state === undefined) throw new SimStartError(`no sim in ${l.stateDir} (no ${path.basename(l.stateFile)}); run simctl start first`);
  const apiserver = state.processes.find((p) => p.component === "kube-apiserver");
  if (apiserver === undefined || !isRunning(apiserver)) throw new SimStartError(`the sim in ${l.stateDir} is not running (kube-apiserver is down)`);
  const spec = controllerSpecs[name];
  const existing = state.processes.find((p) => p.component === spec.component);
  if (existing !== undefined && isRunning(existing)) {
    log(`${spec.component} already runs (pid ${existing.pid})`);
    return state;
  }
  const binary = o.binaries[spec.component as SimBinaryName];
  try {
    fs.accessSync(binary, fs.constants.X_OK);
  } catch {
    throw new SimStartError(`${spec.component}: ${binary} is not an executable file; run \`npm run toolchain -- sim\``, spec.component);
  }
  state.processes = state.processes.filter((p) => p.component !== spec.component);
  for (const portName of spec.ports) await assertFree(portName as PortName, state.ports[portName as PortName]);
  const tokens = readTokens(l);
  const ca = fs.readFileSync(l.apiserverCaFile, "utf8");
  const prepared = spec.prepare(l, state, o);
  const t0 = Date.now();
  const r = await spawnComponent(state, l, spec.component, binary, prepared.args, prepared.env);
  try {
    const ms = await waitUntil(() => spec.ready(l, state, { ca, adminToken: tokens.admin }), {
      component: spec.component,
      timeoutMs: o.readyTimeoutMs ?? 180_000,
      dead: () => deadReason(r),
    });
    markReady(state, l, r, ms);
    log(`${spec.component} ready (${Date.now() - t0} ms)`);
    return state;
  } catch (err) {
    await stopGroup({ pid: r.record.pid, startTicks: r.record.startTicks }, 3_000);
    state.processes = state.processes.filter((p) => p.pid !== r.record.pid);
    writeState(l.stateFile, state);
    throw new SimStartError(`${spec.component} failed to start: ${(err as Error).message}`, spec.component);
  }
}

/**
 * Stops one out-of-cluster controller and removes it from the state (the rest of the sim keeps running).
 * Idempotent: no state dir, or a controller that does not run, is success.
 *
 * @returns what happened, one line.
 */
export async function stopController(name: ControllerName, stateDir: string, graceMs = stopGraceMs): Promise<string> {
  return withStateLock(stateDir, () => stopControllerLocked(name, stateDir, graceMs));
}

async function stopControllerLocked(name: ControllerName, stateDir: string, graceMs: number): Promise<string> {
  const l = simLayout(path.resolve(stateDir));
  const state = readState(l.stateFile);
  const component = controllerSpecs[name].component;
  if (state === undefined) return `${component}: no sim in ${l.stateDir}`;
  const records = state.processes.filter((p) => p.component === component);
  const lines = await stopProcesses(records, graceMs);
  state.processes = state.processes.filter((p) => p.component !== component);
  writeState(l.stateFile, state);
  return lines.length > 0 ? lines.join("; ") : `${component}: not running`;
}

/** Result of {@link stopSim}. */
export interface StopResult {
  /** One line per process. */
  readonly stopped: readonly string[];
  /** Whether a state dir was removed. */
  readonly removed: boolean;
}

/**
 * Stops every process recorded in the state dir (SIGTERM to each process group, SIGKILL after `graceMs`;
 * controllers first, etcd last) and removes the state dir. Idempotent: an absent state dir is success.
 *
 * @throws Error when `stateDir` exists but holds no sim state and is not empty (refuses to delete a foreign dir).
 */
export async function stopSim(stateDir: string, graceMs = stopGraceMs): Promise<StopResult> {
  return withStateLock(stateDir, () => stopSimLocked(stateDir, graceMs));
}

async function stopSimLocked(stateDir: string, graceMs: number): Promise<StopResult> {
  const l = simLayout(path.resolve(stateDir));
  if (!fs.existsSync(l.stateDir)) return { stopped: [], removed: false };
  const state = readState(l.stateFile);
  if (state === undefined) {
    if (!isEmptyOrAbsent(l.stateDir)) throw new Error(`${l.stateDir} holds no sim state (${path.basename(l.stateFile)}); refusing to delete it`);
    fs.rmSync(l.stateDir, { recursive: true, force: true });
    return { stopped: [], removed: true };
  }
  const stopped = await stopProcesses(state.processes, graceMs);
  fs.rmSync(l.stateDir, { recursive: true, force: true });
  return { stopped, removed: true };
}

/** One process in {@link SimStatus}. */
export interface ComponentStatus {
  readonly component: ComponentName;
  readonly pid: number;
  readonly running: boolean;
  /** Resident set size in bytes, when running. */
  readonly rssBytes?: number;
  readonly log: string;
  readonly readyAfterMs?: number;
}

/** Result of {@link simStatus}. */
export interface SimStatus {
  readonly stateDir: string;
  /** `absent`: no state; `running`: every recorded process runs; `degraded`: some do not. */
  readonly phase: "absent" | "running" | "degraded";
  readonly apiserverUrl?: string;
  readonly kubeconfig?: string;
  readonly ports?: SimState["ports"];
  readonly components: readonly ComponentStatus[];
}

/** Reports what runs in a state dir (no side effects). */
export function simStatus(stateDir: string): SimStatus {
  const l = simLayout(path.resolve(stateDir));
  const state = readState(l.stateFile);
  if (state === undefined) return { stateDir: l.stateDir, phase: "absent", components: [] };
  const components = state.processes.map((p) => {
    const running = isRunning(p);
    return {
      component: p.component,
      pid: p.pid,
      running,
      rssBytes: running ? rssBytes(p.pid) : undefined,
      log: p.log,
      readyAfterMs: p.readyAfterMs,
    };
  });
  return {
    stateDir: l.stateDir,
    phase: components.every((c) => c.running) ? "running" : "degraded",
    apiserverUrl: state.apiserverUrl,
    kubeconfig: state.kubeconfig,
    ports: state.ports,
    components,
  };
}

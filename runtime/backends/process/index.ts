/**
 * The process backend: every member is a child process of the runtime, in its own process group, on
 * this machine (profile `host`). Linux and macOS.
 *
 * - `endpoints`: one free loopback port per member, reserved until the member starts (core/ports.ts).
 * - `admit`: creates every member's directory, writes its files, creates its cgroup and encodes its
 *   launcher request before the first start, so that neither file system nor cgroupfs work nor encoding
 *   is on the start-up critical path, where a wide level's starts run back to back on the event loop.
 * - `start`: resolves once the process exists. Members are started by a launcher process (./launcher.ts:
 *   off the runtime's event loop, without copying the runtime's page tables, and members die with the
 *   launcher when the runtime is SIGKILLed): the compiled one (runtime/launcher/main.go, vfork-style
 *   spawns) when found, else a small perl one when perl is available, else members are spawned directly
 *   with execa (./start.ts), one per event-loop turn. Option `launcher`: auto|native|perl|direct.
 * - Cgroups (Linux, root): each member runs in its own cgroup `<hierarchy>/cohort/<runId>/<member>`
 *   (./cgroup.ts: cgroup2 with `cgroup.kill`, else the v1 freezer), entered before its command runs, so
 *   nothing it starts escapes teardown, whatever it does to its session, group or environment. Option
 *   `cgroup`: auto|v2|freezer|off. Where none can be made, process groups only, and one `backend-warning`
 *   record says so. (With `launcher=direct` a `/bin/sh` enters the cgroup and execs the member: ./start.ts.)
 * - `stop`: SIGTERM to the group (and to the member's processes outside it, found in its cgroup), SIGKILL
 *   to everything in the cgroup after the grace period, until the group and the cgroup are empty; the
 *   cgroup is then removed (./stop.ts). Each such kill is recorded as `member-killed` (member, signal,
 *   processes, outsideGroup, via).
 * - `exec`: exec readiness probes run with the member's environment in its directory.
 * - `listenerOwner`: who listens on a member's port (./sockets.ts), so that a stranger on it does not make
 *   the member ready (runtime/core/probes.ts). The socket is the one that accepts connections to the member's
 *   address, from the compiled launcher's sock_diag exact lookup (`lookup`, O(1): runtime/launcher/listen.go),
 *   else every LISTEN socket of the port in /proc/net/tcp{,6} (a read walks the kernel's whole listening hash).
 * - `whenListening` (with the compiled launcher): the launcher's `watch` wakes a member's tcp/http probe as soon
 *   as its port listens (./launcher.ts). A member that exits with EADDRINUSE in its output, or whose
 *   port another process holds when it exits, gets an exit `cause` naming the port (and the holder).
 * - Member exits are reported through the event sink with the exit code or signal and the output tail.
 * - Last resort: when the runtime process exits for any reason Node still runs code for (normal exit,
 *   uncaught exception, `process.exit`), every member group that may still be alive gets SIGKILL
 *   synchronously, and every member cgroup is killed. A SIGKILLed runtime cannot do that; `cohort reap
 *   <runDir>` cleans up after it (process groups and the run's cgroups).
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import type { Backend, BackendContext, ListenerOwner, MemberEndpoint, MemberEventSink, MemberHandle, MemberIdentity, MemberPlan } from "../../core/backend";
import { BackendUnavailableError, MemberStartError, SpecError } from "../../core/errors";
import { PortAllocator } from "../../core/ports";
import { Launcher, encodeLaunchRequest, findNativeLauncher, launcherAvailable, type EncodedLaunchRequest, type LaunchExit, type LauncherProgram } from "./launcher";
import { OutputCapture, RING_LINES, awaitSpawn, launchMember, loadExeca, memberEnvironment, prepareMemberDir } from "./start";
import {
  CgroupWatcher,
  cgroupEmpty,
  cgroupModes,
  cgroupProcs,
  cgroupOwner,
  checkInsideCohort,
  createMemberCgroup,
  createMemberCgroupAsync,
  killCgroup,
  runCgroupTree,
  openRunCgroups,
  removeCohortDirIfEmpty,
  removeTree,
  removeTreeRetrying,
  type CgroupHierarchy,
  type CgroupKind,
  type CgroupMode,
} from "./cgroup";
import { ListenerTable, holdsSocket, listeningInodes, socketHolder } from "./sockets";
import { GroupWatcher, groupExists, listProcesses } from "./status";
import { stopRunProcesses } from "./reap";
import { KILL_WAIT_MS, stopGroup } from "./stop";

/** Options of {@link createProcessBackend}. */
export interface ProcessBackendOptions {
  /** Absolute run directory (members' directories are created under `<runDir>/members/`). */
  readonly runDir: string;
  /** Where member exits are reported. */
  readonly events: MemberEventSink;
  /** Timeout of one exec readiness probe attempt, in ms. @default 5000 */
  readonly execProbeTimeoutMs?: number;
  /**
   * How members are started: `native` (the compiled launcher, runtime/launcher/main.go: vfork-style
   * spawns from a thread pool; found through `$COHORT_LAUNCHER` or next to the bundle), `perl` (a small
   * perl launcher process forks them; ./launcher.ts explains why either launcher beats spawning from the
   * runtime, and why it also cleans up after a SIGKILLed runtime), `direct` (the runtime spawns each
   * member with execa), or `auto` (native when found, else perl when available, else direct).
   * @default "auto"
   */
  readonly launcher?: LauncherMode;
  /** Member cgroups: `auto` (cgroup2, else the v1 freezer, else none), `v2`, `freezer`, `off` (./cgroup.ts). @default "auto" */
  readonly cgroup?: CgroupMode;
  /**
   * `check`: tcp/http probes accept only a listener of the member's own processes (`listenerOwner`); `off`: any
   * listener (for a member whose port is served by another process on its behalf, e.g. docker-proxy).
   * @default "check"
   */
  readonly portOwner?: "check" | "off";
  /** The mounts table cgroup hierarchies are looked up in (tests point it at an empty file). @default "/proc/self/mounts" */
  readonly mountsFile?: string;
  /** The TCP socket tables the owner check reads (tests point them at missing files). @default PROC_NET_TCP (./sockets.ts) */
  readonly procNetTcp?: readonly string[];
  /**
   * Sink for the backend's own ledger records: `member-killed` (member, signal, processes, outsideGroup,
   * via) and `backend-warning` (backend, topic, message; at most once per topic and run). Never throws.
   */
  readonly record?: (kind: string, fields: Record<string, unknown> & { member?: string }) => void;
}

/** Values of the `launcher` option. */
export const launcherModes = ["auto", "native", "perl", "direct"] as const;
/** A value of the `launcher` option (see {@link ProcessBackendOptions.launcher}). */
export type LauncherMode = (typeof launcherModes)[number];
/** How members were actually started. */
type LaunchedWith = "native" | "perl" | "direct" | "unknown";

interface RunningMember {
  readonly plan: MemberPlan;
  readonly pid: number;
  readonly pgid: number;
  readonly output: OutputCapture;
  readonly env: Record<string, string>;
  readonly leaderExited: Promise<void>;
  /** Resolves once the `exited` event was handed to the event sink. */
  readonly exitReported: Promise<void>;
  exited: boolean;
  stopping: Promise<void> | null;
  escalate: () => void;
  readonly escalated: Promise<void>;
  /** The member's cgroup, or null (none could be made). */
  readonly cgroup: { readonly kind: CgroupKind; readonly dir: string } | null;
}

/** A member's first start as staged at admission. */
interface StagedStart {
  readonly env: Record<string, string>;
  /** Its cgroup (made), null (the run has none), undefined (not made: start() makes it). */
  readonly cgroup: { readonly kind: CgroupKind; readonly dir: string } | null | undefined;
  /** Its launcher request line, or null (spawned directly, or its cgroup is not made yet). */
  readonly request: EncodedLaunchRequest | null;
}

/** How long stop() waits for the launcher's exit status of a member whose group is already gone, in ms. */
const EXIT_REPORT_WAIT_MS = 2_000;

/** How long the exit handler waits for killed member cgroups to empty before removing them, in ms. */
const EXIT_CGROUP_WAIT_MS = 500;

/** SIGTERM -> SIGKILL grace for processes of the run found alive after teardown, in ms. */
const STRAGGLER_GRACE_MS = 2_000;

/** Every member group of every process backend in this runtime that may still be alive. */
const liveGroups = new Set<number>();
/** Every member cgroup (directory -> kind) of every process backend in this runtime not removed yet. */
const liveCgroups = new Map<string, CgroupKind>();
/** Every run cgroup (`<hierarchy>/cohort/<runId>` -> kind) of every process backend in this runtime not removed yet. */
const liveRunCgroups = new Map<string, CgroupKind>();
let exitHandlerInstalled = false;

function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on("exit", () => {
    for (const pgid of liveGroups) {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {
        // ESRCH: already gone
      }
    }
    // The whole run cgroup: also a process a member moved into the run's directory or a sibling cgroup it made.
    for (const [dir, kind] of [...liveCgroups, ...liveRunCgroups]) {
      try {
        killCgroup(kind, dir, new Set([process.pid]));
      } catch {
        // best effort: `cohort reap` finds the cgroup by the run id
      }
    }
    // Remove the cgroups once their processes are gone (SIGKILL takes a moment): at most EXIT_CGROUP_WAIT_MS
    // of busy waiting (no timer fires in an exit handler); what is left, `cohort reap` removes.
    const deadline = Date.now() + EXIT_CGROUP_WAIT_MS;
    const pending = new Map(liveCgroups);
    while (pending.size > 0 && Date.now() < deadline) {
      for (const [dir, kind] of pending) {
        if (!cgroupEmpty(kind, dir)) continue;
        removeTree(dir);
        removeTree(path.dirname(dir)); // the run's directory, once its last member's is gone
        try {
          fs.rmdirSync(path.dirname(path.dirname(dir))); // `cohort/`, unless another run uses it
        } catch {
          // not empty, or gone
        }
        pending.delete(dir);
      }
      if (pending.size > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
    }
    for (const [dir, kind] of liveRunCgroups) {
      if (!cgroupEmpty(kind, dir)) continue;
      removeTree(dir);
      try {
        fs.rmdirSync(path.dirname(dir)); // `cohort/`, unless another run uses it
      } catch {
        // not empty, or gone
      }
    }
  });
}

/** Member cgroups of this runtime not removed yet (for diagnostics and tests). */
export function liveMemberCgroups(): readonly string[] {
  return [...liveCgroups.keys()];
}

/** Process groups of members this runtime started that may still be alive (for diagnostics and tests). */
export function liveMemberGroups(): readonly number[] {
  return [...liveGroups];
}

/**
 * The process backend (see the module doc).
 */
export class ProcessBackend implements Backend {
  readonly name = "process";
  readonly readiness = "probe" as const;
  /** A member may be started again once its stop() resolved (core restarts; output.log is appended to). */
  readonly restarts = true;
  private readonly options: ProcessBackendOptions;
  private readonly ports = new PortAllocator();
  private readonly members = new Map<string, RunningMember>();
  private readonly prepared = new Map<string, Promise<void>>();
  /** What admission made ready for a member's first start ({@link ProcessBackend.stage}); taken by that start. */
  private readonly staged = new Map<string, StagedStart>();
  /** close() was called: stopped members' ports are no longer held for a restart. */
  private closed = false;
  private readonly watcher = new GroupWatcher();
  /** Aborted at the end of close(): ends the waits on groups of a dead launcher's members that never emptied. */
  private readonly closedWaits = new AbortController();
  /** Spawns run one at a time, one per event-loop turn (see {@link ProcessBackend.spawnTurn}). */
  private spawnTail: Promise<void> = Promise.resolve();
  private launcherPromise: Promise<Launcher | null> | null = null;
  private launchedWith: LaunchedWith = "unknown";
  private launcherDead = false;
  private modePromise: Promise<LauncherProgram | "direct"> | null = null;
  /** Output captures of members started through the launcher, until their leader exited. */
  private readonly outputs = new Map<string, OutputCapture>();
  private readonly exitWaiters = new Map<number, (exit: LaunchExit) => void>();
  private readonly earlyExits = new Map<number, LaunchExit>();
  /** The run id of the members started (every MemberPlan of one backend carries the same). */
  private runId: string | null = null;
  /** The run's cgroup directory and hierarchy (decided at the first start), or why there is none. */
  private runCgroups: { hierarchy: CgroupHierarchy; dir: string } | { unavailable: string } | null = null;
  private readonly cgroupWatcher = new CgroupWatcher();
  private readonly warned = new Set<string>();
  /** /proc/net/tcp{,6}, read once for all owner checks asked at the same time (./sockets.ts). */
  private readonly listeners: ListenerTable;
  private lastStranger: { pid: number; command: string } | null = null;
  private launcherPid: number | undefined;

  constructor(options: ProcessBackendOptions) {
    if (!path.isAbsolute(options.runDir)) throw new TypeError(`ProcessBackendOptions.runDir must be absolute; got "${options.runDir}"`);
    this.options = options;
    this.listeners = new ListenerTable(options.procNetTcp);
    installExitHandler();
  }

  /**
   * Checks the platform (linux or darwin) and that a child can be put in its own process group and
   * signalled through it.
   *
   * @throws {BackendUnavailableError} naming what is missing
   */
  async available(): Promise<void> {
    if (process.platform !== "linux" && process.platform !== "darwin") {
      throw new BackendUnavailableError("process", `the process backend needs Linux or macOS (process groups); this is ${process.platform}`);
    }
    const { execa } = await loadExeca();
    const probe = execa("sh", ["-c", "exec sleep 30"], { detached: true, stdin: "ignore", stdout: "ignore", stderr: "ignore", reject: false, cleanup: false });
    probe.catch(() => undefined);
    const child = probe.nodeChildProcess;
    try {
      await new Promise<void>((resolve, reject) => {
        child.once("spawn", resolve);
        child.once("error", reject);
      });
    } catch (error) {
      throw new BackendUnavailableError("process", `cannot spawn /bin/sh: ${(error as Error).message}`, { cause: error });
    }
    const pid = child.pid!;
    try {
      process.kill(-pid, 0);
      process.kill(-pid, "SIGKILL");
    } catch (error) {
      try {
        child.kill("SIGKILL");
      } catch {
        // gone
      }
      throw new BackendUnavailableError("process", `process groups do not work here: kill(-${pid}) failed: ${(error as Error).message}`, { cause: error });
    }
    await probe;
    await this.launchMode();
  }

  /** Reserves a free loopback port for every member that wants one. */
  async endpoints(members: readonly MemberIdentity[], signal: AbortSignal): Promise<ReadonlyMap<string, MemberEndpoint>> {
    const out = new Map<string, MemberEndpoint>();
    for (const member of members) {
      if (signal.aborted) break;
      if (member.wantsPort) out.set(member.id, { host: this.ports.host, port: await this.ports.reserve(member.id) });
    }
    return out;
  }

  /**
   * Prepares every member's directory and files (no process is started), and stages its first start: its
   * cgroup, its environment and its launcher request line (see {@link stage}). At most 32 at a time.
   *
   * @throws {MemberStartError} naming the member whose directory or files cannot be written
   */
  async admit(members: readonly MemberPlan[], signal: AbortSignal): Promise<void> {
    const queue = [...members];
    // Start the launcher now, so that its boot (about 40 ms) is not on the first member's start. A failure
    // is reported by the first start(), which awaits the same promise.
    await this.launcher().catch(() => null);
    if (members.length > 0) this.openRunCgroups(members[0]!.runId);
    const worker = async (): Promise<void> => {
      for (let plan = queue.shift(); plan !== undefined && !signal.aborted; plan = queue.shift()) {
        await this.prepare(plan);
        await this.stage(plan);
      }
    };
    await Promise.all(Array.from({ length: Math.min(32, queue.length) }, worker));
  }

  /**
   * Does at admission what a member's first start would otherwise do on the start-up critical path, where a
   * wide level's starts run back to back on the event loop: creates its cgroup (a mkdir in cgroupfs, which
   * also takes the kernel's cgroup lock that every clone into a cgroup takes), resolves its environment and
   * encodes its launcher request line. Best effort: a cgroup that cannot be made here is made (or its error
   * raised) by start(). Figures: docs/host.md "Measured: the runtime and the process backend".
   */
  private async stage(plan: MemberPlan): Promise<void> {
    let cgroup: { kind: CgroupKind; dir: string } | null | undefined = null;
    const run = this.runCgroups;
    if (run !== null && !("unavailable" in run)) {
      try {
        cgroup = { kind: run.hierarchy.kind, dir: await createMemberCgroupAsync(run.dir, plan.id) };
        liveCgroups.set(cgroup.dir, cgroup.kind);
      } catch {
        cgroup = undefined; // start() tries again and fails the member with the reason
      }
    }
    const env = memberEnvironment(plan);
    const launching = this.launchedWith === "native" || this.launchedWith === "perl";
    const request =
      launching && cgroup !== undefined ? encodeLaunchRequest({ id: plan.id, dir: plan.workDir, argv: plan.command, env, ...(cgroup !== null ? { cgroup } : {}) }) : null;
    this.staged.set(plan.id, { env, cgroup, request });
  }

  private prepare(plan: MemberPlan): Promise<void> {
    let promise = this.prepared.get(plan.id);
    if (promise === undefined) {
      promise = prepareMemberDir(plan).catch((error: unknown) => {
        throw new MemberStartError(plan.id, this.name, `cannot prepare ${plan.workDir}: ${(error as Error).message}`, { cause: error });
      });
      this.prepared.set(plan.id, promise);
    }
    return promise;
  }

  /**
   * Starts one member (see the module doc).
   *
   * @throws {MemberStartError} when its directory cannot be prepared or its command cannot be spawned
   * @throws {Error} "aborted" when `signal` aborts before the spawn (nothing was started)
   */
  async start(plan: MemberPlan, signal: AbortSignal): Promise<MemberHandle> {
    this.runId ??= plan.runId;
    const previous = this.members.get(plan.id);
    // A restart (Backend.restarts): allowed once the previous incarnation was stopped; it is replaced below.
    if (previous !== undefined && previous.stopping === null) throw new MemberStartError(plan.id, this.name, `member ${plan.id} was already started`);
    await previous?.stopping;
    const entered = performance.now();
    await this.prepare(plan);
    // Only the first start uses what admission staged: a restart's cgroup was removed with its last attempt.
    const staged = previous === undefined ? this.staged.get(plan.id) : undefined;
    this.staged.delete(plan.id);
    const env = staged?.env ?? memberEnvironment(plan);
    const secrets = plan.secretEnv.map((name) => plan.env[name] ?? "").filter((value) => value.length > 0);
    const launcher = await this.launcher();
    if (signal.aborted) throw new Error(`start of ${plan.id} aborted`);
    const cgroupStarted = performance.now();
    const cgroup = this.memberCgroup(plan, staged?.cgroup);
    const cgroupMs = performance.now() - cgroupStarted;
    const output = new OutputCapture(path.join(plan.workDir, "output.log"), secrets);
    let pid: number;
    let queuedMs: number;
    let spawnMs: number;
    let leaderExited: Promise<LaunchExit>;
    if (launcher !== null) {
      // The launcher forks; this process only writes a request line (see ./launcher.ts).
      output.expect(2);
      this.outputs.set(plan.id, output);
      void this.ports.release(plan.id);
      const issued = performance.now();
      queuedMs = issued - entered;
      try {
        const request = staged?.request ?? { id: plan.id, dir: plan.workDir, argv: plan.command, env, ...(cgroup !== null ? { cgroup } : {}) };
        pid = await abortable(launcher.spawn(request), signal, (late) => {
          // The run gave up on this start (a deadline, teardown, a signal) before the launcher answered; if it
          // answers later, the member it started is nobody's: kill its group at once.
          try {
            process.kill(-late, "SIGKILL");
          } catch {
            // already gone
          }
        });
      } catch (error) {
        this.outputs.delete(plan.id);
        await output.end();
        this.dropCgroup(cgroup);
        const message = (error as Error).message;
        throw new MemberStartError(
          plan.id,
          this.name,
          message.startsWith("cannot enter cgroup") || message.startsWith("cannot open cgroup") ? message : `cannot run "${plan.command[0]}": ${message}`,
          { cause: error },
        );
      }
      spawnMs = performance.now() - issued;
      leaderExited = this.launcherExit(pid);
    } else {
      const { execa } = await loadExeca();
      const release = await this.spawnTurn();
      let subprocess;
      try {
        if (signal.aborted) {
          await output.end();
          throw new Error(`start of ${plan.id} aborted`);
        }
        void this.ports.release(plan.id); // the listening socket is closed synchronously; the callback only confirms
        const issued = performance.now();
        queuedMs = issued - entered;
        try {
          subprocess = launchMember(execa, plan, env, cgroup?.dir);
        } catch (error) {
          await output.end();
          this.dropCgroup(cgroup);
          const code = (error as NodeJS.ErrnoException).code;
          throw new MemberStartError(
            plan.id,
            this.name,
            `cannot run "${plan.command[0]}": ${code === "ENOENT" ? "command not found (ENOENT)" : code === "EACCES" ? "permission denied (EACCES)" : (error as Error).message}`,
            { cause: error },
          );
        }
        spawnMs = performance.now() - issued;
      } finally {
        release();
      }
      try {
        pid = await awaitSpawn(subprocess, plan, output);
      } catch (error) {
        await output.end();
        this.dropCgroup(cgroup);
        throw new MemberStartError(plan.id, this.name, (error as Error).message, { cause: error });
      }
      const child = subprocess.nodeChildProcess;
      leaderExited = new Promise<LaunchExit>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
        else child.once("exit", (code, sig) => resolve({ code, signal: sig }));
      });
    }
    liveGroups.add(pid);
    let escalate!: () => void;
    const escalated = new Promise<void>((resolve) => (escalate = resolve));
    const exitReported = leaderExited.then(async ({ code, signal: sig }) => {
      member.exited = true;
      await output.closed(200);
      this.outputs.delete(plan.id);
      if (!groupExists(pid)) liveGroups.delete(pid); // one kill(2); lingering children are stop()'s business
      const status = sig !== null ? `killed by ${sig}` : code !== null ? `exit code ${code}` : "exited (status unknown: the launcher is gone)";
      const cause = member.stopping === null ? this.exitCause(member, output.tail(RING_LINES)) : undefined;
      const reason = cause === undefined ? status : `${status}: ${cause}`;
      this.options.events({ kind: "exited", member: plan.id, reason, exitCode: code, signal: sig, outputTail: output.tail(RING_LINES), ...(cause !== undefined ? { cause } : {}) });
      await output.end();
    });
    const member: RunningMember = {
      plan,
      pid,
      pgid: pid,
      output,
      env,
      leaderExited: leaderExited.then(() => undefined),
      exitReported,
      exited: false,
      stopping: null,
      escalate,
      escalated,
      cgroup,
    };
    this.members.set(plan.id, member);
    return {
      member: plan.id,
      endpoint: { host: this.ports.host, port: plan.port },
      detail: { pid, pgid: pid, queuedMs: round3(queuedMs), spawnMs: round3(spawnMs), ...(cgroup !== null ? { cgroup: cgroup.dir, cgroupMs: round3(cgroupMs) } : {}) },
      onOutputLine: (listener) => output.onLine(listener),
      outputTail: async (lines) => output.tail(lines),
      exec: (command, execSignal) => this.exec(member, command, execSignal),
      ...(this.options.portOwner === "off" ? {} : { listenerOwner: (port: number) => this.listenerOwner(member, port) }),
      ...(launcher !== null && this.asksLauncher(launcher, "watch")
        ? { whenListening: (port: number, watchSignal: AbortSignal) => launcher.watchListening(this.ports.host, port, watchSignal).then(() => undefined) }
        : {}),
    };
  }

  /** Whether `launcher` can watch or look up listeners at the members' address (announced, and the address is an IP literal). */
  private asksLauncher(launcher: Launcher, feature: "watch" | "lookup"): boolean {
    return launcher.features.has(feature) && net.isIP(this.ports.host) !== 0;
  }

  /** Writes a `backend-warning` record once per topic and run. */
  private warnOnce(topic: string, message: string): void {
    if (this.warned.has(topic)) return;
    this.warned.add(topic);
    try {
      this.options.record?.("backend-warning", { backend: this.name, topic, message });
    } catch {
      // the sink never throws by contract; a broken one must not fail a start
    }
  }

  private record(kind: string, fields: Record<string, unknown> & { member?: string }): void {
    try {
      this.options.record?.(kind, fields);
    } catch {
      // see warnOnce
    }
  }

  /** Decides the run's cgroups and creates the run's directory (once: at admission, else at the first start). */
  private openRunCgroups(runId: string): { hierarchy: CgroupHierarchy; dir: string } | { unavailable: string } {
    if (this.runCgroups === null) {
      this.runCgroups = openRunCgroups(this.options.cgroup ?? "auto", runId, this.options.mountsFile);
      if (!("unavailable" in this.runCgroups)) liveRunCgroups.set(this.runCgroups.dir, this.runCgroups.hierarchy.kind);
    }
    return this.runCgroups;
  }

  /**
   * The member's cgroup: the one made at admission (`staged`), else created now (the run's directory at the
   * first call); null when the run has none (then one `backend-warning` record says why, at the first start).
   *
   * @throws {MemberStartError} when the run has cgroups but this member's cannot be made
   */
  private memberCgroup(plan: MemberPlan, staged?: { kind: CgroupKind; dir: string } | null): { kind: CgroupKind; dir: string } | null {
    this.runCgroups = this.openRunCgroups(plan.runId);
    if ("unavailable" in this.runCgroups) {
      this.warnOnce(
        "cgroup",
        `members run without cgroups, in process groups only: ${this.runCgroups.unavailable}; a member's process that leaves its process group (setsid) and its environment (env -i) survives teardown`,
      );
      return null;
    }
    if (staged !== undefined && staged !== null) return staged;
    let dir: string;
    try {
      dir = createMemberCgroup(this.runCgroups.dir, plan.id);
    } catch (error) {
      throw new MemberStartError(plan.id, this.name, (error as Error).message, { cause: error });
    }
    liveCgroups.set(dir, this.runCgroups.hierarchy.kind);
    return { kind: this.runCgroups.hierarchy.kind, dir };
  }

  /** Removes a member's cgroup once nothing runs in it (failed starts, stopped members). */
  private dropCgroup(cgroup: { kind: CgroupKind; dir: string } | null): void {
    if (cgroup === null) return;
    if (removeTree(cgroup.dir)) liveCgroups.delete(cgroup.dir);
  }

  /** Pids of the member's processes: its cgroup's, else its process group and the leader's descendants. */
  private memberPids(member: RunningMember): number[] {
    if (member.cgroup !== null) return [...new Set([member.pid, ...cgroupProcs(member.cgroup.dir)])];
    const processes = listProcesses();
    const parent = new Map(processes.map((p) => [p.pid, p.ppid]));
    const descends = (pid: number): boolean => {
      for (let p: number | undefined = pid, hops = 0; p !== undefined && p > 1 && hops < 64; p = parent.get(p), hops++) if (p === member.pid) return true;
      return false;
    };
    return processes.filter((p) => p.state !== "Z" && (p.pgid === member.pgid || descends(p.pid))).map((p) => p.pid);
  }

  /**
   * Inodes of the LISTEN sockets the owner check looks for among the member's processes: the one socket that
   * accepts connections to the members' address (the compiled launcher's `lookup`, one sock_diag exact lookup:
   * runtime/launcher/listen.go), else, without that launcher or when it cannot answer, every LISTEN socket of the
   * port in /proc/net/tcp{,6} (./sockets.ts; a read costs 4-15 ms of kernel time here, the kernel walking its whole
   * listening hash).
   *
   * @returns decimal inodes, possibly empty; null when neither way could look
   */
  private async listeningInodes(port: number): Promise<string[] | null> {
    const launcher = await this.launcherPromise?.catch(() => null);
    if (launcher != null && this.asksLauncher(launcher, "lookup")) {
      try {
        const found = await launcher.lookupListener(this.ports.host, port);
        return found === null ? [] : [String(found.inode)];
      } catch {
        // the launcher exited, or the kernel could not be asked: read the tables
      }
    }
    return this.listeners.lookup(port);
  }

  /** See MemberHandle.listenerOwner (runtime/core/backend.ts) and ./sockets.ts. */
  private async listenerOwner(member: RunningMember, port: number): Promise<ListenerOwner> {
    const inodes = await this.listeningInodes(port);
    if (inodes === null) {
      const why = "cannot read /proc/net/tcp or /proc/net/tcp6";
      this.warnOnce("port-owner", `${why}: tcp/http readiness probes accept any listener on a member's port (a stranger's too)`);
      return { owner: "unknown", why };
    }
    if (inodes.length === 0) return { owner: "none" };
    const wanted = new Set(inodes);
    if (holdsSocket(member.pid, wanted)) return { owner: "member", pid: member.pid }; // the common case, without a scan
    const mine = this.memberPids(member);
    for (const pid of mine) if (holdsSocket(pid, wanted)) return { owner: "member", pid };
    // A stranger is found by scanning every process's fds (~45 ms for 1,100 processes here); probes retry
    // every <= 100 ms, so the last holder found is checked first.
    const known = this.lastStranger;
    if (known !== null && !mine.includes(known.pid) && holdsSocket(known.pid, wanted)) return { owner: "other", ...known };
    const holder = socketHolder(wanted, new Set(mine));
    this.lastStranger = holder;
    return holder === null ? { owner: "other" } : { owner: "other", pid: holder.pid, command: holder.command };
  }

  /**
   * Why a member that exited on its own may have failed, as far as its port tells: EADDRINUSE in its output,
   * or its port held by another process.
   */
  private exitCause(member: RunningMember, tail: string): string | undefined {
    const port = member.plan.port;
    if (port <= 0) return undefined;
    const inUse = /EADDRINUSE|address already in use/i.test(tail);
    const inodes = listeningInodes(port, this.options.procNetTcp);
    let holder: { pid: number; command: string } | null = null;
    if (inodes !== null && inodes.length > 0) {
      const wanted = new Set(inodes);
      const mine = this.memberPids(member);
      if (!mine.some((pid) => holdsSocket(pid, wanted))) holder = socketHolder(wanted, new Set(mine));
    }
    const by = holder === null ? "" : `, held by pid ${holder.pid} (${holder.command})`;
    if (inUse) return `port ${port} was already in use (EADDRINUSE)${by}`;
    if (holder !== null) return `its port ${port} is held by another process: pid ${holder.pid} (${holder.command})`;
    return undefined;
  }

  /** The launcher in use (started on first use), or null when members are spawned directly. */
  private launcher(): Promise<Launcher | null> {
    this.launcherPromise ??= (async () => {
      const mode = await this.launchMode();
      this.launchedWith = mode === "direct" ? "direct" : mode.kind;
      if (mode === "direct") return null;
      const launcher = await Launcher.start(mode);
      this.launcherPid = launcher.pid;
      launcher.onOutput = (member, fd, socket, rest) => {
        const output = this.outputs.get(member);
        if (output === undefined || (fd !== 1 && fd !== 2)) {
          socket.destroy();
          return;
        }
        output.attach(socket, { initial: rest, expected: true });
      };
      launcher.onDied = () => {
        // Exit statuses can no longer arrive: report each remaining leader as exited once its group is empty
        // (or the backend is closed).
        this.launcherDead = true;
        for (const [pid, waiter] of this.exitWaiters) {
          this.exitWaiters.delete(pid);
          void this.watcher.waitEmpty(pid, this.closedWaits.signal).then(() => waiter({ code: null, signal: null }));
        }
      };
      launcher.onFailedPid = (pid) => this.earlyExits.delete(pid);
      launcher.onExit = (pid, exit) => {
        const waiter = this.exitWaiters.get(pid);
        if (waiter !== undefined) {
          this.exitWaiters.delete(pid);
          waiter(exit);
        } else {
          this.earlyExits.set(pid, exit);
        }
      };
      return launcher;
    })();
    return this.launcherPromise;
  }

  private launcherExit(pid: number): Promise<LaunchExit> {
    const early = this.earlyExits.get(pid);
    if (early !== undefined) {
      this.earlyExits.delete(pid);
      return Promise.resolve(early);
    }
    if (this.launcherDead) return this.watcher.waitEmpty(pid, this.closedWaits.signal).then(() => ({ code: null, signal: null }));
    return new Promise((resolve) => this.exitWaiters.set(pid, resolve));
  }

  /**
   * The launcher program for the `launcher` option: `native` must be found, `perl` must be available,
   * `auto` takes the first of native, perl, direct that is.
   *
   * @throws {BackendUnavailableError} when the asked-for launcher is missing
   */
  private launchMode(): Promise<LauncherProgram | "direct"> {
    this.modePromise ??= (async (): Promise<LauncherProgram | "direct"> => {
      const wanted = this.options.launcher ?? "auto";
      if (wanted === "direct") return "direct";
      if (wanted === "native" || wanted === "auto") {
        let found: string | null;
        try {
          found = findNativeLauncher();
        } catch (error) {
          throw new BackendUnavailableError("process", (error as Error).message, { cause: error });
        }
        if (found !== null) return { kind: "native", path: found };
        if (wanted === "native") {
          throw new BackendUnavailableError(
            "process",
            "launcher=native needs the cohort-launcher binary: set COHORT_LAUNCHER or put it next to the runtime bundle (`npm run toolchain && npm run build`)",
          );
        }
      }
      if (await launcherAvailable()) return { kind: "perl" };
      if (wanted === "perl") {
        throw new BackendUnavailableError("process", "launcher=perl needs perl 5 with POSIX, IO::Socket::UNIX and IO::Select on PATH (Debian/Ubuntu: perl-base)");
      }
      return "direct";
    })();
    return this.modePromise;
  }

  /**
   * Stops a member's whole process group (SIGTERM, SIGKILL after `graceMs`). Idempotent; a call with
   * `graceMs` 0 while a graceful stop is waiting escalates it to SIGKILL at once. Unknown members are a
   * no-op (they were never started).
   *
   * @throws {Error} when the group survives SIGKILL (see ./stop.ts)
   */
  async stop(memberId: string, graceMs: number): Promise<void> {
    const member = this.members.get(memberId);
    if (member === undefined) return;
    if (member.stopping !== null) {
      if (graceMs === 0) member.escalate();
      return member.stopping;
    }
    const launcherPid = this.launcherPid;
    const cgroup = member.cgroup;
    member.stopping = stopGroup(
      {
        member: memberId,
        pgid: member.pgid,
        leaderExited: member.leaderExited,
        ...(cgroup !== null ? { cgroup: { ...cgroup, watcher: this.cgroupWatcher } } : {}),
        exclude: new Set([process.pid, ...(launcherPid !== undefined ? [launcherPid] : [])]),
        onKill: (report) => this.record("member-killed", { member: memberId, ...report }),
      },
      graceMs,
      this.watcher,
      member.escalated,
    ).then(async () => {
      liveGroups.delete(member.pgid);
      this.dropCgroup(cgroup);
      // Keep the member's port reserved until its next start (a restart's backoff), so that no other
      // process takes it in between; start() releases it right before it spawns, close() at the end.
      if (member.plan.port > 0 && !this.closed) await this.ports.hold(memberId, member.plan.port).catch(() => false);
      // The member's `exited` event comes before stop() resolves. Its status comes from the launcher; a
      // launcher that stopped answering (SIGSTOPped, wedged) must not hold teardown: once the group is
      // gone, wait at most EXIT_REPORT_WAIT_MS for the status, then report the exit as unknown.
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, EXIT_REPORT_WAIT_MS)));
      await Promise.race([member.exitReported, late]);
      clearTimeout(timer);
      const waiter = this.exitWaiters.get(member.pid);
      if (waiter !== undefined) {
        this.exitWaiters.delete(member.pid);
        waiter({ code: null, signal: null });
      }
      await member.exitReported;
    });
    return member.stopping;
  }

  /**
   * Waits for this start's turn to spawn. A spawn blocks the event loop (fork, then libuv waits for
   * the child's exec), so spawns go one per event-loop turn: timers, probes, member events and signals
   * are handled between two spawns even when hundreds of members start at once.
   *
   * @returns the function that ends the turn (call it once the spawn call returned)
   */
  private async spawnTurn(): Promise<() => void> {
    const previous = this.spawnTail;
    let release!: () => void;
    this.spawnTail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    await new Promise<void>((resolve) => setImmediate(resolve));
    return release;
  }

  /**
   * Releases port reservations that were never used (members not started), closes the launcher, and
   * stops any process still carrying this run's `COHORT_RUN_ID` (a member's descendant that escaped
   * its process group with `setsid` is out of reach of group signals). Idempotent.
   */
  async close(): Promise<void> {
    this.closed = true;
    try {
      await this.ports.releaseAll();
      const launcher = await this.launcherPromise?.catch(() => null);
      await launcher?.close();
      if (this.runId !== null) await stopRunProcesses(this.runId, STRAGGLER_GRACE_MS);
      const run = this.runCgroups;
      if (run !== null && !("unavailable" in run)) await this.closeRunCgroup(run);
    } finally {
      this.closedWaits.abort();
    }
  }

  /**
   * Kills whatever is left in the run's WHOLE cgroup tree `<hierarchy>/cohort/<runId>` (./cgroup.ts
   * killCgroup on the run's directory: cgroup2 `cgroup.kill` kills every descendant; the v1 freezer freezes
   * the run's directory, which freezes its descendants, then SIGKILLs every pid below it), waits until it is
   * empty (at most KILL_WAIT_MS, the wait after SIGKILL of ./stop.ts), and removes the directories deepest first. Left over are members
   * whose stop failed, starts that failed while their child was exiting, and processes a member (as root)
   * moved into the run's own directory or into a sibling cgroup it created (`cohort/<runId>/zz`).
   *
   * Records `member-killed` per member directory of the roster (members this backend admitted or started)
   * that held processes, `{member, signal: "SIGKILL", processes, outsideGroup: null, via: "cgroup"}`, and per
   * other directory that did, `{scope: "run", cgroup: <path relative to the run's directory, "" for the run's
   * own>, signal, processes, outsideGroup: null, via: "cgroup"}` (no `member` field: it is not a member).
   *
   * @throws {Error} when the run's directory resolves outside `<hierarchy>/cohort/`, or a control file
   *   cannot be written (naming it)
   */
  private async closeRunCgroup(run: { hierarchy: CgroupHierarchy; dir: string }): Promise<void> {
    const kind = run.hierarchy.kind;
    if (!checkInsideCohort(run.hierarchy, run.dir)) {
      liveRunCgroups.delete(run.dir);
      removeCohortDirIfEmpty(run.hierarchy);
      return;
    }
    const exclude = new Set([process.pid, ...(this.launcherPid !== undefined ? [this.launcherPid] : [])]);
    const roster = new Set([...this.prepared.keys(), ...this.members.keys()]);
    const perMember = new Map<string, number>();
    const elsewhere: Array<{ rel: string; processes: number }> = [];
    for (const entry of runCgroupTree(run.dir)) {
      const count = entry.pids.filter((pid) => !exclude.has(pid)).length;
      if (count === 0) continue;
      const owner = cgroupOwner(entry.rel, roster);
      if ("member" in owner) perMember.set(owner.member, (perMember.get(owner.member) ?? 0) + count);
      else elsewhere.push({ rel: entry.rel, processes: count });
    }
    if (perMember.size + elsewhere.length > 0) {
      killCgroup(kind, run.dir, exclude);
      for (const [member, processes] of perMember) this.record("member-killed", { member, signal: "SIGKILL", processes, outsideGroup: null, via: "cgroup" });
      for (const { rel, processes } of elsewhere) this.record("member-killed", { scope: "run", cgroup: rel, signal: "SIGKILL", processes, outsideGroup: null, via: "cgroup" });
      await this.cgroupWatcher.waitEmpty(kind, run.dir, AbortSignal.timeout(KILL_WAIT_MS));
    }
    await removeTreeRetrying(run.dir, 100);
    for (const dir of liveCgroups.keys()) if (dir.startsWith(run.dir + path.sep)) liveCgroups.delete(dir);
    liveRunCgroups.delete(run.dir);
    removeCohortDirIfEmpty(run.hierarchy);
  }

  /** How members were started (`native` or `perl` launcher, or `direct`), recorded as the run's `backend-stats`. */
  stats(): { launcher: LaunchedWith } {
    return { launcher: this.launchedWith };
  }

  private async exec(member: RunningMember, command: readonly string[], signal: AbortSignal): Promise<{ exitCode: number | null }> {
    const [file, ...args] = command;
    const { execa } = await loadExeca();
    const result = await execa(file!, args, {
      cwd: member.plan.workDir,
      env: member.env,
      extendEnv: false,
      stdin: "ignore",
      stdout: "ignore",
      stderr: "ignore",
      reject: false,
      killDescendants: true,
      cleanup: true,
      cancelSignal: signal,
      timeout: this.options.execProbeTimeoutMs ?? 5_000,
      forceKillAfterDelay: 1_000,
    });
    if (result.failed && result.exitCode === undefined && result.signal === undefined) {
      throw new Error(result.shortMessage);
    }
    return { exitCode: result.exitCode ?? null };
  }
}

/**
 * `promise`, or a rejection as soon as `signal` aborts; a value that arrives after the abort goes to `onLate`.
 *
 * @throws {Error} "aborted" when the signal aborted first
 */
function abortable<T>(promise: Promise<T>, signal: AbortSignal, onLate: (value: T) => void): Promise<T> {
  if (signal.aborted) {
    promise.then(onLate, () => undefined);
    return Promise.reject(new Error("aborted before the launcher answered"));
  }
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const onAbort = (): void => {
      if (settled) return;
      settled = true;
      promise.then(onLate, () => undefined);
      reject(new Error("aborted before the launcher answered"));
    };
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        if (settled) return;
        settled = true;
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        if (settled) return;
        settled = true;
        reject(error as Error);
      },
    );
  });
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * Registry factory (runtime/backends/index.ts).
 */
export function createProcessBackend(context: BackendContext): ProcessBackend {
  const launcher = context.options?.launcher;
  if (launcher !== undefined && !(launcherModes as readonly unknown[]).includes(launcher)) {
    throw new SpecError([{ path: "process.launcher", reason: `must be one of ${launcherModes.map((m) => `"${m}"`).join(", ")}; got ${JSON.stringify(launcher)}` }]);
  }
  const cgroup = context.options?.cgroup;
  if (cgroup !== undefined && !(cgroupModes as readonly unknown[]).includes(cgroup)) {
    throw new SpecError([{ path: "process.cgroup", reason: `must be one of ${cgroupModes.map((m) => `"${m}"`).join(", ")}; got ${JSON.stringify(cgroup)}` }]);
  }
  const portOwner = context.options?.portOwner;
  if (portOwner !== undefined && portOwner !== "check" && portOwner !== "off") {
    throw new SpecError([{ path: "process.portOwner", reason: `must be "check" or "off"; got ${JSON.stringify(portOwner)}` }]);
  }
  const known = ["launcher", "cgroup", "portOwner"];
  const unknown = Object.keys(context.options ?? {}).filter((key) => !known.includes(key));
  if (unknown.length > 0) throw new SpecError(unknown.map((key) => ({ path: `process.${key}`, reason: `unknown backend option (known: ${known.join(", ")})` })));
  return new ProcessBackend({
    runDir: context.runDir,
    events: context.events,
    ...(launcher !== undefined ? { launcher: launcher as LauncherMode } : {}),
    ...(cgroup !== undefined ? { cgroup: cgroup as CgroupMode } : {}),
    ...(portOwner !== undefined ? { portOwner } : {}),
    ...(context.record !== undefined ? { record: context.record } : {}),
  });
}

/**
 * The process backend: every member is a child process of the runtime, in its own process group, on
 * this machine (profile `host`). Linux and macOS.
 *
 * - `endpoints`: one free loopback port per member, reserved until the member starts (core/ports.ts).
 * - `admit`: creates every member's directory and writes its files before the first start, so that
 *   file system work is not on the start-up critical path.
 * - `start`: spawn (./start.ts); resolves once the process exists.
 * - `stop`: SIGTERM to the group, SIGKILL after the grace period, until the group is empty (./stop.ts).
 * - `exec`: exec readiness probes run with the member's environment in its directory.
 * - Member exits are reported through the event sink with the exit code or signal and the output tail.
 * - Last resort: when the runtime process exits for any reason Node still runs code for (normal exit,
 *   uncaught exception, `process.exit`), every member group that may still be alive gets SIGKILL
 *   synchronously. A SIGKILLed runtime cannot do that; `cohort reap <runDir>` cleans up after it.
 */
import * as path from "node:path";
import type { Backend, MemberEndpoint, MemberEventSink, MemberHandle, MemberIdentity, MemberPlan } from "../../core/backend";
import { BackendUnavailableError, MemberStartError } from "../../core/errors";
import { PortAllocator } from "../../core/ports";
import { OutputCapture, RING_LINES, awaitSpawn, launchMember, loadExeca, memberEnvironment, prepareMemberDir } from "./start";
import { GroupWatcher, groupAlive } from "./status";
import { stopGroup } from "./stop";

/** Options of {@link createProcessBackend}. */
export interface ProcessBackendOptions {
  /** Absolute run directory (members' directories are created under `<runDir>/members/`). */
  readonly runDir: string;
  /** Where member exits are reported. */
  readonly events: MemberEventSink;
  /** Timeout of one exec readiness probe attempt, in ms. @default 5000 */
  readonly execProbeTimeoutMs?: number;
}

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
}

/** Every member group of every process backend in this runtime that may still be alive. */
const liveGroups = new Set<number>();
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
  });
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
  private readonly options: ProcessBackendOptions;
  private readonly ports = new PortAllocator();
  private readonly members = new Map<string, RunningMember>();
  private readonly prepared = new Map<string, Promise<void>>();
  private readonly watcher = new GroupWatcher();
  /** Spawns run one at a time, one per event-loop turn (see {@link ProcessBackend.spawnTurn}). */
  private spawnTail: Promise<void> = Promise.resolve();

  constructor(options: ProcessBackendOptions) {
    if (!path.isAbsolute(options.runDir)) throw new TypeError(`ProcessBackendOptions.runDir must be absolute; got "${options.runDir}"`);
    this.options = options;
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
   * Prepares every member's directory and files (no process is started). At most 32 at a time.
   *
   * @throws {MemberStartError} naming the member whose directory or files cannot be written
   */
  async admit(members: readonly MemberPlan[], signal: AbortSignal): Promise<void> {
    const queue = [...members];
    const worker = async (): Promise<void> => {
      for (let plan = queue.shift(); plan !== undefined && !signal.aborted; plan = queue.shift()) await this.prepare(plan);
    };
    await Promise.all(Array.from({ length: Math.min(32, queue.length) }, worker));
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
    if (this.members.has(plan.id)) throw new MemberStartError(plan.id, this.name, `member ${plan.id} was already started`);
    const entered = performance.now();
    await this.prepare(plan);
    const { execa } = await loadExeca();
    const env = memberEnvironment(plan);
    const release = await this.spawnTurn();
    let subprocess;
    let queuedMs = 0;
    let spawnMs = 0;
    let output: OutputCapture;
    try {
      if (signal.aborted) throw new Error(`start of ${plan.id} aborted`);
      const secrets = plan.secretEnv.map((name) => plan.env[name] ?? "").filter((value) => value.length > 0);
      output = new OutputCapture(path.join(plan.workDir, "output.log"), secrets);
      void this.ports.release(plan.id); // the listening socket is closed synchronously; the callback only confirms
      const issued = performance.now();
      queuedMs = issued - entered;
      subprocess = launchMember(execa, plan, env);
      spawnMs = performance.now() - issued;
    } finally {
      release();
    }
    let pid: number;
    try {
      pid = await awaitSpawn(subprocess, plan, output);
    } catch (error) {
      await output.end();
      throw new MemberStartError(plan.id, this.name, (error as Error).message, { cause: error });
    }
    liveGroups.add(pid);
    let escalate!: () => void;
    const escalated = new Promise<void>((resolve) => (escalate = resolve));
    const child = subprocess.nodeChildProcess;
    const leaderExited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
      else child.once("exit", (code, sig) => resolve({ code, signal: sig }));
    });
    const exitReported = leaderExited.then(async ({ code, signal: sig }) => {
      member.exited = true;
      await output.closed(200);
      if (!groupAlive(pid)) liveGroups.delete(pid);
      const reason = sig !== null ? `killed by ${sig}` : `exit code ${code}`;
      this.options.events({ kind: "exited", member: plan.id, reason, exitCode: code, signal: sig, outputTail: output.tail(RING_LINES) });
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
    };
    this.members.set(plan.id, member);
    return {
      member: plan.id,
      endpoint: { host: this.ports.host, port: plan.port },
      detail: { pid, pgid: pid, queuedMs: round3(queuedMs), spawnMs: round3(spawnMs) },
      onOutputLine: (listener) => output.onLine(listener),
      outputTail: async (lines) => output.tail(lines),
      exec: (command, execSignal) => this.exec(member, command, execSignal),
    };
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
    member.stopping = stopGroup({ member: memberId, pgid: member.pgid, leaderExited: member.leaderExited }, graceMs, this.watcher, member.escalated).then(
      async () => {
        liveGroups.delete(member.pgid);
        await member.exitReported; // the member's `exited` event comes before stop() resolves
      },
    );
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

  /** Releases port reservations that were never used (members not started). Idempotent. */
  async close(): Promise<void> {
    await this.ports.releaseAll();
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

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * Registry factory (runtime/backends/index.ts).
 */
export function createProcessBackend(context: { readonly runDir: string; readonly events: MemberEventSink }): ProcessBackend {
  return new ProcessBackend({ runDir: context.runDir, events: context.events });
}

/**
 * Package systemd: the runtime's systemd backend. Every member is a transient service
 * (`systemd-run`, unit `cohort-<runId>-<member>.service`, ./units.ts) on the Multipass instance its
 * role is placed on (./config.ts), reached with `<multipass> exec <instance> -- ...` (./multipass.ts).
 *
 * - Environment: written through exec's stdin into `/run/cohort/<unit>.env` (root-only directory,
 *   `umask 077`) and referenced with `EnvironmentFile=`; the member's secrets are never on a command
 *   line (a command that contains one is refused), in a log (output lines are redacted) or in the ledger
 *   (the core registers them for redaction before anything starts).
 * - Exits: one `journalctl -f -o json --no-tail -u <unit>...` stream per instance, for the run's units
 *   only; the manager's unit result messages become `exited` events (./journal.ts), with the unit's
 *   last journal lines as `outputTail`. No polling.
 * - Readiness: the core probes `MemberHandle.endpoint` = the instance's IPv4 and the member's port
 *   (`basePort`, `basePort + 1`, ... per instance) from the host.
 * - Stop: `systemctl stop` (the unit has `KillMode=control-group`, `TimeoutStopSec=` the grace), then
 *   `systemctl kill --signal=SIGKILL`; idempotent. `close()` ends the journal streams.
 */
import * as fs from "node:fs";
import * as readline from "node:readline";
import type { ResultPromise } from "execa";
import type { Backend, BackendContext, MemberEndpoint, MemberEventSink, MemberHandle, MemberIdentity, MemberPlan } from "../../core/backend.js";
import { BackendUnavailableError, MemberStartError } from "../../core/errors.js";
import { resolveSystemdConfig, type SystemdConfig, type SystemdInstance } from "./config.js";
import { describeEnd, journalFact } from "./journal.js";
import { MultipassCli, type ExecResult } from "./multipass.js";
import { secretsInCommand, setupScript, stopScript, systemdRunArgv, unitName } from "./units.js";

export { resolveSystemdConfig, systemdConfigSchema, type SystemdConfig, type SystemdConfigInput, type SystemdInstance } from "./config.js";
export { describeEnd, journalFact, signalName, type JournalFact } from "./journal.js";
export { envFilePath, instanceWorkDir, renderEnvFile, secretsInCommand, setupScript, stopScript, systemdRunArgv, unitName } from "./units.js";

/** Registry name of this backend. */
export const SYSTEMD_BACKEND = "systemd";
/** Journal lines kept per member for `outputTail`. */
const RING_LINES = 50;
/** Replacement for a secret in member output (same text as the ledger's). */
const REDACTED = "[redacted]";
/** How long a failed `systemd-run` waits for the journal to say whether the unit ran and ended (see start()). */
const END_WAIT_MS = 3000;
/** How long `close()` waits at each step for a journal stream's `multipass exec` to exit. */
const CLOSE_GRACE_MS = 3000;

/**
 * The instance-side wrapper of the journal stream (`sh -c JOURNAL_SCRIPT cohort-journal <journalctl args>`): runs
 * journalctl in the background and kills it when the stream's stdin reaches EOF (the runtime closes it in `close()`,
 * or the runtime died). Without it, ending the local `multipass exec` may leave `journalctl --follow` running on the
 * instance (measured on the stand-in: reparented to PID 1, holding the pipe open) until a matching entry that never
 * comes. The watcher's output goes to /dev/null so that it never holds the stream open itself.
 */
export const JOURNAL_SCRIPT = [
  "exec 3<&0",
  'journalctl "$@" </dev/null &',
  "j=$!",
  '{ cat <&3 >/dev/null 2>&1; kill "$j" 2>/dev/null; } >/dev/null 2>&1 &',
  "exec 3<&-",
  'wait "$j"',
].join("\n");

interface MemberState {
  readonly id: string;
  readonly unit: string;
  readonly at: SystemdInstance;
  secrets: string[];
  ring: string[];
  listeners: Set<(line: string) => void>;
  lastExit?: { code: string; status: number };
  end?: { result: string };
  /** Called once when the journal says the unit ended (see start()). */
  onEnd?: () => void;
  /** start() resolved with a handle. */
  started: boolean;
  /** stop() was called: no more events. */
  stopping: boolean;
  reported: boolean;
}

interface JournalStream {
  readonly at: SystemdInstance;
  readonly child: ResultPromise;
  readonly done: Promise<void>;
  stderr: string;
}

/** What `stats()` returns (JSON-safe, no secrets). */
export interface SystemdBackendStats {
  readonly backend: "systemd";
  readonly instances: Readonly<Record<string, string>>;
  readonly members: number;
  readonly execCalls: Readonly<Record<string, number>>;
  readonly journalEntries: number;
  readonly stopFailures: number;
}

/** The systemd backend. Create with {@link createSystemdBackend}. */
export class SystemdBackend implements Backend {
  readonly name = SYSTEMD_BACKEND;
  readonly #config: SystemdConfig;
  readonly #context: BackendContext;
  readonly #events: MemberEventSink;
  readonly #cli: MultipassCli;
  readonly #members = new Map<string, MemberState>();
  readonly #streams = new Map<string, JournalStream>();
  #closing = false;
  #journalEntries = 0;
  #stopFailures = 0;

  /** @throws {SpecError} naming the config field (`systemd.<field>`) */
  constructor(context: BackendContext) {
    this.#context = context;
    this.#events = context.events;
    this.#config = resolveSystemdConfig(context.options, context.spec);
    this.#cli = new MultipassCli(this.#config.multipass, this.#config.environment);
  }

  /** The resolved config (for tests and the CLI's diagnostics). */
  get config(): SystemdConfig {
    return this.#config;
  }

  #become(argv: readonly string[]): string[] {
    return [...this.#config.become, ...argv];
  }

  /** Instances that hold at least one role. */
  #usedInstances(): SystemdInstance[] {
    const out = new Map<string, SystemdInstance>();
    for (const at of this.#config.placement.values()) out.set(at.instance, at);
    return [...out.values()];
  }

  /**
   * Checks the CLI is executable and that every instance holding a role answers `multipass exec` with
   * systemd as its service manager (`/run/systemd/system` exists, `systemd-run`, `systemctl` and
   * `journalctl` are on PATH) through the `become` prefix.
   *
   * @throws {BackendUnavailableError} naming the CLI, or the instance (and machine) and why
   */
  async available(): Promise<void> {
    try {
      fs.accessSync(this.#config.multipass, fs.constants.X_OK);
    } catch (error) {
      throw new BackendUnavailableError(SYSTEMD_BACKEND, `systemd.multipass: ${this.#config.multipass} is not an executable file (${(error as Error).message})`, { cause: error });
    }
    const probe = [
      "if [ ! -d /run/systemd/system ]; then echo cohort-no-systemd; exit 0; fi",
      "for c in systemd-run systemctl journalctl base64; do command -v $c >/dev/null || { echo cohort-missing $c; exit 0; }; done",
      "echo cohort-ok",
    ].join("; ");
    await Promise.all(
      this.#usedInstances().map(async (at) => {
        let result: ExecResult;
        try {
          result = await this.#cli.run("probe", at.instance, this.#become(["sh", "-c", probe]), { timeoutMs: this.#config.execTimeoutMs });
        } catch (error) {
          throw new BackendUnavailableError(SYSTEMD_BACKEND, `instance ${at.instance} (machine ${at.machine}): ${(error as Error).message}`, { cause: error });
        }
        const out = result.stdout.trim();
        if (result.exitCode === 0 && out.endsWith("cohort-ok")) return;
        const name = `instance ${at.instance} (machine ${at.machine})`;
        if (result.exitCode === 0 && out.endsWith("cohort-no-systemd"))
          throw new BackendUnavailableError(SYSTEMD_BACKEND, `${name} has no systemd as its service manager (/run/systemd/system is missing)`);
        const missing = /cohort-missing (\S+)$/.exec(out);
        if (result.exitCode === 0 && missing !== null) throw new BackendUnavailableError(SYSTEMD_BACKEND, `${name} has no ${missing[1]} on PATH`);
        throw new BackendUnavailableError(
          SYSTEMD_BACKEND,
          `${name} is not reachable with ${this.#config.multipass} exec (${result.timedOut ? `no answer within ${this.#config.execTimeoutMs} ms` : `exit ${result.exitCode}`}): ${lastLine(result.stderr) || lastLine(result.stdout) || "no output"}`,
        );
      }),
    );
  }

  /** Ports `basePort`, `basePort + 1`, ... per instance, in roster order; host = the instance's IPv4. */
  async endpoints(members: readonly MemberIdentity[]): Promise<ReadonlyMap<string, MemberEndpoint>> {
    const next = new Map<string, number>();
    const out = new Map<string, MemberEndpoint>();
    for (const m of members) {
      if (!m.wantsPort) continue;
      const at = this.#config.placement.get(m.role)!;
      const port = next.get(at.instance) ?? this.#config.basePort;
      next.set(at.instance, port + 1);
      out.set(m.id, { host: at.ipv4, port });
    }
    return out;
  }

  /** Records the roster's units and opens one journal stream per instance (before any unit exists, so nothing is missed). */
  async admit(members: readonly MemberPlan[]): Promise<void> {
    for (const plan of members) {
      const at = this.#config.placement.get(plan.role)!;
      this.#members.set(plan.id, {
        id: plan.id,
        unit: unitName(plan.runId, plan.id),
        at,
        secrets: plan.secretEnv.map((name) => plan.env[name]).filter((v): v is string => v !== undefined && v !== ""),
        ring: [],
        listeners: new Set(),
        started: false,
        stopping: false,
        reported: false,
      });
    }
    for (const at of this.#usedInstances()) {
      const units = [...this.#members.values()].filter((m) => m.at.instance === at.instance).map((m) => m.unit);
      if (units.length > 0) await this.#openJournal(at, units);
    }
  }

  async #openJournal(at: SystemdInstance, units: readonly string[]): Promise<void> {
    const argv = ["sh", "-c", JOURNAL_SCRIPT, "cohort-journal", "--follow", "--no-tail", "--no-pager", "--output=json", ...units.flatMap((u) => ["-u", u])];
    const { child } = await this.#cli.stream("journal", at.instance, this.#become(argv));
    const unitSet = new Set(units);
    const byUnit = new Map([...this.#members.values()].filter((m) => unitSet.has(m.unit)).map((m) => [m.unit, m]));
    const stream: JournalStream = { at, child, stderr: "", done: Promise.resolve() };
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      stream.stderr = (stream.stderr + chunk).slice(-4000);
    });
    const lines = readline.createInterface({ input: child.stdout!, crlfDelay: Infinity });
    lines.on("line", (text) => {
      let entry: unknown;
      try {
        entry = JSON.parse(text);
      } catch {
        return;
      }
      this.#journalEntries++;
      const fact = journalFact(entry, unitSet);
      if (fact === undefined) return;
      const member = byUnit.get(fact.unit)!;
      const line = redact(fact.kind === "manager" ? `[systemd] ${fact.line}` : fact.line, member.secrets);
      member.ring.push(line);
      if (member.ring.length > RING_LINES) member.ring.shift();
      if (fact.kind === "output") for (const listener of member.listeners) listener(line);
      if (fact.kind === "manager" && fact.exit !== undefined) member.lastExit = fact.exit;
      if (fact.kind === "manager" && fact.end !== undefined && member.end === undefined) {
        member.end = fact.end;
        member.onEnd?.();
        if (member.started) this.#reportEnd(member);
      }
    });
    (stream as { done: Promise<void> }).done = (async () => {
      const result = await child;
      if (this.#closing) return;
      const why = `the journal stream of instance ${at.instance} ended (exit ${result.exitCode ?? result.signal ?? "?"}${lastLine(stream.stderr) === "" ? "" : `: ${lastLine(stream.stderr)}`})`;
      this.#context.record?.("backend-warning", { message: why });
      for (const member of byUnit.values()) {
        if (!member.started || member.stopping || member.reported) continue;
        member.reported = true;
        this.#events({
          kind: "exited",
          member: member.id,
          reason: `${why}; the member's state is unknown`,
          cause: why,
          exitCode: null,
          signal: null,
          outputTail: member.ring.join("\n"),
        });
      }
    })();
    this.#streams.set(at.instance, stream);
  }

  /** Reports a unit's end once (after {@link SystemdConfig.exitSettleMs}, so its last output lines are in the tail). */
  #reportEnd(member: MemberState): void {
    if (member.reported || member.stopping || member.end === undefined) return;
    member.reported = true;
    const end = member.end;
    setTimeout(() => {
      if (member.stopping) return;
      const described = describeEnd(member.unit, end.result, member.lastExit);
      this.#events({
        kind: "exited",
        member: member.id,
        reason: `${described.reason} on ${member.at.instance}`,
        cause: `${described.reason} on ${member.at.instance}`,
        exitCode: described.exitCode,
        signal: described.signal,
        outputTail: member.ring.join("\n"),
      });
    }, this.#config.exitSettleMs).unref();
  }

  /**
   * Writes the member's env file and files on its instance (stdin of `sh -s`), then starts its unit with
   * `systemd-run` (Type=exec: resolves once the command was executed).
   *
   * @throws {MemberStartError} when the command contains a secret, or set-up or `systemd-run` fails (with its stderr)
   */
  async start(plan: MemberPlan, signal: AbortSignal): Promise<MemberHandle> {
    const member = this.#members.get(plan.id);
    if (member === undefined) throw new MemberStartError(plan.id, SYSTEMD_BACKEND, `member ${plan.id} was not in the admitted roster`);
    const { at, unit } = member;
    const leaked = secretsInCommand(plan);
    if (leaked.length > 0) {
      throw new MemberStartError(
        plan.id,
        SYSTEMD_BACKEND,
        `member ${plan.id}: its command contains the secret ${leaked.join(", ")}; the systemd backend never puts a secret on a command line (read it from the environment, e.g. sh -c '... "$${leaked[0]}"')`,
      );
    }
    let script: string;
    try {
      script = setupScript(plan, unit);
    } catch (error) {
      throw new MemberStartError(plan.id, SYSTEMD_BACKEND, `member ${plan.id}: ${(error as Error).message}`, { cause: error });
    }
    const timeoutMs = this.#config.execTimeoutMs;
    const setup = await this.#cli.run("setup", at.instance, this.#become(["sh", "-s"]), { input: script, timeoutMs, signal });
    if (setup.exitCode !== 0) {
      throw new MemberStartError(
        plan.id,
        SYSTEMD_BACKEND,
        `member ${plan.id}: preparing its env file on ${at.instance} failed (exit ${setup.exitCode}): ${redact(lastLine(setup.stderr), member.secrets) || "no output"}`,
      );
    }
    const run = await this.#cli.run("systemd-run", at.instance, this.#become(systemdRunArgv(plan, unit, this.#context.spec.stopGraceMs)), { timeoutMs, signal });
    // A command that exits at once can fail systemd-run's start job (Type=exec) although it ran: when the journal
    // reports the unit's end within END_WAIT_MS, the member started and its exit is reported as an `exited` event
    // with its journal lines (e.g. "status=203/EXEC" for a command that does not exist), like any other exit.
    if (run.exitCode !== 0 && !(await this.#endWithin(member, END_WAIT_MS))) {
      const tail = member.ring.join("\n");
      throw new MemberStartError(
        plan.id,
        SYSTEMD_BACKEND,
        `member ${plan.id}: systemd-run ${unit} on ${at.instance} failed (exit ${run.exitCode}): ${redact(systemdRunError(run.stderr), member.secrets) || "no output"}${tail === "" ? "" : `\n${tail}`}`,
      );
    }
    member.started = true;
    if (member.end !== undefined) this.#reportEnd(member);
    return {
      member: plan.id,
      endpoint: { host: at.ipv4, port: plan.port },
      detail: { unit, instance: at.instance, machine: at.machine, ipv4: at.ipv4 },
      onOutputLine: (listener) => {
        member.listeners.add(listener);
        return () => member.listeners.delete(listener);
      },
      outputTail: async (lines) => member.ring.slice(-lines).join("\n"),
    };
  }

  /** Resolves true once the journal reported the unit's end, false after `ms`. */
  #endWithin(member: MemberState, ms: number): Promise<boolean> {
    if (member.end !== undefined) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        member.onEnd = undefined;
        resolve(false);
      }, ms);
      member.onEnd = () => {
        clearTimeout(timer);
        member.onEnd = undefined;
        resolve(true);
      };
    });
  }

  /**
   * `systemctl stop` (SIGTERM to the unit's cgroup, SIGKILL after TimeoutStopSec = the spec's grace), then
   * `systemctl kill --signal=SIGKILL`, `reset-failed` and the env file removed; idempotent. After it
   * resolves no event of the member is reported.
   */
  async stop(memberId: string, graceMs: number): Promise<void> {
    const member = this.#members.get(memberId);
    if (member === undefined) return;
    member.stopping = true;
    const result = await this.#cli.run("stop", member.at.instance, this.#become(["sh", "-c", stopScript(member.unit)]), {
      timeoutMs: graceMs + this.#config.stopExtraMs,
    });
    if (result.exitCode !== 0) {
      this.#stopFailures++;
      this.#context.record?.("backend-warning", {
        member: memberId,
        message: `stopping ${member.unit} on ${member.at.instance} failed (${result.timedOut ? "timed out" : `exit ${result.exitCode}`}): ${lastLine(result.stderr) || "no output"}`,
      });
    }
  }

  /**
   * Ends the journal streams: closes each stream's stdin (the instance-side script then kills its journalctl, see
   * {@link JOURNAL_SCRIPT}), and if the `multipass exec` has not exited after {@link CLOSE_GRACE_MS}, SIGTERM, then
   * SIGKILL and its pipes destroyed {@link CLOSE_GRACE_MS} later (a process on the far side may still hold them).
   */
  async close(): Promise<void> {
    this.#closing = true;
    await Promise.all(
      [...this.#streams.values()].map(async (stream) => {
        const { child } = stream;
        child.stdin?.end();
        const exited = (ms: number) => Promise.race([stream.done.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
        if (await exited(CLOSE_GRACE_MS)) return;
        child.kill("SIGTERM");
        if (await exited(CLOSE_GRACE_MS)) return;
        child.kill("SIGKILL");
        child.stdout?.destroy();
        child.stderr?.destroy();
        await exited(CLOSE_GRACE_MS);
      }),
    );
    this.#streams.clear();
  }

  /** See {@link SystemdBackendStats}. */
  stats(): SystemdBackendStats {
    return {
      backend: "systemd",
      instances: Object.fromEntries(this.#usedInstances().map((at) => [at.machine, at.instance])),
      members: this.#members.size,
      execCalls: { ...this.#cli.calls },
      journalEntries: this.#journalEntries,
      stopFailures: this.#stopFailures,
    };
  }
}

/** systemd-run's stderr without its `Running as unit: ...` line, on one line. */
function systemdRunError(stderr: string): string {
  return stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("Running as unit"))
    .join(" ");
}

function lastLine(text: string): string {
  const lines = text.trim().split("\n");
  return (lines[lines.length - 1] ?? "").trim();
}

function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join(REDACTED);
  return out;
}

/**
 * The registry's factory (runtime/backends/index.ts): settings come from `--backend-config` / `--backend-option`.
 *
 * @throws {SpecError} on an invalid config, naming the field (`systemd.<field>`)
 */
export function createSystemdBackend(context: BackendContext): SystemdBackend {
  return new SystemdBackend(context);
}

/**
 * A substitute for the `pulumi-resource-command` plugin, used only when the upstream Go binary cannot be
 * obtained (see docs/toolchain.md): the Go module proxy reachable here does not serve
 * github.com/pulumi/pulumi-command/provider at any version (403 "This module version is not available" for
 * `@v/list`, for the v1.2.1 commit and for its pseudo-versions), and no official archive SHA-256 is pinned.
 *
 * It implements, with the semantics of upstream v1.2.1 (provider/pkg/provider/local/*.go), the parts of the
 * `command` package that run on this machine:
 * - resource `command:local:Command`: `create` runs once on create; `update` (or `create` when `update` is
 *   unset) runs when any input changes; a change of `triggers` replaces the resource; `delete` runs the command
 *   stored in state; `PULUMI_COMMAND_STDOUT`/`PULUMI_COMMAND_STDERR` carry the previous outputs unless
 *   `addPreviousOutputInEnv` is false; stdout/stderr lose one trailing newline; `interpreter` defaults to
 *   `["/bin/sh", "-c"]`; `dir` defaults to the provider's working directory (the project); `environment` is
 *   added to the provider's environment; `stdin`; `logging` streams lines to the engine as ephemeral info;
 *   `assetPaths`/`archivePaths` globs (gobwas syntax: `*`, `**`, `!` excludes, evaluated in order).
 *   Extension (not upstream): `environment.COHORT_STATUS_FD: "3"` opens fd 3 of the command as a status pipe whose
 *   lines are logged as ephemeral info and never captured ({@link STATUS_FD_ENV}).
 * - function `command:local:run`, the same run for an invoke.
 * The `command:remote:*` resources (SSH) are refused with an error naming the missing upstream plugin.
 *
 * @see https://github.com/pulumi/pulumi-command/tree/v1.2.1/provider/pkg/provider/local
 */
import { spawn } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

/** The wire marker of a secret, an asset or an archive in property values (pulumi sdk/go/common/resource/sig). */
export const sig = {
  key: "4dabf18193072939515e22adb298388d",
  secret: "1b47061264138c4ac30d75fd1eb44270",
  asset: "c44067f5952c0a294b673a41bacd8c17",
  archive: "0def7320c3a5731c473e5ecbe6d01bc7",
} as const;

/** The value the engine sends for a property that is not known yet (during preview). */
export const unknownValue = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/** Inputs shared by `command:local:Command` and `command:local:run`. */
export interface LocalInputs {
  create?: string;
  update?: string;
  delete?: string;
  command?: string;
  dir?: string;
  environment?: Record<string, string>;
  interpreter?: string[];
  stdin?: string;
  logging?: "stdout" | "stderr" | "stdoutAndStderr" | "none";
  assetPaths?: string[];
  archivePaths?: string[];
  addPreviousOutputInEnv?: boolean;
  triggers?: unknown[];
}

/** The input properties of `command:local:Command`, in the order diffs report them. */
export const commandInputKeys = [
  "triggers",
  "create",
  "update",
  "delete",
  "stdin",
  "logging",
  "interpreter",
  "dir",
  "environment",
  "assetPaths",
  "archivePaths",
  "addPreviousOutputInEnv",
] as const;

/** Removes secret wrappers, recursively. */
export function unwrapSecrets(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(unwrapSecrets);
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (o[sig.key] === sig.secret) return unwrapSecrets(o.value);
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, unwrapSecrets(x)]));
  }
  return v;
}

function containsUnknown(v: unknown): boolean {
  if (v === unknownValue) return true;
  if (Array.isArray(v)) return v.some(containsUnknown);
  if (v !== null && typeof v === "object") return Object.values(v as Record<string, unknown>).some(containsUnknown);
  return false;
}

/** One failed input check. */
export interface CheckFailure {
  property: string;
  reason: string;
}

/**
 * Type checks of the inputs (unknown values pass).
 *
 * @returns one failure per property of the wrong type, naming the property and the expected type.
 */
export function checkInputs(raw: Record<string, unknown>, requireCommand: boolean): CheckFailure[] {
  const failures: CheckFailure[] = [];
  const v = unwrapSecrets(raw) as Record<string, unknown>;
  const isUnknown = (x: unknown) => x === unknownValue;
  const str = (k: string) => {
    if (v[k] !== undefined && v[k] !== null && !isUnknown(v[k]) && typeof v[k] !== "string") failures.push({ property: k, reason: `${k} must be a string` });
  };
  const strList = (k: string) => {
    const x = v[k];
    if (x === undefined || x === null || isUnknown(x)) return;
    if (!Array.isArray(x) || x.some((e) => typeof e !== "string" && !isUnknown(e))) failures.push({ property: k, reason: `${k} must be a list of strings` });
  };
  for (const k of ["create", "update", "delete", "dir", "stdin"]) str(k);
  if (requireCommand) {
    if (v.command === undefined || v.command === null) failures.push({ property: "command", reason: "command is required" });
    else str("command");
  }
  strList("interpreter");
  strList("assetPaths");
  strList("archivePaths");
  const env = v.environment;
  if (env !== undefined && env !== null && !isUnknown(env)) {
    if (typeof env !== "object" || Array.isArray(env)) failures.push({ property: "environment", reason: "environment must be a map of strings" });
    else
      for (const [k, x] of Object.entries(env as Record<string, unknown>)) {
        if (typeof x !== "string" && !isUnknown(x)) failures.push({ property: `environment.${k}`, reason: `environment.${k} must be a string` });
      }
  }
  const logging = v.logging;
  if (logging !== undefined && logging !== null && !isUnknown(logging) && !["stdout", "stderr", "stdoutAndStderr", "none"].includes(logging as string)) {
    failures.push({ property: "logging", reason: `logging must be one of stdout, stderr, stdoutAndStderr, none; got ${JSON.stringify(logging)}` });
  }
  const prev = v.addPreviousOutputInEnv;
  if (prev !== undefined && prev !== null && !isUnknown(prev) && typeof prev !== "boolean") {
    failures.push({ property: "addPreviousOutputInEnv", reason: "addPreviousOutputInEnv must be a boolean" });
  }
  if (v.triggers !== undefined && v.triggers !== null && !isUnknown(v.triggers) && !Array.isArray(v.triggers)) {
    failures.push({ property: "triggers", reason: "triggers must be a list" });
  }
  return failures;
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    return `{${Object.keys(v as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v ?? null);
}

/** Result of {@link diffInputs}. */
export interface DiffResult {
  /** Input properties whose value changed (or may change: unknown). */
  changed: string[];
  /** Properties that force a replacement (only `triggers`). */
  replaces: string[];
}

/**
 * Compares old state with new inputs over {@link commandInputKeys}; secrets compare by value, and an unknown
 * new value counts as a change. A change of `triggers` forces a replacement (upstream `replaceOnChanges`).
 */
export function diffInputs(olds: Record<string, unknown>, news: Record<string, unknown>): DiffResult {
  const changed: string[] = [];
  for (const k of commandInputKeys) {
    const a = unwrapSecrets(olds[k]);
    const b = unwrapSecrets(news[k]);
    if (containsUnknown(b) || canonical(a) !== canonical(b)) changed.push(k);
  }
  return { changed, replaces: changed.includes("triggers") ? ["triggers"] : [] };
}

/** Translates a gobwas-style glob (`/` separator) to a RegExp. */
export function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i] as string;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        re += ".*";
        i++;
      } else re += "[^/]*";
    } else if (c === "?") re += "[^/]";
    else if (c === "{") {
      const end = glob.indexOf("}", i);
      if (end < 0) re += "\\{";
      else {
        re += `(?:${glob
          .slice(i + 1, end)
          .split(",")
          .map((s) => s.replace(/[.+^$()|[\]\\]/g, "\\$&"))
          .join("|")})`;
        i = end;
      }
    } else if (c === "[") {
      const end = glob.indexOf("]", i);
      if (end < 0) re += "\\[";
      else {
        re += `[${glob.slice(i + 1, end).replace(/^!/, "^")}]`;
        i = end;
      }
    } else re += c.replace(/[.+^$()|\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/**
 * Files under `dir` matched by the globs (paths relative to `dir`, `/`-separated, files only; a `!` glob removes
 * earlier matches), in walk order.
 */
export function globFiles(dir: string, globs: readonly string[]): string[] {
  const rules = globs.map((g) => ({ exclude: g.startsWith("!"), re: globToRegExp(g.replace(/^!/, "")) }));
  const found = new Set<string>();
  const walk = (rel: string) => {
    const entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      const p = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else for (const r of rules) if (r.re.test(p)) r.exclude ? found.delete(p) : found.add(p);
    }
  };
  walk("");
  return [...found];
}

/**
 * `environment` key that asks for the status pipe (an extension of this substitute; upstream ignores it): with the
 * value `"3"`, the command's fd 3 is a pipe whose lines are logged as ephemeral info and never captured.
 */
export const STATUS_FD_ENV = "COHORT_STATUS_FD";

/** How long the status pipe may stay open after the command exited and closed stdout/stderr (ms). */
const STATUS_DRAIN_MS = 250;

/** Commands running now (every {@link runCommand}), for {@link cancelRunningCommands}. */
const running = new Set<import("node:child_process").ChildProcess>();

/**
 * Sends `signal` to every command this provider is running (the engine's Cancel, or the provider's parent, the
 * Pulumi CLI, gone) and resolves once all of them have exited. Upstream v1.2.1 cancels the command's context,
 * which SIGKILLs it; a cohort run needs its grace period to stop its members and complete its ledger, so the
 * substitute sends SIGTERM instead and waits (the cohort step script forwards it to the runtime).
 *
 * @returns how many commands were signalled
 */
export async function cancelRunningCommands(signal: NodeJS.Signals = "SIGTERM"): Promise<number> {
  const children = [...running];
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once("close", () => resolve());
          child.kill(signal);
        }),
    ),
  );
  return children.length;
}

/** Sink for output lines logged to the engine. */
export type LineLogger = (line: string) => void;

/** Captured result of one run. */
export interface RunOutputs {
  stdout: string;
  stderr: string;
  assets?: Record<string, unknown>;
  archive?: unknown;
}

/**
 * Runs `command` with the inputs' interpreter, dir, environment and stdin, the way upstream `run` does.
 *
 * @param previous - stdout/stderr of the previous create/update, exported as PULUMI_COMMAND_STDOUT/STDERR unless
 *   `addPreviousOutputInEnv` is false.
 * @throws Error `<reason>: running "<command>":\n<interleaved stdout and stderr>` when the command cannot start or
 *   exits non-zero.
 */
export async function runCommand(
  command: string,
  inputs: LocalInputs,
  previous: { stdout?: string; stderr?: string },
  log: LineLogger,
  baseEnv: NodeJS.ProcessEnv = process.env,
): Promise<RunOutputs> {
  const argv = inputs.interpreter !== undefined && inputs.interpreter.length > 0 ? [...inputs.interpreter, command] : ["/bin/sh", "-c", command];
  const cwd = inputs.dir ?? process.cwd();
  const env: NodeJS.ProcessEnv = { ...baseEnv, ...(inputs.environment ?? {}) };
  if (inputs.addPreviousOutputInEnv !== false) {
    if (previous.stdout) env.PULUMI_COMMAND_STDOUT = previous.stdout;
    if (previous.stderr) env.PULUMI_COMMAND_STDERR = previous.stderr;
  }
  const logging = inputs.logging ?? "stdoutAndStderr";
  const logOut = logging === "stdout" || logging === "stdoutAndStderr";
  const logErr = logging === "stderr" || logging === "stdoutAndStderr";
  let stdout = "";
  let stderr = "";
  let both = "";
  const pending: Record<"out" | "err", string> = { out: "", err: "" };
  const emit = (which: "out" | "err", chunk: string, flush: boolean) => {
    if (!(which === "out" ? logOut : logErr)) return;
    const text = pending[which] + chunk;
    const lines = text.split("\n");
    pending[which] = flush ? "" : (lines.pop() as string);
    for (const line of flush ? lines.filter((l, i) => i < lines.length - 1 || l !== "") : lines) log(line);
  };
  // Extension (not in upstream): `environment.COHORT_STATUS_FD: "3"` opens fd 3 of the command as a status pipe
  // whose lines go to the engine as ephemeral info, whatever `logging` says, and are NOT captured: they are in
  // neither the stdout/stderr outputs (the state) nor the failure message.
  const statusFd = inputs.environment?.[STATUS_FD_ENV] === "3";
  let statusPending = "";
  const emitStatus = (chunk: string, flush: boolean) => {
    const lines = (statusPending + chunk).split("\n");
    statusPending = flush ? "" : (lines.pop() as string);
    for (const line of lines) if (line !== "") log(line);
  };
  const { code, signal, error } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    const child = spawn(argv[0] as string, argv.slice(1), { cwd, env, stdio: statusFd ? ["pipe", "pipe", "pipe", "pipe"] : ["pipe", "pipe", "pipe"] });
    running.add(child);
    child.on("close", () => running.delete(child));
    child.on("error", (err) => {
      running.delete(child);
      resolve({ code: null, signal: null, error: err });
    });
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      both += d;
      emit("out", d, false);
    });
    child.stderr!.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
      both += d;
      emit("err", d, false);
    });
    child.stdin!.on("error", () => undefined);
    child.stdin!.end(inputs.stdin !== undefined && inputs.stdin.length > 0 ? inputs.stdin : undefined);
    if (!statusFd) {
      child.on("close", (c, s) => resolve({ code: c, signal: s }));
      return;
    }
    // The status pipe does not hold the command open: a process the command left behind (a member that
    // inherited fd 3) must not delay the result. Done = exited, and stdout and stderr closed.
    const status = child.stdio[3] as NodeJS.ReadableStream & { destroy(): void };
    status.setEncoding("utf8");
    status.on("data", (d: string) => emitStatus(d, false));
    status.on("error", () => undefined);
    const closed = (stream: NodeJS.ReadableStream) => new Promise<void>((done) => stream.once("close", () => done()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once("exit", (c, s) => done({ code: c, signal: s })));
    const statusEnded = new Promise<void>((done) => {
      status.once("end", () => done());
      status.once("close", () => done());
    });
    void Promise.all([exited, closed(child.stdout!), closed(child.stderr!)]).then(async ([result]) => {
      // Normally every writer is gone and the pipe ends at once, after its last lines were read; a process left
      // holding fd 3 gets STATUS_DRAIN_MS, then the pipe is closed.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([statusEnded, new Promise<void>((done) => (timer = setTimeout(done, STATUS_DRAIN_MS)))]);
      clearTimeout(timer);
      status.destroy();
      resolve(result);
    });
  });
  if (statusFd) emitStatus("", true);
  emit("out", "", true);
  emit("err", "", true);
  if (error !== undefined || code !== 0) {
    const why = error !== undefined ? error.message : signal !== null ? `signal: ${signal}` : `exit status ${code}`;
    throw new Error(`${why}: running ${JSON.stringify(command)}:\n${both}`);
  }
  const out: RunOutputs = { stdout: stdout.replace(/\n$/, ""), stderr: stderr.replace(/\n$/, "") };
  if (inputs.assetPaths !== undefined) {
    out.assets = Object.fromEntries(globFiles(cwd, inputs.assetPaths).map((p) => [p, { [sig.key]: sig.asset, path: path.join(cwd, p) }]));
  }
  if (inputs.archivePaths !== undefined) {
    const assets = Object.fromEntries(globFiles(cwd, inputs.archivePaths).map((p) => [p, { [sig.key]: sig.asset, path: path.join(cwd, p) }]));
    out.archive = { [sig.key]: sig.archive, assets };
  }
  return out;
}

/** The resource name in a URN (`urn:pulumi:<stack>::<project>::<type>::<name>`). */
export function urnName(urn: string): string {
  return urn.slice(urn.lastIndexOf("::") + 2);
}

/** A new id as upstream `resource.NewUniqueHex(name, 8, 0)`: the name plus 8 random hex digits. */
export function newId(name: string): string {
  return `${name}${crypto.randomBytes(4).toString("hex")}`;
}

const remoteRefusal = (what: string) =>
  new Error(
    `${what} needs the upstream pulumi-resource-command plugin; this toolchain runs a substitute that implements ` +
      `only command:local:Command and command:local:run (see docs/toolchain.md)`,
  );

/** Minimal provider surface (the shape @pulumi/pulumi/provider's `main` serves). */
export interface CommandProvider {
  version: string;
  check(urn: string, olds: Record<string, unknown>, news: Record<string, unknown>): Promise<{ inputs: Record<string, unknown>; failures: CheckFailure[] }>;
  diff(id: string, urn: string, olds: Record<string, unknown>, news: Record<string, unknown>): Promise<{ changes: boolean; replaces: string[]; deleteBeforeReplace: boolean }>;
  create(urn: string, inputs: Record<string, unknown>): Promise<{ id: string; outs: Record<string, unknown> }>;
  read(id: string, urn: string, props: Record<string, unknown>): Promise<{ id: string; props: Record<string, unknown> }>;
  update(id: string, urn: string, olds: Record<string, unknown>, news: Record<string, unknown>): Promise<{ outs: Record<string, unknown> }>;
  delete(id: string, urn: string, props: Record<string, unknown>): Promise<void>;
  invoke(token: string, args: Record<string, unknown>): Promise<{ outputs: Record<string, unknown>; failures: CheckFailure[] }>;
  /** The engine's Cancel (first Ctrl-C of `pulumi up`): see {@link cancelRunningCommands}. */
  cancel(): Promise<void>;
}

function typeOf(urn: string): string {
  const parts = urn.split("::");
  const t = parts[2] ?? "";
  return t.slice(t.lastIndexOf("$") + 1);
}

/**
 * Builds the substitute provider.
 *
 * @param version - version it reports (the pinned @pulumi/command version).
 * @param logFor - returns the line logger for a resource URN (engine ephemeral info).
 */
export function makeCommandProvider(version: string, logFor: (urn: string) => LineLogger): CommandProvider {
  const local = "command:local:Command";
  const ensureLocal = (urn: string) => {
    const t = typeOf(urn);
    if (t !== local) throw remoteRefusal(t);
  };
  return {
    version,
    async check(urn, _olds, news) {
      ensureLocal(urn);
      return { inputs: news, failures: checkInputs(news, false) };
    },
    async diff(_id, urn, olds, news) {
      ensureLocal(urn);
      const d = diffInputs(olds, news);
      return { changes: d.changed.length > 0, replaces: d.replaces, deleteBeforeReplace: false };
    },
    async create(urn, inputs) {
      ensureLocal(urn);
      const id = newId(urnName(urn));
      const v = unwrapSecrets(inputs) as LocalInputs;
      if (v.create === undefined) return { id, outs: { ...inputs, stdout: "", stderr: "" } };
      const out = await runCommand(v.create, v, {}, logFor(urn));
      return { id, outs: { ...inputs, ...out } };
    },
    async read(id, _urn, props) {
      return { id, props };
    },
    async update(_id, urn, olds, news) {
      ensureLocal(urn);
      const v = unwrapSecrets(news) as LocalInputs;
      const previous = { stdout: unwrapSecrets(olds.stdout) as string | undefined, stderr: unwrapSecrets(olds.stderr) as string | undefined };
      const cmd = v.update ?? v.create;
      if (cmd === undefined) return { outs: { ...news, stdout: previous.stdout ?? "", stderr: previous.stderr ?? "" } };
      const out = await runCommand(cmd, v, previous, logFor(urn));
      return { outs: { ...news, ...out } };
    },
    async delete(_id, urn, props) {
      ensureLocal(urn);
      const v = unwrapSecrets(props) as LocalInputs & { stdout?: string; stderr?: string };
      if (v.delete === undefined) return;
      await runCommand(v.delete, v, { stdout: v.stdout, stderr: v.stderr }, logFor(urn));
    },
    async invoke(token, args) {
      if (token !== "command:local:run") throw remoteRefusal(token);
      const failures = checkInputs(args, true);
      if (failures.length > 0) return { outputs: {}, failures };
      const v = unwrapSecrets(args) as LocalInputs;
      const out = await runCommand(v.command as string, v, {}, logFor(""));
      return { outputs: { ...args, ...out }, failures: [] };
    },
    async cancel() {
      await cancelRunningCommands("SIGTERM");
    },
  };
}

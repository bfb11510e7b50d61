/**
 * Runs `pulumi up|preview|refresh|destroy` with the project's program served by the SDK's own in-process
 * language runtime, the path the Automation API uses for inline programs: a gRPC `LanguageRuntime` server
 * (`LanguageServer` from @pulumi/pulumi/automation/server) on 127.0.0.1, and the CLI started with
 * `--client=127.0.0.1:<port> --exec-kind auto.inline`. The engine then calls this process to run the program
 * instead of launching `pulumi-language-nodejs` (which cannot be built here; see scripts/run.ts).
 *
 * The program is the project's entry module (Pulumi.yaml `main`, else package.json `main`, else `index.ts`),
 * loaded with `require` under tsx; its exports become the stack outputs, and an exported function is called
 * and awaited, as the nodejs language host does.
 *
 * Requires Node >= 22 (execa, and @pulumi/pulumi >= 3.249).
 *
 * @see https://github.com/pulumi/pulumi/blob/v3.259.0/sdk/nodejs/automation/stack.ts (inline programs)
 * @see https://github.com/pulumi/pulumi/blob/v3.259.0/sdk/nodejs/cmd/run/run.ts (how exports become outputs)
 */
import * as fs from "node:fs";
import * as os from "node:os";
import { createRequire } from "node:module";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { insertAfterSubcommand, type PulumiInvocation } from "./pulumi-args";
import { forwardSignals, loadExeca } from "./process";

/** A Pulumi project found on disk. */
export interface PulumiProject {
  /** Directory holding Pulumi.yaml. */
  readonly dir: string;
  /** Project name. */
  readonly name: string;
  /** Runtime name (`nodejs` for this launcher). */
  readonly runtime: string;
  /** Absolute path of the program's entry module. */
  readonly entry: string;
}

/** Raised when the project file cannot be used; the message names the file and field. */
export class ProjectError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProjectError";
  }
}

function entryOfDir(dir: string): string {
  const pkgFile = path.join(dir, "package.json");
  if (fs.existsSync(pkgFile)) {
    const main = (JSON.parse(fs.readFileSync(pkgFile, "utf8")) as { main?: unknown }).main;
    if (typeof main === "string" && main !== "") return path.resolve(dir, main);
  }
  for (const name of ["index.ts", "index.js"]) if (fs.existsSync(path.join(dir, name))) return path.join(dir, name);
  throw new ProjectError(`${dir}: no program entry (package.json "main", index.ts or index.js)`);
}

/**
 * Finds the project for a command line: Pulumi.yaml (or .yml) in the `-C` directory or the current directory
 * or any parent, as the CLI does.
 *
 * @returns the project, or `undefined` when there is no project file (the CLI reports that itself).
 * @throws ProjectError when Pulumi.yaml is unreadable or names an entry that does not exist.
 */
export function findProject(startDir: string): PulumiProject | undefined {
  for (let dir = path.resolve(startDir); ; dir = path.dirname(dir)) {
    for (const file of ["Pulumi.yaml", "Pulumi.yml"]) {
      const full = path.join(dir, file);
      if (!fs.existsSync(full)) continue;
      let doc: { name?: unknown; runtime?: unknown; main?: unknown };
      try {
        doc = (parseYaml(fs.readFileSync(full, "utf8")) ?? {}) as typeof doc;
      } catch (err) {
        throw new ProjectError(`${full}: not valid YAML: ${(err as Error).message}`);
      }
      const runtime = typeof doc.runtime === "string" ? doc.runtime : (doc.runtime as { name?: unknown } | undefined)?.name;
      if (typeof runtime !== "string") throw new ProjectError(`${full}: runtime: expected a runtime name`);
      const name = typeof doc.name === "string" ? doc.name : "";
      let entry = dir;
      if (doc.main !== undefined) {
        if (typeof doc.main !== "string") throw new ProjectError(`${full}: main: expected a path`);
        entry = path.resolve(dir, doc.main);
        if (!fs.existsSync(entry)) throw new ProjectError(`${full}: main: ${doc.main} does not exist`);
      }
      if (fs.statSync(entry).isDirectory()) entry = entryOfDir(entry);
      return { dir, name, runtime, entry };
    }
    if (path.dirname(dir) === dir) return undefined;
  }
}

/** The part of the SDK's `LanguageServer` that {@link reportErrorsOnce} wraps: a gRPC unary handler per method. */
export type LanguageRuntimeImpl = Record<string, unknown> & {
  run(call: unknown, callback: (err: Error | null | undefined, resp?: unknown) => void): unknown;
};

/**
 * Wraps the SDK's in-process `LanguageServer` so that a failing program's error is printed ONCE. The SDK
 * (3.259, automation/server.js) logs an error the program throws (a `RunError` as its message) as an
 * engine diagnostic from its unhandled-rejection handler, and then ALSO answers `Run` with that error, which
 * the engine prints a second time (`2 errors`). The nodejs language host avoids this by answering
 * `bail: true` ("already reported"); this wrapper does the same: when `Run` fails and the run has already
 * logged an error (`log.hasErrors()`, read in the run's own async context), the answer is a `RunResponse`
 * with `bail` set instead of the error. An error that was not logged is passed on as is, so it is printed
 * once by the engine, and so is the SDK's summary for a program that logged errors and returned normally
 * (`One or more errors occurred`, which the engine would print as `BAIL: run bailed`). The handler's second callback (the SDK calls it twice on failure) is dropped.
 *
 * @param server - the SDK's `LanguageServer` instance (its methods are gRPC unary handlers)
 * @param log - the SDK's `log` module of the same copy (`hasErrors()`)
 * @param bailResponse - makes an empty `RunResponse` of the same SDK copy
 * @returns a service implementation with every method of `server`, `run` wrapped
 */
export function reportErrorsOnce(server: LanguageRuntimeImpl, log: { hasErrors(): boolean }, bailResponse: () => { setBail(bail: boolean): void }): LanguageRuntimeImpl {
  const impl: Record<string, unknown> = {};
  for (let proto: object | null = server; proto !== null && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const value = (server as Record<string, unknown>)[name];
      if (name !== "constructor" && typeof value === "function" && !(name in impl)) impl[name] = (value as (...a: unknown[]) => unknown).bind(server);
    }
  }
  impl.run = (call: unknown, callback: (err: Error | null | undefined, resp?: unknown) => void): unknown => {
    let answered = false;
    return server.run(call, (err, resp) => {
      if (answered) return;
      answered = true;
      // "One or more errors occurred" is the SDK's own summary for a program that logged errors and
      // returned: the engine prints a bail in that case as "BAIL: run bailed", so it is passed on as is.
      if (err !== null && err !== undefined && log.hasErrors() && !err.message.startsWith("One or more errors occurred")) {
        const bail = bailResponse();
        bail.setBail(true);
        callback(null, bail);
        return;
      }
      callback(err, resp);
    });
  };
  return impl as LanguageRuntimeImpl;
}

/**
 * The line the launcher adds after the CLI's `no stack named '<stack>' found`: which backend was searched,
 * so that a backend override left unset (or set) by mistake is visible.
 *
 * @param stderrTail - the end of the CLI's stderr (the last few KiB are enough)
 * @param backendUrl - the backend URL the CLI was given (`PULUMI_BACKEND_URL`)
 * @param fromEnv - whether it came from `COHORT_PULUMI_BACKEND_URL` (else it is the launcher's default)
 * @returns the line without a newline, or `undefined` when the CLI did not report a missing stack
 */
export function missingStackHint(stderrTail: string, backendUrl: string, fromEnv: boolean): string | undefined {
  const stack = /no stack named '([^']+)' found/.exec(stderrTail)?.[1];
  if (stack === undefined) return undefined;
  return fromEnv
    ? `cohort-lab: backend searched: ${backendUrl} (COHORT_PULUMI_BACKEND_URL); unset it to use the project's .pulumi-state/, or create the stack there with \`npm run pulumi -- stack select --create ${stack}\``
    : `cohort-lab: backend searched: ${backendUrl} (the launcher's default; COHORT_PULUMI_BACKEND_URL is unset); create the stack with \`npm run pulumi -- stack select --create ${stack}\`, or set COHORT_PULUMI_BACKEND_URL to the backend that has it`;
}

/**
 * Lines the launcher adds after the diy backend's `the stack is currently locked by N lock(s)`: for each lock
 * created on this host, whether the `pulumi` that made it is still running. A lock whose pid is gone was left
 * by a killed CLI (SIGKILL, a cancelled CI job): the line gives the exact command that removes it; the cohort run
 * that CLI started ends by itself (the runtime watches its provider), and the next `up` refuses to start beside
 * it while it is still stopping, naming it.
 *
 * @param stderrTail - the end of the CLI's stderr
 * @param args - the arguments after `pulumi` (for `--stack`/`-s`)
 * @param alive - whether a pid is a live process on this host. @default reads /proc (kill(pid, 0) elsewhere)
 * @returns lines without newlines (none when the CLI did not report a lock)
 */
export function staleLockHints(stderrTail: string, args: readonly string[], host: string = os.hostname(), alive: (pid: number) => boolean = pidAlive): string[] {
  if (!stderrTail.includes("the stack is currently locked by")) return [];
  const stackAt = args.findIndex((a) => a === "--stack" || a === "-s");
  const stackArg = stackAt >= 0 ? args[stackAt + 1] : args.find((a) => a.startsWith("--stack="))?.slice("--stack=".length);
  const stackFlag = stackArg !== undefined ? ` --stack ${stackArg}` : "";
  const hints: string[] = [];
  for (const m of stderrTail.matchAll(/^\s+(\S+): created by (\S*)@(\S+) \(pid (\d+)\) at (.+)$/gm)) {
    const [, url, , lockHost, pidText] = m;
    const pid = Number(pidText);
    if (lockHost !== host) {
      hints.push(
        `cohort-lab: ${url} was created on ${lockHost}, not this host (${host}): check there whether pid ${pid} still runs before \`npm run pulumi -- cancel${stackFlag} --yes\``,
      );
    } else if (alive(pid)) {
      hints.push(
        `cohort-lab: pid ${pid} (the pulumi that holds ${url}) is still running on this host: wait for it, or interrupt it once (\`kill -INT ${pid}\`: Pulumi cancels gracefully and its cohort run ends as interrupted)`,
      );
    } else {
      hints.push(
        `cohort-lab: ${url} is stale: pid ${pid} on this host is gone (a killed pulumi); remove it with \`npm run pulumi -- cancel${stackFlag} --yes\`, then run the command again (a cohort run the killed pulumi started stops by itself; the next up refuses to start beside it while it does)`,
      );
    }
  }
  return hints;
}

/** The `--stack`/`-s` value of a `pulumi` argument list, if given. */
export function stackArgument(args: readonly string[]): string | undefined {
  const at = args.findIndex((a) => a === "--stack" || a === "-s");
  if (at >= 0) return args[at + 1];
  return args.find((a) => a.startsWith("--stack="))?.slice("--stack=".length);
}

/**
 * Lines the launcher prints before `up`, `preview` and `destroy` when the stack's state (file backend) holds
 * pending CREATE operations, left by a `pulumi up` that was killed while a resource was being created (the
 * cohort run, typically). Pulumi 3.259 keeps them through later `up`s and `destroy`s; it warns on `up` only,
 * saying that `pulumi refresh` must run interactively, and says nothing on `preview` or `destroy`. The line
 * gives the non-interactive command that clears them. The run itself has been stopped (its runtime watches its
 * provider; `destroy` reaps what the run lock names), so there is nothing to import.
 *
 * @param backendUrl - `PULUMI_BACKEND_URL` (only `file://` backends are read)
 * @returns lines without newlines (none when nothing is pending or the state cannot be read)
 */
export function pendingCreateHints(backendUrl: string, project: string, stack: string | undefined): string[] {
  if (stack === undefined || !backendUrl.startsWith("file://") || project === "") return [];
  const name = stack.split("/").at(-1) as string;
  const file = path.join(backendUrl.slice("file://".length), ".pulumi", "stacks", project, `${name}.json`);
  let pending: { resource?: { urn?: string }; type?: string }[];
  try {
    const doc = JSON.parse(fs.readFileSync(file, "utf8")) as { checkpoint?: { latest?: { pending_operations?: typeof pending } } };
    pending = doc.checkpoint?.latest?.pending_operations ?? [];
  } catch {
    return [];
  }
  const creates = pending.filter((op) => op.type === "creating");
  if (creates.length === 0) return [];
  const hints = [
    `cohort-lab: stack ${stack} holds ${creates.length} pending create(s) left by an interrupted \`pulumi up\` (${creates.map((op) => op.resource?.urn ?? "?").join(", ")}); ` +
      `Pulumi keeps them until they are cleared. Clear them with \`npm run pulumi -- refresh --clear-pending-creates --stack ${stack} --yes\``,
  ];
  // A cut-off VM launch may have made a VM that no state records: only the next `up` finds it (by its owner marker)
  // and adopts it, so a `destroy` straight after clearing would leave it running (components/multipass/MultipassFleet.ts).
  if (creates.some((op) => (op.resource?.urn ?? "").includes("cohortlab:multipass:MultipassFleet$"))) {
    hints.push(
      `cohort-lab: a pending create is a Multipass VM launch: the VM may exist. After clearing, run \`npm run pulumi -- up --yes --stack ${stack}\` (it adopts VMs with this stack's owner marker) before any \`destroy\`; a destroy straight after clearing leaves such VMs running`,
    );
  }
  return hints;
}

function pidAlive(pid: number): boolean {
  if (fs.existsSync("/proc/self/stat")) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Copies a child's stderr to this process's stderr as it comes and keeps its last `keep` characters.
 *
 * @returns a function giving the kept tail so far
 */
export function teeStderr(stream: NodeJS.ReadableStream | null | undefined, keep = 8192): () => string {
  let tail = "";
  stream?.on("data", (chunk: Buffer | string) => {
    process.stderr.write(chunk);
    tail = (tail + chunk.toString()).slice(-keep);
  });
  return () => tail;
}

/** Options of {@link runPulumiInline}. */
export interface InlineRunOptions {
  /** The `pulumi` executable. */
  readonly pulumiBin: string;
  /** Arguments after `pulumi`, as the user gave them. */
  readonly args: readonly string[];
  /** Parsed arguments. */
  readonly invocation: PulumiInvocation;
  /** The project whose program to serve. */
  readonly project: PulumiProject;
  /** Environment of the CLI. */
  readonly env: Record<string, string>;
  /** Whether the backend URL in `env` came from `COHORT_PULUMI_BACKEND_URL` (for {@link missingStackHint}). @default false */
  readonly backendFromEnv?: boolean;
}

/** Exit status of the CLI. */
export interface ExitStatus {
  readonly exitCode?: number;
  readonly signal?: NodeJS.Signals;
}

/**
 * Serves the project's program over the SDK's in-process language runtime and runs the CLI against it,
 * with stdio inherited and signals forwarded.
 *
 * @returns the CLI's exit status.
 * @throws Error when @pulumi/pulumi cannot be loaded from the project directory or the gRPC server cannot bind.
 */
export async function runPulumiInline(o: InlineRunOptions): Promise<ExitStatus> {
  // Load the SDK copy the program itself will load (one copy of @pulumi/pulumi per process; pulumi#12942).
  const projectRequire = createRequire(path.join(o.project.dir, "__cohort_lab_host__.js"));
  const sdkRequire = createRequire(projectRequire.resolve("@pulumi/pulumi/package.json"));
  // `LanguageServer` is marked @internal, so its .d.ts is empty: describe the part used here.
  const { LanguageServer } = sdkRequire("./automation/server") as {
    LanguageServer: new (program: () => Promise<unknown>) => { onPulumiExit(hasError: boolean): void };
  };
  const langrpc = sdkRequire("./proto/language_grpc_pb") as { LanguageRuntimeService: import("@grpc/grpc-js").ServiceDefinition };
  const grpc = sdkRequire("@grpc/grpc-js") as typeof import("@grpc/grpc-js");
  const settings = sdkRequire("./runtime/settings") as { grpcChannelOptions: import("@grpc/grpc-js").ChannelOptions };

  let runs = 0;
  const program = async (): Promise<unknown> => {
    // `pulumi up` without --skip-preview runs the program twice in this process: forget the project's own
    // modules (not node_modules) so that the second run evaluates them afresh, as a new language host would.
    if (runs++ > 0) {
      for (const key of Object.keys(projectRequire.cache)) {
        if (!key.split(path.sep).includes("node_modules") && !key.startsWith(__dirname + path.sep)) delete projectRequire.cache[key];
      }
    }
    process.chdir(o.project.dir);
    const exported: unknown = projectRequire(o.project.entry);
    return typeof exported === "function" ? await (exported as () => unknown)() : exported;
  };

  const languageServer = new LanguageServer(program);
  const log = sdkRequire("./log") as { hasErrors(): boolean };
  const langproto = sdkRequire("./proto/language_pb") as { RunResponse: new () => { setBail(bail: boolean): void } };
  const server = new grpc.Server({ ...settings.grpcChannelOptions });
  server.addService(
    langrpc.LanguageRuntimeService,
    reportErrorsOnce(languageServer as unknown as LanguageRuntimeImpl, log, () => new langproto.RunResponse()) as unknown as import("@grpc/grpc-js").UntypedServiceImplementation,
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );

  const args = insertAfterSubcommand(o.args, o.invocation, [`--client=127.0.0.1:${port}`, "--exec-kind", "auto.inline"]);
  const { execa } = await loadExeca();
  // stderr is copied through (not inherited) so that a missing stack can be followed by the backend searched.
  const sub = execa(o.pulumiBin, args, { stdin: "inherit", stdout: "inherit", stderr: "pipe", buffer: false, env: o.env, extendEnv: false, reject: false, cwd: process.cwd() });
  const tail = teeStderr(sub.stderr);
  const stop = forwardSignals(sub);
  const result = await sub;
  stop();
  if (result.exitCode !== 0) {
    const hint = missingStackHint(tail(), o.env.PULUMI_BACKEND_URL ?? "", o.backendFromEnv ?? false);
    if (hint !== undefined) process.stderr.write(`${hint}\n`);
    for (const line of staleLockHints(tail(), o.args)) process.stderr.write(`${line}\n`);
  }
  try {
    languageServer.onPulumiExit(result.failed);
  } catch (err) {
    // The SDK reports promises the program left running; the CLI already finished, so only report it.
    process.stderr.write(`cohort-lab: ${(err as Error).message}\n`);
  }
  server.forceShutdown();
  return { exitCode: result.exitCode, signal: result.signal };
}

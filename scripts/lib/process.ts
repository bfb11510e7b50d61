/**
 * Process plumbing shared by the launchers: signal forwarding, exit-status propagation, and re-executing a
 * TypeScript script under another Node (with tsx's loader).
 *
 * Node-20-safe (`node:child_process`): the first stage of `scripts/run.ts` and `scripts/toolchain.ts` runs
 * under the system Node, where execa 10 (Node >= 22) is not available.
 */
import { spawn } from "node:child_process";
import * as os from "node:os";
import { pathToFileURL } from "node:url";

/** Something that can receive a signal (a ChildProcess or an execa subprocess). */
export interface Signalable {
  kill(signal?: NodeJS.Signals): boolean;
}

/** The signals a launcher passes on. */
const FORWARDED = ["SIGTERM", "SIGHUP", "SIGQUIT", "SIGINT"] as const;

/**
 * A signal the process group got within this many ms counts as the same event as one this process gets
 * directly: npm and tsx pass a group signal on to their child once more (npm's run-script signal manager,
 * tsx's relay), and those copies must not reach the child a second time.
 */
export const GROUP_ECHO_WINDOW_MS = 1000;

/** How long a signal waits for the sentinel's report before it is judged. */
const SENTINEL_WAIT_MS = 200;

/**
 * The sentinel: a shell in this process's group that reports each signal the GROUP gets (a terminal's Ctrl-C, a
 * `kill -INT -<pgid>` from a CI runner or `timeout`) on stdout, and exits when this process's pipe closes.
 * A signal sent to this process alone (`kill <pid>`) does not reach it. dash interrupts `read` for a trapped
 * signal with status 1, like EOF, hence the flag.
 */
const SENTINEL_SCRIPT = `for s in INT TERM HUP QUIT; do trap "echo $s; g=1" "$s"; done
while :; do g=0; read -r _; r=$?; if [ "$g" = 1 ]; then continue; fi; if [ "$r" -ne 0 ]; then exit 0; fi; done`;

/** Decides, for each signal this process gets, whether the child already got it. Exported for tests. */
export class GroupSignalWitness {
  private readonly lastGroup = new Map<string, number>();
  private alive = true;
  private readonly proc: ReturnType<typeof spawn> | undefined;

  constructor() {
    try {
      this.proc = spawn("/bin/sh", ["-c", SENTINEL_SCRIPT], { stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      this.alive = false;
      return;
    }
    this.proc.on("error", () => (this.alive = false));
    this.proc.on("exit", (_code, signal) => {
      // Killed by a signal before its traps were set: that too was a group signal.
      if (signal !== null) this.lastGroup.set(signal, Date.now());
      this.alive = false;
    });
    let buffer = "";
    this.proc.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) if (line !== "") this.lastGroup.set(`SIG${line}`, Date.now());
    });
    this.proc.stdin?.on("error", () => undefined);
    this.proc.unref();
    (this.proc.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    (this.proc.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  }

  /** Whether the witness works (else callers fall back to forwarding every signal but a terminal's SIGINT). */
  get available(): boolean {
    return this.alive;
  }

  /** True when the process group got `signal` within {@link GROUP_ECHO_WINDOW_MS} of `at`. */
  groupGot(signal: NodeJS.Signals, at: number): boolean {
    const seen = this.lastGroup.get(signal);
    return seen !== undefined && Math.abs(at - seen) <= GROUP_ECHO_WINDOW_MS;
  }

  close(): void {
    this.proc?.stdin?.end();
  }
}

/**
 * Forwards termination signals received by this process to `child` until the returned function is called,
 * so that the child gets each signal EXACTLY ONCE.
 *
 * The child runs in this process's group. A signal sent to the group (Ctrl-C at a terminal, `kill -INT -<pgid>`
 * from a CI runner or `timeout`) has reached the child already: forwarding it again would make Pulumi's
 * graceful cancel (first SIGINT) an immediate termination (second SIGINT). A signal sent to this process only
 * (`kill <launcher pid>`) has not. Node cannot see who sent a signal, so a sentinel process in the group
 * ({@link GroupSignalWitness}) tells group signals apart: a signal is forwarded only when the group did not get
 * it within {@link GROUP_ECHO_WINDOW_MS} (which also swallows npm's and tsx's copies of the group signal).
 * Without a sentinel, the previous rule applies: SIGINT is not forwarded when stdin is a terminal.
 * This process ignores the signals either way and exits with the child's status.
 *
 * @returns a function that removes the handlers.
 */
export function forwardSignals(child: Signalable): () => void {
  const witness = new GroupSignalWitness();
  const handlers: Array<[NodeJS.Signals, () => void]> = [];
  for (const signal of FORWARDED) {
    const handler = () => {
      const at = Date.now();
      if (!witness.available) {
        if (signal === "SIGINT" && process.stdin.isTTY) return;
        child.kill(signal);
        return;
      }
      setTimeout(() => {
        if (witness.groupGot(signal, at)) return;
        child.kill(signal);
      }, SENTINEL_WAIT_MS);
    };
    process.on(signal, handler);
    handlers.push([signal, handler]);
  }
  return () => {
    for (const [signal, handler] of handlers) process.off(signal, handler);
    witness.close();
  };
}

/**
 * Ends this process the way the child ended: the same exit code, or the same signal re-raised on itself.
 */
export function exitLike(code: number | null | undefined, signal: NodeJS.Signals | null | undefined): void {
  if (signal !== null && signal !== undefined) {
    process.removeAllListeners(signal);
    // If the re-raised signal does not end the process (it is ignored here), use the shell convention.
    setTimeout(() => process.exit(128 + (os.constants.signals[signal] ?? 1)), 1000);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
}

/**
 * Loads execa (ESM-only, Node >= 22) with a real dynamic `import()`. A static `import { execa } from "execa"`
 * compiles to `require("execa")` in this CommonJS project, and under tsx that require is served by tsx's own
 * ESM-to-CJS path, which then fails on execa's dependencies whose exports have only an `import` condition
 * (`ERR_PACKAGE_PATH_NOT_EXPORTED ... unicorn-magic`, seen with tsx 4.23.15 on Node 24.22.3).
 */
export async function loadExeca(): Promise<typeof import("execa")> {
  return import("execa");
}

/** `--import` URL of tsx's loader, which lets Node run `.ts` files (CommonJS and ESM). */
export function tsxImportUrl(): string {
  return pathToFileURL(require.resolve("tsx")).href;
}

/**
 * Runs `script` (a .ts file) under `nodeBin` with tsx, passing `args`, inheriting stdio, forwarding signals
 * (see {@link forwardSignals}), and then ends this process with the child's status.
 *
 * @throws nothing: a child that cannot start is reported on stderr and ends this process with exit code 1.
 */
export function reexecUnder(nodeBin: string, script: string, args: readonly string[], env: NodeJS.ProcessEnv): void {
  const child = spawn(nodeBin, ["--import", tsxImportUrl(), script, ...args], { stdio: "inherit", env });
  const stop = forwardSignals(child);
  child.on("error", (err) => {
    stop();
    process.stderr.write(`cohort-lab: could not start ${nodeBin}: ${err.message}\n`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    stop();
    exitLike(code, signal);
  });
}

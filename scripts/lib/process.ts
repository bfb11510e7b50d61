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

/**
 * Forwards termination signals received by this process to `child` until the returned function is called.
 *
 * - SIGTERM, SIGHUP and SIGQUIT are forwarded (they are usually aimed at one pid: CI cancellation, `kill`).
 * - SIGINT is forwarded only when stdin is not a terminal. At a terminal, Ctrl-C already reaches every
 *   process of the foreground group, the child included, and Pulumi treats a second SIGINT as "terminate
 *   immediately" instead of a graceful cancel, so forwarding it would turn one Ctrl-C into two.
 *   This process ignores it either way and exits with the child's status.
 *
 * @returns a function that removes the handlers.
 */
export function forwardSignals(child: Signalable): () => void {
  const handlers: Array<[NodeJS.Signals, () => void]> = [];
  for (const signal of ["SIGTERM", "SIGHUP", "SIGQUIT", "SIGINT"] as const) {
    const handler = () => {
      if (signal === "SIGINT" && process.stdin.isTTY) return;
      child.kill(signal);
    };
    process.on(signal, handler);
    handlers.push([signal, handler]);
  }
  return () => {
    for (const [signal, handler] of handlers) process.off(signal, handler);
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

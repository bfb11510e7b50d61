/**
 * The link between `bin/cohort.cjs` (the `cohort` wrapper that re-executes the runtime under the pinned Node when
 * the caller's Node is older than 22) and the runtime it started.
 *
 * The wrapper starts the runtime in its own session (`detached`), so a signal to the wrapper's process group (a
 * terminal's Ctrl-C, `kill -INT -<pgid>`) reaches the wrapper only, which forwards it once. For the runtime to
 * notice the wrapper's death (even a SIGKILL, which the wrapper cannot forward), the wrapper passes the child end
 * of a pipe (a Unix socket pair, Node's `stdio: "pipe"`) as descriptor {@link WRAPPER_FD_ENV} and never writes to
 * it: end of file on it means the wrapper is gone (the kernel closes its end when it exits, however it exits).
 */
import * as net from "node:net";

/** Environment variable naming the descriptor of the wrapper's pipe (a decimal integer >= 3). */
export const WRAPPER_FD_ENV = "COHORT_WRAPPER_FD";
/** Environment variable holding the wrapper's pid (decimal), named in the message when it is gone. */
export const WRAPPER_PID_ENV = "COHORT_WRAPPER_PID";

/** What the runtime knows of the wrapper that started it. */
export interface WrapperLink {
  /** The descriptor of the pipe's runtime end (>= 3). */
  readonly fd: number;
  /** The wrapper's pid, or `null` when {@link WRAPPER_PID_ENV} was not a positive integer. */
  readonly pid: number | null;
}

/**
 * Reads the wrapper link from `env` and removes both variables from it, so that no process this runtime starts
 * (a member, the member launcher, `cohort worker`'s `cohort run`) takes the descriptor for its own wrapper.
 *
 * @returns the link, or `undefined` when {@link WRAPPER_FD_ENV} is unset or not an integer >= 3
 */
export function takeWrapperLink(env: NodeJS.ProcessEnv = process.env): WrapperLink | undefined {
  const rawFd = env[WRAPPER_FD_ENV];
  const rawPid = env[WRAPPER_PID_ENV];
  delete env[WRAPPER_FD_ENV];
  delete env[WRAPPER_PID_ENV];
  if (rawFd === undefined || !/^[0-9]{1,9}$/.test(rawFd) || Number(rawFd) < 3) return undefined;
  const pid = rawPid !== undefined && /^[1-9][0-9]{0,9}$/.test(rawPid) ? Number(rawPid) : null;
  return { fd: Number(rawFd), pid };
}

/** The one-line cause of an interruption by the wrapper's exit, e.g. `the cohort wrapper (pid 4242) exited`. */
export function wrapperGoneCause(link: WrapperLink): string {
  return `the cohort wrapper${link.pid === null ? "" : ` (pid ${link.pid})`} exited`;
}

let handler: ((cause: string) => void) | null = null;
let watching = false;

/**
 * Sets what happens when the wrapper is gone (`cause` from {@link wrapperGoneCause}); `cohort run` interrupts its
 * run as a SIGTERM does. Without a handler the runtime sends itself SIGTERM (the Temporal worker shuts down, any
 * other command ends as SIGTERM ends it).
 *
 * @returns a function that removes the handler
 */
export function onWrapperGone(fn: (cause: string) => void): () => void {
  handler = fn;
  return () => {
    if (handler === fn) handler = null;
  };
}

/**
 * Watches the wrapper's pipe (at most once per process): end of file, an error or a close of the descriptor all
 * mean the wrapper is gone. The watch does not keep the event loop alive (`unref`).
 *
 * @param stderr - where the cause is written when no handler is set (`cohort: <cause>: stopping (SIGTERM)`)
 */
export function watchWrapper(link: WrapperLink, stderr: NodeJS.WritableStream): void {
  if (watching) return;
  watching = true;
  let socket: net.Socket;
  try {
    socket = new net.Socket({ fd: link.fd, readable: true, writable: false });
  } catch {
    return; // not a socket or pipe: not a wrapper's descriptor
  }
  let gone = false;
  const onGone = (): void => {
    if (gone) return;
    gone = true;
    socket.destroy();
    const cause = wrapperGoneCause(link);
    if (handler !== null) handler(cause);
    else {
      stderr.write(`cohort: ${cause}: stopping (SIGTERM)\n`);
      process.kill(process.pid, "SIGTERM");
    }
  };
  socket.on("data", () => undefined);
  socket.on("end", onGone);
  socket.on("close", onGone);
  socket.on("error", onGone);
  socket.unref();
}

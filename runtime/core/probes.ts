/**
 * Readiness probes run by the core against a started member (backends with `readiness: "probe"`).
 *
 * - `tcp`: a TCP connect to the member's port (or the probe's `port`); ready when accepted.
 * - `http`: `GET http://<host>:<port><path>`; ready on a 2xx or 3xx status.
 * - `exec`: the backend runs the command (process backend: member env and directory); ready on exit 0.
 * - `log`: a line of the member's output matches the pattern; purely event-driven (no retries), lines
 *   already printed when the probe attaches count too (the backend replays its buffer). The pattern is RE2
 *   syntax, matched in time linear in the line (./log-pattern.ts), so no pattern can stall the event loop.
 * - Owner check (tcp, http): when the backend can tell who listens on a port
 *   ({@link MemberHandle.listenerOwner}), a successful attempt counts only if the listener is the
 *   member's own; a stranger on its port fails the attempt (`port 43121 is held by pid 999 (python3), not
 *   by member agent-0`), so the member is not ready and its deadline names the stranger.
 *
 * Retries: tcp/http/exec retry after a failed attempt with a short, growing pause: 5 ms, then x1.5 per
 * attempt, capped at {@link MAX_RETRY_DELAY_MS} (100 ms), so a member is seen ready at most ~100 ms after
 * it starts accepting. No ticker: each retry is one timer armed after the previous attempt ended. Each
 * attempt has its own timeout ({@link ATTEMPT_TIMEOUT_MS}). The caller's AbortSignal stops everything
 * (deadline, failure elsewhere, interrupt).
 *
 * Listen watch (tcp, http): when the backend can tell when the port starts listening
 * ({@link MemberHandle.whenListening}), a failed first attempt starts a watch, and the pause after it lasts
 * {@link WATCHED_RETRY_DELAY_MS} (1 s) unless the watch fires first: the member is probed right after its
 * listen(2) instead of up to a retry period later, and a member waiting for its port costs one connect a
 * second instead of ten (the timer is a safety net, e.g. for a port reached through NAT with no local
 * listener). Once the watch fired, or failed, the plain schedule resumes from 5 ms. The watch only wakes the
 * probe: the connect (and the owner check) decide as before.
 *
 * Compare: docker compose polls dependency health every 500 ms on top of a 30 s HEALTHCHECK interval,
 * process-compose probes every 10 s by default (docs/host.md "Measured: the runtime and the process backend").
 */
import * as http from "node:http";
import * as net from "node:net";
import type { MemberHandle } from "./backend";
import { compileLogPattern } from "./log-pattern";
import type { CompiledReadiness } from "./spec";

/** Longest pause between two probe attempts, in ms. */
export const MAX_RETRY_DELAY_MS = 100;
/**
 * Pause between two tcp/http attempts while the backend watches the port ({@link MemberHandle.whenListening}),
 * in ms: the watch ends it when the port listens, so the timer is only a safety net. The ramp of the plain
 * schedule (5 ms x1.5) made ~8 connects per member in the first 270 ms, i.e. during the burst that started a
 * level. Figures: docs/host.md "Measured: the runtime and the process backend".
 */
export const WATCHED_RETRY_DELAY_MS = 1_000;
/** First pause between attempts, in ms. */
export const FIRST_RETRY_DELAY_MS = 5;
/** Timeout of one tcp/http attempt, in ms. */
export const ATTEMPT_TIMEOUT_MS = 1_000;

/** Live state of one probe, readable while it runs (for deadline messages). */
export interface ProbeStatus {
  /** Probe kind. */
  readonly probe: CompiledReadiness["kind"];
  /** What is probed, e.g. `tcp 127.0.0.1:40123`, `http://127.0.0.1:40123/healthz`, `exec check`, `log /ready/`. */
  readonly target: string;
  /** Attempts so far (log: lines seen). */
  attempts: number;
  /** Why the last attempt failed, e.g. `connect ECONNREFUSED 127.0.0.1:40123`, `HTTP 503`, `exit code 1`. */
  lastError: string | null;
}

/** Timer functions the probes use (the scheduler passes its injected clock). */
export interface ProbeTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const defaultTimers: ProbeTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Thrown (rejected) when the probe's signal aborts. */
export class ProbeAbortedError extends Error {
  constructor() {
    super("probe aborted");
    this.name = "ProbeAbortedError";
  }
}

/**
 * Describes a probe without running it.
 */
export function probeStatus(readiness: CompiledReadiness, handle: Pick<MemberHandle, "endpoint">): ProbeStatus {
  const host = handle.endpoint.host;
  switch (readiness.kind) {
    case "tcp":
      return { probe: "tcp", target: `tcp ${host}:${readiness.port ?? handle.endpoint.port}`, attempts: 0, lastError: null };
    case "http":
      return { probe: "http", target: `http://${host}:${readiness.port ?? handle.endpoint.port}${readiness.path}`, attempts: 0, lastError: null };
    case "exec":
      return { probe: "exec", target: `exec ${readiness.command[0]}`, attempts: 0, lastError: null };
    case "log":
      return { probe: "log", target: `log /${readiness.pattern}/`, attempts: 0, lastError: null };
  }
}

/**
 * Waits until the member is ready by its readiness probe.
 *
 * @param status - filled in as attempts are made (create it with {@link probeStatus})
 * @returns when the probe passed
 * @throws {ProbeAbortedError} when `signal` aborts first
 * @throws {Error} when the backend lacks the capability the probe needs (exec, log)
 */
export async function waitReady(readiness: CompiledReadiness, handle: MemberHandle, status: ProbeStatus, signal: AbortSignal, timers: ProbeTimers = defaultTimers): Promise<void> {
  if (signal.aborted) throw new ProbeAbortedError();
  if (readiness.kind === "log") return waitLogLine(readiness.pattern, handle, status, signal);
  const attempt = attemptFor(readiness, handle, signal);
  const watch = listenWatch(readiness, handle);
  try {
    let delay = FIRST_RETRY_DELAY_MS;
    for (;;) {
      status.attempts++;
      const error = await attempt();
      if (signal.aborted) throw new ProbeAbortedError();
      if (error === null) return;
      status.lastError = error;
      const wake = watch.wake();
      const woken = await sleep(wake !== null ? WATCHED_RETRY_DELAY_MS : delay, signal, timers, wake);
      delay = woken ? FIRST_RETRY_DELAY_MS : Math.min(MAX_RETRY_DELAY_MS, Math.ceil(delay * 1.5));
    }
  } finally {
    watch.stop();
  }
}

/** A probe's listen watch (see the module doc): started by the first `wake()`, at most once. */
interface ListenWatch {
  /**
   * What a retry pause races against: the watch (started now if not yet), settling when it fired or failed; null
   * once it settled, or without a watch.
   */
  wake(): Promise<void> | null;
  /** Cancels the watch (the probe ended). */
  stop(): void;
}

function listenWatch(readiness: Exclude<CompiledReadiness, { kind: "log" }>, handle: MemberHandle): ListenWatch {
  const when = handle.whenListening?.bind(handle);
  if (when === undefined || (readiness.kind !== "tcp" && readiness.kind !== "http")) return { wake: () => null, stop: () => undefined };
  const port = readiness.port ?? handle.endpoint.port;
  const controller = new AbortController();
  let state: "idle" | "pending" | "over" = "idle";
  let fired: Promise<void> | null = null;
  return {
    wake() {
      if (state === "idle") {
        state = "pending";
        const over = (): void => void (state = "over");
        fired = when(port, controller.signal).then(over, over);
      }
      return state === "pending" ? fired : null;
    },
    stop: () => controller.abort(),
  };
}

/** How {@link watchLiveness} probes: the schedule and the failure threshold. */
export interface LivenessOptions {
  /** Pause between the end of one attempt and the start of the next, in ms (> 0). */
  readonly periodMs: number;
  /** Failed attempts in a row after which the member is unhealthy (integer >= 1). */
  readonly failureThreshold: number;
  /**
   * Pause before the first attempt, in ms; callers spread members over the period with it (e.g.
   * `random() * periodMs`), so that members that became ready together are not all probed at once.
   */
  readonly firstDelayMs: number;
}

/** What {@link watchLiveness} resolves with: the member stopped answering. */
export interface LivenessFailure {
  /** Failed attempts in a row (= the threshold). */
  readonly failures: number;
  /** Liveness attempts made in all (successful ones included). */
  readonly attempts: number;
  /** Why the last attempt failed, e.g. `HTTP 503`, `connect ECONNREFUSED 127.0.0.1:40123`, `exit code 1`. */
  readonly lastError: string;
}

/**
 * Liveness: re-runs a member's tcp/http/exec readiness probe after it was ready, one attempt every
 * `periodMs` (one timer armed after each attempt ended, no ticker), until `failureThreshold` attempts in
 * a row fail or `signal` aborts. A successful attempt resets the count (Kubernetes livenessProbe
 * semantics, https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/).
 * Each tcp/http attempt times out after {@link ATTEMPT_TIMEOUT_MS}; exec attempts are bounded by the
 * backend's exec timeout. Separate from {@link waitReady}, which it shares only the attempt functions with.
 *
 * @param readiness - the role's readiness probe; `log` has nothing to re-probe and is refused
 * @returns the failure, once `failureThreshold` attempts in a row failed
 * @throws {ProbeAbortedError} when `signal` aborts first (teardown began, the run failed elsewhere)
 * @throws {Error} for a `log` probe, or when the backend cannot run exec probes
 */
export async function watchLiveness(
  readiness: CompiledReadiness,
  handle: MemberHandle,
  options: LivenessOptions,
  signal: AbortSignal,
  timers: ProbeTimers = defaultTimers,
): Promise<LivenessFailure> {
  if (readiness.kind === "log") throw new Error(`a log probe cannot be re-run as a liveness probe (member ${handle.member})`);
  if (signal.aborted) throw new ProbeAbortedError();
  const attempt = attemptFor(readiness, handle, signal);
  let attempts = 0;
  let failures = 0;
  let delay = options.firstDelayMs;
  for (;;) {
    await sleep(delay, signal, timers);
    delay = options.periodMs;
    attempts++;
    const error = await attempt();
    if (signal.aborted) throw new ProbeAbortedError();
    if (error === null) {
      failures = 0;
      continue;
    }
    failures++;
    if (failures >= options.failureThreshold) return { failures, attempts, lastError: error };
  }
}

/** One attempt: resolves null on success, or the failure reason. Never rejects. */
type Attempt = () => Promise<string | null>;

function attemptFor(readiness: Exclude<CompiledReadiness, { kind: "log" }>, handle: MemberHandle, signal: AbortSignal): Attempt {
  const host = handle.endpoint.host;
  switch (readiness.kind) {
    case "tcp":
      return ownedBy(handle, readiness.port ?? handle.endpoint.port, () => tcpAttempt(host, readiness.port ?? handle.endpoint.port, signal));
    case "http":
      return ownedBy(handle, readiness.port ?? handle.endpoint.port, () => httpAttempt(host, readiness.port ?? handle.endpoint.port, readiness.path, signal));
    case "exec": {
      const exec = handle.exec?.bind(handle);
      if (exec === undefined) throw new Error(`the backend cannot run exec probes (member ${handle.member})`);
      return async () => {
        try {
          const { exitCode } = await exec(readiness.command, signal);
          return exitCode === 0 ? null : exitCode === null ? "killed by a signal" : `exit code ${exitCode}`;
        } catch (error) {
          return (error as Error).message;
        }
      };
    }
  }
}

/**
 * `attempt`, then, when it succeeded and the backend can tell ({@link MemberHandle.listenerOwner}), a check
 * that the listener on `port` is the member's own: an answer from a stranger holding the port fails the
 * attempt, e.g. `port 43121 is held by pid 999 (python3), not by member agent-0`.
 */
function ownedBy(handle: MemberHandle, port: number, attempt: Attempt): Attempt {
  const owner = handle.listenerOwner?.bind(handle);
  if (owner === undefined) return attempt;
  return async () => {
    const error = await attempt();
    if (error !== null) return error;
    const found = await owner(port).catch((failure: unknown) => ({ owner: "unknown" as const, why: String(failure) }));
    if (found.owner === "member" || found.owner === "unknown") return null;
    if (found.owner === "none") return `port ${port} answered, but no listening socket for it was found (it closed?)`;
    const who = found.pid === undefined ? "another process" : `pid ${found.pid}${found.command === undefined ? "" : ` (${found.command})`}`;
    return `port ${port} is held by ${who}, not by member ${handle.member}`;
  };
}

function tcpAttempt(host: string, port: number, signal: AbortSignal): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (result: string | null): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      socket.destroy();
      resolve(result);
    };
    const onAbort = (): void => done("aborted");
    const timer = setTimeout(() => done(`no answer within ${ATTEMPT_TIMEOUT_MS}ms`), ATTEMPT_TIMEOUT_MS);
    signal.addEventListener("abort", onAbort, { once: true });
    socket.once("connect", () => done(null));
    socket.once("error", (error) => done(error.message));
  });
}

function httpAttempt(host: string, port: number, requestPath: string, signal: AbortSignal): Promise<string | null> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: string | null): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", onAbort);
      request.destroy();
      resolve(result);
    };
    const onAbort = (): void => done("aborted");
    const request = http.get({ host, port, path: requestPath, agent: false, timeout: ATTEMPT_TIMEOUT_MS, headers: { "user-agent": "cohort-readiness" } }, (response) => {
      const code = response.statusCode ?? 0;
      response.resume();
      done(code >= 200 && code < 400 ? null : `HTTP ${code}`);
    });
    request.once("timeout", () => done(`no answer within ${ATTEMPT_TIMEOUT_MS}ms`));
    request.once("error", (error) => done(error.message));
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function waitLogLine(pattern: string, handle: MemberHandle, status: ProbeStatus, signal: AbortSignal): Promise<void> {
  const subscribe = handle.onOutputLine?.bind(handle);
  if (subscribe === undefined) return Promise.reject(new Error(`the backend cannot run log probes (member ${handle.member})`));
  // RE2 (linear time): a backtracking RegExp here would block the event loop on a pattern such as ^(a+)+$.
  const regex = compileLogPattern(pattern);
  return new Promise<void>((resolve, reject) => {
    // eslint-disable-next-line prefer-const -- assigned after `finish`, which closes over it, is defined
    let unsubscribe: (() => void) | undefined;
    let settled = false;
    const finish = (error?: Error): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", onAbort);
      unsubscribe?.();
      if (error === undefined) resolve();
      else reject(error);
    };
    const onAbort = (): void => finish(new ProbeAbortedError());
    signal.addEventListener("abort", onAbort, { once: true });
    status.lastError = "no matching line yet";
    unsubscribe = subscribe((line) => {
      status.attempts++;
      if (regex.test(line)) finish();
    });
    if (settled) unsubscribe();
  });
}

/**
 * Waits `ms`, or less when `wake` settles first.
 *
 * @returns whether `wake` ended the pause
 * @throws {ProbeAbortedError} when `signal` aborts first
 */
function sleep(ms: number, signal: AbortSignal, timers: ProbeTimers, wake: Promise<void> | null = null): Promise<boolean> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const end = (woken: boolean, error?: Error): void => {
      if (settled) return;
      settled = true;
      timers.clearTimeout(handle);
      signal.removeEventListener("abort", onAbort);
      if (error === undefined) resolve(woken);
      else reject(error);
    };
    const onAbort = (): void => end(false, new ProbeAbortedError());
    const handle = timers.setTimeout(() => end(false), ms);
    signal.addEventListener("abort", onAbort, { once: true });
    void wake?.then(() => end(true));
  });
}

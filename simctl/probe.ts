/**
 * Readiness signals of the sim components: HTTP(S) GETs against health endpoints, retried every 100 ms until a
 * deadline, failing at once when the component's process has exited (with its log tail).
 */
import * as http from "node:http";
import * as https from "node:https";

/** Result of one GET. */
export interface HttpResult {
  readonly status: number;
  readonly body: string;
}

/** Options of {@link httpGet}. */
export interface HttpGetOptions {
  /** PEM CA bundle to verify the server against (https). */
  readonly ca?: string;
  /** Skip server verification (only for loopback health endpoints that serve an in-memory self-signed cert, never with a credential). */
  readonly insecure?: boolean;
  /** Bearer token. */
  readonly token?: string;
  /** Per-request timeout, milliseconds. @default 2000 */
  readonly timeoutMs?: number;
  readonly method?: string;
  readonly body?: string;
  readonly contentType?: string;
}

/**
 * One HTTP(S) request.
 *
 * @throws Error on connection errors and timeouts (the message is the socket error).
 */
export function httpGet(url: string, o: HttpGetOptions = {}): Promise<HttpResult> {
  const u = new URL(url);
  const mod = u.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(
      u,
      {
        method: o.method ?? "GET",
        ca: o.ca,
        rejectUnauthorized: o.insecure !== true,
        headers: {
          ...(o.token !== undefined ? { Authorization: `Bearer ${o.token}` } : {}),
          ...(o.body !== undefined ? { "Content-Type": o.contentType ?? "application/json" } : {}),
        },
        timeout: o.timeoutMs ?? 2000,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`timed out after ${o.timeoutMs ?? 2000} ms`)));
    req.on("error", reject);
    if (o.body !== undefined) req.write(o.body);
    req.end();
  });
}

/** Raised when a component does not become ready; carries the component and the last observation. */
export class ComponentNotReadyError extends Error {
  constructor(
    readonly component: string,
    message: string,
  ) {
    super(message);
    this.name = "ComponentNotReadyError";
  }
}

/** Options of {@link waitUntil}. */
export interface WaitOptions {
  /** Component name for messages. */
  readonly component: string;
  /** Overall deadline, milliseconds. */
  readonly timeoutMs: number;
  /** Returns a reason when the component cannot become ready any more (e.g. its process exited). */
  readonly dead?: () => string | undefined;
  /** Delay between attempts, milliseconds. @default 100 */
  readonly intervalMs?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Calls `check` until it returns `true`; `check` returns a string (or throws) to say why it is not ready yet.
 *
 * @returns milliseconds waited.
 * @throws ComponentNotReadyError when `dead()` reports a reason or the deadline passes (message has the last reason).
 */
export async function waitUntil(check: () => Promise<true | string>, o: WaitOptions): Promise<number> {
  const started = Date.now();
  let last: string;
  for (;;) {
    const dead = o.dead?.();
    if (dead !== undefined) throw new ComponentNotReadyError(o.component, `${o.component} ${dead}`);
    try {
      const r = await check();
      if (r === true) return Date.now() - started;
      last = r;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() - started > o.timeoutMs) {
      throw new ComponentNotReadyError(o.component, `${o.component} not ready after ${o.timeoutMs} ms (last: ${last})`);
    }
    await sleep(o.intervalMs ?? 100);
  }
}

/** A check that passes when `url` answers 200 with a body equal to `expectBody` (when given). */
export function httpCheck(url: string, o: HttpGetOptions & { readonly expectBody?: (body: string) => boolean }): () => Promise<true | string> {
  return async () => {
    const r = await httpGet(url, o);
    if (r.status === 200 && (o.expectBody === undefined || o.expectBody(r.body))) return true;
    return `${url} answered ${r.status}: ${r.body.trim().slice(0, 200)}`;
  };
}

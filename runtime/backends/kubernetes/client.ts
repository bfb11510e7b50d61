/**
 * A small REST client over @kubernetes/client-node: the library loads the kubeconfig (or the in-cluster
 * service account), authenticates every request and sends it with its undici `fetch`; this file adds
 * what the backend needs on top:
 *
 * - **Connection reuse.** @kubernetes/client-node 2.0.1 builds a new undici `Agent` inside
 *   `KubeConfig.applySecurityAuthentication` for every request (`dist/config.js` createDispatcher), so
 *   1,000 creates would open 1,000 TLS connections. {@link PooledKubeConfig} keeps the first keep-alive
 *   Agent and hands it to every later request and watch of the run.
 * - **Counting.** Every call goes through {@link KubeClient.request} or {@link KubeClient.watch} with its
 *   verb/resource key from `counters.ts`, so the backend can report API calls per member.
 * - **No client-side throttling** (docs/sim.md "Against the issue's targets"; @kubernetes/client-node installs no limiter): none is added; parallelism is bounded by the
 *   callers (e.g. 32 creates in flight). 429 and 5xx responses are retried twice with a short backoff,
 *   honouring `Retry-After`; each attempt is counted.
 */
import { HttpMethod, IsomorphicFetchHttpLibrary, KubeConfig, RequestContext, Watch } from "@kubernetes/client-node";
import { CohortError } from "../../core/errors.js";
import { cutUnits } from "../../core/text.js";
import type { ApiCallKey, ApiCounters } from "./counters.js";
import type { Json } from "./render.js";

type Dispatcher = NonNullable<ReturnType<RequestContext["getDispatcher"]>>;

/** A KubeConfig that reuses one keep-alive connection pool for every request and watch. */
export class PooledKubeConfig extends KubeConfig {
  #dispatcher: Dispatcher | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const fresh = context.getDispatcher();
    if (fresh === undefined) return; // no TLS options: undici's global keep-alive dispatcher is used
    if (this.#dispatcher === undefined) {
      this.#dispatcher = fresh;
    } else if (fresh !== this.#dispatcher) {
      context.setDispatcher(this.#dispatcher);
      void fresh.close().catch(() => undefined);
    }
  }

  /** Closes the pooled connections. */
  async dispose(): Promise<void> {
    const dispatcher = this.#dispatcher;
    this.#dispatcher = undefined;
    if (dispatcher !== undefined) await dispatcher.close().catch(() => undefined);
  }
}

/**
 * A failed API call (code `kubernetes-api-error`): the HTTP status, the Status `reason` (e.g.
 * `AlreadyExists`, `NotFound`, `Forbidden`) and the server's message. `status` is 0 when no response
 * arrived (connection refused, TLS failure, aborted).
 */
export class KubeApiError extends CohortError {
  readonly status: number;
  readonly reason: string;
  readonly serverMessage: string;
  readonly method: string;
  readonly path: string;
  constructor(method: string, path: string, status: number, reason: string, serverMessage: string, options?: { cause?: unknown }) {
    super("kubernetes-api-error", `${method} ${path}: ${status === 0 ? "no response" : `${status} ${reason}`}${serverMessage === "" ? "" : `: ${serverMessage}`}`, options);
    this.status = status;
    this.reason = reason;
    this.serverMessage = serverMessage;
    this.method = method;
    this.path = path;
  }
}

/** Options of one request. */
export interface RequestOptions {
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
  readonly body?: unknown;
  /** Content-Type of the body. @default "application/json" */
  readonly contentType?: string;
  readonly signal?: AbortSignal;
  /** Retry 429/5xx/no-response. Default true; pass false for calls that must not repeat. */
  readonly retry?: boolean;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/** How the backend talks to the API server. */
export class KubeClient {
  readonly kubeConfig: PooledKubeConfig;
  readonly counters: ApiCounters;
  readonly #http = new IsomorphicFetchHttpLibrary();
  readonly #server: string;

  /**
   * @param kubeConfig - a loaded {@link PooledKubeConfig}
   * @throws {Error} when the kubeconfig has no current cluster
   */
  constructor(kubeConfig: PooledKubeConfig, counters: ApiCounters) {
    const cluster = kubeConfig.getCurrentCluster();
    if (cluster === null) throw new Error("the kubeconfig has no current cluster (check current-context)");
    this.kubeConfig = kubeConfig;
    this.counters = counters;
    this.#server = cluster.server.replace(/\/+$/, "");
  }

  /**
   * Loads a kubeconfig file; without `path`, the in-cluster service account when
   * `KUBERNETES_SERVICE_HOST` is set, else `$KUBECONFIG` or `~/.kube/config` (the library's loadFromDefault).
   *
   * @throws {Error} when the file cannot be read/parsed or names no current cluster
   */
  static load(path: string | undefined, counters: ApiCounters): KubeClient {
    const kc = new PooledKubeConfig();
    if (path !== undefined) kc.loadFromFile(path);
    else if (process.env.KUBERNETES_SERVICE_HOST !== undefined) kc.loadFromCluster();
    else kc.loadFromDefault();
    return new KubeClient(kc, counters);
  }

  /** API server URL. */
  get server(): string {
    return this.#server;
  }

  /**
   * Sends one request and returns the parsed JSON response.
   *
   * @param key - the counter key (verb and resource) of the call
   * @throws {KubeApiError} on a non-2xx status or when no response arrives
   */
  async request(key: ApiCallKey, method: HttpMethod, path: string, options: RequestOptions = {}): Promise<Json> {
    const text = await this.requestText(key, method, path, options);
    try {
      return (text === "" ? {} : JSON.parse(text)) as Json;
    } catch {
      throw new KubeApiError(method, path, 200, "InvalidResponse", `the response is not JSON: ${cutUnits(text, 200)}`);
    }
  }

  /**
   * Like {@link request}, returning the response body as text (e.g. a pod's log).
   *
   * @throws {KubeApiError} on a non-2xx status or when no response arrives
   */
  async requestText(key: ApiCallKey, method: HttpMethod, path: string, options: RequestOptions = {}): Promise<string> {
    const attempts = options.retry === false ? 1 : 3;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#once(key, method, path, options);
      } catch (error) {
        const retriable = error instanceof KubeApiError && (error.status === 0 || error.status === 429 || error.status >= 500);
        if (!retriable || attempt >= attempts || options.signal?.aborted === true) {
          if (error instanceof KubeApiError && attempt > 1) (error as { attempts?: number }).attempts = attempt;
          throw error;
        }
        const retryAfter = (error as KubeApiError & { retryAfterMs?: number }).retryAfterMs;
        await sleep(retryAfter ?? 100 * 4 ** (attempt - 1), options.signal);
      }
    }
  }

  async #once(key: ApiCallKey, method: HttpMethod, path: string, options: RequestOptions): Promise<string> {
    const url = new URL(this.#server + path);
    for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    const context = new RequestContext(url.toString(), method);
    context.setHeaderParam("Accept", "application/json");
    if (options.body !== undefined) {
      context.setHeaderParam("Content-Type", options.contentType ?? "application/json");
      context.setBody(JSON.stringify(options.body));
    }
    if (options.signal !== undefined) context.setSignal(options.signal);
    await this.kubeConfig.applySecurityAuthentication(context);
    const end = this.counters.begin(key);
    let status: number | undefined;
    try {
      const response = await this.#http.send(context).toPromise();
      status = response.httpStatusCode;
      const text = await response.body.text();
      if (status >= 200 && status < 300) return text;
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = { message: cutUnits(text, 300) };
      }
      const reason = typeof (parsed as Json).reason === "string" ? ((parsed as Json).reason as string) : String(status);
      const message = typeof (parsed as Json).message === "string" ? ((parsed as Json).message as string) : "";
      const error = new KubeApiError(method, path, status, reason, message);
      const retryAfter = Number(response.headers["retry-after"]);
      if (Number.isFinite(retryAfter) && retryAfter >= 0) (error as KubeApiError & { retryAfterMs?: number }).retryAfterMs = Math.min(retryAfter, 5) * 1000;
      throw error;
    } catch (error) {
      if (error instanceof KubeApiError) throw error;
      const cause = (error as { cause?: { message?: string; code?: string } }).cause;
      const detail = [(error as Error).message, cause?.code, cause?.message].filter((s) => s !== undefined && s !== "").join(": ");
      throw new KubeApiError(method, path, 0, "NoResponse", detail, { cause: error });
    } finally {
      end(status);
    }
  }

  /**
   * Opens one watch request (counted). Events arrive as parsed JSON objects; `done` is called once
   * when the stream ends, with the error if any (an HTTP status error carries `statusCode`).
   *
   * @param requestTimeoutMs - client inactivity timeout; keep it above the server-side `timeoutSeconds`
   * @returns a controller that aborts the watch
   */
  async watch(
    key: ApiCallKey,
    path: string,
    query: Readonly<Record<string, string | number | boolean | undefined>>,
    onEvent: (type: string, object: Json) => void,
    done: (error: unknown) => void,
    requestTimeoutMs: number,
  ): Promise<AbortController> {
    const watch = new Watch(this.kubeConfig);
    // `requestTimeoutMs` (client inactivity timeout, default 30 s) is private in the typings but a plain field.
    (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = requestTimeoutMs;
    // Counted as one call; not tracked as "in flight" (a watch is long-lived by design).
    const end = this.counters.begin(key);
    try {
      return await watch.watch(path, query as Record<string, string | number | boolean | undefined>, (type, object) => onEvent(type, object as Json), done);
    } finally {
      end(undefined);
    }
  }

  /** Closes pooled connections. */
  async dispose(): Promise<void> {
    await this.kubeConfig.dispose();
  }
}

export { HttpMethod };

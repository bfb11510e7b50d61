/**
 * List-then-watch of one kind in the run namespace, with resourceVersion continuity: ONE watch request
 * per kind at a time, re-opened from the last resourceVersion seen (events and bookmarks) when the
 * server closes it, and a re-list (diffed against the cache, so no event is lost or repeated) when the
 * server answers 410 Gone. No polling: between watch re-opens nothing is requested.
 *
 * The same algorithm as client-go's Reflector (k8s.io/client-go/tools/cache/reflector.go: ListAndWatch,
 * watchHandler, isExpiredError), without its client-side rate limiter.
 */
import { HttpMethod, KubeApiError, type KubeClient } from "./client.js";
import type { ApiCallKey } from "./counters.js";
import type { Json } from "./render.js";

/** One change to the cache. `object` of a DELETED event is the last state seen. */
export interface CacheEvent {
  readonly type: "ADDED" | "MODIFIED" | "DELETED";
  readonly object: Json;
}

/** What to list and watch. */
export interface WatchTarget {
  /** Collection path, e.g. `/api/v1/namespaces/run-1/pods`. */
  readonly path: string;
  readonly listKey: ApiCallKey;
  readonly watchKey: ApiCallKey;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
}

/** Tuning of a {@link ListWatch}; every field has a default. */
export interface ListWatchOptions {
  /** Server-side `timeoutSeconds` of each watch request. @default 300 */
  readonly timeoutSeconds?: number;
  /** First retry delay after a failed list/watch, doubled up to `maxBackoffMs`. @default 100 */
  readonly backoffMs?: number;
  /** @default 5000 */
  readonly maxBackoffMs?: number;
}

const FATAL_STATUSES = new Set([400, 401, 403, 404]);

function nameOf(obj: Json): string {
  return String((obj.metadata as Json | undefined)?.name ?? "");
}

function versionOf(obj: Json): string {
  return String((obj.metadata as Json | undefined)?.resourceVersion ?? "");
}

/** Keeps a cache of one kind's objects (by name) in sync through list + watch. */
export class ListWatch {
  /** Current objects by name. */
  readonly objects = new Map<string, Json>();
  readonly #client: KubeClient;
  readonly #target: WatchTarget;
  readonly #onEvent: (event: CacheEvent) => void;
  readonly #onFatal: (error: Error) => void;
  readonly #timeoutSeconds: number;
  readonly #backoffMs: number;
  readonly #maxBackoffMs: number;
  #resourceVersion = "";
  #stopped = false;
  #abort: AbortController | undefined;
  #stopSignal = new AbortController();
  #relists = 0;
  #reopens = 0;

  /**
   * @param onEvent - called synchronously for every change, in order
   * @param onFatal - called once if the kind cannot be listed/watched at all (401/403/404); the watch stops
   */
  constructor(client: KubeClient, target: WatchTarget, onEvent: (event: CacheEvent) => void, onFatal: (error: Error) => void, options: ListWatchOptions = {}) {
    this.#client = client;
    this.#target = target;
    this.#onEvent = onEvent;
    this.#onFatal = onFatal;
    this.#timeoutSeconds = options.timeoutSeconds ?? 300;
    this.#backoffMs = options.backoffMs ?? 100;
    this.#maxBackoffMs = options.maxBackoffMs ?? 5000;
  }

  /** Number of re-lists after 410 Gone, and of watch re-opens (for stats). */
  get stats(): { relists: number; reopens: number } {
    return { relists: this.#relists, reopens: this.#reopens };
  }

  /**
   * Lists (delivering ADDED events for what exists), then keeps watching in the background.
   *
   * @throws {KubeApiError} when the first list fails (nothing is watched then)
   */
  async start(): Promise<void> {
    await this.#list();
    void this.#loop();
  }

  /** Stops watching; idempotent. */
  stop(): void {
    this.#stopped = true;
    this.#stopSignal.abort();
    this.#abort?.abort();
  }

  async #list(): Promise<void> {
    const list = await this.#client.request(this.#target.listKey, HttpMethod.GET, this.#target.path, {
      query: { labelSelector: this.#target.labelSelector, fieldSelector: this.#target.fieldSelector },
      signal: this.#stopSignal.signal,
    });
    if (this.#stopped) return;
    const items = Array.isArray(list.items) ? (list.items as Json[]) : [];
    const seen = new Set<string>();
    for (const item of items) {
      const name = nameOf(item);
      seen.add(name);
      const previous = this.objects.get(name);
      this.objects.set(name, item);
      if (previous === undefined) this.#onEvent({ type: "ADDED", object: item });
      else if (versionOf(previous) !== versionOf(item)) this.#onEvent({ type: "MODIFIED", object: item });
    }
    for (const [name, previous] of [...this.objects]) {
      if (!seen.has(name)) {
        this.objects.delete(name);
        this.#onEvent({ type: "DELETED", object: previous });
      }
    }
    this.#resourceVersion = String((list.metadata as Json | undefined)?.resourceVersion ?? "");
  }

  async #sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#stopSignal.signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
    });
  }

  async #loop(): Promise<void> {
    let delay = 0;
    let needList = false;
    while (!this.#stopped) {
      if (delay > 0) await this.#sleep(delay);
      if (this.#stopped) return;
      try {
        if (needList) {
          this.#relists += 1;
          await this.#list();
          needList = false;
        }
        const outcome = await this.#watchOnce();
        if (outcome === "gone") {
          needList = true;
          delay = 0;
        } else if (outcome === "closed") {
          delay = 0;
        } else {
          delay = Math.min(Math.max(delay * 2, this.#backoffMs), this.#maxBackoffMs);
        }
      } catch (error) {
        if (this.#stopped) return;
        if (error instanceof KubeApiError && FATAL_STATUSES.has(error.status)) {
          this.stop();
          this.#onFatal(error);
          return;
        }
        if (error instanceof KubeApiError && error.status === 410) needList = true;
        delay = Math.min(Math.max(delay * 2, this.#backoffMs), this.#maxBackoffMs);
      }
    }
  }

  /** One watch request: "closed" (server ended it; re-open), "gone" (410; re-list), "error" (back off). */
  #watchOnce(): Promise<"closed" | "gone" | "error"> {
    return new Promise((resolve, reject) => {
      let gone = false;
      let streamError = false;
      const done = (error: unknown): void => {
        this.#abort = undefined;
        const status = (error as { statusCode?: number } | null)?.statusCode;
        if (gone || status === 410) resolve("gone");
        else if (typeof status === "number" && FATAL_STATUSES.has(status)) {
          reject(new KubeApiError("GET", `${this.#target.path}?watch=true`, status, String(status), (error as Error).message));
        } else if (error === null || error === undefined || (error as Error).name === "TimeoutError") resolve(streamError ? "error" : "closed");
        else if (this.#stopped) resolve("closed");
        else resolve("error");
      };
      const onEvent = (type: string, object: Json): void => {
        if (this.#stopped) return;
        switch (type) {
          case "ADDED":
          case "MODIFIED": {
            this.objects.set(nameOf(object), object);
            this.#resourceVersion = versionOf(object);
            this.#onEvent({ type, object });
            return;
          }
          case "DELETED": {
            const name = nameOf(object);
            this.objects.delete(name);
            this.#resourceVersion = versionOf(object);
            this.#onEvent({ type, object });
            return;
          }
          case "BOOKMARK":
            this.#resourceVersion = versionOf(object);
            return;
          case "ERROR":
            if (object.code === 410) gone = true;
            else streamError = true;
            return;
        }
      };
      this.#reopens += 1;
      this.#client
        .watch(
          this.#target.watchKey,
          this.#target.path,
          {
            resourceVersion: this.#resourceVersion,
            allowWatchBookmarks: true,
            timeoutSeconds: this.#timeoutSeconds,
            labelSelector: this.#target.labelSelector,
            fieldSelector: this.#target.fieldSelector,
          },
          onEvent,
          done,
          (this.#timeoutSeconds + 30) * 1000,
        )
        .then((controller) => {
          if (this.#stopped) controller.abort();
          else this.#abort = controller;
        }, reject);
    });
  }
}

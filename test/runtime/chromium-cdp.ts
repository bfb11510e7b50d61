/**
 * A minimal Chrome DevTools Protocol client for tests: headless Chromium driven over `--remote-debugging-pipe`
 * (the protocol's JSON messages, each ended by a NUL byte, are read by Chromium from fd 3 and written by it to
 * fd 4: no port, no network, no WebSocket library). https://chromedevtools.github.io/devtools-protocol/
 *
 * {@link findChromium} finds the binary ($COHORT_CHROMIUM if set, else `chromium`/`chromium-browser` on PATH; install
 * one with `bash scripts/chromium.sh`); {@link openPage} starts a browser, loads one URL in a new tab and
 * collects every console message, uncaught exception and log entry of level `error` it produced.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Readable, Writable } from "node:stream";

/**
 * The Chromium binary to use, or `null` (the reason is then in {@link chromiumMissingReason}): $COHORT_CHROMIUM
 * when it is set (`null` when that file does not exist: set it to a missing path to skip the browser tests),
 * else `chromium` or `chromium-browser` on PATH.
 */
export function findChromium(): string | null {
  const env = process.env.COHORT_CHROMIUM;
  if (env !== undefined && env !== "") return fs.existsSync(env) ? env : null;
  for (const name of ["chromium", "chromium-browser"]) {
    const r = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" });
    if (r.status === 0 && r.stdout.trim() !== "") return r.stdout.trim();
  }
  return null;
}

/** Why the browser tests skip when {@link findChromium} finds nothing. */
export const chromiumMissingReason =
  "no Chromium found ($COHORT_CHROMIUM if set, else chromium or chromium-browser on PATH): `bash scripts/chromium.sh` installs Debian's chromium (as root)";

/** One problem the page reported: `console.error`, an uncaught exception, or a browser log entry of level error. */
export interface PageError {
  readonly source: "console" | "exception" | "log";
  readonly text: string;
}

/** A page loaded in headless Chromium. */
export interface Page {
  /** Evaluates a JavaScript expression in the page and returns its value (JSON-serialisable). */
  evaluate<T>(expression: string): Promise<T>;
  /** Errors collected since the browser started (console, exceptions, log). */
  readonly errors: PageError[];
  /** Every console message (`type: text`), errors included. */
  readonly console: string[];
  /** Closes the browser (SIGKILL after 5 s) and removes its profile directory. */
  close(): Promise<void>;
}

interface Message {
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { message: string };
  sessionId?: string;
}

/**
 * Starts headless Chromium, opens `url` in a new tab and waits for its load event.
 *
 * @param binary - the Chromium binary ({@link findChromium})
 * @param url - e.g. `file:///tmp/x/report.html`
 * @param options.windowSize - viewport `[width, height]` in CSS pixels (default 1400x1800)
 * @param options.timeoutMs - for the whole load (default 30 s)
 * @throws {Error} when the browser exits, a command fails, or the load does not finish in time
 */
export async function openPage(binary: string, url: string, options: { windowSize?: [number, number]; timeoutMs?: number } = {}): Promise<Page> {
  const [width, height] = options.windowSize ?? [1400, 1800];
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-chromium-"));
  const child: ChildProcess = spawn(
    binary,
    [
      "--headless",
      // Root (CI containers) cannot use Chromium's sandbox; the pages are the project's own files.
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-extensions",
      "--disable-background-networking",
      "--disable-component-update",
      "--remote-debugging-pipe",
      `--user-data-dir=${profile}`,
      `--window-size=${width},${height}`,
      "about:blank",
    ],
    { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr = (stderr + d).slice(-4000)));
  const toBrowser = child.stdio[3] as Writable;
  const fromBrowser = child.stdio[4] as Readable;
  const pending = new Map<number, { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  const listeners: ((m: Message) => void)[] = [];
  const errors: PageError[] = [];
  const consoleLines: string[] = [];
  let exited: Error | null = null;
  child.on("exit", (code, signal) => {
    exited = new Error(`chromium exited (${code ?? signal}): ${stderr.trim().split("\n").slice(-5).join(" | ")}`);
    for (const p of pending.values()) p.reject(exited);
    pending.clear();
  });
  let buffer = Buffer.alloc(0);
  fromBrowser.on("data", (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (let end = buffer.indexOf(0); end !== -1; end = buffer.indexOf(0)) {
      const message = JSON.parse(buffer.subarray(0, end).toString("utf8")) as Message;
      buffer = buffer.subarray(end + 1);
      if (message.id !== undefined) {
        const p = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) p?.reject(new Error(`CDP: ${message.error.message}`));
        else p?.resolve(message.result ?? {});
      } else for (const l of listeners) l(message);
    }
  });
  let nextId = 1;
  const send = (method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> => {
    if (exited) return Promise.reject(exited);
    const id = nextId++;
    const promise = new Promise<Record<string, unknown>>((resolve, reject) => pending.set(id, { resolve, reject }));
    toBrowser.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    return promise;
  };
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      void send("Browser.close").catch(() => undefined);
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await gone;
      clearTimeout(timer);
    }
    fs.rmSync(profile, { recursive: true, force: true });
  };

  try {
    const timeoutMs = options.timeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`page ${url} did not load in ${timeoutMs} ms`)), timeoutMs)));
    const load = (async () => {
      const { targetId } = (await send("Target.createTarget", { url: "about:blank" })) as { targetId: string };
      const { sessionId } = (await send("Target.attachToTarget", { targetId, flatten: true })) as { sessionId: string };
      listeners.push((m) => {
        if (m.sessionId !== sessionId || m.params === undefined) return;
        if (m.method === "Runtime.consoleAPICalled") {
          const args = (m.params.args as { value?: unknown; description?: string }[]) ?? [];
          const text = args.map((a) => (a.value !== undefined ? String(a.value) : (a.description ?? ""))).join(" ");
          consoleLines.push(`${String(m.params.type)}: ${text}`);
          if (m.params.type === "error" || m.params.type === "assert") errors.push({ source: "console", text });
        } else if (m.method === "Runtime.exceptionThrown") {
          const d = m.params.exceptionDetails as { text?: string; exception?: { description?: string } };
          errors.push({ source: "exception", text: d.exception?.description ?? d.text ?? "exception" });
        } else if (m.method === "Log.entryAdded") {
          const entry = m.params.entry as { level?: string; text?: string; url?: string };
          if (entry.level === "error") errors.push({ source: "log", text: `${entry.text ?? ""}${entry.url ? ` (${entry.url})` : ""}` });
        }
      });
      await send("Runtime.enable", {}, sessionId);
      await send("Log.enable", {}, sessionId);
      await send("Page.enable", {}, sessionId);
      const loaded = new Promise<void>((resolve) => listeners.push((m) => m.sessionId === sessionId && m.method === "Page.loadEventFired" && resolve()));
      const nav = (await send("Page.navigate", { url }, sessionId)) as { errorText?: string };
      if (nav.errorText) throw new Error(`navigation to ${url} failed: ${nav.errorText}`);
      await loaded;
      return sessionId;
    })();
    const sessionId = await Promise.race([load, timeout]).finally(() => clearTimeout(timer));
    return {
      errors,
      console: consoleLines,
      close,
      evaluate: async <T>(expression: string): Promise<T> => {
        const r = (await send("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true }, sessionId)) as {
          result: { value?: unknown };
          exceptionDetails?: { text?: string; exception?: { description?: string } };
        };
        if (r.exceptionDetails) throw new Error(`evaluate: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
        return r.result.value as T;
      },
    };
  } catch (error) {
    await close();
    throw error;
  }
}

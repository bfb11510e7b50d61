/**
 * Starting one member as a child process in its own process group, and capturing its output.
 *
 * - The member's directory `<runDir>/members/<member>/` is created, `app.files` are written into it
 *   (mode 0600, refusing to overwrite or to follow a path outside it), and it is the working directory.
 * - The process is spawned with execa (https://github.com/sindresorhus/execa, `detached: true`, so
 *   setsid(2) makes it the leader of a new session and process group: pgid = pid), stdin ignored.
 * - Environment: the plan's env (COHORT_* variables, secrets, app.env) on top of a small allowlist of
 *   the runtime's own environment ({@link INHERITED_ENV}); nothing else of the runtime's environment
 *   (cloud credentials, tokens) reaches a member.
 * - stdout and stderr are read line by line, member secrets are replaced with `[redacted]`, and each line
 *   is appended to `<member dir>/output.log` (both streams, in arrival order), kept in a ring buffer of the
 *   last {@link RING_LINES} lines (for failure messages) and handed to `log` readiness probes.
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as path from "node:path";
import type { Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import type { ResultPromise } from "execa";
import type { MemberPlan } from "../../core/backend";
import { cutUnits } from "../../core/text";

/**
 * execa, loaded once with a dynamic `import()`: execa 10 and its dependencies are ESM-only, and some
 * (unicorn-magic) export only an `import` condition, so a CommonJS `require` chain (e.g. under tsx's
 * require hook) cannot load them; an ESM import can, in Node, tsx, vitest and the esbuild bundle alike.
 */
let execaModule: Promise<typeof import("execa")> | null = null;
export function loadExeca(): Promise<typeof import("execa")> {
  execaModule ??= import("execa");
  return execaModule;
}

/** Names copied from the runtime's environment into every member's (when set). */
export const INHERITED_ENV: readonly string[] = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"];

/** Lines kept in memory per member for `outputTail`. */
export const RING_LINES = 50;
/** Longest line kept in the ring buffer, in UTF-16 code units (longer lines are cut on a code-point boundary, with a marker). */
const RING_LINE_CHARS = 2_000;
/** A partial line longer than this (UTF-16 code units) is written out before its newline arrives, on a code-point boundary. */
const MAX_PENDING_CHARS = 64 * 1024;
/** Replacement for a secret in member output (same text as the ledger's). */
export const REDACTED = "[redacted]";

/** The environment a member process gets. */
export function memberEnvironment(plan: MemberPlan, parent: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of INHERITED_ENV) {
    const value = parent[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...plan.env };
}

/**
 * Creates the member's directory, writes its files and creates its (empty) `output.log`.
 *
 * @throws {Error} when a file path would leave the directory or a file already exists
 */
export async function prepareMemberDir(plan: MemberPlan): Promise<void> {
  const root = path.resolve(plan.workDir);
  await fsp.mkdir(root, { recursive: true, mode: 0o755 });
  for (const [relative, content] of Object.entries(plan.files)) {
    const target = path.resolve(root, relative);
    if (!target.startsWith(root + path.sep)) throw new Error(`file "${relative}" would be written outside the member's directory`);
    await fsp.mkdir(path.dirname(target), { recursive: true });
    // O_EXCL|O_NOFOLLOW semantics: "wx" refuses an existing file or symlink at the final component.
    await fsp.writeFile(target, content, { flag: "wx", mode: 0o600 });
  }
  // output.log exists from here on (OutputCapture opens it only at the member's first line).
  await (await fsp.open(path.join(root, "output.log"), "a", 0o644)).close();
}

/**
 * Line-oriented capture of a member's stdout and stderr: redaction, output.log, ring buffer, listeners.
 */
export class OutputCapture {
  /** output.log, opened at the first line (or by {@link end}): see the constructor. */
  private file: fs.WriteStream | null = null;
  private readonly logPath: string;
  private readonly secrets: readonly string[];
  private readonly keep: number;
  private readonly ring: string[] = [];
  private readonly listeners = new Set<(line: string) => void>();
  private open = 0;
  private readonly closedWaiters: Array<() => void> = [];

  /**
   * @param logPath - file to append to (created if missing)
   * @param secrets - values to replace with `[redacted]` (at least 1 character each)
   */
  constructor(logPath: string, secrets: readonly string[]) {
    // Not opened here: a capture is made for every start, and when a wide level starts, each open (a file
    // stream and a thread-pool open) runs back to back with the spawns on the event loop. Opened at the first
    // line instead, or, for a member that writes nothing, by end(), so that output.log always exists.
    this.logPath = logPath;
    this.secrets = secrets.filter((secret) => secret.length > 0);
    this.keep = Math.max(0, ...this.secrets.map((secret) => secret.length - 1));
  }

  /**
   * Announces `count` streams that will be attached later (launcher connections), so that
   * {@link closed} waits for them even before they arrive.
   */
  expect(count: number): void {
    this.open += count;
  }

  /**
   * Reads `stream` until it ends. Bytes are decoded as UTF-8 by one decoder per stream, which carries
   * the incomplete tail of a chunk (a character split between two reads) over to the next chunk, so
   * output.log never gets a character cut in two; invalid bytes become U+FFFD.
   *
   * @param options.initial - bytes already read from the stream (after a header), decoded before the
   *   stream's own chunks by the same decoder (they may end inside a character)
   * @param options.expected - the stream was announced with {@link expect}
   */
  attach(stream: Readable | null | undefined, options: { initial?: Buffer; expected?: boolean } = {}): void {
    if (stream === null || stream === undefined) return;
    if (options.expected !== true) this.open++;
    const decoder = new StringDecoder("utf8");
    let pending = "";
    const onChunk = (chunk: Buffer | string): void => {
      pending += typeof chunk === "string" ? chunk : decoder.write(chunk);
      let newline = pending.indexOf("\n");
      while (newline !== -1) {
        this.line(pending.slice(0, newline), true);
        pending = pending.slice(newline + 1);
        newline = pending.indexOf("\n");
      }
      if (pending.length > MAX_PENDING_CHARS) {
        // Redact first, then keep the last (longest secret - 1) characters: a secret that is not complete
        // yet can only start inside the kept part, so no piece of one is ever written.
        // The cut never falls between the two halves of a surrogate pair (cutUnits), so each write is
        // whole characters.
        const redacted = this.redact(pending);
        const cut = cutUnits(redacted, redacted.length - this.keep).length;
        this.line(redacted.slice(0, cut), false, true);
        pending = redacted.slice(cut);
      }
    };
    if (options.initial !== undefined && options.initial.length > 0) onChunk(options.initial);
    stream.on("data", onChunk);
    stream.resume();
    const finish = (): void => {
      pending += decoder.end(); // an incomplete character at the very end becomes U+FFFD
      if (pending !== "") this.line(pending, true);
      pending = "";
      this.open--;
      if (this.open === 0) for (const resolve of this.closedWaiters.splice(0)) resolve();
    };
    let finished = false;
    const finishOnce = (): void => {
      if (finished) return;
      finished = true;
      finish();
    };
    stream.once("end", finishOnce);
    stream.once("error", finishOnce);
    stream.once("close", finishOnce);
  }

  /** Resolves when every attached stream has ended, or after `timeoutMs`. */
  closed(timeoutMs: number): Promise<void> {
    if (this.open === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      this.closedWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Subscribes to lines; the lines already in the ring buffer are replayed first. */
  onLine(listener: (line: string) => void): () => void {
    for (const line of [...this.ring]) listener(line);
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The last `lines` lines (redacted), joined with `\n`. */
  tail(lines: number): string {
    return lines <= 0 ? "" : this.ring.slice(-lines).join("\n");
  }

  /** Flushes and closes output.log. */
  end(): Promise<void> {
    return new Promise((resolve) => {
      const file = this.logFile();
      if (file.closed || file.destroyed) resolve();
      else file.end(() => resolve());
    });
  }

  private logFile(): fs.WriteStream {
    if (this.file === null) {
      this.file = fs.createWriteStream(this.logPath, { flags: "a", mode: 0o644 });
      this.file.on("error", () => undefined); // a full disk must not crash the runtime; the tail stays in memory
    }
    return this.file;
  }

  private redact(text: string): string {
    let out = text;
    for (const secret of this.secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    return out;
  }

  private line(raw: string, newline: boolean, alreadyRedacted = false): void {
    const text = alreadyRedacted ? raw : this.redact(raw);
    const file = this.logFile();
    if (!file.destroyed) file.write(newline ? `${text}\n` : text);
    const kept = text.length > RING_LINE_CHARS ? `${cutUnits(text, RING_LINE_CHARS)}… (${text.length} characters)` : text;
    this.ring.push(kept);
    if (this.ring.length > RING_LINES) this.ring.shift();
    for (const listener of this.listeners) listener(text);
  }
}

/**
 * Spawns the member's command in a new process group (execa `detached: true`). Synchronous: the
 * fork and exec happen inside this call (libuv waits until the child has exec'd); use
 * {@link awaitSpawn} for the outcome.
 */
export function launchMember(execa: (typeof import("execa"))["execa"], plan: MemberPlan, env: Record<string, string>, cgroupDir?: string): ResultPromise {
  let [file, ...args] = plan.command;
  if (cgroupDir !== undefined) {
    // No pre-exec hook in a spawn from Node: a shell enters the cgroup (writing its own pid, which its exec
    // keeps), then execs the member, so no fork of the member runs outside it. The program is resolved here
    // first, so a missing command is still a start error (the member's argv[0] becomes its resolved path).
    const resolved = lookPath(file!, env.PATH, plan.workDir);
    args = ["-c", 'echo $$ > "$0" || exit 126; exec "$@"', path.join(cgroupDir, "cgroup.procs"), resolved, ...args];
    file = "/bin/sh";
  }
  const subprocess = execa(file!, args, {
    cwd: plan.workDir,
    env,
    extendEnv: false,
    detached: true,
    killDescendants: true,
    cleanup: false, // the backend's own exit handler SIGKILLs every member group (see ./index.ts)
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    buffer: false,
    reject: false,
    stripFinalNewline: false,
  });
  subprocess.catch(() => undefined);
  return subprocess;
}

/**
 * Resolves `file` like execvp(3) against `pathVar` (relative PATH entries against `dir`); a name with a
 * slash is returned as is. Same rules as lookPath in runtime/launcher/main.go.
 *
 * @throws {Error} with code ENOENT (not found) or EACCES (found, not executable), as a failed spawn would
 */
export function lookPath(file: string, pathVar: string | undefined, dir: string): string {
  if (file.includes("/")) return file;
  let denied = false;
  for (const entry of (pathVar ?? "/usr/local/bin:/usr/bin:/bin").split(":")) {
    const candidate = path.resolve(dir, entry === "" ? "." : entry, file);
    let stat: fs.Stats;
    try {
      stat = fs.statSync(candidate);
    } catch {
      continue;
    }
    if (stat.isDirectory()) continue;
    if ((stat.mode & 0o111) === 0) {
      denied = true;
      continue;
    }
    return candidate;
  }
  const error = new Error(denied ? `permission denied: ${file}` : `not found: ${file}`) as NodeJS.ErrnoException;
  error.code = denied ? "EACCES" : "ENOENT";
  throw error;
}

/**
 * Waits for the outcome of {@link launchMember} and attaches the output capture.
 *
 * @returns the pid (= pgid)
 * @throws {Error} `cannot run "<program>": <reason>` when it could not be spawned (ENOENT, EACCES, ...)
 */
export async function awaitSpawn(subprocess: ResultPromise, plan: MemberPlan, output: OutputCapture): Promise<number> {
  const child = subprocess.nodeChildProcess;
  await new Promise<void>((resolve, reject) => {
    const onSpawn = (): void => {
      child.off("error", onError);
      resolve();
    };
    const onError = (error: NodeJS.ErrnoException): void => {
      child.off("spawn", onSpawn);
      const reason = error.code === "ENOENT" ? "command not found (ENOENT)" : error.code === "EACCES" ? "permission denied (EACCES)" : error.message;
      reject(new Error(`cannot run "${plan.command[0]}": ${reason}`));
    };
    child.once("spawn", onSpawn);
    child.once("error", onError);
  });
  output.attach(subprocess.stdout);
  output.attach(subprocess.stderr);
  return child.pid!;
}

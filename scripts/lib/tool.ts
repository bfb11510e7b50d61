/**
 * The generic part of the toolchain: a {@link Tool} describes how to produce one pinned program; {@link ensureTools}
 * makes sure each is present in the cache, building into a temporary directory that is renamed into place
 * only after its stamp is written, so an interrupted build never looks finished.
 *
 * Node-20-safe (only `node:` built-ins): `scripts/toolchain.ts` runs it under the system Node to fetch Node 24
 * itself. Build functions of individual tools may use execa; they run only under Node >= 22.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import type { OfficialArtifact } from "../../common/pins";
import { ArtifactRefusedError, downloadVerified, extractTarMember, type ToolchainSource } from "./download";
import { toolDir } from "../../common/paths";
import { canonicalJson, readStamp, sha256File, writeStamp, type Stamp, type StampSource } from "../../common/stamp";

/** Shared inputs of every tool step. */
export interface ToolContext {
  /** Cache root (see `cacheRoot()`). */
  readonly cacheRoot: string;
  /** Where binaries come from. */
  readonly source: ToolchainSource;
  /** The repo-local Pulumi home that plugins are installed into. */
  readonly pulumiHome: string;
  /** Environment for child processes (builds inherit it). */
  readonly env: NodeJS.ProcessEnv;
  /** Progress line sink (stderr in the CLI). */
  readonly log: (line: string) => void;
  /**
   * When true, a tool that is not already finished raises {@link NeedsBuildError} instead of being produced
   * (the Node-20 first stage of `npm run toolchain` uses this to finish warm runs without re-executing).
   * @default false
   */
  readonly noBuild?: boolean;
}

/** Inputs of one build. */
export interface BuildContext extends ToolContext {
  /** Empty temporary directory to fill; it becomes the tool directory once the stamp is written. */
  readonly outDir: string;
  /** Scratch directory (source copies, wrapper modules); removed after the build. */
  readonly workDir: string;
}

/** A program the toolchain provides, pinned to one version. */
export interface Tool {
  /** Name used in the cache directory and in progress lines, e.g. `pulumi-resource-command`. */
  readonly name: string;
  /** Version used in the cache directory, e.g. `v1.2.1`. */
  readonly version: string;
  /** JSON-serialisable pin; it is stored in the stamp, and a different pin makes the directory stale. */
  readonly pin: unknown;
  /** Executables by logical name, as paths relative to the tool directory (e.g. `{ pulumi: "bin/pulumi" }`). */
  readonly binaries: Readonly<Record<string, string>>;
  /**
   * Proof that a binary runs and is the pinned version, checked on every run (warm path included):
   * `binary` (a key of `binaries`) is run with `args`, and its stdout+stderr must contain `expect`.
   */
  readonly versionCheck?: { readonly binary: string; readonly args: readonly string[]; readonly expect: string };
  /**
   * When the tool is not needed on this machine, the reason (printed); the tool is then skipped.
   * @default always needed
   */
  skipReason?(ctx: ToolContext): string | undefined;
  /** What `build` does, for progress lines. @default "a source build" */
  readonly buildDescription?: string;
  /** Official release artifact that may replace the build (see `COHORT_TOOLCHAIN_SOURCE`). */
  readonly official?: { readonly artifact: OfficialArtifact; readonly binary: string };
  /** Builds the tool into `ctx.outDir` (every entry of `binaries` must exist afterwards). */
  build(ctx: BuildContext): Promise<StampSource>;
  /** Cheap step run after the tool is ready on every run, e.g. linking a plugin into `PULUMI_HOME`. */
  afterReady?(ready: ReadyTool, ctx: ToolContext): Promise<void> | void;
}

/**
 * A named group of tools that `npm run toolchain -- <name>` ensures. `default` is built in; another set
 * `<name>` is loaded from `scripts/toolchain-<name>.ts`, which must export `toolSet: ToolSet`.
 */
export interface ToolSet {
  /** Set name as typed on the command line, e.g. `sim`. */
  readonly name: string;
  /** One line shown in `npm run toolchain -- --help`. */
  readonly description: string;
  /** The tools, in build order. */
  tools(): readonly Tool[] | Promise<readonly Tool[]>;
}

/** Result of ensuring one tool. */
export interface ReadyTool {
  readonly tool: Tool;
  /** What happened: found finished (`warm`), built, downloaded, or skipped (not needed here). */
  readonly outcome: "warm" | "built" | "downloaded" | "substitute" | "skipped";
  /** Wall time of this step in seconds. */
  readonly seconds: number;
  /** Tool directory (absent when skipped). */
  readonly dir?: string;
  /** Absolute paths of the executables by logical name (empty when skipped). */
  readonly binaries: Readonly<Record<string, string>>;
  /** The stamp (absent when skipped). */
  readonly stamp?: Stamp;
  /** Why the tool was skipped. */
  readonly skipReason?: string;
}

/** Raised when a tool cannot be produced; the message names the tool and the step. */
export class ToolBuildError extends Error {
  constructor(
    message: string,
    readonly tool: string,
  ) {
    super(message);
    this.name = "ToolBuildError";
  }
}

/** Raised by {@link ensureTool} under `noBuild` when a tool would have to be produced. */
export class NeedsBuildError extends Error {
  constructor(
    readonly tool: string,
    readonly reason: string,
  ) {
    super(`${tool}: ${reason}`);
    this.name = "NeedsBuildError";
  }
}

/**
 * Checks that a finished tool directory matches the tool: stamp present, same pin, every binary present with
 * the recorded size, and the version check passes.
 *
 * @returns `undefined` when usable, otherwise the reason it is not.
 */
export function checkToolDir(tool: Tool, dir: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const stamp = readStamp(dir);
  if (stamp === undefined) return fs.existsSync(dir) ? "no valid stamp (unfinished build)" : "not built";
  if (canonicalJson(stamp.pin) !== canonicalJson(tool.pin)) return "stamp records a different pin";
  for (const [name, rel] of Object.entries(tool.binaries)) {
    const recorded = stamp.binaries[name];
    let size: number;
    try {
      size = fs.statSync(path.join(dir, rel)).size;
    } catch {
      return `binary ${rel} is missing`;
    }
    if (recorded === undefined || recorded.size !== size) return `binary ${rel} differs from the stamp`;
  }
  if (tool.versionCheck !== undefined) {
    const rel = tool.binaries[tool.versionCheck.binary];
    const bin = path.join(dir, rel ?? tool.versionCheck.binary);
    let out: string;
    try {
      out = execFileSync(bin, [...tool.versionCheck.args], {
        encoding: "utf8",
        env,
        timeout: 60_000,
        stdio: ["ignore", "pipe", "pipe"],
      });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      out = `${e.stdout ?? ""}${e.stderr ?? ""}`;
      if (!out.includes(tool.versionCheck.expect)) {
        return `${rel} ${tool.versionCheck.args.join(" ")} failed: ${e.message.split("\n")[0]}`;
      }
    }
    if (!out.includes(tool.versionCheck.expect)) {
      return `${rel} ${tool.versionCheck.args.join(" ")} printed ${JSON.stringify(out.trim().slice(0, 200))}, expected ${JSON.stringify(tool.versionCheck.expect)}`;
    }
  }
  return undefined;
}

function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Removes temporary build directories left by processes that no longer run. */
function removeStaleTemps(root: string): void {
  const tmpRoot = path.join(root, ".tmp");
  let entries: string[];
  try {
    entries = fs.readdirSync(tmpRoot);
  } catch {
    return;
  }
  for (const entry of entries) {
    const pid = Number(/\.pid(\d+)\./.exec(entry)?.[1]);
    if (!pidAlive(pid)) fs.rmSync(path.join(tmpRoot, entry), { recursive: true, force: true });
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Takes the per-tool lock (`<cache>/.locks/<name>-<version>.lock`, holding the owner's pid), waiting while
 * another live process holds it; a lock of a dead process is taken over.
 *
 * @returns a function that releases the lock.
 */
async function lockTool(root: string, tool: Tool, log: (line: string) => void): Promise<() => void> {
  const dir = path.join(root, ".locks");
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${tool.name}-${tool.version}.lock`);
  let waitedSince = 0;
  for (;;) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: "wx" });
      return () => fs.rmSync(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const owner = Number(fs.readFileSync(file, "utf8").trim());
    if (!pidAlive(owner)) {
      fs.rmSync(file, { force: true });
      continue;
    }
    const now = Date.now();
    if (waitedSince === 0 || now - waitedSince > 30_000) {
      log(`${tool.name} ${tool.version}: waiting for process ${owner}, which is producing it`);
      waitedSince = now;
    }
    await sleep(1000);
  }
}

async function produce(tool: Tool, ctx: ToolContext, finalDir: string): Promise<{ source: StampSource; seconds: number }> {
  const tmpRoot = path.join(ctx.cacheRoot, ".tmp");
  fs.mkdirSync(tmpRoot, { recursive: true });
  const base = path.join(tmpRoot, `${tool.name}-${tool.version}.pid${process.pid}.${Date.now().toString(36)}`);
  const outDir = `${base}.out`;
  const workDir = `${base}.work`;
  fs.mkdirSync(outDir);
  fs.mkdirSync(workDir);
  const started = process.hrtime.bigint();
  try {
    let source: StampSource | undefined;
    const how = tool.buildDescription ?? "a source build";
    let announced = false;
    if (tool.official !== undefined && ctx.source !== "build") {
      const { artifact, binary } = tool.official;
      if (artifact.sha256 === null && ctx.source === "auto") {
        ctx.log(`${tool.name} ${tool.version}: no SHA-256 pinned for ${artifact.url}; using ${how}`);
        announced = true;
      } else {
        try {
          ctx.log(`${tool.name} ${tool.version}: downloading ${artifact.url}`);
          const archive = path.join(workDir, path.basename(new URL(artifact.url).pathname));
          await downloadVerified(artifact, archive);
          const rel = tool.binaries[binary];
          if (rel === undefined) throw new Error(`official.binary ${binary} is not a key of binaries`);
          if (artifact.member === "") {
            // The artifact is the executable itself (e.g. kind's release binaries).
            fs.mkdirSync(path.dirname(path.join(outDir, rel)), { recursive: true });
            fs.copyFileSync(archive, path.join(outDir, rel));
            fs.chmodSync(path.join(outDir, rel), 0o755);
          } else {
            extractTarMember(archive, artifact.member, path.join(outDir, rel));
          }
          source = "official";
        } catch (err) {
          if (ctx.source === "official" || !(err instanceof ArtifactRefusedError)) {
            throw new ToolBuildError(`${tool.name} ${tool.version}: ${(err as Error).message}`, tool.name);
          }
          ctx.log(`${tool.name} ${tool.version}: ${err.message}; using ${how}`);
          announced = true;
        }
      }
    }
    if (source === undefined) {
      if (!announced) ctx.log(`${tool.name} ${tool.version}: using ${how}`);
      source = await tool.build({ ...ctx, outDir, workDir });
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const binaries: Record<string, { path: string; size: number; sha256: string }> = {};
    for (const [name, rel] of Object.entries(tool.binaries)) {
      const file = path.join(outDir, rel);
      if (!fs.existsSync(file)) throw new ToolBuildError(`${tool.name} ${tool.version}: build produced no ${rel}`, tool.name);
      binaries[name] = { path: rel, size: fs.statSync(file).size, sha256: await sha256File(file) };
    }
    writeStamp(outDir, {
      schema: 1,
      tool: tool.name,
      version: tool.version,
      pin: tool.pin,
      source,
      createdAt: new Date().toISOString(),
      buildSeconds: Math.round(seconds * 10) / 10,
      binaries,
    });
    // Move any previous (stale or unfinished) directory aside, then put the finished one in place.
    if (fs.existsSync(finalDir)) fs.renameSync(finalDir, `${base}.old`);
    fs.renameSync(outDir, finalDir);
    return { source, seconds };
  } finally {
    fs.rmSync(workDir, { recursive: true, force: true });
    fs.rmSync(outDir, { recursive: true, force: true });
    fs.rmSync(`${base}.old`, { recursive: true, force: true });
  }
}

function absoluteBinaries(tool: Tool, dir: string): Record<string, string> {
  return Object.fromEntries(Object.entries(tool.binaries).map(([k, rel]) => [k, path.join(dir, rel)]));
}

/**
 * Ensures one tool: warm when its directory is finished and valid, otherwise produced (downloaded or built)
 * under a per-tool lock. Runs `afterReady` in every case except skip.
 *
 * @throws ToolBuildError when the tool cannot be produced or fails its version check after producing it.
 */
export async function ensureTool(tool: Tool, ctx: ToolContext): Promise<ReadyTool> {
  const started = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - started) / 1e9;
  const skipReason = tool.skipReason?.(ctx);
  if (skipReason !== undefined) {
    ctx.log(`${tool.name} ${tool.version}: skipped (${skipReason})`);
    return { tool, outcome: "skipped", seconds: elapsed(), binaries: {}, skipReason };
  }
  const dir = toolDir(ctx.cacheRoot, tool.name, tool.version);
  let problem = checkToolDir(tool, dir, ctx.env);
  let outcome: ReadyTool["outcome"] = "warm";
  if (problem !== undefined && ctx.noBuild === true) throw new NeedsBuildError(`${tool.name} ${tool.version}`, problem);
  if (problem !== undefined) {
    const unlock = await lockTool(ctx.cacheRoot, tool, ctx.log);
    try {
      problem = checkToolDir(tool, dir, ctx.env); // another process may have finished it meanwhile
      if (problem !== undefined) {
        ctx.log(`${tool.name} ${tool.version}: ${problem}; producing it`);
        const { source, seconds } = await produce(tool, ctx, dir);
        outcome = source === "official" ? "downloaded" : source === "substitute" ? "substitute" : "built";
        const after = checkToolDir(tool, dir, ctx.env);
        if (after !== undefined) throw new ToolBuildError(`${tool.name} ${tool.version}: after producing it: ${after}`, tool.name);
        ctx.log(`${tool.name} ${tool.version}: ${outcome} in ${seconds.toFixed(1)}s`);
      }
    } finally {
      unlock();
    }
  }
  const stamp = readStamp(dir) as Stamp;
  const ready: ReadyTool = { tool, outcome, seconds: elapsed(), dir, binaries: absoluteBinaries(tool, dir), stamp };
  await tool.afterReady?.(ready, ctx);
  if (outcome === "warm") ctx.log(`${tool.name} ${tool.version}: ready (warm, ${ready.seconds.toFixed(2)}s)`);
  return ready;
}

/**
 * Ensures every tool in order (sequentially: builds are CPU-bound and the machines are small).
 *
 * @throws ToolBuildError from the first tool that fails; tools before it stay finished in the cache.
 */
export async function ensureTools(tools: readonly Tool[], ctx: ToolContext): Promise<ReadyTool[]> {
  fs.mkdirSync(ctx.cacheRoot, { recursive: true });
  removeStaleTemps(ctx.cacheRoot);
  const ready: ReadyTool[] = [];
  for (const tool of tools) ready.push(await ensureTool(tool, ctx));
  return ready;
}

/**
 * The sim state file (`<state>/sim-state.json`): every process the supervisor started, with the identity that
 * lets any later process (e.g. Pulumi's delete command) stop exactly those processes. Written atomically after
 * every change, so a crash mid-start still leaves a file that `simctl stop` can act on.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { z } from "zod";
import { portNames } from "./ports";
import { componentNames } from "./render";

const processRecord = z.object({
  component: z.enum(componentNames),
  pid: z.number().int().positive(),
  startTicks: z.number().int(),
  binary: z.string(),
  args: z.array(z.string()),
  log: z.string(),
  startedAt: z.string(),
  /** Milliseconds from spawn to the component's readiness signal (absent until ready). */
  readyAfterMs: z.number().optional(),
});

/** One started process. */
export type ProcessRecord = z.infer<typeof processRecord>;

export const simStateSchema = z.object({
  schema: z.literal(1),
  stateDir: z.string(),
  createdAt: z.string(),
  // `temporal` defaults to 0 (none) so the state of a sim started before the Temporal dev server joined it still
  // reads (and `simctl stop` still stops it).
  ports: z.object({
    ...(Object.fromEntries(portNames.map((n) => [n, z.number().int()])) as Record<(typeof portNames)[number], z.ZodNumber>),
    temporal: z.number().int().default(0),
  }),
  podReadyDelayMs: z.number().int().nonnegative(),
  podReadyJitterMs: z.number().int().nonnegative(),
  /**
   * `GOGC` of every process (components/sim/goRuntime.ts goRuntimeEnv); absent in the state of a sim started before it was
   * recorded, whose processes ran with Go's defaults, as does a controller restarted in it (GO_RUNTIME_DEFAULTS).
   * Its range is checked where a process is spawned (simctl/cluster.ts), not here: a state that says something odd
   * must still let `simctl stop` stop what it names.
   */
  goGC: z.number().int().optional(),
  apiserverUrl: z.string(),
  kubeconfig: z.string(),
  contextName: z.string(),
  processes: z.array(processRecord),
});

/** Contents of `sim-state.json`. */
export type SimState = z.infer<typeof simStateSchema>;

/** Writes the state atomically (temp file, fsync, rename). */
export function writeState(file: string, state: SimState): void {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = fs.openSync(tmp, "w", 0o600);
  try {
    fs.writeSync(fd, `${JSON.stringify(state, null, 2)}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

/**
 * Reads the state file.
 *
 * @returns `undefined` when there is no state file.
 * @throws Error naming the file and the first invalid field when it exists but is not a sim state.
 */
export function readState(file: string): SimState | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const parsed = simStateSchema.safeParse(JSON.parse(text));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${file}: not a sim state file (${issue.path.join(".") || "(root)"}: ${issue.message})`);
  }
  return parsed.data;
}

/** True when `dir` is absent or an empty directory. */
export function isEmptyOrAbsent(dir: string): boolean {
  try {
    return fs.readdirSync(dir).length === 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return true;
    throw err;
  }
}

/** Absolute form of a user-given state dir. */
export function resolveStateDir(dir: string): string {
  return path.resolve(dir);
}

/** The pid in a lock file, or undefined. */
function lockOwner(file: string): number | undefined {
  try {
    const n = Number(fs.readFileSync(file, "utf8").trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Runs `fn` holding `<stateDir>.lock` (a file next to the state dir holding the owner's pid), so two simctl
 * processes never read-modify-write the state file at once (e.g. two controllers started in parallel). A lock
 * whose owner is dead is taken over.
 */
export async function withStateLock<T>(stateDir: string, fn: () => Promise<T>): Promise<T> {
  const file = `${path.resolve(stateDir)}.lock`;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  for (;;) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: "wx" });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const owner = lockOwner(file);
      if (owner === undefined || !alive(owner)) {
        fs.rmSync(file, { force: true });
        continue;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(file, { force: true });
  }
}

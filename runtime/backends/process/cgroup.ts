/**
 * One cgroup per member (process backend, Linux, root): nothing a member starts survives its teardown,
 * whatever it does to its session, process group or environment (`setsid env -i sleep 1000 &`), because
 * a process cannot leave its cgroup (only a writer of `cgroup.procs` with permission on both cgroups, i.e.
 * root, can move it) and every fork lands in its parent's cgroup.
 *
 * Layout: `<hierarchy>/cohort/<runId>/<member>`, created at admission (a restart's again at its start); the launcher puts the
 * member's process into it BEFORE exec (./launcher.ts, runtime/launcher/main.go), so no fork escapes.
 * `cohort reap` finds `<hierarchy>/cohort/<runId>` by the run id alone.
 *
 * Hierarchies, in the order `auto` tries them (see /proc/self/mounts):
 * - `v2`: a cgroup2 mount (`/sys/fs/cgroup` on a unified host; `/sys/fs/cgroup/unified` on a hybrid v1 host
 *   such as this project's dev VM). `cgroup.kill` (Linux >= 5.14) SIGKILLs every process of the cgroup and
 *   its descendants atomically with respect to forks, `cgroup.events` says `populated 0` once they are gone.
 *   Kernel docs: https://docs.kernel.org/admin-guide/cgroup-v2.html ("cgroup.kill", "cgroup.events").
 *   The native launcher places the child with clone3(CLONE_INTO_CGROUP) (Go `SysProcAttr.UseCgroupFD`).
 * - `freezer`: the cgroup v1 freezer hierarchy. Kill = write `FROZEN` to `freezer.state`, wait until it
 *   reads `FROZEN` (no process of the cgroup can run, so none can fork), SIGKILL every pid of
 *   `cgroup.procs`, write `THAWED` (the kills are delivered). Chosen over the v1 `pids` hierarchy, which
 *   can list a cgroup's processes but not stop a fork between the list and the kill.
 *   Kernel docs: https://docs.kernel.org/admin-guide/cgroup-v1/freezer-subsystem.html and
 *   https://docs.kernel.org/admin-guide/cgroup-v1/cgroups.html (`cgroup.procs`, `tasks`).
 * Where neither can be made (not root, no such mount, a read-only cgroupfs), the backend falls back to
 * process groups and writes one `backend-warning` record per run (./index.ts).
 *
 * Processes in `cgroup.procs` are live: a process leaves its cgroup when it exits (cgroup_exit() in
 * do_exit), so zombies awaiting their reaper are not listed.
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as path from "node:path";
import { isRunId } from "../../core/run-id";
import { PollingWaiters } from "./waiters";

/** The kinds of hierarchy the backend can use. */
export type CgroupKind = "v2" | "freezer";

/** Value of the `cgroup` backend option. */
export const cgroupModes = ["auto", "v2", "freezer", "off"] as const;
/** `auto` (v2, else freezer, else none), `v2`, `freezer`, `off` (process groups only). */
export type CgroupMode = (typeof cgroupModes)[number];

/** A mounted hierarchy the backend may create cgroups in. */
export interface CgroupHierarchy {
  readonly kind: CgroupKind;
  /** Mount point, e.g. `/sys/fs/cgroup/unified` or `/sys/fs/cgroup/freezer`. */
  readonly mount: string;
}

/** The directory under a hierarchy that holds every run's cgroups. */
export const COHORT_CGROUP_DIR = "cohort";

/**
 * The writable hierarchies mounted here, v2 first, from a mounts table (proc(5) /proc/[pid]/mounts:
 * `source mountpoint fstype options ...`). Read-only mounts are left out.
 *
 * @param mountsFile - @default "/proc/self/mounts"
 * @returns possibly empty (not Linux, no cgroupfs)
 */
export function cgroupHierarchies(mountsFile = "/proc/self/mounts"): CgroupHierarchy[] {
  let text: string;
  try {
    text = fs.readFileSync(mountsFile, "utf8");
  } catch {
    return [];
  }
  const v2: CgroupHierarchy[] = [];
  const freezer: CgroupHierarchy[] = [];
  for (const line of text.split("\n")) {
    const [, mount, type, options] = line.split(" ");
    if (mount === undefined || options === undefined) continue;
    const flags = options.split(",");
    if (flags.includes("ro")) continue;
    const where = mount.replace(/\\040/g, " ");
    if (type === "cgroup2") v2.push({ kind: "v2", mount: where });
    else if (type === "cgroup" && flags.includes("freezer")) freezer.push({ kind: "freezer", mount: where });
  }
  return [...v2, ...freezer];
}

/**
 * The run's directory in `hierarchy`: `<mount>/cohort/<runId>`.
 *
 * @throws {Error} `run id "<runId>" is not a run id ...` when `runId` is not a run id (runtime/core/run-id.ts):
 *   `../victim` would name another cgroup
 */
export function runCgroupDir(hierarchy: CgroupHierarchy, runId: string): string {
  if (!isRunId(runId)) throw new Error(`run id ${JSON.stringify(runId)} is not a run id (a Kubernetes label value): refusing to derive a cgroup path from it`);
  return path.join(hierarchy.mount, COHORT_CGROUP_DIR, runId);
}

/**
 * Checks that cgroup `dir`, resolved (realpath), is strictly inside `<mount>/cohort/` of `hierarchy`: the
 * only cgroups the backend and `cohort reap` ever kill or remove.
 *
 * @returns false when `dir` does not exist (nothing to kill)
 * @throws {Error} naming `dir` and where it resolves when it is outside `<mount>/cohort/`
 */
export function checkInsideCohort(hierarchy: CgroupHierarchy, dir: string): boolean {
  let real: string;
  let root: string;
  try {
    real = fs.realpathSync(dir);
  } catch {
    return false;
  }
  try {
    root = fs.realpathSync(path.join(hierarchy.mount, COHORT_CGROUP_DIR));
  } catch {
    root = path.join(hierarchy.mount, COHORT_CGROUP_DIR);
  }
  if (!real.startsWith(root + path.sep)) throw new Error(`refusing to kill or remove cgroup ${dir}: it resolves to ${real}, outside ${root}${path.sep}`);
  return true;
}

/** One cgroup directory of a run's tree with the live processes directly in it (its own `cgroup.procs`). */
export interface RunCgroupEntry {
  /** Path relative to the run's directory: `""` for the run's directory itself, `web-0`, `zz/deeper`. */
  readonly rel: string;
  readonly dir: string;
  readonly pids: readonly number[];
}

/**
 * The run's cgroup `runDir` and every descendant cgroup, parents before children, each with the pids
 * directly in it.
 *
 * @returns empty when `runDir` does not exist
 */
export function runCgroupTree(runDir: string): RunCgroupEntry[] {
  const out: RunCgroupEntry[] = [];
  const walk = (dir: string, rel: string): void => {
    let text: string;
    try {
      text = fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8");
    } catch {
      return;
    }
    out.push({
      rel,
      dir,
      pids: text
        .split("\n")
        .filter((line) => line !== "")
        .map(Number),
    });
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) if (entry.isDirectory()) walk(path.join(dir, entry.name), rel === "" ? entry.name : `${rel}/${entry.name}`);
  };
  walk(runDir, "");
  return out;
}

/**
 * Who a directory of a run's cgroup tree belongs to: a member when its path relative to the run's
 * directory is one member id of `roster` (`web-0`), or a descendant of one (`web-0/sub`: the member made
 * it); else the run (`""`, the run's directory itself, or a sibling such as `zz` that a member created).
 */
export function cgroupOwner(rel: string, roster: ReadonlySet<string>): { member: string } | { scope: "run" } {
  const top = rel.split("/")[0]!;
  return rel !== "" && roster.has(top) ? { member: top } : { scope: "run" };
}

/**
 * Picks the hierarchy for `mode` and proves it usable: creates `<mount>/cohort/<runId>` (and, for v2,
 * checks that `cgroup.kill` exists, Linux >= 5.14).
 *
 * @returns the hierarchy, or the reason none can be used (one line)
 */
export function openRunCgroups(mode: CgroupMode, runId: string, mountsFile?: string): { hierarchy: CgroupHierarchy; dir: string } | { unavailable: string } {
  if (mode === "off") return { unavailable: "cgroups are turned off (backend option cgroup=off)" };
  if (process.platform !== "linux") return { unavailable: `cgroups are Linux only; this is ${process.platform}` };
  const candidates = cgroupHierarchies(mountsFile).filter((h) => mode === "auto" || h.kind === mode);
  if (candidates.length === 0) {
    return {
      unavailable:
        mode === "auto" ? "no writable cgroup2 or cgroup v1 freezer hierarchy is mounted" : `no writable ${mode === "v2" ? "cgroup2" : "cgroup v1 freezer"} hierarchy is mounted`,
    };
  }
  const reasons: string[] = [];
  for (const hierarchy of candidates) {
    const dir = runCgroupDir(hierarchy, runId);
    try {
      mkdirp(dir);
      if (hierarchy.kind === "v2" && !fs.existsSync(path.join(dir, "cgroup.kill"))) {
        removeTree(dir);
        reasons.push(`${hierarchy.mount}: no cgroup.kill (Linux >= 5.14 needed)`);
        continue;
      }
      return { hierarchy, dir };
    } catch (error) {
      reasons.push(`cannot create ${dir}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  }
  return { unavailable: reasons.join("; ") };
}

/** mkdir -p that survives a concurrent run removing the shared `cohort` directory between two steps. */
function mkdirp(dir: string): void {
  for (let attempt = 0; ; attempt++) {
    try {
      fs.mkdirSync(dir, { recursive: true });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || attempt >= 3) throw error;
    }
  }
}

/**
 * Creates a member's cgroup `<runDir>/<member>`.
 *
 * @throws {Error} naming the directory and the errno when it cannot be made
 */
export function createMemberCgroup(runDir: string, member: string): string {
  const dir = path.join(runDir, member);
  try {
    mkdirp(dir);
  } catch (error) {
    throw new Error(`cannot create cgroup ${dir}: ${(error as Error).message}`, { cause: error });
  }
  return dir;
}

/**
 * {@link createMemberCgroup} without blocking the event loop (the process backend makes every member's
 * cgroup at admission).
 *
 * @throws {Error} naming the directory and the errno when it cannot be made
 */
export async function createMemberCgroupAsync(runDir: string, member: string): Promise<string> {
  const dir = path.join(runDir, member);
  for (let attempt = 0; ; attempt++) {
    try {
      await fsp.mkdir(dir, { recursive: true });
      return dir;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || attempt >= 3) throw new Error(`cannot create cgroup ${dir}: ${(error as Error).message}`, { cause: error });
    }
  }
}

/**
 * Pids of the live processes in cgroup `dir` and its descendant cgroups (`cgroup.procs` of each).
 *
 * @returns empty when the cgroup does not exist (any more)
 */
export function cgroupProcs(dir: string): number[] {
  const out: number[] = [];
  const walk = (d: string): void => {
    let text: string;
    try {
      text = fs.readFileSync(path.join(d, "cgroup.procs"), "utf8");
    } catch {
      return;
    }
    for (const line of text.split("\n")) if (line !== "") out.push(Number(line));
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) if (entry.isDirectory()) walk(path.join(d, entry.name));
  };
  walk(dir);
  return out;
}

/** Whether cgroup `dir` (with descendants) holds no live process; true when it does not exist. */
export function cgroupEmpty(kind: CgroupKind, dir: string): boolean {
  if (kind === "v2") {
    try {
      return /^populated 0$/m.test(fs.readFileSync(path.join(dir, "cgroup.events"), "utf8"));
    } catch {
      return true;
    }
  }
  return cgroupProcs(dir).length === 0;
}

/** How long {@link killCgroup} waits for a v1 freezer cgroup to read FROZEN, in ms. */
export const FREEZE_WAIT_MS = 1_000;

/**
 * SIGKILLs every process in cgroup `dir` and its descendants, with no window for a fork to escape
 * (v2: `cgroup.kill`; freezer: freeze, kill, thaw). Synchronous: usable from an `exit` handler. Does not
 * wait for the processes to be gone (see {@link cgroupEmpty}).
 *
 * @param exclude - pids never to kill (the runtime itself; the launcher, whose spawning thread sits in a
 *   v1 member cgroup for an instant, runtime/launcher/main.go)
 * @returns how many processes were in the cgroup when it was killed
 * @throws {Error} when a control file cannot be written (naming it and the errno); ENOENT (no such cgroup) is 0
 */
export function killCgroup(kind: CgroupKind, dir: string, exclude: ReadonlySet<number> = new Set()): number {
  if (!fs.existsSync(dir)) return 0;
  if (kind === "v2") {
    const count = cgroupProcs(dir).filter((pid) => !exclude.has(pid)).length;
    if (count === 0) return 0;
    writeControl(path.join(dir, "cgroup.kill"), "1");
    return count;
  }
  const state = path.join(dir, "freezer.state");
  writeControl(state, "FROZEN");
  const deadline = Date.now() + FREEZE_WAIT_MS;
  // FREEZING while some task is not frozen yet (e.g. in an uninterruptible sleep); the kill list is complete
  // only once FROZEN. Busy-wait: this also runs in an exit handler, where no timer fires.
  while (readControl(state) !== "FROZEN" && Date.now() < deadline) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
  const pids = cgroupProcs(dir).filter((pid) => !exclude.has(pid));
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // ESRCH: gone
    }
  }
  writeControl(state, "THAWED");
  return pids.length;
}

/**
 * Sends `signal` to every process of cgroup `dir` (with descendants) that is not in `skip`.
 *
 * @returns the pids signalled
 */
export function signalCgroup(dir: string, signal: NodeJS.Signals, skip: (pid: number) => boolean): number[] {
  const hit: number[] = [];
  for (const pid of cgroupProcs(dir)) {
    if (skip(pid)) continue;
    try {
      process.kill(pid, signal);
      hit.push(pid);
    } catch {
      // gone
    }
  }
  return hit;
}

/**
 * Removes cgroup `dir` and its descendant cgroups (rmdir, deepest first; a cgroup directory is removed
 * with rmdir(2) even though it lists control files). Fails quietly for a cgroup that still has processes
 * (EBUSY): `cohort reap` removes it later.
 *
 * @returns true when `dir` is gone
 */
export function removeTree(dir: string): boolean {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return !fs.existsSync(dir);
  }
  for (const entry of entries) if (entry.isDirectory()) removeTree(path.join(dir, entry.name));
  try {
    fs.rmdirSync(dir);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT";
  }
  return true;
}

/**
 * {@link removeTree}, tried again every 10 ms, at most `retries` more times, while it fails: a cgroup whose
 * processes were just killed stays busy (EBUSY) for a moment after it reads empty.
 *
 * @returns true when `dir` is gone
 */
export async function removeTreeRetrying(dir: string, retries: number): Promise<boolean> {
  for (let tries = 0; ; tries++) {
    if (removeTree(dir)) return true;
    if (tries >= retries) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Removes `<mount>/cohort` when no run uses it any more (ENOTEMPTY/EBUSY otherwise: left alone). */
export function removeCohortDirIfEmpty(hierarchy: CgroupHierarchy): void {
  try {
    fs.rmdirSync(path.join(hierarchy.mount, COHORT_CGROUP_DIR));
  } catch {
    // another run's cgroups are there, or it is gone
  }
}

function writeControl(file: string, value: string): void {
  try {
    fs.writeFileSync(file, value);
  } catch (error) {
    throw new Error(`cannot write "${value}" to ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, { cause: error });
  }
}

function readControl(file: string): string {
  try {
    return fs.readFileSync(file, "utf8").trim();
  } catch {
    return "";
  }
}

/**
 * `runId`'s cgroup directories (`<mount>/cohort/<runId>`) in every hierarchy mounted here (for `cohort reap`).
 *
 * @throws {Error} when `runId` is not a run id, or a directory resolves outside `<mount>/cohort/`
 *   ({@link runCgroupDir}, {@link checkInsideCohort})
 */
export function runCgroups(runId: string, mountsFile?: string): Array<{ hierarchy: CgroupHierarchy; dir: string }> {
  const out: Array<{ hierarchy: CgroupHierarchy; dir: string }> = [];
  for (const hierarchy of cgroupHierarchies(mountsFile)) {
    const dir = runCgroupDir(hierarchy, runId);
    if (checkInsideCohort(hierarchy, dir)) out.push({ hierarchy, dir });
  }
  return out;
}

/** Interval of {@link CgroupWatcher}'s checks, in ms (like GROUP_CHECK_INTERVAL_MS in ./status.ts). */
export const CGROUP_CHECK_INTERVAL_MS = 10;

/**
 * Waits for cgroups to become empty: while at least one is awaited, ONE timer checks every awaited cgroup
 * every {@link CGROUP_CHECK_INTERVAL_MS} (v2: one read of `cgroup.events`; freezer: `cgroup.procs`).
 */
export class CgroupWatcher {
  private readonly waiters = new PollingWaiters<CgroupKind>(CGROUP_CHECK_INTERVAL_MS, (awaited) =>
    [...awaited].filter(([dir, kind]) => cgroupEmpty(kind, dir)).map(([dir]) => dir),
  );

  /**
   * Waits until cgroup `dir` (with descendants) holds no live process.
   *
   * @param signal gives up the wait when it aborts (e.g. `AbortSignal.timeout(ms)`): no check runs for it after
   * @returns true once the cgroup is empty (at once when it already is); false when `signal` aborted first
   */
  waitEmpty(kind: CgroupKind, dir: string, signal?: AbortSignal): Promise<boolean> {
    if (cgroupEmpty(kind, dir)) return Promise.resolve(true);
    return this.waiters.wait(dir, kind, signal);
  }

  /** How many cgroups are awaited now (0: no check is running). */
  get waiting(): number {
    return this.waiters.size;
  }
}

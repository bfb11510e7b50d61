/**
 * The npm dependency closure of the Temporal run worker image (`cohort-lab.local/run-worker`,
 * components/kind/app-images.ts): which package directories of the repository's `node_modules` go to
 * `/opt/node_modules` in the image, computed from package-lock.json alone (plus an existence test for optional
 * dependencies). Both the image's input hash (planImages) and its builder (scripts/local/app-images/build.ts) use
 * {@link temporalWorkerClosure}, so what is hashed is what is copied.
 *
 * Why `/opt/node_modules`: the worker pod unpacks `dist/cohort.cjs`, `dist/cohort-temporal.cjs` and
 * `dist/cohort-temporal-workflows.js` into `/opt/cohort`, and Node resolves `require("@temporalio/worker")` from
 * `/opt/cohort/cohort-temporal.cjs` by walking up the directory tree to `/opt/node_modules`.
 *
 * Pure and Node-builtins free: the caller reads the lockfile and says which directories exist.
 */
import { CohortLabError } from "../errors";

/** One `packages` entry of package-lock.json (lockfileVersion 2 or 3), the fields the closure reads. */
export interface LockPackageEntry {
  readonly version?: string;
  /** SRI hash of the tarball, e.g. `sha512-…`; absent for bundled (`inBundle`) and linked entries. */
  readonly integrity?: string;
  /** For `link: true` entries, the lock key of the target directory. */
  readonly resolved?: string;
  readonly link?: boolean;
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly optionalDependencies?: Readonly<Record<string, string>>;
  /** package.json `os` of a platform-specific package, e.g. `["linux"]` (`!name` excludes one). */
  readonly os?: readonly string[];
  /** package.json `cpu`, e.g. `["x64"]`. */
  readonly cpu?: readonly string[];
  /** package.json `libc`, e.g. `["glibc"]` (Linux only). */
  readonly libc?: readonly string[];
}

/**
 * A platform as npm matches package.json's `os`, `cpu` and `libc` against it: Node's `process.platform`,
 * `process.arch` and, on Linux, `glibc` or `musl`.
 *
 * @see https://docs.npmjs.com/cli/v10/configuring-npm/package-json#os (and #cpu, #libc)
 */
export interface NpmPlatform {
  readonly os: string;
  readonly cpu: string;
  readonly libc: "glibc" | "musl";
}

/** The run worker image's platform: the Node image, Debian bookworm on x86_64 (glibc). */
export const RUN_WORKER_PLATFORM: NpmPlatform = { os: "linux", cpu: "x64", libc: "glibc" };

/**
 * Whether npm would install a package with `entry`'s `os`, `cpu` and `libc` on `platform`: for each field present,
 * no `!value` entry names the platform's value, and when the field has a positive entry, one of them is the value.
 * A package without these fields is for every platform.
 *
 * @see https://docs.npmjs.com/cli/v10/configuring-npm/package-json#os (`!` blocks a value)
 */
export function matchesPlatform(entry: Pick<LockPackageEntry, "os" | "cpu" | "libc">, platform: NpmPlatform): boolean {
  const fits = (list: readonly string[] | undefined, value: string) => {
    if (list === undefined || list.length === 0) return true;
    if (list.includes(`!${value}`)) return false;
    const positive = list.filter((v) => !v.startsWith("!"));
    return positive.length === 0 || positive.includes(value);
  };
  return fits(entry.os, platform.os) && fits(entry.cpu, platform.cpu) && fits(entry.libc, platform.libc);
}

/** The part of package-lock.json the closure reads. */
export interface PackageLockFile {
  readonly lockfileVersion?: number;
  /** Lock key (`""` for the root, `node_modules/<name>`, `node_modules/<a>/node_modules/<b>`, …) -> entry. */
  readonly packages?: Readonly<Record<string, LockPackageEntry>>;
}

/** One package of the closure. */
export interface ClosurePackage {
  /** Lock key = directory relative to the repository root, e.g. `node_modules/@temporalio/worker/node_modules/protobufjs`. */
  readonly path: string;
  /** Package name (the part after the last `node_modules/`), e.g. `protobufjs`. */
  readonly name: string;
  readonly version: string;
  /** The lock's SRI integrity, or `null` when the lock records none (bundled dependencies). */
  readonly integrity: string | null;
}

/** The packages the run worker requires directly (runtime/temporal/**, bundled as externals). */
export const TEMPORAL_WORKER_ROOTS = ["@temporalio/worker", "@temporalio/client", "@temporalio/activity", "@temporalio/common", "@temporalio/workflow"] as const;

/** Raised when the lockfile cannot give the closure: a required dependency is not locked or not installed. */
export class RunWorkerClosureError extends CohortLabError {
  constructor(message: string) {
    super(message);
    this.name = "RunWorkerClosureError";
  }
}

/**
 * The lock key Node would load `name` from when `require`d by the package at lock key `from`: the nearest
 * `<dir>/node_modules/<name>` from `from` upward (`from` itself, then each enclosing package directory, then the
 * root), as Node's module resolution walks `node_modules` directories toward `/`.
 *
 * @see https://nodejs.org/api/modules.html#loading-from-node_modules-folders
 * @see https://docs.npmjs.com/cli/v10/configuring-npm/package-lock-json#packages (lock keys are install paths)
 * @param from - lock key of the dependant; `""` is the root project.
 * @returns the lock key, or `undefined` when no enclosing directory locks `name`.
 */
export function resolveLockDependency(lock: PackageLockFile, from: string, name: string): string | undefined {
  const packages = lock.packages ?? {};
  let base = from;
  for (;;) {
    const candidate = `${base === "" ? "" : `${base}/`}node_modules/${name}`;
    if (Object.hasOwn(packages, candidate)) return candidate;
    if (base === "") return undefined;
    const cut = base.lastIndexOf("/node_modules/");
    base = cut < 0 ? "" : base.slice(0, cut);
  }
}

/**
 * The dependency closure of `roots` as installed by `npm ci` from `lock`: starting from the root project's view
 * of each root name, follows every entry's `dependencies` and `optionalDependencies`, each name resolved with
 * {@link resolveLockDependency} from the dependant's lock key. An optional dependency is included when it is locked,
 * is for `platform` ({@link matchesPlatform}: the image's, not this machine's) and `exists(<its lock key>)`; a
 * platform-specific one for `platform` that is not installed is an error (npm installed another platform's build,
 * e.g. on a Mac: the image would lack its native package). Peer dependencies are not followed (the Temporal packages' peers are also regular
 * dependencies of some package of the closure, or not needed by the worker).
 *
 * @param lock - parsed package-lock.json (lockfileVersion 2 or 3; `packages` is required).
 * @param exists - whether the directory at a lock key (relative to the lockfile's directory) exists.
 * @param roots - names required by the root project. @default {@link TEMPORAL_WORKER_ROOTS}
 * @param platform - the platform the closure runs on. @default {@link RUN_WORKER_PLATFORM}
 * @returns the packages sorted by lock key (a package directory before the packages nested in it), each once.
 * @throws RunWorkerClosureError when the lock has no `packages`, a root or required dependency is not locked or
 *   its directory does not exist (run `npm ci`), an entry has no version, an entry is a link (workspaces are not
 *   supported), or an optional package built for `platform` is locked but not installed.
 */
export function temporalWorkerClosure(
  lock: PackageLockFile,
  exists: (lockPath: string) => boolean,
  roots: readonly string[] = TEMPORAL_WORKER_ROOTS,
  platform: NpmPlatform = RUN_WORKER_PLATFORM,
): ClosurePackage[] {
  const packages = lock.packages;
  if (packages === undefined) throw new RunWorkerClosureError("package-lock.json has no `packages` (lockfileVersion 2 or 3 needed; run `npm install` with npm 7 or later)");
  const seen = new Map<string, ClosurePackage>();
  const queue: string[] = [];
  const add = (from: string, name: string, optional: boolean) => {
    const key = resolveLockDependency(lock, from, name);
    const who = from === "" ? "package.json" : from;
    if (key === undefined) {
      if (optional) return;
      throw new RunWorkerClosureError(`package-lock.json: ${name}, a dependency of ${who}, is not locked; run \`npm install\``);
    }
    if (seen.has(key)) return;
    const locked = packages[key] as LockPackageEntry;
    // Another platform's build (this machine's own, when it is not the image's) stays out of the image.
    if (optional && !matchesPlatform(locked, platform)) return;
    if (!exists(key)) {
      const specific = locked.os !== undefined || locked.cpu !== undefined || locked.libc !== undefined;
      if (optional && specific)
        throw new RunWorkerClosureError(
          `${key} (${name}, a dependency of ${who}) is the ${platform.os}-${platform.cpu} ${platform.libc} build the run worker image needs, ` +
            `locked but not installed here (npm installs only this machine's platform's optional packages): build the image on ${platform.os}-${platform.cpu} after \`npm ci\``,
        );
      if (optional) return;
      throw new RunWorkerClosureError(`${key} (${name}, a dependency of ${who}) is locked but not installed; run \`npm ci\``);
    }
    const entry = locked;
    if (entry.link === true)
      throw new RunWorkerClosureError(`package-lock.json: ${key} is a link (${entry.resolved ?? "?"}); linked packages are not supported in the run worker image`);
    if (entry.version === undefined) throw new RunWorkerClosureError(`package-lock.json: ${key} has no version`);
    seen.set(key, { path: key, name: key.slice(key.lastIndexOf("node_modules/") + "node_modules/".length), version: entry.version, integrity: entry.integrity ?? null });
    queue.push(key);
  };
  for (const r of roots) add("", r, false);
  while (queue.length > 0) {
    const key = queue.shift() as string;
    const entry = packages[key] as LockPackageEntry;
    for (const name of Object.keys(entry.dependencies ?? {})) add(key, name, Object.hasOwn(entry.optionalDependencies ?? {}, name));
    for (const name of Object.keys(entry.optionalDependencies ?? {})) add(key, name, true);
  }
  return [...seen.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The part of package.json {@link temporalSdkVersion} reads. */
export interface PackageJsonDeps {
  readonly dependencies?: Readonly<Record<string, string>>;
}

/**
 * The Temporal TypeScript SDK version package.json pins: every root of `roots` must be a dependency pinned to the
 * same exact version (`MAJOR.MINOR.PATCH[-pre]`, no range). It is the run worker image's tag.
 *
 * @returns e.g. `1.24.0`.
 * @throws RunWorkerClosureError naming the package when a root is missing, is a range, or disagrees with the others.
 */
export function temporalSdkVersion(pkg: PackageJsonDeps, roots: readonly string[] = TEMPORAL_WORKER_ROOTS): string {
  let version: string | undefined;
  for (const r of roots) {
    const v = pkg.dependencies?.[r];
    if (v === undefined) throw new RunWorkerClosureError(`package.json: ${r} is not a dependency (the run worker image needs ${roots.join(", ")})`);
    if (!/^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/.test(v))
      throw new RunWorkerClosureError(`package.json: ${r} must be an exact version (the run worker image's tag); got ${JSON.stringify(v)}`);
    if (version !== undefined && v !== version) throw new RunWorkerClosureError(`package.json pins ${roots[0]} ${version} but ${r} ${v}: the Temporal SDK packages must agree`);
    version = v;
  }
  if (version === undefined) throw new RunWorkerClosureError("temporalSdkVersion: no roots");
  return version;
}

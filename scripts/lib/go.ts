/**
 * Building Go programs from the Go module proxy, outside the work tree.
 *
 * Two recipes (docs/toolchain.md "What `npm run toolchain` provides"):
 * - {@link goBuild}: a throw-away *wrapper module* that requires the program's module at a pinned version or
 *   commit, then `go build`s its main package. This works where `go install pkg@version` is refused because
 *   the module's go.mod has replace directives (the Pulumi CLI), or because the proxy answers 403 for a
 *   package-path prefix (the command provider, see {@link goModDownload}).
 * - {@link goBuildSourceCopy}: a writable copy of a module zip from the proxy, for modules whose main package
 *   embeds generated files that the zip lacks (the kubernetes provider).
 *
 * Every `go` command runs with `GOTOOLCHAIN=local`, `CGO_ENABLED=0` and `GOWORK=off`; the default
 * GOMODCACHE/GOCACHE are kept (they make rebuilds fast) and may be overridden through the environment.
 * Requires Node >= 22 (execa).
 */
import { loadExeca } from "./process";
import * as fs from "node:fs";
import * as path from "node:path";
import { ToolBuildError } from "./tool";

/** Options shared by the Go helpers. */
export interface GoCommonOptions {
  /** Base environment (GOPROXY, GOMODCACHE, GOCACHE, GOFLAGS are honoured). */
  readonly env: NodeJS.ProcessEnv;
  /** Progress line sink; `go` output lines are passed through with a prefix. */
  readonly log: (line: string) => void;
  /** Prefix of passed-through lines, e.g. `pulumi`. */
  readonly label: string;
}

/** What `go build` should produce. */
export interface GoBinaryOptions {
  /** Import path of the main package. */
  readonly mainPackage: string;
  /** Output file (absolute). */
  readonly output: string;
  /** `-X` assignments, e.g. `{ "example.com/version.Version": "v1.2.3" }`. */
  readonly versionVars?: Readonly<Record<string, string>>;
  /** Build tags. @default [] */
  readonly tags?: readonly string[];
}

/** Options of {@link goBuild}. */
export interface GoBuildOptions extends GoCommonOptions, GoBinaryOptions {
  /** Empty directory for the wrapper module (inside the cache, never the work tree). */
  readonly workDir: string;
  /** Module of the main package and the version or 40-hex commit to build. */
  readonly module: { readonly path: string; readonly ref: string };
  /** Further modules to pin exactly (module path -> version). @default {} */
  readonly require?: Readonly<Record<string, string>>;
  /** Replacements (old module -> `new/module@version`). @default {} */
  readonly replace?: Readonly<Record<string, string>>;
}

/** Options of {@link goBuildSourceCopy}. */
export interface GoSourceCopyOptions extends GoCommonOptions, GoBinaryOptions {
  /** Empty directory to copy the module into. */
  readonly workDir: string;
  /** Module and the version or 40-hex commit to copy. */
  readonly module: { readonly path: string; readonly ref: string };
  /** Replace directives to drop from the copy's go.mod (they point at sibling directories absent from the zip). */
  readonly dropReplace?: readonly string[];
  /** Generators to run before the build: directory relative to the module root, command, extra env. */
  readonly generate?: ReadonlyArray<{ readonly dir: string; readonly args: readonly string[]; readonly env?: Readonly<Record<string, string>> }>;
}

/** The environment of every `go` command. */
export function goEnv(base: NodeJS.ProcessEnv, extraFlags: readonly string[] = []): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined) env[k] = v;
  env.GOTOOLCHAIN = "local";
  env.CGO_ENABLED = "0";
  env.GOWORK = "off";
  if (extraFlags.length > 0) env.GOFLAGS = [env.GOFLAGS ?? "", ...extraFlags].filter((f) => f !== "").join(" ");
  return env;
}

/**
 * Runs one `go` command, passing its output through `log` line by line.
 *
 * @throws ToolBuildError with the command, exit code and the last 40 output lines.
 */
export async function runGo(args: readonly string[], cwd: string, env: Record<string, string>, o: GoCommonOptions): Promise<string> {
  const { execa } = await loadExeca();
  const sub = execa("go", args, { cwd, env, extendEnv: false, reject: false, stdin: "ignore" });
  const tail: string[] = [];
  for await (const line of sub.iterable({ from: "stderr" })) {
    o.log(`  ${o.label}| ${line}`);
    tail.push(line);
    if (tail.length > 40) tail.shift();
  }
  const result = await sub;
  if (result.failed) {
    const why = result.exitCode !== undefined ? `exit ${result.exitCode}` : result.shortMessage;
    const out = String(result.stdout ?? "")
      .trim()
      .slice(-2000);
    throw new ToolBuildError(`${o.label}: go ${args.join(" ")} failed (${why}) in ${cwd}:\n${[...tail, out].filter((l) => l !== "").join("\n")}`, o.label);
  }
  return String(result.stdout);
}

/**
 * Checks that `go` is on PATH and at least `minVersion`.
 *
 * @returns the Go version, e.g. `go1.26.8`.
 * @throws ToolBuildError naming the required and found versions.
 */
export async function checkGo(minVersion: string, env: NodeJS.ProcessEnv): Promise<string> {
  const { execa } = await loadExeca();
  const result = await execa("go", ["env", "GOVERSION"], { env: goEnv(env), extendEnv: false, reject: false });
  if (result.failed) {
    throw new ToolBuildError(
      `go: not usable (${result.shortMessage}); install Go >= ${minVersion} (https://go.dev/dl/) or set COHORT_TOOLCHAIN_SOURCE=official with pinned sums`,
      "go",
    );
  }
  const found = String(result.stdout).trim();
  const num = (v: string) => (/(\d+)\.(\d+)(?:\.(\d+))?/.exec(v) ?? []).slice(1).map((x) => Number(x ?? 0));
  const [a, b, c] = num(found);
  const [x, y, z] = num(minVersion);
  const ok = a! !== x! ? a! > x! : b! !== y! ? b! > y! : (c ?? 0) >= (z ?? 0);
  if (!ok) throw new ToolBuildError(`go: ${found} is older than the required go${minVersion} (GOTOOLCHAIN=local)`, "go");
  return found;
}

function ldflags(vars: Readonly<Record<string, string>> | undefined): string {
  return ["-s", "-w", ...Object.entries(vars ?? {}).map(([k, v]) => `-X ${k}=${v}`)].join(" ");
}

function buildArgs(o: GoBinaryOptions, target: string, flags: readonly string[] = []): string[] {
  const tags = o.tags ?? [];
  return ["build", ...flags, "-trimpath", ...(tags.length > 0 ? ["-tags", tags.join(",")] : []), "-ldflags", ldflags(o.versionVars), "-o", o.output, target];
}

/**
 * Resolves `module@ref` (a version or a commit) through `go mod download -json`, which queries exactly that
 * module path. (`go install`/`go get` of a *package* path also query every longer path prefix as a possible
 * module, and the proxy answers some of those with 403 "This module version is not available", which the go
 * command treats as fatal: seen for github.com/pulumi/pulumi-command/provider/cmd/pulumi-resource-command.)
 *
 * @returns the module's version (a pseudo-version for a commit) and its directory in GOMODCACHE.
 * @throws ToolBuildError when the proxy refuses the module.
 */
export async function goModDownload(
  module: { readonly path: string; readonly ref: string },
  cwd: string,
  env: Record<string, string>,
  o: GoCommonOptions,
): Promise<{ version: string; dir: string }> {
  const out = await runGo(["mod", "download", "-json", `${module.path}@${module.ref}`], cwd, env, o);
  const info = JSON.parse(out) as { Version?: string; Dir?: string; Error?: string };
  if (info.Version === undefined || info.Dir === undefined) {
    throw new ToolBuildError(`${o.label}: go mod download ${module.path}@${module.ref}: ${info.Error ?? "no version or directory"}`, o.label);
  }
  return { version: info.Version, dir: info.Dir };
}

/**
 * Builds `mainPackage` through a wrapper module in `workDir`: `go mod init`, `go mod download -json` of the
 * module at `module.ref` (see {@link goModDownload}), `go mod edit` with that requirement, the extra
 * requirements and the replaces, then `go build -mod=mod -trimpath -ldflags "-s -w -X …"` (which records the
 * go.sum lines). The wrapper's go.mod/go.sum (the exact build list) stay in `workDir`.
 *
 * @throws ToolBuildError from the first failing `go` command.
 */
export async function goBuild(o: GoBuildOptions): Promise<void> {
  const env = goEnv(o.env);
  fs.mkdirSync(o.workDir, { recursive: true });
  fs.mkdirSync(path.dirname(o.output), { recursive: true });
  await runGo(["mod", "init", "local/cohort-lab-build"], o.workDir, env, o);
  const { version } = await goModDownload(o.module, o.workDir, env, o);
  const edits = [
    `-require=${o.module.path}@${version}`,
    ...Object.entries(o.require ?? {}).map(([m, v]) => `-require=${m}@${v}`),
    ...Object.entries(o.replace ?? {}).map(([from, to]) => `-replace=${from}=${to}`),
  ];
  await runGo(["mod", "edit", ...edits], o.workDir, env, o);
  await runGo(buildArgs(o, o.mainPackage, ["-mod=mod"]), o.workDir, env, o);
}

/**
 * Builds `mainPackage` from a writable copy of its module: `go mod download -json`, copy, drop the named
 * replaces, run the generators, then `go build` with `-mod=mod` (go.sum gains the lines the dropped replaces need).
 *
 * @throws ToolBuildError from the first failing step.
 */
export async function goBuildSourceCopy(o: GoSourceCopyOptions): Promise<void> {
  const env = goEnv(o.env);
  const { dir } = await goModDownload(o.module, o.workDir, env, o);
  const src = path.join(o.workDir, "src");
  fs.cpSync(dir, src, { recursive: true });
  makeWritable(src);
  const modEnv = goEnv(o.env, ["-mod=mod"]);
  if ((o.dropReplace ?? []).length > 0) {
    await runGo(["mod", "edit", ...(o.dropReplace ?? []).map((m) => `-dropreplace=${m}`)], src, modEnv, o);
  }
  for (const g of o.generate ?? []) await runGo(g.args, path.join(src, g.dir), { ...modEnv, ...g.env }, o);
  if (!o.mainPackage.startsWith(`${o.module.path}/`)) {
    throw new ToolBuildError(`${o.label}: main package ${o.mainPackage} is not inside module ${o.module.path}`, o.label);
  }
  fs.mkdirSync(path.dirname(o.output), { recursive: true });
  await runGo(buildArgs(o, `./${o.mainPackage.slice(o.module.path.length + 1)}`), src, modEnv, o);
}

function makeWritable(dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      fs.chmodSync(p, 0o755);
      makeWritable(p);
    } else if (entry.isFile()) {
      fs.chmodSync(p, fs.statSync(p).mode | 0o200);
    }
  }
  fs.chmodSync(dir, 0o755);
}

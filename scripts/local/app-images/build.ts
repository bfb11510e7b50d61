/**
 * Builders of the `local-apps` tool set (the recipes, lookup and pure helpers are in ../app-images.ts). Every file
 * in this directory is part of each image's input hash, so changing a builder rebuilds the images.
 *
 * - {@link rootfsTool}: a Debian root filesystem made once with `debootstrap --variant=minbase` from this machine's
 *   APT mirror, kept as `rootfs.tar` (the Node images' base, and the CA bundle of the distroless-like images).
 * - {@link imageTool}: one image: a root filesystem tar `docker import`ed with `--change` (distroless-like images,
 *   Node), or a Dockerfile on the Node image built by the legacy builder (OpenClaw; the Temporal run worker, whose
 *   `/opt/node_modules` is copied from this repository's node_modules and smoke-tested with `docker run`); then `docker save` to
 *   `image.tar` and the digest from a private containerd ({@link containerdDigest}); `image.json` records it.
 * - `afterReady` of an image: `docker image inspect`, and `docker load` of the archive when the image is gone.
 *
 * Needs root (debootstrap, file ownership in the root filesystems), a Docker engine (`bash
 * scripts/docker-engine.sh start`), and containerd/ctr on PATH (Debian's containerd, a docker.io dependency).
 */
import { spawn } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { localImages } from "../../../common/pins";
import { repoRoot } from "../../../common/paths";
import { canonicalJson, writeFileAtomic } from "../../../common/stamp";
import { ToolBuildError, type BuildContext, type ReadyTool, type Tool, type ToolContext } from "../../lib/tool";
import {
  debianMirrorFromSources,
  digestFromRows,
  dockerChanges,
  IMAGE_FILES,
  imagePin,
  imageToolName,
  runWorkerClosure,
  parseCtrImagesLs,
  readImageDir,
  ROOTFS_FILE,
  rootfsToolId,
  sourceBinary,
  type AptSourceFile,
  type DirSpec,
  type DistrolessRecipe,
  type ImagePlan,
  type ImageRecord,
  type NodeRecipe,
  type OpenclawRecipe,
  type RunWorkerRecipe,
  type AppImageKey,
} from "../../../components/kind/app-images";
import type { ClosurePackage } from "../../../components/kind/run-worker-closure";

/** Result of {@link run}. */
interface RunResult {
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs a program to completion.
 *
 * @throws ToolBuildError naming `label`, the command and the last 2,000 characters of its output when it exits non-zero.
 */
async function run(
  label: string,
  cmd: string,
  args: readonly string[],
  o: { env?: NodeJS.ProcessEnv; cwd?: string; log?: (l: string) => void; quiet?: boolean } = {},
): Promise<RunResult> {
  if (o.log !== undefined && o.quiet !== true) o.log(`  ${label}| ${cmd} ${args.join(" ")}`);
  return await new Promise((resolve, reject) => {
    const child = spawn(cmd, [...args], { env: o.env ?? process.env, cwd: o.cwd, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", (e) => reject(new ToolBuildError(`${label}: ${cmd}: ${e.message}`, label)));
    child.on("close", (code, signal) => {
      const stdout = Buffer.concat(out).toString("utf8");
      const stderr = Buffer.concat(err).toString("utf8");
      if (code === 0) resolve({ stdout, stderr });
      else {
        const tail = `${stdout}${stderr}`.trim().slice(-2000);
        reject(new ToolBuildError(`${label}: ${cmd} ${args.join(" ")} failed (${signal ?? `exit ${code}`}): ${tail}`, label));
      }
    });
  });
}

async function sha256Of(file: string): Promise<string> {
  const h = crypto.createHash("sha256");
  for await (const chunk of fs.createReadStream(file)) h.update(chunk as Buffer);
  return h.digest("hex");
}

/** Fails early with the fix when the Docker engine is not reachable. */
async function requireDocker(label: string, env: NodeJS.ProcessEnv): Promise<void> {
  try {
    await run(label, "docker", ["info", "--format", "{{.ServerVersion}}"], { env, quiet: true });
  } catch (err) {
    throw new ToolBuildError(`${label}: the Docker engine is not reachable (start it with \`bash scripts/docker-engine.sh start\`): ${(err as Error).message}`, label);
  }
}

/** This machine's APT source files (`/etc/apt/sources.list`, `/etc/apt/sources.list.d/*.list|*.sources`). */
function aptSourceFiles(): AptSourceFile[] {
  const files: AptSourceFile[] = [];
  const main = "/etc/apt/sources.list";
  if (fs.existsSync(main)) files.push({ name: "sources.list", text: fs.readFileSync(main, "utf8") });
  const dir = "/etc/apt/sources.list.d";
  if (fs.existsSync(dir)) {
    for (const n of fs.readdirSync(dir).sort()) {
      if (n.endsWith(".list") || n.endsWith(".sources")) files.push({ name: n, text: fs.readFileSync(path.join(dir, n), "utf8") });
    }
  }
  return files;
}

/**
 * The Debian root filesystem tool (`<cache>/debian-rootfs-<suite>-<variant>-<8 hex>/rootfs.tar`):
 * `debootstrap --variant=<variant> --arch=<arch> --include=<packages> <suite> <dir> <this machine's mirror>`
 * (debootstrap is installed with `apt-get install -y debootstrap` when missing), then `/dev/*`, APT lists and
 * caches and logs removed, packed with `tar --numeric-owner` (members `./…`). `packages.txt` (dpkg-query) and
 * `mirror.txt` are kept beside it. Made once: about 70 s here.
 *
 * @see https://manpages.debian.org/bookworm/debootstrap/debootstrap.8.en.html
 */
export function rootfsTool(): Tool {
  const id = rootfsToolId();
  const label = id.name;
  return {
    name: id.name,
    version: id.version,
    pin: id.pin,
    binaries: { rootfs: ROOTFS_FILE },
    buildDescription: `debootstrap --variant=${id.pin.variant} ${id.pin.suite} (${id.pin.arch}, with ${id.pin.include.join(", ")})`,
    async build(ctx: BuildContext) {
      if (process.getuid?.() !== 0) throw new ToolBuildError(`${label}: debootstrap needs root`, label);
      const mirror = debianMirrorFromSources(aptSourceFiles(), id.pin.suite);
      if (mirror === undefined) throw new ToolBuildError(`${label}: no APT source lists \`${id.pin.suite} main\` (looked in /etc/apt/sources.list and sources.list.d)`, label);
      const o = { env: ctx.env, log: ctx.log };
      try {
        await run(label, "debootstrap", ["--version"], { ...o, quiet: true });
      } catch {
        await run(label, "apt-get", ["install", "-y", "--no-install-recommends", "debootstrap"], { ...o, env: { ...ctx.env, DEBIAN_FRONTEND: "noninteractive" } });
      }
      const root = path.join(ctx.workDir, "root");
      await run(label, "debootstrap", [`--variant=${id.pin.variant}`, `--arch=${id.pin.arch}`, `--include=${id.pin.include.join(",")}`, id.pin.suite, root, mirror], o);
      const { stdout } = await run(label, "chroot", [root, "dpkg-query", "-W", "-f", "${Package} ${Version}\\n"], { ...o, quiet: true });
      fs.writeFileSync(path.join(ctx.outDir, "packages.txt"), stdout);
      fs.writeFileSync(path.join(ctx.outDir, "mirror.txt"), `${mirror}\n`);
      for (const rel of ["dev", "var/lib/apt/lists", "var/cache/apt", "var/log", "tmp", "run"]) {
        const d = path.join(root, rel);
        if (!fs.existsSync(d)) continue;
        for (const e of fs.readdirSync(d)) fs.rmSync(path.join(d, e), { recursive: true, force: true });
      }
      await run(label, "tar", ["--numeric-owner", "--sort=name", "-C", root, "-cf", path.join(ctx.outDir, ROOTFS_FILE), "."], o);
      return "build";
    },
  };
}

/** Creates the directories of a recipe inside `stage` with their modes and owners. */
function makeDirs(stage: string, dirs: readonly DirSpec[]): void {
  for (const d of dirs) {
    const p = path.join(stage, d.path);
    fs.mkdirSync(p, { recursive: true });
    fs.chownSync(p, d.uid, d.gid);
    fs.chmodSync(p, d.mode);
  }
}

/** Where the Debian rootfs tarball is (the rootfs tool must be ready: it is first in the set). */
function rootfsTar(cache: string): string {
  const id = rootfsToolId();
  return path.join(cache, `${id.name}-${id.version}`, ROOTFS_FILE);
}

/**
 * Stages a distroless-like root: the binary at `recipe.target` (0755), `/etc/passwd`, `/etc/group`, the Debian CA
 * bundle at `/etc/ssl/certs/ca-certificates.crt`, the recipe's directories; packed with fixed mtimes
 * (`--mtime=@0 --sort=name --numeric-owner`, GNU format) so the layer depends only on its contents.
 */
async function distrolessLayer(recipe: DistrolessRecipe, plan: ImagePlan, ctx: BuildContext): Promise<string> {
  const stage = path.join(ctx.workDir, "root");
  const label = plan.name;
  fs.mkdirSync(path.join(stage, "etc"), { recursive: true });
  fs.copyFileSync(plan.sourcePath as string, path.join(stage, recipe.target));
  fs.chmodSync(path.join(stage, recipe.target), 0o755);
  fs.writeFileSync(path.join(stage, "etc", "passwd"), recipe.passwd, { mode: 0o644 });
  fs.writeFileSync(path.join(stage, "etc", "group"), recipe.group, { mode: 0o644 });
  await run(label, "tar", ["-xf", rootfsTar(ctx.cacheRoot), "-C", stage, "./etc/ssl/certs/ca-certificates.crt"], { env: ctx.env, log: ctx.log });
  makeDirs(stage, recipe.dirs);
  const layer = path.join(ctx.workDir, "layer.tar");
  await run(label, "tar", ["--format=gnu", "--numeric-owner", "--sort=name", "--mtime=@0", "-C", stage, "-cf", layer, "."], { env: ctx.env, log: ctx.log });
  return layer;
}

/** Stages the Node root: the Debian rootfs, `/usr/local/bin/node`, the `node` user and `/home/node`. */
async function nodeLayer(recipe: NodeRecipe, plan: ImagePlan, ctx: BuildContext): Promise<string> {
  const stage = path.join(ctx.workDir, "root");
  const label = plan.name;
  const o = { env: ctx.env, log: ctx.log };
  fs.mkdirSync(stage);
  await run(label, "tar", ["--numeric-owner", "-xpf", rootfsTar(ctx.cacheRoot), "-C", stage], o);
  const target = path.join(stage, recipe.target);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.copyFileSync(plan.sourcePath as string, target);
  fs.chmodSync(target, 0o755);
  fs.appendFileSync(path.join(stage, "etc", "passwd"), recipe.passwdAppend);
  fs.appendFileSync(path.join(stage, "etc", "group"), recipe.groupAppend);
  makeDirs(stage, recipe.dirs);
  // Run node inside the root (its own loader, glibc, libstdc++): every library it needs must resolve there.
  const { stdout } = await run(label, "chroot", [stage, recipe.target, "-e", "console.log(process.version)"], { ...o, quiet: true });
  ctx.log(`${label}: node in the root prints ${stdout.trim()}`);
  const layer = path.join(ctx.workDir, "layer.tar");
  await run(label, "tar", ["--numeric-owner", "--sort=name", "-C", stage, "-cf", layer, "."], o);
  return layer;
}

/** Finds npm's `npm-cli.js` (from `npm` on PATH, following symlinks) to run it under the toolchain's Node 24. */
function findNpmCli(env: NodeJS.ProcessEnv): string {
  for (const dir of (env.PATH ?? "").split(":")) {
    const p = path.join(dir, "npm");
    if (!fs.existsSync(p)) continue;
    const real = fs.realpathSync(p);
    if (real.endsWith("npm-cli.js")) return real;
    const guess = path.resolve(path.dirname(real), "..", "lib", "node_modules", "npm", "bin", "npm-cli.js");
    if (fs.existsSync(guess)) return guess;
  }
  throw new ToolBuildError("image-openclaw: no npm on PATH", "image-openclaw");
}

/** Makes `<repository>:<tag>` in Docker point at the recorded image, loading the archive when it is gone. */
async function ensureDockerImage(record: ImageRecord, archive: string, env: NodeJS.ProcessEnv, log: (l: string) => void): Promise<"present" | "retagged" | "loaded"> {
  const label = `image ${record.key}`;
  const idOf = async (ref: string) => {
    try {
      return (await run(label, "docker", ["image", "inspect", "--format", "{{.Id}}", ref], { env, quiet: true })).stdout.trim();
    } catch {
      return undefined;
    }
  };
  if ((await idOf(record.reference)) === record.dockerImageId) return "present";
  if ((await idOf(record.dockerImageId)) === record.dockerImageId) {
    await run(label, "docker", ["tag", record.dockerImageId, record.reference], { env, log });
    return "retagged";
  }
  log(`${label}: ${record.reference} is not in Docker; loading ${archive}`);
  await run(label, "docker", ["load", "-i", archive], { env, log });
  const id = await idOf(record.reference);
  if (id !== record.dockerImageId) throw new ToolBuildError(`${label}: docker load of ${archive} gave ${id ?? "nothing"}, expected ${record.dockerImageId}`, label);
  return "loaded";
}

/** The Node image a Dockerfile-built image starts from (its `image-*` base), present in Docker. */
async function nodeBaseImage(plan: ImagePlan, ctx: BuildContext): Promise<ImageRecord> {
  const label = plan.name;
  const baseName = Object.keys(plan.inputs.bases).find((b) => b.startsWith("image-")) as string;
  const baseDir = path.join(ctx.cacheRoot, `${baseName}-${plan.inputs.bases[baseName]}`);
  const base = readImageDir(baseDir);
  if (typeof base === "string") throw new ToolBuildError(`${label}: the Node image is not built (${base})`, label);
  await ensureDockerImage(base, path.join(baseDir, base.archive), ctx.env, ctx.log);
  return base;
}

/** Builds the OpenClaw image: npm install on the host under Node 24, then a legacy-builder Dockerfile on the Node image. */
async function openclawImage(recipe: OpenclawRecipe, plan: ImagePlan, ctx: BuildContext): Promise<void> {
  const label = plan.name;
  const o = { env: ctx.env, log: ctx.log };
  const base = await nodeBaseImage(plan, ctx);
  const nodeBin = sourceBinary("runtime", ctx.env).path;
  const context = path.join(ctx.workDir, "context");
  const prefix = path.join(context, recipe.prefix);
  fs.mkdirSync(prefix, { recursive: true });
  fs.writeFileSync(path.join(prefix, "package.json"), `${JSON.stringify({ name: "cohort-lab-openclaw-image", private: true }, null, 2)}\n`);
  const started = Date.now();
  await run(
    label,
    nodeBin,
    [findNpmCli(ctx.env), "install", `${recipe.npmPackage}@${recipe.version}`, "--save-exact", "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund", "--prefix", prefix],
    { ...o, cwd: prefix, env: { ...ctx.env, PATH: `${path.dirname(nodeBin)}:${ctx.env.PATH ?? ""}` } },
  );
  ctx.log(`${label}: npm install ${recipe.npmPackage}@${recipe.version} in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  fs.copyFileSync(path.join(prefix, "package-lock.json"), path.join(ctx.outDir, "package-lock.json"));
  // `--ignore-scripts` leaves OpenClaw's install lifecycle pending (`.openclaw-lifecycle-pending` /
  // `dist/openclaw-install-guard`); its first run completes it by writing into the package, which the non-root
  // user cannot do later (EACCES). So the first run happens here, as root, inside the image, with no network.
  const dockerfile = [
    `FROM ${base.reference}`,
    `COPY ${recipe.prefix.replace(/^\//, "")} ${recipe.prefix}`,
    `RUN ${JSON.stringify(["node", recipe.entry, "--version"])}`,
    ...dockerChanges(recipe.config),
  ].join("\n");
  fs.writeFileSync(path.join(context, "Dockerfile"), `${dockerfile}\n`);
  fs.copyFileSync(path.join(context, "Dockerfile"), path.join(ctx.outDir, "Dockerfile"));
  await run(label, "docker", ["build", "--network=none", "-t", `${recipe.repository}:${recipe.tag}`, context], { ...o, env: { ...ctx.env, DOCKER_BUILDKIT: "0" } });
}

/**
 * Copies the closure's package directories from `repo` to `dest` (a `node_modules` directory), each lock key
 * `node_modules/<a>[/node_modules/<b>…]` to `<dest>/<a>[/node_modules/<b>…]`: a package's own `node_modules` is
 * skipped (the packages nested there that belong to the closure are copied as their own entries), symlinks are
 * copied as they are, and under each {@link RunWorkerRecipe.trim} rule's `<package>/<dir>/` only the kept entries.
 *
 * @returns files and bytes copied.
 * @throws ToolBuildError when a kept entry of a trim rule is missing after the copy.
 */
export function copyClosure(
  packages: readonly ClosurePackage[],
  repo: string,
  dest: string,
  trim: RunWorkerRecipe["trim"],
  label = "image-run-worker",
): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  for (const pkg of packages) {
    const src = path.join(repo, pkg.path);
    const to = path.join(dest, pkg.path.slice("node_modules/".length));
    const rules = trim.filter((t) => t.package === pkg.name);
    fs.cpSync(src, to, {
      recursive: true,
      verbatimSymlinks: true,
      filter: (from) => {
        const rel = path.relative(src, from);
        if (rel === "node_modules") return false;
        for (const t of rules) {
          const parts = rel.split(path.sep);
          if (parts.length >= 2 && parts.slice(0, t.dir.split("/").length).join("/") === t.dir) {
            const entry = parts[t.dir.split("/").length];
            if (entry !== undefined && !t.keep.includes(entry)) return false;
          }
        }
        const st = fs.lstatSync(from);
        if (st.isFile()) {
          files += 1;
          bytes += st.size;
        }
        return true;
      },
    });
    for (const t of rules) {
      for (const k of t.keep) {
        if (!fs.existsSync(path.join(to, t.dir, k))) throw new ToolBuildError(`${label}: ${pkg.name}/${t.dir}/${k} (kept by the trim rule) is not in ${src}`, label);
      }
    }
  }
  return { files, bytes };
}

/**
 * The program the smoke check runs in the built run worker image (`node -e`): resolves each root as
 * `/opt/cohort/*.cjs` would (the `cohort` directory beside `nodeModules`: `require.resolve(<root>, { paths:
 * ["/opt/cohort"] })` must land under `<nodeModules>/<root>/`) and loads it, loads `@temporalio/core-bridge`, and
 * checks that the native bridge of the kept release (`releases/x86_64-unknown-linux-gnu/index.node`) is among the
 * loaded modules; prints `run-worker smoke: ok` or throws naming what failed.
 */
export function runWorkerSmokeProgram(recipe: RunWorkerRecipe): string {
  const bridge = `${recipe.nodeModules}/@temporalio/core-bridge`;
  const native = `${bridge}/releases/x86_64-unknown-linux-gnu/index.node`;
  const cohortDir = path.posix.join(path.posix.dirname(recipe.nodeModules), "cohort");
  return [
    `const roots = ${JSON.stringify(recipe.roots)};`,
    "for (const r of roots) {",
    `  const p = require.resolve(r, { paths: [${JSON.stringify(cohortDir)}] });`,
    `  if (!p.startsWith(${JSON.stringify(`${recipe.nodeModules}/`)} + r + "/")) throw new Error(r + " resolves to " + p + " from ${cohortDir}");`,
    "  require(p);",
    "}",
    `require(${JSON.stringify(bridge)});`,
    'const loaded = Object.keys(require.cache).filter((k) => k.endsWith(".node"));',
    `if (!loaded.includes(${JSON.stringify(native)})) throw new Error("the native bridge ${native} was not loaded (loaded: " + JSON.stringify(loaded) + ")");`,
    'console.log("run-worker smoke: ok");',
  ].join("\n");
}

/**
 * Builds the Temporal run worker image: the closure ({@link runWorkerClosure}, checked equal to the planned one)
 * copied into the build context by {@link copyClosure}, made world-readable (`chmod -R a+rX`), then a
 * legacy-builder Dockerfile on the Node image (`COPY opt/node_modules /opt/node_modules` + the config), then the
 * smoke check ({@link runWorkerSmokeProgram}) with `docker run --rm --network none` as the image's user (root) and
 * as 1000:1000 (the `node` user a pod may run as). `closure.json` (the packages) and the Dockerfile are kept in
 * the tool directory.
 *
 * @throws ToolBuildError when node_modules no longer gives the planned closure, or the smoke check fails (naming the user).
 */
async function runWorkerImage(recipe: RunWorkerRecipe, plan: ImagePlan, ctx: BuildContext): Promise<void> {
  const label = plan.name;
  const o = { env: ctx.env, log: ctx.log };
  const base = await nodeBaseImage(plan, ctx);
  const packages = runWorkerClosure(repoRoot);
  if (canonicalJson(packages) !== canonicalJson(plan.inputs.packages ?? [])) {
    throw new ToolBuildError(`${label}: package-lock.json or node_modules changed since the images were planned; run the tool set again`, label);
  }
  const context = path.join(ctx.workDir, "context");
  const dest = path.join(context, recipe.nodeModules);
  fs.mkdirSync(dest, { recursive: true });
  const started = Date.now();
  const copied = copyClosure(packages, repoRoot, dest, recipe.trim, label);
  ctx.log(`${label}: copied ${packages.length} packages (${copied.files} files, ${(copied.bytes / 1e6).toFixed(1)} MB) in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  await run(label, "chmod", ["-R", "a+rX", dest], { ...o, quiet: true });
  writeFileAtomic(path.join(ctx.outDir, "closure.json"), `${JSON.stringify(packages, null, 2)}\n`);
  const dockerfile = [`FROM ${base.reference}`, `COPY ${recipe.nodeModules.replace(/^\//, "")} ${recipe.nodeModules}`, ...dockerChanges(recipe.config)].join("\n");
  fs.writeFileSync(path.join(context, "Dockerfile"), `${dockerfile}\n`);
  fs.copyFileSync(path.join(context, "Dockerfile"), path.join(ctx.outDir, "Dockerfile"));
  const reference = `${recipe.repository}:${recipe.tag}`;
  await run(label, "docker", ["build", "--network=none", "-t", reference, context], { ...o, env: { ...ctx.env, DOCKER_BUILDKIT: "0" } });
  const program = runWorkerSmokeProgram(recipe);
  for (const user of [undefined, "1000:1000"]) {
    const who = user === undefined ? "the image's user (root)" : `user ${user}`;
    let out: RunResult;
    try {
      out = await run(label, "docker", ["run", "--rm", "--network", "none", ...(user === undefined ? [] : ["--user", user]), reference, "node", "-e", program], {
        env: ctx.env,
        quiet: true,
      });
    } catch (err) {
      throw new ToolBuildError(
        `${label}: smoke check failed as ${who} (loading ${recipe.roots.join(", ")} and the native bridge from ${recipe.nodeModules}): ${(err as Error).message}`,
        label,
      );
    }
    if (!out.stdout.includes("run-worker smoke: ok"))
      throw new ToolBuildError(`${label}: smoke check as ${who} printed no ok line: ${`${out.stdout}${out.stderr}`.slice(-2000)}`, label);
    ctx.log(`${label}: smoke check as ${who}: ok`);
  }
}

/** Options of {@link containerdDigest}. */
export interface ContainerdDigestOptions {
  /** Unpack into the overlayfs snapshotter too (what a node does; slower). @default true */
  readonly unpack?: boolean;
  readonly env?: NodeJS.ProcessEnv;
  readonly log?: (line: string) => void;
}

/**
 * The digest containerd gives `<repository>:<tag>` when `archive` is imported: starts a private containerd
 * (`containerd --config <tmp>/config.toml --root <tmp>/root --state <tmp>/state --address <tmp>/c.sock`, CRI and
 * the opt plugin disabled, no debug or metrics listener), runs
 * `ctr -a <sock> -n k8s.io images import --all-platforms --digests --base-name <repository> [--no-unpack] <archive>`
 * (kind's flags plus `--base-name`, see `nodeImportArgs`), reads `ctr images ls`, then stops it (SIGTERM, SIGKILL
 * after 15 s), unmounts anything left under the temporary directory and removes it.
 *
 * @returns the digest (`sha256:<64 hex>`) and `containerd --version`.
 * @throws Error when containerd does not answer within 30 s, the import fails, or the rows disagree.
 */
export async function containerdDigest(archive: string, repository: string, tag: string, o: ContainerdDigestOptions = {}): Promise<{ digest: string; containerd: string }> {
  const env = o.env ?? process.env;
  const label = "containerd";
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cl-ctrd-"));
  const sock = path.join(tmp, "c.sock");
  const config = [
    "version = 2",
    `root = ${JSON.stringify(path.join(tmp, "root"))}`,
    `state = ${JSON.stringify(path.join(tmp, "state"))}`,
    'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]',
    "[grpc]",
    `  address = ${JSON.stringify(sock)}`,
    "[ttrpc]",
    `  address = ${JSON.stringify(`${sock}.ttrpc`)}`,
    "[debug]",
    '  address = ""',
    "[metrics]",
    '  address = ""',
    "",
  ].join("\n");
  fs.writeFileSync(path.join(tmp, "config.toml"), config);
  const logFd = fs.openSync(path.join(tmp, "containerd.log"), "w");
  const daemon = spawn("containerd", ["--config", path.join(tmp, "config.toml"), "--root", path.join(tmp, "root"), "--state", path.join(tmp, "state"), "--address", sock], {
    env,
    stdio: ["ignore", logFd, logFd],
    detached: true,
  });
  fs.closeSync(logFd);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    daemon.on("exit", () => {
      exited = true;
      resolve();
    });
    daemon.on("error", () => {
      exited = true;
      resolve();
    });
  });
  const ctr = (args: string[], quiet = true) => run(label, "ctr", ["-a", sock, ...args], { env, log: o.log, quiet });
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (exited) throw new Error(`private containerd exited: ${fs.readFileSync(path.join(tmp, "containerd.log"), "utf8").slice(-2000)}`);
      try {
        await ctr(["version"]);
        break;
      } catch {
        if (Date.now() > deadline) throw new Error(`private containerd did not answer on ${sock} within 30 s`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    const version = (await run(label, "containerd", ["--version"], { env, quiet: true })).stdout.trim();
    await ctr(["-n", "k8s.io", "images", "import", "--all-platforms", "--digests", "--base-name", repository, ...(o.unpack === false ? ["--no-unpack"] : []), archive], false);
    const rows = parseCtrImagesLs((await ctr(["-n", "k8s.io", "images", "ls"])).stdout);
    return { digest: digestFromRows(rows, repository, tag), containerd: version };
  } finally {
    if (!exited && daemon.pid !== undefined) {
      process.kill(daemon.pid, "SIGTERM");
      const timer = setTimeout(() => {
        if (!exited && daemon.pid !== undefined) process.kill(daemon.pid, "SIGKILL");
      }, 15_000);
      await exit;
      clearTimeout(timer);
    }
    const mounts = fs
      .readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((l) => l.split(" ")[4])
      .filter((m): m is string => m !== undefined && m.startsWith(`${tmp}/`))
      .sort((a, b) => b.length - a.length);
    for (const m of mounts) await run(label, "umount", ["-l", m], { env, quiet: true }).catch(() => undefined);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * The tool of one image (see the module comment). The stamp's binaries are `archive` (`image.tar`) and `record`
 * (`image.json`); `afterReady` makes sure Docker has the image (tag, then load).
 *
 * @param plan - from `planImages()`, or the error when its sources are missing (the tool then fails to build
 *   with that message, after the images before it in the set are done).
 */
export function imageTool(plan: ImagePlan | Error, key: AppImageKey): Tool {
  if (plan instanceof Error) {
    const name = imageToolName(key);
    return {
      name,
      version: "sources-missing",
      pin: { missing: plan.message },
      binaries: { archive: IMAGE_FILES.archive, record: IMAGE_FILES.record },
      buildDescription: "an image build",
      build: () => Promise.reject(new ToolBuildError(plan.message, name)),
    };
  }
  const recipe = plan.recipe;
  const reference = `${recipe.repository}:${recipe.tag}`;
  return {
    name: plan.name,
    version: plan.version,
    pin: imagePin(plan),
    binaries: { archive: IMAGE_FILES.archive, record: IMAGE_FILES.record },
    buildDescription:
      recipe.kind === "openclaw"
        ? `npm install ${recipe.npmPackage}@${recipe.version} + a legacy-builder Dockerfile on the Node image`
        : recipe.kind === "runWorker"
          ? `${plan.inputs.packages?.length ?? 0} npm packages (${recipe.roots.join(", ")}) copied from node_modules + a legacy-builder Dockerfile on the Node image`
          : `docker import of a ${recipe.kind} root filesystem`,
    async build(ctx: BuildContext) {
      const label = plan.name;
      await requireDocker(label, ctx.env);
      const o = { env: ctx.env, log: ctx.log };
      let t = Date.now();
      if (recipe.kind === "openclaw") await openclawImage(recipe, plan, ctx);
      else if (recipe.kind === "runWorker") await runWorkerImage(recipe, plan, ctx);
      else {
        const layer = recipe.kind === "node" ? await nodeLayer(recipe, plan, ctx) : await distrolessLayer(recipe, plan, ctx);
        const changes = dockerChanges(recipe.config).flatMap((c) => ["--change", c]);
        await run(label, "docker", ["import", ...changes, layer, reference], o);
      }
      ctx.log(`${label}: docker image built in ${((Date.now() - t) / 1000).toFixed(1)}s`);
      const inspect = async (fmt: string) => (await run(label, "docker", ["image", "inspect", "--format", fmt, reference], { env: ctx.env, quiet: true })).stdout.trim();
      const dockerImageId = await inspect("{{.Id}}");
      const platform = await inspect("{{.Os}}/{{.Architecture}}");
      if (platform !== localImages.platform) throw new ToolBuildError(`${label}: image platform is ${platform}, expected ${localImages.platform}`, label);
      const imageBytes = Number(await inspect("{{.Size}}"));
      const archive = path.join(ctx.outDir, IMAGE_FILES.archive);
      t = Date.now();
      await run(label, "docker", ["save", "-o", archive, reference], o);
      const archiveSha256 = await sha256Of(archive);
      ctx.log(`${label}: docker save in ${((Date.now() - t) / 1000).toFixed(1)}s (${(fs.statSync(archive).size / 1e6).toFixed(1)} MB)`);
      t = Date.now();
      const { digest, containerd } = await containerdDigest(archive, recipe.repository, recipe.tag, { env: ctx.env, log: ctx.log });
      ctx.log(`${label}: ${reference}@${digest} (containerd import ${((Date.now() - t) / 1000).toFixed(1)}s)`);
      const record: ImageRecord = {
        schema: 1,
        key: plan.key,
        repository: recipe.repository,
        tag: recipe.tag,
        reference,
        digest,
        dockerImageId,
        archive: IMAGE_FILES.archive,
        archiveSha256,
        archiveBytes: fs.statSync(archive).size,
        imageBytes,
        platform,
        inputHash: plan.inputHash,
        containerd,
      };
      writeFileAtomic(path.join(ctx.outDir, IMAGE_FILES.record), `${JSON.stringify(record, null, 2)}\n`);
      return "build";
    },
    async afterReady(ready: ReadyTool, ctx: ToolContext) {
      const dir = ready.dir as string;
      const record = readImageDir(dir, imagePin(plan));
      if (typeof record === "string") throw new ToolBuildError(`${plan.name}: ${record}`, plan.name);
      const how = await ensureDockerImage(record, path.join(dir, record.archive), ctx.env, ctx.log);
      if (how !== "present") ctx.log(`${plan.name}: ${record.reference} ${how} in Docker`);
    },
  };
}

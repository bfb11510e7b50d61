/**
 * An offline, kind-compatible node image for kind v0.31.0 with Kubernetes v1.35.4, built on this machine from
 * Debian bookworm packages and binaries the toolchain compiled from the Go module proxy (no registry).
 *
 * What it contains and why is in docs/node-image.md. In short (the recipe follows kind's own build):
 * - a `debootstrap --variant=minbase` bookworm root with kind's package list (Debian's containerd 1.6,
 *   runc 1.1, containernetworking-plugins instead of kind's own builds), cached as a tarball
 *   ({@link rootfsTool});
 * - kind v0.31.0's `images/base/files` read from the kind Go module zip at build time, with a containerd
 *   config of our own ({@link renderContainerdConfig}) and Debian's containerd path in containerd.service;
 * - kubelet, kubeadm, kubectl, crictl, `/kind/version`, and every image kubeadm and the CNI need
 *   (`offline.invalid/*`, {@link COMPONENT_IMAGES}) imported `--no-unpack` into the node's containerd;
 * - `/kind/manifests/default-cni.yaml`: flannel (host-gw) instead of kindnetd ({@link renderDefaultCni}).
 *
 * A cluster on this image needs kubeadm patches for {@link IMAGE_REPOSITORY} and {@link ETCD_IMAGE_TAG} (and
 * `failCgroupV1: false` on a cgroup v1 host), rendered by components/kind/kindConfig.ts `kubeadmPatches`, and
 * `networking.podSubnet` = {@link POD_SUBNET} (kind's default); the image tag comes from
 * {@link readNodeImage} after `npm run toolchain -- local-images`.
 *
 * The pure parts (constants, renderers, the input hash) have no I/O; the Tool builders need root, Docker
 * and debootstrap.
 *
 * @see https://github.com/kubernetes-sigs/kind/tree/v0.31.0/images/base (base image)
 * @see https://github.com/kubernetes-sigs/kind/tree/v0.31.0/pkg/build/nodeimage (what `kind build node-image` adds)
 */
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { envNames, toolDir } from "../../common/paths";
import { canonicalJson, readStamp, sha256File } from "../../common/stamp";
import { findLocalBinaries } from "../../common/local-catalog";
import { ToolBuildError, type BuildContext, type ReadyTool, type Tool, type ToolContext } from "../lib/tool";
import {
  TOOL_NAME,
  KUBERNETES_VERSION,
  KIND_MODULE,
  IMAGE_REPOSITORY,
  ETCD_IMAGE_TAG,
  COREDNS_IMAGE_TAG,
  NODE_IMAGE_REPOSITORY,
  PAUSE_IMAGE,
  FLANNEL_IMAGE,
  renderDefaultCni,
} from "../../components/kind/node-image";
// The node image's facts and its default CNI live beside the component that uses them; re-exported for the builder's callers.
export * from "../../components/kind/node-image";

/**
 * Packages of the node's root file system: kind v0.31.0's `clean-install` list (images/base/Dockerfile)
 * without fuse-overlayfs, nfs-common and open-iscsi (not used here), plus Debian's containerd, runc and CNI
 * plugins, which kind builds from source instead.
 */
export const NODE_PACKAGES: readonly string[] = [
  "systemd",
  "conntrack",
  "iptables",
  "nftables",
  "iproute2",
  "ethtool",
  "util-linux",
  "mount",
  "kmod",
  "libseccomp2",
  "pigz",
  "bash",
  "ca-certificates",
  "curl",
  "jq",
  "procps",
  "containerd",
  "runc",
  "containernetworking-plugins",
];

/** Packages of the small root file system under the kube-proxy and flannel images (they exec iptables/nft). */
export const IMAGE_BASE_PACKAGES: readonly string[] = ["iptables", "nftables"];

/** Debian suite of both roots: bookworm's systemd 252 still boots on cgroup v1 (systemd >= 256 refuses). */
export const DEBIAN_SUITE = "bookworm";

/** Logical names of the input binaries (keys of {@link InputBinaries}). */
export type InputName =
  | "kubelet"
  | "kubeadm"
  | "kubectl"
  | "kube-proxy"
  | "kube-apiserver"
  | "kube-controller-manager"
  | "kube-scheduler"
  | "etcd"
  | "coredns"
  | "crictl"
  | "flanneld"
  | "cni-flannel"
  | "pause";

/** Absolute paths of the input binaries by logical name. */
export type InputBinaries = Readonly<Record<InputName, string>>;

/** Every input name, in a fixed order. */
export const INPUT_NAMES: readonly InputName[] = [
  "kubelet",
  "kubeadm",
  "kubectl",
  "kube-proxy",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "etcd",
  "coredns",
  "crictl",
  "flanneld",
  "cni-flannel",
  "pause",
];

/** One image imported into the node's containerd. */
export interface ComponentImage {
  /** Full reference, `offline.invalid/<name>:<tag>`. */
  readonly ref: string;
  /** The binary it carries. */
  readonly input: InputName;
  /** Absolute path of the binary inside the image. */
  readonly target: string;
  /** `scratch` (the binary alone) or `debian` (the small bookworm root with iptables and nftables). */
  readonly base: "scratch" | "debian";
  /** Image ENTRYPOINT, when the workload gives only args (CoreDNS) or nothing (pause). */
  readonly entrypoint?: readonly string[];
  /** Image USER (`uid:gid`). */
  readonly user?: string;
}

/**
 * The images kubeadm 1.35 and the CNI need, named as kubeadm derives them from {@link IMAGE_REPOSITORY}.
 * Layouts follow upstream: control-plane binaries and etcd on PATH (kubeadm's static pods give `command:
 * [kube-apiserver, ...]`), kube-proxy at `/usr/local/bin/kube-proxy` (kubeadm's DaemonSet command), CoreDNS
 * with `ENTRYPOINT ["/coredns"]` (its Deployment gives only args), pause as 65535:65535, flanneld at
 * `/opt/bin/flanneld` (flannel's kube-flannel.yml command).
 * @see https://github.com/kubernetes/kubernetes/blob/v1.35.4/cmd/kubeadm/app/images/images.go
 */
export const COMPONENT_IMAGES: readonly ComponentImage[] = [
  { ref: `${IMAGE_REPOSITORY}/kube-apiserver:${KUBERNETES_VERSION}`, input: "kube-apiserver", target: "/usr/local/bin/kube-apiserver", base: "scratch" },
  { ref: `${IMAGE_REPOSITORY}/kube-controller-manager:${KUBERNETES_VERSION}`, input: "kube-controller-manager", target: "/usr/local/bin/kube-controller-manager", base: "scratch" },
  { ref: `${IMAGE_REPOSITORY}/kube-scheduler:${KUBERNETES_VERSION}`, input: "kube-scheduler", target: "/usr/local/bin/kube-scheduler", base: "scratch" },
  { ref: `${IMAGE_REPOSITORY}/kube-proxy:${KUBERNETES_VERSION}`, input: "kube-proxy", target: "/usr/local/bin/kube-proxy", base: "debian" },
  { ref: `${IMAGE_REPOSITORY}/etcd:${ETCD_IMAGE_TAG}`, input: "etcd", target: "/usr/local/bin/etcd", base: "scratch" },
  { ref: `${IMAGE_REPOSITORY}/coredns:${COREDNS_IMAGE_TAG}`, input: "coredns", target: "/coredns", base: "scratch", entrypoint: ["/coredns"] },
  { ref: PAUSE_IMAGE, input: "pause", target: "/pause", base: "scratch", entrypoint: ["/pause"], user: "65535:65535" },
  { ref: FLANNEL_IMAGE, input: "flanneld", target: "/opt/bin/flanneld", base: "debian", entrypoint: ["/opt/bin/flanneld"] },
];

// ---------------------------------------------------------------------------------------------------------
// Renderers (pure)

/**
 * The node's `/etc/containerd/config.toml` (containerd 1.6, config version 2), derived from kind v0.31.0's
 * `images/base/files/etc/containerd/config.toml` with these changes: no fuse-overlayfs proxy plugin;
 * `restrict_oom_score_adj = true` (no process on this machine may lower oom_score_adj: CAP_SYS_RESOURCE is
 * missing, and runc aborts on the sandbox's -998 otherwise; kind sets it only for rootless);
 * `sandbox_image` = {@link PAUSE_IMAGE}; an explicit CNI section with `bin_dir = "/opt/cni/bin"`, where the
 * build puts the flannel plugin and links to Debian's plugins (`/usr/lib/cni`). The
 * `snapshotter = "overlayfs"` line is kept verbatim because kind's entrypoint rewrites it with sed.
 * @see https://github.com/kubernetes-sigs/kind/blob/v0.31.0/images/base/files/etc/containerd/config.toml
 * @see https://github.com/containerd/containerd/blob/v1.6.20/docs/cri/config.md
 */
export function renderContainerdConfig(): string {
  return `# Rendered by cohort-lab (scripts/local/node-image.ts), from kind v0.31.0's images/base/files/etc/containerd/config.toml.
version = 2

[plugins."io.containerd.grpc.v1.cri".containerd]
  # save disk space when using a single snapshotter
  discard_unpacked_layers = true
  # explicitly use default snapshotter so kind's entrypoint can sed it
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  # "ctr oci spec" plus kind's mount-product-files hook, without rlimits
  base_runtime_spec = "/etc/containerd/cri-base.json"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.test-handler]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "/etc/containerd/cri-base.json"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.test-handler.options]
    SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".cni]
  # flannel (copied in) plus links to Debian's containernetworking-plugins in /usr/lib/cni
  bin_dir = "/opt/cni/bin"
  conf_dir = "/etc/cni/net.d"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  tolerate_missing_hugetlb_controller = true
  # this machine lacks CAP_SYS_RESOURCE: clamp oom_score_adj to containerd's own value instead of failing
  restrict_oom_score_adj = true
`;
}

/**
 * kind's containerd.service with Debian's binary path (`/usr/bin/containerd`; kind installs its own build in
 * /usr/local/bin).
 *
 * @param kindUnit - text of kind's `images/base/files/etc/systemd/system/containerd.service`.
 * @throws Error when the unit has no `ExecStart=/usr/local/bin/containerd` line (kind changed the file).
 */
export function adaptContainerdService(kindUnit: string): string {
  const line = /^ExecStart=\/usr\/local\/bin\/containerd$/m;
  if (!line.test(kindUnit)) throw new Error("kind's containerd.service has no line ExecStart=/usr/local/bin/containerd");
  return kindUnit.replace(line, "ExecStart=/usr/bin/containerd");
}

// ---------------------------------------------------------------------------------------------------------
// The input hash (pure)

/** Everything a node image is built from; its canonical JSON hash names the image and its cache directory. */
export interface NodeImageInputs {
  readonly kubernetesVersion: string;
  /** kind module version and go.sum hash. */
  readonly kindModule: { readonly version: string; readonly goSum: string };
  /** SHA-256 (hex) of every input binary by logical name. */
  readonly binaries: Readonly<Record<string, string>>;
  /** SHA-256 (hex) of cohort-lab's own files by repo-relative path (this module, scripts/local/node-image/*). */
  readonly files: Readonly<Record<string, string>>;
  /** Debian suite and package lists of both roots. */
  readonly debian: { readonly suite: string; readonly node: readonly string[]; readonly imageBase: readonly string[] };
}

/**
 * The 12-hex input hash: the first 12 hex digits of SHA-256 over the canonical JSON (sorted keys) of the
 * inputs. Any change to a binary, the kind module, our files or the package lists changes it.
 */
export function inputHash(inputs: NodeImageInputs): string {
  return createHash("sha256").update(canonicalJson(inputs)).digest("hex").slice(0, 12);
}

/** The node image's tag for an input hash: `cohort-lab/kind-node:v1.35.4-<hash>`. */
export function nodeImageTag(hash: string): string {
  return `${NODE_IMAGE_REPOSITORY}:${KUBERNETES_VERSION}-${hash}`;
}

// ---------------------------------------------------------------------------------------------------------
// Process helpers

interface RunOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** File whose contents are the child's stdin. */
  readonly stdinFile?: string;
  /** Text written to the child's stdin. */
  readonly input?: string;
  readonly log?: (line: string) => void;
}

/**
 * Runs a command, capturing stdout; stderr is kept (last 4 KiB quoted on failure).
 * @throws ToolBuildError naming the command and its exit status.
 */
function run(cmd: string, args: readonly string[], o: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const stdin = o.stdinFile !== undefined ? fs.openSync(o.stdinFile, "r") : o.input !== undefined ? "pipe" : "ignore";
    const child = spawn(cmd, args, { cwd: o.cwd, env: o.env ?? process.env, stdio: [stdin, "pipe", "pipe"] });
    if (typeof stdin === "number") fs.closeSync(stdin);
    if (o.input !== undefined) child.stdin?.end(o.input);
    const out: Buffer[] = [];
    let err = "";
    child.stdout?.on("data", (d: Buffer) => out.push(d));
    child.stderr?.on("data", (d: Buffer) => {
      err = (err + d.toString()).slice(-4096);
    });
    child.on("error", (e) => reject(new ToolBuildError(`${cmd}: ${e.message}`, TOOL_NAME)));
    child.on("close", (code, signal) => {
      if (code === 0) resolve(Buffer.concat(out).toString());
      else {
        const shown = [cmd, ...args].join(" ").slice(0, 300);
        reject(new ToolBuildError(`${shown}: exit ${code ?? signal}\n${err.trim()}`, TOOL_NAME));
      }
    });
  });
}

/** Runs a step and logs its wall time. */
async function timed<T>(log: (line: string) => void, label: string, fn: () => Promise<T>, who: string = TOOL_NAME): Promise<T> {
  const t0 = Date.now();
  const r = await fn();
  log(`${who}: ${label}: ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  return r;
}

/**
 * Whether the Docker engine answers (`docker version --format {{.Server.Version}}`).
 * @returns the server version, or `undefined` when it does not answer within 20 s.
 */
export function dockerServerVersion(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const r = spawnSync("docker", ["version", "--format", "{{.Server.Version}}"], { env, encoding: "utf8", timeout: 20_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** `docker image inspect --format {{.Id}}`; `undefined` when the image is absent. */
function dockerImageId(ref: string, env: NodeJS.ProcessEnv): string | undefined {
  const r = spawnSync("docker", ["image", "inspect", "--format", "{{.Id}}", ref], { env, encoding: "utf8", timeout: 60_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** Whether an ELF file has a PT_INTERP program header (is dynamically linked). */
export function elfIsDynamic(file: string): boolean {
  const fd = fs.openSync(file, "r");
  try {
    const head = Buffer.alloc(64);
    fs.readSync(fd, head, 0, 64, 0);
    if (head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2) throw new Error(`${file} is not a 64-bit ELF file`);
    const phoff = Number(head.readBigUInt64LE(32));
    const phentsize = head.readUInt16LE(54);
    const phnum = head.readUInt16LE(56);
    const ph = Buffer.alloc(phentsize * phnum);
    fs.readSync(fd, ph, 0, ph.length, phoff);
    for (let i = 0; i < phnum; i++) if (ph.readUInt32LE(i * phentsize) === 3) return true; // PT_INTERP
    return false;
  } finally {
    fs.closeSync(fd);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Debian root file systems

/** One entry of this machine's apt sources. */
export interface AptSource {
  readonly uris: readonly string[];
  readonly suites: readonly string[];
  readonly components: readonly string[];
}

/**
 * Parses apt sources (deb822 `.sources` stanzas and one-line `deb URI SUITE COMPONENT...` entries) and keeps
 * the `deb` entries of `suite` and its `-updates`/`-security` suites.
 * @see https://manpages.debian.org/bookworm/apt/sources.list.5.en.html
 */
export function parseAptSources(texts: readonly string[], suite: string): AptSource[] {
  const out: AptSource[] = [];
  const wanted = (s: string) => s === suite || s === `${suite}-updates` || s === `${suite}-security`;
  for (const text of texts) {
    if (/^\s*Types\s*:/im.test(text)) {
      for (const stanza of text.split(/\n\s*\n/)) {
        const field = (name: string) =>
          new RegExp(`^${name}\\s*:\\s*(.*)$`, "im")
            .exec(stanza)?.[1]
            ?.trim()
            .split(/\s+/)
            .filter((x) => x !== "") ?? [];
        if (!field("Types").includes("deb") || /^Enabled\s*:\s*no/im.test(stanza)) continue;
        const suites = field("Suites").filter(wanted);
        if (suites.length > 0) out.push({ uris: field("URIs"), suites, components: field("Components") });
      }
    } else {
      for (const line of text.split("\n")) {
        const m = /^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$/.exec(line);
        if (m !== null && wanted(m[2] as string)) out.push({ uris: [m[1] as string], suites: [m[2] as string], components: (m[3] as string).trim().split(/\s+/) });
      }
    }
  }
  return out;
}

/** Reads this machine's apt sources (/etc/apt/sources.list and /etc/apt/sources.list.d/*.{list,sources}). */
function machineAptSources(suite: string): AptSource[] {
  const files = ["/etc/apt/sources.list"];
  try {
    for (const f of fs.readdirSync("/etc/apt/sources.list.d")) if (/\.(list|sources)$/.test(f)) files.push(path.join("/etc/apt/sources.list.d", f));
  } catch {
    /* no directory */
  }
  const texts = files.filter((f) => fs.existsSync(f)).map((f) => fs.readFileSync(f, "utf8"));
  return parseAptSources(texts, suite);
}

/** Renders apt sources as one deb822 file (for the chroot), `main` only. */
function renderDeb822(sources: readonly AptSource[]): string {
  return sources
    .map((s) => `Types: deb\nURIs: ${s.uris.join(" ")}\nSuites: ${s.suites.join(" ")}\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n`)
    .join("\n");
}

/** What a Debian root tool is built from. */
export interface RootfsSpec {
  /** Tool name, e.g. `kind-node-rootfs`. */
  readonly name: string;
  readonly suite: string;
  /** `--include` packages. */
  readonly packages: readonly string[];
}

const SETUP_ROOTFS = path.join(__dirname, "node-image", "setup-rootfs.sh");
const SETUP_NODE = path.join(__dirname, "node-image", "setup-node.sh");

/**
 * The pin of a root tool: suite, packages, and the hash of setup-rootfs.sh. The tool version is
 * `<suite>-<8 hex of the pin>`.
 */
function rootfsPin(spec: RootfsSpec): { suite: string; packages: readonly string[]; setupSha256: string } {
  return { suite: spec.suite, packages: spec.packages, setupSha256: createHash("sha256").update(fs.readFileSync(SETUP_ROOTFS)).digest("hex") };
}

/**
 * A tool producing `rootfs.tar`: `debootstrap --variant=minbase --include=<packages> <suite>` from the
 * first URI of this machine's apt source for the suite, then `setup-rootfs.sh` in a chroot (upgrade from
 * -updates/-security, clean as kind's clean-install does), then a numeric-owner tar without /proc, /sys,
 * /dev contents. Needs root; installs Debian's debootstrap with apt-get when it is missing.
 *
 * @throws ToolBuildError when no apt source for the suite is configured or a step fails.
 * @see https://manpages.debian.org/bookworm/debootstrap/debootstrap.8.en.html
 */
export function rootfsTool(spec: RootfsSpec): Tool {
  const pin = rootfsPin(spec);
  const version = `${spec.suite}-${createHash("sha256").update(canonicalJson(pin)).digest("hex").slice(0, 8)}`;
  return {
    name: spec.name,
    version,
    pin,
    binaries: { rootfs: "rootfs.tar" },
    buildDescription: `debootstrap ${spec.suite} minbase`,
    async build(ctx: BuildContext) {
      const sources = machineAptSources(spec.suite);
      const mirror = sources.find((s) => s.suites.includes(spec.suite))?.uris[0];
      if (mirror === undefined) throw new ToolBuildError(`${spec.name}: no apt source for ${spec.suite} in /etc/apt/sources.list{,.d}`, spec.name);
      if (spawnSync("sh", ["-c", "command -v debootstrap"]).status !== 0) {
        ctx.log(`${spec.name}: debootstrap is not installed: apt-get install -y debootstrap`);
        await run("apt-get", ["install", "-y", "--no-install-recommends", "debootstrap"], { log: ctx.log, env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
      }
      const root = path.join(ctx.workDir, "root");
      const log = ctx.log;
      const step = <T>(label: string, fn: () => Promise<T>) => timed(ctx.log, label, fn, spec.name);
      await step("debootstrap", () => run("debootstrap", ["--variant=minbase", "--components=main", `--include=${spec.packages.join(",")}`, spec.suite, root, mirror], { log }));
      fs.writeFileSync(path.join(root, "etc/apt/sources.list.d/debian.sources"), renderDeb822(sources));
      fs.rmSync(path.join(root, "etc/apt/sources.list"), { force: true });
      fs.copyFileSync(SETUP_ROOTFS, path.join(root, "setup-rootfs.sh"));
      const proc = path.join(root, "proc");
      await run("mount", ["-t", "proc", "proc", proc]);
      try {
        await step("apt-get upgrade in the chroot", () => run("chroot", [root, "/bin/sh", "/setup-rootfs.sh"], { env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C" } }));
      } finally {
        spawnSync("umount", [proc]);
      }
      fs.rmSync(path.join(root, "setup-rootfs.sh"));
      await step("tar of the root", () =>
        run("tar", ["-C", root, "--numeric-owner", "--xattrs", "--exclude=./proc/*", "--exclude=./sys/*", "--exclude=./dev/*", "-cf", path.join(ctx.outDir, "rootfs.tar"), "."]),
      );
      return "build";
    },
  };
}

/** The node's root (kind's package list). */
export const NODE_ROOTFS: RootfsSpec = { name: "kind-node-rootfs", suite: DEBIAN_SUITE, packages: NODE_PACKAGES };
/** The small root under the kube-proxy and flannel images. */
export const IMAGE_BASE_ROOTFS: RootfsSpec = { name: "kind-image-rootfs", suite: DEBIAN_SUITE, packages: IMAGE_BASE_PACKAGES };

// ---------------------------------------------------------------------------------------------------------
// The node image tool

/** Contents of `image.json` in the tool directory. */
export interface NodeImageRecord {
  /** `cohort-lab/kind-node:v1.35.4-<hash>`. */
  readonly tag: string;
  /** Docker image ID, `sha256:<64 hex>` (stable across `docker save`/`docker load`). */
  readonly id: string;
  readonly kubernetesVersion: string;
  /** The images inside the node's containerd (`k8s.io` namespace). */
  readonly images: readonly string[];
  /** Archive file name in the tool directory (`docker load -i`). */
  readonly archive: string;
}

/** Cohort-lab's own files that shape the image (hashed into the tag). */
function ownFiles(): Record<string, string> {
  const files = [__filename.endsWith(".ts") ? __filename : path.join(__dirname, "node-image.ts"), SETUP_ROOTFS, SETUP_NODE];
  const repo = path.resolve(__dirname, "..", "..");
  return Object.fromEntries(files.map((f) => [path.relative(repo, f), createHash("sha256").update(fs.readFileSync(f)).digest("hex")]));
}

/**
 * SHA-256 of one input binary: from the stamp of the tool directory holding it when the stamp records the file
 * with its current size (cheap), otherwise by reading the file.
 * @throws ToolBuildError when the file is missing.
 */
async function inputSha256(name: string, file: string): Promise<string> {
  if (!fs.existsSync(file)) {
    throw new ToolBuildError(`${TOOL_NAME}: input ${name} is missing: ${file} (npm run toolchain -- local)`, TOOL_NAME);
  }
  const size = fs.statSync(file).size;
  for (let dir = path.dirname(file), i = 0; i < 3; dir = path.dirname(dir), i++) {
    const stamp = readStamp(dir);
    if (stamp === undefined) continue;
    const rel = path.relative(dir, file);
    const hit = Object.values(stamp.binaries).find((b) => b.path === rel && b.size === size);
    if (hit !== undefined) return hit.sha256;
    break;
  }
  return sha256File(file);
}

/**
 * Where the input binaries are: `findLocalBinaries()` of common/local-catalog.ts (the `local` tool set's
 * stamped cache directories, or `COHORT_LOCAL_BIN_DIR`), for the cache root `cache`.
 *
 * @throws LocalBinariesMissingError naming each missing binary and the command that builds it.
 */
export function findInputs(cache: string, env: NodeJS.ProcessEnv = process.env): InputBinaries {
  return findLocalBinaries({ ...env, [envNames.cacheRoot]: cache }, INPUT_NAMES);
}

/** Computes the inputs (binary hashes from stamps, own files, package lists). */
export async function nodeImageInputs(inputs: InputBinaries): Promise<NodeImageInputs> {
  const binaries: Record<string, string> = {};
  for (const n of INPUT_NAMES) binaries[n] = await inputSha256(n, inputs[n]);
  return {
    kubernetesVersion: KUBERNETES_VERSION,
    kindModule: { version: KIND_MODULE.version, goSum: KIND_MODULE.goSum },
    binaries,
    files: ownFiles(),
    debian: { suite: DEBIAN_SUITE, node: NODE_PACKAGES, imageBase: IMAGE_BASE_PACKAGES },
  };
}

/** `go mod download -json` of the pinned kind module; checks the go.sum hash. @returns the module directory. */
async function kindModuleDir(ctx: BuildContext): Promise<string> {
  const out = await run("go", ["mod", "download", "-json", `${KIND_MODULE.goModule}@${KIND_MODULE.version}`], {
    cwd: ctx.workDir,
    env: { ...ctx.env, GOFLAGS: "-mod=mod", GO111MODULE: "on" },
  });
  const info = JSON.parse(out) as { Dir?: string; Sum?: string; Error?: string };
  if (info.Error !== undefined || info.Dir === undefined)
    throw new ToolBuildError(`${TOOL_NAME}: go mod download ${KIND_MODULE.goModule}@${KIND_MODULE.version}: ${info.Error ?? "no Dir"}`, TOOL_NAME);
  if (info.Sum !== KIND_MODULE.goSum)
    throw new ToolBuildError(`${TOOL_NAME}: ${KIND_MODULE.goModule}@${KIND_MODULE.version} has go.sum hash ${info.Sum}, pinned ${KIND_MODULE.goSum}`, TOOL_NAME);
  return info.Dir;
}

/** Copies a file into the staging tree with a mode (creating parent directories). */
function stage(root: string, target: string, mode: number, from: { file?: string; text?: string }): void {
  const dest = path.join(root, target);
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  if (from.file !== undefined) fs.copyFileSync(from.file, dest);
  else fs.writeFileSync(dest, from.text ?? "");
  fs.chmodSync(dest, mode);
}

/**
 * Stages kind's images/base/files (minus the fuse-overlayfs unit and the config we render ourselves), with
 * kind's modes (usr/local/bin and kind/bin 0755, everything else 0644).
 */
function stageKindFiles(kindDir: string, root: string): void {
  const base = path.join(kindDir, "images", "base", "files");
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(base, rel), { withFileTypes: true })) {
      const r = path.join(rel, e.name);
      if (e.isDirectory()) walk(r);
      else if (e.isFile()) {
        if (r === "etc/containerd/config.toml" || r === "etc/systemd/system/containerd-fuse-overlayfs.service") continue;
        const exec = r.startsWith("usr/local/bin/") || r.startsWith("kind/bin/");
        if (r === "etc/systemd/system/containerd.service") {
          stage(root, r, 0o644, { text: adaptContainerdService(fs.readFileSync(path.join(base, r), "utf8")) });
        } else stage(root, r, exec ? 0o755 : 0o644, { file: path.join(base, r) });
      }
    }
  };
  walk("");
}

/** Builds one component image with Docker's legacy builder (`FROM scratch` or the small Debian base). */
async function buildComponentImage(img: ComponentImage, file: string, debianBase: string, ctx: BuildContext, env: NodeJS.ProcessEnv): Promise<void> {
  const dir = path.join(ctx.workDir, "images", img.ref.replace(/[^a-z0-9.-]/g, "_"));
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(file, path.join(dir, "bin"));
  fs.chmodSync(path.join(dir, "bin"), 0o755);
  let from = img.base === "debian" ? debianBase : "scratch";
  if (img.base === "scratch" && elfIsDynamic(file)) {
    ctx.log(`${TOOL_NAME}: ${img.input} is dynamically linked; basing ${img.ref} on the Debian root`);
    from = debianBase;
  }
  const lines = [
    `FROM ${from}`,
    `COPY bin ${img.target}`,
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ...(img.user !== undefined ? [`USER ${img.user}`] : []),
    ...(img.entrypoint !== undefined ? [`ENTRYPOINT ${JSON.stringify(img.entrypoint)}`] : []),
  ];
  fs.writeFileSync(path.join(dir, "Dockerfile"), `${lines.join("\n")}\n`);
  await timed(ctx.log, `image ${img.ref}`, () => run("docker", ["build", "-q", "-t", img.ref, dir], { env: { ...env, DOCKER_BUILDKIT: "0" } }));
}

/**
 * Checks that kubelet, kubeadm and kubectl report {@link KUBERNETES_VERSION} (kind reads the version from
 * `/kind/version`, kubeadm compares its own with `kubernetesVersion`; binaries built without the version
 * ldflags report v0.0.0-master).
 * @throws ToolBuildError naming the binary and what it printed.
 */
async function checkInputVersions(inputs: InputBinaries, env: NodeJS.ProcessEnv): Promise<void> {
  const checks: [InputName, string[]][] = [
    ["kubelet", ["--version"]],
    ["kubeadm", ["version", "-o", "short"]],
    ["kubectl", ["version", "--client"]],
  ];
  for (const [name, args] of checks) {
    const out = await run(inputs[name], args, { env });
    if (!new RegExp(`\\b${KUBERNETES_VERSION.replace(/\./g, "\\.")}\\b`).test(out)) {
      throw new ToolBuildError(`${TOOL_NAME}: ${inputs[name]} ${args.join(" ")} printed ${JSON.stringify(out.trim())}, expected ${KUBERNETES_VERSION}`, TOOL_NAME);
    }
  }
}

/** Polls a command until it succeeds (every 0.5 s, up to `seconds`). */
async function waitFor(cmd: string, args: readonly string[], seconds: number, env: NodeJS.ProcessEnv): Promise<boolean> {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    if (spawnSync(cmd, args, { env, stdio: "ignore", timeout: 10_000 }).status === 0) return true;
    await new Promise((r) => setTimeout(r, 500));
  }
  return false;
}

/**
 * The build itself (kind's `buildImage` without pulls): import the node root as a temporary image, run it as a
 * build container (`sleep infinity`, seccomp unconfined, not privileged, as kind does), copy kind's files,
 * the binaries and manifests in, run setup-node.sh, build and `docker save` the component images, import them
 * with the container's own containerd (`ctr -n k8s.io images import --all-platforms --no-unpack`), stop it,
 * `docker commit` with kind's ENTRYPOINT/ENV/STOPSIGNAL, and `docker save` the result into the tool directory.
 */
async function buildNodeImage(ctx: BuildContext, inputs: InputBinaries, hash: string, rootfs: string, imageRootfs: string): Promise<NodeImageRecord> {
  const env = ctx.env;
  const log = ctx.log;
  if (dockerServerVersion(env) === undefined) {
    throw new ToolBuildError(`${TOOL_NAME}: the Docker engine does not answer (start it: bash scripts/docker-engine.sh start)`, TOOL_NAME);
  }
  await checkInputVersions(inputs, env);
  const tag = nodeImageTag(hash);
  const tmpBase = `cohort-lab/kind-node-build:${hash}`;
  const debianBase = `cohort-lab/kind-image-base:${hash}`;
  const container = `cohort-lab-node-image-${hash}-${process.pid}`;
  const committed = `cohort-lab/kind-node-build:${hash}-committed`;
  const kindDir = await kindModuleDir(ctx);
  const root = path.join(ctx.workDir, "stage");
  stageKindFiles(kindDir, root);
  stage(root, "etc/containerd/config.toml", 0o644, { text: renderContainerdConfig() });
  for (const b of ["kubelet", "kubeadm", "kubectl"] as const) stage(root, `usr/bin/${b}`, 0o755, { file: inputs[b] });
  stage(root, "usr/local/bin/crictl", 0o755, { file: inputs.crictl });
  stage(root, "opt/cni/bin/flannel", 0o755, { file: inputs["cni-flannel"] });
  stage(root, "kind/version", 0o644, { text: KUBERNETES_VERSION });
  stage(root, "kind/manifests/default-cni.yaml", 0o644, { text: renderDefaultCni() });
  stage(root, "kind/build/setup-node.sh", 0o755, { file: SETUP_NODE });
  const stageTar = path.join(ctx.workDir, "stage.tar");
  await run("tar", [
    "-C",
    root,
    "--owner=0",
    "--group=0",
    "--numeric-owner",
    "-cf",
    stageTar,
    "etc",
    "usr",
    "opt",
    "kind",
    ...(fs.existsSync(path.join(root, "LICENSES")) ? ["LICENSES"] : []),
  ]);

  const cleanup = () => {
    spawnSync("docker", ["rm", "-f", "-v", container], { env, stdio: "ignore" });
    spawnSync("docker", ["rmi", committed, tmpBase, debianBase, ...COMPONENT_IMAGES.map((i) => i.ref)], { env, stdio: "ignore" });
  };
  cleanup();
  try {
    await timed(log, "docker import of the node root", () => run("docker", ["import", rootfs, tmpBase], { env }));
    await timed(log, "docker import of the image base root", () => run("docker", ["import", imageRootfs, debianBase], { env }));
    await run("docker", ["run", "-d", "--name", container, "--entrypoint=sleep", "--security-opt", "seccomp=unconfined", tmpBase, "infinity"], { env });
    await run("docker", ["cp", "-", `${container}:/`], { env, stdinFile: stageTar });
    await timed(log, "setup-node.sh", () => run("docker", ["exec", container, "/kind/build/setup-node.sh"], { env }));

    for (const img of COMPONENT_IMAGES) await buildComponentImage(img, inputs[img.input], debianBase, ctx, env);
    const imagesTar = path.join(ctx.workDir, "images.tar");
    await timed(log, "docker save of the component images", () => run("docker", ["save", "-o", imagesTar, ...COMPONENT_IMAGES.map((i) => i.ref)], { env }));

    await run("docker", ["exec", container, "sh", "-c", "containerd >/kind/build/containerd.log 2>&1 & echo $! > /kind/build/containerd.pid"], { env });
    if (!(await waitFor("docker", ["exec", container, "ctr", "version"], 60, env))) {
      const logText = spawnSync("docker", ["exec", container, "tail", "-n", "30", "/kind/build/containerd.log"], { env, encoding: "utf8" }).stdout;
      throw new ToolBuildError(`${TOOL_NAME}: containerd in the build container did not answer in 60 s:\n${logText}`, TOOL_NAME);
    }
    await timed(log, "ctr images import (--no-unpack)", () =>
      run("docker", ["exec", "-i", container, "ctr", "-n", "k8s.io", "images", "import", "--all-platforms", "--no-unpack", "-"], { env, stdinFile: imagesTar }),
    );
    const listed = (await run("docker", ["exec", container, "ctr", "-n", "k8s.io", "images", "ls", "-q"], { env }))
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "");
    const wanted = COMPONENT_IMAGES.map((i) => i.ref);
    const missing = wanted.filter((r) => !listed.includes(r));
    if (missing.length > 0) throw new ToolBuildError(`${TOOL_NAME}: after the import, containerd lacks ${missing.join(", ")} (has ${listed.join(", ")})`, TOOL_NAME);
    // containerd is reparented to `sleep` (PID 1), which never reaps it: exited = gone or a zombie.
    await run(
      "docker",
      [
        "exec",
        container,
        "sh",
        "-c",
        'p=$(cat /kind/build/containerd.pid); kill "$p"; for i in $(seq 1 200); do s=$(cut -d" " -f3 "/proc/$p/stat" 2>/dev/null) || exit 0; [ "$s" = Z ] && exit 0; sleep 0.1; done; echo "containerd did not stop" >&2; exit 1',
      ],
      { env },
    );
    await run("docker", ["exec", container, "sh", "-c", "rm -rf /kind/build /run/containerd /tmp/* /var/tmp/* /var/log/*"], { env });
    // Docker 20.10's `commit --change` refuses STOPSIGNAL, so the commit is a plain snapshot and a one-line
    // legacy-builder Dockerfile adds kind's image config (metadata only, no layer).
    await timed(log, "docker commit", () => run("docker", ["commit", container, committed], { env }));
    const dockerfile = [`FROM ${committed}`, "ENV container=docker", "STOPSIGNAL SIGRTMIN+3", 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]', ""].join("\n");
    await timed(log, "image config (ENTRYPOINT, ENV, STOPSIGNAL)", () =>
      run("docker", ["build", "-q", "-t", tag, "-"], { env: { ...env, DOCKER_BUILDKIT: "0" }, input: dockerfile }),
    );
  } finally {
    cleanup();
  }
  const id = dockerImageId(tag, env);
  if (id === undefined) throw new ToolBuildError(`${TOOL_NAME}: docker commit produced no ${tag}`, TOOL_NAME);
  await timed(log, "docker save of the node image", () => run("docker", ["save", "-o", path.join(ctx.outDir, ARCHIVE), tag], { env }));
  return { tag, id, kubernetesVersion: KUBERNETES_VERSION, images: COMPONENT_IMAGES.map((i) => i.ref), archive: ARCHIVE };
}

const ARCHIVE = "node-image.tar";
const RECORD = "image.json";

/**
 * The node image as a {@link Tool}: version `v1.35.4-<hash>` (so the cache directory is
 * `<cache>/kind-node-image-v1.35.4-<hash>`), pin = the {@link NodeImageInputs}, "binaries" = the
 * `docker save` archive and `image.json` ({@link NodeImageRecord}, with the image ID; its SHA-256 is in the
 * stamp). The warm path is the stamp check plus `docker image inspect` in `afterReady`; when the engine lacks
 * the image (a wiped data root) it is `docker load`ed from the archive, and the loaded ID must equal the
 * recorded one.
 *
 * @param rootfs - the ready root tools (their `rootfs` binary paths are read at build time).
 */
export function nodeImageTool(inputs: InputBinaries, pin: NodeImageInputs, roots: { node: () => string; imageBase: () => string }): Tool {
  const hash = inputHash(pin);
  return {
    name: TOOL_NAME,
    version: `${KUBERNETES_VERSION}-${hash}`,
    pin,
    binaries: { archive: ARCHIVE, record: RECORD },
    buildDescription: "an offline node image build (Docker)",
    async build(ctx: BuildContext) {
      const t0 = Date.now();
      const record = await buildNodeImage(ctx, inputs, hash, roots.node(), roots.imageBase());
      fs.writeFileSync(path.join(ctx.outDir, RECORD), `${JSON.stringify(record, null, 2)}\n`);
      ctx.log(`${TOOL_NAME}: ${record.tag} (${record.id}) built in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
      return "build";
    },
    afterReady(ready: ReadyTool, ctx: ToolContext) {
      ensureLoaded(ready.dir as string, ctx.env, ctx.log);
    },
  };
}

/**
 * Makes sure the local Docker engine has the node image of a finished tool directory, loading it from the
 * archive when it is missing.
 * @throws ToolBuildError when Docker does not answer or the loaded image has another ID.
 */
export function ensureLoaded(dir: string, env: NodeJS.ProcessEnv, log: (line: string) => void): NodeImageRecord {
  const record = JSON.parse(fs.readFileSync(path.join(dir, RECORD), "utf8")) as NodeImageRecord;
  const id = dockerImageId(record.tag, env);
  if (id === record.id) return record;
  if (dockerServerVersion(env) === undefined) {
    throw new ToolBuildError(`${TOOL_NAME}: the Docker engine does not answer (start it: bash scripts/docker-engine.sh start)`, TOOL_NAME);
  }
  log(`${TOOL_NAME}: ${record.tag} is ${id === undefined ? "not in Docker" : `${id} in Docker, not ${record.id}`}; docker load -i ${path.join(dir, record.archive)}`);
  const r = spawnSync("docker", ["load", "-i", path.join(dir, record.archive)], { env, encoding: "utf8" });
  if (r.status !== 0) throw new ToolBuildError(`${TOOL_NAME}: docker load failed: ${r.stderr.trim()}`, TOOL_NAME);
  const after = dockerImageId(record.tag, env);
  if (after !== record.id) throw new ToolBuildError(`${TOOL_NAME}: after docker load, ${record.tag} is ${String(after)}, expected ${record.id}`, TOOL_NAME);
  return record;
}

/**
 * The tools of `npm run toolchain -- local-images`, in build order: the two Debian roots, then the node image.
 * Computing the node image's pin reads the input binaries' SHA-256 from their stamps (cheap).
 *
 * @throws ToolBuildError when an input binary is missing.
 */
export async function localImageTools(cache: string): Promise<Tool[]> {
  const nodeRoot = rootfsTool(NODE_ROOTFS);
  const imageRoot = rootfsTool(IMAGE_BASE_ROOTFS);
  const inputs = findInputs(cache);
  const pin = await nodeImageInputs(inputs);
  const rootPath = (t: Tool) => () => path.join(toolDir(cache, t.name, t.version), "rootfs.tar");
  return [nodeRoot, imageRoot, nodeImageTool(inputs, pin, { node: rootPath(nodeRoot), imageBase: rootPath(imageRoot) })];
}

/**
 * The finished node image for the current inputs, for the lead's cluster config: reads the tool directory
 * the current inputs name and makes sure Docker has the image (loading the archive if needed).
 *
 * @returns the record (`tag` is what `kind create cluster --image` and the kind config's node `image` take;
 *   kind inspects it locally and never pulls a local tag), or `undefined` when it has not been built.
 * @throws ToolBuildError when an input binary is missing or Docker cannot load the archive.
 */
export async function readNodeImage(cache: string, env: NodeJS.ProcessEnv = process.env, log: (line: string) => void = () => {}): Promise<NodeImageRecord | undefined> {
  const pin = await nodeImageInputs(findInputs(cache, env));
  const dir = toolDir(cache, TOOL_NAME, `${KUBERNETES_VERSION}-${inputHash(pin)}`);
  const stamp = readStamp(dir);
  if (stamp === undefined || canonicalJson(stamp.pin) !== canonicalJson(pin)) return undefined;
  return ensureLoaded(dir, env, log);
}

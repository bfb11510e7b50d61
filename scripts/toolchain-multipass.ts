/**
 * The `multipass` tool set (`npm run toolchain -- multipass`): what the Multipass stand-in (test/tools/multipass/)
 * needs on this machine.
 *
 * 1. Host programs: `systemd-nspawn` (Debian's `systemd-container`), `ip` (iproute2), `debootstrap`, `nsenter`
 *    (util-linux), installed with `apt-get install -y --no-install-recommends` when missing (`multipass.hostPackages`
 *    in common/pins.ts). Checked on every run, warm included.
 * 2. `multipass-standin-rootfs-<suite>-<8 hex>`: a Debian root filesystem (`rootfs/`, a directory tree that each
 *    instance mounts as the lower layer of an overlay) made once with `debootstrap --variant=minbase --include=<the
 *    pinned packages>` from this machine's APT mirror, then `apt-get install` of cloud-init and python3 in the chroot
 *    (services kept from starting by a temporary policy-rc.d), then systemd-networkd enabled (each instance's static
 *    address comes from a file the stand-in writes into its overlay, with its cloud-init settings). `packages.txt`
 *    (dpkg-query) and `mirror.txt` are kept beside it.
 *
 * Needs root (debootstrap, apt-get, file ownership). The stamp records `rootfs/usr/lib/systemd/systemd`.
 *
 * @see https://manpages.debian.org/bookworm/debootstrap/debootstrap.8.en.html
 * @see https://cloudinit.readthedocs.io/en/22.4.2/reference/datasources/nocloud.html
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { multipass } from "../common/pins";
import { canonicalJson } from "../common/stamp";
import { debianMirrorFromSources, type AptSourceFile } from "../components/kind/app-images";
import { loadExeca } from "./lib/process";
import { ToolBuildError, type BuildContext, type Tool, type ToolContext, type ToolSet } from "./lib/tool";

/** Relative path of the root filesystem inside the tool directory. */
export const STANDIN_ROOTFS_DIR = "rootfs";

/** The rootfs tool's identity (cache directory `multipass-standin-rootfs-<suite>-<8 hex of the pin>`). */
export function standinRootfsId(): { readonly name: string; readonly version: string; readonly pin: typeof multipass.standinRootfs } {
  const pin = multipass.standinRootfs;
  const h = crypto.createHash("sha256").update(canonicalJson(pin)).digest("hex").slice(0, 8);
  return { name: "multipass-standin-rootfs", version: `${pin.suite}-${h}`, pin };
}

async function run(label: string, cmd: string, args: readonly string[], ctx: ToolContext, quiet = false): Promise<string> {
  if (!quiet) ctx.log(`  ${label}| ${cmd} ${args.join(" ")}`);
  const { execa } = await loadExeca();
  const r = await execa(cmd, args, { env: { ...ctx.env, DEBIAN_FRONTEND: "noninteractive" }, reject: false, all: true, stdin: "ignore" });
  if (r.exitCode !== 0) throw new ToolBuildError(`${label}: ${cmd} ${args.join(" ")} failed (exit ${r.exitCode ?? r.signal}): ${(r.all ?? "").trim().slice(-2000)}`, label);
  return r.stdout;
}

function onPath(program: string, env: NodeJS.ProcessEnv): boolean {
  const dirs = (env.PATH ?? "").split(":").concat(["/usr/sbin", "/sbin", "/usr/bin", "/bin"]);
  return dirs.some((d) => d !== "" && fs.existsSync(path.join(d, program)));
}

/**
 * Installs the Debian packages of `multipass.hostPackages` whose program is missing (`apt-get install`, then once
 * more after `apt-get update` when the first attempt fails, as scripts/docker-engine.sh does).
 *
 * @throws ToolBuildError naming the packages and apt-get's output tail.
 */
export async function ensureHostPackages(ctx: ToolContext): Promise<void> {
  const missing = multipass.hostPackages.filter((p) => !onPath(p.program, ctx.env)).map((p) => p.package);
  if (missing.length === 0) return;
  const label = "multipass host packages";
  if (process.getuid?.() !== 0) throw new ToolBuildError(`${label}: ${missing.join(", ")} missing and apt-get needs root`, label);
  ctx.log(`${label}: installing ${missing.join(", ")} (apt-get)`);
  const args = ["install", "-y", "-q", "--no-install-recommends", ...missing];
  try {
    await run(label, "apt-get", args, ctx, true);
  } catch {
    await run(label, "apt-get", ["update", "-q"], ctx, true);
    await run(label, "apt-get", args, ctx, true);
  }
}

function aptSourceFiles(): AptSourceFile[] {
  const files: AptSourceFile[] = [];
  if (fs.existsSync("/etc/apt/sources.list")) files.push({ name: "sources.list", text: fs.readFileSync("/etc/apt/sources.list", "utf8") });
  const dir = "/etc/apt/sources.list.d";
  if (fs.existsSync(dir))
    for (const n of fs.readdirSync(dir).sort()) if (n.endsWith(".list") || n.endsWith(".sources")) files.push({ name: n, text: fs.readFileSync(path.join(dir, n), "utf8") });
  return files;
}

/** The stand-in's root filesystem tool (see the file comment). */
export function standinRootfsTool(): Tool {
  const id = standinRootfsId();
  const label = id.name;
  return {
    name: id.name,
    version: id.version,
    pin: id.pin,
    binaries: { systemd: `${STANDIN_ROOTFS_DIR}/usr/lib/systemd/systemd` },
    buildDescription: `debootstrap --variant=${id.pin.variant} ${id.pin.suite} (${id.pin.arch}, with ${id.pin.include.join(", ")}), then ${id.pin.install.join(", ")}`,
    skipReason: () => (process.getuid?.() !== 0 ? "needs root (debootstrap, systemd-nspawn)" : undefined),
    async build(ctx: BuildContext) {
      await ensureHostPackages(ctx);
      const mirror = debianMirrorFromSources(aptSourceFiles(), id.pin.suite);
      if (mirror === undefined) throw new ToolBuildError(`${label}: no APT source lists \`${id.pin.suite} main\` (looked in /etc/apt/sources.list and sources.list.d)`, label);
      const root = path.join(ctx.outDir, STANDIN_ROOTFS_DIR);
      await run(label, "debootstrap", [`--variant=${id.pin.variant}`, `--arch=${id.pin.arch}`, `--include=${id.pin.include.join(",")}`, id.pin.suite, root, mirror], ctx);
      // No service may start inside the chroot while packages install (policy-rc.d, invoke-rc.d(8)).
      const policy = path.join(root, "usr/sbin/policy-rc.d");
      fs.writeFileSync(policy, "#!/bin/sh\nexit 101\n", { mode: 0o755 });
      await run(label, "mount", ["-t", "proc", "proc", path.join(root, "proc")], ctx, true);
      try {
        await run(label, "chroot", [root, "apt-get", "update", "-q"], ctx);
        await run(label, "chroot", [root, "apt-get", "install", "-y", "-q", "--no-install-recommends", ...id.pin.install], ctx);
        await run(label, "chroot", [root, "apt-get", "clean"], ctx, true);
      } finally {
        await run(label, "umount", [path.join(root, "proc")], ctx, true);
        fs.rmSync(policy, { force: true });
      }
      await run(label, "chroot", [root, "systemctl", "enable", "systemd-networkd.service"], ctx);
      // An empty machine-id: systemd treats the first boot of each instance as a first boot and makes its own.
      fs.writeFileSync(path.join(root, "etc/machine-id"), "");
      fs.writeFileSync(path.join(ctx.outDir, "packages.txt"), await run(label, "chroot", [root, "dpkg-query", "-W", "-f", "${Package} ${Version}\\n"], ctx, true));
      fs.writeFileSync(path.join(ctx.outDir, "mirror.txt"), `${mirror}\n`);
      for (const rel of ["var/lib/apt/lists", "var/cache/apt", "tmp", "var/lib/cloud"]) {
        const d = path.join(root, rel);
        if (!fs.existsSync(d)) continue;
        for (const e of fs.readdirSync(d)) fs.rmSync(path.join(d, e), { recursive: true, force: true });
      }
      return "build";
    },
    async afterReady(_ready, ctx) {
      await ensureHostPackages(ctx);
    },
  };
}

/** The `multipass` tool set. */
export const toolSet: ToolSet = {
  name: "multipass",
  description: "Multipass stand-in: systemd-container etc. on the host (apt), a Debian bookworm root with systemd and cloud-init",
  tools: () => [standinRootfsTool()],
};

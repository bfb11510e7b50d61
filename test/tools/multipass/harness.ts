/**
 * Test harness of the Multipass stand-in (standin.ts): a fresh state directory and a Linux bridge with a host
 * address, and the `multipass` executable with the environment that points it at them.
 *
 *   const mp = await startStandin();
 *   try { execFile(mp.bin, ["launch", "--name", "m1", "--cloud-init", "-"], { env: { ...process.env, ...mp.env } }) }
 *   finally { await mp.stop(); }
 *
 * The bridge has forward delay 0 and, when `iptables` exists, a FORWARD ACCEPT rule for traffic between its ports
 * (removed by `stop()`). The instances have no DNS server (Multipass runs dnsmasq on its bridge).
 *
 * `standinUnavailableReason()` says why the stand-in cannot run here (not root, the `multipass` tool set not built,
 * systemd-nspawn missing), for tests to skip with. `stop()` purges every instance (no process, mount, veth or cgroup
 * left) and removes the bridge and the state directory; it also runs, synchronously, if the test process exits
 * without calling it.
 */
import { spawnSync } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { cacheRoot, toolDir } from "../../../common/paths";
import { loadExeca } from "../../../scripts/lib/process";
import { checkToolDir } from "../../../scripts/lib/tool";
import { STANDIN_ROOTFS_DIR, standinRootfsTool } from "../../../scripts/toolchain-multipass";

/** Absolute path of the stand-in's `multipass` executable. */
export const STANDIN_BIN = path.resolve(__dirname, "bin", "multipass");

/** A running stand-in (see {@link startStandin}). */
export interface Standin {
  /** Absolute path of the `multipass` executable. */
  readonly bin: string;
  /**
   * Environment the executable needs, to merge over `process.env`: `MULTIPASS_STANDIN_STATE`,
   * `MULTIPASS_STANDIN_BRIDGE`, `MULTIPASS_STANDIN_ROOTFS`, `MULTIPASS_STANDIN_NODE` (this process's Node).
   */
  readonly env: Record<string, string>;
  /** Bridge name (`mpbr<6 hex>`). */
  readonly bridge: string;
  /** The host's IPv4 address on the bridge (`10.<a>.<b>.1`, prefix /24); instances get `.2` upwards. */
  readonly hostAddress: string;
  /** Purges every instance, removes the bridge and the state directory. Idempotent. */
  stop(): Promise<void>;
}

/** The cached root filesystem directory, or the reason it is not usable. */
export function standinRootfs(): { dir: string } | { reason: string } {
  const tool = standinRootfsTool();
  const dir = toolDir(cacheRoot(), tool.name, tool.version);
  const why = checkToolDir(tool, dir);
  if (why !== undefined) return { reason: `the stand-in root filesystem (${dir}): ${why}; run \`npm run toolchain -- multipass\`` };
  return { dir: path.join(dir, STANDIN_ROOTFS_DIR) };
}

/** Why the stand-in cannot run on this machine, or `undefined` when it can. */
export function standinUnavailableReason(): string | undefined {
  if (process.getuid?.() !== 0) return "the Multipass stand-in needs root (mount, veth, systemd-nspawn)";
  for (const p of ["systemd-nspawn", "nsenter", "ip"]) {
    if (!["/usr/bin", "/usr/sbin", "/bin", "/sbin"].some((d) => fs.existsSync(path.join(d, p)))) return `${p} is missing; run \`npm run toolchain -- multipass\``;
  }
  const r = standinRootfs();
  return "reason" in r ? r.reason : undefined;
}

function usedSubnets(): Set<string> {
  const r = spawnSync("ip", ["-j", "-4", "addr"], { encoding: "utf8" });
  const out = new Set<string>();
  try {
    for (const l of JSON.parse(r.stdout) as { addr_info?: { local: string }[] }[]) for (const a of l.addr_info ?? []) out.add(a.local.split(".").slice(0, 3).join("."));
  } catch {
    // none parsed: collisions are then caught by `ip addr add` below
  }
  return out;
}

/**
 * Creates a state directory and a bridge `mpbr<6 hex>` with the host address `10.<a>.<b>.1/24` (a /24 no interface
 * here uses), and returns the stand-in pointed at them.
 *
 * @throws Error with {@link standinUnavailableReason}'s text when the stand-in cannot run here, or naming the `ip`
 *   command that failed.
 */
export async function startStandin(): Promise<Standin> {
  const why = standinUnavailableReason();
  if (why !== undefined) throw new Error(why);
  // execa through import() (scripts/lib/process.ts): this module also runs under tsx outside vitest (bench/multipass.ts).
  const { execa } = await loadExeca();
  const rootfs = standinRootfs() as { dir: string };
  const state = fs.mkdtempSync(path.join(os.tmpdir(), "mpstandin-"));
  const bridge = `mpbr${crypto.randomBytes(3).toString("hex")}`;
  const used = usedSubnets();
  let prefix: string;
  do prefix = `10.${200 + crypto.randomInt(50)}.${crypto.randomInt(256)}`;
  while (used.has(prefix));
  const hostAddress = `${prefix}.1`;
  await execa("ip", ["link", "add", bridge, "type", "bridge", "forward_delay", "0"]);
  await execa("ip", ["addr", "add", `${hostAddress}/24`, "dev", bridge]);
  await execa("ip", ["link", "set", bridge, "up"]);
  // With br_netfilter loaded, frames between two ports of a bridge pass iptables' FORWARD chain, whose policy a
  // Docker engine sets to DROP: let instance-to-instance traffic on this bridge through (removed by stop()).
  const forwardRule = ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"];
  const iptables = (await execa("iptables", ["-I", ...forwardRule], { reject: false })).exitCode === 0;
  const env = {
    MULTIPASS_STANDIN_STATE: state,
    MULTIPASS_STANDIN_BRIDGE: bridge,
    MULTIPASS_STANDIN_ROOTFS: rootfs.dir,
    MULTIPASS_STANDIN_NODE: process.execPath,
  };
  let stopped = false;
  const stopSync = () => {
    if (stopped) return;
    stopped = true;
    spawnSync(STANDIN_BIN, ["delete", "--all", "--purge"], { env: { ...process.env, ...env }, stdio: "ignore" });
    if (iptables) spawnSync("iptables", ["-D", ...forwardRule], { stdio: "ignore" });
    spawnSync("ip", ["link", "del", bridge], { stdio: "ignore" });
    fs.rmSync(state, { recursive: true, force: true });
  };
  process.once("exit", stopSync);
  return {
    bin: STANDIN_BIN,
    env,
    bridge,
    hostAddress,
    async stop() {
      if (stopped) return;
      stopped = true;
      process.removeListener("exit", stopSync);
      const r = await execa(STANDIN_BIN, ["delete", "--all", "--purge"], { env: { ...process.env, ...env }, reject: false, all: true });
      if (iptables) await execa("iptables", ["-D", ...forwardRule], { reject: false });
      await execa("ip", ["link", "del", bridge], { reject: false });
      fs.rmSync(state, { recursive: true, force: true });
      if (r.exitCode !== 0) throw new Error(`stand-in stop: multipass delete --all --purge failed (exit ${r.exitCode}): ${r.all ?? ""}`);
    },
  };
}

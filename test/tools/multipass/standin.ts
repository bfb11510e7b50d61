/**
 * The Multipass stand-in: a `multipass` CLI (the verbs, flags, JSON shapes, messages and exit codes of Multipass
 * 1.16, canonical/multipass v1.16.3 `src/client/cli/cmd/*.cpp`, `include/multipass/cli/return_codes.h`) whose
 * instances are real: a Debian bookworm root (built by `npm run toolchain -- multipass`) as the lower layer of a
 * per-instance overlay, booted by `systemd-nspawn --boot` with systemd as PID 1 and cloud-init applying the
 * user-data from a NoCloud seed, in its own network namespace with a veth on a Linux bridge and a static IPv4.
 *
 * Run through `bin/multipass`. Environment:
 * - `MULTIPASS_STANDIN_STATE` (required): state directory (`instances/<name>/`, `addresses/<ipv4>/`).
 * - `MULTIPASS_STANDIN_BRIDGE` (required by `launch`/`start`): the bridge; its first IPv4 address and prefix give
 *   the subnet the instances' addresses come from (`.2` upwards) and their gateway.
 * - `MULTIPASS_STANDIN_ROOTFS`: the root filesystem directory. @default the `multipass` tool set's cached one.
 * - `MULTIPASS_STANDIN_LAUNCH_TIMEOUT_AFTER=<seconds>`: fault knob: `launch` gives up after that many seconds with
 *   Multipass's `launch failed: timed out waiting for initialization to complete` (exit 2) while the instance keeps
 *   booting (as canonical/multipass #3485, #3536).
 *
 * Instance layout (`<state>/instances/<name>/`): `instance.json` ({@link InstanceRecord}), `upper/` and `work/`
 * (overlay), `root/` (the mounted overlay, nspawn's `-D`), `nspawn.pid`, `nspawn.log`. Network: a veth pair
 * `mph<8 hex>` (host side, enslaved to the bridge) / `mpg<8 hex>` (inside), made by nspawn's `--network-veth-extra`,
 * the address configured by the instance's systemd-networkd (`/etc/systemd/network/
 * 10-cohort-standin.network` in the overlay); cloud-init's own network stage is disabled by the rootfs. Each
 * nspawn runs in its own cgroup `cohort-standin-<8 hex>` (name=systemd and unified hierarchies), since there is no
 * systemd on the host to give it a scope.
 *
 * Differences from Multipass (documented in docs/multipass-standin.md): Debian's cloud-init 22.4.2 rather than
 * Ubuntu's image, no hypervisor (the host kernel), `--cpus/--memory/--disk` are recorded and reported but not
 * enforced, `exec` enters the instance's namespaces with nsenter (as user `ubuntu`, like Multipass's SSH) instead
 * of SSH.
 */
import { spawn, spawnSync } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";

/** Version string printed by `multipass version`. */
export const STANDIN_VERSION = "1.16.3+cohort-standin";

/** Multipass return codes (include/multipass/cli/return_codes.h). */
export const ReturnCode = { Ok: 0, CommandLineError: 1, CommandFail: 2, DaemonFail: 3, Timeout: 5, ExecFail: 255 } as const;

/** What `instance.json` holds. */
export interface InstanceRecord {
  readonly name: string;
  readonly image: string;
  readonly cpus: number;
  /** Bytes. */
  readonly memory: number;
  /** Bytes. */
  readonly disk: number;
  readonly ipv4: string;
  readonly prefixLength: number;
  readonly gateway: string;
  readonly instanceId: string;
  readonly imageHash: string;
  /** Host-side veth name. */
  readonly hostIf: string;
  /** Instance-side veth name. */
  readonly guestIf: string;
  readonly createdAt: string;
  readonly deleted: boolean;
}

/** A failure with Multipass's message (printed on stderr) and return code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
    this.name = "CliError";
  }
}

const DEFAULT_TIMEOUT_S = 300;

/**
 * cloud-init settings of every instance (`/etc/cloud/cloud.cfg.d/90-cohort-standin.cfg` in its overlay): the NoCloud
 * seed only; no network stage (systemd-networkd has the address); a default user `ubuntu` with password-less sudo
 * as on Ubuntu's cloud images (Multipass's `exec` and `shell` log in as it); the C.UTF-8 locale (the root has no
 * `locales` package to generate another); the hostname in /etc/hosts (as Multipass's vendor-data has it).
 */
export const STANDIN_CLOUD_CFG = `# cohort-lab Multipass stand-in
datasource_list: [NoCloud, None]
network:
  config: disabled
locale: C.UTF-8
manage_etc_hosts: true
system_info:
  default_user:
    name: ubuntu
    lock_passwd: true
    gecos: Ubuntu
    groups: [adm, sudo]
    sudo: ["ALL=(ALL) NOPASSWD:ALL"]
    shell: /bin/bash
`;
const STOP_GRACE_MS = 30_000;
const EXEC_USER = "ubuntu";

function stateDir(): string {
  const s = process.env.MULTIPASS_STANDIN_STATE;
  if (s === undefined || s === "") throw new CliError("cannot connect to the multipass socket (stand-in: MULTIPASS_STANDIN_STATE is not set)", ReturnCode.DaemonFail);
  fs.mkdirSync(path.join(s, "instances"), { recursive: true });
  fs.mkdirSync(path.join(s, "addresses"), { recursive: true });
  return s;
}

const instancesDir = () => path.join(stateDir(), "instances");
const instDir = (name: string) => path.join(instancesDir(), name);

function readRecord(name: string): InstanceRecord | undefined {
  try {
    return JSON.parse(fs.readFileSync(path.join(instDir(name), "instance.json"), "utf8")) as InstanceRecord;
  } catch {
    return undefined;
  }
}

function writeRecord(rec: InstanceRecord): void {
  const file = path.join(instDir(rec.name), "instance.json");
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(rec, null, 2)}\n`);
  fs.renameSync(`${file}.tmp`, file);
}

function allNames(): string[] {
  return fs
    .readdirSync(instancesDir())
    .filter((n) => readRecord(n) !== undefined)
    .sort();
}

function mustExist(verb: string, name: string): InstanceRecord {
  const rec = readRecord(name);
  if (rec === undefined) throw new CliError(`${verb} failed: instance "${name}" does not exist`, ReturnCode.CommandFail);
  return rec;
}

// ---------------------------------------------------------------------------------------------------------------
// processes, mounts, links

/** Whether a pid is a live (not zombie) process. */
export function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** The nspawn supervisor's pid when it is alive and is the one this instance started. */
export function nspawnPid(name: string): number | undefined {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(instDir(name), "nspawn.pid"), "utf8").trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  try {
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
    if (!cmd.includes(path.join(instDir(name), "root"))) return undefined;
  } catch {
    return undefined;
  }
  return pid;
}

/** The instance's PID 1 (seen from the host): nspawn's child in another PID namespace. */
export function initPid(name: string): number | undefined {
  const parent = nspawnPid(name);
  if (parent === undefined) return undefined;
  const ownNs = fs.readlinkSync("/proc/self/ns/pid");
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const status = fs.readFileSync(`/proc/${e}/status`, "utf8");
      if (Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]) !== parent) continue;
      if (fs.readlinkSync(`/proc/${e}/ns/pid`) !== ownNs && alive(Number(e))) return Number(e);
    } catch {
      // raced with an exit
    }
  }
  return undefined;
}

function isMounted(dir: string): boolean {
  return fs
    .readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((l) => l.split(" ")[4] === dir);
}

function sh(cmd: string, args: readonly string[], allowFail = false): { code: number; out: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const out = `${r.stdout ?? ""}${r.stderr ?? ""}`;
  if (r.error !== undefined) throw new CliError(`stand-in: ${cmd}: ${r.error.message}`, ReturnCode.CommandFail);
  if (r.status !== 0 && !allowFail) throw new CliError(`stand-in: ${cmd} ${args.join(" ")} failed (exit ${r.status}): ${out.trim()}`, ReturnCode.CommandFail);
  return { code: r.status ?? -1, out };
}

function linkExists(ifname: string): boolean {
  return fs.existsSync(`/sys/class/net/${ifname}`);
}

const CGROUP_ROOTS = ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"];
/** The instance's own cgroup (unique per instance record, like its veth names). */
const cgroupName = (rec: InstanceRecord) => `cohort-standin-${rec.hostIf.slice(3)}`;

function removeCgroups(rec: InstanceRecord): void {
  for (const root of CGROUP_ROOTS) {
    const dir = path.join(root, cgroupName(rec));
    if (!fs.existsSync(dir)) continue;
    // systemd inside made sub-cgroups; remove the deepest first.
    const dirs: string[] = [];
    const walk = (d: string) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(path.join(d, e.name));
      dirs.push(d);
    };
    try {
      walk(dir);
      for (const d of dirs) fs.rmdirSync(d);
    } catch {
      // still populated (processes exiting); the next stop or purge retries
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// sizes, names, addresses

/** Parses Multipass's size syntax (bytes, or a decimal with K/M/G, optionally followed by `B`/`iB`) into bytes. */
export function parseSize(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)([KMG])?(?:i?B)?$/i.exec(text.trim());
  if (m === null) return undefined;
  const unit = { K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[(m[2] ?? "").toUpperCase() as "K" | "M" | "G"] ?? 1;
  return Math.floor(Number(m[1]) * unit);
}

const NAME_RE = /^[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/;

function ipToInt(ip: string): number {
  return ip.split(".").reduce((a, o) => a * 256 + Number(o), 0);
}
function intToIp(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

/** The bridge's first IPv4 address and prefix length (`ip -j addr show dev <bridge>`). */
export function bridgeAddress(bridge: string): { address: string; prefixLength: number } {
  const r = sh("ip", ["-j", "-4", "addr", "show", "dev", bridge], true);
  if (r.code !== 0) throw new CliError(`launch failed: stand-in bridge "${bridge}" (MULTIPASS_STANDIN_BRIDGE) does not exist: ${r.out.trim()}`, ReturnCode.CommandFail);
  const j = JSON.parse(r.out) as { addr_info?: { family: string; local: string; prefixlen: number }[] }[];
  const a = j[0]?.addr_info?.find((x) => x.family === "inet");
  if (a === undefined) throw new CliError(`launch failed: stand-in bridge "${bridge}" has no IPv4 address`, ReturnCode.CommandFail);
  return { address: a.local, prefixLength: a.prefixlen };
}

/** Claims a free address of the bridge's subnet atomically (`mkdir <state>/addresses/<ipv4>`). */
function claimAddress(name: string, bridge: string): { ipv4: string; prefixLength: number; gateway: string } {
  const { address, prefixLength } = bridgeAddress(bridge);
  const size = 2 ** (32 - prefixLength);
  const base = ipToInt(address) - (ipToInt(address) % size);
  for (let i = 2; i < size - 1; i++) {
    const ip = intToIp(base + i);
    if (ip === address) continue;
    try {
      fs.mkdirSync(path.join(stateDir(), "addresses", ip));
      fs.writeFileSync(path.join(stateDir(), "addresses", ip, "owner"), name);
      return { ipv4: ip, prefixLength, gateway: address };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
  throw new CliError(`launch failed: no free address on bridge "${bridge}"`, ReturnCode.CommandFail);
}

/** The root filesystem: `MULTIPASS_STANDIN_ROOTFS`, else the `multipass` tool set's directory in the tool cache. */
async function rootfsDir(): Promise<string> {
  const fromEnv = process.env.MULTIPASS_STANDIN_ROOTFS;
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const { standinRootfsId, STANDIN_ROOTFS_DIR } = await import("../../../scripts/toolchain-multipass.js");
  const { cacheRoot, toolDir } = await import("../../../common/paths.js");
  const id = standinRootfsId();
  return path.join(toolDir(cacheRoot(), id.name, id.version), STANDIN_ROOTFS_DIR);
}

// ---------------------------------------------------------------------------------------------------------------
// boot, shutdown

/** cloud-init's `boot-finished` of this instance id (`/var/lib/cloud/instance` is an absolute symlink to it). */
function bootFinishedFile(rec: InstanceRecord): string {
  return path.join(instDir(rec.name), "root", "var/lib/cloud/instances", rec.instanceId, "boot-finished");
}

function logTail(name: string): string {
  try {
    return fs
      .readFileSync(path.join(instDir(name), "nspawn.log"), "utf8")
      .trim()
      .split("\n")
      .slice(-15)
      .join("\n");
  } catch {
    return "";
  }
}

/**
 * Mounts the overlay and starts `systemd-nspawn --boot` detached (its own session), with a veth pair named by the
 * record (`--network-veth-extra`; `--network-interface` would need udev on the host to mark the link initialized).
 * Then {@link attach} puts the host side on the bridge. @returns nspawn's pid.
 */
function boot(rec: InstanceRecord): number {
  const dir = instDir(rec.name);
  const root = path.join(dir, "root");
  const lower = fs.readFileSync(path.join(dir, "lower"), "utf8").trim();
  for (const d of ["upper", "work", "root"]) fs.mkdirSync(path.join(dir, d), { recursive: true });
  if (!isMounted(root)) sh("mount", ["-t", "overlay", "overlay", "-o", `lowerdir=${lower},upperdir=${path.join(dir, "upper")},workdir=${path.join(dir, "work")}`, root]);
  fs.rmSync(bootFinishedFile(rec), { force: true });
  if (linkExists(rec.hostIf)) sh("ip", ["link", "del", rec.hostIf], true);
  for (const r of CGROUP_ROOTS) fs.mkdirSync(path.join(r, cgroupName(rec)), { recursive: true });
  const log = fs.openSync(path.join(dir, "nspawn.log"), "a");
  const nspawnArgs = [
    "-D",
    root,
    "--boot",
    "--register=no",
    "--keep-unit",
    `--machine=${rec.name}`,
    `--network-veth-extra=${rec.hostIf}:${rec.guestIf}`,
    "--console=passive",
    "--link-journal=no",
    "--timezone=off",
    "--resolv-conf=off",
  ];
  // Enter the instance's own cgroups first (there is no systemd on the host to make a scope), then exec nspawn.
  const script = `${CGROUP_ROOTS.map((r) => `echo $$ > ${path.join(r, cgroupName(rec), "cgroup.procs")}`).join(" && ")} && exec systemd-nspawn "$@"`;
  const child = spawn("/bin/sh", ["-c", script, "nspawn", ...nspawnArgs], { detached: true, stdio: ["ignore", log, log] });
  if (child.pid === undefined) throw new CliError("launch failed: could not start systemd-nspawn", ReturnCode.CommandFail);
  fs.writeFileSync(path.join(dir, "nspawn.pid"), `${child.pid}\n`);
  child.unref();
  fs.closeSync(log);
  return child.pid;
}

/** Enslaves the host side of the instance's veth (nspawn creates it) to the bridge once it appears. */
async function attach(rec: InstanceRecord, bridge: string, pid: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!linkExists(rec.hostIf)) {
    if (!alive(pid) || Date.now() > deadline) return; // waitBooted reports the dead nspawn with its log
    await sleep(50);
  }
  sh("ip", ["link", "set", rec.hostIf, "master", bridge]);
  sh("ip", ["link", "set", rec.hostIf, "up"]);
}

/** Stops the instance: SIGTERM to nspawn (an orderly poweroff of the instance), SIGKILL of its PID 1 after the grace. */
async function shutdown(rec: InstanceRecord, graceMs = STOP_GRACE_MS): Promise<void> {
  const pid = nspawnPid(rec.name);
  if (pid !== undefined) {
    const init = initPid(rec.name);
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // gone
    }
    const deadline = Date.now() + graceMs;
    while (alive(pid) && Date.now() < deadline) await sleep(200);
    if (init !== undefined) endExecSessions(init);
    if (alive(pid)) {
      // The same init as before the grace, unless the instance had none yet (still booting).
      const target = init ?? initPid(rec.name);
      for (const p of [target, pid]) {
        if (p === undefined) continue;
        try {
          process.kill(p, "SIGKILL");
        } catch {
          // gone
        }
      }
      const hard = Date.now() + 10_000;
      while (alive(pid) && Date.now() < hard) await sleep(100);
      // nspawn gone after the grace means its init exited, which waits until every task of its PID namespace is
      // reaped: no session can be stuck then. Only a killed init can leave one.
      if (target !== undefined) endExecSessions(target);
    }
  }
  const root = path.join(instDir(rec.name), "root");
  for (let i = 0; i < 50 && isMounted(root); i++) {
    if (sh("umount", [root], true).code !== 0) await sleep(200);
  }
  if (isMounted(root)) sh("umount", ["-l", root], true);
  if (linkExists(rec.hostIf)) sh("ip", ["link", "del", rec.hostIf], true);
  removeCgroups(rec);
}

/**
 * Ends the `exec` sessions into a stopped instance (SIGKILL to each `nsenter --target <init>`), as a VM's poweroff
 * ends Multipass's SSH sessions. Without it a session could outlive the instance for good: the instance's init,
 * exiting, waits in the kernel until every task of its PID namespace is reaped, and the session's process inside
 * (a zombie once killed) is reaped only by nsenter, outside; nsenter had stopped itself (it passes a stopped child's
 * SIGSTOP on to itself) and never reaped it. Seen as `[systemd-shutdow]` left after each run of the multipass tier.
 */
function endExecSessions(init: number): void {
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0");
      if (path.basename(argv[0] ?? "") !== "nsenter") continue;
      const i = argv.indexOf("--target");
      if (i >= 0 && argv[i + 1] === String(init)) process.kill(Number(e), "SIGKILL");
    } catch {
      // raced with an exit
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Waits for cloud-init's `boot-finished`; rejects with Multipass's messages on the timeouts, or when nspawn died. */
async function waitBooted(rec: InstanceRecord, verb: string, timeoutS: number): Promise<void> {
  const started = Date.now();
  const knob = process.env.MULTIPASS_STANDIN_LAUNCH_TIMEOUT_AFTER;
  const faultS = verb === "launch" && knob !== undefined && knob !== "" ? Number(knob) : undefined;
  if (faultS !== undefined && !(faultS >= 0))
    throw new CliError(`stand-in: MULTIPASS_STANDIN_LAUNCH_TIMEOUT_AFTER must be a number of seconds, got ${JSON.stringify(knob)}`, ReturnCode.CommandLineError);
  for (;;) {
    if (fs.existsSync(bootFinishedFile(rec))) return;
    const elapsed = (Date.now() - started) / 1000;
    if (faultS !== undefined && elapsed >= faultS) throw new CliError(`${verb} failed: timed out waiting for initialization to complete`, ReturnCode.CommandFail);
    if (elapsed >= timeoutS) throw new CliError("Timed out waiting for instance launch.", ReturnCode.Timeout);
    if (nspawnPid(rec.name) === undefined) {
      await shutdown(rec, 0); // unmount, remove the veth; the instance stays, Stopped
      throw new CliError(`${verb} failed: instance "${rec.name}" stopped while starting:\n${logTail(rec.name)}`, ReturnCode.CommandFail);
    }
    await sleep(200);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// argument parsing

interface Parsed {
  readonly positional: string[];
  readonly flags: Map<string, string>;
  readonly rest: string[];
}

/** Parses `args` with the given value-taking options (long name → aliases) and boolean options. */
function parseArgs(verb: string, args: readonly string[], valued: Record<string, readonly string[]>, booleans: readonly string[] = []): Parsed {
  const positional: string[] = [];
  const flags = new Map<string, string>();
  const alias = new Map<string, string>();
  for (const [long, names] of Object.entries(valued)) for (const n of [long, ...names]) alias.set(n, long);
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === "--") return { positional, flags, rest: args.slice(i + 1) };
    if (a.startsWith("-") && a !== "-") {
      const eq = a.indexOf("=");
      const key = eq > 0 ? a.slice(0, eq) : a;
      if (booleans.includes(key)) {
        flags.set(key, "true");
        continue;
      }
      const long = alias.get(key);
      if (long === undefined) throw new CliError(`Unknown option '${key.replace(/^-+/, "")}'.`, ReturnCode.CommandLineError);
      const value = eq > 0 ? a.slice(eq + 1) : args[++i];
      if (value === undefined) throw new CliError(`Missing value after '${key}'.`, ReturnCode.CommandLineError);
      flags.set(long, value);
      continue;
    }
    positional.push(a);
  }
  void verb;
  return { positional, flags, rest: [] };
}

// ---------------------------------------------------------------------------------------------------------------
// verbs

async function readCloudInit(source: string): Promise<string> {
  let text: string;
  try {
    text = source === "-" ? fs.readFileSync(0, "utf8") : fs.readFileSync(source, "utf8");
  } catch {
    throw new CliError(`Could not load cloud-init configuration: bad file: ${source}\nPlease ensure that Multipass can read it.`, ReturnCode.CommandLineError);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new CliError(`Could not load cloud-init configuration: ${(err as Error).message.split("\n")[0] ?? ""}`, ReturnCode.CommandLineError);
  }
  if (doc !== null && doc !== undefined && (typeof doc !== "object" || Array.isArray(doc)))
    throw new CliError("Could not load cloud-init configuration: not a map", ReturnCode.CommandLineError);
  // The client re-dumps the YAML; the daemon writes it as `#cloud-config` user-data.
  return `#cloud-config\n${doc === null || doc === undefined ? "{}\n" : stringifyYaml(doc)}`;
}

function petName(): string {
  const a = ["eager", "quiet", "brave", "lucid", "nimble", "sturdy"];
  const b = ["heron", "otter", "lynx", "finch", "marten", "ibex"];
  const r = crypto.randomBytes(2);
  return `${a[(r[0] as number) % a.length]}-${b[(r[1] as number) % b.length]}`;
}

async function launch(args: readonly string[]): Promise<void> {
  const p = parseArgs("launch", args, { "--name": ["-n"], "--cpus": ["-c"], "--memory": ["-m", "--mem"], "--disk": ["-d"], "--cloud-init": [], "--timeout": [] });
  if (args.some((a) => a === "--mem" || a.startsWith("--mem="))) process.stderr.write('Warning: the "--mem" flag is deprecated. Please use "--memory" instead.\n');
  if (p.positional.length > 1) throw new CliError("Too many arguments supplied", ReturnCode.CommandLineError);
  const image = p.positional[0] ?? "24.04";
  const name = p.flags.get("--name") ?? petName();
  if (!NAME_RE.test(name)) throw new CliError(`Invalid instance name supplied`, ReturnCode.CommandLineError);
  const cpusText = p.flags.get("--cpus") ?? "1";
  const cpus = Number(cpusText);
  if (!/^\d+$/.test(cpusText) || cpus < 1) throw new CliError(`error: Invalid CPU count '${cpusText}', need a positive integer value.`, ReturnCode.CommandLineError);
  const memory = parseSize(p.flags.get("--memory") ?? "1G");
  if (memory === undefined) throw new CliError(`error: Invalid memory size '${p.flags.get("--memory") ?? ""}'`, ReturnCode.CommandLineError);
  if (memory < 512 * 1024 ** 2) throw new CliError("launch failed: Requested memory size is below the minimum of 512M", ReturnCode.CommandFail);
  const disk = parseSize(p.flags.get("--disk") ?? "5G");
  if (disk === undefined) throw new CliError(`error: Invalid disk size '${p.flags.get("--disk") ?? ""}'`, ReturnCode.CommandLineError);
  if (disk < 1024 ** 3) throw new CliError("launch failed: Requested disk size is below the minimum of 1G", ReturnCode.CommandFail);
  const timeoutText = p.flags.get("--timeout");
  const timeoutS = timeoutText === undefined ? DEFAULT_TIMEOUT_S : Number(timeoutText);
  if (timeoutText !== undefined && (!/^\d+$/.test(timeoutText) || timeoutS < 1))
    throw new CliError("error: --timeout value has to be a positive integer", ReturnCode.CommandLineError);
  const cloudInit = p.flags.get("--cloud-init");
  const userData = cloudInit === undefined ? "#cloud-config\n{}\n" : await readCloudInit(cloudInit);
  const bridge = process.env.MULTIPASS_STANDIN_BRIDGE;
  if (bridge === undefined || bridge === "") throw new CliError("launch failed: stand-in: MULTIPASS_STANDIN_BRIDGE is not set", ReturnCode.CommandFail);
  const lower = await rootfsDir();
  if (!fs.existsSync(path.join(lower, "usr/lib/systemd/systemd")))
    throw new CliError(`launch failed: stand-in root filesystem ${lower} has no systemd (build it with \`npm run toolchain -- multipass\`)`, ReturnCode.CommandFail);

  const dir = instDir(name);
  try {
    fs.mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") throw new CliError(`launch failed: instance "${name}" already exists`, ReturnCode.CommandFail);
    throw err;
  }
  const addr = claimAddress(name, bridge);
  const h = crypto.createHash("sha256").update(`${stateDir()}/${name}/${Date.now()}`).digest("hex").slice(0, 8);
  const rec: InstanceRecord = {
    name,
    image,
    cpus,
    memory,
    disk,
    ...addr,
    instanceId: `i-${crypto.randomBytes(8).toString("hex")}`,
    imageHash: crypto.createHash("sha256").update(lower).digest("hex"),
    hostIf: `mph${h}`,
    guestIf: `mpg${h}`,
    createdAt: new Date().toISOString(),
    deleted: false,
  };
  fs.writeFileSync(path.join(dir, "lower"), `${lower}\n`);
  const upper = path.join(dir, "upper");
  const put = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(upper, rel)), { recursive: true });
    fs.writeFileSync(path.join(upper, rel), text);
  };
  put("var/lib/cloud/seed/nocloud/meta-data", `instance-id: ${rec.instanceId}\nlocal-hostname: ${name}\n`);
  put("var/lib/cloud/seed/nocloud/user-data", userData);
  put("etc/hostname", `${name}\n`);
  put("etc/cloud/cloud.cfg.d/90-cohort-standin.cfg", STANDIN_CLOUD_CFG);
  // No DNS server on the bridge (Multipass has dnsmasq there): a resolver on loopback fails at once instead of
  // timing out on the host's servers, which the instance cannot reach (python's http.server looks its name up).
  put("etc/resolv.conf", "# cohort-lab Multipass stand-in: no DNS on the bridge\nnameserver 127.0.0.1\n");
  put(
    "etc/systemd/network/10-cohort-standin.network",
    `[Match]\nName=${rec.guestIf}\n\n[Network]\nAddress=${rec.ipv4}/${rec.prefixLength}\nGateway=${rec.gateway}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n`,
  );
  writeRecord(rec);
  await attach(rec, bridge, boot(rec));
  await waitBooted(rec, "launch", timeoutS);
  process.stdout.write(`Launched: ${name}\n`);
}

type State = "Running" | "Stopped" | "Deleted" | "Starting";

function stateOf(rec: InstanceRecord): State {
  if (rec.deleted) return "Deleted";
  if (nspawnPid(rec.name) === undefined) return "Stopped";
  return fs.existsSync(bootFinishedFile(rec)) || initPid(rec.name) !== undefined ? "Running" : "Starting";
}

function releaseOf(rec: InstanceRecord, state: State): string {
  if (state !== "Running") return "Not Available";
  try {
    const text = fs.readFileSync(path.join(instDir(rec.name), "root", "etc/os-release"), "utf8");
    return /^PRETTY_NAME="?([^"\n]*)"?/m.exec(text)?.[1] ?? "Not Available";
  } catch {
    return "Not Available";
  }
}

function treeBytes(dir: string): number {
  let total = 0;
  const walk = (d: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) total += fs.lstatSync(p).size;
    }
  };
  walk(dir);
  return total;
}

/** Resident memory of the instance's processes (sum of VmRSS of every process in its PID namespace), bytes. */
function memoryUsed(init: number): number {
  let ns: string;
  try {
    ns = fs.readlinkSync(`/proc/${init}/ns/pid`);
  } catch {
    return 0;
  }
  let total = 0;
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (fs.readlinkSync(`/proc/${e}/ns/pid`) !== ns) continue;
      const kb = Number(/^VmRSS:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${e}/status`, "utf8"))?.[1] ?? 0);
      total += kb * 1024;
    } catch {
      // exited
    }
  }
  return total;
}

function infoJson(rec: InstanceRecord): Record<string, unknown> {
  const state = stateOf(rec);
  const running = state === "Running";
  const init = running ? initPid(rec.name) : undefined;
  const load = running ? fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).map(Number) : [];
  return {
    state,
    image_hash: rec.imageHash,
    image_release: `${rec.image} (stand-in: Debian 12 bookworm)`,
    release: releaseOf(rec, state),
    cpu_count: String(rec.cpus),
    snapshot_count: "0",
    load,
    disks: running ? { sda1: { used: String(treeBytes(path.join(instDir(rec.name), "upper"))), total: String(rec.disk) } } : {},
    memory: running && init !== undefined ? { used: memoryUsed(init), total: rec.memory } : {},
    ipv4: running ? [rec.ipv4] : [],
    mounts: {},
  };
}

function wantsJson(p: Parsed, verb: string): boolean {
  const f = p.flags.get("--format") ?? "table";
  if (!["json", "table", "csv", "yaml"].includes(f)) throw new CliError(`Invalid format type given.`, ReturnCode.CommandLineError);
  void verb;
  return f === "json";
}

function info(args: readonly string[]): void {
  const p = parseArgs("info", args, { "--format": [] }, ["--all"]);
  const names = p.flags.has("--all") ? allNames() : p.positional;
  if (names.length === 0) throw new CliError("Name argument or --all is required", ReturnCode.CommandLineError);
  const recs = names.map((n) => mustExist("info", n));
  if (wantsJson(p, "info")) {
    process.stdout.write(`${JSON.stringify({ errors: [], info: Object.fromEntries(recs.map((r) => [r.name, infoJson(r)])) }, null, 4)}\n`);
    return;
  }
  const blocks = recs.map((r) => {
    const j = infoJson(r);
    return [
      `Name:           ${r.name}`,
      `State:          ${String(j.state)}`,
      `IPv4:           ${(j.ipv4 as string[])[0] ?? "--"}`,
      `Release:        ${String(j.release)}`,
      `CPU(s):         ${r.cpus}`,
    ].join("\n");
  });
  process.stdout.write(`${blocks.join("\n\n")}\n`);
}

function list(args: readonly string[]): void {
  const p = parseArgs("list", args, { "--format": [] });
  const rows = allNames().map((n) => {
    const rec = readRecord(n) as InstanceRecord;
    const state = stateOf(rec);
    return { name: n, state, ipv4: state === "Running" ? [rec.ipv4] : [], release: releaseOf(rec, state) };
  });
  if (wantsJson(p, "list")) {
    process.stdout.write(`${JSON.stringify({ list: rows }, null, 4)}\n`);
    return;
  }
  if (rows.length === 0) {
    process.stderr.write("No instances found.\n");
    return;
  }
  process.stdout.write(`${["Name State IPv4 Image", ...rows.map((r) => `${r.name} ${r.state} ${r.ipv4[0] ?? "--"} ${r.release}`)].join("\n")}\n`);
}

function hasUser(name: string, user: string): boolean {
  try {
    return fs
      .readFileSync(path.join(instDir(name), "root", "etc/passwd"), "utf8")
      .split("\n")
      .some((l) => l.startsWith(`${user}:`));
  } catch {
    return false;
  }
}

async function exec(args: readonly string[]): Promise<number> {
  const p = parseArgs("exec", args, { "--working-directory": ["-d"] }, ["--no-map-working-directory", "-n"]);
  const name = p.positional[0];
  if (name === undefined) throw new CliError("Wrong number of arguments", ReturnCode.CommandLineError);
  if (p.rest.length === 0) throw new CliError("Wrong number of arguments", ReturnCode.CommandLineError);
  const rec = mustExist("exec", name);
  if (rec.deleted) throw new CliError(`exec failed: instance "${name}" is deleted`, ReturnCode.CommandFail);
  if (nspawnPid(name) === undefined) await startOne(rec, DEFAULT_TIMEOUT_S); // Multipass starts a stopped instance first
  // Multipass's exec is SSH as `ubuntu`: it works once cloud-init has made the user.
  const deadline = Date.now() + 120_000;
  let init = initPid(name);
  while ((init === undefined || !hasUser(name, EXEC_USER)) && Date.now() < deadline) {
    await sleep(200);
    init = initPid(name);
  }
  if (init === undefined || !hasUser(name, EXEC_USER))
    return execFail(`exec failed: ssh connection failed: 'Connection refused' (instance "${name}" has no user ${EXEC_USER} yet)`);
  const cwd = p.flags.get("--working-directory") ?? `/home/${EXEC_USER}`;
  const env = [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    `HOME=/home/${EXEC_USER}`,
    `USER=${EXEC_USER}`,
    `LOGNAME=${EXEC_USER}`,
    "SHELL=/bin/bash",
    "LANG=C.UTF-8",
  ];
  const inner = `cd ${JSON.stringify(cwd)} 2>/dev/null || cd /; exec "$@"`;
  const nsArgs = [
    "--target",
    String(init),
    "--mount",
    "--uts",
    "--ipc",
    "--net",
    "--pid",
    "--",
    "/usr/bin/setpriv",
    `--reuid=${EXEC_USER}`,
    `--regid=${EXEC_USER}`,
    "--init-groups",
    "/usr/bin/env",
    "-i",
    ...env,
    "/bin/sh",
    "-c",
    inner,
    "sh",
    ...p.rest,
  ];
  return await new Promise((resolve) => {
    const child = spawn("nsenter", nsArgs, { stdio: "inherit" });
    const forward = (sig: NodeJS.Signals) => child.kill(sig);
    process.on("SIGTERM", forward);
    process.on("SIGINT", forward);
    child.on("error", (e) => resolve(execFail(`exec failed: ${e.message}`)));
    child.on("exit", (code, signal) => resolve(code ?? (signal !== null ? 128 + (signalNumber(signal) ?? 0) : 255)));
  });
}

function signalNumber(sig: NodeJS.Signals): number | undefined {
  return os.constants.signals[sig];
}

function execFail(message: string): number {
  process.stderr.write(`${message}\n`);
  return ReturnCode.ExecFail;
}

async function startOne(rec: InstanceRecord, timeoutS: number): Promise<void> {
  if (rec.deleted) throw new CliError(`start failed: instance "${rec.name}" is deleted`, ReturnCode.CommandFail);
  if (nspawnPid(rec.name) !== undefined) return;
  const bridge = process.env.MULTIPASS_STANDIN_BRIDGE;
  if (bridge === undefined || bridge === "") throw new CliError("start failed: stand-in: MULTIPASS_STANDIN_BRIDGE is not set", ReturnCode.CommandFail);
  await shutdown(rec, 0); // leftovers of a crashed nspawn
  await attach(rec, bridge, boot(rec));
  await waitBooted(rec, "start", timeoutS);
}

function targets(verb: string, p: Parsed): InstanceRecord[] {
  const names = p.flags.has("--all") ? allNames() : p.positional;
  if (names.length === 0 && !p.flags.has("--all")) throw new CliError("Name argument or --all is required", ReturnCode.CommandLineError);
  return names.map((n) => mustExist(verb, n));
}

async function start(args: readonly string[]): Promise<void> {
  const p = parseArgs("start", args, { "--timeout": [] }, ["--all"]);
  const t = p.flags.get("--timeout");
  await Promise.all(targets("start", p).map((r) => startOne(r, t === undefined ? DEFAULT_TIMEOUT_S : Number(t))));
}

async function stop(args: readonly string[]): Promise<void> {
  const p = parseArgs("stop", args, {}, ["--all", "--force"]);
  await Promise.all(targets("stop", p).map((r) => (r.deleted ? Promise.resolve() : shutdown(r, p.flags.has("--force") ? 0 : STOP_GRACE_MS))));
}

/** Removes every trace of an instance: processes, mount, veth, cgroups, directory, address. */
async function purgeOne(rec: InstanceRecord): Promise<void> {
  await shutdown(rec, 5_000);
  fs.rmSync(instDir(rec.name), { recursive: true, force: true });
  fs.rmSync(path.join(stateDir(), "addresses", rec.ipv4), { recursive: true, force: true });
}

async function del(args: readonly string[]): Promise<void> {
  const p = parseArgs("delete", args, {}, ["--all", "--purge", "-p"]);
  const names = p.flags.has("--all") ? allNames() : p.positional;
  if (names.length === 0 && !p.flags.has("--all")) throw new CliError("Name argument or --all is required", ReturnCode.CommandLineError);
  const missing = names.filter((n) => readRecord(n) === undefined);
  if (missing.length > 0) throw new CliError(missing.map((n) => `delete failed: instance "${n}" does not exist`).join("\n"), ReturnCode.CommandFail);
  const purge = p.flags.has("--purge") || p.flags.has("-p");
  await Promise.all(
    names.map(async (n) => {
      const rec = readRecord(n) as InstanceRecord;
      if (purge) return purgeOne(rec);
      await shutdown(rec, STOP_GRACE_MS);
      writeRecord({ ...rec, deleted: true });
    }),
  );
}

async function purge(): Promise<void> {
  await Promise.all(
    allNames()
      .map((n) => readRecord(n) as InstanceRecord)
      .filter((r) => r.deleted)
      .map(purgeOne),
  );
}

function recover(args: readonly string[]): void {
  const p = parseArgs("recover", args, {}, ["--all"]);
  for (const r of targets("recover", p)) if (r.deleted) writeRecord({ ...r, deleted: false });
}

function version(args: readonly string[]): void {
  const p = parseArgs("version", args, { "--format": [] });
  if (wantsJson(p, "version")) process.stdout.write(`${JSON.stringify({ multipass: STANDIN_VERSION, multipassd: STANDIN_VERSION }, null, 4)}\n`);
  else process.stdout.write(`multipass   ${STANDIN_VERSION}\nmultipassd  ${STANDIN_VERSION}\n`);
}

const USAGE = "Usage: multipass [options] <command>\nAvailable commands (cohort-lab stand-in): delete exec info launch list purge recover start stop version";

/** Runs one CLI invocation. @returns the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  const [verb, ...args] = argv;
  try {
    switch (verb) {
      case "launch":
        await launch(args);
        return 0;
      case "info":
        info(args);
        return 0;
      case "list":
      case "ls":
        list(args);
        return 0;
      case "exec":
        return await exec(args);
      case "start":
        await start(args);
        return 0;
      case "stop":
        await stop(args);
        return 0;
      case "delete":
        await del(args);
        return 0;
      case "purge":
        await purge();
        return 0;
      case "recover":
        recover(args);
        return 0;
      case "version":
        version(args);
        return 0;
      default:
        process.stderr.write(`${USAGE}\n`);
        return ReturnCode.CommandLineError;
    }
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(`${err.message}\n`);
      return err.code;
    }
    process.stderr.write(`${verb ?? ""} failed: ${(err as Error).stack ?? String(err)}\n`);
    return ReturnCode.CommandFail;
  }
}

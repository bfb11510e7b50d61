/**
 * The `multipass` profile's plan (stacks/multipass.ts builds it): `cohort-lab:multipass` validated, roles placed
 * on machines, the members' requests checked against each machine, the runtime's systemd backend config derived,
 * all before any resource exists. Pure: no I/O except looking the CLI up on PATH.
 *
 * `cohort-lab:multipass` fields (all optional; objects and lists set with `--path`):
 * - `machines`: `[{ name, cpus, memory, disk }]`, the VMs (`memory`/`disk` in Multipass size syntax, `2G`, `512M`:
 *   binary multiples as Multipass reads them). @default three machines `vm1`..`vm3`, 1 CPU, `1G`, `5G` (Multipass's defaults)
 * - `placement`: `{ <role>: <machine> }`. @default roles in declaration order on the machines in turn (role 0 on
 *   machine 0, role 1 on machine 1, ...); once set, every role must be placed.
 * - `cli`: absolute path of the `multipass` CLI. @default `multipass` found on PATH
 * - `environment`: extra environment for the CLI (a stand-in's `MULTIPASS_STANDIN_*`). @default none
 * - `image`: the image `multipass launch` boots. @default the pin (common/pins.ts `multipass.image`)
 * - `prefix`: instance names are `<prefix>-<machine>`. @default `cohort-<stack>`
 * - `launchTimeout`: seconds `multipass launch --timeout` waits. @default Multipass's (300)
 * - `basePort`: the first member port on each VM (`basePort`, `basePort + 1`, ...). @default 8000
 * - `stateDir`: where the runtime's backend config file is written. @default `<project>/.multipass/<stack>`
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { z } from "zod";
import { cpuMillicores, memoryBytes, type RunSpec } from "../runtime/index.js";
import { integerIn, parseObjectKey, zodIssues } from "./cluster.js";
import { configKey, StackConfigError, type ConfigIssue, type RawConfig } from "./config.js";

/** Defaults of `cohort-lab:multipass` (the ONE place they are set). */
export const MULTIPASS_DEFAULTS = {
  machines: [
    { name: "vm1", cpus: 1, memory: "1G", disk: "5G" },
    { name: "vm2", cpus: 1, memory: "1G", disk: "5G" },
    { name: "vm3", cpus: 1, memory: "1G", disk: "5G" },
  ],
  basePort: 8000,
} as const;

/** One VM as the profile launches it. */
export interface MultipassMachinePlan {
  readonly name: string;
  readonly cpus: number;
  /** Multipass size syntax, e.g. `2G`. */
  readonly memory: string;
  readonly disk: string;
}

/** `cohort-lab:multipass`, validated, defaults applied (placement resolved in {@link planMultipass}). */
export interface MultipassConfig {
  readonly machines: readonly MultipassMachinePlan[];
  readonly placement?: Readonly<Record<string, string>>;
  /** Absolute path, or undefined to look `multipass` up on PATH. */
  readonly cli?: string;
  readonly environment: Readonly<Record<string, string>>;
  readonly image?: string;
  readonly prefix?: string;
  readonly launchTimeoutSeconds?: number;
  readonly basePort: number;
  readonly stateDir?: string;
}

/** Multipass size syntax: bytes, or a decimal with K/M/G (optionally `B`/`iB`); binary multiples (Multipass `in_bytes`). */
const SIZE = /^(\d+(?:\.\d+)?)([KMG])?(?:i?B)?$/i;

/** Bytes of a Multipass size (`2G` -> 2147483648), or undefined when it is not one. */
export function multipassSizeBytes(text: string): number | undefined {
  const m = SIZE.exec(text.trim());
  if (m === null) return undefined;
  const factor = { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[(m[2] ?? "").toUpperCase() as "" | "K" | "M" | "G"];
  return Math.floor(Number(m[1]) * factor);
}

const size = (min: string) =>
  z.unknown().refine((v) => typeof v === "string" && (multipassSizeBytes(v) ?? 0) >= multipassSizeBytes(min)!, {
    error: (issue) => `must be a Multipass size of at least ${min}, e.g. 2G or 512M (got ${JSON.stringify(issue.input) ?? "nothing"})`,
  });

const machineName = z.string().regex(/^[a-z](?:[a-z0-9-]*[a-z0-9])?$/, "must be a machine name: lower-case letters, digits and hyphens, a letter first");

const multipassSchema = z.strictObject({
  machines: z
    .array(z.strictObject({ name: machineName, cpus: integerIn(1, 256), memory: size("512M"), disk: size("1G") }))
    .min(1, "must list at least one machine")
    .optional(),
  placement: z.record(z.string(), z.string()).optional(),
  cli: z
    .string()
    .refine((p) => path.isAbsolute(p), "must be the absolute path of the multipass CLI")
    .optional(),
  environment: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"), z.string()).optional(),
  image: z
    .string()
    .min(1, "must be a Multipass image (a release such as 24.04)")
    .refine((i) => !["lts", "devel", "daily"].includes(i) && !i.startsWith("daily:"), "must be a fixed release such as 24.04, not a moving alias (lts, devel, daily)")
    .optional(),
  prefix: z
    .string()
    .regex(/^[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/, "must start with a letter and hold letters, digits and hyphens (it begins every instance name)")
    .optional(),
  launchTimeout: integerIn(1, 86_400).optional(),
  basePort: integerIn(1024, 65535).optional(),
  stateDir: z.string().min(1, "must be a directory path").optional(),
});

/** The fields of `cohort-lab:multipass`. */
export const MULTIPASS_FIELDS = Object.keys(multipassSchema.shape);

/**
 * Parses `cohort-lab:multipass`.
 *
 * @throws {StackConfigError} listing every problem with its key (`cohort-lab:multipass.<field>`)
 */
export function parseMultipassConfig(raw: RawConfig): MultipassConfig {
  const issues: ConfigIssue[] = [];
  const value = parseObjectKey(raw, "multipass", issues, " with --path, e.g. `pulumi config set --path multipass.placement.agent vm2`") ?? {};
  if (issues.length > 0) throw new StackConfigError(issues);
  const parsed = multipassSchema.safeParse(value);
  if (!parsed.success) throw new StackConfigError(zodIssues("multipass", parsed.error, MULTIPASS_FIELDS));
  const c = parsed.data;
  const machines = (c.machines as MultipassMachinePlan[] | undefined) ?? MULTIPASS_DEFAULTS.machines.map((m) => ({ ...m }));
  const seen = new Set<string>();
  machines.forEach((m, i) => {
    if (seen.has(m.name)) issues.push({ key: configKey(`multipass.machines[${i}].name`), reason: `machine "${m.name}" is listed twice` });
    seen.add(m.name);
  });
  if (issues.length > 0) throw new StackConfigError(issues);
  return {
    machines,
    ...(c.placement !== undefined ? { placement: c.placement } : {}),
    ...(c.cli !== undefined ? { cli: c.cli } : {}),
    environment: c.environment ?? {},
    ...(c.image !== undefined ? { image: c.image } : {}),
    ...(c.prefix !== undefined ? { prefix: c.prefix } : {}),
    ...(c.launchTimeout !== undefined ? { launchTimeoutSeconds: c.launchTimeout } : {}),
    basePort: c.basePort ?? MULTIPASS_DEFAULTS.basePort,
    ...(c.stateDir !== undefined ? { stateDir: c.stateDir } : {}),
  };
}

/**
 * Role -> machine: `placement` as given (every role placed, every machine known), or by default the roles in
 * declaration order on the machines in turn.
 *
 * @throws {StackConfigError} naming `cohort-lab:multipass.placement.<role>` for an unknown role, an unknown machine
 *   or (with `placement` set) a role left unplaced
 */
export function placeRoles(
  spec: Pick<RunSpec, "roles">,
  machines: readonly MultipassMachinePlan[],
  placement: Readonly<Record<string, string>> | undefined,
): Record<string, string> {
  if (placement === undefined) return Object.fromEntries(spec.roles.map((role, i) => [role.name, machines[i % machines.length]!.name]));
  const issues: ConfigIssue[] = [];
  const known = machines.map((m) => m.name).join(", ");
  const roles = spec.roles.map((r) => r.name);
  for (const [role, machine] of Object.entries(placement)) {
    if (!roles.includes(role)) issues.push({ key: configKey(`multipass.placement.${role}`), reason: `the cohort has no role "${role}" (roles: ${roles.join(", ")})` });
    else if (!machines.some((m) => m.name === machine))
      issues.push({ key: configKey(`multipass.placement.${role}`), reason: `machine "${machine}" is not in multipass.machines (known: ${known})` });
  }
  for (const role of roles) {
    if (!Object.hasOwn(placement, role)) {
      issues.push({
        key: configKey(`multipass.placement.${role}`),
        reason: `role "${role}" is not placed on a machine (known: ${known}); once multipass.placement is set, every role needs an entry`,
      });
    }
  }
  if (issues.length > 0) throw new StackConfigError(issues);
  return { ...placement };
}

/**
 * Checks that the members placed on each machine request no more CPU and memory (`roles[].resources.cpu` /
 * `.memory`, Kubernetes quantities; unset counts as 0) than the machine has (`cpus`, `memory`).
 *
 * @throws {StackConfigError} naming `cohort-lab:multipass.machines[<i>]` with the arithmetic and the roles on it
 */
export function checkMachineFit(spec: Pick<RunSpec, "roles">, machines: readonly MultipassMachinePlan[], placement: Readonly<Record<string, string>>): void {
  const issues: ConfigIssue[] = [];
  machines.forEach((machine, i) => {
    const roles = spec.roles.filter((r) => placement[r.name] === machine.name);
    let milli = 0;
    let bytes = 0;
    const parts: string[] = [];
    for (const role of roles) {
      const cpu = cpuMillicores(role.resources?.cpu ?? "0") ?? 0;
      const mem = memoryBytes(role.resources?.memory ?? "0") ?? 0;
      milli += cpu * role.replicas;
      bytes += mem * role.replicas;
      parts.push(`${role.name} ${role.replicas} x (${role.resources?.cpu ?? "0"} CPU, ${role.resources?.memory ?? "0"})`);
    }
    const memoryLimit = multipassSizeBytes(machine.memory)!;
    const on = `machine ${machine.name} holds ${parts.join(" + ")}`;
    if (milli > machine.cpus * 1000) {
      issues.push({
        key: configKey(`multipass.machines[${i}].cpus`),
        reason: `${on} = ${milli}m CPU requested, more than its ${machine.cpus} CPU (${machine.cpus * 1000}m); raise cpus or place roles elsewhere`,
      });
    }
    if (bytes > memoryLimit) {
      issues.push({
        key: configKey(`multipass.machines[${i}].memory`),
        reason: `${on} = ${mib(bytes)} requested, more than its memory ${machine.memory} (${mib(memoryLimit)}); raise memory or place roles elsewhere`,
      });
    }
  });
  if (issues.length > 0) throw new StackConfigError(issues);
}

/**
 * What the systemd backend cannot do, refused at preview instead of after the VMs launched:
 * - more members on one machine than ports from `basePort` to 65535 (members on a VM take `basePort`,
 *   `basePort + 1`, ...: runtime/backends/systemd/config.ts);
 * - `exec` readiness: the probes run on the host across the network, and the backend runs no command on the VM
 *   for a probe (tcp and http readiness work).
 *
 * @throws {StackConfigError} naming `cohort-lab:multipass.basePort` (with the machine and its member count) and
 *   `cohort-lab:cohort.roles[<i>].readiness.exec`
 */
export function checkBackendLimits(spec: Pick<RunSpec, "roles">, machines: readonly MultipassMachinePlan[], placement: Readonly<Record<string, string>>, basePort: number): void {
  const issues: ConfigIssue[] = [];
  for (const machine of machines) {
    const members = spec.roles.filter((r) => placement[r.name] === machine.name).reduce((n, r) => n + r.replicas, 0);
    if (members > 0 && basePort + members - 1 > 65535) {
      issues.push({
        key: configKey("multipass.basePort"),
        reason: `machine ${machine.name} holds ${members} members on ports ${basePort}..${basePort + members - 1}, past 65535; lower basePort to at most ${65536 - members}`,
      });
    }
  }
  spec.roles.forEach((role, i) => {
    if ("exec" in role.readiness) {
      issues.push({
        key: configKey(`cohort.roles[${i}].readiness.exec`),
        reason: "the multipass profile probes members from the host across the network and cannot run exec probes on the VM; use tcp or http readiness",
      });
    }
  });
  if (issues.length > 0) throw new StackConfigError(issues);
}

function mib(bytes: number): string {
  return `${Math.round((bytes / 2 ** 20) * 10) / 10}Mi`;
}

/**
 * The CLI: `cli` as given (it must exist), else `multipass` on `PATH`.
 *
 * @throws {StackConfigError} naming `cohort-lab:multipass.cli` when it is not found
 */
export function resolveMultipassCli(cli: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (cli !== undefined) {
    if (!isExecutable(cli)) throw new StackConfigError([{ key: configKey("multipass.cli"), reason: `${cli} is not an executable file` }]);
    return cli;
  }
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (dir === "" || !path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, "multipass");
    if (isExecutable(candidate)) return candidate;
  }
  throw new StackConfigError([
    {
      key: configKey("multipass.cli"),
      reason: "unset, and no multipass on PATH: install Multipass (https://canonical.com/multipass/install) or set multipass.cli to its absolute path",
    },
  ]);
}

function isExecutable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** The instance name of a machine: `<prefix>-<machine>`. */
export function instanceName(prefix: string, machine: string): string {
  return `${prefix}-${machine}`;
}

/** The default prefix: `cohort-<stack>`, with characters Multipass refuses in a name replaced by `-`. */
export function defaultPrefix(stack: string): string {
  return `cohort-${stack}`.replace(/[^A-Za-z0-9-]/g, "-").replace(/-+$/, "");
}

/**
 * The runtime's systemd backend config (runtime/backends/systemd/config.ts) from the fleet's instances and the
 * placement: `{ multipass, environment, instances, placement, basePort }`.
 */
export function systemdBackendConfig(input: {
  readonly cli: string;
  readonly environment: Readonly<Record<string, string>>;
  readonly instances: readonly { readonly machine: string; readonly instance: string; readonly ipv4: string }[];
  readonly placement: Readonly<Record<string, string>>;
  readonly basePort: number;
}): Record<string, unknown> {
  return {
    multipass: input.cli,
    ...(Object.keys(input.environment).length > 0 ? { environment: { ...input.environment } } : {}),
    instances: input.instances.map((i) => ({ machine: i.machine, instance: i.instance, ipv4: i.ipv4 })),
    placement: { ...input.placement },
    basePort: input.basePort,
  };
}

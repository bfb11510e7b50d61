/**
 * The systemd backend's config file (`cohort run --backend systemd --backend-config FILE`, a YAML/JSON
 * mapping; runtime/README.md "The systemd backend"):
 *
 * ```yaml
 * multipass: /snap/bin/multipass        # absolute path of the Multipass CLI (or a stand-in speaking it)
 * environment: { MULTIPASS_STANDIN_STATE: /tmp/x }   # optional: extra environment for the CLI
 * instances:                            # the VMs, one per machine
 *   - { machine: m1, instance: cohort-m1, ipv4: 10.0.0.2 }
 * placement: { api: m1, agent: m2 }     # role -> machine; every role of the RunSpec must be placed
 * become: [sudo, -n]                    # optional: prefix of every command on an instance (default sudo -n)
 * basePort: 8000                        # optional: first member port on each instance
 * ```
 *
 * Every refusal is a {@link SpecError} whose path starts with `systemd.` and names the field.
 */
import * as net from "node:net";
import * as path from "node:path";
import { z } from "zod";
import { SpecError } from "../../core/errors.js";
import type { CompiledRunSpec } from "../../core/spec.js";

/** Multipass instance names: letters, digits, hyphens; a letter first, alphanumeric last (field notes §1.1). */
export const INSTANCE_NAME = /^[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/;

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name");

/** The zod schema of the config file (strict: an unknown key is refused, naming it). */
export const systemdConfigSchema = z.strictObject({
  multipass: z.string().refine((p) => path.isAbsolute(p), "must be an absolute path of the multipass CLI"),
  environment: z.record(envName, z.string()).optional(),
  instances: z
    .array(
      z.strictObject({
        machine: z.string().min(1, "must be a non-empty machine name"),
        instance: z.string().max(63).regex(INSTANCE_NAME, "must be a Multipass instance name (letters, digits, hyphens; a letter first)"),
        ipv4: z.string().refine((a) => net.isIPv4(a), "must be an IPv4 address"),
      }),
    )
    .min(1, "must list at least one instance"),
  placement: z.record(z.string(), z.string()),
  become: z.array(z.string().min(1)).optional(),
  basePort: z.number().int().min(1).max(65535).optional(),
  /** Host-side limit on one short `multipass exec` (env file, systemd-run, probe). @default 60000 */
  execTimeoutMs: z.number().int().positive().optional(),
  /** Added to a stop's grace before the host gives up waiting for `systemctl stop`. @default 10000 */
  stopExtraMs: z.number().int().min(0).optional(),
  /** How long after a unit's result message its exit is reported (its last output lines arrive first). @default 250 */
  exitSettleMs: z.number().int().min(0).optional(),
});

/** The config file as written. */
export type SystemdConfigInput = z.input<typeof systemdConfigSchema>;

/** One instance the backend uses. */
export interface SystemdInstance {
  readonly machine: string;
  readonly instance: string;
  readonly ipv4: string;
}

/** The resolved config (defaults applied, placement checked against the RunSpec). */
export interface SystemdConfig {
  readonly multipass: string;
  readonly environment: Readonly<Record<string, string>>;
  /** Machine name -> instance. */
  readonly machines: ReadonlyMap<string, SystemdInstance>;
  /** Role -> instance (every role of the spec). */
  readonly placement: ReadonlyMap<string, SystemdInstance>;
  readonly become: readonly string[];
  readonly basePort: number;
  readonly execTimeoutMs: number;
  readonly stopExtraMs: number;
  readonly exitSettleMs: number;
}

/**
 * Validates the options against the schema and the RunSpec's roles.
 *
 * Refused (each naming the field): schema violations; two instances with the same `machine`, `instance`
 * or `ipv4`; `placement.<role>` naming a machine not in `instances`; `placement.<role>` for a role the
 * RunSpec does not have; a role of the RunSpec with no `placement` entry; member ports that would pass
 * 65535.
 *
 * @throws {SpecError} with paths `systemd.<field>`
 */
export function resolveSystemdConfig(options: Readonly<Record<string, unknown>>, spec: CompiledRunSpec): SystemdConfig {
  const parsed = systemdConfigSchema.safeParse(options);
  if (!parsed.success) {
    throw new SpecError(parsed.error.issues.map((issue) => ({ path: ["systemd", ...issue.path.map(String)].join("."), reason: issue.message })));
  }
  const c = parsed.data;
  const problems: { path: string; reason: string }[] = [];
  const machines = new Map<string, SystemdInstance>();
  const seen = { instance: new Map<string, number>(), ipv4: new Map<string, number>() };
  c.instances.forEach((entry, i) => {
    if (machines.has(entry.machine)) problems.push({ path: `systemd.instances.${i}.machine`, reason: `machine "${entry.machine}" is listed twice` });
    for (const key of ["instance", "ipv4"] as const) {
      const earlier = seen[key].get(entry[key]);
      if (earlier !== undefined) problems.push({ path: `systemd.instances.${i}.${key}`, reason: `"${entry[key]}" is also instances.${earlier}.${key}` });
      seen[key].set(entry[key], i);
    }
    machines.set(entry.machine, entry);
  });
  const known = [...machines.keys()].join(", ");
  const roles = new Set(spec.roles.map((r) => r.name));
  const placement = new Map<string, SystemdInstance>();
  for (const [role, machine] of Object.entries(c.placement)) {
    if (!roles.has(role)) {
      problems.push({ path: `systemd.placement.${role}`, reason: `the RunSpec has no role "${role}" (roles: ${[...roles].join(", ")})` });
      continue;
    }
    const instance = machines.get(machine);
    if (instance === undefined) problems.push({ path: `systemd.placement.${role}`, reason: `machine "${machine}" is not in instances (known: ${known})` });
    else placement.set(role, instance);
  }
  for (const role of spec.roles) {
    if (!Object.hasOwn(c.placement, role.name))
      problems.push({ path: `systemd.placement.${role.name}`, reason: `role "${role.name}" is not placed on any machine (known: ${known})` });
  }
  const basePort = c.basePort ?? 8000;
  const perInstance = new Map<string, number>();
  for (const role of spec.roles) {
    const at = placement.get(role.name);
    if (at === undefined || !role.port) continue;
    perInstance.set(at.instance, (perInstance.get(at.instance) ?? 0) + role.members.length);
  }
  for (const [instance, count] of perInstance) {
    if (basePort + count - 1 > 65535) problems.push({ path: "systemd.basePort", reason: `${count} members on ${instance} from port ${basePort} would pass 65535` });
  }
  if (problems.length > 0) throw new SpecError(problems);
  return {
    multipass: c.multipass,
    environment: c.environment ?? {},
    machines,
    placement,
    become: c.become ?? ["sudo", "-n"],
    basePort,
    execTimeoutMs: c.execTimeoutMs ?? 60_000,
    stopExtraMs: c.stopExtraMs ?? 10_000,
    exitSettleMs: c.exitSettleMs ?? 250,
  };
}

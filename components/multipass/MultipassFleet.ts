/**
 * `MultipassFleet` (token `cohortlab:multipass:MultipassFleet`): Multipass VMs, one `@pulumi/command` `local.Command`
 * per machine, running components/multipass/steps.cjs (`launch` / `delete`) with the Node binary of the program.
 *
 * - Name `<prefix>-<machine>`; `multipass launch <image> --cpus --memory --disk --cloud-init - --timeout`. The
 *   user-data goes to the Command's stdin and from there to `multipass launch` on its stdin: never in a command line
 *   (a file under /tmp or a dot-directory is also invisible to the snap: canonical/multipass #1783, #3693).
 * - Owner marker (Multipass has no tags): the component adds a `write_files` entry to the user-data that makes
 *   cloud-init write the owner id (`cohort-lab/<project>/<stack>` unless `ownerId` is given) to
 *   `/etc/cohort-lab/multipass-owner`. An existing instance of the name is adopted only with that marker; a foreign
 *   one is refused and left untouched.
 * - A launch that times out while the VM comes up (canonical/multipass #3485, #3536) is reconciled with `multipass
 *   info` once: adopted, never relaunched (#3200).
 * - Readiness: `multipass exec <vm> -- cloud-init status --wait`, then the marker. The launch Commands are {@link
 *   MultipassFleet.ready}.
 * - Delete: `multipass delete --purge`, done when the VM is already gone (deleted by hand, pulumi-command #104).
 * - Identity: `triggers` are the instance name, image, cpus, memory, disk and the SHA-256 of the user-data, so any of
 *   them changing replaces the VM (deleted first: the name is reused).
 * - Output: the IPv4 of each VM from `multipass info --format json` (the step's stdout, JSON).
 * - A VM deleted by hand stays deleted on the next `up` (a Command's create runs once; refresh cannot see it,
 *   pulumi-command #104): `pulumi up --replace <urn of <name>-<machine>>` launches it again (the delete step finds it
 *   gone, the launch step makes it); `destroy` needs nothing.
 *
 * @see https://multipass.run/docs/launch-command (Multipass 1.16 CLI)
 * @see https://www.pulumi.com/registry/packages/command/api-docs/local/command/
 */
import * as crypto from "node:crypto";
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import { parseDocument, stringify } from "yaml";
import { repoRoot } from "../../common/paths.js";
import { shellQuote } from "../../common/shell.js";

/** One VM of a fleet. `memory`/`disk` in Multipass size syntax (`2G`, `512M`, bytes). */
export interface MultipassMachine {
  readonly name: string;
  readonly cpus: number;
  readonly memory: string;
  readonly disk: string;
}

/** Arguments of {@link MultipassFleet}. Plain values except `userData`; all are checked before any resource exists. */
export interface MultipassFleetArgs {
  /** Instance name = `${prefix}-${machine.name}`. */
  readonly prefix: string;
  /** Image, e.g. `"24.04"` (`multipass.image` in common/pins.ts). */
  readonly image: string;
  readonly machines: readonly MultipassMachine[];
  /** cloud-init user-data (`#cloud-config` YAML, a mapping); passed on stdin, never on a command line. */
  readonly userData: pulumi.Input<string>;
  /** Absolute path of the multipass CLI. */
  readonly multipass: string;
  /** Extra environment for the CLI (the stand-in's `MULTIPASS_STANDIN_*`). */
  readonly environment?: Record<string, string>;
  /** `multipass launch --timeout` (s). @default 300 (Multipass's default) */
  readonly launchTimeoutSeconds?: number;
  /** How long `cloud-init status --wait` may take per VM (s). @default 600 */
  readonly readyTimeoutSeconds?: number;
  /** The owner marker's text. @default `cohort-lab/<project>/<stack>` */
  readonly ownerId?: string;
  /** Node binary that runs the steps. @default process.execPath */
  readonly nodePath?: string;
  /** Directory holding components/multipass/steps.cjs (the Commands' `dir`). @default the repository root */
  readonly projectDir?: string;
}

/** One VM of {@link MultipassFleet.instances}. */
export interface MultipassInstance {
  readonly machine: string;
  readonly instance: string;
  readonly ipv4: string;
}

/** The steps file, relative to the project directory (stored in state as part of each Command). */
export const MULTIPASS_STEPS_ENTRY = "components/multipass/steps.cjs";

/** Where cloud-init writes the owner marker in each VM (as components/multipass/steps.cjs reads it). */
export const OWNER_FILE = "/etc/cohort-lab/multipass-owner";

const NAME_RE = /^[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/;
const SIZE_RE = /^\d+(?:\.\d+)?[KMG]?(?:i?B)?$/i;

function refuse(propertyPath: string, reason: string): never {
  throw new pulumi.InputPropertyError({ propertyPath, reason: `MultipassFleet: ${propertyPath} ${reason}` });
}

/**
 * Checks the plain arguments (names Multipass accepts, positive integer CPUs, size syntax, unique machines, an
 * absolute CLI path). @throws pulumi.InputPropertyError naming the field and the reason.
 */
export function validateFleetArgs(args: MultipassFleetArgs): void {
  if (!NAME_RE.test(args.prefix))
    refuse("prefix", `must start with a letter, hold letters, digits and hyphens, and end with a letter or digit (got ${JSON.stringify(args.prefix)})`);
  if (args.image.trim() === "") refuse("image", "must not be empty");
  if (args.machines.length === 0) refuse("machines", "must name at least one machine");
  if (!path.isAbsolute(args.multipass)) refuse("multipass", `must be an absolute path (got ${JSON.stringify(args.multipass)})`);
  const seen = new Set<string>();
  args.machines.forEach((m, i) => {
    const at = `machines[${i}]`;
    if (!NAME_RE.test(`${args.prefix}-${m.name}`) || m.name === "")
      refuse(`${at}.name`, `gives the instance name ${JSON.stringify(`${args.prefix}-${m.name}`)}, which Multipass refuses (letters, digits, hyphens; ends alphanumeric)`);
    if (seen.has(m.name)) refuse(`${at}.name`, `repeats ${JSON.stringify(m.name)}`);
    seen.add(m.name);
    if (!Number.isInteger(m.cpus) || m.cpus < 1) refuse(`${at}.cpus`, `must be a positive integer (got ${m.cpus})`);
    if (!SIZE_RE.test(m.memory)) refuse(`${at}.memory`, `must be a size such as 2G or 512M (got ${JSON.stringify(m.memory)})`);
    if (!SIZE_RE.test(m.disk)) refuse(`${at}.disk`, `must be a size such as 10G (got ${JSON.stringify(m.disk)})`);
  });
  for (const [key, v] of [
    ["launchTimeoutSeconds", args.launchTimeoutSeconds],
    ["readyTimeoutSeconds", args.readyTimeoutSeconds],
  ] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < 1)) refuse(key, `must be a positive integer number of seconds (got ${v})`);
  }
}

/**
 * The user-data with the owner marker added: a `write_files` entry for {@link OWNER_FILE} appended to the document's
 * `write_files` (created when absent), re-emitted as `#cloud-config`.
 *
 * @throws Error naming `userData` when the text is not YAML or not a mapping, or `write_files` is not a list.
 */
export function withOwnerMarker(userData: string, ownerId: string): string {
  const doc = parseDocument(userData);
  if (doc.errors.length > 0) throw new Error(`MultipassFleet: userData is not YAML: ${doc.errors[0]?.message ?? ""}`);
  const body: unknown = doc.toJS();
  if (body !== null && body !== undefined && (typeof body !== "object" || Array.isArray(body))) throw new Error("MultipassFleet: userData must be a #cloud-config mapping");
  const root = (body ?? {}) as Record<string, unknown>;
  const files = root.write_files ?? [];
  if (!Array.isArray(files)) throw new Error("MultipassFleet: userData write_files must be a list");
  const marked = { ...root, write_files: [...(files as unknown[]), { path: OWNER_FILE, content: `${ownerId}\n`, permissions: "0644", owner: "root:root" }] };
  return `#cloud-config\n${stringify(marked)}`;
}

/**
 * Multipass VMs with cloud-init done and an owner marker.
 *
 * Children: `<name>-<machine>` (`command:local:Command`), one per machine.
 */
export class MultipassFleet extends pulumi.ComponentResource {
  /** One entry per machine, in the order of `machines`: machine name, instance name, IPv4 address. */
  readonly instances: pulumi.Output<readonly MultipassInstance[]>;
  /** Depend on these: every VM launched (or adopted), owner marker checked, `cloud-init status --wait` done. */
  readonly ready: readonly pulumi.Resource[];
  /** The launch Command of each machine, by machine name. */
  readonly vms: Readonly<Record<string, command.local.Command>>;

  constructor(name: string, args: MultipassFleetArgs, opts?: pulumi.ComponentResourceOptions) {
    validateFleetArgs(args);
    super("cohortlab:multipass:MultipassFleet", name, {}, opts);
    const nodePath = args.nodePath ?? process.execPath;
    const ownerId = args.ownerId ?? `cohort-lab/${pulumi.getProject()}/${pulumi.getStack()}`;
    const userData = pulumi.output(args.userData).apply((u) => withOwnerMarker(u, ownerId));
    const userDataSha = userData.apply((u) => crypto.createHash("sha256").update(u).digest("hex"));
    const step = (s: "launch" | "delete") => `${shellQuote(nodePath)} ${MULTIPASS_STEPS_ENTRY} ${s}`;
    const vms: Record<string, command.local.Command> = {};
    const outputs: pulumi.Output<MultipassInstance>[] = [];
    for (const m of args.machines) {
      const instance = `${args.prefix}-${m.name}`;
      const vm = new command.local.Command(
        `${name}-${m.name}`,
        {
          create: step("launch"),
          delete: step("delete"),
          dir: args.projectDir ?? repoRoot,
          // User-data often carries keys or tokens: a secret in state (pulumi-command #260, #401).
          stdin: pulumi.secret(userData),
          environment: {
            ...(args.environment ?? {}),
            COHORT_MULTIPASS: args.multipass,
            COHORT_MP_INSTANCE: instance,
            COHORT_MP_OWNER: ownerId,
            COHORT_MP_IMAGE: args.image,
            COHORT_MP_CPUS: String(m.cpus),
            COHORT_MP_MEMORY: m.memory,
            COHORT_MP_DISK: m.disk,
            COHORT_MP_LAUNCH_TIMEOUT: String(args.launchTimeoutSeconds ?? 300),
            COHORT_MP_READY_TIMEOUT: String(args.readyTimeoutSeconds ?? 600),
          },
          triggers: [instance, args.image, m.cpus, m.memory, m.disk, userDataSha],
          logging: "stderr",
          addPreviousOutputInEnv: false,
        },
        { parent: this, deleteBeforeReplace: true },
      );
      vms[m.name] = vm;
      outputs.push(
        vm.stdout.apply((out) => {
          const line = out.trim().split("\n").pop() ?? "";
          let parsed: { instance?: unknown; ipv4?: unknown };
          try {
            parsed = JSON.parse(line) as typeof parsed;
          } catch {
            throw new Error(`MultipassFleet ${name}: the launch step of ${instance} printed no JSON result (stdout ${JSON.stringify(out.slice(-200))})`);
          }
          if (parsed.instance !== instance || typeof parsed.ipv4 !== "string")
            throw new Error(`MultipassFleet ${name}: the launch step of ${instance} printed ${line}, not {"instance":"${instance}","ipv4":...}`);
          return { machine: m.name, instance, ipv4: parsed.ipv4 };
        }),
      );
    }
    this.vms = vms;
    this.ready = Object.values(vms);
    this.instances = pulumi.all(outputs);
    this.registerOutputs({ instances: this.instances });
  }
}

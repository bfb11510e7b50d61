/**
 * `MultipassFleet` (token `cohortlab:multipass:MultipassFleet`): Multipass VMs, one `@pulumi/command` `local.Command`
 * per machine, running components/multipass/steps.cjs (`launch` / `delete`) with the Node binary of the program.
 *
 * - Name `<prefix>-<machine>`; `multipass launch <image> --cpus --memory --disk --cloud-init - --timeout`. The
 *   user-data goes to the Command's stdin and from there to `multipass launch` on its stdin: never in a command line
 *   (a file under /tmp or a dot-directory is also invisible to the snap: canonical/multipass #1783, #3693).
 * - Owner marker (Multipass has no tags): the component adds a `write_files` entry to the user-data that makes
 *   cloud-init write the owner id (`cohort-lab/<project>/<stack>` unless `ownerId` is given) and the VM's launch id to
 *   `/etc/cohort-lab/multipass-owner` ({@link markerText}: line 1 the owner, line 2 `launch-id: <id>`; VMs made
 *   before launch ids have line 1 only, read as launch id `legacy`). An existing instance of the name is adopted only
 *   with that owner; a foreign one is refused and left untouched.
 * - Launch id (drift of a VM deleted by hand): at program evaluation (`up` and `preview` alike, read-only) the
 *   component asks the CLI what is there ({@link observeFleet}: `multipass list --format json` once, then `multipass
 *   exec <vm> -- cat <marker>` for each Running VM of the fleet's names, in parallel). A Running VM whose marker
 *   carries our owner keeps its launch id (no diff); a name with no VM gets a fresh random launch id, so its Command
 *   is replaced (the delete step finds it gone, the launch step launches it with the new id in the marker); a foreign
 *   VM also gets a fresh id, and the launch step refuses it untouched. A VM that exists but is not Running (Stopped,
 *   Suspended, Deleted) fails the program, naming the instance: its marker cannot be read without changing it. A CLI
 *   that cannot be run fails the program naming the CLI (no "no change" fallback: the program cannot know the launch
 *   id in state, and guessing a fresh one would replace every VM).
 * - A launch that times out while the VM comes up (canonical/multipass #3485, #3536) is reconciled with `multipass
 *   info` once: adopted, never relaunched (#3200).
 * - Readiness: `multipass exec <vm> -- cloud-init status --wait`, then the marker. The launch Commands are {@link
 *   MultipassFleet.ready}.
 * - Delete: `multipass delete --purge`, done when the VM is already gone (deleted by hand, pulumi-command #104).
 * - Identity: `triggers` are the instance name, image, cpus, memory, disk, the SHA-256 of the user-data (marker
 *   included) and `launch-id:<id>` (left out for `legacy`, so stacks made before launch ids see no diff), so any of
 *   them changing replaces the VM (deleted first: the name is reused).
 * - Output: the IPv4 of each VM from `multipass info --format json` (the step's stdout, JSON).
 * - A VM deleted by hand is launched again by a plain `pulumi up` (the launch id above; refresh alone cannot see it,
 *   pulumi-command #104); the other VMs are untouched; `destroy` needs nothing.
 *
 * @see https://multipass.run/docs/launch-command (Multipass 1.16 CLI)
 * @see https://www.pulumi.com/registry/packages/command/api-docs/local/command/
 */
import { execFile } from "node:child_process";
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

/** The launch id of a VM whose owner marker has no `launch-id:` line (made before launch ids existed). */
export const LEGACY_LAUNCH_ID = "legacy";

/**
 * The owner marker's text: `<ownerId>\n`, plus `launch-id: <launchId>\n` unless `launchId` is
 * {@link LEGACY_LAUNCH_ID} or absent (the format of VMs made before launch ids, byte for byte).
 */
export function markerText(ownerId: string, launchId?: string): string {
  return launchId === undefined || launchId === LEGACY_LAUNCH_ID ? `${ownerId}\n` : `${ownerId}\nlaunch-id: ${launchId}\n`;
}

/** A marker's owner (line 1) and launch id (`launch-id:` line; {@link LEGACY_LAUNCH_ID} when absent). */
export function parseMarker(text: string): { owner: string; launchId: string } {
  const lines = text.split("\n").map((l) => l.trim());
  const id = lines
    .find((l) => l.startsWith("launch-id:"))
    ?.slice("launch-id:".length)
    .trim();
  return { owner: lines[0] ?? "", launchId: id === undefined || id === "" ? LEGACY_LAUNCH_ID : id };
}

/** What {@link observeFleet} found under one instance name. */
export type ObservedVm =
  | { readonly kind: "absent" }
  /** Running, and the marker's owner is ours. */
  | { readonly kind: "ours"; readonly launchId: string }
  /** Running, with no marker or another owner's. */
  | { readonly kind: "foreign"; readonly owner?: string };

function runCli(cli: string, args: readonly string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cli, args, { env: { ...process.env, ...env }, timeout: 60_000, maxBuffer: 16 * 1024 * 1024, encoding: "utf8" }, (err, stdout, stderr) => {
      if (err === null) return resolve({ code: 0, stdout, stderr });
      const code = (err as { code?: unknown }).code;
      if (typeof code === "number") return resolve({ code, stdout, stderr });
      reject(new Error(`MultipassFleet: could not run the multipass CLI ${cli} (${args.slice(0, 2).join(" ")}): ${err.message}`));
    });
  });
}

/**
 * Asks the CLI what exists under each of `instances` (read-only: `multipass list --format json` once, then
 * `multipass exec <vm> -- cat` {@link OWNER_FILE} for the Running ones, in parallel; each call within 60 s).
 *
 * @returns instance name → {@link ObservedVm}
 * @throws Error naming the CLI when it cannot be run, exits non-zero or prints no `{"list": [...]}`; naming the
 *   instance when it exists but is not Running (its marker cannot be read without starting it).
 */
export async function observeFleet(cli: string, instances: readonly string[], ownerId: string, env: Record<string, string> = {}): Promise<Record<string, ObservedVm>> {
  const listed = await runCli(cli, ["list", "--format", "json"], env);
  if (listed.code !== 0) throw new Error(`MultipassFleet: ${cli} list --format json exited ${listed.code}: ${listed.stderr.trim().slice(-500)}`);
  let states: Map<string, string>;
  try {
    const parsed = JSON.parse(listed.stdout) as { list?: { name?: unknown; state?: unknown }[] };
    if (!Array.isArray(parsed.list)) throw new Error("no list");
    states = new Map(parsed.list.map((e) => [String(e.name), String(e.state)]));
  } catch {
    throw new Error(`MultipassFleet: ${cli} list --format json printed no {"list": [...]}: ${listed.stdout.slice(0, 300)}`);
  }
  const entries = await Promise.all(
    instances.map(async (name): Promise<[string, ObservedVm]> => {
      const state = states.get(name);
      if (state === undefined) return [name, { kind: "absent" }];
      if (state !== "Running")
        throw new Error(
          `MultipassFleet: instance ${name} is ${state}, so its owner marker cannot be read without changing it: start it (multipass start ${name}) or remove it (multipass delete --purge ${name}), then run again`,
        );
      const r = await runCli(cli, ["exec", name, "--", "cat", OWNER_FILE], env);
      if (r.code !== 0) {
        // As steps.cjs: cat's exit 1 / "No such file" is no marker.
        if (/No such file/.test(r.stderr) || r.code === 1) return [name, { kind: "foreign" }];
        throw new Error(`MultipassFleet: ${cli} exec ${name} -- cat ${OWNER_FILE} exited ${r.code}: ${r.stderr.trim().slice(-500)}`);
      }
      const m = parseMarker(r.stdout);
      return [name, m.owner === ownerId ? { kind: "ours", launchId: m.launchId } : { kind: "foreign", owner: m.owner }];
    }),
  );
  return Object.fromEntries(entries);
}

/**
 * The user-data with the owner marker added: a `write_files` entry for {@link OWNER_FILE} ({@link markerText})
 * appended to the document's `write_files` (created when absent), re-emitted as `#cloud-config`.
 *
 * @throws Error naming `userData` when the text is not YAML or not a mapping, or `write_files` is not a list.
 */
export function withOwnerMarker(userData: string, ownerId: string, launchId?: string): string {
  const doc = parseDocument(userData);
  if (doc.errors.length > 0) throw new Error(`MultipassFleet: userData is not YAML: ${doc.errors[0]?.message ?? ""}`);
  const body: unknown = doc.toJS();
  if (body !== null && body !== undefined && (typeof body !== "object" || Array.isArray(body))) throw new Error("MultipassFleet: userData must be a #cloud-config mapping");
  const root = (body ?? {}) as Record<string, unknown>;
  const files = root.write_files ?? [];
  if (!Array.isArray(files)) throw new Error("MultipassFleet: userData write_files must be a list");
  const marked = { ...root, write_files: [...(files as unknown[]), { path: OWNER_FILE, content: markerText(ownerId, launchId), permissions: "0644", owner: "root:root" }] };
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
  /**
   * Each VM's launch id by machine name (see the module docs; `legacy` for a VM made before launch ids). A consumer
   * that must run again when a VM is launched again (the cohort) puts these in its triggers.
   */
  readonly launchIds: pulumi.Output<Readonly<Record<string, string>>>;
  /** The launch Command of each machine, by machine name. */
  readonly vms: Readonly<Record<string, command.local.Command>>;

  constructor(name: string, args: MultipassFleetArgs, opts?: pulumi.ComponentResourceOptions) {
    validateFleetArgs(args);
    super("cohortlab:multipass:MultipassFleet", name, {}, opts);
    const nodePath = args.nodePath ?? process.execPath;
    const ownerId = args.ownerId ?? `cohort-lab/${pulumi.getProject()}/${pulumi.getStack()}`;
    const instanceNames = args.machines.map((m) => `${args.prefix}-${m.name}`);
    const observed = pulumi.output(observeFleet(args.multipass, instanceNames, ownerId, args.environment ?? {}));
    const step = (s: "launch" | "delete") => `${shellQuote(nodePath)} ${MULTIPASS_STEPS_ENTRY} ${s}`;
    const vms: Record<string, command.local.Command> = {};
    const outputs: pulumi.Output<MultipassInstance>[] = [];
    const launchIds: Record<string, pulumi.Output<string>> = {};
    for (const m of args.machines) {
      const instance = `${args.prefix}-${m.name}`;
      const launchId = observed.apply((o) => {
        const seen = o[instance];
        return seen?.kind === "ours" ? seen.launchId : crypto.randomBytes(8).toString("hex");
      });
      launchIds[m.name] = launchId;
      const userData = pulumi.all([args.userData, launchId]).apply(([u, id]) => withOwnerMarker(u, ownerId, id));
      const userDataSha = userData.apply((u) => crypto.createHash("sha256").update(u).digest("hex"));
      const triggers = pulumi
        .all([userDataSha, launchId])
        .apply(([sha, id]) => [instance, args.image, m.cpus, m.memory, m.disk, sha, ...(id === LEGACY_LAUNCH_ID ? [] : [`launch-id:${id}`])]);
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
          triggers,
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
    this.launchIds = pulumi.all(launchIds);
    this.registerOutputs({ instances: this.instances });
  }
}

/**
 * The stack configuration of cohort-lab: every key under the `cohort-lab` namespace that all profiles
 * share, validated with zod before any resource exists, so a bad value fails `pulumi preview` with the
 * `pulumi config` key and the reason, e.g. `cohort-lab:cohort.size: must be an integer >= 1 (got 0)`.
 * Every reason reads `must be ... (got <value>)`, and every fix it names is a command in the form this
 * project runs, `npm run pulumi -- config ... --stack <stack>` ({@link configCommand}).
 *
 * Keys (docs/host.md has the full table):
 * - `cohort-lab:profile` (string): which profile the stack builds. @default the stack name
 * - `cohort-lab:artifactRoot` (path): where run ledgers go; relative paths are taken from the project
 *   directory. @default `<project>/artifacts`
 * - `cohort-lab:keepLedgers` (boolean): `false` makes `pulumi destroy` (and the replacement of a run)
 *   delete the run's ledger directory too. @default true
 * - `cohort-lab:cohort` (object, set field by field with `npm run pulumi -- config set --path cohort.<field> <value>`):
 *   the cohort to run. Fields: `name`, `app`, `size`, `roles`, `startupTimeout`, `memberTimeout`,
 *   `admissionTimeout`, `hold`, `concurrency`, `stopGracePeriod` (see {@link CohortConfig}).
 *
 * Profile-specific keys are declared by the profile (stacks/profiles.ts) and read by its builder;
 * any other key in the namespace is refused as unknown.
 */
import * as fs from "node:fs";
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { shellWord } from "../common/shell.js";
import { canonicalJson, MAX_COHORT_SIZE, RUNSPEC_API_VERSION, RUNSPEC_KIND, sha256Hex, SpecError, validateRunSpec, type RunSpec, type RunSpecInput } from "../runtime/index.js";
import { MEMBER_APPS, MEMBER_PRESETS, isMemberApp, type MemberApp, type PresetContext } from "./members.js";
import { CohortLabError } from "../components/errors.js";

/** The Pulumi project name, which is also the config namespace (`cohort-lab:<key>`). */
export const CONFIG_NAMESPACE = "cohort-lab";

/** Directory of the Pulumi project (holds Pulumi.yaml, node_modules/ and dist/). */
export const PROJECT_DIR = path.resolve(__dirname, "..");

/** Where `npm run build` writes the runtime bundle, relative to the project directory (the ONE place it is set). */
export const RUNTIME_BUNDLE = path.join("dist", "cohort.cjs");

/** Top-level keys every profile understands. */
export const COMMON_CONFIG_KEYS = ["profile", "artifactRoot", "keepLedgers", "cohort"] as const;

/** Fields of the `cohort` object. */
export const COHORT_FIELDS = ["name", "app", "size", "roles", "startupTimeout", "memberTimeout", "admissionTimeout", "hold", "concurrency", "stopGracePeriod"] as const;

/** Defaults of the common keys (the ONE place they are set, with {@link DEFAULT_COHORT}). */
export const CONFIG_DEFAULTS = {
  /** Relative to the project directory. */
  artifactRoot: "artifacts",
  keepLedgers: true,
} as const;

/** Defaults of the `cohort` object's own fields (run timing defaults come from the app preset). */
export const DEFAULT_COHORT = {
  name: "society",
  app: "openclaw",
  size: 4,
} as const satisfies { name: string; app: MemberApp; size: number };

/** Raw config of the namespace: key without the `cohort-lab:` prefix -> the string Pulumi stores. */
export type RawConfig = Readonly<Record<string, string>>;

/** One refused config value. */
export interface ConfigIssue {
  /** Fully qualified `pulumi config` key with its path, e.g. `cohort-lab:cohort.roles[1].needs[0]`. */
  readonly key: string;
  /** Why, with the value received and the fix where there is one. */
  readonly reason: string;
}

/**
 * The stack config was refused. A components/errors.ts `CohortLabError`, so the engine prints the message without a
 * stack trace; `errors` has the `pulumi.InputPropertiesError` shape (`propertyPath`, `reason`) for tools.
 * The message is one `<key>: <reason>` line per problem.
 */
export class StackConfigError extends CohortLabError {
  readonly issues: readonly ConfigIssue[];
  readonly errors: readonly { readonly propertyPath: string; readonly reason: string }[];

  constructor(issues: readonly ConfigIssue[]) {
    super(issues.map((issue) => `${issue.key}: ${issue.reason}`).join("\n"), issues.length === 1 ? { propertyPath: issues[0]!.key } : {});
    this.name = "StackConfigError";
    this.issues = issues;
    this.errors = issues.map((issue) => ({ propertyPath: issue.key, reason: issue.reason }));
  }
}

/** `cohort-lab:<key>`. */
export function configKey(key: string): string {
  return `${CONFIG_NAMESPACE}:${key}`;
}

/**
 * A `pulumi config` command in the form this project runs it (through the launcher, with the stack named),
 * for fix hints: `configCommand("host", "rm cohort.size")` is `npm run pulumi -- config rm cohort.size --stack host`.
 *
 * @param stack - the stack name
 * @param args - everything after `config`, already shell-quoted where needed
 */
export function configCommand(stack: string, args: string): string {
  return `npm run pulumi -- config ${args} --stack ${stack}`;
}

/** An example custom roster as JSON text, for the hints that say how to set `cohort.roles`. */
const EXAMPLE_ROLES_JSON = JSON.stringify([{ name: "web", app: { command: ["node", "server.js"] } }]);

/**
 * The `cohort` object as the user sets it. Run timing fields are RunSpec fields (durations are strings
 * with a unit: `ms`, `s`, `m`, `h`) and are validated by the runtime's own RunSpec schema.
 */
export interface CohortConfig {
  /** DNS-1123 label, at most 39 characters; the run id is `<name>-<UTC time>-<6 hex>`. @default "society" */
  readonly name: string;
  /** Member app preset (stacks/members.ts). Not allowed with `roles`. @default "openclaw" when `roles` is unset */
  readonly app?: MemberApp;
  /** Number of members of the preset; an integer >= 1. Not allowed with `roles`. @default 4 */
  readonly size?: number;
  /** A custom roster in the RunSpec `roles` shape instead of a preset (any stock program). */
  readonly roles?: readonly unknown[];
  readonly startupTimeout?: string;
  readonly memberTimeout?: string;
  readonly admissionTimeout?: string;
  readonly hold?: string;
  readonly concurrency?: number;
  readonly stopGracePeriod?: string;
}

/** The common stack config, validated, defaults applied. */
export interface StackConfig {
  /** The profile to build. */
  readonly profile: string;
  /** Absolute path of the artifact root. */
  readonly artifactRoot: string;
  readonly keepLedgers: boolean;
  readonly cohort: CohortConfig;
}

/**
 * A zod field for an integer from `min` to `max`; a string of digits counts as its number (what a flat
 * `pulumi config set` stores). The reason reads `must be an integer from <min> to <max> (got …)` (`"range"`,
 * for profile knobs) or names the bound that was crossed, `must be an integer >= <min> (got …)` (`"bound"`,
 * for the cohort's own fields).
 */
export const integerIn = (min: number, max: number, wording: "range" | "bound" = "range") =>
  z.unknown().transform((value, ctx): number => {
    const n = typeof value === "string" && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
    const inRange = typeof n === "number" && Number.isInteger(n) && n >= min && n <= max;
    if (inRange) return n;
    if (wording === "range") ctx.addIssue({ code: "custom", message: `must be an integer from ${min} to ${max} (got ${describe(value)})` });
    else if (typeof n !== "number" || !Number.isInteger(n)) ctx.addIssue({ code: "custom", message: `must be an integer >= ${min} (got ${describe(value)})` });
    else ctx.addIssue({ code: "custom", message: n < min ? `must be an integer >= ${min} (got ${n})` : `must be an integer <= ${max} (got ${n})` });
    return z.NEVER;
  });

const cohortSchema = z.strictObject({
  name: z.unknown().optional(),
  app: z
    .unknown()
    .refine(isMemberApp, { error: (issue) => `must be one of ${MEMBER_APPS.join(", ")} (got ${describe(issue.input)})` })
    .optional(),
  size: integerIn(1, MAX_COHORT_SIZE, "bound").optional(),
  roles: z.unknown().optional(),
  startupTimeout: z.unknown().optional(),
  memberTimeout: z.unknown().optional(),
  admissionTimeout: z.unknown().optional(),
  hold: z.unknown().optional(),
  concurrency: z.unknown().optional(),
  stopGracePeriod: z.unknown().optional(),
});

/** A config value as a refusal's `(got …)` names it: strings quoted, lists and objects by kind. */
export function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "an object";
  return String(value);
}

/** Formats a zod/RunSpec path as Pulumi's `--path` syntax: `roles[1].needs[0]`. */
function formatPath(parts: readonly PropertyKey[]): string {
  let out = "";
  for (const part of parts) {
    if (typeof part === "number") out += `[${part}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(String(part))) out += out === "" ? String(part) : `.${String(part)}`;
    else out += `[${JSON.stringify(String(part))}]`;
  }
  return out;
}

/**
 * The issues of a failed zod parse of the object key `prefix`, each keyed by its `pulumi config` path
 * (`cohort-lab:<prefix>.<field>`); an unknown field lists the `known` ones.
 */
export function zodIssues(prefix: string, error: z.ZodError, known: readonly string[]): ConfigIssue[] {
  return error.issues.flatMap((issue): ConfigIssue[] => {
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((k) => ({ key: configKey(formatPath([prefix, ...issue.path, k])), reason: `unknown field (known fields: ${known.join(", ")})` }));
    }
    return [{ key: configKey(formatPath([prefix, ...issue.path])), reason: issue.message }];
  });
}

/**
 * Reads the namespace's raw config from the Pulumi runtime (values as stored: objects as JSON text).
 * Keys come back without the `cohort-lab:` prefix.
 */
export function readRawConfig(): RawConfig {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(pulumi.runtime.allConfig())) {
    if (key.startsWith(`${CONFIG_NAMESPACE}:`)) out[key.slice(CONFIG_NAMESPACE.length + 1)] = value;
  }
  return out;
}

/**
 * Parses a raw config value that must be an object (set with `--path`); a value that is not one becomes an issue
 * `must be an object whose fields are set one by one<how> (got …)`.
 *
 * @param how - how to set a field, from its leading blank or comma, e.g. " with --path, e.g. \`pulumi config set --path local.<field> <value>\`"
 * @returns the object, or `undefined` when the key is unset or not an object
 */
export function parseObjectKey(raw: RawConfig, key: string, issues: ConfigIssue[], how: string): Record<string, unknown> | undefined {
  const text = raw[key];
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = text;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    issues.push({ key: configKey(key), reason: `must be an object whose fields are set one by one${how} (got ${describe(value)})` });
    return undefined;
  }
  return value as Record<string, unknown>;
}

function parseBoolean(raw: RawConfig, key: string, issues: ConfigIssue[]): boolean | undefined {
  const text = raw[key];
  if (text === undefined) return undefined;
  if (text === "true") return true;
  if (text === "false") return false;
  issues.push({ key: configKey(key), reason: `must be true or false (got ${JSON.stringify(text)})` });
  return undefined;
}

/**
 * The value of a flat key as `pulumi config set --path` would have stored it: `true`/`false` as booleans,
 * integers as numbers, anything else as the string.
 */
function pathTyped(text: string): unknown {
  if (text === "true") return true;
  if (text === "false") return false;
  return /^-?\d+$/.test(text) && Number.isSafeInteger(Number(text)) ? Number(text) : text;
}

/**
 * Refuses keys that are not known to the common config or to the profile. A key such as `cohort.size`
 * is what `pulumi config set cohort.size 16` (without `--path`) stores: it gets the commands that fix it,
 * and, for a `cohort` field, its value is checked as that field would be, so that the fix does not run
 * into a second refusal (each value problem is its own issue, right after the flat key's).
 */
function unknownKeyIssues(raw: RawConfig, known: readonly string[], stack: string): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  for (const key of Object.keys(raw).sort()) {
    if (known.includes(key)) continue;
    const head = /^([^.[]+)[.[]/.exec(key)?.[1];
    if (head !== undefined && known.includes(head)) {
      const text = raw[key] ?? "";
      const field = key.slice(head.length).replace(/^\./, "");
      const valueIssues =
        head === "cohort" && (COHORT_FIELDS as readonly string[]).includes(field)
          ? checkCohort({ [field]: pathTyped(text) }, stack).issues.filter(
              (issue) => issue.key === configKey(key) || issue.key.startsWith(`${configKey(key)}[`) || issue.key.startsWith(`${configKey(key)}.`),
            )
          : [];
      const value = valueIssues.length > 0 ? "<value>" : abbreviate(text);
      issues.push({
        key: configKey(key),
        reason:
          `set without --path, so Pulumi stored a flat key named "${key}" instead of the field ${field} of ${head}; ` +
          `run \`${configCommand(stack, `rm ${shellWord(key)}`)}\` and then \`${configCommand(stack, `set --path ${shellWord(key)} ${value}`)}\``,
      });
      issues.push(...valueIssues);
    } else {
      issues.push({ key: configKey(key), reason: `unknown key (known keys: ${known.join(", ")})` });
    }
  }
  return issues;
}

function abbreviate(value: string): string {
  return value.length > 30 ? "<value>" : shellWord(value);
}

/**
 * Reads `cohort.roles` as given: a list, or JSON text of a list (what
 * `npm run pulumi -- config set --path cohort.roles '<JSON list>'` stores, since Pulumi keeps such a value
 * as a string).
 *
 * @returns the list, or an issue for `cohort-lab:cohort.roles` that names the commands that work
 */
function parseRoles(value: unknown, stack: string): { readonly roles: readonly unknown[] } | { readonly issue: ConfigIssue } {
  if (Array.isArray(value)) return { roles: value };
  let got = describe(value);
  if (typeof value === "string") {
    try {
      const parsed: unknown = JSON.parse(value);
      if (Array.isArray(parsed)) return { roles: parsed };
      got = `${describe(value)}, which is JSON but not a list`;
    } catch (error) {
      got = `${describe(value)}, which is not valid JSON: ${(error as Error).message}`;
    }
  }
  const example = JSON.parse(EXAMPLE_ROLES_JSON) as unknown[];
  return {
    issue: {
      key: configKey("cohort.roles"),
      reason:
        `must be a list of roles in the RunSpec shape (got ${got}); set it as JSON text, e.g. ` +
        `\`${configCommand(stack, `set --path cohort.roles ${shellWord(EXAMPLE_ROLES_JSON)}`)}\`, or set the whole cohort object at once ` +
        `(this replaces its other fields), e.g. \`${configCommand(stack, `set cohort ${shellWord(JSON.stringify({ roles: example }))}`)}\``,
    },
  };
}

/** A stand-in role for checking the RunSpec fields of a preset cohort (the preset's own role is checked by {@link resolveRunSpec}). */
const PLACEHOLDER_ROLE = { name: "placeholder", app: { command: ["true"] } } as const;

/**
 * Checks a `cohort` object as the user set it: its own fields (zod), `roles` (a list or JSON text of one),
 * the app/size-vs-roles rule, and every RunSpec field (name, timing, roles) with the runtime's own schema,
 * so that all problems are found in one pass.
 *
 * @returns the issues (keys `cohort-lab:cohort.<path>`) and, when there are none, the cohort with defaults
 */
function checkCohort(cohortRaw: Record<string, unknown>, stack: string): { readonly issues: ConfigIssue[]; readonly cohort?: CohortConfig } {
  const issues: ConfigIssue[] = [];
  const parsed = cohortSchema.safeParse(cohortRaw);
  if (!parsed.success) issues.push(...zodIssues("cohort", parsed.error, COHORT_FIELDS));
  let roles: readonly unknown[] | undefined;
  if (cohortRaw.roles !== undefined) {
    const r = parseRoles(cohortRaw.roles, stack);
    if ("issue" in r) issues.push(r.issue);
    else roles = r.roles;
    for (const field of ["app", "size"] as const) {
      if (cohortRaw[field] !== undefined) {
        issues.push({
          key: configKey(`cohort.${field}`),
          reason: `cannot be combined with cohort.roles (a custom roster's size is the sum of its replicas); remove one: \`${configCommand(stack, `rm --path cohort.${field}`)}\` or \`${configCommand(stack, "rm --path cohort.roles")}\``,
        });
      }
    }
  }
  // The RunSpec fields, checked now rather than only once everything else is valid.
  const trial: Record<string, unknown> = { apiVersion: RUNSPEC_API_VERSION, kind: RUNSPEC_KIND, name: cohortRaw.name ?? DEFAULT_COHORT.name };
  for (const field of ["startupTimeout", "memberTimeout", "admissionTimeout", "hold", "concurrency", "stopGracePeriod"] as const) {
    if (cohortRaw[field] !== undefined) trial[field] = cohortRaw[field];
  }
  trial.roles = roles ?? [PLACEHOLDER_ROLE];
  try {
    validateRunSpec(trial as RunSpecInput);
  } catch (error) {
    if (!(error instanceof SpecError)) throw error;
    for (const issue of error.issues) {
      if (roles === undefined && issue.path.startsWith("roles")) continue;
      // A role's missing field: say what a role looks like, so the user is not led one field at a time.
      const reason =
        /^roles\[\d+\]\.(name|app|app\.command)$/.test(issue.path) && issue.reason === "required"
          ? `required; a role needs at least a name and app.command, e.g. ${EXAMPLE_ROLES_JSON} (every RunSpec field: runtime/README.md "RunSpec")`
          : issue.reason;
      issues.push({ key: configKey(issue.path === "" ? "cohort" : `cohort.${issue.path}`), reason });
    }
  }
  if (issues.length > 0 || !parsed.success) return { issues };
  const c = parsed.data;
  return {
    issues,
    cohort: {
      ...(c as Omit<CohortConfig, "name" | "roles">),
      name: (c.name as string | undefined) ?? DEFAULT_COHORT.name,
      ...(roles !== undefined ? { roles } : { app: (c.app as MemberApp | undefined) ?? DEFAULT_COHORT.app, size: c.size ?? DEFAULT_COHORT.size }),
    },
  };
}

/** The issues without repeats (same key and reason), in their first order. */
function uniqueIssues(issues: readonly ConfigIssue[]): ConfigIssue[] {
  const seen = new Set<string>();
  return issues.filter((issue) => {
    const id = `${issue.key}\n${issue.reason}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/**
 * Why `absPath` cannot be the artifact root, or `undefined` if it can (it is a directory this process may
 * write to, or it does not exist yet and its nearest existing ancestor is such a directory, so the run can
 * create it). Permission bits are not enough (root passes `access(2)` on `/proc` and on read-only mounts
 * that still refuse `mkdir(2)`), so the check creates one empty directory `.cohort-lab-probe-XXXXXX` in that
 * directory and removes it at once; nothing else is created.
 *
 * @param absPath - absolute path of the artifact root
 * @returns a reason in the `must be ... (got ...)` style, e.g. `must be a directory (got /x/f, which is a file)`
 */
export function artifactRootProblem(absPath: string): string | undefined {
  for (let dir = absPath; ; dir = path.dirname(dir)) {
    let stat: fs.Stats;
    try {
      stat = fs.statSync(dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if ((code === "ENOENT" || code === "ENOTDIR") && path.dirname(dir) !== dir) continue;
      return `must be a directory this user can write to (got ${absPath}: ${code ?? (error as Error).message} on ${dir})`;
    }
    const where = dir === absPath ? "" : `, under ${dir}`;
    if (!stat.isDirectory()) return `must be a directory (got ${absPath}${where}, which is ${stat.isFile() ? "a file" : "not a directory"})`;
    try {
      fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "EACCES";
      return `must be a directory this user can write to (got ${absPath}${where}, which is not writable: ${code})`;
    }
    try {
      fs.rmdirSync(fs.mkdtempSync(path.join(dir, ".cohort-lab-probe-")));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      return `must be a directory this user can write to (got ${absPath}${where}, where a directory cannot be created: ${code})`;
    }
    return undefined;
  }
}

/** Where the config comes from and what the profile adds. */
export interface ParseContext {
  /** The stack name (the default profile). */
  readonly stack: string;
  /** Project directory; relative `artifactRoot` values are taken from here. @default {@link PROJECT_DIR} */
  readonly projectDir?: string;
  /** Top-level keys the chosen profile reads besides the common ones. @default [] */
  readonly profileKeys?: readonly string[];
  /**
   * Checks the resolved artifact root on disk (e.g. {@link artifactRootProblem}); a returned reason becomes
   * an issue for `cohort-lab:artifactRoot`. @default no check (parsing stays pure)
   */
  readonly checkArtifactRoot?: (absPath: string) => string | undefined;
}

/**
 * Validates the common stack config and applies defaults. Pure (no Pulumi runtime, no file system) unless
 * `ctx.checkArtifactRoot` is given.
 *
 * @param raw - the namespace's config (see {@link readRawConfig})
 * @throws {StackConfigError} listing every problem, each naming its `cohort-lab:` key
 */
export function parseStackConfig(raw: RawConfig, ctx: ParseContext): StackConfig {
  const projectDir = ctx.projectDir ?? PROJECT_DIR;
  const issues: ConfigIssue[] = unknownKeyIssues(raw, [...COMMON_CONFIG_KEYS, ...(ctx.profileKeys ?? [])], ctx.stack);

  const profile = raw.profile ?? ctx.stack;
  const artifactText = raw.artifactRoot ?? CONFIG_DEFAULTS.artifactRoot;
  if (artifactText.trim() === "") issues.push({ key: configKey("artifactRoot"), reason: "must be a directory path (got an empty string)" });
  const artifactRoot = path.resolve(projectDir, artifactText);
  if (artifactText.trim() !== "" && ctx.checkArtifactRoot !== undefined) {
    const problem = ctx.checkArtifactRoot(artifactRoot);
    if (problem !== undefined) issues.push({ key: configKey("artifactRoot"), reason: problem });
  }
  const keepLedgers = parseBoolean(raw, "keepLedgers", issues) ?? CONFIG_DEFAULTS.keepLedgers;

  const checked = checkCohort(parseObjectKey(raw, "cohort", issues, `, e.g. \`${configCommand(ctx.stack, "set --path cohort.size 4")}\``) ?? {}, ctx.stack);
  issues.push(...checked.issues);
  if (issues.length > 0 || checked.cohort === undefined) throw new StackConfigError(uniqueIssues(issues));
  const cohort = checked.cohort;
  return { profile, artifactRoot, keepLedgers, cohort };
}

/** The RunSpec a stack runs, with its digest. */
export interface ResolvedRunSpec {
  /** Validated, every runtime default applied: exactly what the runtime records in the ledger manifest. */
  readonly spec: RunSpec;
  /** Lower-case hex SHA-256 of the canonical JSON of `spec` (equals the ledger manifest's `specSha256`). */
  readonly specSha256: string;
  /** Total members (sum of replicas). */
  readonly size: number;
}

/**
 * Builds the RunSpec from the `cohort` config, the app preset (or custom `roles`) and the preset's
 * run defaults, and validates it with the runtime's own schema (runtime/core/spec.ts). RunSpec field
 * paths map onto config keys: `roles[1].needs[0]` -> `cohort-lab:cohort.roles[1].needs[0]`.
 *
 * @throws {StackConfigError} naming the config key of every problem
 * @throws {MemberProgramError} when the preset's program is not installed at its pinned version
 */
export function resolveRunSpec(cohort: CohortConfig, presetCtx: PresetContext): ResolvedRunSpec {
  const preset = cohort.roles === undefined ? MEMBER_PRESETS[cohort.app ?? DEFAULT_COHORT.app] : undefined;
  const timing = (field: "startupTimeout" | "memberTimeout" | "hold" | "concurrency" | "stopGracePeriod") =>
    cohort[field] !== undefined ? { [field]: cohort[field] } : preset !== undefined ? { [field]: preset.defaults[field] } : {};
  const input = {
    apiVersion: RUNSPEC_API_VERSION,
    kind: RUNSPEC_KIND,
    name: cohort.name,
    ...timing("startupTimeout"),
    ...timing("memberTimeout"),
    ...(cohort.admissionTimeout !== undefined ? { admissionTimeout: cohort.admissionTimeout } : {}),
    ...timing("hold"),
    ...timing("concurrency"),
    ...timing("stopGracePeriod"),
    roles: preset !== undefined ? [preset.role(cohort.size ?? DEFAULT_COHORT.size, presetCtx)] : cohort.roles,
  } as RunSpecInput;
  let spec: RunSpec;
  try {
    spec = validateRunSpec(input);
  } catch (error) {
    if (!(error instanceof SpecError)) throw error;
    throw new StackConfigError(
      error.issues.map((issue) => {
        if (preset !== undefined && issue.path.startsWith("roles")) {
          // Only the preset wrote `roles`; the config knob behind it is `app` (or `size` for replicas).
          const field = issue.path.endsWith(".replicas") ? "size" : "app";
          return { key: configKey(`cohort.${field}`), reason: `the ${cohort.app} preset produced an invalid RunSpec at ${issue.path}: ${issue.reason}` };
        }
        return { key: configKey(issue.path === "" ? "cohort" : `cohort.${issue.path}`), reason: issue.reason };
      }),
    );
  }
  const size = spec.roles.reduce((sum, role) => sum + role.replicas, 0);
  return { spec, specSha256: sha256Hex(canonicalJson(spec, "spec")), size };
}

/**
 * The stack configuration of cohort-lab: every key under the `cohort-lab` namespace that all profiles
 * share, validated with zod before any resource exists, so a bad value fails `pulumi preview` with the
 * `pulumi config` key and the reason, e.g. `cohort-lab:cohort.size: must be an integer >= 1 (got 0)`.
 *
 * Keys (docs/host.md has the full table):
 * - `cohort-lab:profile` (string): which profile the stack builds. @default the stack name
 * - `cohort-lab:artifactRoot` (path): where run ledgers go; relative paths are taken from the project
 *   directory. @default `<project>/artifacts`
 * - `cohort-lab:keepLedgers` (boolean): `false` makes `pulumi destroy` (and the replacement of a run)
 *   delete the run's ledger directory too. @default true
 * - `cohort-lab:cohort` (object, set field by field with `pulumi config set --path cohort.<field> <value>`):
 *   the cohort to run. Fields: `name`, `app`, `size`, `roles`, `startupTimeout`, `memberTimeout`,
 *   `admissionTimeout`, `hold`, `concurrency`, `stopGracePeriod` (see {@link CohortConfig}).
 *
 * Profile-specific keys are declared by the profile (stacks/profiles.ts) and read by its builder;
 * any other key in the namespace is refused as unknown.
 */
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { SpecError } from "../runtime/core/errors.js";
import { canonicalJson, sha256Hex } from "../runtime/core/ledger.js";
import { MAX_COHORT_SIZE, RUNSPEC_API_VERSION, RUNSPEC_KIND, validateRunSpec, type RunSpec, type RunSpecInput } from "../runtime/core/spec.js";
import { MEMBER_APPS, MEMBER_PRESETS, isMemberApp, type MemberApp, type PresetContext } from "./members.js";

/** The Pulumi project name, which is also the config namespace (`cohort-lab:<key>`). */
export const CONFIG_NAMESPACE = "cohort-lab";

/** Directory of the Pulumi project (holds Pulumi.yaml, node_modules/ and dist/). */
export const PROJECT_DIR = path.resolve(__dirname, "..");

/** Top-level keys every profile understands. */
export const COMMON_CONFIG_KEYS = ["profile", "artifactRoot", "keepLedgers", "cohort"] as const;

/** Fields of the `cohort` object. */
export const COHORT_FIELDS = [
  "name",
  "app",
  "size",
  "roles",
  "startupTimeout",
  "memberTimeout",
  "admissionTimeout",
  "hold",
  "concurrency",
  "stopGracePeriod",
] as const;

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
 * The stack config was refused. A `pulumi.RunError`, so the engine prints the message without a stack
 * trace; `errors` has the `pulumi.InputPropertiesError` shape (`propertyPath`, `reason`) for tools.
 * The message is one `<key>: <reason>` line per problem.
 */
export class StackConfigError extends pulumi.RunError {
  readonly issues: readonly ConfigIssue[];
  readonly errors: readonly { readonly propertyPath: string; readonly reason: string }[];

  constructor(issues: readonly ConfigIssue[]) {
    super(issues.map((issue) => `${issue.key}: ${issue.reason}`).join("\n"));
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

const integer = (min: number, max: number) =>
  z.unknown().transform((value, ctx): number => {
    const n = typeof value === "string" && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
    if (typeof n !== "number" || !Number.isInteger(n)) {
      ctx.addIssue({ code: "custom", message: `must be an integer >= ${min} (got ${describe(value)})` });
      return z.NEVER;
    }
    if (n < min) ctx.addIssue({ code: "custom", message: `must be an integer >= ${min} (got ${n})` });
    else if (n > max) ctx.addIssue({ code: "custom", message: `must be an integer <= ${max} (got ${n})` });
    return n;
  });

const cohortSchema = z.strictObject({
  name: z.unknown().optional(),
  app: z
    .unknown()
    .refine(isMemberApp, { error: (issue) => `must be one of ${MEMBER_APPS.join(", ")} (got ${describe(issue.input)})` })
    .optional(),
  size: integer(1, MAX_COHORT_SIZE).optional(),
  roles: z.array(z.unknown(), { error: (issue) => `must be a list of roles in the RunSpec shape (got ${describe(issue.input)})` }).optional(),
  startupTimeout: z.unknown().optional(),
  memberTimeout: z.unknown().optional(),
  admissionTimeout: z.unknown().optional(),
  hold: z.unknown().optional(),
  concurrency: z.unknown().optional(),
  stopGracePeriod: z.unknown().optional(),
});

function describe(value: unknown): string {
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
 * Parses a raw config value that must be an object (set with `--path`).
 *
 * @returns the object, or `undefined` when the key is unset
 */
function parseObject(raw: RawConfig, key: string, issues: ConfigIssue[]): Record<string, unknown> | undefined {
  const text = raw[key];
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = text;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    issues.push({
      key: configKey(key),
      reason: `must be an object whose fields are set one by one, e.g. \`pulumi config set --path ${key}.size 4\` (got ${describe(value)})`,
    });
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
 * Refuses keys that are not known to the common config or to the profile. A key such as `cohort.size`
 * is what `pulumi config set cohort.size 16` (without `--path`) stores: it gets a hint to use `--path`.
 */
function unknownKeyIssues(raw: RawConfig, known: readonly string[]): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  for (const key of Object.keys(raw).sort()) {
    if (known.includes(key)) continue;
    const head = /^([^.[]+)[.[]/.exec(key)?.[1];
    if (head !== undefined && known.includes(head)) {
      issues.push({
        key: configKey(key),
        reason:
          `set without --path, so Pulumi stored a flat key named "${key}" instead of the field ${key.slice(head.length).replace(/^\./, "")} of ${head}; ` +
          `run \`pulumi config rm ${key}\` and then \`pulumi config set --path ${key} ${abbreviate(raw[key] ?? "")}\``,
      });
    } else {
      issues.push({ key: configKey(key), reason: `unknown key (known keys: ${known.join(", ")})` });
    }
  }
  return issues;
}

function abbreviate(value: string): string {
  const v = value.length > 30 ? "<value>" : value;
  return /^[A-Za-z0-9_.:/@-]+$/.test(v) ? v : `'${v.replaceAll("'", "'\\''")}'`;
}

/** Where the config comes from and what the profile adds. */
export interface ParseContext {
  /** The stack name (the default profile). */
  readonly stack: string;
  /** Project directory; relative `artifactRoot` values are taken from here. @default {@link PROJECT_DIR} */
  readonly projectDir?: string;
  /** Top-level keys the chosen profile reads besides the common ones. @default [] */
  readonly profileKeys?: readonly string[];
}

/**
 * Validates the common stack config and applies defaults. Pure: no Pulumi runtime, no file system.
 *
 * @param raw - the namespace's config (see {@link readRawConfig})
 * @throws {StackConfigError} listing every problem, each naming its `cohort-lab:` key
 */
export function parseStackConfig(raw: RawConfig, ctx: ParseContext): StackConfig {
  const projectDir = ctx.projectDir ?? PROJECT_DIR;
  const issues: ConfigIssue[] = unknownKeyIssues(raw, [...COMMON_CONFIG_KEYS, ...(ctx.profileKeys ?? [])]);

  const profile = raw.profile ?? ctx.stack;
  const artifactText = raw.artifactRoot ?? CONFIG_DEFAULTS.artifactRoot;
  if (artifactText.trim() === "") issues.push({ key: configKey("artifactRoot"), reason: "must be a directory path (got an empty string)" });
  const artifactRoot = path.resolve(projectDir, artifactText);
  const keepLedgers = parseBoolean(raw, "keepLedgers", issues) ?? CONFIG_DEFAULTS.keepLedgers;

  let cohort: CohortConfig = { name: DEFAULT_COHORT.name };
  const cohortRaw = parseObject(raw, "cohort", issues) ?? {};
  const parsed = cohortSchema.safeParse(cohortRaw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      if (issue.code === "unrecognized_keys") {
        for (const field of issue.keys) {
          issues.push({
            key: configKey(`cohort.${formatPath([...issue.path, field])}`),
            reason: `unknown field (known fields: ${COHORT_FIELDS.join(", ")})`,
          });
        }
      } else {
        issues.push({ key: configKey(formatPath(["cohort", ...issue.path])), reason: issue.message });
      }
    }
  } else {
    const c = parsed.data;
    if (c.roles !== undefined) {
      for (const field of ["app", "size"] as const) {
        if (c[field] !== undefined) {
          issues.push({
            key: configKey(`cohort.${field}`),
            reason: `cannot be combined with cohort.roles (a custom roster's size is the sum of its replicas); remove cohort.${field} or cohort.roles`,
          });
        }
      }
    }
    cohort = {
      ...(c as Omit<CohortConfig, "name">),
      name: (c.name as string | undefined) ?? DEFAULT_COHORT.name,
      ...(c.roles === undefined ? { app: (c.app as MemberApp | undefined) ?? DEFAULT_COHORT.app, size: c.size ?? DEFAULT_COHORT.size } : {}),
    };
  }
  if (issues.length > 0) throw new StackConfigError(issues);
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

/**
 * The RunSpec: the cohort a run executes (docs/architecture.md "RunSpec"), in three stages:
 *
 * 1. {@link RunSpecInput}: what a user writes (YAML or JSON); durations are strings such as `"90s"`,
 *    most fields optional.
 * 2. {@link RunSpec}: validated, every default applied by {@link withDefaults} (the only place defaults live).
 * 3. {@link CompiledRunSpec}: numbers with unit suffixes (`...Ms`), members expanded, roles in
 *    topological levels. This is what the scheduler runs.
 *
 * Every refusal is a {@link SpecError} naming the field path (`roles[2].needs[0]`) and the reason, raised
 * before any side effect (no run directory, no ledger, no process).
 *
 * Extensions to the base shape (documented in runtime/README.md "RunSpec"):
 * - `stopGracePeriod` (default `"10s"`): SIGTERM -> SIGKILL grace when members are stopped.
 * - `roles[].app.files`: relative path -> content, written into the member's directory before start.
 * - `roles[].app.secretEnv`: env names for which the runtime generates a fresh 32-byte hex token per
 *   member, passed only in the member's environment and redacted from the ledger and its output log.
 * - `roles[].app.port` (default `true`): `false` means the member gets no `COHORT_PORT`.
 * - `roles[].readiness.timeout`: overrides `memberTimeout` for the role's members.
 * - `roles[].liveness` (default on for tcp/http/exec readiness: `{ period: "5s", failureThreshold: 3 }`):
 *   once a member is ready, the core re-runs its readiness probe every `period` until teardown begins;
 *   `failureThreshold` failures in a row fail the run. `false` turns it off.
 * - `roles[].restart` (default `{ attempts: 0, backoff: "1s" }`): a member that exits, or is not ready by
 *   its member deadline, BEFORE it is ready is started again up to `attempts` times.
 * - `$(VAR)` expansion (Kubernetes semantics) in `app.command`, `app.env` values and `readiness.exec.command`.
 */
import { parse as parseYaml, YAMLParseError } from "yaml";
import { z } from "zod";
import { durationProblem, parseDurationMs } from "./duration.js";
import { SpecError, type SpecIssue } from "./errors.js";
import { referencedVars } from "./expand.js";
import { logPatternProblem } from "./log-pattern.js";
import { isNonNegativeQuantity } from "./quantity.js";
import { checkRoleGraph, roleDependants, roleLevels } from "./graph.js";
import { cutUnits, findLoneSurrogate } from "./text.js";

/** Largest `roles[].liveness.failureThreshold`. */
export const MAX_LIVENESS_FAILURE_THRESHOLD = 1_000;
/** Largest `roles[].restart.attempts` (a guard against a typo; Kubernetes backs off without end instead). */
export const MAX_RESTART_ATTEMPTS = 100;
/**
 * Longest pause before a restart, in ms, unless `restart.backoff` itself is longer: the doubling stops
 * there (5 minutes, Kubernetes' CrashLoopBackOff cap:
 * https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-restarts).
 */
export const MAX_RESTART_BACKOFF_MS = 300_000;

/** `apiVersion` every RunSpec carries. */
export const RUNSPEC_API_VERSION = "cohort-lab/v1";
/** `kind` every RunSpec carries. */
export const RUNSPEC_KIND = "Cohort";
/**
 * Largest cohort the runtime accepts (sum of replicas). A guard against a typo such as
 * `replicas: 1000000` expanding into a million member plans.
 */
export const MAX_COHORT_SIZE = 10_000;
/**
 * Longest cohort `name`: the run id `<name>-<yyyymmddThhmmssZ>-<6 hex>` adds 24 characters and must
 * stay within 63 characters, so that it is a valid Kubernetes label value.
 */
export const MAX_NAME_LENGTH = 39;
/** Names the runtime sets itself; `app.env` and `app.secretEnv` may not use them. */
export const RESERVED_ENV_PREFIX = "COHORT_";
/** File names in a member's directory that belong to the runtime; `app.files` may not use them. */
export const RESERVED_MEMBER_FILES: readonly string[] = ["output.log"];

/** Longest segment of an `app.files` path, in bytes of UTF-8: Linux NAME_MAX (ENAMETOOLONG beyond it). */
export const MAX_FILE_NAME_BYTES = 255;
/**
 * Longest `app.files` path, in bytes of UTF-8. The file is written at `<runDir>/members/<member>/<path>`
 * and Linux refuses paths of PATH_MAX (4096) bytes or more; a quarter of that for the relative path leaves
 * the rest for the artifact root, run id and member id.
 */
export const MAX_FILE_PATH_BYTES = 1_024;

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const IMAGE_BY_DIGEST = /^[^\s@]+@sha256:[0-9a-f]{64}$/;

/** A DNS-1123 label of at most `max` characters; the reason does not repeat the field, which the path names. */
const dnsLabel = (max = 63) =>
  z
    .string()
    .max(max, `must be at most ${max} characters (a DNS-1123 label${max < 63 ? ` leaving room for the run id suffix` : ""})`)
    .regex(DNS1123_LABEL, {
      error: (issue) => `must be a DNS-1123 label: lower-case letters, digits and "-", starting and ending with a letter or digit (got ${JSON.stringify(issue.input)})`,
    });

const duration = z.string({ error: (issue) => durationProblem(issue.input) }).superRefine((value, ctx) => {
  const problem = durationProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});

const positiveDuration = duration.superRefine((value, ctx) => {
  if (durationProblem(value) === undefined && parseDurationMs(value) === 0) {
    ctx.addIssue({ code: "custom", message: `must be greater than zero (got "${value}")` });
  }
});

const port = z.number().int().min(1).max(65535);
/**
 * Why `name` cannot be an environment variable name of a member (`app.env` key, `app.secretEnv` entry), or
 * `undefined` if it can: letters, digits and `_`, not starting with a digit (POSIX shell names; an empty name,
 * `=` and NUL could not travel in an execve(2) `NAME=value` entry at all).
 *
 * @param name - the name as written in the RunSpec
 * @returns a one-line reason starting with `an environment variable name must`, or `undefined`
 */
export function envNameProblem(name: string): string | undefined {
  if (name === "") return "an environment variable name must not be empty";
  if (name.includes("\0")) return "an environment variable name must not contain a NUL byte (execve(2) would cut the entry there)";
  if (name.includes("=")) return 'an environment variable name must not contain "=" (the environment entry is NAME=value, so the name would end at the "=")';
  if (!ENV_NAME.test(name)) return "an environment variable name must hold only letters, digits and _, not starting with a digit";
  return undefined;
}

const envName = z.string().superRefine((name, ctx) => {
  const problem = envNameProblem(name);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});
/** A string that can travel in an argv or environment entry: execve(2) strings end at the first NUL byte. */
const cString = z.string().refine((value) => !value.includes("\0"), "must not contain a NUL byte (execve(2) would cut the string there)");

const argv = z.array(cString).min(1, "must have at least one element (the program)");

const readinessSchema = z.strictObject({
  /** HTTP GET; ready on a 2xx or 3xx status. */
  http: z.strictObject({ path: z.string().startsWith("/", 'must start with "/"').optional(), port: port.optional() }).optional(),
  /** TCP connect; ready when a connection is accepted. */
  tcp: z.strictObject({ port: port.optional() }).optional(),
  /** Run a command (with the member's env, in its directory); ready on exit 0. */
  exec: z.strictObject({ command: argv }).optional(),
  /**
   * A line of the member's output (stdout or stderr) matching a regular expression in RE2 syntax, matched in
   * linear time (runtime/core/log-pattern.ts); backreferences and lookaround are refused.
   */
  log: z.strictObject({ pattern: z.string().min(1, "must not be empty") }).optional(),
  /** Overrides `memberTimeout` for this role. */
  timeout: positiveDuration.optional(),
});

/** `period` and `failureThreshold` (Kubernetes livenessProbe `periodSeconds`, `failureThreshold`). */
const livenessObjectSchema = z.strictObject({
  /** Pause between two liveness attempts of one member. */
  period: positiveDuration.optional(),
  /** Failed attempts in a row that fail the run. */
  failureThreshold: z.number().int().min(1).max(MAX_LIVENESS_FAILURE_THRESHOLD).optional(),
});

const livenessSchema = z.union([z.literal(false), livenessObjectSchema], {
  error: (issue) => `must be false (no liveness probe) or a mapping such as { period: 5s, failureThreshold: 3 }; omit it for the default (got ${describeValue(issue.input)})`,
});

const restartSchema = z.strictObject({
  /** Restarts after the first start (0: none). */
  attempts: z.number().int().min(0).max(MAX_RESTART_ATTEMPTS),
  /** Pause before the first restart; doubled for each further one. */
  backoff: duration.optional(),
});

const appSchema = z.strictObject({
  command: argv,
  env: z.record(envName, cString).optional(),
  image: z.string().optional(),
  files: z.record(z.string(), z.string()).optional(),
  secretEnv: z.array(envName).optional(),
  port: z.boolean().optional(),
});

const roleSchema = z.strictObject({
  name: dnsLabel(),
  replicas: z
    .number()
    .int()
    .min(1, { error: (issue) => `must be an integer >= 1, a cohort of size 0 is refused (got ${String(issue.input)})` })
    .max(MAX_COHORT_SIZE, { error: (issue) => `must be an integer <= ${MAX_COHORT_SIZE}, the largest cohort (got ${String(issue.input)})` })
    .optional(),
  needs: z.array(z.string()).optional(),
  app: appSchema,
  readiness: readinessSchema.optional(),
  liveness: livenessSchema.optional(),
  restart: restartSchema.optional(),
  resources: z.record(z.string(), z.string().refine(isNonNegativeQuantity, "must be a Kubernetes quantity such as 100m, 1, 128Mi, 1Gi")).optional(),
});

/** The zod schema of a RunSpec document (shape only; cross-field rules are in {@link validateRunSpec}). */
export const runSpecSchema = z.strictObject({
  apiVersion: z.literal(RUNSPEC_API_VERSION, `must be "${RUNSPEC_API_VERSION}"`),
  kind: z.literal(RUNSPEC_KIND, `must be "${RUNSPEC_KIND}"`),
  name: dnsLabel(MAX_NAME_LENGTH),
  startupTimeout: positiveDuration.optional(),
  memberTimeout: positiveDuration.optional(),
  admissionTimeout: positiveDuration.optional(),
  hold: duration.optional(),
  concurrency: z.number().int().min(1).optional(),
  stopGracePeriod: duration.optional(),
  roles: z.array(roleSchema).min(1, "must list at least one role (a cohort of size 0 is refused)"),
});

/** A RunSpec as written by a user (YAML/JSON). */
export type RunSpecInput = z.input<typeof runSpecSchema>;
type ParsedRunSpec = z.output<typeof runSpecSchema>;

/** Readiness of a role, after defaults: exactly one probe. */
export type Readiness =
  | { readonly http: { readonly path: string; readonly port?: number }; readonly timeout?: string }
  | { readonly tcp: { readonly port?: number }; readonly timeout?: string }
  | { readonly exec: { readonly command: readonly string[] }; readonly timeout?: string }
  | { readonly log: { readonly pattern: string }; readonly timeout?: string };

/** Liveness of a role, after defaults: off, or the probe's period and failure threshold. */
export type Liveness = false | { readonly period: string; readonly failureThreshold: number };

/** Restarts of a role, after defaults. */
export interface Restart {
  /** Restarts after the first start; 0: none. */
  readonly attempts: number;
  /** Pause before the first restart, a duration string; doubled for each further restart. */
  readonly backoff: string;
}

/** One role after defaults. */
export interface RoleSpec {
  readonly name: string;
  /** @default 1 */
  readonly replicas: number;
  /** @default [] */
  readonly needs: readonly string[];
  readonly app: {
    readonly command: readonly string[];
    /** @default {} */
    readonly env: Readonly<Record<string, string>>;
    /** `name@sha256:<64 hex>` for Kubernetes backends. @default "" */
    readonly image: string;
    /** @default {} */
    readonly files: Readonly<Record<string, string>>;
    /** @default [] */
    readonly secretEnv: readonly string[];
    /** @default true */
    readonly port: boolean;
  };
  /** @default { tcp: {} } (a TCP connect to the member's COHORT_PORT) */
  readonly readiness: Readiness;
  /**
   * Re-probing after ready. @default `{ period: "5s", failureThreshold: 3 }` for tcp/http/exec readiness,
   * `false` for `log` readiness (nothing to re-probe)
   */
  readonly liveness: Liveness;
  /** @default { attempts: 0, backoff: "1s" } (no restarts) */
  readonly restart: Restart;
  /** @default {} */
  readonly resources: Readonly<Record<string, string>>;
}

/** A validated RunSpec with every default applied. Durations stay strings (as written). */
export interface RunSpec {
  readonly apiVersion: typeof RUNSPEC_API_VERSION;
  readonly kind: typeof RUNSPEC_KIND;
  readonly name: string;
  /** Whole roster ready, counted from admission. @default "5m" */
  readonly startupTimeout: string;
  /** One member, start to ready. @default "60s" */
  readonly memberTimeout: string;
  /** Waiting for quota (cluster backends). @default "1h" */
  readonly admissionTimeout: string;
  /** How long the ready roster is held before teardown. @default "0s" */
  readonly hold: string;
  /** Members starting (started, not yet ready) at once. @default 64 */
  readonly concurrency: number;
  /** SIGTERM -> SIGKILL grace when stopping a member. @default "10s" */
  readonly stopGracePeriod: string;
  readonly roles: readonly RoleSpec[];
}

/** The defaults {@link withDefaults} applies; exported so docs and tests quote the same values. */
export const RUNSPEC_DEFAULTS = {
  startupTimeout: "5m",
  memberTimeout: "60s",
  admissionTimeout: "1h",
  hold: "0s",
  concurrency: 64,
  stopGracePeriod: "10s",
  replicas: 1,
  readiness: { tcp: {} },
  liveness: { period: "5s", failureThreshold: 3 },
  restart: { attempts: 0, backoff: "1s" },
} as const;

/**
 * Applies every default of a RunSpec. The ONE place defaults are set.
 *
 * @param parsed - output of {@link runSpecSchema}
 */
export function withDefaults(parsed: ParsedRunSpec): RunSpec {
  return {
    apiVersion: parsed.apiVersion,
    kind: parsed.kind,
    name: parsed.name,
    startupTimeout: parsed.startupTimeout ?? RUNSPEC_DEFAULTS.startupTimeout,
    memberTimeout: parsed.memberTimeout ?? RUNSPEC_DEFAULTS.memberTimeout,
    admissionTimeout: parsed.admissionTimeout ?? RUNSPEC_DEFAULTS.admissionTimeout,
    hold: parsed.hold ?? RUNSPEC_DEFAULTS.hold,
    concurrency: parsed.concurrency ?? RUNSPEC_DEFAULTS.concurrency,
    stopGracePeriod: parsed.stopGracePeriod ?? RUNSPEC_DEFAULTS.stopGracePeriod,
    roles: parsed.roles.map((role) => ({
      name: role.name,
      replicas: role.replicas ?? RUNSPEC_DEFAULTS.replicas,
      needs: role.needs ?? [],
      app: {
        command: role.app.command,
        env: role.app.env ?? {},
        image: role.app.image ?? "",
        files: role.app.files ?? {},
        secretEnv: role.app.secretEnv ?? [],
        port: role.app.port ?? true,
      },
      readiness: readinessWithDefaults(role.readiness),
      liveness: livenessWithDefaults(role.liveness, role.readiness),
      restart: { attempts: role.restart?.attempts ?? RUNSPEC_DEFAULTS.restart.attempts, backoff: role.restart?.backoff ?? RUNSPEC_DEFAULTS.restart.backoff },
      resources: role.resources ?? {},
    })),
  };
}

function readinessWithDefaults(readiness: ParsedRunSpec["roles"][number]["readiness"]): Readiness {
  const timeout = readiness?.timeout !== undefined ? { timeout: readiness.timeout } : {};
  if (readiness?.http !== undefined) {
    return { http: { path: readiness.http.path ?? "/", ...(readiness.http.port !== undefined ? { port: readiness.http.port } : {}) }, ...timeout };
  }
  if (readiness?.tcp !== undefined) return { tcp: { ...readiness.tcp }, ...timeout };
  if (readiness?.exec !== undefined) return { exec: { command: readiness.exec.command }, ...timeout };
  if (readiness?.log !== undefined) return { log: { pattern: readiness.log.pattern }, ...timeout };
  return { tcp: {}, ...timeout };
}

function livenessWithDefaults(liveness: ParsedRunSpec["roles"][number]["liveness"], readiness: ParsedRunSpec["roles"][number]["readiness"]): Liveness {
  if (liveness === false || readiness?.log !== undefined) return false;
  return {
    period: liveness?.period ?? RUNSPEC_DEFAULTS.liveness.period,
    failureThreshold: liveness?.failureThreshold ?? RUNSPEC_DEFAULTS.liveness.failureThreshold,
  };
}

/** Compiled readiness probe: the probe kind, its parameters and the member deadline in ms. */
export type CompiledReadiness =
  | { readonly kind: "http"; readonly path: string; readonly port: number | null }
  | { readonly kind: "tcp"; readonly port: number | null }
  | { readonly kind: "exec"; readonly command: readonly string[] }
  | { readonly kind: "log"; readonly pattern: string };

/** A role, compiled. */
export interface CompiledRole {
  readonly name: string;
  /** Position in `roles` (for field paths in messages). */
  readonly index: number;
  readonly replicas: number;
  readonly needs: readonly string[];
  /** Roles that list this one in `needs`. */
  readonly dependants: readonly string[];
  /** Topological level: 0 = needs nothing. */
  readonly level: number;
  /** Member ids `<role>-<i>`, i = 0 .. replicas-1. */
  readonly members: readonly string[];
  readonly command: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly image: string;
  readonly files: Readonly<Record<string, string>>;
  readonly secretEnv: readonly string[];
  readonly port: boolean;
  readonly resources: Readonly<Record<string, string>>;
  readonly readiness: CompiledReadiness;
  /** Start-to-ready deadline of each member. */
  readonly memberTimeoutMs: number;
  /** Which field set `memberTimeoutMs` (for messages): `memberTimeout` or `roles[i].readiness.timeout`. */
  readonly memberTimeoutField: string;
  /**
   * Liveness after ready: the readiness probe re-run every `periodMs` ms; `failureThreshold` failures in
   * a row fail the run. null: off (`liveness: false`, or `log` readiness).
   */
  readonly liveness: { readonly periodMs: number; readonly failureThreshold: number } | null;
  /** Restarts before ready: at most `attempts`, the k-th after `backoffMs * 2^(k-1)` ms (see {@link restartDelayMs}). */
  readonly restart: { readonly attempts: number; readonly backoffMs: number };
}

/**
 * Pause before restart number `k` (1-based) of a member, in ms: `backoffMs * 2^(k-1)`, at most
 * {@link MAX_RESTART_BACKOFF_MS} (or `backoffMs` when that is longer).
 */
export function restartDelayMs(restart: CompiledRole["restart"], k: number): number {
  const cap = Math.max(restart.backoffMs, MAX_RESTART_BACKOFF_MS);
  return Math.min(cap, restart.backoffMs * 2 ** Math.max(0, k - 1));
}

/** A RunSpec compiled for the scheduler: milliseconds, members expanded, levels computed. */
export interface CompiledRunSpec {
  readonly name: string;
  readonly startupTimeoutMs: number;
  readonly admissionTimeoutMs: number;
  readonly holdMs: number;
  readonly stopGraceMs: number;
  readonly concurrency: number;
  /** Roles in declaration order. */
  readonly roles: readonly CompiledRole[];
  /** Role names per topological level (level 0 first). */
  readonly levels: readonly (readonly string[])[];
  /** Total members (sum of replicas). */
  readonly size: number;
  /** The validated spec with defaults, as recorded in the ledger manifest. */
  readonly spec: RunSpec;
}

/** Formats a zod path as `roles[2].app.env.FOO` (keys that are not identifiers are quoted: `files["a/b"]`). */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "string" && /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)) out += out === "" ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

function describeValue(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return `the string ${JSON.stringify(value.length > 40 ? `${cutUnits(value, 40)}…` : value)}`;
  return `${typeof value} ${String(value)}`;
}

/** How the error map names zod's expected types (every number in the RunSpec schema is an integer). */
const TYPE_NAMES: Readonly<Record<string, string>> = {
  int: "an integer",
  number: "an integer",
  string: "a string",
  boolean: "true or false",
  array: "a list",
  object: "an object",
};

/** zod error map: one short reason per issue, `must be ... (got ...)` (schema-level messages, when given, take precedence). */
const errorMap = (issue: z.core.$ZodRawIssue): string | undefined => {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined) return "required";
      return `must be ${TYPE_NAMES[issue.expected] ?? issue.expected} (got ${describeValue(issue.input)})`;
    case "too_small":
      if (issue.origin === "array") return `must have at least ${String(issue.minimum)} element(s)`;
      if (issue.origin === "string") return `must be at least ${String(issue.minimum)} character(s) long`;
      // Every number in the RunSpec schema is an integer (ports, replicas, concurrency).
      return `must be an integer >= ${String(issue.minimum)} (got ${String(issue.input)})`;
    case "too_big":
      if (issue.origin === "number") return `must be an integer <= ${String(issue.maximum)} (got ${String(issue.input)})`;
      return `must be at most ${String(issue.maximum)} (got ${describeValue(issue.input)})`;
    default:
      return undefined;
  }
};

function zodIssues(error: z.ZodError): SpecIssue[] {
  const issues: SpecIssue[] = [];
  for (const issue of error.issues) {
    // zod's `.int()` also refuses numbers beyond 2^53-1; where the schema sets its own, smaller maximum
    // (replicas: 10,000), that one is the real cap and the only one reported.
    if (issue.code === "too_big" && issue.maximum === Number.MAX_SAFE_INTEGER) {
      const samePath = (other: z.core.$ZodIssue) => other.path.length === issue.path.length && other.path.every((key, k) => key === issue.path[k]);
      if (error.issues.some((other) => other !== issue && other.code === "too_big" && other.maximum !== Number.MAX_SAFE_INTEGER && samePath(other))) continue;
    }
    if (issue.code === "invalid_union") {
      // `false | {...}` (liveness): when the value is a mapping, its own problems say more than the union's message.
      const branch = issue.errors.find((branchIssues) => branchIssues.length > 0 && branchIssues.every((sub) => sub.path.length > 0 || sub.code === "unrecognized_keys"));
      if (branch !== undefined) {
        issues.push(...zodIssues(new z.ZodError(branch.map((sub) => ({ ...sub, path: [...issue.path, ...sub.path] })))));
        continue;
      }
    }
    if (issue.code === "invalid_key") {
      // A record key refused by its schema (`app.env` names): zod says only "Invalid key in record"; its own issues say why.
      const inner = zodIssues(new z.ZodError(issue.issues.map((sub) => ({ ...sub, path: [...issue.path, ...sub.path] }))));
      if (inner.length > 0) {
        issues.push(...inner);
        continue;
      }
    }
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) issues.push({ path: formatPath([...issue.path, key]), reason: "unknown field" });
    } else {
      issues.push({ path: formatPath(issue.path), reason: issue.message });
    }
  }
  return issues;
}

/**
 * Parses RunSpec text (YAML 1.2, which includes JSON). Duplicate keys are refused.
 *
 * @throws {SpecError} (path "") when the text is not YAML/JSON or is not a mapping
 */
export function parseRunSpecText(text: string): unknown {
  let doc: unknown;
  try {
    doc = parseYaml(text, { uniqueKeys: true, prettyErrors: true });
  } catch (error) {
    const message = error instanceof YAMLParseError ? error.message.split("\n")[0] : String(error);
    throw new SpecError([{ path: "", reason: `not valid YAML or JSON: ${message}` }]);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw new SpecError([{ path: "", reason: `a RunSpec must be a mapping with apiVersion, kind, name and roles (got ${describeValue(doc)})` }]);
  }
  return doc;
}

/**
 * Validates a parsed RunSpec document and applies defaults.
 *
 * Checks, each reported as `path: reason`: shape and types (unknown fields refused), DNS-1123 names,
 * durations (unit required, not negative; timeouts > 0), replicas >= 1, concurrency >= 1, the cohort
 * size limit, member id length, duplicate role names, unknown/duplicate `needs`, self-loops, cycles with
 * the full path, `COHORT_*` names in `env`/`secretEnv`, `secretEnv` names also in `env`, secrets
 * referenced in `command` or `readiness.exec.command` (a secret must never be in a command line),
 * `files` paths (relative, no `..`, not reserved, segments <= 255 bytes, <= 1024 bytes in all, none also
 * the directory of another), images not pinned by digest, a tcp/http probe with no
 * port to probe (`app.port: false` and no `readiness.*.port`), `log` patterns that are not valid RE2 (such as a
 * backreference or lookaround), a
 * `liveness` mapping on a role with `log` readiness, `liveness`/`restart` values out of range, and
 * text that is not valid Unicode (a lone surrogate, the first one found).
 *
 * @throws {SpecError} listing every problem found in one pass: the roster's own checks (names, `needs`, size) run
 *   also when another field of the document is invalid, as long as `roles` itself parses
 */
export function validateRunSpec(doc: unknown): RunSpec {
  // Text that is not valid Unicode (a `\ud83d` escape without its pair) could not be written to the ledger as UTF-8.
  const lone = findLoneSurrogate(doc, "");
  const textIssues: SpecIssue[] =
    lone === undefined
      ? []
      : [
          {
            path: lone.path,
            reason: `holds a lone surrogate U+${lone.unit.toString(16).toUpperCase()} at character ${lone.index} (half of a character); text must be valid Unicode`,
          },
        ];
  const result = runSpecSchema.safeParse(doc, { error: errorMap });
  if (!result.success) {
    // The roster's own checks too when `roles` parses by itself, so that a bad timeout does not hide an unknown
    // `needs` until it is fixed: every problem in one pass.
    const rolesDoc = typeof doc === "object" && doc !== null ? (doc as Record<string, unknown>).roles : undefined;
    const roles = runSpecSchema.shape.roles.safeParse(rolesDoc, { error: errorMap });
    throw new SpecError([...zodIssues(result.error), ...(roles.success ? sortIssues(rosterIssues(roles.data)) : []), ...textIssues]);
  }
  const parsed = result.data;
  const issues: SpecIssue[] = [...textIssues, ...rosterIssues(parsed.roles)];
  if (issues.length > 0) throw new SpecError(sortIssues(issues));
  return withDefaults(parsed);
}

/** What is wrong with a roster whose roles each parse: per-role rules, the cohort's size, the `needs` graph. */
function rosterIssues(roles: ParsedRunSpec["roles"]): SpecIssue[] {
  const issues: SpecIssue[] = [];
  roles.forEach((role, i) => issues.push(...roleIssues(role, i)));
  let size = 0;
  for (const role of roles) size += role.replicas ?? RUNSPEC_DEFAULTS.replicas;
  if (size > MAX_COHORT_SIZE) {
    issues.push({ path: "roles", reason: `must have at most ${MAX_COHORT_SIZE} members in all (got ${size})` });
  }
  issues.push(...checkRoleGraph(roles.map((role) => ({ name: role.name, needs: role.needs ?? [] }))));
  return issues;
}

/** Orders issues by the role index in their path (then the original order), so messages follow the document. */
function sortIssues(issues: SpecIssue[]): SpecIssue[] {
  const roleIndex = (path: string): number => {
    const match = /^roles\[(\d+)\]/.exec(path);
    return match === null ? -1 : Number(match[1]);
  };
  return issues
    .map((issue, order) => ({ issue, order }))
    .sort((a, b) => roleIndex(a.issue.path) - roleIndex(b.issue.path) || a.order - b.order)
    .map((entry) => entry.issue);
}

function roleIssues(role: ParsedRunSpec["roles"][number], i: number): SpecIssue[] {
  const at = `roles[${i}]`;
  const issues: SpecIssue[] = [];
  const replicas = role.replicas ?? RUNSPEC_DEFAULTS.replicas;
  const longestId = `${role.name}-${replicas - 1}`;
  if (longestId.length > 63) {
    issues.push({ path: `${at}.name`, reason: `member id "${longestId}" would be longer than 63 characters; shorten the role name` });
  }
  const env = role.app.env ?? {};
  const secretEnv = role.app.secretEnv ?? [];
  for (const name of Object.keys(env)) {
    if (name.startsWith(RESERVED_ENV_PREFIX)) {
      issues.push({ path: `${at}.app.env.${name}`, reason: `names starting with ${RESERVED_ENV_PREFIX} are set by the runtime` });
    }
  }
  const seenSecrets = new Set<string>();
  secretEnv.forEach((name, j) => {
    const path = `${at}.app.secretEnv[${j}]`;
    if (name.startsWith(RESERVED_ENV_PREFIX)) issues.push({ path, reason: `names starting with ${RESERVED_ENV_PREFIX} are set by the runtime` });
    else if (Object.hasOwn(env, name)) issues.push({ path, reason: `"${name}" is also set in app.env; a secret's value is generated by the runtime` });
    else if (seenSecrets.has(name)) issues.push({ path, reason: `"${name}" is listed twice` });
    seenSecrets.add(name);
  });
  // Names whose value holds a secret: the secrets, and env entries that reference one (transitively).
  const tainted = new Set(secretEnv);
  for (const [name, value] of Object.entries(env)) {
    if (referencedVars(value).some((ref) => tainted.has(ref))) tainted.add(name);
  }
  const checkCommand = (command: readonly string[], path: string): void => {
    command.forEach((arg, k) => {
      const secret = referencedVars(arg).find((ref) => tainted.has(ref));
      if (secret !== undefined) {
        issues.push({
          path: `${path}[${k}]`,
          reason: `references $(${secret}), which holds a secret; a command line is visible to every local user (ps, /proc), so read the secret from the environment instead`,
        });
      }
    });
  };
  checkCommand(role.app.command, `${at}.app.command`);
  if (role.readiness?.exec !== undefined) checkCommand(role.readiness.exec.command, `${at}.readiness.exec.command`);
  const files = Object.keys(role.app.files ?? {});
  const fileSet = new Set(files);
  const filePath = (file: string): string => formatPath(["roles", i, "app", "files", file]);
  for (const file of files) {
    const problem = filePathProblem(file);
    if (problem !== undefined) issues.push({ path: filePath(file), reason: problem });
  }
  // `a` and `a/b` cannot both be written: `a` would have to be a file and a directory (EEXIST at admission).
  const reportedAsDirectory = new Set<string>();
  for (const file of files) {
    if (filePathProblem(file) !== undefined) continue;
    const segments = file.split("/");
    for (let k = 1; k < segments.length; k++) {
      const directory = segments.slice(0, k).join("/");
      if (fileSet.has(directory) && !reportedAsDirectory.has(directory) && filePathProblem(directory) === undefined) {
        reportedAsDirectory.add(directory);
        issues.push({ path: filePath(directory), reason: `"${directory}" is also a directory of ${filePath(file)}; a path cannot be both a file and a directory` });
      }
    }
  }
  const image = role.app.image ?? "";
  if (image !== "" && !IMAGE_BY_DIGEST.test(image)) {
    issues.push({ path: `${at}.app.image`, reason: `must be pinned by digest, name@sha256:<64 hex> (got "${image}")` });
  }
  const readiness = role.readiness;
  if (readiness !== undefined) {
    const probes = (["http", "tcp", "exec", "log"] as const).filter((kind) => readiness[kind] !== undefined);
    if (probes.length !== 1) {
      issues.push({
        path: `${at}.readiness`,
        reason:
          probes.length === 0 ? "must set exactly one probe: http, tcp, exec or log (got none)" : `must set exactly one probe: http, tcp, exec or log (got ${probes.join(", ")})`,
      });
    }
    if (readiness.log !== undefined) {
      const problem = logPatternProblem(readiness.log.pattern);
      if (problem !== undefined) issues.push({ path: `${at}.readiness.log.pattern`, reason: problem });
    }
  }
  if (readiness?.log !== undefined && role.liveness !== undefined && role.liveness !== false) {
    issues.push({
      path: `${at}.liveness`,
      reason: "a log readiness probe cannot be re-run (the line was printed once); remove liveness or set liveness: false (an exit after ready fails the run anyway)",
    });
  }
  const probeKind = readiness === undefined ? "tcp" : readiness.http !== undefined ? "http" : readiness.tcp !== undefined ? "tcp" : undefined;
  const probePort = probeKind === "http" ? readiness?.http?.port : probeKind === "tcp" ? readiness?.tcp?.port : undefined;
  if (probeKind !== undefined && role.app.port === false && probePort === undefined) {
    issues.push({
      path: `${at}.readiness${readiness === undefined ? "" : `.${probeKind}`}`,
      reason: `no port to probe: app.port is false, so the member has no COHORT_PORT; set readiness.${probeKind}.port, use an exec or log probe, or remove app.port: false`,
    });
  }
  return issues;
}

/**
 * Why `file` cannot be a key of `app.files`, or `undefined` if it can: it must be a relative POSIX path
 * inside the member's directory (no `..`, no leading `/`, no empty or `.` segments, no NUL or backslash),
 * whose first segment is not a runtime-owned name ({@link RESERVED_MEMBER_FILES}), with every segment at
 * most {@link MAX_FILE_NAME_BYTES} and the whole path at most {@link MAX_FILE_PATH_BYTES} bytes of UTF-8.
 *
 * Checks one path on its own; a path that is also another path's directory (`a` and `a/b`) is refused by
 * {@link validateRunSpec}.
 *
 * @param file - a key of `roles[].app.files`
 * @returns a one-line reason, or `undefined`
 */
export function filePathProblem(file: string): string | undefined {
  if (file === "") return "file path must not be empty";
  if (file.includes("\0") || file.includes("\\")) return "file path must not contain NUL or backslash";
  if (file.startsWith("/")) return "file path must be relative to the member's directory; absolute paths are refused";
  const segments = file.split("/");
  if (segments.includes("..")) return 'path traversal refused: ".." segments are not allowed';
  if (segments.some((segment) => segment === "" || segment === ".")) return 'file path must not have empty or "." segments';
  if (RESERVED_MEMBER_FILES.includes(segments[0]!)) return `"${segments[0]!}" is written by the runtime`;
  for (const segment of segments) {
    const bytes = Buffer.byteLength(segment, "utf8");
    if (bytes > MAX_FILE_NAME_BYTES) {
      return `path segment "${cutUnits(segment, 40)}…" is ${bytes} bytes; a file or directory name is at most ${MAX_FILE_NAME_BYTES} bytes (NAME_MAX)`;
    }
  }
  const bytes = Buffer.byteLength(file, "utf8");
  if (bytes > MAX_FILE_PATH_BYTES) {
    return `file path is ${bytes} bytes; at most ${MAX_FILE_PATH_BYTES} bytes (the member's directory and the path must stay within PATH_MAX, 4096 bytes)`;
  }
  return undefined;
}

/**
 * Compiles a validated RunSpec: durations to ms, readiness to one probe, members expanded, levels.
 */
export function compileRunSpec(spec: RunSpec): CompiledRunSpec {
  const graphRoles = spec.roles.map((role) => ({ name: role.name, needs: role.needs }));
  const levels = roleLevels(graphRoles);
  const dependants = roleDependants(graphRoles);
  const memberTimeoutMs = parseDurationMs(spec.memberTimeout);
  const roles: CompiledRole[] = spec.roles.map((role, index) => {
    const r = role.readiness;
    const readiness: CompiledReadiness =
      "http" in r
        ? { kind: "http", path: r.http.path, port: r.http.port ?? null }
        : "tcp" in r
          ? { kind: "tcp", port: r.tcp.port ?? null }
          : "exec" in r
            ? { kind: "exec", command: r.exec.command }
            : { kind: "log", pattern: r.log.pattern };
    return {
      name: role.name,
      index,
      replicas: role.replicas,
      needs: role.needs,
      dependants: dependants.get(role.name) ?? [],
      level: levels.get(role.name) ?? 0,
      members: Array.from({ length: role.replicas }, (_, i) => `${role.name}-${i}`),
      command: role.app.command,
      env: role.app.env,
      image: role.app.image,
      files: role.app.files,
      secretEnv: role.app.secretEnv,
      port: role.app.port,
      resources: role.resources,
      readiness,
      memberTimeoutMs: r.timeout !== undefined ? parseDurationMs(r.timeout) : memberTimeoutMs,
      memberTimeoutField: r.timeout !== undefined ? `roles[${index}].readiness.timeout` : "memberTimeout",
      liveness: role.liveness === false ? null : { periodMs: parseDurationMs(role.liveness.period), failureThreshold: role.liveness.failureThreshold },
      restart: { attempts: role.restart.attempts, backoffMs: parseDurationMs(role.restart.backoff) },
    };
  });
  const depth = Math.max(...roles.map((role) => role.level)) + 1;
  const byLevel: string[][] = Array.from({ length: depth }, () => []);
  for (const role of roles) byLevel[role.level]!.push(role.name);
  return {
    name: spec.name,
    startupTimeoutMs: parseDurationMs(spec.startupTimeout),
    admissionTimeoutMs: parseDurationMs(spec.admissionTimeout),
    holdMs: parseDurationMs(spec.hold),
    stopGraceMs: parseDurationMs(spec.stopGracePeriod),
    concurrency: spec.concurrency,
    roles,
    levels: byLevel,
    size: roles.reduce((sum, role) => sum + role.replicas, 0),
    spec,
  };
}

/**
 * Text -> CompiledRunSpec in one call: {@link parseRunSpecText}, {@link validateRunSpec}, {@link compileRunSpec}.
 *
 * @throws {SpecError}
 */
export function loadRunSpec(text: string): CompiledRunSpec {
  return compileRunSpec(validateRunSpec(parseRunSpecText(text)));
}

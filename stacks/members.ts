/**
 * Member app presets of the `host` profile: which stock, unmodified program a cohort's members run,
 * how it is started, configured and probed, and the run defaults (timeouts, concurrency) that fit it
 * on a small machine. A preset turns `cohort.app` + `cohort.size` from the stack config into the
 * RunSpec `roles` list (docs/architecture.md "RunSpec").
 *
 * - `openclaw`: a stock OpenClaw gateway (npm `openclaw`, pinned in common/pins.ts), run the way the
 *   public simulator ran it: no model credentials, every tool denied, exec denied, elevated tools off,
 *   its nested sandbox off, mDNS off, bound to loopback on the member's own port with its own state
 *   directory, token auth with a fresh token per member passed only in the environment. Ready when
 *   `GET /healthz` answers 2xx.
 * - `http-server`: the stock npm `http-server` static file server (pinned), serving one page from the
 *   member's directory. Cheap (about 40 MB, well under a second to ready): for fast tests of the
 *   Pulumi lifecycle.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { RunSpecInput } from "../runtime/index.js";
import { hostMembers, type NpmMemberProgramPin } from "../common/pins.js";
import { CohortLabError } from "../components/errors.js";

/** One role of a RunSpec as the user writes it (before runtime defaults). */
export type RoleInput = RunSpecInput["roles"][number];

/** Names of the member app presets; the value of `cohort-lab:cohort.app`. */
export const MEMBER_APPS = ["openclaw", "http-server"] as const;
/** A member app preset name. */
export type MemberApp = (typeof MEMBER_APPS)[number];

/** Run-level settings a preset chooses when the stack config leaves them unset. */
export interface RunDefaults {
  /** Whole roster ready, from admission. Duration string (`ms`, `s`, `m`, `h`). */
  readonly startupTimeout: string;
  /** One member, start to ready. Duration string. */
  readonly memberTimeout: string;
  /** How long the ready roster is held before teardown. Duration string. */
  readonly hold: string;
  /** Members starting at once. */
  readonly concurrency: number;
  /** SIGTERM to SIGKILL grace when members are stopped. Duration string. */
  readonly stopGracePeriod: string;
}

/** What a preset needs to know about the machine the program runs on. */
export interface PresetContext {
  /** Absolute path of the Node binary that runs the members (stacks/host.ts `resolveHostNode`: the pinned Node 24). */
  readonly nodePath: string;
  /** Directory whose `node_modules/` holds the pinned member packages (the project directory). */
  readonly projectDir: string;
}

/** A member app preset. */
export interface MemberPreset {
  /** One line for docs and errors. */
  readonly description: string;
  /** Role name the members get (member ids are `<role>-<index>`). */
  readonly roleName: string;
  /** The pinned npm program it runs. */
  readonly program: NpmMemberProgramPin;
  /** Run defaults tuned for this app on a 2-core host. */
  readonly defaults: RunDefaults;
  /** The RunSpec role for `replicas` members. */
  role(replicas: number, ctx: PresetContext): RoleInput;
}

/**
 * The member program is missing or not at its pinned version (an install problem, not a config one).
 * The message names the package, the path looked at, what was found and the fix. A components/errors.ts
 * `CohortLabError`, so the engine prints it without a stack trace.
 */
export class MemberProgramError extends CohortLabError {
  constructor(message: string) {
    super(message);
    this.name = "MemberProgramError";
  }
}

/**
 * OpenClaw's config file for a member, written to `state/openclaw.json` in the member's directory.
 * Every key was checked against `openclaw config schema` of the pinned version:
 * - `gateway.mode: local`, `gateway.bind: loopback`, `gateway.auth.mode: token` (the token itself comes
 *   from `OPENCLAW_GATEWAY_TOKEN`, never from this file);
 * - `discovery.mdns.mode: off` (no LAN advertisement);
 * - `update.checkOnStart: false`, `telemetry.enabled: false`, `models.catalogRefresh.enabled: false`
 *   (no network traffic of its own: the members have no model credentials and no internet);
 * - `logging.file: ~/logs/openclaw.log` (`~` is the member's `HOME`, i.e. its own directory; the
 *   default `/tmp/openclaw/openclaw-<date>.log` would be shared by every gateway);
 * - `tools.deny: ["*"]`, `tools.elevated.enabled: false`, `tools.exec.mode: deny`,
 *   `agents.defaults.sandbox.mode: off`, `agents.defaults.skipBootstrap: true`: the public simulator's
 *   tool and sandbox policy (docs/local.md "Pins and why these versions").
 *
 * OpenClaw rewrites this file at start (it adds `meta` and migrates keys); that is its own business.
 */
export const OPENCLAW_MEMBER_CONFIG = {
  gateway: { mode: "local", bind: "loopback", auth: { mode: "token" } },
  discovery: { mdns: { mode: "off" } },
  update: { checkOnStart: false },
  telemetry: { enabled: false },
  models: { catalogRefresh: { enabled: false } },
  logging: { file: "~/logs/openclaw.log" },
  tools: { deny: ["*"], elevated: { enabled: false }, exec: { mode: "deny" } },
  agents: { defaults: { sandbox: { mode: "off" }, skipBootstrap: true } },
} as const;

/**
 * Absolute path of a pinned member program's entry script, after checking that the installed package
 * is the pinned version.
 *
 * @throws {MemberProgramError} when `node_modules/<package>/package.json` is missing or has another version
 */
export function resolveMemberProgram(program: NpmMemberProgramPin, projectDir: string): string {
  const packageDir = path.join(projectDir, "node_modules", program.npmPackage);
  const manifestPath = path.join(packageDir, "package.json");
  if (!existsSync(manifestPath)) {
    throw new MemberProgramError(`member program ${program.npmPackage}@${program.version} is not installed (${manifestPath} does not exist); run \`npm ci\` in ${projectDir}`);
  }
  const found = (JSON.parse(readFileSync(manifestPath, "utf8")) as { version?: unknown }).version;
  if (found !== program.version) {
    throw new MemberProgramError(
      `member program ${program.npmPackage} must be version ${program.version} (common/pins.ts) but ${manifestPath} has ${JSON.stringify(found)}; run \`npm ci\``,
    );
  }
  return path.join(packageDir, program.entry);
}

const openclaw: MemberPreset = {
  description: "stock OpenClaw gateway (no model credentials, tools denied, nested sandbox off, loopback, token auth)",
  roleName: "gateway",
  program: hostMembers.openclaw,
  // Measured on a 2-core machine: one gateway needs ~21 s of CPU to start and ~1 GB (gateway ~850 MB, SQLite
  // worker ~105 MB, spawn broker ~70 MB). OpenClaw gives a start-up worker thread a fixed 5 s to come up
  // (LEASE_HEARTBEAT_START_TIMEOUT_MS) and exits with code 78 when it does not: with 4 gateways starting on a
  // CPU-saturated 2-core machine that happened, so start at most 2 at a time (one per core). A generous
  // member deadline: a gateway took up to ~140 s to be ready on that loaded machine. Still, a gateway that
  // exits before it is ready (78 from that lease, or 1) is started again, twice at most, after 5 s and then
  // 10 s (runtime/README.md, RunSpec `restart`); the member deadline counts per start.
  defaults: { startupTimeout: "20m", memberTimeout: "5m", hold: "5s", concurrency: 2, stopGracePeriod: "30s" },
  role(replicas, ctx) {
    const entry = resolveMemberProgram(hostMembers.openclaw, ctx.projectDir);
    return {
      name: "gateway",
      replicas,
      app: {
        // https://docs.openclaw.ai/cli/gateway : `gateway run` runs the gateway in the foreground.
        command: [ctx.nodePath, entry, "gateway", "run", "--allow-unconfigured", "--bind", "loopback", "--port", "$(COHORT_PORT)", "--auth", "token"],
        env: {
          HOME: "$(COHORT_MEMBER_DIR)",
          OPENCLAW_STATE_DIR: "$(COHORT_MEMBER_DIR)/state",
          OPENCLAW_CONFIG_PATH: "$(COHORT_MEMBER_DIR)/state/openclaw.json",
          OPENCLAW_DISABLE_BONJOUR: "1",
          NO_COLOR: "1",
          DO_NOT_TRACK: "1",
        },
        secretEnv: ["OPENCLAW_GATEWAY_TOKEN"],
        files: { "state/openclaw.json": `${JSON.stringify(OPENCLAW_MEMBER_CONFIG, null, 2)}\n` },
      },
      readiness: { http: { path: "/healthz" } },
      restart: { attempts: 2, backoff: "5s" },
    };
  },
};

const httpServer: MemberPreset = {
  description: "stock npm http-server serving one page from the member's directory (cheap; for fast tests)",
  roleName: "web",
  program: hostMembers.httpServer,
  defaults: { startupTimeout: "2m", memberTimeout: "30s", hold: "1s", concurrency: 16, stopGracePeriod: "5s" },
  role(replicas, ctx) {
    const entry = resolveMemberProgram(hostMembers.httpServer, ctx.projectDir);
    return {
      name: "web",
      replicas,
      app: {
        // -a: bind address, -p: port, -s: silent, -c-1: no caching (https://github.com/http-party/http-server#available-options)
        command: [ctx.nodePath, entry, "$(COHORT_MEMBER_DIR)/public", "-a", "127.0.0.1", "-p", "$(COHORT_PORT)", "-s", "-c-1"],
        files: { "public/index.html": "<!doctype html><title>cohort-lab member</title><p>cohort-lab member</p>\n" },
      },
      readiness: { http: { path: "/" } },
    };
  },
};

/** Every preset by name. */
export const MEMBER_PRESETS: Readonly<Record<MemberApp, MemberPreset>> = { openclaw, "http-server": httpServer };

/** Whether `name` is a preset name. */
export function isMemberApp(name: unknown): name is MemberApp {
  return typeof name === "string" && (MEMBER_APPS as readonly string[]).includes(name);
}

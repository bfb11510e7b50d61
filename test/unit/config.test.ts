/**
 * Stack config validation (stacks/config.ts, stacks/profiles.ts dispatch): defaults, and the exact
 * error text for every refusal, each naming its `cohort-lab:` key.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../runtime/core/ledger";
import { PROJECT_DIR, StackConfigError, parseStackConfig, resolveRunSpec, type RawConfig, type StackConfig } from "../../stacks/config";
import { buildStack, type ProfileDefinition, type StackOutputs } from "../../stacks/profiles";

const presetCtx = { nodePath: "/opt/node24/bin/node", projectDir: PROJECT_DIR };

/** The message of the StackConfigError thrown by `fn` (fails the test for any other outcome). */
function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(StackConfigError);
    return (error as Error).message;
  }
  throw new Error("expected a StackConfigError");
}

const parse = (raw: RawConfig, profileKeys: readonly string[] = []) => parseStackConfig(raw, { stack: "host", projectDir: "/repo", profileKeys });
/** Parse and resolve, as the host profile does before creating anything. */
const resolve = (raw: RawConfig) => resolveRunSpec(parse(raw).cohort, presetCtx);

describe("parseStackConfig: defaults", () => {
  it("an empty config is the host profile, <project>/artifacts, kept ledgers, 4 OpenClaw members", () => {
    expect(parse({})).toEqual<StackConfig>({
      profile: "host",
      artifactRoot: "/repo/artifacts",
      keepLedgers: true,
      cohort: { name: "society", app: "openclaw", size: 4 },
    });
  });

  it("takes every key as given; a relative artifactRoot is taken from the project directory", () => {
    expect(
      parse({ profile: "host", artifactRoot: "runs/x", keepLedgers: "false", cohort: JSON.stringify({ name: "lab", app: "http-server", size: 16, hold: "2s" }) }),
    ).toEqual<StackConfig>({
      profile: "host",
      artifactRoot: "/repo/runs/x",
      keepLedgers: false,
      cohort: { name: "lab", app: "http-server", size: 16, hold: "2s" },
    });
    expect(parse({ artifactRoot: "/abs/root" }).artifactRoot).toBe("/abs/root");
  });

  it("accepts size as a number or a string of digits (both are how `pulumi config set --path` may store it)", () => {
    expect(parse({ cohort: '{"size":16}' }).cohort.size).toBe(16);
    expect(parse({ cohort: '{"size":"16"}' }).cohort.size).toBe(16);
  });

  it("with custom roles there is no app and no size", () => {
    const roles = [{ name: "web", app: { command: ["python3", "-m", "http.server"] } }];
    expect(parse({ cohort: JSON.stringify({ roles }) }).cohort).toEqual({ name: "society", roles });
  });

  it("accepts the keys a profile declares", () => {
    expect(parse({ clusterName: "x" }, ["clusterName"]).profile).toBe("host");
  });
});

describe("parseStackConfig: refusals name the key and the reason", () => {
  it.each<[string, RawConfig, string]>([
    ["size 0", { cohort: '{"size":0}' }, "cohort-lab:cohort.size: must be an integer >= 1 (got 0)"],
    ["negative size", { cohort: '{"size":-3}' }, "cohort-lab:cohort.size: must be an integer >= 1 (got -3)"],
    ["fractional size", { cohort: '{"size":4.5}' }, "cohort-lab:cohort.size: must be an integer >= 1 (got 4.5)"],
    ["size as words", { cohort: '{"size":"four"}' }, 'cohort-lab:cohort.size: must be an integer >= 1 (got "four")'],
    ["size above the runtime limit", { cohort: '{"size":10001}' }, "cohort-lab:cohort.size: must be an integer <= 10000 (got 10001)"],
    ["unknown app", { cohort: '{"app":"nginx"}' }, 'cohort-lab:cohort.app: must be one of openclaw, http-server (got "nginx")'],
    [
      "unknown cohort field",
      { cohort: '{"siez":3}' },
      "cohort-lab:cohort.siez: unknown field (known fields: name, app, size, roles, startupTimeout, memberTimeout, admissionTimeout, hold, concurrency, stopGracePeriod)",
    ],
    [
      "size together with roles",
      { cohort: '{"size":3,"roles":[]}' },
      "cohort-lab:cohort.size: cannot be combined with cohort.roles (a custom roster's size is the sum of its replicas); remove one: `npm run pulumi -- config rm --path cohort.size --stack host` or `npm run pulumi -- config rm --path cohort.roles --stack host`\n" +
        "cohort-lab:cohort.roles: must list at least one role (a cohort of size 0 is refused)",
    ],
    [
      "cohort set as a scalar",
      { cohort: "16" },
      "cohort-lab:cohort: must be an object whose fields are set one by one, e.g. `npm run pulumi -- config set --path cohort.size 4 --stack host` (got 16)",
    ],
    ["keepLedgers not a boolean", { keepLedgers: "yes" }, 'cohort-lab:keepLedgers: must be true or false (got "yes")'],
    ["empty artifactRoot", { artifactRoot: "" }, "cohort-lab:artifactRoot: must be a directory path (got an empty string)"],
    ["unknown key", { keepLedger: "false" }, "cohort-lab:keepLedger: unknown key (known keys: profile, artifactRoot, keepLedgers, cohort)"],
  ])("%s", (_what, raw, message) => {
    expect(configError(() => parse(raw))).toBe(message);
  });

  it("a flat dotted key (set without --path) is refused with the commands that fix it", () => {
    expect(configError(() => parse({ "cohort.size": "16" }))).toBe(
      'cohort-lab:cohort.size: set without --path, so Pulumi stored a flat key named "cohort.size" instead of the field size of cohort; ' +
        "run `npm run pulumi -- config rm cohort.size --stack host` and then `npm run pulumi -- config set --path cohort.size 16 --stack host`",
    );
    expect(configError(() => parse({ "cohort.roles[0].name": "web" }))).toContain(
      'cohort-lab:cohort.roles[0].name: set without --path, so Pulumi stored a flat key named "cohort.roles[0].name"',
    );
  });

  it("reports every problem at once, one line each, in key order", () => {
    expect(configError(() => parse({ keepLedgers: "1", "cohort.size": "0", cohort: '{"size":0}' })).split("\n")).toEqual([
      'cohort-lab:cohort.size: set without --path, so Pulumi stored a flat key named "cohort.size" instead of the field size of cohort; run `npm run pulumi -- config rm cohort.size --stack host` and then `npm run pulumi -- config set --path cohort.size <value> --stack host`',
      "cohort-lab:cohort.size: must be an integer >= 1 (got 0)",
      'cohort-lab:keepLedgers: must be true or false (got "1")',
    ]);
  });

  it("a flat key does not hide a problem of its value: both are reported, and the fix names a placeholder", () => {
    expect(configError(() => parse({ "cohort.hold": "5" })).split("\n")).toEqual([
      'cohort-lab:cohort.hold: set without --path, so Pulumi stored a flat key named "cohort.hold" instead of the field hold of cohort; ' +
        "run `npm run pulumi -- config rm cohort.hold --stack host` and then `npm run pulumi -- config set --path cohort.hold <value> --stack host`",
      // `config set --path cohort.hold 5` would store the number 5: the same problem.
      'cohort-lab:cohort.hold: must be a duration with a unit (ms, s, m or h), e.g. "5s" (got 5)',
    ]);
  });

  it("a flat key does not hide RunSpec problems of the fields set with --path (all problems in one pass)", () => {
    expect(configError(() => parse({ "cohort.size": "16", cohort: '{"hold":"5","concurrency":0,"memberTimeout":"-1s"}' })).split("\n")).toEqual([
      'cohort-lab:cohort.size: set without --path, so Pulumi stored a flat key named "cohort.size" instead of the field size of cohort; ' +
        "run `npm run pulumi -- config rm cohort.size --stack host` and then `npm run pulumi -- config set --path cohort.size 16 --stack host`",
      'cohort-lab:cohort.memberTimeout: must be a duration that is not negative (got "-1s")',
      'cohort-lab:cohort.hold: must be a duration with a unit (ms, s, m or h), e.g. "5s" (got "5")',
      "cohort-lab:cohort.concurrency: must be an integer >= 1 (got 0)",
    ]);
    const roles = [{ name: "a", needs: ["db"], app: { command: ["x"] } }];
    expect(configError(() => parse({ keepLedgers: "1", cohort: JSON.stringify({ roles }) })).split("\n")).toEqual([
      'cohort-lab:keepLedgers: must be true or false (got "1")',
      'cohort-lab:cohort.roles[0].needs[0]: unknown role "db" (known: a)',
    ]);
  });

  it("the README's example: a bad key, an unknown need and a negative timeout in one pass", () => {
    const roles = [
      { name: "router", app: { command: ["node", "router.js"] } },
      { name: "agent", replicas: 8, needs: ["db"], app: { command: ["node", "agent.js"] } },
    ];
    expect(configError(() => parse({ keepLedgers: "yes", cohort: JSON.stringify({ roles: JSON.stringify(roles), memberTimeout: "-5s" }) })).split("\n")).toEqual([
      'cohort-lab:keepLedgers: must be true or false (got "yes")',
      'cohort-lab:cohort.memberTimeout: must be a duration that is not negative (got "-5s")',
      'cohort-lab:cohort.roles[1].needs[0]: unknown role "db" (known: router, agent)',
    ]);
  });

  it("a role missing a required field names the role's shape and where the RunSpec is described", () => {
    expect(configError(() => parse({ cohort: JSON.stringify({ roles: [{ name: "a" }] }) }))).toBe(
      "cohort-lab:cohort.roles[0].app: required; a role needs at least a name and app.command, e.g. " +
        '[{"name":"web","app":{"command":["node","server.js"]}}] (every RunSpec field: runtime/README.md "RunSpec")',
    );
  });

  it("a number that is not an integer, given as text by `config set --path`, is named as an integer field", () => {
    expect(configError(() => parse({ cohort: '{"concurrency":"1.5"}' }))).toBe('cohort-lab:cohort.concurrency: must be an integer (got the string "1.5")');
  });

  it("each problem is reported once, even when two checks find it", () => {
    const message = configError(() => parse({ cohort: '{"size":0,"hold":"5"}' }));
    expect(message.split("\n")).toEqual([
      "cohort-lab:cohort.size: must be an integer >= 1 (got 0)",
      'cohort-lab:cohort.hold: must be a duration with a unit (ms, s, m or h), e.g. "5s" (got "5")',
    ]);
  });

  it("roles given as JSON text (what `config set --path cohort.roles '<JSON list>'` stores) are parsed and validated as RunSpec roles", () => {
    const roles = [
      { name: "router", app: { command: ["node", "router.js"] } },
      { name: "agent", replicas: 8, needs: ["router"], app: { command: ["node", "agent.js"] } },
    ];
    expect(parse({ cohort: JSON.stringify({ roles: JSON.stringify(roles) }) }).cohort).toEqual({ name: "society", roles });
    expect(resolve({ cohort: JSON.stringify({ roles: JSON.stringify(roles) }) }).size).toBe(9);
    const bad = [
      { name: "a", app: { command: ["x"] } },
      { name: "b", needs: ["c"], app: { command: ["y"] } },
    ];
    expect(configError(() => parse({ cohort: JSON.stringify({ roles: JSON.stringify(bad) }) }))).toBe('cohort-lab:cohort.roles[1].needs[0]: unknown role "c" (known: a, b)');
  });

  it("roles given as text that is not a JSON list: the refusal names the forms that work", () => {
    const message = configError(() => parse({ cohort: JSON.stringify({ roles: "[{name: web}]" }) }));
    expect(message).toContain('cohort-lab:cohort.roles: must be a list of roles in the RunSpec shape (got "[{name: web}]", which is not valid JSON: ');
    expect(message).toContain(`npm run pulumi -- config set --path cohort.roles '[{"name":"web","app":{"command":["node","server.js"]}}]' --stack host`);
    expect(message).toContain(`npm run pulumi -- config set cohort '{"roles":[{"name":"web","app":{"command":["node","server.js"]}}]}' --stack host`);
    expect(configError(() => parse({ cohort: '{"roles":5}' }))).toMatch(/^cohort-lab:cohort\.roles: must be a list of roles in the RunSpec shape \(got 5\); set it as /);
    expect(configError(() => parse({ cohort: JSON.stringify({ roles: '{"name":"web"}' }) }))).toContain(
      'cohort-lab:cohort.roles: must be a list of roles in the RunSpec shape (got "{\\"name\\":\\"web\\"}", which is JSON but not a list)',
    );
  });

  it("carries the InputPropertiesError shape (propertyPath, reason) and is a pulumi.RunError (no stack trace)", async () => {
    const pulumi = await import("@pulumi/pulumi");
    try {
      parse({ cohort: '{"size":0}' });
      throw new Error("not refused");
    } catch (error) {
      expect(pulumi.RunError.isInstance(error)).toBe(true);
      expect((error as StackConfigError).errors).toEqual([{ propertyPath: "cohort-lab:cohort.size", reason: "must be an integer >= 1 (got 0)" }]);
    }
  });
});

describe("resolveRunSpec: RunSpec from the cohort config, validated by the runtime's schema", () => {
  it("the default is 4 OpenClaw gateways with the preset's run defaults; the digest is the manifest's", () => {
    const { spec, specSha256, size } = resolve({});
    expect(size).toBe(4);
    expect(spec).toMatchObject({
      apiVersion: "cohort-lab/v1",
      kind: "Cohort",
      name: "society",
      startupTimeout: "20m",
      memberTimeout: "5m",
      hold: "5s",
      concurrency: 2,
      stopGracePeriod: "30s",
    });
    expect(spec.roles).toHaveLength(1);
    expect(spec.roles[0]).toMatchObject({ name: "gateway", replicas: 4, readiness: { http: { path: "/healthz" } } });
    expect(specSha256).toBe(sha256Hex(canonicalJson(spec)));
    expect(specSha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("config fields override the preset's run defaults", () => {
    const { spec } = resolve({ cohort: JSON.stringify({ size: 16, memberTimeout: "7m", hold: "0s", concurrency: 1 }) });
    expect(spec).toMatchObject({ memberTimeout: "7m", hold: "0s", concurrency: 1, startupTimeout: "20m" });
    expect(spec.roles[0]?.replicas).toBe(16);
  });

  it("a changed size changes the digest; the same config gives the same digest", () => {
    expect(resolve({ cohort: '{"size":4}' }).specSha256).toBe(resolve({}).specSha256);
    expect(resolve({ cohort: '{"size":5}' }).specSha256).not.toBe(resolve({}).specSha256);
  });

  it("custom roles use the runtime's defaults and keep their order", () => {
    const roles = [
      { name: "router", app: { command: ["python3", "-m", "http.server", "$(COHORT_PORT)"] } },
      { name: "agent", replicas: 3, needs: ["router"], app: { command: ["python3", "-m", "http.server", "$(COHORT_PORT)"] } },
    ];
    const { spec, size } = resolve({ cohort: JSON.stringify({ name: "lab", roles }) });
    expect(size).toBe(4);
    expect(spec).toMatchObject({ name: "lab", memberTimeout: "60s", concurrency: 64 });
    expect(spec.roles.map((r) => [r.name, r.replicas, r.needs])).toEqual([
      ["router", 1, []],
      ["agent", 3, ["router"]],
    ]);
  });

  it.each<[string, RawConfig, string]>([
    ["a negative timeout", { cohort: '{"startupTimeout":"-5s"}' }, 'cohort-lab:cohort.startupTimeout: must be a duration that is not negative (got "-5s")'],
    ["a timeout without a unit", { cohort: '{"memberTimeout":90}' }, 'cohort-lab:cohort.memberTimeout: must be a duration with a unit (ms, s, m or h), e.g. "90s" (got 90)'],
    ["a zero timeout", { cohort: '{"memberTimeout":"0s"}' }, 'cohort-lab:cohort.memberTimeout: must be greater than zero (got "0s")'],
    ["concurrency 0", { cohort: '{"concurrency":0}' }, "cohort-lab:cohort.concurrency: must be an integer >= 1 (got 0)"],
    [
      "a name that is not a DNS label",
      { cohort: '{"name":"Bad_Name"}' },
      'cohort-lab:cohort.name: must be a DNS-1123 label: lower-case letters, digits and "-", starting and ending with a letter or digit (got "Bad_Name")',
    ],
  ])("%s", (_what, raw, message) => {
    expect(configError(() => resolve(raw))).toBe(message);
  });

  it("a role needing an unknown role names the exact config path", () => {
    const roles = [
      { name: "router", app: { command: ["x"] } },
      { name: "agent", needs: ["db"], app: { command: ["y"] } },
    ];
    expect(configError(() => resolve({ cohort: JSON.stringify({ roles }) }))).toBe('cohort-lab:cohort.roles[1].needs[0]: unknown role "db" (known: router, agent)');
  });

  it("a dependency cycle is refused with its full path", () => {
    const roles = [
      { name: "a", needs: ["b"], app: { command: ["x"] } },
      { name: "b", needs: ["a"], app: { command: ["y"] } },
    ];
    expect(configError(() => resolve({ cohort: JSON.stringify({ roles }) }))).toBe("cohort-lab:cohort.roles[1].needs[0]: dependency cycle: a -> b -> a");
  });
});

describe("buildStack: profile dispatch", () => {
  const outputs = (profile: string): StackOutputs => ({ profile, artifactRoot: "/x", run: undefined as never });
  const fake: Record<string, ProfileDefinition> = {
    host: { description: "h", configKeys: [], build: (ctx) => outputs(`host:${ctx.config.cohort.size}`) },
    sim: { description: "s", configKeys: ["nodes"], build: (ctx) => outputs(`sim:${ctx.raw.nodes}`) },
  };

  it("builds the profile the stack is named after", () => {
    expect(buildStack({ stack: "host", raw: {}, profiles: fake, projectDir: "/repo" }).profile).toBe("host:4");
  });

  it("cohort-lab:profile overrides the stack name, and the profile's own keys are accepted", () => {
    expect(buildStack({ stack: "ci-7", raw: { profile: "sim", nodes: "3" }, profiles: fake, projectDir: "/repo" }).profile).toBe("sim:3");
  });

  it("a key of another profile is unknown to this one", () => {
    expect(configError(() => buildStack({ stack: "host", raw: { nodes: "3" }, profiles: fake, projectDir: "/repo" }))).toBe(
      "cohort-lab:nodes: unknown key (known keys: profile, artifactRoot, keepLedgers, cohort)",
    );
  });

  it("an unknown profile lists the known ones", () => {
    expect(configError(() => buildStack({ stack: "host", raw: { profile: "kind" }, profiles: fake, projectDir: "/repo" }))).toBe(
      'cohort-lab:profile: unknown profile "kind" (known profiles: host, sim)',
    );
    expect(configError(() => buildStack({ stack: "dev", raw: {}, profiles: fake, projectDir: "/repo" }))).toBe(
      'cohort-lab:profile: unset, and the stack name "dev" is not a profile (known profiles: host, sim); run `npm run pulumi -- config set profile <name> --stack dev` or use a stack named after a profile',
    );
  });

  it("the real registry has the host profile", async () => {
    const { PROFILES } = await import("../../stacks/profiles.js");
    expect(Object.keys(PROFILES)).toContain("host");
    expect(path.isAbsolute(PROJECT_DIR)).toBe(true);
  });
});

import { describe, expect, it } from "vitest";
import { SpecError } from "../../runtime/core/errors";
import { compileRunSpec, filePathProblem, loadRunSpec, parseRunSpecText, restartDelayMs, validateRunSpec } from "../../runtime/core/spec";

const base = { apiVersion: "cohort-lab/v1", kind: "Cohort", name: "society" };
const role = (name: string, extra: Record<string, unknown> = {}) => ({ name, app: { command: ["sh", "-c", "exit 0"] }, ...extra });

/** The issues of the SpecError thrown by validating `doc`, as "path: reason" lines. */
function issuesOf(doc: unknown): string[] {
  try {
    validateRunSpec(doc);
  } catch (error) {
    expect(error).toBeInstanceOf(SpecError);
    return (error as SpecError).issues.map((issue) => (issue.path === "" ? issue.reason : `${issue.path}: ${issue.reason}`));
  }
  throw new Error("expected a SpecError");
}

describe("validateRunSpec: defaults (withDefaults)", () => {
  it("fills every default in one place", () => {
    const spec = validateRunSpec({ ...base, roles: [role("router")] });
    expect(spec).toEqual({
      ...base,
      startupTimeout: "5m",
      memberTimeout: "60s",
      admissionTimeout: "1h",
      hold: "0s",
      concurrency: 64,
      stopGracePeriod: "10s",
      roles: [
        {
          name: "router",
          replicas: 1,
          needs: [],
          app: { command: ["sh", "-c", "exit 0"], env: {}, image: "", files: {}, secretEnv: [], port: true },
          readiness: { tcp: {} },
          liveness: { period: "5s", failureThreshold: 3 },
          restart: { attempts: 0, backoff: "1s" },
          resources: {},
        },
      ],
    });
  });

  it("liveness: on by default for tcp/http/exec, off for log (nothing to re-probe); restart: none by default", () => {
    const spec = validateRunSpec({
      ...base,
      roles: [
        role("a", { readiness: { http: { path: "/" } } }),
        role("b", { readiness: { log: { pattern: "up" } } }),
        role("c", { readiness: { exec: { command: ["true"] } }, liveness: { period: "30s" }, restart: { attempts: 2 } }),
        role("d", { liveness: false, restart: { attempts: 1, backoff: "250ms" } }),
      ],
    });
    expect(spec.roles.map((r) => [r.name, r.liveness, r.restart])).toEqual([
      ["a", { period: "5s", failureThreshold: 3 }, { attempts: 0, backoff: "1s" }],
      ["b", false, { attempts: 0, backoff: "1s" }],
      ["c", { period: "30s", failureThreshold: 3 }, { attempts: 2, backoff: "1s" }],
      ["d", false, { attempts: 1, backoff: "250ms" }],
    ]);
    expect(compileRunSpec(spec).roles.map((r) => [r.name, r.liveness, r.restart])).toEqual([
      ["a", { periodMs: 5000, failureThreshold: 3 }, { attempts: 0, backoffMs: 1000 }],
      ["b", null, { attempts: 0, backoffMs: 1000 }],
      ["c", { periodMs: 30_000, failureThreshold: 3 }, { attempts: 2, backoffMs: 1000 }],
      ["d", null, { attempts: 1, backoffMs: 250 }],
    ]);
  });

  it("restartDelayMs doubles from the backoff and stops doubling at 5 minutes (or at the backoff when longer)", () => {
    const r = (backoffMs: number) => ({ attempts: 10, backoffMs });
    expect([1, 2, 3, 4].map((k) => restartDelayMs(r(1000), k))).toEqual([1000, 2000, 4000, 8000]);
    expect(restartDelayMs(r(100_000), 3)).toBe(300_000);
    expect(restartDelayMs(r(600_000), 2)).toBe(600_000);
    expect(restartDelayMs(r(0), 5)).toBe(0);
  });

  it("reads the DESIGN.md example (YAML) and compiles it", () => {
    const compiled = loadRunSpec(`
apiVersion: cohort-lab/v1
kind: Cohort
name: society
startupTimeout: 2m
memberTimeout: 60s
admissionTimeout: 1h
hold: 10s
concurrency: 64
roles:
  - name: router
    replicas: 1
    app:
      command: ["sh", "-c", "exec python3 -m http.server \\"$COHORT_PORT\\" --bind 127.0.0.1"]
      env: {}
      image: ""
    readiness: { http: { path: / } }
    resources: { cpu: 100m, memory: 128Mi }
  - name: agent
    replicas: 30
    needs: [router]
    app: { command: [sleep, "1000"] }
    readiness: { tcp: {}, timeout: 90s }
`);
    expect(compiled).toMatchObject({
      name: "society",
      startupTimeoutMs: 120_000,
      admissionTimeoutMs: 3_600_000,
      holdMs: 10_000,
      stopGraceMs: 10_000,
      concurrency: 64,
      size: 31,
      levels: [["router"], ["agent"]],
    });
    expect(compiled.roles[0]).toMatchObject({
      name: "router",
      level: 0,
      dependants: ["agent"],
      members: ["router-0"],
      readiness: { kind: "http", path: "/", port: null },
      memberTimeoutMs: 60_000,
      memberTimeoutField: "memberTimeout",
      resources: { cpu: "100m", memory: "128Mi" },
    });
    expect(compiled.roles[1]).toMatchObject({
      name: "agent",
      level: 1,
      needs: ["router"],
      members: Array.from({ length: 30 }, (_, i) => `agent-${i}`),
      readiness: { kind: "tcp", port: null },
      memberTimeoutMs: 90_000,
      memberTimeoutField: "roles[1].readiness.timeout",
    });
  });

  it("reads JSON too", () => {
    const compiled = loadRunSpec(JSON.stringify({ ...base, roles: [role("a", { readiness: { log: { pattern: "ready" } } })] }));
    expect(compiled.roles[0]!.readiness).toEqual({ kind: "log", pattern: "ready" });
  });
});

describe("validateRunSpec: refusals name the field and the reason", () => {
  it("size 0", () => {
    expect(issuesOf({ ...base, roles: [] })).toEqual(["roles: must list at least one role (a cohort of size 0 is refused)"]);
    expect(issuesOf({ ...base, roles: [role("a", { replicas: 0 })] })).toEqual(["roles[0].replicas: must be an integer >= 1, a cohort of size 0 is refused (got 0)"]);
    expect(issuesOf({ ...base, roles: [role("a", { replicas: 6_000 }), role("b", { replicas: 6_000 })] })).toEqual(["roles: must have at most 10000 members in all (got 12000)"]);
  });

  it("replicas: the real cap (10,000 members), not the largest safe integer", () => {
    expect(issuesOf({ ...base, roles: [role("a", { replicas: 20_000 })] })).toEqual(["roles[0].replicas: must be an integer <= 10000, the largest cohort (got 20000)"]);
    expect(issuesOf({ ...base, roles: [role("a", { replicas: 1e300 })] })).toEqual(["roles[0].replicas: must be an integer <= 10000, the largest cohort (got 1e+300)"]);
    expect(issuesOf({ ...base, roles: [role("a", { replicas: 2 ** 53 + 2 })] })).toEqual([
      "roles[0].replicas: must be an integer <= 10000, the largest cohort (got 9007199254740994)",
    ]);
    expect(validateRunSpec({ ...base, roles: [role("a", { replicas: 10_000 })] }).roles[0]!.replicas).toBe(10_000);
  });

  it("NUL bytes in argv or env values (execve would cut the string there)", () => {
    expect(issuesOf({ ...base, roles: [role("a", { app: { command: ["sh", "-c", "echo hi\0; sleep 1"], env: { X: "a\0b" } } })] })).toEqual([
      "roles[0].app.command[2]: must not contain a NUL byte (execve(2) would cut the string there)",
      "roles[0].app.env.X: must not contain a NUL byte (execve(2) would cut the string there)",
    ]);
  });

  it("durations: sub-millisecond values and repeated or unordered units, naming the field", () => {
    expect(issuesOf({ ...base, hold: "0.0001ms", stopGracePeriod: "1s1s", memberTimeout: "30s1m", roles: [role("a", { restart: { attempts: 1, backoff: "0.5ms" } })] })).toEqual([
      'memberTimeout: must be a duration with each unit at most once, largest first (h, m, s, ms), e.g. "1h30m" (got "30s1m")',
      'hold: must be a whole number of milliseconds (got "0.0001ms")',
      'stopGracePeriod: must be a duration with each unit at most once, largest first (h, m, s, ms), e.g. "1h30m" (got "1s1s")',
      'roles[0].restart.backoff: must be a whole number of milliseconds (got "0.5ms")',
    ]);
  });

  it("durations: unit-less, negative, zero timeouts", () => {
    expect(issuesOf({ ...base, memberTimeout: 90, hold: "-5s", startupTimeout: "0s", stopGracePeriod: "10", roles: [role("a")] })).toEqual([
      'startupTimeout: must be greater than zero (got "0s")',
      'memberTimeout: must be a duration with a unit (ms, s, m or h), e.g. "90s" (got 90)',
      'hold: must be a duration that is not negative (got "-5s")',
      'stopGracePeriod: must be a duration with a unit (ms, s, m or h), e.g. "10s" (got "10")',
    ]);
  });

  it("graph: unknown needs, self-loop, duplicate names, cycles with the full path", () => {
    expect(issuesOf({ ...base, roles: [role("router"), role("agent"), role("tool", { needs: ["db"] })] })).toEqual([
      'roles[2].needs[0]: unknown role "db" (known: router, agent, tool)',
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { needs: ["a"] })] })).toEqual(['roles[0].needs[0]: role "a" needs itself']);
    expect(issuesOf({ ...base, roles: [role("a"), role("a")] })).toEqual(['roles[1].name: duplicate role name "a" (first defined at roles[0])']);
    expect(issuesOf({ ...base, roles: [role("a", { needs: ["b"] }), role("b", { needs: ["c"] }), role("c", { needs: ["a"] })] })).toEqual([
      "roles[2].needs[0]: dependency cycle: a -> b -> c -> a",
    ]);
  });

  it("the roster's checks run beside the other fields' (one pass), and only when the roles parse", () => {
    expect(issuesOf({ ...base, memberTimeout: "-5s", roles: [role("router"), role("agent", { needs: ["db"] }), role("router")] })).toEqual([
      'memberTimeout: must be a duration that is not negative (got "-5s")',
      'roles[1].needs[0]: unknown role "db" (known: router, agent)',
      'roles[2].name: duplicate role name "router" (first defined at roles[0])',
    ]);
    expect(issuesOf({ ...base, name: "Bad_Name", roles: [role("a", { replicas: 6000 }), role("b", { replicas: 6000 })] })).toContain(
      "roles: must have at most 10000 members in all (got 12000)",
    );
    // A role that does not parse: its shape problem alone (no graph check on a half-read roster: "zz" is not named).
    expect(issuesOf({ ...base, memberTimeout: "-5s", roles: [role("a", { needs: ["zz"] }), { name: "b" }] })).toEqual([
      'memberTimeout: must be a duration that is not negative (got "-5s")',
      "roles[1].app: required",
    ]);
    // Not an object at all: the shape problem, nothing thrown by the roster check.
    expect(issuesOf("text").length).toBeGreaterThan(0);
    expect(issuesOf(null).length).toBeGreaterThan(0);
  });

  it("readiness: exactly one probe, a port to probe, a valid regex", () => {
    expect(issuesOf({ ...base, roles: [role("a", { readiness: { tcp: {}, http: {} } })] })).toEqual([
      "roles[0].readiness: must set exactly one probe: http, tcp, exec or log (got http, tcp)",
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { readiness: { timeout: "5s" } })] })).toEqual([
      "roles[0].readiness: must set exactly one probe: http, tcp, exec or log (got none)",
    ]);
    expect(issuesOf({ ...base, roles: [{ name: "a", app: { command: ["x"], port: false }, readiness: { http: { path: "/" } } }] })).toEqual([
      "roles[0].readiness.http: no port to probe: app.port is false, so the member has no COHORT_PORT; set readiness.http.port, use an exec or log probe, or remove app.port: false",
    ]);
    expect(issuesOf({ ...base, roles: [{ name: "a", app: { command: ["x"], port: false } }] })).toEqual([
      "roles[0].readiness: no port to probe: app.port is false, so the member has no COHORT_PORT; set readiness.tcp.port, use an exec or log probe, or remove app.port: false",
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { readiness: { log: { pattern: "([a-" } } })] })).toEqual([
      "roles[0].readiness.log.pattern: invalid or unsupported in RE2 syntax: missing closing ]: `[a-`",
    ]);
  });

  it("readiness.log.pattern: RE2 syntax (linear-time matching); backreferences and lookaround are refused with the reason", () => {
    expect(
      issuesOf({
        ...base,
        roles: [role("a", { readiness: { log: { pattern: "^(ready|up) (\\w+)\\1$" } } }), role("b", { readiness: { log: { pattern: "(?<=port )\\d+" } } })],
      }),
    ).toEqual([
      "roles[0].readiness.log.pattern: invalid or unsupported in RE2 syntax: invalid escape sequence: `\\1` (backreferences are not supported)",
      "roles[1].readiness.log.pattern: invalid or unsupported in RE2 syntax: invalid named capture: `(?<=port )\\d+` (lookaround is not supported)",
    ]);
    expect(validateRunSpec({ ...base, roles: [role("a", { readiness: { log: { pattern: "^(a+)+$" } } })] }).roles[0]!.readiness).toEqual({ log: { pattern: "^(a+)+$" } });
    expect(issuesOf({ ...base, roles: [role("a", { readiness: { http: { path: "health" } } })] })).toEqual(['roles[0].readiness.http.path: must start with "/"']);
  });

  it("liveness: false or a mapping; period > 0; failureThreshold an integer >= 1; not with log readiness", () => {
    expect(issuesOf({ ...base, roles: [role("a", { liveness: true })] })).toEqual([
      "roles[0].liveness: must be false (no liveness probe) or a mapping such as { period: 5s, failureThreshold: 3 }; omit it for the default (got boolean true)",
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { liveness: "10s" })] })).toEqual([
      'roles[0].liveness: must be false (no liveness probe) or a mapping such as { period: 5s, failureThreshold: 3 }; omit it for the default (got the string "10s")',
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { liveness: { period: 5, failureThreshold: 0 } })] })).toEqual([
      'roles[0].liveness.period: must be a duration with a unit (ms, s, m or h), e.g. "5s" (got 5)',
      "roles[0].liveness.failureThreshold: must be an integer >= 1 (got 0)",
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { liveness: { period: "0s", failureThreshold: 2.5, periodSeconds: 10 } })] })).toEqual([
      'roles[0].liveness.period: must be greater than zero (got "0s")',
      "roles[0].liveness.failureThreshold: must be an integer (got number 2.5)",
      "roles[0].liveness.periodSeconds: unknown field",
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { readiness: { log: { pattern: "up" } }, liveness: { period: "2s" } })] })).toEqual([
      "roles[0].liveness: a log readiness probe cannot be re-run (the line was printed once); remove liveness or set liveness: false (an exit after ready fails the run anyway)",
    ]);
    expect(validateRunSpec({ ...base, roles: [role("a", { readiness: { log: { pattern: "up" } }, liveness: false })] }).roles[0]!.liveness).toBe(false);
  });

  it("restart: attempts an integer 0..100 (required), backoff a duration", () => {
    expect(issuesOf({ ...base, roles: [role("a", { restart: { backoff: "1s" } })] })).toEqual(["roles[0].restart.attempts: required"]);
    expect(issuesOf({ ...base, roles: [role("a", { restart: { attempts: -1, backoff: "1" } })] })).toEqual([
      "roles[0].restart.attempts: must be an integer >= 0 (got -1)",
      'roles[0].restart.backoff: must be a duration with a unit (ms, s, m or h), e.g. "1s" (got "1")',
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { restart: { attempts: 1000, backoff: "-1s", limit: 3 } })] })).toEqual([
      "roles[0].restart.attempts: must be an integer <= 100 (got 1000)",
      'roles[0].restart.backoff: must be a duration that is not negative (got "-1s")',
      "roles[0].restart.limit: unknown field",
    ]);
    expect(issuesOf({ ...base, roles: [role("a", { restart: 2 })] })).toEqual(["roles[0].restart: must be an object (got number 2)"]);
  });

  it("shape: unknown fields, wrong types, names, concurrency", () => {
    expect(issuesOf({ ...base, apiVersion: "v1", name: "Society", concurrency: 0, extra: 1, roles: [{ name: "a_b", app: { comand: ["x"] }, replicas: 1.5 }] })).toEqual([
      'apiVersion: must be "cohort-lab/v1"',
      'name: must be a DNS-1123 label: lower-case letters, digits and "-", starting and ending with a letter or digit (got "Society")',
      "concurrency: must be an integer >= 1 (got 0)",
      'roles[0].name: must be a DNS-1123 label: lower-case letters, digits and "-", starting and ending with a letter or digit (got "a_b")',
      "roles[0].replicas: must be an integer (got number 1.5)",
      "roles[0].app.command: required",
      "roles[0].app.comand: unknown field",
      "extra: unknown field",
    ]);
    expect(issuesOf({ ...base, name: "a".repeat(40), roles: [role("a")] })).toEqual(["name: must be at most 39 characters (a DNS-1123 label leaving room for the run id suffix)"]);
    expect(issuesOf({ ...base, roles: [{ name: "a", app: { command: [] } }] })).toEqual(["roles[0].app.command: must have at least one element (the program)"]);
  });

  it("env, secrets, files, image, resources", () => {
    expect(
      issuesOf({
        ...base,
        roles: [
          {
            name: "a",
            app: {
              command: ["agent", "--token=$(TOKEN)", "$$(TOKEN) is fine", "--x=$(DERIVED)"],
              env: { COHORT_PORT: "1", DERIVED: "Bearer $(TOKEN)", PLAIN: "x" },
              secretEnv: ["TOKEN", "PLAIN", "COHORT_X", "TOKEN"],
              files: { "../etc/passwd": "x", "/abs": "x", "ok/file.txt": "x", "output.log": "x", "a//b": "x" },
              image: "ghcr.io/x/agent:latest",
            },
            readiness: { exec: { command: ["check", "$(TOKEN)"] } },
            resources: { cpu: "lots" },
          },
        ],
      }),
    ).toEqual(["roles[0].resources.cpu: must be a Kubernetes quantity such as 100m, 1, 128Mi, 1Gi"]);
    expect(
      issuesOf({
        ...base,
        roles: [
          {
            name: "a",
            app: {
              command: ["agent", "--token=$(TOKEN)", "$$(TOKEN) is fine", "--x=$(DERIVED)"],
              env: { COHORT_PORT: "1", DERIVED: "Bearer $(TOKEN)", PLAIN: "x" },
              secretEnv: ["TOKEN", "PLAIN", "COHORT_X", "TOKEN"],
              files: { "../etc/passwd": "x", "/abs": "x", "ok/file.txt": "x", "output.log": "x", "a//b": "x" },
              image: "ghcr.io/x/agent:latest",
            },
            readiness: { exec: { command: ["check", "$(TOKEN)"] } },
          },
        ],
      }),
    ).toEqual([
      "roles[0].app.env.COHORT_PORT: names starting with COHORT_ are set by the runtime",
      'roles[0].app.secretEnv[1]: "PLAIN" is also set in app.env; a secret\'s value is generated by the runtime',
      "roles[0].app.secretEnv[2]: names starting with COHORT_ are set by the runtime",
      'roles[0].app.secretEnv[3]: "TOKEN" is listed twice',
      "roles[0].app.command[1]: references $(TOKEN), which holds a secret; a command line is visible to every local user (ps, /proc), so read the secret from the environment instead",
      "roles[0].app.command[3]: references $(DERIVED), which holds a secret; a command line is visible to every local user (ps, /proc), so read the secret from the environment instead",
      "roles[0].readiness.exec.command[1]: references $(TOKEN), which holds a secret; a command line is visible to every local user (ps, /proc), so read the secret from the environment instead",
      'roles[0].app.files["../etc/passwd"]: path traversal refused: ".." segments are not allowed',
      'roles[0].app.files["/abs"]: file path must be relative to the member\'s directory; absolute paths are refused',
      'roles[0].app.files["output.log"]: "output.log" is written by the runtime',
      'roles[0].app.files["a//b"]: file path must not have empty or "." segments',
      'roles[0].app.image: must be pinned by digest, name@sha256:<64 hex> (got "ghcr.io/x/agent:latest")',
    ]);
  });

  it("files: a path that is also another path's directory, a segment over 255 bytes, a path over 1024 bytes", () => {
    const long = "x".repeat(300);
    const deep = Array.from({ length: 120 }, () => "d".repeat(9)).join("/");
    expect(
      issuesOf({
        ...base,
        roles: [
          role("a", { app: { command: ["x"], files: { a: "1", "a/b": "2", "a/c/d": "3", "c/d": "4", "c/d/e/f": "5", "output.log/x": "6" } } }),
          role("b", { app: { command: ["x"], files: { [`dir/${long}`]: "1", [`${"é".repeat(128)}`]: "2", [deep]: "3", [`${"y".repeat(255)}/ok`]: "4" } } }),
        ],
      }),
    ).toEqual([
      'roles[0].app.files["output.log/x"]: "output.log" is written by the runtime',
      'roles[0].app.files.a: "a" is also a directory of roles[0].app.files["a/b"]; a path cannot be both a file and a directory',
      'roles[0].app.files["c/d"]: "c/d" is also a directory of roles[0].app.files["c/d/e/f"]; a path cannot be both a file and a directory',
      `roles[1].app.files["dir/${long}"]: path segment "${"x".repeat(40)}…" is 300 bytes; a file or directory name is at most 255 bytes (NAME_MAX)`,
      `roles[1].app.files["${"é".repeat(128)}"]: path segment "${"é".repeat(40)}…" is 256 bytes; a file or directory name is at most 255 bytes (NAME_MAX)`,
      `roles[1].app.files["${deep}"]: file path is 1199 bytes; at most 1024 bytes (the member's directory and the path must stay within PATH_MAX, 4096 bytes)`,
    ]);
  });

  it("env and secretEnv names: the reason, not zod's 'Invalid key in record'", () => {
    expect(
      issuesOf({ ...base, roles: [role("a", { app: { command: ["x"], env: { "A=B": "1", "": "2", "1X": "3", "A\0B": "4", "A-B": "5" }, secretEnv: ["T=1", ""] } })] }),
    ).toEqual([
      `roles[0].app.env["A=B"]: an environment variable name must not contain "=" (the environment entry is NAME=value, so the name would end at the "=")`,
      'roles[0].app.env[""]: an environment variable name must not be empty',
      'roles[0].app.env["1X"]: an environment variable name must hold only letters, digits and _, not starting with a digit',
      'roles[0].app.env["A\\u0000B"]: an environment variable name must not contain a NUL byte (execve(2) would cut the entry there)',
      "roles[0].app.env.A-B: an environment variable name must hold only letters, digits and _, not starting with a digit",
      `roles[0].app.secretEnv[0]: an environment variable name must not contain "=" (the environment entry is NAME=value, so the name would end at the "=")`,
      "roles[0].app.secretEnv[1]: an environment variable name must not be empty",
    ]);
  });

  it("member ids stay DNS-1123 labels", () => {
    const name = "r".repeat(62);
    expect(issuesOf({ ...base, roles: [role(name, { replicas: 10 })] })).toEqual([
      `roles[0].name: member id "${name}-9" would be longer than 63 characters; shorten the role name`,
    ]);
  });

  it("the error message is the first issue, with a count of the rest", () => {
    expect(() => validateRunSpec({ ...base, roles: [role("a", { needs: ["x", "y"] })] })).toThrow('roles[0].needs[0]: unknown role "x" (known: a) (and 1 more)');
  });
});

describe("parseRunSpecText", () => {
  it("refuses non-YAML, non-mappings and duplicate keys", () => {
    expect(() => parseRunSpecText("[1, 2]")).toThrow("a RunSpec must be a mapping with apiVersion, kind, name and roles (got an array)");
    expect(() => parseRunSpecText("name: a\nname: b\n")).toThrow(/^not valid YAML or JSON: Map keys must be unique/);
    expect(() => parseRunSpecText("{ bad")).toThrow(/^not valid YAML or JSON: /);
  });
});

describe("filePathProblem", () => {
  it.each([
    ["config/app.json", undefined],
    [".env", undefined],
    ["a/../b", 'path traversal refused: ".." segments are not allowed'],
    ["./a", 'file path must not have empty or "." segments'],
    ["a\\b", "file path must not contain NUL or backslash"],
    ["output.log/x", '"output.log" is written by the runtime'],
    ["logs/output.log", undefined],
    [`a/${"n".repeat(255)}`, undefined],
    [`a/${"n".repeat(256)}`, `path segment "${"n".repeat(40)}…" is 256 bytes; a file or directory name is at most 255 bytes (NAME_MAX)`],
  ])("%j", (file, problem) => {
    expect(filePathProblem(file)).toBe(problem);
  });
});

describe("compileRunSpec", () => {
  it("levels a three-level graph and keeps declaration order within a level", () => {
    const compiled = compileRunSpec(validateRunSpec({ ...base, roles: [role("leaf", { needs: ["mid", "db"] }), role("mid", { needs: ["router"] }), role("router"), role("db")] }));
    expect(compiled.levels).toEqual([["router", "db"], ["mid"], ["leaf"]]);
    expect(compiled.roles.map((r) => [r.name, r.level, r.dependants])).toEqual([
      ["leaf", 2, []],
      ["mid", 1, ["leaf"]],
      ["router", 0, ["mid"]],
      ["db", 0, ["leaf"]],
    ]);
  });
});

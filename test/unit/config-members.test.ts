/**
 * Member app presets (stacks/members.ts), their pins, the Node check of the host profile, and the
 * runtime summary parser of CohortRun: pure logic, exact outputs and exact error strings.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseRunSummary } from "../../components/run/CohortRun";
import { HostPrerequisiteError } from "../../components/host/HostProfile";
import { loadRunSpec, restartDelayMs, validateRunSpec } from "../../runtime/core/spec";
import { PROJECT_DIR } from "../../stacks/config";
import { checkMemberNode, resolveHostNode } from "../../stacks/host";
import { MEMBER_PRESETS, MemberProgramError, OPENCLAW_MEMBER_CONFIG, resolveMemberProgram } from "../../stacks/members";
import { hostMembers } from "../../common/pins";

const ctx = { nodePath: "/opt/node24/bin/node", projectDir: PROJECT_DIR };
const packageJson = JSON.parse(readFileSync(path.join(PROJECT_DIR, "package.json"), "utf8")) as { dependencies: Record<string, string> };

describe("pins of the member programs", () => {
  it.each(Object.values(hostMembers))("$npmPackage: package.json pins the same exact version", (pin) => {
    expect(packageJson.dependencies[pin.npmPackage]).toBe(pin.version);
  });

  it.each(Object.values(hostMembers))("$npmPackage: the installed package has the pinned version, entry and engines range", (pin) => {
    const manifest = JSON.parse(readFileSync(path.join(PROJECT_DIR, "node_modules", pin.npmPackage, "package.json"), "utf8")) as {
      version: string;
      bin: Record<string, string>;
      engines?: { node?: string };
    };
    expect(manifest.version).toBe(pin.version);
    expect(Object.values(manifest.bin).map((p) => path.normalize(p))).toContain(pin.entry);
    expect(manifest.engines?.node).toBe(pin.nodeRange);
  });
});

describe("openclaw preset", () => {
  const role = MEMBER_PRESETS.openclaw.role(3, ctx);

  it("runs the pinned gateway in the foreground on loopback, on the member's port, with token auth", () => {
    expect(role.app.command).toEqual([
      "/opt/node24/bin/node",
      path.join(PROJECT_DIR, "node_modules", "openclaw", "openclaw.mjs"),
      "gateway",
      "run",
      "--allow-unconfigured",
      "--bind",
      "loopback",
      "--port",
      "$(COHORT_PORT)",
      "--auth",
      "token",
    ]);
    expect(role).toMatchObject({ name: "gateway", replicas: 3, readiness: { http: { path: "/healthz" } } });
  });

  it("restarts a gateway that exits before it is ready (its fixed 5 s start-up lease exits 78 on a busy machine): twice, after 5 s then 10 s", () => {
    expect(role.restart).toEqual({ attempts: 2, backoff: "5s" });
    const compiled = loadRunSpec(JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "c", roles: [role] })).roles[0]!;
    expect(compiled.restart).toEqual({ attempts: 2, backoffMs: 5000 });
    expect([1, 2].map((k) => restartDelayMs(compiled.restart, k))).toEqual([5000, 10_000]);
  });

  it("keeps every file in the member's own directory and the token out of files and argv", () => {
    expect(role.app.env).toEqual({
      HOME: "$(COHORT_MEMBER_DIR)",
      OPENCLAW_STATE_DIR: "$(COHORT_MEMBER_DIR)/state",
      OPENCLAW_CONFIG_PATH: "$(COHORT_MEMBER_DIR)/state/openclaw.json",
      OPENCLAW_DISABLE_BONJOUR: "1",
      NO_COLOR: "1",
      DO_NOT_TRACK: "1",
    });
    expect(role.app.secretEnv).toEqual(["OPENCLAW_GATEWAY_TOKEN"]);
    expect(Object.keys(role.app.files ?? {})).toEqual(["state/openclaw.json"]);
    expect(JSON.stringify(role)).not.toMatch(/OPENCLAW_GATEWAY_TOKEN=|--token/);
  });

  it("its config denies every tool and exec, turns elevated tools, the nested sandbox, mDNS and phone-home traffic off", () => {
    const written = JSON.parse(role.app.files?.["state/openclaw.json"] ?? "") as typeof OPENCLAW_MEMBER_CONFIG;
    expect(written).toEqual({
      gateway: { mode: "local", bind: "loopback", auth: { mode: "token" } },
      discovery: { mdns: { mode: "off" } },
      update: { checkOnStart: false },
      telemetry: { enabled: false },
      models: { catalogRefresh: { enabled: false } },
      logging: { file: "~/logs/openclaw.log" },
      tools: { deny: ["*"], elevated: { enabled: false }, exec: { mode: "deny" } },
      agents: { defaults: { sandbox: { mode: "off" }, skipBootstrap: true } },
    });
  });

  it("passes the runtime's RunSpec validation", () => {
    expect(() => validateRunSpec({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "society", roles: [role] })).not.toThrow();
  });
});

describe("http-server preset", () => {
  it("serves one page from the member's directory on loopback", () => {
    const role = MEMBER_PRESETS["http-server"].role(2, ctx);
    expect(role).toEqual({
      name: "web",
      replicas: 2,
      app: {
        command: [
          "/opt/node24/bin/node",
          path.join(PROJECT_DIR, "node_modules", "http-server", "bin", "http-server"),
          "$(COHORT_MEMBER_DIR)/public",
          "-a",
          "127.0.0.1",
          "-p",
          "$(COHORT_PORT)",
          "-s",
          "-c-1",
        ],
        files: { "public/index.html": "<!doctype html><title>cohort-lab member</title><p>cohort-lab member</p>\n" },
      },
      readiness: { http: { path: "/" } },
    });
  });
});

describe("resolveMemberProgram", () => {
  const pin = hostMembers.httpServer;

  it("returns the entry script of the installed pinned package", () => {
    expect(resolveMemberProgram(pin, PROJECT_DIR)).toBe(path.join(PROJECT_DIR, "node_modules", "http-server", "bin", "http-server"));
  });

  it("refuses a missing package with the fix", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "cohort-members-"));
    expect(() => resolveMemberProgram(pin, dir)).toThrow(MemberProgramError);
    expect(() => resolveMemberProgram(pin, dir)).toThrow(
      `member program http-server@14.1.1 is not installed (${dir}/node_modules/http-server/package.json does not exist); run \`npm ci\` in ${dir}`,
    );
  });

  it("refuses another version", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "cohort-members-"));
    mkdirSync(path.join(dir, "node_modules", "http-server"), { recursive: true });
    writeFileSync(path.join(dir, "node_modules", "http-server", "package.json"), '{"version":"14.0.0"}');
    expect(() => resolveMemberProgram(pin, dir)).toThrow(
      `member program http-server must be version 14.1.1 (common/pins.ts) but ${dir}/node_modules/http-server/package.json has "14.0.0"; run \`npm ci\``,
    );
  });
});

describe("checkMemberNode", () => {
  it("accepts the pinned Node 24 for OpenClaw", () => {
    expect(() => checkMemberNode("openclaw", "24.22.3", "/n")).not.toThrow();
  });

  it("refuses Node 22 for OpenClaw, naming the range, the version, the binary and the fix", () => {
    expect(() => checkMemberNode("openclaw", "22.12.0", "/usr/bin/node")).toThrow(HostPrerequisiteError);
    expect(() => checkMemberNode("openclaw", "22.12.0", "/usr/bin/node")).toThrow(
      "the openclaw members (openclaw@2026.9.6) need Node >=24.16.0 <25 || >=26.1.0, but the Node found is 22.12.0 (/usr/bin/node); " +
        "run `npm run toolchain` (it caches the pinned Node 24.22.3) and run Pulumi through `npm run pulumi -- <args>` or `npm run host`",
    );
  });

  it("http-server runs on any supported Node", () => {
    expect(() => checkMemberNode("http-server", "20.20.2", "/usr/bin/node")).not.toThrow();
  });
});

describe("resolveHostNode", () => {
  it("prefers the pinned Node in the toolchain cache, whatever Node runs the program", () => {
    const cache = mkdtempSync(path.join(os.tmpdir(), "cohort-cache-"));
    const bin = path.join(cache, "node-24.22.3", "bin", "node");
    mkdirSync(path.dirname(bin), { recursive: true });
    writeFileSync(bin, "");
    expect(resolveHostNode({ COHORT_LAB_CACHE: cache })).toEqual({ path: bin, version: "24.22.3", source: "toolchain" });
  });

  it("falls back to the Node running the program when the cache has no pinned Node", () => {
    const cache = mkdtempSync(path.join(os.tmpdir(), "cohort-cache-"));
    expect(resolveHostNode({ COHORT_LAB_CACHE: cache })).toEqual({ path: process.execPath, version: process.versions.node, source: "current" });
  });
});

describe("parseRunSummary (CohortRun outputs from the runtime's stdout)", () => {
  const summary = {
    runId: "society-20261130T080000Z-a1b2c3",
    outcome: "succeeded",
    size: 4,
    readyCount: 4,
    timeToReadyMs: 15234,
    ledgerPath: "/repo/artifacts/society-20261130T080000Z-a1b2c3",
    reportPath: "/repo/artifacts/society-20261130T080000Z-a1b2c3/report.html",
    firstFailure: null,
  };

  it("parses the one JSON line", () => {
    expect(parseRunSummary(JSON.stringify(summary))).toEqual(summary);
  });

  it("parses an older summary without reportPath (and a null one) as reportPath null", () => {
    const { reportPath: _dropped, ...older } = summary;
    expect(parseRunSummary(JSON.stringify(older))).toEqual({ ...older, reportPath: null });
    expect(parseRunSummary(JSON.stringify({ ...summary, reportPath: null }))).toEqual({ ...older, reportPath: null });
  });

  it("takes the last non-empty line", () => {
    expect(parseRunSummary(`\n${JSON.stringify({ ...summary, runId: "x" })}\n${JSON.stringify(summary)}\n\n`).runId).toBe(summary.runId);
  });

  it.each<[string, string, string]>([
    ["no output", "", "the cohort runtime printed no summary line on stdout"],
    ["not JSON", "hello", "the cohort runtime's summary line is not JSON: hello"],
    [
      "a bad outcome",
      JSON.stringify({ ...summary, outcome: "ok" }),
      `the cohort runtime's summary has no valid "outcome": ${JSON.stringify({ ...summary, outcome: "ok" }).slice(0, 200)}`,
    ],
    [
      "a relative ledger path",
      JSON.stringify({ ...summary, ledgerPath: "artifacts/x" }),
      `the cohort runtime's summary has no valid "ledgerPath": ${JSON.stringify({ ...summary, ledgerPath: "artifacts/x" }).slice(0, 200)}`,
    ],
    [
      "a relative report path",
      JSON.stringify({ ...summary, reportPath: "x/report.html" }),
      `the cohort runtime's summary has no valid "reportPath": ${JSON.stringify({ ...summary, reportPath: "x/report.html" }).slice(0, 200)}`,
    ],
  ])("refuses %s", (_what, stdout, message) => {
    expect(() => parseRunSummary(stdout)).toThrow(message);
  });
});

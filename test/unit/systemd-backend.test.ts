import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import type { MemberPlan } from "../../runtime/core/backend";
import { BackendUnavailableError, SpecError } from "../../runtime/core/errors";
import { memberIdentities, planMembers } from "../../runtime/core/plan";
import { loadRunSpec } from "../../runtime/core/spec";
import {
  SystemdBackend,
  describeEnd,
  journalFact,
  renderEnvFile,
  resolveSystemdConfig,
  secretsInCommand,
  setupScript,
  stopScript,
  systemdRunArgv,
  unitName,
} from "../../runtime/backends/systemd/index";
import { createBackend } from "../../runtime/backends/index";

const RUN_ID = "society-20260101T120000Z-a1b2c3";
const SPEC = `
apiVersion: cohort-lab/v1
kind: Cohort
name: society
stopGracePeriod: 7s
roles:
  - name: router
    app:
      command: ["sh", "-c", "exec python3 -m http.server $(COHORT_PORT)"]
    readiness: { tcp: {} }
  - name: agent
    replicas: 2
    needs: [router]
    app:
      command: ["sh", "-c", "echo $HOME; exec agent --peers '$(COHORT_NEEDS)'"]
      env: { GREETING: "hi $(COHORT_MEMBER)" }
      secretEnv: [TOKEN]
      files: { "conf/a.txt": "line one\\nline 'two' $x\\n" }
`;
const CONFIG = {
  multipass: "/usr/bin/multipass",
  instances: [
    { machine: "m1", instance: "lab-m1", ipv4: "10.77.0.11" },
    { machine: "m2", instance: "lab-m2", ipv4: "10.77.0.12" },
  ],
  placement: { router: "m1", agent: "m2" },
};

function plans(): MemberPlan[] {
  const spec = loadRunSpec(SPEC);
  const config = resolveSystemdConfig(CONFIG, spec);
  const endpoints = new Map(memberIdentities(spec).map((m, i) => [m.id, { host: config.placement.get(m.role)!.ipv4, port: 8000 + i }]));
  const secrets = new Map(spec.roles.flatMap((r) => r.members.map((id) => [id, Object.fromEntries(r.secretEnv.map((n) => [n, `tok-${id}-0123456789abcdef`]))])));
  return planMembers({ spec, runId: RUN_ID, runDir: "/tmp/run", endpoints, secrets });
}

function specIssues(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(SpecError);
    return (error as SpecError).issues.map((i) => `${i.path}: ${i.reason}`);
  }
  throw new Error("expected a SpecError");
}

describe("systemd backend: unit names", () => {
  it("is cohort-<run>-<member>.service, stable, in systemd's alphabet, at most 255 characters", () => {
    expect(unitName(RUN_ID, "agent-1")).toBe("cohort-society-20260101T120000Z-a1b2c3-agent-1.service");
    expect(unitName(RUN_ID, "agent-1")).toBe(unitName(RUN_ID, "agent-1"));
    expect(unitName("we ird/run", "a-0")).toBe("cohort-we_ird_run-a-0.service");
    const long = unitName("r".repeat(300), "agent-0");
    expect(long.length).toBe(255);
    expect(long).toMatch(/^cohort-r+-[0-9a-f]{12}\.service$/);
    expect(unitName("r".repeat(300), "agent-1")).not.toBe(long);
  });
});

describe("systemd backend: config", () => {
  const spec = loadRunSpec(SPEC);
  it("resolves placement to instances with defaults", () => {
    const c = resolveSystemdConfig(CONFIG, spec);
    expect(c.placement.get("agent")).toEqual(CONFIG.instances[1]);
    expect(c.become).toEqual(["sudo", "-n"]);
    expect(c.basePort).toBe(8000);
  });
  it("refuses each bad field, naming it", () => {
    expect(specIssues(() => resolveSystemdConfig({ ...CONFIG, multipass: "multipass" }, spec))).toEqual(["systemd.multipass: must be an absolute path of the multipass CLI"]);
    expect(specIssues(() => resolveSystemdConfig({ ...CONFIG, placement: { router: "m1", agent: "m9" } }, spec))).toEqual([
      'systemd.placement.agent: machine "m9" is not in instances (known: m1, m2)',
    ]);
    expect(specIssues(() => resolveSystemdConfig({ ...CONFIG, placement: { router: "m1" } }, spec))).toEqual([
      'systemd.placement.agent: role "agent" is not placed on any machine (known: m1, m2)',
    ]);
    expect(specIssues(() => resolveSystemdConfig({ ...CONFIG, placement: { router: "m1", agent: "m2", db: "m1" } }, spec))).toEqual([
      'systemd.placement.db: the RunSpec has no role "db" (roles: router, agent)',
    ]);
    const dup = { ...CONFIG, instances: [CONFIG.instances[0], { ...CONFIG.instances[1], ipv4: "10.77.0.11" }] };
    expect(specIssues(() => resolveSystemdConfig(dup, spec))).toEqual(['systemd.instances.1.ipv4: "10.77.0.11" is also instances.0.ipv4']);
    expect(specIssues(() => resolveSystemdConfig({ ...CONFIG, instances: [{ ...CONFIG.instances[0], ipv4: "10.0.0" }, CONFIG.instances[1]] }, spec))).toEqual([
      "systemd.instances.0.ipv4: must be an IPv4 address",
    ]);
    expect(specIssues(() => resolveSystemdConfig({ ...CONFIG, instances: [{ ...CONFIG.instances[0], instance: "1bad" }, CONFIG.instances[1]] }, spec))[0]).toMatch(
      /^systemd\.instances\.0\.instance: must be a Multipass instance name/,
    );
    expect(specIssues(() => resolveSystemdConfig({ ...CONFIG, sudo: true }, spec))[0]).toMatch(/^systemd: Unrecognized key.*"sudo"/);
    expect(specIssues(() => resolveSystemdConfig({ ...CONFIG, basePort: 65535 }, spec))).toEqual(["systemd.basePort: 2 members on lab-m2 from port 65535 would pass 65535"]);
  });
  it("is the registry's systemd backend, refusing a bad config at creation", async () => {
    const context = { runId: RUN_ID, runDir: "/tmp/run", spec, events: () => undefined, options: { ...CONFIG, placement: {} } };
    await expect(createBackend("systemd", context)).rejects.toThrow(/systemd\.placement\.router: role "router" is not placed/);
    const backend = await createBackend("systemd", { ...context, options: CONFIG });
    expect(backend.name).toBe("systemd");
  });
});

describe("systemd backend: endpoints", () => {
  it("gives each member its instance's IPv4 and consecutive ports per instance", async () => {
    const spec = loadRunSpec(SPEC);
    const backend = new SystemdBackend({ runId: RUN_ID, runDir: "/tmp/run", spec, events: () => undefined, options: { ...CONFIG, basePort: 9100 } });
    const endpoints = await backend.endpoints(memberIdentities(spec));
    expect(Object.fromEntries(endpoints)).toEqual({
      "router-0": { host: "10.77.0.11", port: 9100 },
      "agent-0": { host: "10.77.0.12", port: 9100 },
      "agent-1": { host: "10.77.0.12", port: 9101 },
    });
  });
});

describe("systemd backend: available()", () => {
  it("names the CLI when it is not executable, and the instance when exec fails", async () => {
    const spec = loadRunSpec(SPEC);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "systemd-backend-"));
    try {
      const missing = new SystemdBackend({ runId: RUN_ID, runDir: dir, spec, events: () => undefined, options: { ...CONFIG, multipass: path.join(dir, "nope") } });
      await expect(missing.available()).rejects.toThrow(new RegExp(`^systemd\\.multipass: ${dir}/nope is not an executable file`));
      // A real executable that answers like Multipass for a missing instance (field notes §1.3: exit 2).
      const cli = path.join(dir, "multipass");
      fs.writeFileSync(cli, `#!/bin/sh\nif [ "$2" = lab-m2 ]; then echo 'exec failed: instance "lab-m2" does not exist' >&2; exit 2; fi\nshift 3\nexec "$@"\n`, { mode: 0o755 });
      const backend = new SystemdBackend({ runId: RUN_ID, runDir: dir, spec, events: () => undefined, options: { ...CONFIG, multipass: cli, become: [] } });
      const error = await backend.available().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendUnavailableError);
      // lab-m1 runs the probe on this host, which has no systemd as PID 1; lab-m2 does not exist.
      expect((error as Error).message).toMatch(
        /instance lab-m(1 \(machine m1\) has no systemd as its service manager|2 \(machine m2\) is not reachable with .* exec \(exit 2\): exec failed: instance "lab-m2" does not exist)/,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("systemd backend: env file and set-up script", () => {
  it("escapes what systemd's env-file parser treats specially and refuses NUL", () => {
    expect(renderEnvFile({ A: 'x"y', B: "a\\b", C: "$HOME `id`", D: "two\nlines", E: '{"r":["10.0.0.1:80"]}' })).toBe(
      'A="x\\"y"\nB="a\\\\b"\nC="\\$HOME \\`id\\`"\nD="two\nlines"\nE="{\\"r\\":[\\"10.0.0.1:80\\"]}"\n',
    );
    expect(() => renderEnvFile({ A: "a\0b" })).toThrow(/NUL/);
  });
  it("carries the environment and files on stdin only, decoded by a real sh and base64", () => {
    const plan = plans().find((p) => p.id === "agent-1")!;
    const unit = unitName(RUN_ID, plan.id);
    const script = setupScript(plan, unit);
    expect(script).not.toContain(plan.env.TOKEN);
    expect(script.split("\n").slice(0, 6)).toEqual([
      "set -eu",
      "umask 077",
      "mkdir -p '/run/cohort'",
      "chmod 0700 '/run/cohort'",
      `rm -rf '/var/lib/cohort/${RUN_ID}/agent-1'`,
      `mkdir -p '/var/lib/cohort/${RUN_ID}/agent-1'`,
    ]);
    // Run the script for real with its absolute roots moved under a temp dir.
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "systemd-setup-"));
    try {
      execFileSync("sh", ["-s"], { input: script.replaceAll("'/run/cohort", `'${root}/run/cohort`).replaceAll("'/var/lib/cohort", `'${root}/var/lib/cohort`) });
      const envFile = path.join(root, "run/cohort", `${unit}.env`);
      expect(fs.statSync(envFile).mode & 0o777).toBe(0o600);
      expect(fs.statSync(path.join(root, "run/cohort")).mode & 0o777).toBe(0o700);
      const text = fs.readFileSync(envFile, "utf8");
      expect(text).toContain(`TOKEN="${plan.env.TOKEN}"\n`);
      expect(text).toContain(`COHORT_MEMBER_DIR="/var/lib/cohort/${RUN_ID}/agent-1"\n`);
      expect(text).toContain(`COHORT_NEEDS="{\\"router\\":[\\"10.77.0.11:8000\\"]}"\n`);
      expect(fs.readFileSync(path.join(root, "var/lib/cohort", RUN_ID, "agent-1/conf/a.txt"), "utf8")).toBe("line one\nline 'two' $x\n");
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
    expect(() => setupScript({ ...plan, files: { "../x": "" } }, unit)).toThrow(/outside the member's directory/);
    expect(() => setupScript({ ...plan, files: { "/etc/x": "" } }, unit)).toThrow(/outside the member's directory/);
  });
  it("starts a Type=exec unit with the env file, the grace as TimeoutStopSec and $ escaped", () => {
    const plan = plans().find((p) => p.id === "agent-0")!;
    const unit = unitName(RUN_ID, plan.id);
    const argv = systemdRunArgv(plan, unit, 7000);
    expect(argv.slice(0, 3)).toEqual(["systemd-run", "--collect", `--unit=${unit}`]);
    expect(argv).toContain(`EnvironmentFile=/run/cohort/${unit}.env`);
    expect(argv).toContain("TimeoutStopSec=7s");
    expect(argv).toContain("KillMode=control-group");
    expect(argv).toContain("Type=exec");
    expect(argv.slice(argv.indexOf("--") + 1)).toEqual(["sh", "-c", `echo $$HOME; exec agent --peers '{"router":["10.77.0.11:8000"]}'`]);
    expect(argv.join(" ")).not.toContain(plan.env.TOKEN);
    expect(stopScript(unit)).toBe(
      `systemctl stop '${unit}' 2>/dev/null; systemctl kill --signal=SIGKILL '${unit}' 2>/dev/null; systemctl reset-failed '${unit}' 2>/dev/null; rm -f '/run/cohort/${unit}.env'; true`,
    );
  });
  it("finds a secret in a command line (the core refuses $(SECRET) in commands; the backend checks again)", () => {
    const plan = plans().find((p) => p.id === "agent-0")!;
    expect(secretsInCommand(plan)).toEqual([]);
    expect(secretsInCommand({ ...plan, command: ["agent", `--token=${plan.env.TOKEN}`] })).toEqual(["TOKEN"]);
  });
});

/** Entries as `journalctl -o json` prints them on systemd 252 (field names: systemd.journal-fields(7)). */
function managerEntry(unit: string, fields: Record<string, string>): Record<string, unknown> {
  return {
    __CURSOR: "s=0;i=1",
    __REALTIME_TIMESTAMP: "1764657000000000",
    _BOOT_ID: "b".repeat(32),
    PRIORITY: "6",
    SYSLOG_FACILITY: "3",
    SYSLOG_IDENTIFIER: "systemd",
    _PID: "1",
    _UID: "0",
    _COMM: "systemd",
    _TRANSPORT: "journal",
    CODE_FILE: "src/core/unit.c",
    UNIT: unit,
    INVOCATION_ID: "c".repeat(32),
    ...fields,
  };
}

describe("systemd backend: journal entries", () => {
  const unit = unitName(RUN_ID, "agent-0");
  const units = new Set([unit]);
  it("reads member output, process exits and unit results; ignores other units", () => {
    const out = { _SYSTEMD_UNIT: unit, _PID: "4242", _TRANSPORT: "stdout", SYSLOG_IDENTIFIER: "sh", MESSAGE: "listening on 8000" };
    expect(journalFact(out, units)).toEqual({ kind: "output", unit, line: "listening on 8000" });
    expect(journalFact({ ...out, MESSAGE: [0x68, 0x69, 0x1b] }, units)).toEqual({ kind: "output", unit, line: "hi\u001b" });
    expect(journalFact({ ...out, _SYSTEMD_UNIT: "other.service" }, units)).toBeUndefined();
    const exit = managerEntry(unit, {
      MESSAGE_ID: "98e322203f7a4ed290d09fe03c09fe15",
      MESSAGE: `${unit}: Main process exited, code=exited, status=3/NOTIMPLEMENTED`,
      EXIT_CODE: "exited",
      EXIT_STATUS: "3",
    });
    expect(journalFact(exit, units)).toEqual({ kind: "manager", unit, line: exit.MESSAGE, exit: { code: "exited", status: 3 } });
    const failed = managerEntry(unit, { MESSAGE_ID: "d9b373ed55a64feb8242e02dbe79a49c", MESSAGE: `${unit}: Failed with result 'exit-code'.`, UNIT_RESULT: "exit-code" });
    expect(journalFact(failed, units)).toMatchObject({ kind: "manager", end: { result: "exit-code" } });
    const ok = managerEntry(unit, { MESSAGE_ID: "7ad2d189f7e94e70a38c781354912448", MESSAGE: `${unit}: Deactivated successfully.` });
    expect(journalFact(ok, units)).toMatchObject({ kind: "manager", end: { result: "success" } });
    expect(journalFact(managerEntry("other.service", { MESSAGE_ID: "7ad2d189f7e94e70a38c781354912448" }), units)).toBeUndefined();
    expect(journalFact({ ...ok, _PID: "77" }, units)).toBeUndefined();
    expect(journalFact("not an object", units)).toBeUndefined();
  });
  it("describes the end with exit status or signal", () => {
    expect(describeEnd("u.service", "exit-code", { code: "exited", status: 3 })).toEqual({
      reason: "unit u.service failed (result exit-code): main process exited with status 3",
      exitCode: 3,
      signal: null,
    });
    expect(describeEnd("u.service", "signal", { code: "killed", status: 9 })).toEqual({
      reason: "unit u.service failed (result signal): main process killed by SIGKILL",
      exitCode: null,
      signal: "SIGKILL",
    });
    expect(describeEnd("u.service", "success", undefined)).toEqual({
      reason: "unit u.service deactivated successfully: main process exited with status 0",
      exitCode: 0,
      signal: null,
    });
    expect(describeEnd("u.service", "timeout", undefined).reason).toBe("unit u.service failed (result timeout)");
  });
});

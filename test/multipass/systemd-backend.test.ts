/**
 * The runtime's systemd backend against real systemd: three instances of the Multipass stand-in (real
 * systemd as PID 1 in systemd-nspawn, cloud-init, each on its own address on a bridge), cohorts run through the
 * bundled runtime `dist/cohort.cjs run --backend systemd`. Asserts with `systemctl` on the instances (through
 * `multipass exec`), never a stub's exit code.
 */
import { execFile, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { standinUnavailableReason, startStandin, type Standin } from "../tools/multipass/harness";

const execFileP = promisify(execFile);
const REPO = path.resolve(__dirname, "..", "..");
const BUNDLE = path.join(REPO, "dist", "cohort.cjs");
/** The profile's user-data (stacks/multipass.ts MULTIPASS_USER_DATA): the default user, the hostname in /etc/hosts. */
const USER_DATA = "#cloud-config\nusers:\n  - default\nmanage_etc_hosts: true\n";
const MACHINES = ["m1", "m2", "m3"] as const;

let mp: Standin | undefined;
const skip: string | undefined = standinUnavailableReason() ?? (fs.existsSync(BUNDLE) ? undefined : `${BUNDLE} is missing: npm run build`);
const ips: Record<string, string> = {};
let prefix = "";
let work = "";

function env(): NodeJS.ProcessEnv {
  return { ...process.env, ...mp!.env };
}

async function multipass(args: readonly string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(mp!.bin, args, { env: env(), stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(input ?? "");
  });
}

const instance = (machine: string) => `${prefix}-${machine}`;

/** `systemctl is-active UNIT` on the instance: its stdout (`active`, `inactive`, `failed`, ...). */
async function isActive(machine: string, unit: string): Promise<string> {
  return (await multipass(["exec", instance(machine), "--", "sudo", "-n", "systemctl", "is-active", unit])).stdout.trim();
}

/** Units of the run still loaded on the instance. */
async function loadedUnits(machine: string, runId: string): Promise<string[]> {
  const r = await multipass(["exec", instance(machine), "--", "sudo", "-n", "systemctl", "list-units", "--all", "--plain", "--no-legend", `cohort-${runId}-*`]);
  return r.stdout
    .split("\n")
    .map((l) => l.trim().split(/\s+/)[0] ?? "")
    .filter((u) => u !== "");
}

interface RunResult {
  readonly code: number | null;
  readonly summary: { runId: string; outcome: string; ledgerPath: string; firstFailure: { member: string | null; reason: string } | null };
  readonly stderr: string;
  readonly ms: number;
}

/** Runs `spec` with the bundled runtime; `during` runs once the run id is known (from the artifacts directory). */
async function runCohort(
  name: string,
  spec: string,
  placement: Record<string, string>,
  during?: (runId: string) => Promise<void>,
  extraInstances: readonly { machine: string; instance: string; ipv4: string }[] = [],
): Promise<RunResult> {
  const dir = path.join(work, name);
  fs.mkdirSync(dir, { recursive: true });
  const specFile = path.join(dir, "spec.yaml");
  fs.writeFileSync(specFile, spec);
  const configFile = path.join(dir, "backend.json");
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      multipass: mp!.bin,
      environment: mp!.env,
      instances: [...MACHINES.map((m) => ({ machine: m, instance: instance(m), ipv4: ips[m] })), ...extraInstances],
      placement,
    }),
  );
  const artifacts = path.join(dir, "artifacts");
  const started = performance.now();
  const child = spawn(process.execPath, [BUNDLE, "run", "--spec", specFile, "--artifacts", artifacts, "--backend", "systemd", "--backend-config", configFile], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<number | null>((resolve) => child.on("close", resolve));
  let duringError: unknown;
  if (during !== undefined) {
    let runId: string | undefined;
    while (runId === undefined && child.exitCode === null) {
      await new Promise((r) => setTimeout(r, 200));
      runId = fs.existsSync(artifacts) ? fs.readdirSync(artifacts).find((f) => f.startsWith("society-") && fs.statSync(path.join(artifacts, f)).isDirectory()) : undefined;
    }
    if (runId !== undefined) await during(runId).catch((e: unknown) => (duringError = e));
  }
  const code = await closed;
  const ms = performance.now() - started;
  if (duringError !== undefined) throw duringError;
  const line = stdout.trim().split("\n").at(-1) ?? "";
  let summary: RunResult["summary"];
  try {
    summary = JSON.parse(line) as RunResult["summary"];
  } catch {
    throw new Error(`no summary line (exit ${code}); stderr:\n${stderr}`);
  }
  return { code, summary, stderr, ms };
}

function ledgerRecords(ledgerPath: string): { kind: string; [k: string]: unknown }[] {
  return fs
    .readFileSync(path.join(ledgerPath, "records.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { kind: string });
}

beforeAll(async () => {
  if (skip !== undefined) return;
  mp = await startStandin();
  work = fs.mkdtempSync(path.join(os.tmpdir(), "systemd-backend-"));
  prefix = `sdb${Math.random().toString(16).slice(2, 8)}`;
  const launched = await Promise.all(
    MACHINES.map((m) => multipass(["launch", "--name", instance(m), "--cpus", "1", "--memory", "1G", "--disk", "5G", "--cloud-init", "-"], USER_DATA)),
  );
  launched.forEach((r, i) => {
    if (r.code !== 0) throw new Error(`launch ${instance(MACHINES[i]!)} failed (exit ${r.code}): ${r.stderr}`);
  });
  for (const m of MACHINES) {
    const wait = await multipass(["exec", instance(m), "--", "cloud-init", "status", "--wait"]);
    if (wait.code !== 0) throw new Error(`cloud-init on ${instance(m)}: exit ${wait.code} ${wait.stdout} ${wait.stderr}`);
    const info = JSON.parse((await multipass(["info", instance(m), "--format", "json"])).stdout) as { info: Record<string, { ipv4: string[] }> };
    ips[m] = info.info[instance(m)]!.ipv4[0]!;
  }
}, 600_000);

afterAll(async () => {
  await mp?.stop();
  if (work !== "") fs.rmSync(work, { recursive: true, force: true });
}, 300_000);

const SPEC_HEAD = `apiVersion: cohort-lab/v1
kind: Cohort
name: society
startupTimeout: 90s
memberTimeout: 60s
stopGracePeriod: 5s
`;

describe("systemd backend on the Multipass stand-in", () => {
  it("runs members as transient units on the instances their roles are placed on, probes them across the bridge, and removes them", async (ctx) => {
    if (skip !== undefined) return ctx.skip(skip);
    const spec = `${SPEC_HEAD}hold: 8s
roles:
  - name: api
    app:
      command: ["python3", "-m", "http.server", "--bind", "0.0.0.0", "$(COHORT_PORT)"]
      secretEnv: [TOKEN]
    readiness: { tcp: {} }
  - name: worker
    replicas: 2
    needs: [api]
    app:
      command: ["sh", "-c", "printf %s \\"$COHORT_NEEDS\\" > needs.json; test -n \\"$TOKEN\\" && echo has-token; exec python3 -m http.server --bind 0.0.0.0 $COHORT_PORT"]
      secretEnv: [TOKEN]
    readiness: { http: { path: / } }
  - name: edge
    needs: [worker]
    app:
      command: ["python3", "-m", "http.server", "--bind", "0.0.0.0", "$(COHORT_PORT)"]
    readiness: { tcp: {} }
`;
    const placement = { api: "m1", worker: "m2", edge: "m3" };
    const seen: Record<string, string> = {};
    let needs = "";
    let envFileMode = "";
    const result = await runCohort("happy", spec, placement, async (runId) => {
      const expected: [string, string][] = [
        ["m1", `cohort-${runId}-api-0.service`],
        ["m2", `cohort-${runId}-worker-0.service`],
        ["m2", `cohort-${runId}-worker-1.service`],
        ["m3", `cohort-${runId}-edge-0.service`],
      ];
      const deadline = Date.now() + 60_000;
      for (const [machine, unit] of expected) {
        while ((seen[unit] = await isActive(machine, unit)) !== "active" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 300));
      }
      // Each unit exists only on its own instance.
      expect(await isActive("m1", `cohort-${runId}-worker-0.service`)).not.toBe("active");
      needs = (await multipass(["exec", instance("m2"), "--", "sudo", "-n", "cat", `/var/lib/cohort/${runId}/worker-0/needs.json`])).stdout;
      envFileMode = (await multipass(["exec", instance("m2"), "--", "sudo", "-n", "stat", "-c", "%a %U", `/run/cohort/cohort-${runId}-worker-0.service.env`])).stdout.trim();
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.summary.outcome).toBe("succeeded");
    const runId = result.summary.runId;
    expect(seen).toEqual({
      [`cohort-${runId}-api-0.service`]: "active",
      [`cohort-${runId}-worker-0.service`]: "active",
      [`cohort-${runId}-worker-1.service`]: "active",
      [`cohort-${runId}-edge-0.service`]: "active",
    });
    // The env file survived systemd's parser: COHORT_NEEDS is the api's address on m1, across the bridge.
    expect(JSON.parse(needs)).toEqual({ api: [`${ips.m1}:8000`] });
    expect(envFileMode).toBe("600 root");
    // After teardown: no unit of the run is loaded anywhere, and the env files are gone.
    for (const m of MACHINES) expect(await loadedUnits(m, runId)).toEqual([]);
    expect((await multipass(["exec", instance("m2"), "--", "sudo", "-n", "ls", "/run/cohort"])).stdout.trim()).toBe("");
    const verify = await execFileP(process.execPath, [BUNDLE, "ledger", "verify", result.summary.ledgerPath]);
    expect(verify.stdout + verify.stderr).toMatch(/ok|verified/i);
    const records = ledgerRecords(result.summary.ledgerPath);
    const started = records.filter((r) => r.kind === "member-started");
    expect(started.map((r) => (r.detail as { unit?: string; instance?: string } | undefined)?.instance ?? r.instance).sort()).toEqual(
      [instance("m1"), instance("m2"), instance("m2"), instance("m3")].sort(),
    );
  });

  it("fails fast when a member exits before it is ready, naming it with its journal lines (secrets redacted)", async (ctx) => {
    if (skip !== undefined) return ctx.skip(skip);
    const spec = `${SPEC_HEAD}roles:
  - name: api
    app:
      command: ["python3", "-m", "http.server", "--bind", "0.0.0.0", "$(COHORT_PORT)"]
    readiness: { tcp: {} }
  - name: crasher
    needs: [api]
    app:
      command: ["sh", "-c", "echo token=$TOKEN; echo giving up >&2; exit 3"]
      secretEnv: [TOKEN]
    readiness: { tcp: {} }
`;
    const result = await runCohort("crash", spec, { api: "m1", crasher: "m2" });
    expect(result.code).toBe(1);
    expect(result.summary.outcome).toBe("failed");
    expect(result.summary.firstFailure?.member).toBe("crasher-0");
    expect(result.stderr.trim().split("\n").at(-1)).toMatch(/crasher-0/);
    expect(result.summary.firstFailure?.reason).toMatch(/^member crasher-0 exited before it was ready \(exit code 3\)/);
    expect(result.summary.firstFailure?.reason).toContain(`failed (result exit-code): main process exited with status 3 on ${instance("m2")}`);
    const failed = ledgerRecords(result.summary.ledgerPath).find((r) => r.kind === "member-failed" && r.member === "crasher-0")!;
    expect(failed.outputTail).toMatch(/token=\[redacted\]/);
    expect(failed.outputTail).toMatch(/giving up/);
    expect(failed.outputTail).toMatch(/\[systemd\] cohort-.*-crasher-0\.service: Main process exited, code=exited, status=3\/NOTIMPLEMENTED/);
    // Fast: the journal stream reported the exit, long before the 60 s member timeout.
    expect(result.ms).toBeLessThan(30_000);
    for (const m of MACHINES) expect(await loadedUnits(m, result.summary.runId)).toEqual([]);
  });

  it("hits the member timeout for a unit that starts but never listens", async (ctx) => {
    if (skip !== undefined) return ctx.skip(skip);
    const spec = `${SPEC_HEAD.replace("memberTimeout: 60s", "memberTimeout: 6s")}roles:
  - name: mute
    app:
      command: ["sleep", "600"]
    readiness: { tcp: {} }
`;
    const result = await runCohort("mute", spec, { mute: "m3" });
    expect(result.code).toBe(1);
    expect(result.summary.firstFailure?.member).toBe("mute-0");
    expect(result.summary.firstFailure?.reason).toMatch(/mute-0.*(6s|6 s|memberTimeout)/);
    for (const m of MACHINES) expect(await loadedUnits(m, result.summary.runId)).toEqual([]);
  });

  it("fails a member whose command does not exist, naming it with systemd's 203/EXEC", async (ctx) => {
    if (skip !== undefined) return ctx.skip(skip);
    const spec = `${SPEC_HEAD}roles:
  - name: ghost
    app:
      command: ["/nonexistent/serve"]
    readiness: { tcp: {} }
`;
    const result = await runCohort("ghost", spec, { ghost: "m1" });
    expect(result.code).toBe(1);
    expect(result.summary.firstFailure?.member).toBe("ghost-0");
    expect(result.summary.firstFailure?.reason).toMatch(/ghost-0/);
    const failed = ledgerRecords(result.summary.ledgerPath).find((r) => r.kind === "member-failed" && r.member === "ghost-0")!;
    expect(`${String(failed.reason)}\n${String(failed.outputTail)}`).toMatch(/203|EXEC|No such file/);
    for (const m of MACHINES) expect(await loadedUnits(m, result.summary.runId)).toEqual([]);
  });

  it("refuses to run (backend unavailable) when a placed instance does not exist, naming it and its machine", async (ctx) => {
    if (skip !== undefined) return ctx.skip(skip);
    const spec = `${SPEC_HEAD}roles:
  - name: api
    app:
      command: ["python3", "-m", "http.server", "--bind", "0.0.0.0", "$(COHORT_PORT)"]
    readiness: { tcp: {} }
`;
    const ghost = { machine: "m9", instance: `${prefix}-m9`, ipv4: "10.255.255.9" };
    const result = await runCohort("unavailable", spec, { api: "m9" }, undefined, [ghost]).catch((e: unknown) => e as Error);
    const text = result instanceof Error ? result.message : result.stderr;
    expect(text).toMatch(
      new RegExp(`instance ${ghost.instance} \\(machine m9\\) is not reachable with .*multipass exec \\(exit 2\\): exec failed: instance "${ghost.instance}" does not exist`),
    );
  });

  // Last: it stops an instance (afterAll purges them all).
  // Seen two ways on the stand-in (a race with the instance's shutdown): the journal reports the unit stopped by the
  // instance's systemd ("exited during hold ... on <instance>"), or the member's liveness probe fails first. The
  // journal stream itself outlives `multipass stop` there (its exec's journalctl is not in the container's cgroup).
  it("fails the member of a VM that stops during the hold, naming it", async (ctx) => {
    if (skip !== undefined) return ctx.skip(skip);
    const spec = `${SPEC_HEAD}hold: 60s
roles:
  - name: api
    app:
      command: ["python3", "-m", "http.server", "--bind", "0.0.0.0", "$(COHORT_PORT)"]
    readiness: { tcp: {} }
  - name: victim
    app:
      command: ["python3", "-m", "http.server", "--bind", "0.0.0.0", "$(COHORT_PORT)"]
    readiness: { tcp: {} }
`;
    let stoppedAt = 0;
    const result = await runCohort("stopped-vm", spec, { api: "m1", victim: "m3" }, async (runId) => {
      const deadline = Date.now() + 60_000;
      while ((await isActive("m3", `cohort-${runId}-victim-0.service`)) !== "active" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 300));
      // Let the roster reach its hold (both ready), then stop the VM behind the run's back.
      await new Promise((r) => setTimeout(r, 3000));
      stoppedAt = performance.now();
      const stop = await multipass(["stop", instance("m3")]);
      expect(stop.code, stop.stderr).toBe(0);
    });
    const failedAfterMs = performance.now() - stoppedAt;
    process.stderr.write(`stopped VM -> run ended in ${Math.round(failedAfterMs)} ms: ${result.summary.firstFailure?.reason ?? ""}\n`);
    expect(result.code).toBe(1);
    expect(result.summary.firstFailure?.member).toBe("victim-0");
    expect(result.summary.firstFailure?.reason).toMatch(
      new RegExp(
        `journal stream of instance ${instance("m3")} ended|^member victim-0 failed its liveness probe during hold|^member victim-0 exited during hold .* on ${instance("m3")}$`,
        // `m`: the reason's first line names the member and the instance; the unit's journal lines may follow it.
        "m",
      ),
    );
  });
});

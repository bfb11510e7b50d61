/**
 * Benchmark of the `multipass` profile (`npm run bench:multipass`): `pulumi up --stack multipass` with the real
 * engine (the pinned CLI through the launcher, a temp file backend, a temp project whose program is index.ts and
 * whose stack file is Pulumi.multipass.yaml) against the Multipass stand-in (test/tools/multipass: systemd-nspawn
 * instances with real systemd and cloud-init), 3 VMs and a cohort of BENCH_MEMBERS (default 30) light members
 * (`python3 -m http.server $COHORT_PORT`) in three roles, one role per VM (api on vm1, worker on vm2 needing api,
 * edge on vm3 needing worker); then a second `up`, and `destroy`.
 *
 * Printed (one table):
 * - `up` wall time, split into launch (the slowest VM's `multipass launch`, from the launch step's
 *   `launched in X s` line), cloud-init (the slowest VM's `cloud-init status --wait`, `cloud-init done in X s`;
 *   the VMs launch in parallel, so these are maxima over VMs, not sums), the run (the ledger's completion.json
 *   `phasesMs`: admission, startup = admission → all ready, hold, teardown) and the rest (engine, program, backend
 *   config file, summary: wall minus the three);
 * - the second `up` (no changes: the program's launch-id query and the engine) and `destroy`;
 * - the 1-minute load average before each step, and the number of CPUs.
 *
 * Env: BENCH_MEMBERS (default 30, a multiple of 3), BENCH_KEEP=1 keeps the temp project. Needs root,
 * `npm run toolchain -- multipass` and the bundle (`npm run build`).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parse, stringify } from "yaml";
import { loadExeca } from "../scripts/lib/process";
import { PROJECT_DIR } from "../stacks/config";
import { standinUnavailableReason, startStandin } from "../test/tools/multipass/harness";

const MEMBERS = Number(process.env.BENCH_MEMBERS ?? "30");
const load = (): string => (os.loadavg()[0] ?? 0).toFixed(2);
const sec = (ms: number | undefined): string => (ms === undefined ? "n/a" : (ms / 1000).toFixed(1));

/** The cohort: three roles of MEMBERS / 3 replicas, a chain of needs, light requests (10 per 1-CPU VM). */
function cohort(): Record<string, unknown> {
  if (!Number.isInteger(MEMBERS / 3) || MEMBERS < 3) throw new Error(`BENCH_MEMBERS must be a positive multiple of 3 (got ${MEMBERS})`);
  const app = { command: ["python3", "-m", "http.server", "--bind", "0.0.0.0", "$(COHORT_PORT)"] };
  const role = (name: string, needs: string[]) => ({ name, replicas: MEMBERS / 3, needs, app, readiness: { tcp: {} }, resources: { cpu: "50m", memory: "32Mi" } });
  return {
    name: "bench",
    startupTimeout: "5m",
    memberTimeout: "3m",
    hold: "5s",
    concurrency: 32,
    stopGracePeriod: "5s",
    roles: [role("api", []), role("worker", ["api"]), role("edge", ["worker"])],
  };
}

/** Max over VMs of the seconds in the launch step's `<vm>: <what> in X s` lines of `pulumi up`'s output. */
function stepSeconds(all: string, what: "launched" | "cloud-init done"): number | undefined {
  const found = [...all.matchAll(new RegExp(`: ${what} in ([0-9.]+) s`, "g"))].map((m) => Number(m[1]));
  return found.length === 0 ? undefined : Math.max(...found) * 1000;
}

async function main(): Promise<void> {
  const why = standinUnavailableReason();
  if (why !== undefined) throw new Error(`the Multipass stand-in is unavailable: ${why}`);
  const { execa } = await loadExeca();
  const mp = await startStandin();
  const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-bench-multipass-"));
  const projectDir = path.join(tmp, "project");
  mkdirSync(projectDir);
  mkdirSync(path.join(tmp, "state"));
  writeFileSync(path.join(projectDir, "Pulumi.yaml"), `${readFileSync(path.join(PROJECT_DIR, "Pulumi.yaml"), "utf8").trimEnd()}\nmain: ${path.join(PROJECT_DIR, "index.ts")}\n`);
  symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(projectDir, "node_modules"));
  const env = { ...process.env, COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`, PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local", NO_COLOR: "1" };
  const pulumi = async (args: readonly string[]) => {
    const started = performance.now();
    const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, ...args], { cwd: PROJECT_DIR, env, reject: false, all: true, stdin: "ignore" });
    const out = { ms: performance.now() - started, stdout: String(r.stdout), all: String(r.all) };
    if (r.exitCode !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${out.all.slice(-6000)}`);
    return out;
  };
  const rows: [string, string, string][] = [];
  try {
    // The stack file: the repository's (its encryption salt), with this benchmark's cohort and multipass keys.
    const stackFile = parse(readFileSync(path.join(PROJECT_DIR, "Pulumi.multipass.yaml"), "utf8")) as { config: Record<string, unknown> };
    stackFile.config["cohort-lab:cohort"] = cohort();
    stackFile.config["cohort-lab:artifactRoot"] = path.join(tmp, "artifacts");
    stackFile.config["cohort-lab:multipass"] = {
      placement: { api: "vm1", worker: "vm2", edge: "vm3" },
      cli: mp.bin,
      environment: mp.env,
      prefix: `bn${process.pid % 100000}`,
      stateDir: path.join(tmp, "mp-state"),
      launchTimeout: 300,
    };
    writeFileSync(path.join(projectDir, "Pulumi.multipass.yaml"), stringify(stackFile));
    await pulumi(["stack", "select", "--create", "multipass"]);

    const load0 = load();
    const up = await pulumi(["up", "--yes", "--skip-preview", "--stack", "multipass"]);
    const o = JSON.parse((await pulumi(["stack", "output", "--json", "--stack", "multipass"])).stdout) as {
      run: { outcome: string; size: number; readyCount: number; ledgerPath: string };
    };
    const phases = (JSON.parse(readFileSync(path.join(o.run.ledgerPath, "completion.json"), "utf8")) as { phasesMs: Record<string, number> }).phasesMs;
    const launchMs = stepSeconds(up.all, "launched");
    const cloudInitMs = stepSeconds(up.all, "cloud-init done");
    const runMs = Object.values(phases).reduce((a, b) => a + b, 0);
    rows.push(["pulumi up (3 VMs, " + String(o.run.size) + " members)", `${sec(up.ms)} s`, `outcome ${o.run.outcome}, ready ${o.run.readyCount}/${o.run.size}; load ${load0}`]);
    rows.push(["  launch (slowest VM)", `${sec(launchMs)} s`, "multipass launch, the 3 VMs in parallel"]);
    rows.push(["  cloud-init (slowest VM)", `${sec(cloudInitMs)} s`, "cloud-init status --wait"]);
    rows.push([
      "  run (ledger phasesMs)",
      `${sec(runMs)} s`,
      `admission ${sec(phases.admission)} s, all ready ${sec(phases.startup)} s, hold ${sec(phases.hold)} s, teardown ${sec(phases.teardown)} s`,
    ]);
    rows.push(["  rest", `${sec(up.ms - (launchMs ?? 0) - (cloudInitMs ?? 0) - runMs)} s`, "engine, program, backend config, summary"]);
    const load1 = load();
    const again = await pulumi(["up", "--yes", "--skip-preview", "--stack", "multipass"]);
    rows.push([
      "second pulumi up",
      `${sec(again.ms)} s`,
      `${/unchanged/.test(again.all) && !/replaced|created|updated/.test(again.all) ? "no changes" : "CHANGES (see output)"}; load ${load1}`,
    ]);
  } finally {
    const load2 = load();
    const d = await pulumi(["destroy", "--yes", "--skip-preview", "--stack", "multipass"]).catch((e: unknown) => ({ ms: Number.NaN, error: e }));
    rows.push(["pulumi destroy", `${sec(d.ms)} s`, `${"error" in d ? `FAILED: ${String(d.error).slice(0, 300)}` : "every instance purged"}; load ${load2}`]);
    const list = await execa(mp.bin, ["list", "--format", "json"], { env: { ...process.env, ...mp.env }, reject: false });
    console.log(`\nmultipass profile against the stand-in, ${os.cpus().length} CPUs (1-min load average before each step)\n`);
    const w0 = Math.max(...rows.map((r) => r[0].length));
    const w1 = Math.max(...rows.map((r) => r[1].length));
    for (const [a, b, c] of rows) console.log(`${a.padEnd(w0)}  ${b.padStart(w1)}  ${c}`);
    console.log(`instances left: ${String(list.stdout).replace(/\s+/g, " ")}`);
    if (process.env.BENCH_KEEP !== "1") rmSync(tmp, { recursive: true, force: true });
    await mp.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

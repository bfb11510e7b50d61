/**
 * Benchmark: `pulumi up` of the `host` profile for given cohort sizes, through the project's launcher
 * (`npm run pulumi`), each in a fresh stack (temp file backend, temp project directory, temp artifact root).
 * Prints, per size: the wall time of `pulumi up`, the run's time to ready, and the ready count; then
 * destroys the stack. Run with `npm run -s bench:host -- [--app openclaw|http-server] [size ...]`
 * (default: openclaw 4 16).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PROJECT_DIR } from "../stacks/config.js";

async function main(): Promise<void> {
  // execa is ESM-only and one of its dependencies has no `require` export: load it with import().
  const { execa } = await import("execa");
  const argv = process.argv.slice(2);
  const appAt = argv.indexOf("--app");
  const app = appAt >= 0 ? (argv[appAt + 1] ?? "openclaw") : "openclaw";
  const sizes = argv.filter((_a, i) => appAt < 0 || (i !== appAt && i !== appAt + 1)).map(Number);
  for (const size of sizes.length > 0 ? sizes : [4, 16]) {
    const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-bench-host-"));
    const projectDir = path.join(tmp, "project");
    mkdirSync(projectDir);
    mkdirSync(path.join(tmp, "state"));
    writeFileSync(path.join(projectDir, "Pulumi.yaml"), `${readFileSync(path.join(PROJECT_DIR, "Pulumi.yaml"), "utf8").trimEnd()}\nmain: ${path.join(PROJECT_DIR, "index.ts")}\n`);
    writeFileSync(path.join(projectDir, "Pulumi.host.yaml"), readFileSync(path.join(PROJECT_DIR, "Pulumi.host.yaml")));
    symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(projectDir, "node_modules"));
    const env = { ...process.env, COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}` };
    const pulumi = (args: string[]) => execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, ...args], { cwd: PROJECT_DIR, env, all: true });
    await pulumi(["stack", "select", "--create", "host"]);
    await pulumi(["config", "set", "--stack", "host", "artifactRoot", path.join(tmp, "artifacts")]);
    await pulumi(["config", "set", "--stack", "host", "--path", "cohort.app", app]);
    await pulumi(["config", "set", "--stack", "host", "--path", "cohort.size", String(size)]);
    const load = os.loadavg()[0]?.toFixed(1);
    const started = performance.now();
    const up = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, "up", "--yes", "--stack", "host", "--skip-preview"], {
      cwd: PROJECT_DIR,
      env,
      all: true,
      reject: false,
    });
    const wallS = (performance.now() - started) / 1000;
    if (up.exitCode !== 0) {
      console.log(`${app} size ${size}: pulumi up FAILED after ${wallS.toFixed(1)} s (load ${load}):\n${String(up.all).split("\n").slice(-6).join("\n")}`);
    } else {
      const out = JSON.parse(String((await pulumi(["stack", "output", "--json", "--stack", "host"])).stdout)) as {
        run: { timeToReadyMs: number; readyCount: number; size: number };
      };
      console.log(
        `${app} size ${size}: pulumi up ${wallS.toFixed(1)} s wall; time to ready ${(out.run.timeToReadyMs / 1000).toFixed(1)} s; ready ${out.run.readyCount}/${out.run.size} (1-min load at start ${load}, ${os.cpus().length} CPUs)`,
      );
    }
    await pulumi(["destroy", "--yes", "--stack", "host", "--skip-preview"]);
    rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

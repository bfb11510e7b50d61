/**
 * components/run/workflow-steps.cjs through the local steps file (components/kind/steps.cjs), run for real against
 * a stand-in runtime bundle (`COHORT_BUNDLE`) that answers `open-runs` and `submit` as the real one does for the
 * cases here: the environment checked before the run, a signal to the step while `cohort submit` waits, and the
 * guard's report of an unreachable Temporal.
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const SCRIPT = path.join(__dirname, "..", "..", "components", "kind", "steps.cjs");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-workflow-steps-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const calls = path.join(tmp, "calls.log");

/** The stand-in bundle: `open-runs` prints FAKE_OPEN_STDERR lines and exits FAKE_OPEN_CODE; `submit` waits for a signal. */
const bundle = path.join(tmp, "bundle.cjs");
fs.writeFileSync(
  bundle,
  `const fs = require("node:fs");
const [cmd] = process.argv.slice(2);
fs.appendFileSync(${JSON.stringify(calls)}, cmd + " " + process.pid + "\\n");
if (cmd === "open-runs") {
  for (const l of (process.env.FAKE_OPEN_STDERR ?? "").split("|").filter(Boolean)) process.stderr.write(l + "\\n");
  process.exit(Number(process.env.FAKE_OPEN_CODE ?? "0"));
}
if (cmd === "submit") { fs.readFileSync(0); setInterval(() => {}, 1000); }
`,
);

const env = {
  PATH: process.env.PATH ?? "",
  COHORT_BUNDLE: bundle,
  COHORT_TEMPORAL_ADDRESS: "127.0.0.1:1",
  COHORT_TASK_QUEUE: "cohort-runs",
  COHORT_WORKFLOW_ID: "cohort-lab/dev/0123456789ab",
  COHORT_PROFILE: "local",
  COHORT_ARTIFACTS_DIR: tmp,
  COHORT_ARTIFACTS_NODE_PATH: "/var/lib/cohort-lab-artifacts",
  COHORT_UNSUCCESSFUL_RUN_FILE: ".unsuccessful-run.json",
  COHORT_LOST_WORKFLOW_FILE: ".lost-workflow",
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("run-submit", () => {
  it("names a missing record file variable before anything runs", () => {
    for (const name of ["COHORT_UNSUCCESSFUL_RUN_FILE", "COHORT_LOST_WORKFLOW_FILE"] as const) {
      fs.rmSync(calls, { force: true });
      const { [name]: _dropped, ...rest } = env;
      const r = spawnSync(process.execPath, [SCRIPT, "run-submit"], { env: rest, input: "{}", encoding: "utf8" });
      expect(r.status).toBe(1);
      expect(r.stderr.trim()).toBe(`[cohort-lab local] missing environment variable ${name}`);
      expect(fs.existsSync(calls)).toBe(false);
    }
  });

  it("a SIGTERM while cohort submit waits ends the submitter and says the workflow goes on", { timeout: 20_000 }, async () => {
    fs.rmSync(calls, { force: true });
    const child = spawn(process.execPath, [SCRIPT, "run-submit"], { env, stdio: ["pipe", "pipe", "pipe"] });
    child.stdin.end("{}");
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += String(d)));
    while (!(fs.existsSync(calls) && fs.readFileSync(calls, "utf8").includes("submit "))) await new Promise((r) => setTimeout(r, 50));
    const submitPid = Number(/submit (\d+)/.exec(fs.readFileSync(calls, "utf8"))![1]);
    child.kill("SIGTERM");
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code).toBe(143);
    expect(stderr.trim()).toBe("cohort submit ended by SIGTERM: the workflow cohort-lab/dev/0123456789ab goes on in the run worker; `pulumi up` attaches to it");
    expect(alive(submitPid)).toBe(false);
  });
});

describe("worker-guard", () => {
  it("names a runtime bundle that does not exist (not Node's version line)", () => {
    const r = spawnSync(process.execPath, [SCRIPT, "worker-guard"], { env: { ...env, COHORT_BUNDLE: path.join(tmp, "none.cjs") }, encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe(`[cohort-lab local] the runtime bundle ${path.join(tmp, "none.cjs")} (COHORT_BUNDLE) does not exist; run \`npm run build\``);
  });

  it("shows open-runs' retry notes as they come and fails with its last line", () => {
    const r = spawnSync(process.execPath, [SCRIPT, "worker-guard"], {
      env: {
        ...env,
        FAKE_OPEN_CODE: "1",
        FAKE_OPEN_STDERR:
          "cohort: open-runs: Temporal unreachable (x); retrying in 1000 ms|    at someFrame (grpc.js:1:1)|cohort: open-runs: Temporal at 127.0.0.1:1 unreachable for 120 s (--wait-s): x",
      },
      encoding: "utf8",
    });
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines[0]).toBe("cohort: open-runs: Temporal unreachable (x); retrying in 1000 ms");
    expect(lines.at(-1)).toBe("[cohort-lab local] cohort open-runs exited with status 1: cohort: open-runs: Temporal at 127.0.0.1:1 unreachable for 120 s (--wait-s): x");
  });
});

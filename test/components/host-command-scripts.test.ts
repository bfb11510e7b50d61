/**
 * The shell steps of the host components' command resources, run for real with /bin/sh exactly as the
 * command provider runs them (`interpreter... <step>`, environment, stdin, `PULUMI_COMMAND_STDOUT`).
 * The runtime is a stand-in script that records how it was called (the real runtime is exercised
 * end to end in test/e2e/host.test.ts).
 */
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { COHORT_GUARD_STEPS, COHORT_RUN_SCRIPT, COHORT_RUN_STEPS, UNSUCCESSFUL_RUN_FILE, lastUnsuccessfulRunId } from "../../components/run/CohortRun";
import { RUNTIME_BUNDLE_SCRIPTS, runtimeBundlePath, runtimeLauncherPath } from "../../components/host/HostProfile";

const dir = mkdtempSync(path.join(os.tmpdir(), "cohort-scripts-"));
const callLog = path.join(dir, "calls.ndjson");

/**
 * A stand-in runtime: records argv and the spec; `run` succeeds, fails (FAKE_FAIL) or holds until a signal
 * (FAKE_HOLD: writes FAKE_HOLD when started, then on SIGTERM/SIGINT/SIGHUP prints an interrupted summary).
 */
const fakeRuntime = `
const fs = require("node:fs");
const specAt = process.argv.indexOf("--spec");
const stdin = process.argv[2] === "run" ? fs.readFileSync(process.argv[specAt + 1] === "-" ? 0 : process.argv[specAt + 1], "utf8") : "";
fs.appendFileSync(${JSON.stringify(callLog)}, JSON.stringify({ argv: process.argv.slice(2), stdin }) + "\\n");
if (process.argv[2] === "run") {
  process.stderr.write("progress: admitted 2 members\\nprogress: web-0 ready\\n");
  if (process.env.FAKE_HOLD) {
    for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(s, () => {
      process.stdout.write(JSON.stringify({ runId: "lab-x", outcome: "interrupted" }) + "\\n");
      process.stderr.write("cohort: run lab-x interrupted by " + s + "; 0/2 were ready; ledger /tmp/lab-x\\n");
      process.exit(128 + { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }[s]);
    });
    fs.writeFileSync(process.env.FAKE_HOLD, String(process.pid));
    setTimeout(() => process.exit(9), 20000);
  } else if (process.env.FAKE_FAIL === "1") {
    process.stdout.write(JSON.stringify({ runId: "lab-x", outcome: "failed" }) + "\\n");
    process.stderr.write("run lab-x failed: member web-1 exited before ready (exit code 1): listen EADDRINUSE\\n");
    process.exit(1);
  } else if (process.env.FAKE_REFUSE === "1") {
    process.stderr.write("cohort: refused: run lab-w (runtime pid 42) is still running\\n");
    process.exit(1);
  } else {
    process.stdout.write(JSON.stringify({ runId: "lab-x", ledgerPath: "/tmp/lab-x" }) + "\\n");
  }
}
`;
const bundle = path.join(dir, "cohort-fake.cjs");
writeFileSync(bundle, fakeRuntime);
const artifacts = path.join(dir, "artifacts");
mkdirSync(artifacts);

function calls(): { argv: string[]; stdin: string }[] {
  if (!existsSync(callLog)) return [];
  return readFileSync(callLog, "utf8")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { argv: string[]; stdin: string });
}

function stepEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    COHORT_NODE: process.execPath,
    COHORT_BUNDLE: bundle,
    COHORT_BUNDLE_FALLBACK: "",
    COHORT_ARTIFACT_ROOT: artifacts,
    COHORT_PROFILE: "host",
    COHORT_BACKEND: "process",
    COHORT_KEEP_LEDGERS: "true",
    ...env,
  };
}

function step(name: string, env: Record<string, string>, input = "") {
  writeFileSync(callLog, "");
  const result = spawnSync("/bin/sh", ["-c", COHORT_RUN_SCRIPT, "cohort", name], { input, encoding: "utf8", env: stepEnv(env) });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The run argv without the --spec file (a temp file) and the watched pids (the step shell and its parent). */
function runArgv(argv: readonly string[]): string[] {
  return argv.map((a, i) => (argv[i - 1] === "--spec" ? "<spec>" : argv[i - 1] === "--watch-pid" ? "<pid>" : a));
}

describe("CohortRun step 'cohort run'", () => {
  it("runs the runtime with the spec (from stdin, via a temp file), the artifact root's lock and the step and provider watched; stdout is the summary, progress stays out of stderr", () => {
    const r = step(COHORT_RUN_STEPS.create, {}, '{"name":"lab"}\n');
    expect(r).toEqual({ status: 0, stdout: '{"runId":"lab-x","ledgerPath":"/tmp/lab-x"}\n', stderr: "" });
    const [call] = calls();
    expect(call?.stdin).toBe('{"name":"lab"}\n');
    expect(runArgv(call?.argv ?? [])).toEqual([
      "run",
      "--spec",
      "<spec>",
      "--artifacts",
      artifacts,
      "--profile",
      "host",
      "--backend",
      "process",
      "--lock",
      "--watch-pid",
      "<pid>",
      "--watch-pid",
      "<pid>",
    ]);
    const watched = (call?.argv ?? []).filter((_a, i, all) => all[i - 1] === "--watch-pid").map(Number);
    expect(watched[1]).toBe(process.pid); // $PPID: the provider (here, this test process)
  });

  it("a failed run: exit 0 with the failed summary on stdout (the state records it), the runtime's last stderr line as the reason, and the run remembered as unsuccessful", () => {
    rmSync(path.join(artifacts, UNSUCCESSFUL_RUN_FILE), { force: true });
    const r = step(COHORT_RUN_STEPS.create, { FAKE_FAIL: "1" }, "{}");
    expect(r).toEqual({
      status: 0,
      stdout: '{"runId":"lab-x","outcome":"failed"}\n',
      stderr: "run lab-x failed: member web-1 exited before ready (exit code 1): listen EADDRINUSE\n",
    });
    expect(readFileSync(path.join(artifacts, UNSUCCESSFUL_RUN_FILE), "utf8")).toBe('{"runId":"lab-x","outcome":"failed"}\n');
    expect(lastUnsuccessfulRunId(artifacts)).toBe("lab-x");
    rmSync(path.join(artifacts, UNSUCCESSFUL_RUN_FILE));
    expect(lastUnsuccessfulRunId(artifacts)).toBe("");
  });

  it("no run (refused: the artifact root's lock is held): the step fails with the reason and its status", () => {
    const r = step(COHORT_RUN_STEPS.create, { FAKE_REFUSE: "1" }, "{}");
    expect(r).toEqual({ status: 1, stdout: "", stderr: "cohort: refused: run lab-w (runtime pid 42) is still running\n" });
  });

  it("with COHORT_STATUS_FD (the provider's status pipe) the runtime gets --progress-fd with that number", () => {
    const r = step(COHORT_RUN_STEPS.create, { COHORT_STATUS_FD: "3" }, "{}");
    expect(r.status).toBe(0);
    expect(runArgv(calls()[0]?.argv ?? [])).toEqual([
      "run",
      "--spec",
      "<spec>",
      "--artifacts",
      artifacts,
      "--profile",
      "host",
      "--backend",
      "process",
      "--progress-fd",
      "3",
      "--lock",
      "--watch-pid",
      "<pid>",
      "--watch-pid",
      "<pid>",
    ]);
  });

  it("leaves no temp file behind", () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-scripts-tmp-"));
    step(COHORT_RUN_STEPS.create, { TMPDIR: tmp }, "{}");
    step(COHORT_RUN_STEPS.create, { TMPDIR: tmp, FAKE_FAIL: "1" }, "{}");
    step(COHORT_RUN_STEPS.create, { TMPDIR: tmp, FAKE_REFUSE: "1" }, "{}");
    expect(readdirSync(tmp)).toEqual([]);
  });

  it.each(["SIGTERM", "SIGINT", "SIGHUP"] as const)(
    "%s to the step reaches the runtime; the step reports the interrupted run (exit 0) and removes its temp files",
    async (signal) => {
      const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-scripts-sig-"));
      const started = path.join(dir, `started-${signal}`);
      writeFileSync(callLog, "");
      const child = spawn("/bin/sh", ["-c", COHORT_RUN_SCRIPT, "cohort", COHORT_RUN_STEPS.create], {
        env: stepEnv({ TMPDIR: tmp, FAKE_HOLD: started }),
        stdio: ["pipe", "pipe", "pipe"],
      });
      child.stdin.end("{}");
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
      for (let i = 0; i < 400 && !existsSync(started); i++) await new Promise((r) => setTimeout(r, 25));
      expect(readdirSync(tmp)).toHaveLength(3);
      child.kill(signal);
      expect(await done).toBe(0);
      expect(stdout).toBe('{"runId":"lab-x","outcome":"interrupted"}\n');
      expect(stderr).toBe(`cohort: run lab-x interrupted by ${signal}; 0/2 were ready; ledger /tmp/lab-x\n`);
      expect(readdirSync(tmp)).toEqual([]);
    },
  );
});

describe("CohortRun guard steps", () => {
  it("create does nothing; delete reaps the run the artifact root's lock names", () => {
    expect(step(COHORT_GUARD_STEPS.create, {})).toEqual({ status: 0, stdout: "", stderr: "" });
    expect(calls()).toEqual([]);
    expect(step(COHORT_GUARD_STEPS.delete, {}).status).toBe(0);
    expect(calls()).toEqual([{ argv: ["reap", "--artifacts", artifacts], stdin: "" }]);
  });
});

describe("CohortRun step 'cohort keep' (update)", () => {
  it("prints the previous summary again and runs nothing", () => {
    const r = step(COHORT_RUN_STEPS.update, { PULUMI_COMMAND_STDOUT: '{"runId":"old"}' });
    expect(r).toEqual({ status: 0, stdout: '{"runId":"old"}', stderr: "" });
    expect(calls()).toEqual([]);
  });
});

describe("CohortRun step 'cohort reap' (delete)", () => {
  const runDir = () => {
    const d = mkdtempSync(path.join(dir, "run-"));
    writeFileSync(path.join(d, "manifest.json"), "{}");
    return d;
  };
  const summary = (ledgerPath: string) => JSON.stringify({ runId: path.basename(ledgerPath), ledgerPath });

  it("reaps the run directory named by the previous summary and keeps the ledger", () => {
    const d = runDir();
    const r = step(COHORT_RUN_STEPS.delete, { PULUMI_COMMAND_STDOUT: summary(d) });
    expect(r.status).toBe(0);
    expect(calls()).toEqual([{ argv: ["reap", d], stdin: "" }]);
    expect(existsSync(path.join(d, "manifest.json"))).toBe(true);
  });

  it("removes the run directory when keepLedgers is false", () => {
    const d = runDir();
    expect(step(COHORT_RUN_STEPS.delete, { PULUMI_COMMAND_STDOUT: summary(d), COHORT_KEEP_LEDGERS: "false" }).status).toBe(0);
    expect(calls()).toEqual([{ argv: ["reap", d], stdin: "" }]);
    expect(existsSync(d)).toBe(false);
  });

  it("does nothing without a previous summary (a run that never completed a create)", () => {
    expect(step(COHORT_RUN_STEPS.delete, {})).toEqual({ status: 0, stdout: "", stderr: "" });
    expect(calls()).toEqual([]);
  });

  it("uses the fallback bundle when the copy was deleted out of band", () => {
    const d = runDir();
    const r = step(COHORT_RUN_STEPS.delete, { PULUMI_COMMAND_STDOUT: summary(d), COHORT_BUNDLE: path.join(dir, "gone.cjs"), COHORT_BUNDLE_FALLBACK: bundle });
    expect(r.status).toBe(0);
    expect(calls()).toEqual([{ argv: ["reap", d], stdin: "" }]);
  });

  it("succeeds when both the bundle and the run directory are gone (nothing left to reap from)", () => {
    const r = step(COHORT_RUN_STEPS.delete, { PULUMI_COMMAND_STDOUT: summary(path.join(dir, "never")), COHORT_BUNDLE: path.join(dir, "gone.cjs") });
    expect(r).toEqual({ status: 0, stdout: "", stderr: "" });
  });

  it("fails, naming the fix, when the run directory exists but no runtime can reap it", () => {
    const d = runDir();
    const gone = path.join(dir, "gone.cjs");
    const r = step(COHORT_RUN_STEPS.delete, { PULUMI_COMMAND_STDOUT: summary(d), COHORT_BUNDLE: gone });
    expect(r).toEqual({ status: 1, stdout: "", stderr: `cannot reap run ${d}: the runtime bundle ${gone} is gone; run npm run build, then destroy again\n` });
    expect(existsSync(d)).toBe(true);
  });
});

describe("HostProfile bundle steps", () => {
  const source = path.join(dir, "dist-cohort.cjs");
  writeFileSync(source, "// bundle v1\n");
  const sha = createHash("sha256").update("// bundle v1\n").digest("hex");

  const run = (script: string, env: Record<string, string>) =>
    spawnSync("/bin/sh", ["-c", script], { encoding: "utf8", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env } });

  it("create makes the artifact root and copies the bundle to its content-addressed path; delete removes it", () => {
    const root = path.join(dir, "root-ok");
    const target = runtimeBundlePath(root, sha);
    const env = { COHORT_ARTIFACT_ROOT: root, COHORT_BUNDLE_SOURCE: source, COHORT_BUNDLE_PATH: target, COHORT_BUNDLE_SHA256: sha };
    expect(run(RUNTIME_BUNDLE_SCRIPTS.create, env).status).toBe(0);
    expect(readFileSync(target, "utf8")).toBe("// bundle v1\n");
    expect(readdirSync(path.dirname(target))).toEqual([path.basename(target)]);
    expect(run(RUNTIME_BUNDLE_SCRIPTS.delete, env).status).toBe(0);
    expect(existsSync(path.dirname(target))).toBe(false);
    expect(existsSync(root)).toBe(true);
    expect(run(RUNTIME_BUNDLE_SCRIPTS.delete, env).status).toBe(0);
  });

  it("with a launcher, create copies it beside the bundle copy (executable, digest checked); delete removes both", () => {
    const root = path.join(dir, "root-launcher");
    const launcher = path.join(dir, "cohort-launcher");
    writeFileSync(launcher, "launcher v1\n", { mode: 0o644 });
    const launcherSha = createHash("sha256").update("launcher v1\n").digest("hex");
    const target = runtimeBundlePath(root, sha);
    const env = {
      COHORT_ARTIFACT_ROOT: root,
      COHORT_BUNDLE_SOURCE: source,
      COHORT_BUNDLE_PATH: target,
      COHORT_BUNDLE_SHA256: sha,
      COHORT_LAUNCHER_SOURCE: launcher,
      COHORT_LAUNCHER_SHA256: launcherSha,
      COHORT_LAUNCHER_PATH: runtimeLauncherPath(target),
    };
    expect(run(RUNTIME_BUNDLE_SCRIPTS.create, env)).toMatchObject({ status: 0, stderr: "" });
    expect(readdirSync(path.dirname(target)).sort()).toEqual([`cohort-${sha.slice(0, 12)}-launcher`, path.basename(target)]);
    expect(statSync(runtimeLauncherPath(target)).mode & 0o777).toBe(0o755);
    expect(run(RUNTIME_BUNDLE_SCRIPTS.delete, env).status).toBe(0);
    expect(existsSync(path.dirname(target))).toBe(false);
    const bad = run(RUNTIME_BUNDLE_SCRIPTS.create, { ...env, COHORT_LAUNCHER_SHA256: "0".repeat(64) });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toBe(`${launcher} changed since the program read it (expected sha256 ${"0".repeat(64)}); run pulumi up again\n`);
    expect(existsSync(path.dirname(target))).toBe(false);
    // The launcher copied, then the bundle's copy fails (its source is gone): the launcher copy goes too, because
    // no delete runs for a create that failed.
    const noBundle = run(RUNTIME_BUNDLE_SCRIPTS.create, { ...env, COHORT_BUNDLE_SOURCE: path.join(dir, "missing.cjs") });
    expect(noBundle.status).not.toBe(0);
    expect(noBundle.stderr).toContain("missing.cjs");
    expect(existsSync(path.dirname(target))).toBe(false);
    // A launcher copy that was there before (another stack's create) is kept.
    expect(run(RUNTIME_BUNDLE_SCRIPTS.create, env).status).toBe(0);
    rmSync(target);
    expect(run(RUNTIME_BUNDLE_SCRIPTS.create, { ...env, COHORT_BUNDLE_SOURCE: path.join(dir, "missing.cjs") }).status).not.toBe(0);
    expect(readdirSync(path.dirname(target))).toEqual([`cohort-${sha.slice(0, 12)}-launcher`]);
  });

  it("create on a full disk removes its partial temp file (a tmpfs smaller than the bundle; root only)", (ctx) => {
    const mnt = path.join(dir, "tiny");
    mkdirSync(mnt);
    if (spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt]).status !== 0) return ctx.skip("cannot mount a tmpfs here (not root)");
    try {
      const big = path.join(dir, "big.cjs");
      writeFileSync(big, Buffer.alloc(256 * 1024, 120));
      const bigSha = createHash("sha256").update(readFileSync(big)).digest("hex");
      const target = runtimeBundlePath(mnt, bigSha);
      const r = run(RUNTIME_BUNDLE_SCRIPTS.create, { COHORT_ARTIFACT_ROOT: mnt, COHORT_BUNDLE_SOURCE: big, COHORT_BUNDLE_PATH: target, COHORT_BUNDLE_SHA256: bigSha });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain("No space left on device");
      expect(readdirSync(mnt)).toEqual([]);
    } finally {
      spawnSync("umount", [mnt]);
    }
  });

  it("create refuses a bundle whose digest changed since the program read it, leaving nothing behind", () => {
    const root = path.join(dir, "root-bad");
    mkdirSync(root);
    const wrong = "0".repeat(64);
    const target = runtimeBundlePath(root, wrong);
    const r = run(RUNTIME_BUNDLE_SCRIPTS.create, { COHORT_ARTIFACT_ROOT: root, COHORT_BUNDLE_SOURCE: source, COHORT_BUNDLE_PATH: target, COHORT_BUNDLE_SHA256: wrong });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(`${source} changed since the program read it (expected sha256 ${wrong}); run pulumi up again\n`);
    expect(existsSync(path.dirname(target))).toBe(false);
  });
});

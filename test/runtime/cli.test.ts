/**
 * The `cohort` CLI as shipped: the esbuild bundle, copied alone into an empty directory (no
 * node_modules), run with plain `node` as a real child process. Covers the summary line and exit codes,
 * spec errors, SIGTERM mid-start, `reap` after a SIGKILLed runtime, and ledger verify/show/recover.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { cgroupHierarchies } from "../../runtime/backends/process/cgroup";
import { buildBundle, processesOfRun, runBundle, tempDir, type CliExit } from "./process-helpers";

/** Live pids whose command line contains `marker` (/proc/<pid>/cmdline). */
function pidsWith(marker: string): number[] {
  return fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        return fs.readFileSync(`/proc/${name}/cmdline`, "utf8").includes(marker) && !/^\S+ \(.*\) Z /.test(fs.readFileSync(`/proc/${name}/stat`, "utf8"));
      } catch {
        return false;
      }
    })
    .map(Number);
}

let bundle = "";

beforeAll(async () => {
  // Shipped alone: a directory with nothing but the bundle and the member launcher built beside it.
  bundle = await buildBundle({ shipped: true });
}, 300_000);

type Exit = CliExit;

const cohort = (args: string[], options: Parameters<typeof runBundle>[2] = {}): Promise<Exit> => runBundle(bundle, args, options);

function writeSpec(spec: object): string {
  const file = path.join(tempDir("spec"), "cohort.json");
  fs.writeFileSync(file, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", stopGracePeriod: "2s", ...spec }));
  return file;
}

const quick = (name: string, extra: object = {}) => ({
  name,
  app: { command: ["sh", "-c", "echo ready; exec sleep 1000"], port: false },
  readiness: { log: { pattern: "^ready$" } },
  ...extra,
});

/** Resolves once `file` holds `count` lines matching `pattern`. */
async function waitForLines(file: string, pattern: RegExp, count: number): Promise<void> {
  for (;;) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
    if (text.split("\n").filter((line) => pattern.test(line)).length >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function onlyRunDir(artifacts: string): string {
  const entries = fs.readdirSync(artifacts);
  expect(entries).toHaveLength(1);
  return path.join(artifacts, entries[0]!);
}

describe("cohort CLI (bundled)", () => {
  it.runIf(fs.existsSync("/usr/bin/node") && Number(spawnSync("/usr/bin/node", ["-p", "process.versions.node.split('.')[0]"], { encoding: "utf8" }).stdout) < 22)(
    "under Node < 22 (the system /usr/bin/node) the bundle says it needs Node >= 22, exit 1, and creates nothing",
    () => {
      const artifacts = path.join(tempDir("old-node"), "a");
      const spec = path.join(tempDir("spec"), "s.json");
      fs.writeFileSync(spec, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "old", roles: [{ name: "w", app: { command: ["true"], port: false } }] }));
      for (const args of [[], ["run", "--spec", spec, "--artifacts", artifacts], ["ledger", "verify", artifacts]]) {
        const out = spawnSync("/usr/bin/node", [bundle, ...args], { encoding: "utf8" });
        expect(out.status, args.join(" ")).toBe(1);
        expect(out.stdout).toBe("");
        expect(out.stderr).toMatch(
          /^cohort: needs Node >= 22 \(this is v\d+\.\d+\.\d+\); run it with Node >= 22, or through bin\/cohort\.cjs \(npx cohort\), which uses the Node the build recorded in dist\/cohort\.node\n$/,
        );
      }
      expect(fs.existsSync(artifacts)).toBe(false);
    },
  );

  it("refuses a cycle with its full path, exit 2, before any side effect", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({ name: "cyc", roles: [quick("a", { needs: ["b"] }), quick("b", { needs: ["c"] }), quick("c", { needs: ["a"] })] });
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts]);
    expect(out).toMatchObject({ code: 2, stdout: "", stderr: "spec error: roles[2].needs[0]: dependency cycle: a -> b -> c -> a\n" });
    expect(fs.readdirSync(artifacts)).toEqual([]);
  });

  it("prints every spec problem and reads the spec from stdin", async () => {
    const out = await cohort(["run", "--spec", "-", "--artifacts", tempDir("artifacts")], {
      stdin: "apiVersion: cohort-lab/v1\nkind: Cohort\nname: s\nmemberTimeout: 90\nroles:\n  - name: agent\n    needs: [db]\n    app: { command: [x] }\n",
    });
    expect(out.code).toBe(2);
    // Both problems in one pass: the roster's own check runs beside the bad timeout's.
    expect(out.stderr).toBe(
      'spec error: memberTimeout: must be a duration with a unit (ms, s, m or h), e.g. "90s" (got 90)\n' + 'spec error: roles[0].needs[0]: unknown role "db" (known: agent)\n',
    );
    const second = await cohort(["run", "--spec", "-", "--artifacts", tempDir("artifacts")], {
      stdin: "apiVersion: cohort-lab/v1\nkind: Cohort\nname: s\nroles:\n  - name: router\n    app: { command: [x] }\n  - name: agent\n    needs: [db]\n    app: { command: [x] }\n",
    });
    expect(second.stderr).toBe('spec error: roles[1].needs[0]: unknown role "db" (known: router, agent)\n');
  });

  it("runs a cohort: one JSON summary line on stdout, exit 0; the ledger verifies and shows a timeline", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({ name: "ok", roles: [quick("router"), quick("agent", { replicas: 3, needs: ["router"] })] });
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts, "--profile", "host"]);
    expect(out.code).toBe(0);
    const lines = out.stdout.split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe("");
    const summary = JSON.parse(lines[0]!);
    const runDir = onlyRunDir(artifacts);
    expect(Object.keys(summary)).toEqual(["runId", "outcome", "size", "readyCount", "timeToReadyMs", "ledgerPath", "reportPath", "firstFailure"]);
    expect(summary).toMatchObject({ outcome: "succeeded", size: 4, readyCount: 4, ledgerPath: runDir, reportPath: path.join(runDir, "report.html"), firstFailure: null });
    expect(fs.readFileSync(summary.reportPath, "utf8")).toMatch(/^<!doctype html>/);
    expect(summary.runId).toMatch(/^ok-\d{8}T\d{6}Z-[0-9a-f]{6}$/);
    expect(path.basename(runDir)).toBe(summary.runId);
    expect(summary.timeToReadyMs).toBeGreaterThan(0);
    expect(out.stderr).toMatch(/started 4\/4 ready 4\/4/);
    expect(out.stderr.trimEnd().split("\n").at(-1)).toMatch(new RegExp(`^cohort: run ${summary.runId} succeeded: 4/4 ready in [0-9.]+ms; ledger ${runDir}$`));

    const verify = await cohort(["ledger", "verify", runDir]);
    expect(verify.code).toBe(0);
    expect(verify.stdout).toMatch(new RegExp(`^ok: ${summary.runId}: \\d+ records, outcome succeeded\\n$`));
    const show = await cohort(["ledger", "show", runDir]);
    expect(show.code).toBe(0);
    for (const member of ["router-0", "agent-0", "agent-1", "agent-2"]) expect(show.stdout).toContain(member);
    expect(show.stdout).toMatch(/critical path: router-0 -> agent-\d/);

    // A corrupted middle line and a seq gap are named errors; recover refuses both.
    const records = path.join(runDir, "records.ndjson");
    const original = fs.readFileSync(records, "utf8");
    const lines2 = original.split("\n");
    fs.writeFileSync(records, [...lines2.slice(0, 2), lines2[2]!.replace('"kind":"', '"kind":"x'), ...lines2.slice(3)].join("\n"));
    const corrupted = await cohort(["ledger", "verify", runDir]);
    expect(corrupted.code).toBe(1);
    expect(corrupted.stderr).toMatch(/^cohort: ledger verify failed: ledger .*: hash-chain-broken at line 4: /);
    expect((await cohort(["ledger", "recover", runDir])).code).toBe(1);
    fs.writeFileSync(records, [...lines2.slice(0, 2), ...lines2.slice(3)].join("\n"));
    const gap = await cohort(["ledger", "verify", runDir]);
    expect(gap.code).toBe(1);
    expect(gap.stderr).toMatch(/^cohort: ledger verify failed: ledger .*: seq-gap at line 3: /);
    fs.writeFileSync(records, original);
    expect((await cohort(["ledger", "verify", runDir])).code).toBe(0);
  });

  it("a member's descendant that left its process group (setsid) is stopped at teardown, found by its COHORT_RUN_ID", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({
      name: "esc",
      hold: "0s",
      roles: [{ name: "esc", app: { command: ["sh", "-c", "setsid sleep 937 & echo ready; exec sleep 1000"], port: false }, readiness: { log: { pattern: "^ready$" } } }],
    });
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts]);
    expect(out.code).toBe(0);
    const { runId } = JSON.parse(out.stdout) as { runId: string };
    const left = fs
      .readdirSync("/proc")
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          return fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`COHORT_RUN_ID=${runId}`);
        } catch {
          return false;
        }
      });
    expect(left).toEqual([]);
  });

  it("a failed run exits 1; the last stderr line is the one-line reason naming the member", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({
      name: "bad",
      roles: [
        quick("router"),
        { name: "db", needs: ["router"], app: { command: ["sh", "-c", "echo 'fatal: no config' >&2; exit 3"], port: false }, readiness: { log: { pattern: "x" } } },
      ],
    });
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts]);
    expect(out.code).toBe(1);
    const summary = JSON.parse(out.stdout);
    expect(summary).toMatchObject({ outcome: "failed", readyCount: 1, timeToReadyMs: null });
    expect(summary.firstFailure).toEqual({ member: "db-0", reason: "member db-0 exited before it was ready (exit code 3)\nfatal: no config" });
    const stderr = out.stderr.trimEnd().split("\n");
    expect(stderr.slice(-3)).toEqual([
      "cohort: last output of db-0:",
      "  | fatal: no config",
      `cohort: run ${summary.runId} failed: member db-0 exited before it was ready (exit code 3)`,
    ]);
    expect(processesOfRun(summary.runId)).toEqual([]);
  });

  it("SIGTERM to the runtime mid-start: outcome interrupted, exit 143, a complete ledger that verifies, no orphan", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({
      name: "sig",
      roles: [quick("router"), { name: "agent", replicas: 3, needs: ["router"], app: { command: ["sleep", "1000"] }, readiness: { tcp: {} } }],
    });
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts], {
      onStart: (child) => {
        void (async () => {
          while (fs.readdirSync(artifacts).length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
          await waitForLines(path.join(onlyRunDir(artifacts), "records.ndjson"), /"kind":"member-started","member":"agent-/, 3);
          child.kill("SIGTERM");
        })();
      },
    });
    expect(out.code).toBe(143);
    const summary = JSON.parse(out.stdout);
    expect(summary).toMatchObject({ outcome: "interrupted", size: 4, readyCount: 1, firstFailure: null });
    expect(out.stderr).toContain("cohort: SIGTERM: stopping members (send again to kill them now)");
    expect(out.stderr.trimEnd().split("\n").at(-1)).toMatch(/^cohort: run sig-\S+ interrupted by SIGTERM; 1\/4 were ready; ledger /);
    const runDir = onlyRunDir(artifacts);
    expect(JSON.parse(fs.readFileSync(path.join(runDir, "completion.json"), "utf8"))).toMatchObject({ outcome: "interrupted", firstFailure: null });
    const verify = await cohort(["ledger", "verify", runDir]);
    expect(verify.stdout).toMatch(/, outcome interrupted\n$/);
    expect(processesOfRun(summary.runId)).toEqual([]);
  });

  it("a second SIGTERM during a slow teardown kills the members at once; the completion is still written", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({
      name: "stubborn",
      stopGracePeriod: "10m",
      roles: [
        {
          name: "deaf",
          replicas: 2,
          app: { command: ["sh", "-c", 'trap "" TERM; echo ready; while :; do sleep 1; done'], port: false },
          readiness: { log: { pattern: "^ready$" } },
        },
      ],
      hold: "10m",
    });
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts], {
      onStart: (child) => {
        void (async () => {
          while (fs.readdirSync(artifacts).length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
          const records = path.join(onlyRunDir(artifacts), "records.ndjson");
          await waitForLines(records, /"kind":"hold-started"/, 1);
          child.kill("SIGTERM");
          await waitForLines(records, /"kind":"member-stopping"/, 2);
          child.kill("SIGTERM");
        })();
      },
    });
    expect(out.code).toBe(143);
    expect(out.stderr).toContain("cohort: SIGTERM: killing members");
    const summary = JSON.parse(out.stdout);
    expect(summary).toMatchObject({ outcome: "interrupted", readyCount: 2 });
    const runDir = onlyRunDir(artifacts);
    expect(JSON.parse(fs.readFileSync(path.join(runDir, "completion.json"), "utf8"))).toMatchObject({ outcome: "interrupted" });
    expect((await cohort(["ledger", "verify", runDir])).code).toBe(0);
    expect(processesOfRun(summary.runId)).toEqual([]);
  });

  it("reap stops the members of a run whose runtime was SIGKILLed; the torn ledger is recovered", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({
      name: "orphans",
      roles: [quick("router"), { name: "agent", replicas: 2, needs: ["router"], app: { command: ["sh", "-c", "sleep 1000 & exec sleep 1000"] }, readiness: { tcp: {} } }],
    });
    let runDir = "";
    // launcher=direct: the members are the runtime's own children, so a SIGKILLed runtime leaves them behind.
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts, "--backend-option", "launcher=direct"], {
      onStart: (child) => {
        void (async () => {
          while (fs.readdirSync(artifacts).length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
          runDir = onlyRunDir(artifacts);
          await waitForLines(path.join(runDir, "records.ndjson"), /"kind":"member-started","member":"agent-/, 2);
          // `member-started` means the agents exec'd, not that each has forked its `sleep 1000 &` yet.
          for (const deadline = Date.now() + 5_000; processesOfRun(path.basename(runDir)).length < 5 && Date.now() < deadline;) {
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          child.kill("SIGKILL");
        })();
      },
    });
    expect(out.signal).toBe("SIGKILL");
    const runId = path.basename(runDir);
    // router-0, and agent-0/1 each with a child: 5 processes survive the runtime.
    expect(processesOfRun(runId).length).toBe(5);
    const reap = await cohort(["reap", runDir, "--grace", "500"]);
    expect(reap.code).toBe(0);
    expect(
      reap.stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => line.replace(/group \d+/, "group N")),
    ).toEqual([
      "stopped member agent-0 (process group N, 2 process(es))",
      "stopped member agent-1 (process group N, 2 process(es))",
      "stopped member router-0 (process group N, 1 process(es))",
    ]);
    expect(processesOfRun(runId)).toEqual([]);
    expect((await cohort(["reap", runDir])).stdout).toBe(`nothing left running for run ${runId}\n`);

    // No completion.json: the run reads as crashed; a torn final line is cut by recover, nothing else.
    expect((await cohort(["ledger", "verify", runDir])).stdout).toMatch(/no completion\.json \(crashed or still running\)\n$/);
    fs.appendFileSync(path.join(runDir, "records.ndjson"), '{"seq":999,"at":"2026-');
    const torn = await cohort(["ledger", "verify", runDir]);
    expect(torn.code).toBe(1);
    expect(torn.stderr).toMatch(/torn-final-line/);
    const recover = await cohort(["ledger", "recover", runDir]);
    expect(recover.code).toBe(0);
    expect(recover.stdout).toMatch(/^recovered: cut a torn final line \(22 bytes, kept in .*records\.ndjson\.torn-\S+\)\n$/);
    expect((await cohort(["ledger", "verify", runDir])).code).toBe(0);
  });

  const cgroupReady = process.platform === "linux" && process.getuid?.() === 0 && cgroupHierarchies().length > 0;
  if (!cgroupReady) console.log("skipping the cgroup reap test: needs Linux, root and a writable cgroup2 or freezer hierarchy");
  it.skipIf(!cgroupReady)("reap stops a member's child that escaped with `setsid env -i` (through the run's cgroups) after the runtime was SIGKILLed", async () => {
    const artifacts = tempDir("artifacts");
    const tag = `1000.${process.pid}4242`;
    const spec = writeSpec({
      name: "escape",
      hold: "60s",
      roles: [{ name: "a", app: { command: ["sh", "-c", `setsid env -i sleep ${tag} & echo ready; exec sleep 1000`], port: false }, readiness: { log: { pattern: "^ready$" } } }],
    });
    let runDir = "";
    // launcher=direct: the member is the runtime's own child, so a SIGKILLed runtime leaves it (and its escaped
    // child) behind; the launchers kill their cgroups themselves (next tests).
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts, "--backend-option", "launcher=direct"], {
      onStart: (child) => {
        void (async () => {
          while (fs.readdirSync(artifacts).length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
          runDir = onlyRunDir(artifacts);
          await waitForLines(path.join(runDir, "records.ndjson"), /"kind":"hold-started"/, 1);
          child.kill("SIGKILL");
        })();
      },
    });
    expect(out.signal).toBe("SIGKILL");
    const runId = path.basename(runDir);
    expect(processesOfRun(runId)).toHaveLength(1); // the leader (exec sleep 1000): COHORT_RUN_ID in its environment
    expect(pidsWith(tag)).toHaveLength(1); // the escaped sleep: neither its group nor its environment
    const reap = await cohort(["reap", runDir, "--grace", "500"]);
    expect(reap.code).toBe(0);
    const dirs = cgroupHierarchies().map((h) => path.join(h.mount, "cohort", runId, "a-0"));
    expect(reap.stdout).toMatch(
      new RegExp(`^stopped member a-0 \\(process group \\d+, 1 process\\(es\\)\\)\nstopped member a-0 \\(cgroup (${dirs.join("|")}), 1 process\\(es\\)\\)\n$`),
    );
    expect(pidsWith(tag)).toEqual([]);
    for (const h of cgroupHierarchies()) expect(fs.existsSync(path.join(h.mount, "cohort", runId))).toBe(false);
    expect((await cohort(["reap", runDir])).stdout).toBe(`nothing left running for run ${runId}\n`);
  });

  it("reap while the runtime is alive: the runtime is stopped (it tears down and completes as interrupted)", async () => {
    const artifacts = tempDir("artifacts");
    const spec = writeSpec({
      name: "live",
      roles: [quick("router"), { name: "agent", needs: ["router"], app: { command: ["sleep", "1000"] }, readiness: { tcp: {} } }],
    });
    let reap: Exit | null = null;
    const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts], {
      onStart: () => {
        void (async () => {
          while (fs.readdirSync(artifacts).length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
          const runDir = onlyRunDir(artifacts);
          await waitForLines(path.join(runDir, "records.ndjson"), /"kind":"member-started","member":"agent-0"/, 1);
          reap = await cohort(["reap", runDir]);
        })();
      },
    });
    expect(out.code).toBe(143);
    expect(JSON.parse(out.stdout)).toMatchObject({ outcome: "interrupted" });
    while (reap === null) await new Promise((resolve) => setTimeout(resolve, 25));
    const reaped = reap as Exit;
    expect(reaped.code).toBe(0);
    expect(reaped.stdout).toMatch(/^stopped runtime pid \d+ of run live-\S+\n/);
    expect(processesOfRun(JSON.parse(out.stdout).runId)).toEqual([]);
  });

  it.each(["native", "perl"])(
    "with the %s launcher, a SIGKILLed runtime leaves no member behind, nor a child that escaped its group (the launcher kills them)",
    async (launcher) => {
      const artifacts = tempDir("artifacts");
      const tag = `1000.${process.pid}${launcher === "native" ? 1 : 2}4343`;
      const spec = writeSpec({
        name: "launcher",
        roles: [
          // With cgroups, the router also starts a child that leaves its group and environment: the launcher kills it
          // through the router's cgroup.
          quick("router", cgroupReady ? { app: { command: ["sh", "-c", `setsid env -i sleep ${tag} & echo ready; exec sleep 1000`], port: false } } : {}),
          { name: "agent", replicas: 2, needs: ["router"], app: { command: ["sh", "-c", "sleep 1000 & exec sleep 1000"] }, readiness: { tcp: {} } },
        ],
      });
      let runDir = "";
      const out = await cohort(["run", "--spec", spec, "--artifacts", artifacts, "--backend-option", `launcher=${launcher}`], {
        onStart: (child) => {
          void (async () => {
            while (fs.readdirSync(artifacts).length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
            runDir = onlyRunDir(artifacts);
            await waitForLines(path.join(runDir, "records.ndjson"), /"kind":"member-started","member":"agent-/, 2);
            child.kill("SIGKILL");
          })();
        },
      });
      expect(out.signal).toBe("SIGKILL");
      const runId = path.basename(runDir);
      for (let i = 0; i < 100 && (processesOfRun(runId).length > 0 || pidsWith(tag).length > 0); i++) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(processesOfRun(runId)).toEqual([]);
      expect(pidsWith(tag)).toEqual([]);
      expect((await cohort(["reap", runDir])).stdout).toBe(`nothing left running for run ${runId}\n`);
      for (const h of cgroupHierarchies()) expect(fs.existsSync(path.join(h.mount, "cohort", runId))).toBe(false); // reap removed the empty cgroups
    },
  );

  it("a launcher that never answers fails the run (bounded) instead of hanging it, and is not left running", async () => {
    const dir = tempDir("stuck");
    const stuck = path.join(dir, "stuck-launcher");
    fs.writeFileSync(stuck, "#!/bin/sh\nexec sleep 987654\n", { mode: 0o755 });
    const spec = writeSpec({ name: "stuck", admissionTimeout: "30s", roles: [quick("a")] });
    const out = await cohort(["run", "--spec", spec, "--artifacts", tempDir("artifacts")], { env: { COHORT_LAUNCHER: stuck } });
    expect(out.code).toBe(1);
    const summary = JSON.parse(out.stdout);
    expect(summary).toMatchObject({ outcome: "failed", readyCount: 0 });
    expect(summary.firstFailure.reason).toContain(`the native launcher ${stuck} did not start: no \`ready\` line within 10000 ms`);
    const { execFileSync } = await import("node:child_process");
    expect(execFileSync("ps", ["-eo", "args"], { encoding: "utf8" })).not.toContain("sleep 987654"); // SIGKILLed after the boot timeout
    expect((await cohort(["ledger", "verify", summary.ledgerPath])).code).toBe(0);
  }, 60_000);

  it("rejects unknown process backend options", async () => {
    const spec = writeSpec({ name: "opts", roles: [quick("a")] });
    const out = await cohort(["run", "--spec", spec, "--artifacts", tempDir("artifacts"), "--backend-option", "launcher=fast", "--backend-option", "colour=red"]);
    expect(out).toMatchObject({ code: 2, stdout: "" });
    expect(out.stderr).toBe('spec error: process.launcher: must be one of "auto", "native", "perl", "direct"; got "fast"\n');
  });

  it("usage errors exit 2", async () => {
    expect(await cohort(["run", "--spec", "x.yaml"])).toMatchObject({ code: 2 });
    expect((await cohort(["run", "--spec", "x", "--artifacts", "y", "--backend", "nope"])).stderr).toMatch(
      /^cohort: run: unknown backend "nope" \(known: kubernetes, process, systemd\)\n/,
    );
    expect((await cohort(["frobnicate"])).code).toBe(2);
    // A grace no timer can hold is refused before anything is signalled, naming the range.
    const reap = await cohort(["reap", "/nonexistent-run-dir", "--grace", "4294967296"]);
    expect(reap.code).toBe(2);
    expect(reap.stderr).toMatch(/--grace expects a whole number of milliseconds from 0 to 2147483647; got "4294967296"/);
  });
});

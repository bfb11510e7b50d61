/**
 * components/kind/steps.cjs `run-progress`, the progress follower of the `local` profile's runtime Job
 * (components/run/kubernetesJob.ts): what it keeps of the Job's log and how it follows it.
 *
 * - The filter (`isProgressLine`, `progressFilter`) against REAL runtime output: the bundled runtime
 *   (dist/cohort.cjs) runs with the process backend and no `--progress-fd`, stdout and stderr into one file as in a
 *   pod's log; the filter keeps exactly the progress lines the runtime wrote (the same lines `--progress-fd` gives
 *   on the host profile), not the JSON summary, the closing line, or member output the runtime quotes on a failure.
 * - The step run for real (a Node child with fd 3 a pipe, as the substitute command provider opens it) against a
 *   stand-in `kubectl` that streams that real log line by line: progress arrives on fd 3 WHILE the log is streamed,
 *   stdout stays empty, exit 0; a pod still initialising is retried; a stream that outlives the Job is ended
 *   within the grace; an unreachable API and a missing status pipe are one note and exit 0.
 */
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = path.join(__dirname, "..", "..");
const SCRIPT = path.join(ROOT, "components", "kind", "steps.cjs");
const BUNDLE = path.join(ROOT, "dist", "cohort.cjs");
const { isProgressLine, progressFilter } = createRequire(__filename)(SCRIPT) as {
  isProgressLine: (line: string) => boolean;
  progressFilter: () => { push: (chunk: string) => string[]; end: () => string[] };
};

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-run-progress-"));
const bin = path.join(tmp, "bin");
fs.mkdirSync(bin);

/**
 * The stand-in kubectl: `get job` is Complete once `<state>/done` exists (or fails with FAKE_UNREACHABLE=1);
 * `logs --follow` fails FAKE_INIT_ATTEMPTS times as for a pod in its init container, ends at once with exit 0 and no
 * line FAKE_EMPTY_ATTEMPTS times (counted from the first call), then streams FAKE_LOG line by
 * line (FAKE_LINE_DELAY_MS apart), marks the Job done and exits 0 — or with FAKE_HANG=1 keeps the stream open.
 */
const FAKE_KUBECTL = `#!/usr/bin/env node
const fs = require("node:fs"), path = require("node:path");
const state = process.env.FAKE_STATE;
const a = process.argv.slice(2);
fs.appendFileSync(path.join(state, "calls.log"), a.filter((x) => !x.includes("/cohort-lab-kube-")).join(" ") + "\\n");
if (process.env.FAKE_UNREACHABLE === "1") { process.stderr.write("The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?\\n"); process.exit(1); }
if (a.includes("get") && a.includes("job")) {
  const done = fs.existsSync(path.join(state, "done"));
  process.stdout.write(JSON.stringify({ status: done ? { conditions: [{ type: "Complete", status: "True" }] } : { active: 1 } }));
} else if (a.includes("logs")) {
  const attempts = path.join(state, "attempts");
  const n = fs.existsSync(attempts) ? Number(fs.readFileSync(attempts, "utf8")) : 0;
  fs.writeFileSync(attempts, String(n + 1));
  if (n < Number(process.env.FAKE_INIT_ATTEMPTS ?? 0)) { process.stderr.write('error: container "runtime" in pod "cohort-run-abcde" is waiting to start: PodInitializing\\n'); process.exit(1); }
  if (n < Number(process.env.FAKE_EMPTY_ATTEMPTS ?? 0)) process.exit(0);
  const lines = fs.readFileSync(process.env.FAKE_LOG, "utf8").split("\\n").filter(Boolean);
  let i = 0;
  const next = () => {
    if (i < lines.length) { process.stdout.write(lines[i++] + "\\n"); setTimeout(next, Number(process.env.FAKE_LINE_DELAY_MS ?? 50)); return; }
    fs.writeFileSync(path.join(state, "done"), "");
    if (process.env.FAKE_HANG === "1") setInterval(() => {}, 1000); else process.exit(0);
  };
  next();
} else { process.stderr.write("fake kubectl: unsupported " + a.join(" ") + "\\n"); process.exit(2); }
`;
const kubectl = path.join(bin, "kubectl");
fs.writeFileSync(kubectl, FAKE_KUBECTL, { mode: 0o755 });
const kubectlSha = createHash("sha256").update(FAKE_KUBECTL).digest("hex");

/** A member ready (a `ready` log line) after `seconds`. */
const member = (seconds: string) => ({ command: ["sh", "-c", `sleep ${seconds}; echo ready; exec sleep 1000`], port: false });
const onLog = { log: { pattern: "^ready$" } };

interface PodLog {
  readonly code: number | null;
  /** stdout and stderr interleaved in one file, as the container runtime writes a pod's log. */
  readonly log: string;
}

/** Runs the bundled runtime with the process backend, no `--progress-fd`: what the runtime Job's container logs. */
function runRuntime(name: string, spec: unknown): PodLog {
  const dir = path.join(tmp, name);
  fs.mkdirSync(path.join(dir, "artifacts"), { recursive: true });
  const specFile = path.join(dir, "spec.json");
  fs.writeFileSync(specFile, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", ...(spec as object) }));
  const logFile = path.join(dir, "pod.log");
  const fd = fs.openSync(logFile, "w");
  try {
    const r = spawnSync(process.execPath, [BUNDLE, "run", "--spec", specFile, "--artifacts", path.join(dir, "artifacts"), "--backend", "process"], {
      stdio: ["ignore", fd, fd],
      timeout: 120_000,
    });
    return { code: r.status, log: fs.readFileSync(logFile, "utf8") };
  } finally {
    fs.closeSync(fd);
  }
}

let ok: PodLog;
let failed: PodLog;

beforeAll(() => {
  if (!fs.existsSync(BUNDLE)) throw new Error("dist/cohort.cjs is missing: run `npm run build` first");
  // 1 router, then 4 agents ready about 0.6 s apart: startup lines naming members, a `waiting:` list at the end.
  ok = runRuntime("ok", {
    name: "follow",
    hold: "1s",
    roles: [
      { name: "router", app: member("0.3"), readiness: onLog },
      { name: "agent", replicas: 4, needs: ["router"], app: member("$(( (COHORT_INDEX + 1) * 6 / 10 ))"), readiness: onLog },
    ],
  });
  // web-1 prints lines that look like progress and a JSON object, then fails: the runtime quotes them.
  failed = runRuntime("failed", {
    name: "broken",
    roles: [
      {
        name: "web",
        replicas: 2,
        app: {
          command: [
            "sh",
            "-c",
            'if [ "$COHORT_INDEX" = 1 ]; then echo "startup: started 9/9 ready 9/9"; echo \'{"runId":"x"}\'; echo "failed: web-0: fake"; sleep 1; exit 3; fi; echo ready; exec sleep 1000',
          ],
          port: false,
        },
        readiness: onLog,
      },
    ],
  });
}, 180_000);

afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const lines = (text: string) => text.split("\n").filter((l) => l !== "");

describe("the progress filter, on real runtime output", () => {
  it("keeps the runtime's progress lines, naming members, and drops the JSON summary and the closing line", () => {
    expect(ok.code, ok.log).toBe(0);
    const all = lines(ok.log);
    const kept = all.filter(isProgressLine);
    const dropped = all.filter((l) => !isProgressLine(l));
    console.log(`[run-progress] real pod log:\n${ok.log}`);
    // Dropped: exactly the summary (stdout) and the closing line (stderr).
    expect(dropped).toHaveLength(2);
    expect(JSON.parse(dropped.find((l) => l.startsWith("{"))!)).toMatchObject({ outcome: "succeeded", readyCount: 5 });
    expect(dropped.find((l) => !l.startsWith("{"))).toMatch(/^cohort: run follow-\S+ succeeded: 5\/5 ready/);
    // Kept: the progress, from admission to done, naming members as they become ready and those awaited.
    expect(kept[0]).toMatch(/^(admission|startup): started 0\/5 ready 0\/5/);
    expect(kept.some((l) => /^startup: .*\(ready: router-0/.test(l))).toBe(true);
    expect(kept.some((l) => /^startup: .*waiting: (agent-\d(, )?)+\)$/.test(l))).toBe(true);
    expect(kept.at(-1)).toMatch(/^done: started 5\/5 ready 5\/5 stopped 5\/5$/);
  });

  it("the chunked filter gives the same lines whatever the chunk boundaries", () => {
    const expected = lines(ok.log).filter(isProgressLine);
    for (const size of [1, 7, 64, ok.log.length]) {
      const f = progressFilter();
      const got: string[] = [];
      for (let i = 0; i < ok.log.length; i += size) got.push(...f.push(ok.log.slice(i, i + size)));
      got.push(...f.end());
      expect(got, `chunks of ${size}`).toEqual(expected);
    }
  });

  it("drops member output the runtime quotes on a failure, even lines that look like progress; keeps the failure line", () => {
    expect(failed.code, failed.log).toBe(1);
    const all = lines(failed.log);
    const kept = all.filter(isProgressLine);
    console.log(`[run-progress] real pod log of a failed run:\n${failed.log}`);
    // The runtime quoted web-1's output (`  | …`): none of it is kept.
    expect(
      all.some((l) => /^\s+\| startup: started 9\/9 ready 9\/9$/.test(l)),
      failed.log,
    ).toBe(true);
    expect(kept.some((l) => l.includes("9/9"))).toBe(false);
    expect(kept.some((l) => l.includes("fake") || l.includes('"runId"'))).toBe(false);
    expect(kept).toContainEqual(expect.stringMatching(/^failed: web-1: member web-1 exited before it was ready \(exit code 3\)/));
    expect(kept.some((l) => l.startsWith("cohort: run "))).toBe(false);
  });
});

interface StepResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Lines written to fd 3, with their arrival time. */
  readonly status: { at: number; text: string }[];
  readonly ms: number;
}

/** Runs `run-progress` with fd 3 a pipe (or not open: `statusPipe: false`). */
function follow(extra: Record<string, string>, statusPipe = true): Promise<StepResult> {
  const state = fs.mkdtempSync(path.join(tmp, "state-"));
  const started = Date.now();
  const child = spawn(process.execPath, [SCRIPT, "run-progress"], {
    env: {
      PATH: process.env.PATH,
      HOME: tmp,
      FAKE_STATE: state,
      FAKE_LOG: path.join(tmp, "ok", "pod.log"),
      COHORT_KIND_BIN: kubectl, // not used by this step; tools() verifies both
      COHORT_KIND_URL: "",
      COHORT_KIND_SHA256: kubectlSha,
      COHORT_KUBECTL_BIN: kubectl,
      COHORT_KUBECTL_URL: "",
      COHORT_KUBECTL_SHA256: kubectlSha,
      COHORT_KUBECONFIG: "# cluster kind\n",
      COHORT_NAMESPACE: "follow-0123456789",
      COHORT_JOB: "cohort-run",
      COHORT_CONTAINER: "runtime",
      COHORT_WAIT_MS: "60000",
      ...(statusPipe ? { COHORT_STATUS_FD: "3" } : {}),
      ...extra,
    },
    stdio: statusPipe ? ["ignore", "pipe", "pipe", "pipe"] : ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const status: { at: number; text: string }[] = [];
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  if (statusPipe) {
    let pending = "";
    const pipe = child.stdio[3] as NodeJS.ReadableStream;
    pipe.setEncoding("utf8");
    pipe.on("data", (d: string) => {
      const parts = (pending + d).split("\n");
      pending = parts.pop()!;
      for (const text of parts) status.push({ at: Date.now(), text });
    });
  }
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr, status, ms: Date.now() - started })));
}

describe("run-progress, the step", () => {
  it("writes each progress line to fd 3 while the log streams; stdout and stderr empty; exit 0 when the Job completed", async () => {
    const r = await follow({ FAKE_LINE_DELAY_MS: "150" });
    expect([r.code, r.stdout, r.stderr]).toEqual([0, "", ""]);
    const expected = lines(ok.log).filter(isProgressLine);
    expect(r.status.map((l) => l.text)).toEqual(expected);
    // Streamed, not dumped at the end: the first line arrived well before the last one.
    expect(r.status.at(-1)!.at - r.status[0]!.at).toBeGreaterThan(150 * (lines(ok.log).length - 3));
  }, 60_000);

  it("retries while the runtime container waits for its init container, then follows", async () => {
    const r = await follow({ FAKE_INIT_ATTEMPTS: "2", FAKE_LINE_DELAY_MS: "10" });
    expect([r.code, r.stdout, r.stderr]).toEqual([0, "", ""]);
    expect(r.status.map((l) => l.text)).toEqual(lines(ok.log).filter(isProgressLine));
  }, 60_000);

  it("follows again after a stream that ended at once with no line while the Job runs (kubectl on kind, the pod in its init container)", async () => {
    const r = await follow({ FAKE_EMPTY_ATTEMPTS: "2", FAKE_LINE_DELAY_MS: "10" });
    expect([r.code, r.stdout, r.stderr]).toEqual([0, "", ""]);
    expect(r.status.map((l) => l.text)).toEqual(lines(ok.log).filter(isProgressLine));
  }, 60_000);

  it("ends a log stream that outlives the Job within the grace: the up is not held", async () => {
    const r = await follow({ FAKE_HANG: "1", FAKE_LINE_DELAY_MS: "10" });
    expect([r.code, r.stdout]).toEqual([0, ""]);
    expect(r.status.map((l) => l.text)).toEqual(lines(ok.log).filter(isProgressLine));
    // Job polled every 2 s + 2 s grace after it completed.
    expect(r.ms).toBeLessThan(lines(ok.log).length * 10 + 8000);
  }, 60_000);

  it("stops following when the status pipe's reader goes away (an interrupted `pulumi up`)", async () => {
    const state = fs.mkdtempSync(path.join(tmp, "state-"));
    const started = Date.now();
    const child = spawn(process.execPath, [SCRIPT, "run-progress"], {
      env: {
        PATH: process.env.PATH,
        HOME: tmp,
        FAKE_STATE: state,
        FAKE_LOG: path.join(tmp, "ok", "pod.log"),
        FAKE_LINE_DELAY_MS: "600",
        FAKE_HANG: "1",
        COHORT_KIND_BIN: kubectl,
        COHORT_KIND_URL: "",
        COHORT_KIND_SHA256: kubectlSha,
        COHORT_KUBECTL_BIN: kubectl,
        COHORT_KUBECTL_URL: "",
        COHORT_KUBECTL_SHA256: kubectlSha,
        COHORT_KUBECONFIG: "# cluster kind\n",
        COHORT_NAMESPACE: "ns",
        COHORT_JOB: "cohort-run",
        COHORT_CONTAINER: "runtime",
        COHORT_WAIT_MS: "60000",
        COHORT_STATUS_FD: "3",
      },
      stdio: ["ignore", "pipe", "pipe", "pipe"],
    });
    const pipe = child.stdio[3] as NodeJS.ReadableStream & { destroy: () => void };
    // Close the reading end after the first line.
    pipe.once("data", () => pipe.destroy());
    const code = await new Promise((resolve) => child.on("close", resolve));
    expect(code).toBe(0);
    // Well before the fake log's end (~6 s) and the Job's completion: it did not keep following.
    expect(Date.now() - started).toBeLessThan(600 * lines(ok.log).length);
  }, 60_000);

  it("an unreachable API: one note on stderr, nothing on fd 3 or stdout, exit 0 after the give-up time", async () => {
    const r = await follow({ FAKE_UNREACHABLE: "1", COHORT_FOLLOW_GIVE_UP_MS: "1500" });
    expect([r.code, r.stdout, r.status]).toEqual([0, "", []]);
    expect(lines(r.stderr)).toEqual([
      expect.stringMatching(/^\[cohort-lab local\] progress not shown: kubectl get job follow-0123456789\/cohort-run failed for 2 s: The connection to the server/),
    ]);
    expect(r.ms).toBeLessThan(10_000);
  }, 60_000);

  it("no status pipe (the upstream command provider): one note, exit 0 at once", async () => {
    const r = await follow({}, false);
    expect([r.code, r.stdout]).toEqual([0, ""]);
    expect(lines(r.stderr)).toEqual(["[cohort-lab local] no status pipe (COHORT_STATUS_FD): the runtime's progress is in the Job's log only"]);
    expect(r.ms).toBeLessThan(5000);
    // COHORT_STATUS_FD set but fd 3 not opened by the provider: the same.
    const unopened = await follow({ COHORT_STATUS_FD: "3" }, false);
    expect([unopened.code, unopened.stdout, unopened.stderr]).toEqual([0, "", r.stderr]);
  }, 60_000);
});

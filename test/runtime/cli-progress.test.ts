/**
 * `cohort run --progress-fd N` (what `pulumi up` shows on the CohortRun row): the bundled CLI as a real
 * child process with a pipe on fd 3. Progress lines name the members that became ready and, near the end,
 * those still awaited; they are rate-limited; they arrive while the run goes; stdout stays the one JSON
 * summary line and stderr keeps only the closing line (or, on failure, the reason).
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { buildBundle, tempDir } from "./process-helpers";

let bundle = "";

beforeAll(async () => {
  bundle = await buildBundle();
}, 300_000);

interface Line {
  readonly at: number;
  readonly text: string;
}

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
  progress: Line[];
  exitedAt: number;
}

function run(spec: object, artifacts: string): Promise<Exit> {
  return new Promise((resolve) => {
    const file = path.join(tempDir("spec"), "cohort.json");
    fs.writeFileSync(file, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", stopGracePeriod: "2s", ...spec }));
    const child = spawn(process.execPath, [bundle, "run", "--spec", file, "--artifacts", artifacts, "--progress-fd", "3"], { stdio: ["ignore", "pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let pending = "";
    const progress: Line[] = [];
    child.stdout!.on("data", (d) => (stdout += d));
    child.stderr!.on("data", (d) => (stderr += d));
    (child.stdio[3] as NodeJS.ReadableStream).setEncoding("utf8");
    (child.stdio[3] as NodeJS.ReadableStream).on("data", (d: string) => {
      const parts = (pending + d).split("\n");
      pending = parts.pop()!;
      for (const text of parts) progress.push({ at: Date.now(), text });
    });
    let exitedAt = 0;
    child.on("exit", () => (exitedAt = Date.now()));
    child.on("close", (code) => resolve({ code, stdout, stderr, progress, exitedAt }));
  });
}

/** A member ready (a `ready` log line) after `seconds`. */
const member = (seconds: string) => ({ command: ["sh", "-c", `sleep ${seconds}; echo ready; exec sleep 1000`], port: false });
const onLog = { log: { pattern: "^ready$" } };

describe("cohort run --progress-fd", () => {
  it("names ready and awaited members, at most 2 lines a second per phase, while the run goes; stdout and stderr unchanged", async () => {
    const artifacts = tempDir("artifacts");
    const out = await run(
      {
        name: "progress",
        hold: "1s",
        roles: [
          { name: "router", app: member("0.2"), readiness: onLog },
          // 12 agents ready within ~0.3 s of each other (a burst), then agent-12 and agent-13 late.
          {
            name: "agent",
            replicas: 14,
            needs: ["router"],
            app: { command: ["sh", "-c", 'if [ "$COHORT_INDEX" -ge 12 ]; then sleep 2.5; else sleep 0.3; fi; echo ready; exec sleep 1000'], port: false },
            readiness: onLog,
          },
        ],
      },
      artifacts,
    );
    expect(out.code, out.stderr).toBe(0);
    // stdout: exactly the summary; stderr: the closing line only (progress went to fd 3).
    const summary = JSON.parse(out.stdout) as { outcome: string; readyCount: number; ledgerPath: string };
    expect(out.stdout.trim().split("\n")).toHaveLength(1);
    expect(summary).toMatchObject({ outcome: "succeeded", readyCount: 15 });
    expect(out.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^cohort: run progress-\S+ succeeded: 15\/15 ready/)]);

    const texts = out.progress.map((l) => l.text);
    // Every member ready is named once (a burst: five names, then `+k more`); the names are the ledger's member-ready records.
    const lists = texts.flatMap((t) => /\(ready: ([^;)]*)/.exec(t)?.[1]?.split(", ") ?? []);
    const named = lists.filter((n) => !n.startsWith("+"));
    const more = lists.filter((n) => n.startsWith("+")).map((n) => Number(/^\+(\d+) more$/.exec(n)![1]));
    expect(more.length, texts.join("\n")).toBeGreaterThan(0);
    expect(named.length + more.reduce((a, b) => a + b, 0)).toBe(15);
    const readyInLedger = fs
      .readFileSync(path.join(summary.ledgerPath, "records.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { kind: string; member?: string })
      .filter((r) => r.kind === "member-ready")
      .map((r) => r.member);
    expect(new Set(named).size).toBe(named.length);
    for (const n of named) expect(readyInLedger).toContain(n);
    expect(named[0]).toBe("router-0");
    // The late members are named as awaited once few remain, before they are ready.
    const waiting = texts.find((t) => /waiting: agent-12, agent-13\)$/.test(t));
    expect(waiting, texts.join("\n")).toMatch(/^startup: started 15\/15 ready 13\/15 \[agent 12\/14\] \(/);
    // Roles not all ready are counted in brackets; once router-0 is ready only agent is left there.
    expect(texts[0]).toBe("startup: started 0/15 ready 0/15 [router 0/1, agent 0/14] (queued: 15)");
    // `waiting:` names only started members, `queued:` counts (or, when few are left, names) the others.
    for (const t of texts.filter((x) => x.startsWith("startup:"))) {
      const started = Number(/started (\d+)\//.exec(t)![1]);
      const queued = /queued: (\d+)/.exec(t);
      if (queued !== null) expect(Number(queued[1]), t).toBe(15 - started);
      else if (started < 15) expect(t, t).toMatch(/queued: [a-z]/);
    }
    // The hold says how long it has left.
    expect(
      texts.find((t) => t.startsWith("hold:")),
      texts.join("\n"),
    ).toMatch(/\b1s of 1s left\)$/);
    expect(texts.at(-1)).toBe("done: started 15/15 ready 15/15 stopped 15/15");
    // Lines arrive while the run goes (the waiting line more than a second before the process exits).
    expect(out.exitedAt - out.progress.find((l) => l.text === waiting)!.at).toBeGreaterThan(1000);
    // Rate: lines within one phase are >= ~500 ms apart (timer jitter allowed).
    const startup = out.progress.filter((l) => l.text.startsWith("startup:"));
    for (let i = 2; i < startup.length; i++) expect(startup[i]!.at - startup[i - 1]!.at, texts.join("\n")).toBeGreaterThanOrEqual(400);
  }, 120_000);

  it("a quiet hold is not silent: the line is repeated every 10 s with the time left", async () => {
    const out = await run({ name: "quiet", hold: "11s", roles: [{ name: "web", app: member("0"), readiness: onLog }] }, tempDir("artifacts"));
    expect(out.code, out.stderr).toBe(0);
    const hold = out.progress.filter((l) => l.text.startsWith("hold:"));
    expect(hold.map((l) => l.text)).toEqual([
      expect.stringMatching(/^hold: started 1\/1 ready 1\/1 \((ready: web-0; )?11s of 11s left\)$/),
      "hold: started 1/1 ready 1/1 (1s of 11s left)",
    ]);
    expect(hold[1]!.at - hold[0]!.at).toBeGreaterThanOrEqual(9_500);
  }, 120_000);

  it("a failure: a `failed: <member>: <reason>` line on fd 3; stderr ends with the one-line reason", async () => {
    const artifacts = tempDir("artifacts");
    const out = await run(
      {
        name: "broken",
        roles: [
          {
            name: "web",
            replicas: 2,
            app: { command: ["sh", "-c", 'if [ "$COHORT_INDEX" = 1 ]; then echo "<boom>"; exit 3; fi; exec sleep 1000'], port: false },
            readiness: onLog,
          },
        ],
      },
      artifacts,
    );
    expect(out.code).toBe(1);
    const failed = out.progress.map((l) => l.text).filter((t) => t.startsWith("failed:"));
    expect(failed).toEqual([expect.stringMatching(/^failed: web-1: member web-1 exited before it was ready \(exit code 3\)/)]);
    const stderr = out.stderr.trim().split("\n");
    expect(stderr.at(-1)).toMatch(/^cohort: run broken-\S+ failed: member web-1 exited before it was ready \(exit code 3\)/);
    expect(out.stderr).not.toMatch(/^startup:/m);
  }, 120_000);

  it("refuses a descriptor number below 3 as a usage error", async () => {
    const file = path.join(tempDir("spec"), "cohort.json");
    fs.writeFileSync(file, "{}");
    const child = spawn(process.execPath, [bundle, "run", "--spec", file, "--artifacts", tempDir("a"), "--progress-fd", "2"], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const code = await new Promise((resolve) => child.on("close", resolve));
    expect(code).toBe(2);
    expect(stderr).toContain("--progress-fd expects an open file descriptor number >= 3");
  });

  // Fds 3..~20 of a Node process are libuv's own (epoll, eventfd, io_uring, internal pipes): a --progress-fd N the
  // caller never opened must not be written (fd 14/19 crashed the runtime with SIGSEGV; 3 and 8 corrupted it).
  for (const fd of [14, 19, 8, 3]) {
    it(`--progress-fd ${fd} that the caller did not open: one stderr note, the run completes, its ledger verifies`, async () => {
      const file = path.join(tempDir("spec"), "cohort.json");
      fs.writeFileSync(
        file,
        JSON.stringify({
          apiVersion: "cohort-lab/v1",
          kind: "Cohort",
          name: `badfd-${fd}`,
          stopGracePeriod: "2s",
          roles: [{ name: "agent", replicas: 2, app: member("0"), readiness: onLog }],
        }),
      );
      const artifacts = tempDir("a");
      const exec = (args: string[]) =>
        new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((resolve) => {
          const child = spawn(process.execPath, [bundle, ...args], { stdio: ["ignore", "pipe", "pipe"] });
          let stdout = "";
          let stderr = "";
          child.stdout.on("data", (d) => (stdout += d));
          child.stderr.on("data", (d) => (stderr += d));
          child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
        });
      const out = await exec(["run", "--spec", file, "--artifacts", artifacts, "--progress-fd", String(fd)]);
      expect(out.signal).toBeNull();
      expect(out.code).toBe(0);
      expect(out.stderr).toMatch(new RegExp(`^cohort: --progress-fd ${fd} .*; progress lines are dropped$`, "m"));
      const summary = JSON.parse(out.stdout) as { outcome: string; ledgerPath: string };
      expect(summary.outcome).toBe("succeeded");
      const verify = await exec(["ledger", "verify", summary.ledgerPath]);
      expect(verify.code).toBe(0);
    }, 60_000);
  }
});

/**
 * The run lock under contention: many processes call `acquireRunLock` on one artifact root at the same instant.
 * Exactly one must win; every other one must be refused naming the winner. (Created with `open(O_EXCL)` and
 * then written, a contender could read the still-empty file, take it for stale and run beside the winner.)
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { acquireRunLock, RunLockedError } from "../../runtime/core/run-lock";
import { readProcStat } from "../../runtime/backends/process/status";
import { tempDir } from "./process-helpers";

const CONTENDER = `
import { existsSync } from "node:fs";
import { acquireRunLock } from ${JSON.stringify(path.resolve(__dirname, "../../runtime/core/run-lock.ts"))};
const [artifacts, runId, at] = process.argv.slice(2);
while (Date.now() < Number(at)) {}
acquireRunLock(artifacts, runId, artifacts + "/" + runId, async () => 0).then(
  // The winner holds the lock until the test has every other contender's answer (the release file), so a contender
  // started late on a loaded machine still contends with a live holder instead of finding the lock released.
  (held) => {
    console.log("held" + (held.reaped === null ? "" : " took-over"));
    const deadline = Date.now() + 60_000;
    const poll = setInterval(() => {
      if (existsSync(artifacts + "/release") || Date.now() > deadline) { clearInterval(poll); held.release(); }
    }, 50);
  },
  (error) => console.log(error.code === "run-locked" ? "refused" : "error " + error.message),
);
`;

/** One contender: `answered` resolves with its first output line, `exited` with all of it. */
function contend(artifacts: string, script: string, runId: string, at: number): { answered: Promise<string>; exited: Promise<string> } {
  let answer: (line: string) => void = () => undefined;
  const answered = new Promise<string>((resolve) => (answer = resolve));
  const exited = new Promise<string>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", script, artifacts, runId, String(at)], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    const onData = (d: Buffer) => {
      out += String(d);
      if (out.includes("\n")) answer(out.split("\n")[0]!.trim());
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("close", () => {
      answer(out.trim());
      resolve(out.trim());
    });
  });
  return { answered, exited };
}

describe("acquireRunLock under contention", () => {
  it("exactly one of 12 simultaneous contenders holds the lock, the rest are refused (5 rounds)", async () => {
    const script = path.join(tempDir("race"), "contender.ts");
    fs.writeFileSync(script, CONTENDER);
    for (let round = 0; round < 5; round++) {
      const artifacts = tempDir("artifacts");
      const at = Date.now() + 2_500;
      const contenders = Array.from({ length: 12 }, (_, i) => contend(artifacts, script, `run-${i}`, at));
      const results = await Promise.all(contenders.map((c) => c.answered));
      fs.writeFileSync(path.join(artifacts, "release"), "");
      await Promise.all(contenders.map((c) => c.exited));
      expect(
        results.filter((r) => r.startsWith("held")),
        results.join("; "),
      ).toEqual(["held"]);
      expect(
        results.filter((r) => r === "refused"),
        results.join("; "),
      ).toHaveLength(11);
    }
  }, 120_000);

  it("a contender that finds the lock still empty (being written) waits instead of taking it over and running beside its holder", async () => {
    // What the old open(O_EXCL)-then-write left between the two calls; the link() creation never shows it.
    const artifacts = tempDir("artifacts");
    const lockPath = path.join(artifacts, ".cohort-run.lock");
    fs.writeFileSync(lockPath, "");
    setTimeout(() => {
      const record = {
        runId: "holder",
        runDir: path.join(artifacts, "holder"),
        pid: process.ppid,
        startTicks: readProcStat(process.ppid)!.startTicks,
        createdAt: new Date().toISOString(),
      };
      fs.writeFileSync(lockPath, `${JSON.stringify(record)}\n`);
    }, 300);
    const contender = acquireRunLock(artifacts, "contender", path.join(artifacts, "contender"), async () => 0);
    await expect(contender).rejects.toBeInstanceOf(RunLockedError);
    expect(JSON.parse(fs.readFileSync(lockPath, "utf8"))).toMatchObject({ runId: "holder" });
    expect(fs.readdirSync(artifacts)).toEqual([".cohort-run.lock"]);
  });

  it("the lock is written to a temp file and linked: no temp is left, the content is complete", async () => {
    const artifacts = tempDir("artifacts");
    const held = await acquireRunLock(artifacts, "solo", path.join(artifacts, "solo"), async () => 0);
    expect(fs.readdirSync(artifacts)).toEqual([".cohort-run.lock"]);
    expect(JSON.parse(fs.readFileSync(held.path, "utf8"))).toMatchObject({ runId: "solo", pid: process.pid });
    held.release();
    expect(fs.readdirSync(artifacts)).toEqual([]);
  });
});

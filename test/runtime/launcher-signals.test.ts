/**
 * The launcher (`scripts/run.ts`, under tsx as `npm run pulumi` runs it) delivers each signal to its command
 * EXACTLY once: a signal sent to the whole process group (a terminal's Ctrl-C, a CI runner's or `timeout`'s
 * `kill -INT -<pgid>`) already reached the command and is not forwarded again (before the fix the command got
 * SIGINT twice through tsx + the launcher's two stages, three times through `npm run`, which made Pulumi skip its
 * graceful cancel); a signal sent to the launcher alone (`kill <pid>`) is forwarded once.
 *
 * The command is a small Node script that appends every signal it gets to a file. Each case runs in its own
 * session (`detached`), as a CI job does, with no terminal.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config";

const dir = mkdtempSync(path.join(os.tmpdir(), "cohort-launcher-signals-"));
const counter = path.join(dir, "counter.js");
writeFileSync(
  counter,
  `const fs = require("node:fs");
const out = process.argv[2];
for (const s of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(s, () => { fs.appendFileSync(out, s + "\\n"); if (s === "SIGTERM") setTimeout(() => process.exit(0), 1500); });
fs.writeFileSync(out, "ready\\n");
setTimeout(() => process.exit(0), 8000);
`,
);

/** Runs `launcher... node counter.js <out>` in a new session, sends SIGINT then SIGTERM, returns what the command got. */
async function signalsSeen(launcher: readonly string[], target: "group" | "launcher"): Promise<string[]> {
  const out = path.join(dir, `out-${Math.random().toString(16).slice(2)}`);
  const child = spawn(launcher[0] as string, [...launcher.slice(1), "node", counter, out], { cwd: PROJECT_DIR, detached: true, stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const deadline = Date.now() + 60_000;
  while (!existsSync(out) || readFileSync(out, "utf8") === "") {
    if (Date.now() > deadline) throw new Error("the command never started");
    await new Promise((r) => setTimeout(r, 50));
  }
  const send = (signal: NodeJS.Signals) => process.kill(target === "group" ? -(child.pid as number) : (child.pid as number), signal);
  await new Promise((r) => setTimeout(r, 300));
  send("SIGINT");
  await new Promise((r) => setTimeout(r, 1200));
  send("SIGTERM");
  await exited;
  return readFileSync(out, "utf8").trim().split("\n").slice(1);
}

const tsxLauncher = [path.join(PROJECT_DIR, "node_modules", ".bin", "tsx"), "scripts/run.ts"];

describe("launcher signal delivery", () => {
  it("a SIGINT then a SIGTERM to the process group reach the command once each (tsx + launcher stages)", async () => {
    expect(await signalsSeen(tsxLauncher, "group")).toEqual(["SIGINT", "SIGTERM"]);
  }, 90_000);

  it("the same through npm (its run-script signal manager passes a group signal on once more)", async () => {
    expect(await signalsSeen(["npm", "exec", "--", "tsx", "scripts/run.ts"], "group")).toEqual(["SIGINT", "SIGTERM"]);
  }, 90_000);

  it("a SIGINT then a SIGTERM sent to the launcher alone are forwarded once each", async () => {
    expect(await signalsSeen(tsxLauncher, "launcher")).toEqual(["SIGINT", "SIGTERM"]);
  }, 90_000);
});

/**
 * End to end: what `pulumi up` (non-interactive, the real pinned engine on a file backend, the real substitute
 * command provider and runtime) shows while a cohort runs. The runtime's progress lines reach the engine as
 * ephemeral info through the provider's status pipe (fd 3) and the non-interactive display prints the
 * CohortRun row with each one: `command:local:Command cohort-run creating (3s) startup: ... (ready: ...)`.
 * Asserts that they name members, arrive before the run's completion was written (wall-clock times of the
 * streamed output against completion.json's completedAt), are not stored in the state, and that a failed run
 * fails `up` with the one-line reason and no progress dump in the error.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config";
import { copyProject } from "./project";

const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-e2e-progress-"));
const projectDir = path.join(tmp, "project");
const artifactRoot = path.join(tmp, "artifacts");
const env = { ...process.env, COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`, PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local", NO_COLOR: "1" };

interface Line {
  readonly at: number;
  readonly text: string;
}

/** `npm run -s pulumi -- -C <project> <args>`, every output line with the wall-clock time it arrived. */
async function pulumi(args: readonly string[]): Promise<{ exitCode: number; lines: Line[]; all: string }> {
  const child = execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, ...args], { cwd: PROJECT_DIR, env, reject: false, all: true, stdin: "ignore", buffer: false });
  const lines: Line[] = [];
  let pending = "";
  child.all!.setEncoding("utf8");
  child.all!.on("data", (d: string) => {
    const parts = (pending + d).split("\n");
    pending = parts.pop()!;
    for (const text of parts) lines.push({ at: Date.now(), text });
  });
  const r = await child;
  if (pending !== "") lines.push({ at: Date.now(), text: pending });
  return { exitCode: r.exitCode ?? -1, lines, all: lines.map((l) => l.text).join("\n") };
}

async function ok(args: readonly string[]) {
  const r = await pulumi(args);
  if (r.exitCode !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${r.all.slice(-4000)}`);
  return r;
}

/** A member that logs `ready` after `delay` seconds (a shell expression), then sleeps. */
const member = (delay: string) => ({ command: ["sh", "-c", `sleep ${delay}; echo ready; exec sleep 1000`], port: false });
const onLog = { log: { pattern: "^ready$" } };

beforeAll(async () => {
  if (!existsSync(path.join(PROJECT_DIR, "dist", "cohort.cjs"))) throw new Error("dist/cohort.cjs is missing: run `npm run build` before the e2e tests");
  copyProject(projectDir, ["host"]);
  mkdirSync(path.join(tmp, "state"));
  await ok(["stack", "select", "--create", "host"]);
  await ok(["config", "set", "--stack", "host", "artifactRoot", artifactRoot]);
}, 600_000);

afterAll(async () => {
  if (existsSync(path.join(tmp, "state"))) await pulumi(["destroy", "--yes", "--stack", "host", "--skip-preview"]);
  if (process.env.COHORT_E2E_KEEP !== "1") rmSync(tmp, { recursive: true, force: true });
}, 600_000);

describe("pulumi up shows the run's progress (host, real engine)", () => {
  it("progress lines on the cohort-run row name members before the run ends; nothing of them is stored in the state", async () => {
    // 1 router, then 5 agents ready 1-5 s apart: a run of several seconds with few members left at the end.
    const roles = [
      { name: "router", app: member("1"), readiness: onLog },
      { name: "agent", replicas: 5, needs: ["router"], app: member("$((COHORT_INDEX + 1))"), readiness: onLog },
    ];
    await ok(["config", "set", "--stack", "host", "cohort", JSON.stringify({ name: "progress", roles, hold: "1s" })]);
    const r = await ok(["up", "--yes", "--stack", "host", "--skip-preview"]);
    const rows = r.lines.filter((l) => /command:local:Command\s+cohort-run\s+creating/.test(l.text) && /startup: /.test(l.text));
    console.log(`[e2e progress] ${rows.length} progress rows, e.g.\n${rows.map((l) => l.text).join("\n")}`);
    expect(rows.some((l) => /\(ready: router-0/.test(l.text))).toBe(true);
    expect(rows.some((l) => /waiting: (agent-\d(, )?)+\)$/.test(l.text))).toBe(true);

    const out = JSON.parse((await ok(["stack", "output", "--json", "--stack", "host"])).all) as { run: { ledgerPath: string } };
    const completedAt = Date.parse((JSON.parse(readFileSync(path.join(out.run.ledgerPath, "completion.json"), "utf8")) as { completedAt: string }).completedAt);
    // The waiting line for the last agents was on screen well before the run's completion was written.
    const waiting = rows.find((l) => /waiting: agent-4\)$/.test(l.text));
    expect(waiting, rows.map((l) => l.text).join("\n")).toBeDefined();
    expect(completedAt - waiting!.at).toBeGreaterThan(500);

    // Ephemeral: the state holds the summary as stdout and no progress (stderr empty).
    const state = (await ok(["stack", "export", "--stack", "host"])).all;
    const run = (JSON.parse(state) as { deployment: { resources: { urn: string; outputs?: { stdout?: string; stderr?: string } }[] } }).deployment.resources.find((x) =>
      x.urn.endsWith("::cohort-run"),
    );
    expect(run?.outputs?.stderr ?? "").toBe("");
    expect(state).not.toContain("startup: started");
  }, 900_000);

  it("a failed run fails `up` with the runtime's one-line reason; the error holds no progress lines", async () => {
    const roles = [
      {
        name: "web",
        replicas: 3,
        app: { command: ["sh", "-c", 'if [ "$COHORT_INDEX" = 2 ]; then sleep 2; exit 3; fi; echo ready; exec sleep 1000'], port: false },
        readiness: onLog,
      },
    ];
    await ok(["config", "set", "--stack", "host", "cohort", JSON.stringify({ name: "broken", roles })]);
    const r = await pulumi(["up", "--yes", "--stack", "host", "--skip-preview"]);
    expect(r.exitCode).not.toBe(0);
    const diagnostics = r.all.slice(r.all.indexOf("Diagnostics:"));
    console.log(`[e2e progress] failed up, diagnostics:\n${diagnostics.slice(0, 2000)}`);
    // The run step records the failed run (exit 0 with its summary); the CohortRun fails the deployment with
    // the runtime's one-line reason (components/run/CohortRun.ts).
    expect(diagnostics).toMatch(
      /cohortlab:runtime:CohortRun \(cohort\):\s*\n(?:\s*roster: .*\n)?\s*error: cohort: run broken-\S+ failed: member web-2 exited before it was ready \(exit code 3\); report: \/\S+\/broken-\S+\/report\.html\s*\n\s*\n/,
    );
    expect(diagnostics).not.toMatch(/startup: started/);
    // The progress was shown during the run, the failure named there too.
    expect(r.lines.some((l) => /cohort-run\s+creating.*failed: web-2: member web-2 exited/.test(l.text))).toBe(true);
    const runs = readdirSync(artifactRoot).filter((d) => d.startsWith("broken-"));
    expect(runs).toHaveLength(1);
  }, 900_000);
});

/**
 * End to end, the config ergonomics of the `host` profile with the real Pulumi engine (the pinned CLI
 * through the project's launcher, `npm run pulumi`), nothing ever run (only `preview`): the file backend
 * and the artifact root in a temp dir, the project a temp copy of Pulumi.yaml + Pulumi.host.yaml whose
 * `main` is this repository's index.ts (as test/e2e/host.test.ts does).
 *
 * Covers (issue #16, "Config ergonomics"): every problem is printed once and counted as one error; a
 * flat key does not hide a second problem; fix hints name `npm run pulumi -- ... --stack host`; roles set
 * from the CLI as a JSON list; preview shows the roster it will run; an artifactRoot that is a file is
 * refused at preview; `no stack named 'host' found` names the backend that was searched.
 *
 * Needs the toolchain (`npm run toolchain`); it fails, not skips, without it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config";
import { copyProject } from "./project";

const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-e2e-host-config-"));
const projectDir = path.join(tmp, "project");
const artifactRoot = path.join(tmp, "artifacts");
const backendUrl = `file://${path.join(tmp, "state")}`;
const env = { ...process.env, COHORT_PULUMI_BACKEND_URL: backendUrl, PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local", NO_COLOR: "1" };

interface Result {
  readonly exitCode: number;
  readonly all: string;
}

/** `npm run -s pulumi -- -C <project> <args>` from the repository root. */
async function pulumi(args: readonly string[], extraEnv: Record<string, string> = {}): Promise<Result> {
  const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, ...args], {
    cwd: PROJECT_DIR,
    env: { ...env, ...extraEnv },
    reject: false,
    all: true,
    stdin: "ignore",
  });
  return { exitCode: r.exitCode ?? -1, all: String(r.all) };
}

async function ok(args: readonly string[]): Promise<Result> {
  const r = await pulumi(args);
  if (r.exitCode !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${r.all.slice(-4000)}`);
  return r;
}

const config = (...kv: string[]) => ok(["config", "set", "--stack", "host", ...kv]);
const rm = (...k: string[]) => ok(["config", "rm", "--stack", "host", ...k]);

/** How many times `needle` occurs in `haystack`. */
function count(haystack: string, needle: string): number {
  return haystack.split(needle).length - 1;
}

/** The output after `Diagnostics:` up to `Resources:`. */
function diagnostics(all: string): string {
  const start = all.indexOf("Diagnostics:");
  if (start < 0) return "";
  const end = all.indexOf("\nResources:", start);
  return all.slice(start, end < 0 ? undefined : end);
}

beforeAll(async () => {
  copyProject(projectDir, ["host"]);
  mkdirSync(path.join(tmp, "state"));
  await ok(["stack", "select", "--create", "host"]);
  await config("artifactRoot", artifactRoot);
}, 600_000);

afterAll(() => {
  if (process.env.COHORT_E2E_KEEP !== "1") rmSync(tmp, { recursive: true, force: true });
});

describe("host config ergonomics, real engine (preview only)", () => {
  it("every problem is printed once, in one pass, counted as 1 error, with fix hints in the `npm run pulumi` form", async () => {
    await config("--path", "cohort.size", "0");
    await config("cohort.hold", "5"); // without --path: a flat key, whose value is not a duration either
    const r = await pulumi(["preview", "--stack", "host"]);
    console.log(`[e2e host-config] two bad keys: preview exit ${r.exitCode}\n${r.all}`);
    expect(r.exitCode).not.toBe(0);
    const flat =
      'cohort-lab:cohort.hold: set without --path, so Pulumi stored a flat key named "cohort.hold" instead of the field hold of cohort; ' +
      "run `npm run pulumi -- config rm cohort.hold --stack host` and then `npm run pulumi -- config set --path cohort.hold <value> --stack host`";
    const problems = [flat, 'cohort-lab:cohort.hold: must be a duration with a unit (ms, s, m or h), e.g. "5s" (got 5)', "cohort-lab:cohort.size: must be an integer >= 1 (got 0)"];
    const diag = diagnostics(r.all);
    for (const problem of problems) expect(count(diag, problem), problem).toBe(1);
    // The lines after the first are in Diagnostics only (the progress row repeats only the first line).
    for (const problem of problems.slice(1)) expect(count(r.all, problem), problem).toBe(1);
    expect(r.all).toContain("1 error");
    expect(r.all).not.toMatch(/\b[2-9] errors\b/);
    expect(r.all).not.toMatch(/(^|[^-] )pulumi config /m); // no bare `pulumi config` hint
    await rm("--path", "cohort.size");
    await rm("cohort.hold");
  }, 600_000);

  it("roles set from the CLI as a JSON list are accepted, and preview shows the roster (size per role)", async () => {
    const roles = [
      { name: "router", app: { command: ["node", "-e", "setInterval(() => {}, 1000)"] }, readiness: { tcp: {} } },
      { name: "agent", replicas: 8, needs: ["router"], app: { command: ["node", "-e", "setInterval(() => {}, 1000)"] }, readiness: { tcp: {} } },
    ];
    await config("--path", "cohort.roles", JSON.stringify(roles));
    const r = await pulumi(["preview", "--stack", "host", "--diff"]);
    console.log(`[e2e host-config] roles as JSON text: preview exit ${r.exitCode}\n${r.all.slice(-3000)}`);
    expect(r.exitCode, r.all.slice(-3000)).toBe(0);
    expect(r.all).toContain("roster: router 1, agent 8 (9 members)");
    // --diff shows the CohortRun's input (the engine sorts its keys).
    const input = /roster\s*:\s*\{([^}]*)\}/.exec(r.all)?.[1] ?? "";
    expect(input).toMatch(/\bagent\s*:\s*8\b/);
    expect(input).toMatch(/\brouter\s*:\s*1\b/);
    // Not valid JSON: the refusal names the forms that work.
    await config("--path", "cohort.roles", "[{name: web}]");
    const bad = await pulumi(["preview", "--stack", "host"]);
    expect(bad.exitCode).not.toBe(0);
    expect(bad.all).toContain(`npm run pulumi -- config set --path cohort.roles '[{"name":"web","app":{"command":["node","server.js"]}}]' --stack host`);
    await rm("--path", "cohort.roles");
  }, 600_000);

  it("an artifactRoot that is a file is refused at preview, naming the key", async () => {
    const file = path.join(tmp, "a-file");
    writeFileSync(file, "x\n");
    await config("artifactRoot", file);
    const r = await pulumi(["preview", "--stack", "host"]);
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toContain(`cohort-lab:artifactRoot: must be a directory (got ${file}, which is a file)`);
    await config("artifactRoot", artifactRoot);
  }, 600_000);

  it("`no stack named 'host' found` names the backend that was searched", async () => {
    const elsewhere = `file://${path.join(tmp, "empty-state")}`;
    const r = await pulumi(["preview", "--stack", "host"], { COHORT_PULUMI_BACKEND_URL: elsewhere });
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toContain("no stack named 'host' found");
    expect(r.all).toContain(`backend searched: ${elsewhere} (COHORT_PULUMI_BACKEND_URL)`);
  }, 600_000);
});

/**
 * The pinned toolchain end to end, through the same launcher users run (`npm run -s pulumi -- ...`): the real
 * engine, a temporary file backend, the repo-local plugins, automatic plugin acquisition disabled, no network.
 * Skips (with the reason printed) only when the toolchain is not built; a toolchain that is built but does not
 * match package.json fails.
 */
import { execa } from "execa";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toolchain as pins } from "../../common/pins";
import { resolveToolchain, ToolchainError } from "../../scripts/lib/env";

const repo = path.resolve(__dirname, "..", "..");
const fixture = path.join(repo, "test", "fixtures", "command-program");

let absent: string | undefined;
try {
  resolveToolchain();
} catch (err) {
  if (!(err instanceof ToolchainError) || !err.missing) throw err;
  absent = err.message;
}
if (absent !== undefined) console.log(`test/e2e/toolchain.test.ts skipped: the toolchain is not built (${absent})`);

const step = 600_000;

describe.skipIf(absent !== undefined)("npm run pulumi with the pinned toolchain", () => {
  let tmp: string;
  let project: string;
  let outDir: string;
  let env: NodeJS.ProcessEnv;

  const pulumi = (args: readonly string[], extraEnv: NodeJS.ProcessEnv = {}) =>
    execa("npm", ["run", "-s", "pulumi", "--", "-C", project, ...args], {
      cwd: repo,
      env: { ...env, ...extraEnv },
      reject: false,
      stdin: "ignore",
    });

  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-e2e-toolchain-"));
    // A copy of the fixture, so stack config files land in the temp dir; node_modules is the repo's.
    project = path.join(tmp, "project");
    fs.mkdirSync(project);
    for (const f of ["Pulumi.yaml", "index.ts"]) fs.copyFileSync(path.join(fixture, f), path.join(project, f));
    fs.symlinkSync(path.join(repo, "node_modules"), path.join(project, "node_modules"));
    outDir = path.join(tmp, "out");
    fs.mkdirSync(outDir);
    env = {
      ...process.env,
      COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`,
      PULUMI_CONFIG_PASSPHRASE: "e2e-only",
    };
  });

  afterAll(() => {
    if (tmp !== undefined) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it(
    "prints the pinned CLI version",
    async () => {
      const r = await pulumi(["version"]);
      expect(r.stderr).toBe("");
      expect(r.stdout.trim()).toBe(`v${pins.pulumi.version}`);
    },
    step,
  );

  it(
    "lists the command and kubernetes plugins at the pinned versions",
    async () => {
      const r = await pulumi(["plugin", "ls", "--json"]);
      expect(r.exitCode).toBe(0);
      const plugins = (JSON.parse(r.stdout) as Array<{ name: string; kind: string; version: string }>).map((p) => `${p.kind}/${p.name}@${p.version}`).sort();
      expect(plugins).toEqual([`resource/command@${pins.command.version}`, `resource/kubernetes@${pins.kubernetes.version}`]);
    },
    step,
  );

  it(
    "previews, creates, re-previews without changes and destroys a local.Command",
    async () => {
      const target = path.join(outDir, "greeting.txt");
      expect((await pulumi(["stack", "init", "e2e"])).exitCode).toBe(0);
      expect((await pulumi(["config", "set", "outDir", outDir, "--stack", "e2e"])).exitCode).toBe(0);
      expect((await pulumi(["config", "set", "message", "hello from e2e", "--stack", "e2e"])).exitCode).toBe(0);

      const preview = await pulumi(["preview", "--stack", "e2e", "--non-interactive", "--json"]);
      expect(preview.exitCode, preview.stderr).toBe(0);
      const steps = (JSON.parse(preview.stdout) as { steps: Array<{ op: string; urn: string }> }).steps.map((s) => `${s.op} ${s.urn.split("::").slice(-2).join("::")}`);
      expect(steps).toEqual(["create pulumi:pulumi:Stack::command-program-e2e", "create command:local:Command::write-greeting"]);
      expect(fs.existsSync(target)).toBe(false); // commands never run in preview

      const up = await pulumi(["up", "--stack", "e2e", "--yes", "--skip-preview", "--non-interactive"]);
      expect(up.exitCode, `${up.stdout}\n${up.stderr}`).toBe(0);
      expect(fs.readFileSync(target, "utf8")).toBe("hello from e2e\n");
      const outputs = await pulumi(["stack", "output", "--json", "--stack", "e2e"]);
      expect(JSON.parse(outputs.stdout)).toEqual({ file: target, stdout: "hello from e2e" });

      const again = await pulumi(["preview", "--stack", "e2e", "--non-interactive", "--expect-no-changes"]);
      expect(again.exitCode, `${again.stdout}\n${again.stderr}`).toBe(0);

      const destroy = await pulumi(["destroy", "--stack", "e2e", "--yes", "--non-interactive"]);
      expect(destroy.exitCode, `${destroy.stdout}\n${destroy.stderr}`).toBe(0);
      expect(fs.existsSync(target)).toBe(false);
      expect((await pulumi(["stack", "rm", "e2e", "--yes", "--non-interactive"])).exitCode).toBe(0);
    },
    step,
  );

  it(
    "refuses to start when PULUMI_HOME has other plugin versions than package.json",
    async () => {
      const home = path.join(tmp, "stale-home");
      const dir = path.join(home, "plugins", "resource-command-v1.0.0");
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, "pulumi-resource-command"), "#!/bin/sh\nexit 1\n", { mode: 0o755 });
      const r = await pulumi(["version"], { COHORT_PULUMI_HOME: home });
      expect(r.exitCode).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toBe(
        [
          `cohort-lab: cannot run: PULUMI_HOME (${home}) has pulumi-resource-command v1.0.0 but not v${pins.command.version}, and package.json pins @pulumi/command ${pins.command.version}: run \`npm run toolchain\``,
          `  PULUMI_HOME (${home}) has no pulumi-resource-kubernetes, and package.json pins @pulumi/kubernetes ${pins.kubernetes.version}: run \`npm run toolchain\``,
        ].join("\n"), // execa strips the final newline
      );
    },
    step,
  );
});

/**
 * The CI workflow users copy (examples/ci/github-actions.yml, shown in docs/ci.md) and the README's CI
 * recipe: the workflow parses as YAML; every `npm run <script>` it runs is a script in package.json and every
 * `cohort ...` command a subcommand the CLI has; the toolchain cache is keyed on common/pins.ts; nothing is
 * written into the checkout; the reports and destroy run `if: always()`, destroy last; docs/ci.md shows the
 * file exactly and its GitLab job passes the same checks.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { COMMAND_HELP } from "../../runtime/core/cli-help";
import { PROJECT_DIR } from "../../stacks/config";

const read = (file: string) => readFileSync(path.join(PROJECT_DIR, file), "utf8");
const workflowText = read("examples/ci/github-actions.yml");
const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  if?: string;
  with?: Record<string, string>;
}

/** The npm scripts (`npm run [-s] NAME`) and cohort commands (`npx cohort A [B]`) in shell text. */
function commandsIn(shell: string): { npm: string[]; cohort: string[] } {
  const npm = [...shell.matchAll(/\bnpm run(?: -s)? ([\w:-]+)/g)].map((m) => m[1]!);
  const cohort = [...shell.matchAll(/\bnpx cohort (\w+)(?: (\w+))?/g)].map((m) => (m[1] === "ledger" ? `ledger ${m[2]}` : m[1]!));
  return { npm, cohort };
}

function expectKnown(shell: string): void {
  const { npm, cohort } = commandsIn(shell);
  for (const s of npm) expect(scripts, `npm run ${s}`).toContain(s);
  for (const c of cohort) expect(Object.keys(COMMAND_HELP), `cohort ${c}`).toContain(c);
}

describe("examples/ci/github-actions.yml", () => {
  const workflow = parse(workflowText) as { jobs: Record<string, { steps: Step[] }> };
  const steps = Object.values(workflow.jobs)[0]!.steps;
  const shell = steps.map((s) => s.run ?? "").join("\n");
  const step = (pattern: RegExp) => steps.find((s) => pattern.test(s.run ?? "") || pattern.test(s.uses ?? ""));

  it("runs only npm scripts and cohort subcommands that exist", () => {
    const { npm, cohort } = commandsIn(shell);
    expect(new Set(npm)).toEqual(new Set(["toolchain", "build", "pulumi"]));
    expect(new Set(cohort)).toEqual(new Set(["ledger verify", "ledger junit", "ledger report"]));
    expectKnown(shell);
  });

  it("checkout, npm ci, the toolchain cache keyed on common/pins.ts, build, up, destroy: in that order", () => {
    const order = [
      /^actions\/checkout@/,
      /^actions\/cache@/,
      /^npm ci$/,
      /^npm run toolchain$/,
      /^npm run build$/,
      /pulumi -- up --yes --stack host/,
      /pulumi -- destroy --yes --stack host/,
    ];
    const at = order.map((p) => steps.indexOf(step(p)!));
    expect(
      at.every((i) => i >= 0),
      String(at),
    ).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    const cache = step(/^actions\/cache@/)!;
    expect(cache.with?.path).toBe("~/.cache/cohort-lab");
    expect(cache.with?.key).toContain("hashFiles('common/pins.ts')");
  });

  it("writes nothing into the checkout: state, artifacts and outputs under $RUNNER_TEMP", () => {
    expect(shell).toContain('out="$RUNNER_TEMP/cohort"');
    expect(shell).toContain("COHORT_PULUMI_BACKEND_URL=file://$out/state");
    expect(shell).toContain('artifactRoot "$COHORT_OUT/artifacts"');
    expect(shell).toMatch(/stack output --json --stack host > "\$COHORT_OUT\/outputs\.json"/);
    expect(shell).not.toMatch(/> ?outputs\.json/);
  });

  it("reads outputs only after up succeeded; reports, uploads and destroy run always, destroy last", () => {
    expect(step(/pulumi -- up /)!.if).toBeUndefined();
    expect(step(/stack output/)!.if).toBeUndefined();
    for (const p of [/ledger junit/, /^mikepenz\/action-junit-report@/, /^actions\/upload-artifact@/, /pulumi -- destroy/]) expect(step(p)!.if, String(p)).toBe("always()");
    expect(steps.at(-1)).toBe(step(/pulumi -- destroy/));
    expect(step(/^mikepenz\/action-junit-report@/)!.with?.report_paths).toBe("${{ env.COHORT_OUT }}/junit.xml");
    expect(step(/^actions\/upload-artifact@/)!.with?.path).toContain("${{ env.COHORT_OUT }}/report.html");
  });
});

describe("docs/ci.md", () => {
  const doc = read("docs/ci.md");
  const blocks = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);

  it("shows examples/ci/github-actions.yml exactly", () => {
    expect(blocks[0]).toBe(workflowText);
  });

  it("its GitLab job parses and runs only commands that exist, with JUnit as a report and destroy in after_script", () => {
    const job = (
      parse(blocks[1]!) as Record<
        string,
        { script: string[]; after_script: string[]; artifacts: { when: string; reports: { junit: string } }; cache: { key: { files: string[] } } }
      >
    ).cohort!;
    expectKnown([...job.script, ...job.after_script].join("\n"));
    expect(job.after_script.join("\n")).toMatch(/pulumi -- destroy --yes --stack host/);
    expect(job.artifacts).toMatchObject({ when: "always", reports: { junit: "cohort-junit.xml" } });
    expect(job.cache.key.files).toEqual(["common/pins.ts"]);
  });
});

describe("README CI recipe", () => {
  it("writes outputs.json outside the repository and runs commands that exist", () => {
    const readme = read("README.md");
    const recipe = readme.slice(readme.indexOf("### How a CI job consumes them"));
    const sh = /```sh\n([\s\S]*?)```/.exec(recipe)![1]!;
    expect(sh).not.toMatch(/> ?outputs\.json/);
    expect(sh).toMatch(/> "\$out\/outputs\.json"/);
    expectKnown(sh);
  });
});

/**
 * Refusals of the `host` profile under Pulumi mocks: invalid config, a missing runtime bundle and a
 * missing member program fail before ANY resource is registered (so `pulumi preview` fails with the
 * key named and nothing is half-created).
 */
import { mkdirSync, mkdtempSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";

const registered: string[] = [];
const projectDir = mkdtempSync(path.join(os.tmpdir(), "cohort-host-invalid-"));
let buildStack: typeof import("../../stacks/profiles.js").buildStack;
let artifactRootProblem: typeof import("../../stacks/config.js").artifactRootProblem;

beforeAll(async () => {
  const { PROJECT_DIR, artifactRootProblem: check } = await import("../../stacks/config.js");
  artifactRootProblem = check;
  mkdirSync(path.join(projectDir, "dist"));
  writeFileSync(path.join(projectDir, "dist", "cohort.cjs"), "// bundle\n");
  symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(projectDir, "node_modules"));
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        registered.push(`${args.type}::${args.name}`);
        return { id: `${args.name}-id`, state: args.inputs };
      },
      call: () => ({}),
    },
    "cohort-lab",
    "host",
    true,
  );
  ({ buildStack } = await import("../../stacks/profiles.js"));
});

/** Runs the program with `raw` config and returns the error message; asserts nothing was registered. */
function refusal(raw: Record<string, string>, dir = projectDir): string {
  let message: string | undefined;
  try {
    buildStack({ stack: "host", raw, projectDir: dir });
  } catch (error) {
    expect(pulumi.RunError.isInstance(error)).toBe(true);
    message = (error as Error).message;
  }
  expect(registered).toEqual([]);
  if (message === undefined) throw new Error("the program was not refused");
  return message;
}

describe("host profile refusals happen before any resource", () => {
  it.each<[string, Record<string, string>, string]>([
    ["size 0", { cohort: '{"size":0}' }, "cohort-lab:cohort.size: must be an integer >= 1 (got 0)"],
    [
      "a role needing an unknown role",
      {
        cohort: JSON.stringify({
          roles: [
            { name: "a", app: { command: ["x"] } },
            { name: "b", needs: ["c"], app: { command: ["y"] } },
          ],
        }),
      },
      'cohort-lab:cohort.roles[1].needs[0]: unknown role "c" (known: a, b)',
    ],
    ["a negative timeout", { cohort: '{"memberTimeout":"-1s"}' }, 'cohort-lab:cohort.memberTimeout: must be a duration that is not negative (got "-1s")'],
    [
      "a flat dotted key",
      { "cohort.size": "16" },
      'cohort-lab:cohort.size: set without --path, so Pulumi stored a flat key named "cohort.size" instead of the field size of cohort; run `npm run pulumi -- config rm cohort.size --stack host` and then `npm run pulumi -- config set --path cohort.size 16 --stack host`',
    ],
  ])("%s", (_what, raw, message) => {
    expect(refusal(raw)).toBe(message);
  });

  it("a missing runtime bundle tells to run npm run build", () => {
    const bare = mkdtempSync(path.join(os.tmpdir(), "cohort-host-nobundle-"));
    symlinkSync(path.join(projectDir, "node_modules"), path.join(bare, "node_modules"));
    expect(refusal({}, bare)).toBe(
      `the cohort runtime bundle ${path.join(bare, "dist", "cohort.cjs")} does not exist: run \`npm run build\` first (the npm scripts host/up/preview do it for you)`,
    );
  });

  it("an artifactRoot under a directory that refuses mkdir (/proc, writable by mode bits for root) is refused at preview", () => {
    expect(refusal({ artifactRoot: "/proc/nope" })).toMatch(
      /^cohort-lab:artifactRoot: must be a directory this user can write to \(got \/proc\/nope, under \/proc, (where a directory cannot be created: E[A-Z]+|which is not writable: E[A-Z]+)\)$/,
    );
    // The probe leaves nothing behind in a directory that can hold the root.
    const parent = mkdtempSync(path.join(os.tmpdir(), "cl-probe-"));
    expect(artifactRootProblem(path.join(parent, "runs", "deeper"))).toBeUndefined();
    expect(artifactRootProblem(parent)).toBeUndefined();
    expect(readdirSync(parent)).toEqual([]);
  });

  it("an artifactRoot that is a file (or under one) is refused at preview, naming the key", () => {
    const file = path.join(projectDir, "not-a-dir");
    writeFileSync(file, "x\n");
    expect(refusal({ artifactRoot: file })).toBe(`cohort-lab:artifactRoot: must be a directory (got ${file}, which is a file)`);
    expect(refusal({ artifactRoot: path.join(file, "runs") })).toBe(
      `cohort-lab:artifactRoot: must be a directory (got ${path.join(file, "runs")}, under ${file}, which is a file)`,
    );
    // Found together with any other problem, in one pass.
    expect(refusal({ artifactRoot: file, cohort: '{"size":0}' }).split("\n")).toEqual([
      `cohort-lab:artifactRoot: must be a directory (got ${file}, which is a file)`,
      "cohort-lab:cohort.size: must be an integer >= 1 (got 0)",
    ]);
  });

  it("a missing member program tells to run npm ci", () => {
    const bare = mkdtempSync(path.join(os.tmpdir(), "cohort-host-nomodules-"));
    expect(refusal({}, bare)).toBe(
      `member program openclaw@2026.9.6 is not installed (${path.join(bare, "node_modules", "openclaw", "package.json")} does not exist); run \`npm ci\` in ${bare}`,
    );
  });
});

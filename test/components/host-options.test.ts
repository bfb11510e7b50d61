/**
 * The `host` profile under Pulumi mocks with every option away from its default (one program in this
 * file): keepLedgers false, the http-server preset, an absolute artifact root, a cohort name and run
 * timing set in config. Each option must reach a child input.
 */
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";

const inputs = new Map<string, Record<string, unknown>>();
const projectDir = mkdtempSync(path.join(os.tmpdir(), "cohort-host-opts-"));
const artifactRoot = mkdtempSync(path.join(os.tmpdir(), "cohort-host-opts-root-"));
let stack: import("../../stacks/profiles.js").StackOutputs;

function valueOf<T>(output: pulumi.Input<T> | undefined): Promise<T> {
  return new Promise((resolve) => pulumi.output(output as pulumi.Input<T>).apply((v) => resolve(v as T)));
}

beforeAll(async () => {
  mkdirSync(path.join(projectDir, "dist"));
  writeFileSync(path.join(projectDir, "dist", "cohort.cjs"), "// bundle\n");
  const { PROJECT_DIR } = await import("../../stacks/config.js");
  symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(projectDir, "node_modules"));
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        inputs.set(args.name, args.inputs as Record<string, unknown>);
        const stdout =
          args.name === "cohort-run"
            ? JSON.stringify({
                runId: "lab-20261130T080000Z-000001",
                outcome: "succeeded",
                size: 2,
                readyCount: 2,
                timeToReadyMs: 120,
                ledgerPath: path.join(artifactRoot, "lab-20261130T080000Z-000001"),
                firstFailure: null,
              })
            : "";
        return { id: args.custom ? `${args.name}-id` : undefined, state: { ...args.inputs, stdout } };
      },
      call: () => ({}),
    },
    "cohort-lab",
    "ci-host",
    false,
  );
  const { buildStack } = await import("../../stacks/profiles.js");
  stack = buildStack({
    stack: "ci-host",
    projectDir,
    raw: {
      profile: "host",
      artifactRoot,
      keepLedgers: "false",
      cohort: JSON.stringify({ name: "lab", app: "http-server", size: 2, memberTimeout: "9s", hold: "0s", concurrency: 1 }),
    },
  });
  await valueOf(stack.run);
});

describe("host profile options reach the children", () => {
  it("cohort-lab:profile selects host even when the stack has another name", () => {
    expect(stack.profile).toBe("host");
  });

  it("keepLedgers false reaches the delete step's environment", () => {
    expect((inputs.get("cohort-run")?.environment as Record<string, string>).COHORT_KEEP_LEDGERS).toBe("false");
  });

  it("an absolute artifactRoot is used as is, for the bundle and the run", () => {
    expect((inputs.get("host-runtime-bundle")?.environment as Record<string, string>).COHORT_ARTIFACT_ROOT).toBe(artifactRoot);
    expect((inputs.get("cohort-run")?.environment as Record<string, string>).COHORT_ARTIFACT_ROOT).toBe(artifactRoot);
    expect((inputs.get("cohort-run")?.triggers as string[])[2]).toBe(artifactRoot);
  });

  it("the cohort name, preset, size and timing reach the RunSpec on stdin", () => {
    const spec = JSON.parse(inputs.get("cohort-run")?.stdin as string) as Record<string, unknown> & { roles: { name: string; replicas: number }[] };
    expect(spec).toMatchObject({ name: "lab", memberTimeout: "9s", hold: "0s", concurrency: 1, startupTimeout: "2m", stopGracePeriod: "5s" });
    expect(spec.roles.map((r) => [r.name, r.replicas])).toEqual([["web", 2]]);
  });

  it("the stack outputs carry the run", async () => {
    expect(await valueOf(stack.run)).toEqual({
      id: "lab-20261130T080000Z-000001",
      outcome: "succeeded",
      size: 2,
      readyCount: 2,
      timeToReadyMs: 120,
      ledgerPath: path.join(artifactRoot, "lab-20261130T080000Z-000001"),
      firstFailure: null,
      specSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      // The mocked runtime prints an older summary (no reportPath): the output says null.
      reportPath: null,
    });
  });
});

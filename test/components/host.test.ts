/**
 * The `host` profile's component graph under Pulumi mocks (one program in this file): the stack config
 * comes from the Pulumi runtime config, every registration is recorded, and the test asserts types,
 * names, parents, the key inputs of both command resources, registerOutputs and the stack outputs.
 */
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../runtime/core/ledger";

interface Registration {
  readonly type: string;
  readonly name: string;
  readonly custom: boolean;
  readonly inputs: Record<string, unknown>;
}

const registrations: Registration[] = [];
const summary = {
  runId: "society-20261130T080000Z-a1b2c3",
  outcome: "succeeded",
  size: 3,
  readyCount: 3,
  timeToReadyMs: 15234,
  ledgerPath: "",
  reportPath: "",
  firstFailure: null,
};

const projectDir = mkdtempSync(path.join(os.tmpdir(), "cohort-host-mock-"));
const artifactRoot = path.join(projectDir, "ledgers");
const bundleBytes = "// stand-in for dist/cohort.cjs\n";
const bundleSha = createHash("sha256").update(bundleBytes).digest("hex");
summary.ledgerPath = path.join(artifactRoot, summary.runId);
summary.reportPath = path.join(summary.ledgerPath, "report.html");

/** Resolves an Output's value (mocks are not in preview, so every value is known). */
function valueOf<T>(output: pulumi.Output<T> | pulumi.Input<T> | undefined): Promise<T> {
  return new Promise((resolve) => pulumi.output(output as pulumi.Input<T>).apply((v) => resolve(v as T)));
}

/** The mock monitor's registered resources: URN -> { urn, id, state } (state = registerOutputs' values for components). */
function monitorResources(): Map<string, { urn: string; state: unknown }> {
  return (pulumi.runtime.getMonitor() as unknown as { getRegisteredResources(): Map<string, { urn: string; state: unknown }> }).getRegisteredResources();
}

function registration(type: string, name: string): Registration {
  const found = registrations.find((r) => r.type === type && r.name === name);
  if (found === undefined) throw new Error(`no registration ${type} ${name}; have ${registrations.map((r) => `${r.type}/${r.name}`).join(", ")}`);
  return found;
}

let stack: import("../../stacks/profiles.js").StackOutputs;
let profilesModule: typeof import("../../stacks/profiles.js");
let resolvedSpec: import("../../stacks/config.js").ResolvedRunSpec;
let hostNode: string;

beforeAll(async () => {
  mkdirSync(path.join(projectDir, "dist"));
  writeFileSync(path.join(projectDir, "dist", "cohort.cjs"), bundleBytes);
  const { PROJECT_DIR } = await import("../../stacks/config.js");
  symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(projectDir, "node_modules"));

  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        registrations.push({ type: args.type, name: args.name, custom: args.custom ?? false, inputs: args.inputs as Record<string, unknown> });
        if (args.type === "command:local:Command" && args.name === "cohort-run") {
          return { id: `${args.name}-id`, state: { ...args.inputs, stdout: JSON.stringify(summary), stderr: "" } };
        }
        return { id: args.custom ? `${args.name}-id` : undefined, state: args.inputs };
      },
      call: () => ({}),
    },
    "cohort-lab",
    "host",
    false,
  );
  pulumi.runtime.setAllConfig({ "cohort-lab:cohort": JSON.stringify({ size: 3 }), "cohort-lab:artifactRoot": "ledgers" });

  profilesModule = await import("../../stacks/profiles.js");
  const config = await import("../../stacks/config.js");
  hostNode = (await import("../../stacks/host.js")).resolveHostNode().path;
  resolvedSpec = config.resolveRunSpec(config.parseStackConfig(config.readRawConfig(), { stack: "host", projectDir }).cohort, {
    nodePath: hostNode,
    projectDir,
  });
  stack = profilesModule.buildStack({ projectDir });
  await valueOf(stack.run);
  // registerOutputs of the components completes after their outputs resolve.
  for (let i = 0; i < 100 && [...monitorResources().values()].some((r) => !r.urn.includes("Command") && r.state === undefined); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
});

describe("host profile component graph", () => {
  it("registers exactly a HostProfile with its bundle command and a CohortRun with its run command", () => {
    // Registration order between the two components is asynchronous: compare as sets.
    const seen = registrations.map((r) => [r.type, r.name, r.custom].join(" ")).sort();
    expect(seen).toEqual(
      [
        "cohortlab:host:HostProfile host false",
        "command:local:Command host-runtime-bundle true",
        "cohortlab:runtime:CohortRun cohort false",
        "command:local:Command cohort-run true",
        "command:local:Command cohort-guard true",
      ].sort(),
    );
  });

  it("parents each command to its component (URN type chains)", () => {
    expect([...monitorResources().keys()].sort()).toEqual(
      [
        "urn:pulumi:host::cohort-lab::cohortlab:host:HostProfile::host",
        "urn:pulumi:host::cohort-lab::cohortlab:host:HostProfile$command:local:Command::host-runtime-bundle",
        "urn:pulumi:host::cohort-lab::cohortlab:runtime:CohortRun::cohort",
        "urn:pulumi:host::cohort-lab::cohortlab:runtime:CohortRun$command:local:Command::cohort-run",
        "urn:pulumi:host::cohort-lab::cohortlab:runtime:CohortRun$command:local:Command::cohort-guard",
      ].sort(),
    );
  });

  it("the CohortRun has the roster it will run (size per role) as a plain input, visible in preview; URNs unchanged", () => {
    const component = registration("cohortlab:runtime:CohortRun", "cohort");
    expect(component.inputs).toEqual({ roster: { gateway: 3 } });
  });

  it("the bundle command copies the built bundle to a content-addressed path, replaced when the digest changes", () => {
    const bundle = registration("command:local:Command", "host-runtime-bundle");
    const bundlePath = path.join(artifactRoot, ".runtime", `cohort-${bundleSha.slice(0, 12)}.cjs`);
    expect(bundle.inputs.environment).toEqual({
      COHORT_ARTIFACT_ROOT: artifactRoot,
      COHORT_BUNDLE_SOURCE: path.join(projectDir, "dist", "cohort.cjs"),
      COHORT_BUNDLE_PATH: bundlePath,
      COHORT_BUNDLE_SHA256: bundleSha,
    });
    expect(bundle.inputs.triggers).toEqual([bundleSha, artifactRoot]);
    expect(bundle.inputs.create).toContain("sha256sum -c --status -");
    expect(bundle.inputs.delete).toBe(
      'rm -f "$COHORT_BUNDLE_PATH"\nif [ -n "${COHORT_LAUNCHER_PATH:-}" ]; then rm -f "$COHORT_LAUNCHER_PATH"; fi\nrmdir "$(dirname "$COHORT_BUNDLE_PATH")" 2>/dev/null || true',
    );
  });

  it("the run command gets the RunSpec on stdin, its digest as the first trigger, and the reap step as delete", async () => {
    const { COHORT_RUN_SCRIPT } = await import("../../components/run/CohortRun.js");
    const run = registration("command:local:Command", "cohort-run");
    const stdin = run.inputs.stdin as string;
    expect(JSON.parse(stdin)).toEqual(resolvedSpec.spec);
    expect(stdin).not.toMatch(/TOKEN=|--token/);
    const bundlePath = path.join(artifactRoot, ".runtime", `cohort-${bundleSha.slice(0, 12)}.cjs`);
    // The last trigger: the artifact root's last unsuccessful run (none here), so a failed run in the state is run again.
    expect(run.inputs.triggers).toEqual([sha256Hex(canonicalJson(JSON.parse(stdin))), bundleSha, artifactRoot, "host", "process", ""]);
    expect((run.inputs.triggers as string[])[0]).toBe(resolvedSpec.specSha256);
    expect(run.inputs.interpreter).toEqual(["/bin/sh", "-c", COHORT_RUN_SCRIPT, "cohort"]);
    expect([run.inputs.create, run.inputs.update, run.inputs.delete]).toEqual(["cohort run", "cohort keep", "cohort reap"]);
    expect(run.inputs.environment).toEqual({
      COHORT_NODE: hostNode,
      COHORT_BUNDLE: bundlePath,
      COHORT_BUNDLE_FALLBACK: path.join(projectDir, "dist", "cohort.cjs"),
      COHORT_ARTIFACT_ROOT: artifactRoot,
      COHORT_PROFILE: "host",
      COHORT_BACKEND: "process",
      COHORT_KEEP_LEDGERS: "true",
      // The status pipe the substitute command provider opens on fd 3: progress on the row, stored nowhere.
      COHORT_STATUS_FD: "3",
    });
    expect(run.inputs.logging).toBe("none");
    expect(run.inputs.addPreviousOutputInEnv).toBe(true);
  });

  it("the guard command (created before the run, deleted after it) reaps the run the artifact root's lock names on delete", async () => {
    const { COHORT_RUN_SCRIPT } = await import("../../components/run/CohortRun.js");
    const guard = registration("command:local:Command", "cohort-guard");
    const bundlePath = path.join(artifactRoot, ".runtime", `cohort-${bundleSha.slice(0, 12)}.cjs`);
    expect(guard.inputs.interpreter).toEqual(["/bin/sh", "-c", COHORT_RUN_SCRIPT, "cohort"]);
    expect([guard.inputs.create, guard.inputs.delete]).toEqual(["cohort guard", "cohort release"]);
    expect(guard.inputs.triggers).toEqual([artifactRoot]);
    expect(guard.inputs.environment).toEqual({
      COHORT_NODE: hostNode,
      COHORT_BUNDLE: bundlePath,
      COHORT_BUNDLE_FALLBACK: path.join(projectDir, "dist", "cohort.cjs"),
      COHORT_ARTIFACT_ROOT: artifactRoot,
    });
  });

  it("the RunSpec is 3 OpenClaw gateways (cohort.size from config) run by the pinned Node (resolveHostNode)", () => {
    const spec = JSON.parse(registration("command:local:Command", "cohort-run").inputs.stdin as string) as {
      roles: { name: string; replicas: number; app: { command: string[] } }[];
    };
    expect(spec.roles.map((r) => [r.name, r.replicas, r.app.command[0], path.basename(r.app.command[1] ?? "")])).toEqual([["gateway", 3, hostNode, "openclaw.mjs"]]);
  });

  it("registerOutputs lists every public output of each component, with the run's values", () => {
    const outputsOf = (urn: string) => {
      const state = monitorResources().get(urn)?.state as { toJavaScript?: () => Record<string, unknown> } | undefined;
      return state?.toJavaScript?.() ?? {};
    };
    const host = outputsOf("urn:pulumi:host::cohort-lab::cohortlab:host:HostProfile::host");
    expect(Object.keys(host).sort()).toEqual(["artifactRoot", "nodePath", "runtimeBundle", "runtimeBundlePath", "runtimeBundleSha256"]);
    expect(host.runtimeBundleSha256).toBe(bundleSha);
    const run = outputsOf("urn:pulumi:host::cohort-lab::cohortlab:runtime:CohortRun::cohort");
    expect(run).toEqual({
      runId: summary.runId,
      outcome: "succeeded",
      size: 3,
      readyCount: 3,
      timeToReadyMs: 15234,
      ledgerPath: summary.ledgerPath,
      firstFailure: null,
      reportPath: summary.reportPath,
      specSha256: resolvedSpec.specSha256,
    });
  });

  it("stack outputs: profile, artifact root and the run parsed from the runtime's summary line", async () => {
    expect(stack.profile).toBe("host");
    expect(await valueOf(stack.artifactRoot)).toBe(artifactRoot);
    expect(await valueOf(stack.run)).toEqual({
      id: summary.runId,
      outcome: "succeeded",
      size: 3,
      readyCount: 3,
      timeToReadyMs: 15234,
      ledgerPath: summary.ledgerPath,
      firstFailure: null,
      specSha256: resolvedSpec.specSha256,
      reportPath: summary.reportPath,
    });
    expect(stack.kubeContext).toBeUndefined();
    expect(stack.kubeconfig).toBeUndefined();
    expect(stack.temporalAddress).toBeUndefined();
    expect(stack.queues).toBeUndefined();
  });
});

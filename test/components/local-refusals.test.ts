/**
 * The `local` profile refuses before creating anything (no resource is registered) — `pulumi up` mode:
 * a cohort that cannot fit the queue's quota (with the arithmetic), missing image digests, no custom roster,
 * an unsupported platform, bad `cohort-lab:local` values, a waitForPodsReady timeout shorter than startupTimeout,
 * the default run mode (`local.runAs: workflow`) without the run worker image. The quota arithmetic is the
 * default run mode's (the run worker's 300m reserved).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { PROJECT_DIR, type RawConfig } from "../../stacks/config.js";
import type { BuiltImages, LocalHostFacts } from "../../stacks/local.js";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { installMocks, settle, TEST_DIGEST, type Registration } from "./local-harness.js";

const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-refusals-"));
const facts: LocalHostFacts = { cpus: 8, memoryBytes: 32 * 2 ** 30, uid: 1000, gid: 1000, platform: "linux-x64" };
const images = JSON.stringify({
  kueue: `registry.k8s.io/kueue/kueue@${TEST_DIGEST}`,
  agentSandbox: `registry.k8s.io/agent-sandbox/agent-sandbox-controller@${TEST_DIGEST}`,
  runtime: `docker.io/library/node@${TEST_DIGEST}`,
});
const role = (replicas: number, cpu: string) => ({ name: "agent", replicas, app: { command: ["agent"] }, resources: { cpu, memory: "256Mi" } });

let regs: Registration[] = [];
let skipReason: string | undefined;
/** A built run worker image (test fixture: nothing loads it), so that each refusal below is the one it checks. */
const runWorker = { repository: "cohort-lab.local/run-worker", tag: "1.24.0", digest: TEST_DIGEST, archive: "/nonexistent/image.tar" };
let build: (raw: RawConfig, f?: LocalHostFacts, built?: BuiltImages) => void;

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    return;
  }
  // The run worker's Temporal bundles are read from <projectDir>/dist: the real ones (npm run build).
  fs.mkdirSync(path.join(projectDir, "dist"));
  for (const f of ["cohort-temporal.cjs", "cohort-temporal-workflows.js"]) fs.copyFileSync(path.join(PROJECT_DIR, "dist", f), path.join(projectDir, "dist", f));
  regs = await installMocks({ preview: false });
  const { parseStackConfig } = await import("../../stacks/config.js");
  const { buildLocal, localProfile } = await import("../../stacks/local.js");
  build = (raw, f = facts, built = { runWorker }) => {
    const config = parseStackConfig(raw, { stack: "local", projectDir, profileKeys: localProfile.configKeys });
    buildLocal({ stack: "local", projectDir, config, raw }, { facts: f, bundle: Buffer.from("//"), artifacts: { images: built } });
  };
}, 900_000);

/** Runs a refused build and checks that nothing was registered. */
async function refusal(raw: RawConfig, f?: LocalHostFacts, built?: BuiltImages): Promise<string> {
  let message = "";
  try {
    build(raw, f, built);
  } catch (error) {
    expect(error).toBeInstanceOf(pulumi.RunError);
    message = (error as Error).message;
  }
  await settle(regs, 0);
  expect(regs).toEqual([]);
  return message;
}

describe("refusals before any resource", () => {
  it("a cohort that cannot fit the queue's quota, with the arithmetic", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await refusal({ cohort: JSON.stringify({ roles: [role(40, "1100m")] }), images })).toBe(
      "cohort-lab:cohort: 40 members need 44000m CPU (agent 40 × 1100m), more than the ClusterQueue quota of 14700m (2 nodes × 8000m allocatable − 1300m reserved = 14700m); " +
        "Kueue admits the cohort all-or-nothing, so it would wait forever. lower cohort.roles[0].replicas to at most 13, lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("a quota override above what the nodes hold", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await refusal({ cohort: JSON.stringify({ roles: [role(2, "1")] }), images, local: JSON.stringify({ queue: { cpu: "32" } }) })).toBe(
      "cohort-lab:local.queue.cpu: 32 (32000m) is more than the nodes can hold: 2 nodes × 8000m allocatable − 1300m reserved = 14700m; set it to at most 14700m or leave it unset",
    );
  });

  it("a cohort that fits the config-lowered quota only without the override", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await refusal({ cohort: JSON.stringify({ roles: [role(5, "1")] }), images, local: JSON.stringify({ queue: { cpu: "4" } }) })).toContain(
      "cohort-lab:cohort: 5 members need 5000m CPU (agent 5 × 1000m), more than the ClusterQueue quota of 4000m (lowered by config; the nodes could hold 2 nodes × 8000m allocatable − 1300m reserved = 14700m)",
    );
  });

  it("image digests that are not known, in pulumi up", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const message = await refusal(
      { cohort: JSON.stringify({ roles: [role(1, "1")] }), images: JSON.stringify({ kueue: `registry.k8s.io/kueue/kueue@${TEST_DIGEST}` }) },
      facts,
      {},
    );
    // In one pass with the run worker image that is not built (the default run mode).
    expect(message.split("\n").map((l) => l.split(":")[0] + ":" + l.split(":")[1])).toEqual([
      "cohort-lab:images.agentSandbox",
      "cohort-lab:images.runtime",
      "cohort-lab:local.runAs",
    ]);
    expect(message).toContain("docker buildx imagetools inspect registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5");
  });

  it.for<[Record<string, string>, string]>([
    [
      { kueue: "registry.k8s.io/kueue/kueue:v0.17.0" },
      'cohort-lab:images.kueue: must be registry.k8s.io/kueue/kueue[:v0.17.0]@sha256:<64 hex> (got "registry.k8s.io/kueue/kueue:v0.17.0")',
    ],
    [
      { kueue: `registry.k8s.io/kueue/kueue:v0.18.0@${TEST_DIGEST}` },
      `cohort-lab:images.kueue: must be the pinned image registry.k8s.io/kueue/kueue:v0.17.0 (common/pins.ts) by digest, registry.k8s.io/kueue/kueue[:v0.17.0]@sha256:<64 hex> (got "registry.k8s.io/kueue/kueue:v0.18.0@${TEST_DIGEST}")`,
    ],
    [
      { kueue: `mirror.example/kueue/kueue@${TEST_DIGEST}` },
      `cohort-lab:images.kueue: must be the pinned image registry.k8s.io/kueue/kueue:v0.17.0 (common/pins.ts) by digest, registry.k8s.io/kueue/kueue[:v0.17.0]@sha256:<64 hex> (got "mirror.example/kueue/kueue@${TEST_DIGEST}")`,
    ],
    [{ coredns: "x" }, "cohort-lab:images.coredns: unknown field (known fields: kueue, agentSandbox, runtime, temporal)"],
  ])("images %j", async ([value, message], ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await refusal({ cohort: JSON.stringify({ roles: [role(1, "1")] }), images: JSON.stringify(value) })).toBe(message);
  });

  it("no custom roster (the app presets run host programs)", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await refusal({ images })).toBe(
      "cohort-lab:cohort.roles: the local profile runs members as Pods, so it needs a custom roster (cohort.roles in the RunSpec shape, images pinned by digest); " +
        "the app presets (openclaw) run host programs. See Pulumi.local.yaml for an example",
    );
  });

  it("a platform whose kind/kubectl sums are not pinned", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await refusal({ cohort: JSON.stringify({ roles: [role(1, "1")] }), images }, { ...facts, platform: "darwin-arm64" })).toBe(
      "the local profile runs kind and kubectl only where their SHA-256 is pinned (common/pins.ts: linux-x64); this machine is darwin-arm64. " +
        "The sums for other platforms are not known here and are never invented: add them to common/pins.ts from the official release pages to support it",
    );
  });

  it("bad cohort-lab:local values, each named", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(
      await refusal({
        cohort: JSON.stringify({ roles: [role(1, "1")] }),
        images,
        local: JSON.stringify({ clusterName: "Big_Name", workers: 0, temporalPort: "80", queue: { cpu: "lots" }, extra: true }),
      }),
    ).toBe(
      [
        'cohort-lab:local.clusterName: must match ^[a-z0-9.-]+$ (kind\'s rule) and have at most 50 characters (got "Big_Name")',
        "cohort-lab:local.workers: must be an integer from 1 to 16 (got 0)",
        'cohort-lab:local.temporalPort: must be an integer from 1024 to 65535 (got "80")',
        'cohort-lab:local.queue.cpu: must be a Kubernetes quantity such as 8, 7500m, 16Gi (got "lots")',
        "cohort-lab:local.extra: unknown field (known fields: clusterName, workers, temporalPort, runAs, waitForPodsReadyTimeout, queue, nodeImage)",
      ].join("\n"),
    );
  });

  it("the default run mode (workflow) when the run worker image is not built, naming local.runAs and both ways out", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await refusal({ cohort: JSON.stringify({ roles: [role(1, "1")] }), images }, facts, {})).toBe(
      "cohort-lab:local.runAs: workflow (the default): the run worker image cohort-lab.local/run-worker:1.24.0 is not built here (it is this project's image, in no registry); " +
        "build it with `npm run toolchain -- local-apps`, or run the cohort as a Job: `npm run pulumi -- config set --stack local --path local.runAs job`",
    );
  });

  it("a waitForPodsReady timeout that would evict the roster before the runtime's own deadline", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await refusal({ cohort: JSON.stringify({ roles: [role(1, "1")], startupTimeout: "10m" }), images, local: JSON.stringify({ waitForPodsReadyTimeout: "10m" }) })).toBe(
      "cohort-lab:local.waitForPodsReadyTimeout: 10m is not longer than the cohort's startupTimeout 10m: Kueue would evict the roster's Workload before the runtime's own deadline " +
        "names the member that is late; set it above startupTimeout or leave it unset",
    );
  });
});

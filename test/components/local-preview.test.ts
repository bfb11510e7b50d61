/**
 * The `local` profile in a PREVIEW (mocks with preview=true), no image digests configured and no image built here
 * (a machine that pulls upstream images), in the default run mode (`local.runAs: workflow`): the program warns,
 * naming every missing `cohort-lab:images.*` key and how to get the digest, and that the run worker image is
 * not built (naming `cohort-lab:local.runAs` and both ways out), and still builds the whole graph with the
 * release tags and the worker's tag (a preview pulls nothing). `pulumi up` refuses the same config
 * (local-refusals.test.ts).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, expect, it, vi } from "vitest";
import { PROJECT_DIR } from "../../stacks/config.js";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { find, installMocks, settle, type Registration } from "./local-harness.js";

const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-preview-"));
let regs: Registration[] = [];
const warnings: string[] = [];
let skipReason: string | undefined;

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    console.warn(`local preview mock test SKIPPED: ${skipReason}`);
    return;
  }
  // The run worker's Temporal bundles are read from <projectDir>/dist: the real ones (npm run build).
  fs.mkdirSync(path.join(projectDir, "dist"));
  for (const f of ["cohort-temporal.cjs", "cohort-temporal-workflows.js"]) fs.copyFileSync(path.join(PROJECT_DIR, "dist", f), path.join(projectDir, "dist", f));
  regs = await installMocks({ preview: true });
  const warn = vi.spyOn(pulumi.log, "warn").mockImplementation(async (message: string) => {
    warnings.push(message);
  });
  pulumi.runtime.setAllConfig({
    "cohort-lab:cohort": JSON.stringify({ roles: [{ name: "web", replicas: 2, app: { command: ["node", "server.js"] }, resources: { cpu: "250m", memory: "128Mi" } }] }),
  });
  const { parseStackConfig, readRawConfig } = await import("../../stacks/config.js");
  const { buildLocal, localProfile } = await import("../../stacks/local.js");
  const raw = readRawConfig();
  const config = parseStackConfig(raw, { stack: "local", projectDir, profileKeys: localProfile.configKeys });
  buildLocal(
    { stack: "local", projectDir, config, raw },
    { facts: { cpus: 4, memoryBytes: 16 * 2 ** 30, uid: 1000, gid: 1000, platform: "linux-x64" }, bundle: Buffer.from("//"), artifacts: { images: {} } },
  );
  await settle(regs, 100);
  warn.mockRestore();
}, 900_000);

it("warns once naming each image key without a digest and the command that finds it, once naming the run worker image", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  expect(warnings).toHaveLength(2);
  expect(warnings[0]).toBe(
    [
      "local profile: preview uses image tags without digests; `pulumi up` refuses until they are set:",
      "cohort-lab:images.kueue: no digest is pinned for registry.k8s.io/kueue/kueue:v0.17.0 (it cannot be learned without registry access, and none is invented). " +
        'Get it with `docker buildx imagetools inspect registry.k8s.io/kueue/kueue:v0.17.0` (the "Digest:" line) and run ' +
        "`npm run pulumi -- config set --stack local --path images.kueue registry.k8s.io/kueue/kueue:v0.17.0@sha256:<digest>`",
      "cohort-lab:images.agentSandbox: no digest is pinned for registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5 (it cannot be learned without registry access, and none is invented). " +
        'Get it with `docker buildx imagetools inspect registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5` (the "Digest:" line) and run ' +
        "`npm run pulumi -- config set --stack local --path images.agentSandbox registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5@sha256:<digest>`",
      "cohort-lab:images.runtime: no digest is pinned for docker.io/library/node:24.22.3-bookworm-slim (it cannot be learned without registry access, and none is invented). " +
        'Get it with `docker buildx imagetools inspect docker.io/library/node:24.22.3-bookworm-slim` (the "Digest:" line) and run ' +
        "`npm run pulumi -- config set --stack local --path images.runtime docker.io/library/node:24.22.3-bookworm-slim@sha256:<digest>`",
    ].join("\n"),
  );
  expect(warnings[1]).toBe(
    "local profile: `pulumi up` refuses until the run worker image is built:\n" +
      "cohort-lab:local.runAs: workflow (the default): the run worker image cohort-lab.local/run-worker:1.24.0 is not built here (it is this project's image, in no registry); " +
      "build it with `npm run toolchain -- local-apps`, or run the cohort as a Job: `npm run pulumi -- config set --stack local --path local.runAs job`",
  );
});

it("still previews the whole graph, with the release tags", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  const kueue = find(regs, "kubernetes:apps/v1:Deployment", "kueue:kueue-system/kueue-controller-manager");
  expect((kueue.inputs.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]!.image).toBe("registry.k8s.io/kueue/kueue:v0.17.0");
  expect(find(regs, "command:local:Command", "local-kind").custom).toBe(true);
  // The default run mode: the run worker Deployment with the image's tag (no digest, nothing to load), no runtime Job.
  expect(regs.filter((r) => r.type === "kubernetes:batch/v1:Job")).toHaveLength(0);
  const worker = regs.find((r) => r.type === "kubernetes:apps/v1:Deployment" && r.name.endsWith("/cohort-run-worker"));
  expect((worker?.inputs.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]!.image).toBe("cohort-lab.local/run-worker:1.24.0");
  // Nothing is built here, so nothing is loaded into the nodes (the worker's tag names an image no node has).
  expect(regs.some((r) => r.name === "local-images")).toBe(false);
  // 4 CPUs per worker: 2 × 4000m − 1300m reserved (the run worker of the default run mode: 300m).
  const cq = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab");
  expect(JSON.stringify(cq.inputs.spec)).toContain('"nominalQuota":"6700m"');
});

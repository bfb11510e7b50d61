/**
 * The `gke` profile in a PREVIEW (mocks with preview=true) in its default run mode (`gke.runAs` unset: `workflow`),
 * with no image digest and no `gke.runWorkerImage` configured: the program warns, once naming every missing
 * `cohort-lab:images.*` key and once naming `cohort-lab:gke.runWorkerImage` with both ways out (push the image and
 * set it, or `gke.runAs job`), and still builds the whole graph: the run worker Deployment with the local build's tag
 * (a preview pulls nothing), no runtime Job. `pulumi up` refuses the same config (gke-workflow.test.ts).
 */
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, expect, it, vi } from "vitest";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { gkeProjectDir, installGkeMocks } from "./gke-harness.js";
import { settle, type Registration } from "./local-harness.js";

const made = gkeProjectDir("cohort-gke-preview-");
let regs: Registration[] = [];
const warnings: string[] = [];
let skipReason: string | undefined;

beforeAll(async () => {
  const tools = await ensureLocalTools();
  skipReason = !tools.ok ? tools.reason : "skip" in made ? made.skip : undefined;
  if (skipReason !== undefined || !("dir" in made)) {
    console.warn(`gke preview mock test SKIPPED: ${skipReason}`);
    return;
  }
  const projectDir = made.dir;
  regs = await installGkeMocks({ preview: true });
  const warn = vi.spyOn(pulumi.log, "warn").mockImplementation(async (message: string) => {
    warnings.push(message);
  });
  pulumi.runtime.setAllConfig({
    "cohort-lab:cohort": JSON.stringify({
      name: "society",
      startupTimeout: "15m",
      roles: [{ name: "agent", replicas: 4, app: { command: ["node", "-e", "1"] }, readiness: { tcp: {} }, resources: { cpu: "500m", memory: "512Mi" } }],
    }),
    "cohort-lab:gke": JSON.stringify({ project: "my-project-123", zone: "us-central1-a", bucketName: "my-cohort-ledgers" }),
  });
  const { parseStackConfig, readRawConfig } = await import("../../stacks/config.js");
  const { loadClusterManifests } = await import("../../stacks/cluster.js");
  const { buildGke, gkeProfile } = await import("../../stacks/gke.js");
  const raw = readRawConfig();
  const config = parseStackConfig(raw, { stack: "gke", projectDir, profileKeys: gkeProfile.configKeys });
  buildGke({ stack: "gke", projectDir, config, raw }, { manifests: loadClusterManifests(), bundle: Buffer.from("// stand-in for dist/cohort.cjs\n") });
  await settle(regs, 100);
  warn.mockRestore();
}, 900_000);

it("warns once naming each image key without a digest, once naming gke.runWorkerImage and both ways out", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  expect(warnings.map((w) => w.split("\n")[0])).toEqual([
    "gke profile: preview uses image tags without digests; `pulumi up` refuses until they are set:",
    "gke profile: `pulumi up` refuses until the run worker image is set:",
  ]);
  const digestKeys = warnings[0]!.split("\n").slice(1);
  expect(digestKeys.map((l) => l.slice(0, l.indexOf(": ")))).toEqual(["cohort-lab:images.kueue", "cohort-lab:images.agentSandbox", "cohort-lab:images.runtime"]);
  expect(warnings[1]).toBe(
    "gke profile: `pulumi up` refuses until the run worker image is set:\n" +
      "cohort-lab:gke.runWorkerImage: gke.runAs is workflow (the default), and the run worker image (cohort-lab.local/run-worker:1.24.0, built here by `npm run toolchain -- local-apps`) " +
      "is in no registry the cluster pulls from: push it to yours and set its digest, e.g. " +
      "`npm run pulumi -- config set --stack gke --path gke.runWorkerImage us-central1-docker.pkg.dev/<project>/<repo>/run-worker@sha256:<64 hex>` (docs/gke.md), " +
      "or run the cohort as a Job: `npm run pulumi -- config set --stack gke --path gke.runAs job`",
  );
});

it("still previews the whole graph: the run worker with the local build's tag on the system pool, no runtime Job", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  expect(regs.filter((r) => r.type === "kubernetes:batch/v1:Job")).toHaveLength(0);
  const worker = regs.find((r) => r.type === "kubernetes:apps/v1:Deployment" && r.name === "cohort:cohort-lab-system/cohort-run-worker");
  const pod = (worker?.inputs.spec as { template: { spec: { nodeSelector?: Record<string, string>; containers: { image: string }[] } } }).template.spec;
  expect(pod.containers[0]!.image).toBe("cohort-lab.local/run-worker:1.24.0");
  expect(pod.nodeSelector).toEqual({ "cohort-lab.dev/pool": "system" });
  expect(regs.some((r) => r.type === "gcp:container/cluster:Cluster")).toBe(true);
  expect(regs.some((r) => r.type === "command:local:Command" && r.name === "cohort-run")).toBe(true);
});

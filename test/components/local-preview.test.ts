/**
 * The `local` profile in a PREVIEW (mocks with preview=true) and no image digests configured: the program
 * warns, naming every missing `cohort-lab:images.*` key and how to get the digest, and still builds the whole
 * graph with the release tags (a preview pulls nothing). `pulumi up` refuses the same config
 * (local-refusals.test.ts).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, expect, it, vi } from "vitest";
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

it("warns once, naming each image key without a digest and the command that finds it", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  expect(warnings).toHaveLength(1);
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
});

it("still previews the whole graph, with the release tags", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  const kueue = find(regs, "kubernetes:apps/v1:Deployment", "kueue:kueue-system/kueue-controller-manager");
  expect((kueue.inputs.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]!.image).toBe("registry.k8s.io/kueue/kueue:v0.17.0");
  expect(find(regs, "command:local:Command", "local-kind").custom).toBe(true);
  expect(regs.filter((r) => r.type === "kubernetes:batch/v1:Job")).toHaveLength(1);
  // 4 CPUs per worker: 2 × 4000m − 1250m reserved.
  const cq = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab");
  expect(JSON.stringify(cq.inputs.spec)).toContain('"nominalQuota":"6750m"');
});

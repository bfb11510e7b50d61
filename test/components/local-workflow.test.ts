/**
 * The `local` profile in its default run mode, `local.runAs: workflow` (not set here), under Pulumi mocks (one program in this file, `pulumi up`
 * mode): the run is a Temporal workflow executed by the in-cluster run worker, so the graph has no runtime Job and
 * instead, in the worker namespace (`cohort-lab-system`: one worker per stack, rolled by a new run), the worker's
 * ServiceAccount, its ConfigMaps and its Deployment, with a RoleBinding to the run's Role in the run namespace; the
 * Deployment waits for the rollout guard (whose trigger is the Deployment's object) and for Temporal; the
 * run Command (`run-submit`) waits for the worker and the controllers and submits with the workflow id
 * `cohort-lab/local/<identity>`; the stack outputs name the task queue. The real thing: test/local/stack.test.ts.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config.js";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { FAKE_KUBECONFIG, find, installMocks, settle, TEST_DIGEST, valueOf, type Registration } from "./local-harness.js";

const GI = 2 ** 30;
const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-workflow-mock-"));
const artifactRoot = path.join(projectDir, "artifacts");
const runId = "society-20261202T080000Z-a1b2c3";
const summary = { runId, outcome: "succeeded", size: 2, readyCount: 2, timeToReadyMs: 1234, ledgerPath: path.join(artifactRoot, runId), reportPath: null, firstFailure: null };
const roles = [{ name: "agent", replicas: 2, app: { command: ["sleep", "600"] }, readiness: { tcp: {} }, resources: { cpu: "100m", memory: "64Mi" } }];
const images = {
  kueue: `registry.k8s.io/kueue/kueue:v0.17.0@${TEST_DIGEST}`,
  agentSandbox: `registry.k8s.io/agent-sandbox/agent-sandbox-controller@${TEST_DIGEST}`,
  runtime: `docker.io/library/node@${TEST_DIGEST}`,
};
const worker = { repository: "cohort-lab.local/run-worker", tag: "1.24.0", digest: TEST_DIGEST, archive: "/cache/image-run-worker/image.tar" }; // test fixture

let regs: Registration[] = [];
let outputs: import("../../stacks/profiles.js").StackOutputs;
let skipReason: string | undefined;
const byType = (type: string) => regs.filter((r) => r.type === type);

beforeAll(async () => {
  const tools = await ensureLocalTools();
  const missing = ["cohort-temporal.cjs", "cohort-temporal-workflows.js"].filter((f) => !fs.existsSync(path.join(PROJECT_DIR, "dist", f)));
  skipReason = !tools.ok ? tools.reason : missing.length > 0 ? `dist/${missing.join(", dist/")} missing: npm run build` : undefined;
  if (skipReason !== undefined) return;
  // The Temporal bundles are read from <projectDir>/dist: the real ones, beside a stand-in runtime bundle.
  fs.mkdirSync(path.join(projectDir, "dist"));
  for (const f of ["cohort-temporal.cjs", "cohort-temporal-workflows.js"]) fs.copyFileSync(path.join(PROJECT_DIR, "dist", f), path.join(projectDir, "dist", f));
  regs = await installMocks({
    preview: false,
    stdoutFor: (name) =>
      name === "local-kind" ? FAKE_KUBECONFIG : name === "cohort-identity" ? "0123456789ab\n" : name === "cohort-run" ? `${JSON.stringify(summary)}\n` : undefined,
  });
  pulumi.runtime.setAllConfig({
    "cohort-lab:artifactRoot": artifactRoot,
    "cohort-lab:cohort": JSON.stringify({ name: "society", roles }),
    "cohort-lab:images": JSON.stringify(images),
    // No runAs: workflow is the default.
    "cohort-lab:local": JSON.stringify({ temporalPort: 7235 }),
  });
  const { parseStackConfig, readRawConfig } = await import("../../stacks/config.js");
  const { buildLocal, localProfile } = await import("../../stacks/local.js");
  const raw = readRawConfig();
  const config = parseStackConfig(raw, { stack: "local", projectDir, profileKeys: localProfile.configKeys });
  outputs = buildLocal(
    { stack: "local", projectDir, config, raw },
    {
      facts: { cpus: 8, memoryBytes: 32 * GI, uid: 1000, gid: 1001, platform: "linux-x64" },
      bundle: Buffer.from("// stand-in for dist/cohort.cjs\n"),
      toolCacheRoot: "/cache",
      artifacts: { images: { runWorker: worker } },
    },
  );
  await valueOf(outputs.run);
  await settle(regs, 100);
}, 900_000);

describe("local profile graph with runAs workflow", () => {
  it("no runtime Job: the run worker's ServiceAccount, ConfigMaps and Deployment in the worker namespace, its RoleBinding to the run's Role in the run namespace", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(byType("kubernetes:batch/v1:Job")).toHaveLength(0);
    const deployment = find(regs, "kubernetes:apps/v1:Deployment", "cohort:cohort-lab-system/cohort-run-worker");
    find(regs, "kubernetes:core/v1:ServiceAccount", "cohort:cohort-lab-system/cohort-run-worker");
    const rbs = byType("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding").filter((r) => r.name.endsWith("/cohort-run-worker"));
    expect(rbs).toHaveLength(1);
    const ns = rbs[0]!.name.split(":")[1]!.split("/")[0]!;
    expect(ns).toMatch(/^society-[0-9a-f]{10}$/);
    expect(rbs[0]!.inputs.roleRef).toEqual({ apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "cohort-runtime" });
    expect(rbs[0]!.inputs.subjects).toEqual([{ kind: "ServiceAccount", name: "cohort-run-worker", namespace: "cohort-lab-system" }]);
    const pod = (deployment.inputs.spec as { template: { spec: { serviceAccountName: string; containers: { image: string; command: string[] }[] } } }).template.spec;
    expect(pod.serviceAccountName).toBe("cohort-run-worker");
    expect(pod.containers[0]!.image).toBe(`cohort-lab.local/run-worker:1.24.0@${TEST_DIGEST}`);
    expect(pod.containers[0]!.command).toEqual([
      "node",
      "/opt/cohort/cohort.cjs",
      "worker",
      "--temporal-address",
      "temporal.cohort-lab-system.svc.cluster.local:7233",
      "--task-queue",
      "cohort-lab-local-runs",
    ]);
    // The worker image is loaded into the nodes with the others.
    const kind = find(regs, "command:local:Command", "local-images");
    expect(JSON.stringify(kind.inputs)).toContain("cohort-lab.local/run-worker:1.24.0");
  });

  it("the Deployment and its ConfigMaps wait for the rollout guard (triggered by the Deployment's object), for Temporal and for the run's objects", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const deployment = find(regs, "kubernetes:apps/v1:Deployment", "cohort:cohort-lab-system/cohort-run-worker");
    const guard = find(regs, "command:local:Command", "cohort-worker-guard");
    expect(deployment.dependencies).toEqual(expect.arrayContaining([guard.urn, find(regs, "kubernetes:apps/v1:Deployment", "temporal:cohort-lab-system/temporal").urn]));
    expect(guard.inputs.create).toBe(`'${process.execPath}' scripts/local-profile.cjs worker-guard`);
    expect(guard.inputs.triggers).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/)]);
    expect((guard.inputs.environment as Record<string, string>).COHORT_TEMPORAL_ADDRESS).toBe("127.0.0.1:7235");
    // The worker's ConfigMaps change only after the guard passed: a refused rollout leaves them as the running pod has them.
    const configMaps = byType("kubernetes:core/v1:ConfigMap").filter((r) => r.name.startsWith("cohort:cohort-lab-system/cohort-run-worker-"));
    expect(configMaps.length).toBeGreaterThan(1);
    for (const cm of configMaps) expect(cm.dependencies, cm.name).toContain(guard.urn);
    // So does the run's identity: a refused rollout keeps it, and the next up attaches to the open run.
    expect(find(regs, "command:local:Command", "cohort-identity").dependencies).toContain(guard.urn);
  });

  it("the run Command submits after the worker and the controllers, with the workflow id, the host and node ledger paths, the status pipe", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const run = find(regs, "command:local:Command", "cohort-run");
    const deployment = find(regs, "kubernetes:apps/v1:Deployment", "cohort:cohort-lab-system/cohort-run-worker");
    expect(run.dependencies).toEqual(
      expect.arrayContaining([
        deployment.urn,
        find(regs, "command:local:Command", "cohort-identity").urn,
        find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab").urn,
        find(regs, "command:local:Command", "kueue-webhook-probe").urn,
      ]),
    );
    expect([run.inputs.create, run.inputs.update, run.inputs.delete]).toEqual(
      ["run-submit", "run-keep", "run-forget"].map((s) => `'${process.execPath}' scripts/local-profile.cjs ${s}`),
    );
    const env = run.inputs.environment as Record<string, string>;
    expect(env).toMatchObject({
      COHORT_WORKFLOW_ID: "cohort-lab/local/0123456789ab",
      COHORT_TASK_QUEUE: "cohort-lab-local-runs",
      COHORT_ARTIFACTS_NODE_PATH: "/var/lib/cohort-lab-artifacts",
      COHORT_PROFILE: "local",
      COHORT_STATUS_FD: "3",
      COHORT_BUNDLE: path.join(projectDir, "dist", "cohort.cjs"),
    });
    expect(JSON.parse(String(run.inputs.stdin))).toMatchObject({ name: "society" });
    const o = await valueOf(outputs.queues);
    expect(o).toMatchObject({ temporalTaskQueue: "cohort-lab-local-runs" });
    expect(await valueOf(outputs.run)).toMatchObject({ id: runId, outcome: "succeeded" });
  });
});

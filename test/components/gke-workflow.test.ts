/**
 * The `gke` profile in its default run mode (`gke.runAs` unset: `workflow`) under Pulumi mocks (one program in this
 * file, `pulumi up` mode): the run is a Temporal workflow executed by the in-cluster run worker, so the graph has no
 * runtime Job and instead the worker in the system namespace (one per stack, rolled by a new run) with its run
 * directory an emptyDir and the bucket export in its backend settings; the bucket's ONE writer binding names the
 * worker's service account (`cohort-lab-system/cohort-run-worker`, the same from run to run); the rollout guard and
 * the run Command reach Temporal through the supervised port-forward (COHORT_TEMPORAL_PORT_FORWARD, the kubeconfig as
 * a secret, the pinned kubectl) and the run Command reads the ledger back from the bucket (COHORT_LEDGER_URI,
 * COHORT_RUNTIME_BUNDLE). Also the refusals before any resource exists: `up` without `gke.runWorkerImage` (naming the
 * key and both ways out, in one pass with the image digests that are not known), a malformed one, the local build's
 * name, and a missing worker bundle file. The preview of the same default: gke-preview.test.ts; the Job mode
 * (`gke.runAs: job`): gke.test.ts.
 * The step programs themselves: test/unit/port-forward.test.ts, test/components/gke-run-steps.test.ts.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { GKE_TEST_IMAGES, GKE_TEST_WORKER_IMAGE, gkeProjectDir, installGkeMocks } from "./gke-harness.js";
import { find, settle, TEST_DIGEST, valueOf, type Registration } from "./local-harness.js";

const made = gkeProjectDir("cohort-gke-workflow-mock-");
const projectDir = "dir" in made ? made.dir : "";
const artifactRoot = path.join(projectDir, "artifacts");
const roles = [{ name: "agent", replicas: 4, app: { command: ["node", "-e", "1"] }, readiness: { tcp: {} }, resources: { cpu: "500m", memory: "512Mi" } }];
const workerImage = GKE_TEST_WORKER_IMAGE;
/** No `runAs`: the default. */
const gke = { project: "my-project-123", zone: "us-central1-a", bucketName: "my-cohort-ledgers", runWorkerImage: workerImage };
const runId = "society-20261204T030000Z-a1b2c3";
const summary = {
  runId,
  outcome: "succeeded",
  size: 4,
  readyCount: 4,
  timeToReadyMs: 4321,
  ledgerPath: `/var/lib/cohort/artifacts/${runId}`,
  reportPath: null,
  firstFailure: null,
  ledgerUri: `gs://my-cohort-ledgers/${runId}`,
};

let regs: Registration[] = [];
let outputs: import("../../stacks/profiles.js").StackOutputs;
let skipReason: string | undefined;
let build: (gkeConfig: Record<string, unknown>, images?: Record<string, string>) => import("../../stacks/profiles.js").StackOutputs;
const byType = (type: string) => regs.filter((r) => r.type === type);

beforeAll(async () => {
  const tools = await ensureLocalTools();
  skipReason = !tools.ok ? tools.reason : "skip" in made ? made.skip : undefined;
  if (skipReason !== undefined) {
    console.warn(`gke workflow mock test SKIPPED: ${skipReason}`);
    return;
  }
  regs = await installGkeMocks({
    preview: false,
    stdoutFor: (name) => (name === "cohort-identity" ? "0123456789ab\n" : name === "cohort-run" ? `${JSON.stringify(summary)}\n` : undefined),
  });
  const { parseStackConfig, readRawConfig } = await import("../../stacks/config.js");
  const { loadClusterManifests } = await import("../../stacks/cluster.js");
  const { buildGke, gkeProfile } = await import("../../stacks/gke.js");
  const manifests = loadClusterManifests();
  build = (gkeConfig, images = GKE_TEST_IMAGES) => {
    pulumi.runtime.setAllConfig({
      "cohort-lab:artifactRoot": artifactRoot,
      "cohort-lab:cohort": JSON.stringify({ name: "society", startupTimeout: "15m", roles }),
      "cohort-lab:gke": JSON.stringify(gkeConfig),
      "cohort-lab:images": JSON.stringify(images),
    });
    const raw = readRawConfig();
    const config = parseStackConfig(raw, { stack: "gke", projectDir, profileKeys: gkeProfile.configKeys });
    return buildGke({ stack: "gke", projectDir, config, raw }, { manifests, bundle: Buffer.from("// stand-in for dist/cohort.cjs\n"), toolCacheRoot: "/cache" });
  };
  outputs = build(gke);
  await valueOf(outputs.run);
  await settle(regs, 100);
}, 900_000);

/** A Command's environment: the whole map is wrapped as a secret when an entry is one (the kubeconfig). */
const unwrap = (v: unknown) => ((v as { value?: unknown }).value ?? v) as Record<string, unknown>;
const workerDeployment = () => find(regs, "kubernetes:apps/v1:Deployment", "cohort:cohort-lab-system/cohort-run-worker");
/** The run namespace: where the worker's one RoleBinding (to the run's Role) is. */
const runNamespace = () => {
  const rbs = byType("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding").filter((r) => r.name.endsWith("/cohort-run-worker"));
  expect(rbs).toHaveLength(1);
  return rbs[0]!.name.split(":")[1]!.split("/")[0]!;
};

describe("gke profile in its default run mode (runAs unset: workflow)", () => {
  it("plans the run worker Deployment and no runtime Job: the worker from the registry by digest, its run directory an emptyDir, its runs exporting to the bucket", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(byType("kubernetes:batch/v1:Job")).toHaveLength(0);
    const deployment = workerDeployment();
    const ns = runNamespace();
    expect(ns).toMatch(/^[a-z0-9-]+-[0-9a-f]{10}$/);
    const pod = (
      deployment.inputs.spec as {
        template: {
          spec: {
            serviceAccountName: string;
            containers: { image: string; command: string[]; volumeMounts: { name: string; mountPath: string }[] }[];
            volumes: Record<string, unknown>[];
          };
        };
      }
    ).template.spec;
    expect(pod.serviceAccountName).toBe("cohort-run-worker");
    expect((pod as { nodeSelector?: unknown }).nodeSelector).toEqual({ "cohort-lab.dev/pool": "system" });
    expect(pod.containers[0]!.image).toBe(workerImage);
    expect(pod.containers[0]!.command).toEqual([
      "node",
      "/opt/cohort/cohort.cjs",
      "worker",
      "--temporal-address",
      "temporal.cohort-lab-system.svc.cluster.local:7233",
      "--task-queue",
      "cohort-lab-gke-runs",
    ]);
    expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: "artifacts", mountPath: "/var/lib/cohort/artifacts" });
    expect(pod.volumes.find((v) => v.name === "artifacts")).toEqual({ name: "artifacts", emptyDir: {} });
    expect(JSON.stringify(pod.volumes)).not.toContain("hostPath");
    const configs = byType("kubernetes:core/v1:ConfigMap").filter((r) => /^cohort:cohort-lab-system\/cohort-run-worker-[0-9a-f]{10}$/.test(r.name));
    expect(configs).toHaveLength(1);
    const config = configs[0]!;
    expect(JSON.parse((config.inputs.data as Record<string, string>)["backend.json"]!)).toEqual({ ledgerExport: "gs://my-cohort-ledgers", namespace: ns, queue: "cohort" });
  });

  it("the bucket's one writer binding names the worker's service account, and the run waits for it", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const bindings = byType("gcp:storage/bucketIAMMember:BucketIAMMember");
    expect(bindings).toHaveLength(1);
    expect(bindings[0]!.inputs.member).toBe(
      "principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/my-project-123.svc.id.goog/subject/ns/cohort-lab-system/sa/cohort-run-worker",
    );
    const run = find(regs, "command:local:Command", "cohort-run");
    expect(run.dependencies).toEqual(expect.arrayContaining([bindings[0]!.urn, workerDeployment().urn, find(regs, "command:local:Command", "cohort-identity").urn]));
  });

  it("the guard and the run reach Temporal through the supervised port-forward; the run reads the ledger back from the bucket", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const forward = JSON.stringify({ namespace: "cohort-lab-system", service: "temporal", port: 7233 });
    const guard = find(regs, "command:local:Command", "cohort-worker-guard");
    const run = find(regs, "command:local:Command", "cohort-run");
    expect(guard.inputs.create).toBe(`'${process.execPath}' components/gke/steps.cjs worker-guard`);
    expect([run.inputs.create, run.inputs.update, run.inputs.delete]).toEqual(
      ["run-submit", "run-keep", "run-forget"].map((s) => `'${process.execPath}' components/gke/steps.cjs ${s}`),
    );
    expect(workerDeployment().dependencies).toContain(guard.urn);
    for (const c of [guard, run]) {
      const env = unwrap(c.inputs.environment);
      expect(env.COHORT_TEMPORAL_PORT_FORWARD, c.name).toBe(forward);
      expect(env.COHORT_TEMPORAL_ADDRESS, c.name).toBeUndefined();
      expect(env.COHORT_KUBECTL_BIN, c.name).toMatch(/^\/cache\//);
      // The kubeconfig is a secret in the Command's inputs (the map is wrapped as one).
      expect(JSON.stringify(c.inputs.environment), c.name).toContain("1b47061264138c4ac30d75fd1eb44270");
      expect(String(env.COHORT_KUBECONFIG), c.name).toContain("command: gke-gcloud-auth-plugin");
    }
    expect(unwrap(run.inputs.environment)).toMatchObject({
      COHORT_WORKFLOW_ID: "cohort-lab/gke/0123456789ab",
      COHORT_TASK_QUEUE: "cohort-lab-gke-runs",
      COHORT_ARTIFACTS_NODE_PATH: "/var/lib/cohort/artifacts",
      // The records of this stack, apart from the local and host stacks' at the artifact root itself.
      COHORT_ARTIFACTS_DIR: path.join(artifactRoot, ".cohort-gke", "gke"),
      COHORT_LEDGER_URI: "gs://my-cohort-ledgers",
      COHORT_RUNTIME_BUNDLE: path.join(projectDir, "dist", "cohort.cjs"),
      COHORT_PROFILE: "gke",
      COHORT_STATUS_FD: "3",
    });
    expect(await valueOf(outputs.queues)).toMatchObject({ temporalTaskQueue: "cohort-lab-gke-runs" });
    expect(await valueOf(outputs.run)).toMatchObject({ id: runId, outcome: "succeeded" });
  });

  it("refuses up without gke.runWorkerImage naming the key and both ways out, in one pass with the digests not known, before any resource", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const before = regs.length;
    const refusal = (gkeConfig: Record<string, unknown>, images?: Record<string, string>) => {
      try {
        build(gkeConfig, images);
      } catch (error) {
        expect(error).toBeInstanceOf(pulumi.RunError);
        return (error as Error).message;
      }
      throw new Error("not refused");
    };
    const noImage = { ...gke, runWorkerImage: undefined };
    expect(refusal(noImage)).toBe(
      "cohort-lab:gke.runWorkerImage: gke.runAs is workflow (the default), and the run worker image (cohort-lab.local/run-worker:1.24.0, built here by `npm run toolchain -- local-apps`) " +
        "is in no registry the cluster pulls from: push it to yours and set its digest, e.g. " +
        "`npm run pulumi -- config set --stack gke --path gke.runWorkerImage us-central1-docker.pkg.dev/<project>/<repo>/run-worker@sha256:<64 hex>` (docs/gke.md), " +
        "or run the cohort as a Job: `npm run pulumi -- config set --stack gke --path gke.runAs job`",
    );
    // In one pass with the images whose digest is not known (as on `local`): the digests first, then the worker.
    const lines = refusal(noImage, { kueue: GKE_TEST_IMAGES.kueue }).split("\n");
    expect(lines.map((l) => l.slice(0, l.indexOf(": ")))).toEqual(["cohort-lab:images.agentSandbox", "cohort-lab:images.runtime", "cohort-lab:gke.runWorkerImage"]);
    // Each digest's hint names this profile's stack.
    expect(lines[0]).toContain("`npm run pulumi -- config set --stack gke --path images.agentSandbox ");
    expect(regs.length).toBe(before);
  });

  it("refuses a worker image that is not by digest, the local build's name, an unknown run mode and a missing worker bundle, naming the key, before any resource", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const before = regs.length;
    expect(() => build({ ...gke, runWorkerImage: "us-central1-docker.pkg.dev/p/r/run-worker:1.24.0" })).toThrow(
      /cohort-lab:gke\.runWorkerImage: must be the run worker image in your registry by digest/,
    );
    expect(() => build({ ...gke, runAs: "pod" })).toThrow(/cohort-lab:gke\.runAs: must be job or workflow \(got "pod"\)/);
    // The first component must be a registry host; the local build's name is refused (no node can pull it).
    expect(() => build({ ...gke, runWorkerImage: `run-worker@${TEST_DIGEST}` })).toThrow(/cohort-lab:gke\.runWorkerImage: must be the run worker image in your registry/);
    expect(() => build({ ...gke, runWorkerImage: `cohort-lab.local/run-worker:1.24.0@${TEST_DIGEST}` })).toThrow(
      /cohort-lab:gke\.runWorkerImage: cohort-lab\.local\/run-worker:1\.24\.0@sha256:[0-9a-f]{64} is the name of the local build \(cohort-lab\.local\), which no GKE node can pull/,
    );
    // A worker bundle file missing: refused naming the key, with both ways out.
    const file = path.join(projectDir, "dist", "cohort-temporal.cjs");
    fs.renameSync(file, `${file}.away`);
    try {
      expect(() => build(gke)).toThrow(
        `cohort-lab:gke.runAs: workflow: ${file} is missing; run \`npm run build\`, or run the cohort as a Job: \`npm run pulumi -- config set --path gke.runAs job\``,
      );
    } finally {
      fs.renameSync(`${file}.away`, file);
    }
    expect(regs.length).toBe(before);
  });
});

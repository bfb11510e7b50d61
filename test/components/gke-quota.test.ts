/**
 * The `gke` profile's capacity arithmetic and refusals (pure; no Pulumi engine): GKE's allocatable tiers per
 * machine type, the quota of the agent pool at its maximum, and the refusals before anything is created (a
 * member larger than one node, a cohort over the quota, a startupTimeout shorter than a cold start, an unknown
 * machine type, bad config naming its key, `pulumi up` with an image that has no digest, and in the default run mode
 * (`gke.runAs` unset: `workflow`) without `gke.runWorkerImage`). The plans are of the default run mode unless a test
 * sets `gke.runAs: job`; its worker bundles are stand-ins (a plan only reads them).
 */
import { describe, expect, it } from "vitest";
import { gkeAllocatable, GKE_EVICTION_THRESHOLD_BYTES } from "../../components/gke/allocatable.js";
import { parseStackConfig } from "../../stacks/config.js";
import { gkeProfile, parseGkeConfig, planGke } from "../../stacks/gke.js";
import { GKE_TEST_IMAGES, GKE_TEST_WORKER_IMAGE, gkePlanProjectDir } from "./gke-harness.js";

const MI = 2 ** 20;
const projectDir = gkePlanProjectDir("cohort-gke-quota-");
const manifests = { kueue: [], agentSandbox: [] };
const digest = `sha256:${"ab".repeat(32)}`;
const role = (name: string, replicas: number, cpu: string, memory: string) => ({
  name,
  replicas,
  app: { command: ["node"], image: `docker.io/library/node@${digest}` },
  readiness: { tcp: {} },
  resources: { cpu, memory },
});

function plan(cohort: Record<string, unknown>, gke: Record<string, unknown> = {}, dryRun = true, images?: Record<string, string>) {
  const raw = {
    cohort: JSON.stringify({ name: "society", startupTimeout: "15m", ...cohort }),
    gke: JSON.stringify({ project: "my-project-123", zone: "us-central1-a", bucketName: "my-ledgers", ...gke }),
    ...(images !== undefined ? { images: JSON.stringify(images) } : {}),
  };
  const config = parseStackConfig(raw, { stack: "gke", projectDir, profileKeys: gkeProfile.configKeys });
  return planGke({ config, raw, projectDir, dryRun, manifests, bundle: Buffer.from("x"), warn: () => {} });
}

describe("GKE allocatable (plan-node-sizes#node_allocatable tiers)", () => {
  it("derives e2-standard-4 and e2-standard-16 from the CPU and memory tiers and the 100Mi eviction threshold", () => {
    const e4 = gkeAllocatable("e2-standard-4", "k");
    // CPU: 4000m − (60 + 10 + 2 × 5)m = 3920m. Memory: 16Gi − (1Gi + 0.8Gi + 0.8Gi) − 100Mi = 13312Mi − 100Mi... floored to Mi.
    expect(e4.derived.cpuMilli).toBe(3920);
    expect(e4.derived.memoryBytes).toBe(Math.floor((16 * 1024 * MI - Math.ceil(2.6 * 1024 * MI) - GKE_EVICTION_THRESHOLD_BYTES) / MI) * MI);
    const e16 = gkeAllocatable("e2-standard-16", "k");
    // CPU: 16000m − (60 + 10 + 10 + 12 × 2.5)m = 15890m, exactly what a real node reported.
    expect(e16.derived.cpuMilli).toBe(15890);
    // Memory: 64Gi − (1 + 0.8 + 0.8 + 48 × 0.06)Gi − 100Mi = 59824Mi; a real node reported 57Gi, which is used.
    expect(e16.derived.memoryBytes).toBe(59824 * MI);
    expect(e16.memoryBytes).toBe(57 * 1024 * MI);
    expect(e16.arithmetic.memory).toContain("a real node reported 57Gi");
    // Above 128 GiB the 2% tier applies: n2-standard-48 (192Gi): reservation 1 + 0.8 + 0.8 + 6.72 + 1.28 = 10.6Gi.
    expect(gkeAllocatable("n2-standard-48", "k").derived.cpuMilli).toBe(48000 - (60 + 10 + 10 + 44 * 2.5));
    expect(gkeAllocatable("n2-standard-48", "k").derived.memoryBytes).toBe(Math.floor((192 * 1024 * MI - Math.ceil(10.6 * 1024 * MI) - 100 * MI) / MI) * MI);
  });

  it("refuses a machine type it does not know, naming the key", () => {
    expect(() => plan({ roles: [role("agent", 1, "1", "1Gi")] }, { agentMachineType: "c3-highcpu-4" })).toThrow(
      /cohort-lab:gke\.agentMachineType: "c3-highcpu-4" is not a machine type/,
    );
  });
});

describe("gke plan refusals (before anything is created)", () => {
  it("derives the quota from agentMaxNodes and the DaemonSet requests, and admits the seed's 100-agent cohort on 8 nodes", () => {
    const p = plan({ roles: [role("agent", 100, "1", "2Gi")] });
    expect(p.quota.nominalQuota).toEqual({ cpu: "123120m", memory: "448Gi" });
    expect(p.quota.arithmetic.cpu).toBe("8 nodes × 15890m allocatable − 4000m reserved = 123120m");
    expect(plan({ roles: [role("agent", 1, "1", "1Gi")] }, { agentMaxNodes: 2, daemonSetRequests: { cpu: "1" } }).quota.nominalQuota.cpu).toBe(`${2 * (15890 - 1000)}m`);
  });

  it("reserves only GKE's DaemonSets in either run mode: the run worker (the default) and the runtime Job run on the system pool", () => {
    const cohort = { roles: [role("agent", 1, "1", "1Gi")] };
    const byDefault = plan(cohort);
    expect(byDefault.gke.runAs).toBe("workflow");
    expect(byDefault.worker).toBeDefined();
    expect(byDefault.quota.reservedItems.map((i) => i.name)).toEqual(["GKE DaemonSets"]);
    const job = plan(cohort, { runAs: "job" });
    expect(job.worker).toBeUndefined();
    expect(job.quota.nominalQuota).toEqual(byDefault.quota.nominalQuota);
  });

  it("refuses a member larger than one node, with the arithmetic", () => {
    expect(() => plan({ roles: [role("big", 1, "16", "8Gi")] })).toThrow(/cohort-lab:cohort: a big member requests 16000m CPU .* the largest node has 15390m CPU/);
  });

  it("refuses a cohort over the quota, with the arithmetic and the fix", () => {
    expect(() => plan({ roles: [role("agent", 200, "1", "1Gi")] })).toThrow(
      /200 members need 200000m CPU .* more than the ClusterQueue quota of 123120m \(8 nodes × 15890m allocatable − 4000m reserved = 123120m\)/,
    );
  });

  it("refuses a startupTimeout shorter than a cold start of the agent pool, naming the assumption's key", () => {
    expect(() => plan({ startupTimeout: "2m", roles: [role("agent", 1, "1", "1Gi")] })).toThrow(
      /cohort-lab:cohort\.startupTimeout: 2m is shorter than a cold start of the agent pool \(5m: .*cohort-lab:gke\.coldStart/,
    );
    expect(plan({ startupTimeout: "2m", roles: [role("agent", 1, "1", "1Gi")] }, { coldStart: "90s" }).quota).toBeDefined();
  });

  it("names the key and the reason for bad config", () => {
    expect(() => parseGkeConfig({ gke: JSON.stringify({ project: "P", zone: "us-central1-a", bucketName: "b" }) })).toThrow(/cohort-lab:gke\.project: must be a GCP project id/);
    expect(() => parseGkeConfig({ gke: JSON.stringify({ project: "my-project-123", zone: "europe-west1-b", region: "us-central1", bucketName: "bb-1" }) })).toThrow(
      /cohort-lab:gke\.zone: europe-west1-b is not a zone of gke\.region us-central1/,
    );
    expect(() => parseGkeConfig({ gke: JSON.stringify({ project: "my-project-123", zone: "us-central1-a", bucketName: "bb-1", systemNodes: -1 }) })).toThrow(
      /cohort-lab:gke\.systemNodes/,
    );
    expect(() => parseGkeConfig({ gke: JSON.stringify({ project: "my-project-123", zone: "us-central1-a", bucketName: "bb-1", nodes: 3 }) })).toThrow(
      /cohort-lab:gke\.nodes: unknown field/,
    );
    const c = parseGkeConfig({ gke: JSON.stringify({ project: "my-project-123", zone: "us-central1-a", bucketName: "bb-1" }) });
    expect(c).toMatchObject({
      region: "us-central1",
      systemMachineType: "e2-standard-4",
      systemNodes: 1,
      agentMachineType: "e2-standard-16",
      agentMaxNodes: 8,
      deleteLedgers: false,
      deletionProtection: false,
      runAs: "workflow",
    });
    expect(c.runWorkerImage).toBeUndefined();
  });

  it("refuses pulumi up (not preview) while an image has no digest, naming its key", () => {
    expect(() => plan({ roles: [role("agent", 1, "1", "1Gi")] }, {}, true)).not.toThrow();
    expect(() => plan({ roles: [role("agent", 1, "1", "1Gi")] }, {}, false)).toThrow(/cohort-lab:images\.\w+/);
  });

  it("refuses pulumi up in the default run mode without gke.runWorkerImage, and not with it or with gke.runAs job", () => {
    const cohort = { roles: [role("agent", 1, "1", "1Gi")] };
    expect(() => plan(cohort, {}, false, GKE_TEST_IMAGES)).toThrow(
      /^cohort-lab:gke\.runWorkerImage: gke\.runAs is workflow \(the default\), .* or run the cohort as a Job: .*gke\.runAs job`$/,
    );
    expect(plan(cohort, { runWorkerImage: GKE_TEST_WORKER_IMAGE }, false, GKE_TEST_IMAGES).worker?.image).toBe(GKE_TEST_WORKER_IMAGE);
    expect(plan(cohort, { runAs: "job" }, false, GKE_TEST_IMAGES).worker).toBeUndefined();
  });
});

/**
 * The `gke` profile in the Job mode (`gke.runAs: job`, set explicitly: the default is the workflow mode,
 * gke-workflow.test.ts) under Pulumi mocks (as in `pulumi up`: the summary Command "prints" the line the gke
 * `run-summary` step prints): every registration recorded with its parent, provider and dependency URNs (the
 * approach of local-harness.ts, with a mock of `gcp:organizations/getProject` for the project number:
 * gke-harness.ts). Asserts the graph's types, names, parents, explicit providers, ordering (pools after the cluster,
 * the Kubernetes layer after the kubeconfig, the ledger writer binding for the run's service account only, the run
 * after the binding), key inputs (label, taint, autoscaling bounds, bucket protections, the Job's emptyDir and
 * `--ledger-export`), the quota arithmetic, the `run` output from the summary Command, and that no non-secret output
 * depends on a secret.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { GKE_TEST_IMAGES, installGkeMocks } from "./gke-harness.js";
import { find, settle, valueOf, type Registration } from "./local-harness.js";

const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-gke-mock-"));
const roles = [
  { name: "router", app: { command: ["node", "-e", "1"] }, readiness: { tcp: {} }, resources: { cpu: "500m", memory: "512Mi" } },
  { name: "agent", replicas: 100, needs: ["router"], app: { command: ["node", "-e", "1"] }, readiness: { tcp: {} }, resources: { cpu: "1", memory: "2Gi" } },
];
const images = GKE_TEST_IMAGES;
const gke = { project: "my-project-123", zone: "us-central1-a", bucketName: "my-cohort-ledgers", runAs: "job" };
const runId = "society-20261202T030000Z-a1b2c3";
/** What components/gke/steps.cjs `run-summary` prints: the runtime's summary, outcome and firstFailure from completion.json, reportPath null. */
const summary = {
  runId,
  outcome: "succeeded",
  size: 101,
  readyCount: 101,
  timeToReadyMs: 98765,
  ledgerPath: `/var/lib/cohort/artifacts/${runId}`,
  reportPath: null,
  firstFailure: null,
  ledgerUri: `gs://my-cohort-ledgers/${runId}`,
};

let regs: Registration[] = [];
let outputs: import("../../stacks/profiles.js").StackOutputs;
let skipReason: string | undefined;
let manifests: import("../../stacks/cluster.js").ClusterManifests;
const byType = (type: string) => regs.filter((r) => r.type === type);

const providerOf = (r: Registration) => r.provider.split("::").slice(0, -1).join("::");

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    console.warn(`gke mock test SKIPPED: ${skipReason}`);
    return;
  }
  regs = await installGkeMocks({ preview: false, stdoutFor: (name) => (name === "cohort-summary" ? `${JSON.stringify(summary)}\n` : undefined) });
  pulumi.runtime.setAllConfig({
    "cohort-lab:cohort": JSON.stringify({ name: "society", startupTimeout: "15m", roles }),
    "cohort-lab:gke": JSON.stringify(gke),
    "cohort-lab:images": JSON.stringify(images),
  });
  const { parseStackConfig, readRawConfig } = await import("../../stacks/config.js");
  const { loadClusterManifests } = await import("../../stacks/cluster.js");
  const { buildGke, gkeProfile } = await import("../../stacks/gke.js");
  manifests = loadClusterManifests();
  const raw = readRawConfig();
  const config = parseStackConfig(raw, { stack: "gke", projectDir, profileKeys: gkeProfile.configKeys });
  outputs = buildGke({ stack: "gke", projectDir, config, raw }, { manifests, bundle: Buffer.from("// stand-in for dist/cohort.cjs\n") });
  await settle(regs, 100);
}, 900_000);

describe("gke profile graph (gke.runAs: job)", () => {
  it("registers one component per concept with the cohortlab:gke tokens, the GCP resources parented to them", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const components = regs.filter((r) => !r.custom).map((r) => `${r.type} ${r.name}`);
    expect(components).toEqual(
      expect.arrayContaining([
        "cohortlab:gke:GkeNetwork gke-network",
        "cohortlab:gke:GkeNodeServiceAccount gke-nodes",
        "cohortlab:gke:GkeCluster gke",
        "cohortlab:gke:GkeNodePool gke-system",
        "cohortlab:gke:GkeNodePool gke-agents",
        "cohortlab:gke:LedgerBucket ledgers",
        "cohortlab:k8s:Kueue kueue",
        "cohortlab:k8s:AgentSandbox agent-sandbox",
        "cohortlab:k8s:Temporal temporal",
        "cohortlab:runtime:Runtime runtime",
        "cohortlab:runtime:CohortRun cohort",
      ]),
    );
    const parentOf = (type: string, name: string, parentType: string, parentName: string) => expect(find(regs, type, name).parent).toBe(find(regs, parentType, parentName).urn);
    parentOf("gcp:compute/network:Network", "gke-network-vpc", "cohortlab:gke:GkeNetwork", "gke-network");
    parentOf("gcp:compute/subnetwork:Subnetwork", "gke-network-subnet", "cohortlab:gke:GkeNetwork", "gke-network");
    parentOf("gcp:container/cluster:Cluster", "gke-cluster", "cohortlab:gke:GkeCluster", "gke");
    parentOf("gcp:container/nodePool:NodePool", "gke-system-pool", "cohortlab:gke:GkeNodePool", "gke-system");
    parentOf("gcp:container/nodePool:NodePool", "gke-agents-pool", "cohortlab:gke:GkeNodePool", "gke-agents");
    parentOf("gcp:storage/bucket:Bucket", "ledgers-bucket", "cohortlab:gke:LedgerBucket", "ledgers");
    parentOf("pulumi:providers:kubernetes", "gke-k8s", "cohortlab:gke:GkeCluster", "gke");
    expect(byType("pulumi:providers:kubernetes")).toHaveLength(1);
    expect(byType("gcp:storage/bucketIAMMember:BucketIAMMember")).toHaveLength(1);
    // The run: one Job, under the CohortRun.
    expect(byType("kubernetes:batch/v1:Job")).toHaveLength(1);
    expect(byType("kubernetes:batch/v1:Job")[0]!.parent).toBe(find(regs, "cohortlab:runtime:CohortRun", "cohort").urn);
  });

  it("gives every GCP resource the explicit gcp provider and every Kubernetes resource the cluster's provider", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const gcpProvider = find(regs, "pulumi:providers:gcp", "gke-gcp");
    expect(gcpProvider.inputs).toMatchObject({ project: "my-project-123", region: "us-central1", zone: "us-central1-a" });
    const gcpResources = regs.filter((r) => r.custom && r.type.startsWith("gcp:"));
    expect(gcpResources.length).toBe(9);
    for (const r of gcpResources) expect([r.name, providerOf(r)]).toEqual([r.name, gcpProvider.urn]);
    const k8sProvider = find(regs, "pulumi:providers:kubernetes", "gke-k8s");
    const k8s = regs.filter((r) => r.type.startsWith("kubernetes:"));
    expect(k8s.length).toBeGreaterThan(90);
    for (const r of k8s) expect([r.name, providerOf(r)]).toEqual([r.name, k8sProvider.urn]);
  });

  it("orders the pools after the cluster, and the Kubernetes layer after the kubeconfig and both pools", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const cluster = find(regs, "gcp:container/cluster:Cluster", "gke-cluster");
    const system = find(regs, "gcp:container/nodePool:NodePool", "gke-system-pool");
    const agents = find(regs, "gcp:container/nodePool:NodePool", "gke-agents-pool");
    for (const pool of [system, agents]) expect(pool.dependencies).toContain(cluster.urn);
    // The park guard runs before the system pool changes size.
    expect(system.dependencies).toContain(find(regs, "command:local:Command", "gke-park-guard").urn);
    const k8sProvider = find(regs, "pulumi:providers:kubernetes", "gke-k8s");
    expect(k8sProvider.dependencies).toEqual(expect.arrayContaining([cluster.urn, system.urn, agents.urn]));
    expect(cluster.dependencies).toEqual(expect.arrayContaining([find(regs, "gcp:compute/subnetwork:Subnetwork", "gke-network-subnet").urn]));
    // The cluster runs as the node service account, which holds only the default node role.
    const role = find(regs, "gcp:projects/iAMMember:IAMMember", "gke-nodes-role");
    expect(role.inputs.role).toBe("roles/container.defaultNodeServiceAccount");
  });

  it("declares the cluster: Standard, zonal, VPC-native, default pool removed, release channel, Workload Identity pool", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const c = find(regs, "gcp:container/cluster:Cluster", "gke-cluster").inputs;
    expect(c).toMatchObject({
      location: "us-central1-a",
      name: "cohort-lab",
      networkingMode: "VPC_NATIVE",
      removeDefaultNodePool: true,
      initialNodeCount: 1,
      deletionProtection: false,
      releaseChannel: { channel: "REGULAR" },
      workloadIdentityConfig: { workloadPool: "my-project-123.svc.id.goog" },
      ipAllocationPolicy: { clusterSecondaryRangeName: "cohort-lab-pods", servicesSecondaryRangeName: "cohort-lab-services" },
    });
    const subnet = find(regs, "gcp:compute/subnetwork:Subnetwork", "gke-network-subnet").inputs;
    expect(subnet.secondaryIpRanges).toEqual([
      { rangeName: "cohort-lab-pods", ipCidrRange: "10.44.0.0/14" },
      { rangeName: "cohort-lab-services", ipCidrRange: "10.48.0.0/20" },
    ]);
    expect(find(regs, "gcp:compute/network:Network", "gke-network-vpc").inputs.autoCreateSubnetworks).toBe(false);
  });

  it("declares the pools: system fixed at 1, agents autoscaling 0..8 with the label and NO_SCHEDULE taint on the pool, GKE metadata server", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const system = find(regs, "gcp:container/nodePool:NodePool", "gke-system-pool").inputs;
    expect(system).toMatchObject({ name: "system", nodeCount: 1, nodeConfig: { machineType: "e2-standard-4", labels: { "cohort-lab.dev/pool": "system" } } });
    expect(system.autoscaling).toBeUndefined();
    expect((system.nodeConfig as { taints?: unknown }).taints).toBeUndefined();
    const agents = find(regs, "gcp:container/nodePool:NodePool", "gke-agents-pool").inputs;
    expect(agents).toMatchObject({
      name: "agents",
      initialNodeCount: 0,
      autoscaling: { minNodeCount: 0, maxNodeCount: 8 },
      nodeConfig: {
        machineType: "e2-standard-16",
        diskSizeGb: 100,
        labels: { "cohort-lab.dev/pool": "agents" },
        taints: [{ key: "cohort-lab.dev/agents", value: "true", effect: "NO_SCHEDULE" }],
        workloadMetadataConfig: { mode: "GKE_METADATA" },
      },
    });
    expect(agents.nodeCount).toBeUndefined();
  });

  it("pins Kueue, Agent Sandbox and Temporal to the system pool; the ResourceFlavor carries the agent pool's label and toleration", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const deployments = byType("kubernetes:apps/v1:Deployment");
    expect(deployments.map((d) => d.name).sort()).toEqual([
      "agent-sandbox:agent-sandbox-system/agent-sandbox-controller",
      "kueue:kueue-system/kueue-controller-manager",
      "temporal:cohort-lab-system/temporal",
    ]);
    for (const d of deployments) {
      const spec = d.inputs.spec as { template: { spec: { nodeSelector?: Record<string, string> } } };
      expect([d.name, spec.template.spec.nodeSelector?.["cohort-lab.dev/pool"]]).toEqual([d.name, "system"]);
    }
    const flavor = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "kueue:cohort-lab-gke-agents").inputs.spec as Record<string, unknown>;
    expect(flavor.nodeLabels).toEqual({ "cohort-lab.dev/pool": "agents" });
    expect(flavor.tolerations).toEqual([{ key: "cohort-lab.dev/agents", operator: "Equal", value: "true", effect: "NoSchedule" }]);
  });

  it("sets the ClusterQueue quota to agentMaxNodes × allocatable(e2-standard-16) less the DaemonSet requests per node", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const cq = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab");
    // 8 × (15890m − 500m) = 123120m; 8 × (57Gi − 1Gi) = 448Gi = 458752Mi (57Gi: the measured node, below the 59824Mi of GKE's tiers).
    expect((cq.inputs.spec as { resourceGroups: { flavors: { resources: unknown }[] }[] }).resourceGroups[0]!.flavors[0]!.resources).toEqual([
      { name: "cpu", nominalQuota: "123120m" },
      { name: "memory", nominalQuota: "448Gi" },
    ]);
  });

  it("protects the ledger bucket and lets only the run's Kubernetes service account write it", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const bucket = find(regs, "gcp:storage/bucket:Bucket", "ledgers-bucket");
    expect(bucket.inputs).toMatchObject({
      name: "my-cohort-ledgers",
      location: "US-CENTRAL1",
      uniformBucketLevelAccess: true,
      publicAccessPrevention: "enforced",
      forceDestroy: false,
    });
    const [binding] = byType("gcp:storage/bucketIAMMember:BucketIAMMember");
    const ns = find(regs, "kubernetes:core/v1:Namespace", `runtime:${binding!.name.replace(/^ledgers-writer-/, "")}`);
    expect(binding!.inputs.role).toBe("roles/storage.objectUser");
    expect(binding!.inputs.member).toBe(
      `principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/my-project-123.svc.id.goog/subject/ns/${String((ns.inputs.metadata as { name: string }).name)}/sa/cohort-runtime`,
    );
    expect(binding!.dependencies).toContain(bucket.urn);
    // The destroy guard depends on the bucket, so its delete (the refusal) runs before the bucket's, and on the run, so
    // it runs after the run's delete (which removes the run's objects when keepLedgers is false).
    const guard = find(regs, "command:local:Command", "ledgers-guard");
    expect(guard.dependencies).toContain(bucket.urn);
    expect(guard.dependencies).toContain(find(regs, "command:local:Command", "cohort-summary").urn);
    // Its delete step goes through the bundled runtime (cohort ledger list / delete --all), as the run's steps do.
    expect(guard.inputs.delete).toBe(`'${process.execPath}' components/gke/steps.cjs ledger-guard`);
    expect(unwrap(guard.inputs.environment)).toEqual({
      COHORT_BUCKET: "my-cohort-ledgers",
      COHORT_DELETE_LEDGERS: "false",
      COHORT_RUNTIME_BUNDLE: path.join(path.resolve(projectDir), "dist", "cohort.cjs"),
    });
    // The park guard lists Workloads with the pinned kubectl of the run's steps.
    const park = find(regs, "command:local:Command", "gke-park-guard");
    const parkEnv = unwrap(park.inputs.environment);
    const summaryEnv = unwrap(find(regs, "command:local:Command", "cohort-summary").inputs.environment);
    for (const key of ["COHORT_KUBECTL_BIN", "COHORT_KUBECTL_URL", "COHORT_KUBECTL_SHA256"]) expect([key, parkEnv[key]]).toEqual([key, summaryEnv[key]]);
    expect(parkEnv.COHORT_KUBECTL_BIN).toMatch(/kubectl$/);
    expect(Object.keys(parkEnv).sort()).toEqual(["COHORT_KUBECONFIG", "COHORT_KUBECTL_BIN", "COHORT_KUBECTL_SHA256", "COHORT_KUBECTL_URL", "COHORT_SYSTEM_NODES"]);
  });

  it("keeps the kubeconfig a secret with the gke-gcloud-auth-plugin exec credential, and no other output secret", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const isSecret = (o: unknown) => (pulumi.Output.isInstance(o) ? pulumi.isSecret(o as pulumi.Output<unknown>) : Promise.resolve(false));
    expect(await isSecret(outputs.kubeconfig)).toBe(true);
    for (const key of ["artifactRoot", "kubeContext", "queues", "run"] as const) expect([key, await isSecret(outputs[key])]).toEqual([key, false]);
    const kubeconfig = await new Promise<string>((resolve) => outputs.kubeconfig!.apply((v) => resolve(v)));
    expect(kubeconfig).toContain("command: gke-gcloud-auth-plugin");
    expect(kubeconfig).toContain("server: https://203.0.113.10");
    expect(kubeconfig).not.toMatch(/token:|client-key/);
    // The provider gets the kubeconfig as a secret input.
    expect(JSON.stringify(find(regs, "pulumi:providers:kubernetes", "gke-k8s").inputs.kubeconfig)).toContain("1b47061264138c4ac30d75fd1eb44270");
    expect(await new Promise((r) => outputs.kubeContext!.apply(r))).toBe("gke_my-project-123_us-central1-a_cohort-lab");
  });

  it("runs the cohort as a Job whose ledger is an emptyDir exported to gs://<bucket> (no hostPath on GKE)", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const [job] = byType("kubernetes:batch/v1:Job");
    const pod = (job!.inputs.spec as { template: { spec: PodSpec } }).template.spec;
    const artifacts = pod.volumes.find((v) => v.name === "artifacts");
    expect(artifacts).toEqual({ name: "artifacts", emptyDir: {} });
    expect(pod.volumes.some((v) => "hostPath" in v)).toBe(false);
    const runtime = pod.containers.find((c) => c.name === "runtime")!;
    expect(runtime.volumeMounts).toContainEqual({ name: "artifacts", mountPath: "/var/lib/cohort/artifacts" });
    const cmd = runtime.command;
    expect(cmd.slice(cmd.indexOf("--artifacts"), cmd.indexOf("--artifacts") + 2)).toEqual(["--artifacts", "/var/lib/cohort/artifacts"]);
    expect(cmd.slice(-2)).toEqual(["--ledger-export", "gs://my-cohort-ledgers"]);
    // The pod writes as the run's KSA, the one the writer binding names.
    expect(pod.serviceAccountName).toBe("cohort-runtime");
  });

  it("orders the run after the writer binding and the Kubernetes layer; the summary Command runs the gke steps with the pinned kubectl", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const [job] = byType("kubernetes:batch/v1:Job");
    const [binding] = byType("gcp:storage/bucketIAMMember:BucketIAMMember");
    expect(job!.dependencies).toEqual(
      expect.arrayContaining([
        binding!.urn,
        find(regs, "kubernetes:apps/v1:Deployment", "agent-sandbox:agent-sandbox-system/agent-sandbox-controller").urn,
        find(regs, "kubernetes:apps/v1:Deployment", "temporal:cohort-lab-system/temporal").urn,
        find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab").urn,
      ]),
    );
    const summaryCommand = find(regs, "command:local:Command", "cohort-summary");
    expect(summaryCommand.parent).toBe(find(regs, "cohortlab:runtime:CohortRun", "cohort").urn);
    expect(summaryCommand.dependencies).toContain(job!.urn);
    expect([summaryCommand.inputs.create, summaryCommand.inputs.delete]).toEqual([
      `'${process.execPath}' components/gke/steps.cjs run-summary`,
      `'${process.execPath}' components/gke/steps.cjs run-forget`,
    ]);
    expect(summaryCommand.inputs.dir).toBe(path.resolve(projectDir));
    const env = unwrap(summaryCommand.inputs.environment);
    expect(env).toMatchObject({
      COHORT_LEDGER_URI: "gs://my-cohort-ledgers",
      COHORT_RUNTIME_BUNDLE: path.join(path.resolve(projectDir), "dist", "cohort.cjs"),
      COHORT_KEEP_LEDGERS: "true",
      COHORT_JOB: "cohort-run",
      COHORT_CONTAINER: "runtime",
    });
    expect(env.COHORT_ARTIFACTS_DIR).toBeUndefined();
    expect(env.COHORT_KUBECTL_BIN).toMatch(/kubectl$/);
    expect(env.COHORT_KUBECTL_SHA256).toMatch(/^[0-9a-f]{64}$/);
    const progress = find(regs, "command:local:Command", "cohort-progress");
    expect(progress.inputs.create).toBe(`'${process.execPath}' components/gke/steps.cjs run-progress`);
    expect(progress.dependencies).not.toContain(job!.urn);
    expect(progress.dependencies).toContain(binding!.urn);
  });

  it("exports the run summary the gke summary step printed as the run output (as on every profile)", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(await valueOf(outputs.run)).toEqual({
      id: runId,
      outcome: "succeeded",
      size: 101,
      readyCount: 101,
      timeToReadyMs: 98765,
      ledgerPath: summary.ledgerPath,
      reportPath: null,
      firstFailure: null,
      specSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(await valueOf(outputs.artifactRoot)).toBe("gs://my-cohort-ledgers");
  });
});

interface PodSpec {
  readonly serviceAccountName: string;
  readonly volumes: readonly ({ readonly name: string } & Record<string, unknown>)[];
  readonly containers: readonly { readonly name: string; readonly command: string[]; readonly volumeMounts: readonly unknown[] }[];
}

const unwrap = (v: unknown) => ((v as { value?: unknown }).value ?? v) as Record<string, string>;

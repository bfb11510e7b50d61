/**
 * The `local` profile's graph under Pulumi mocks (one program in this file, `pulumi up` mode, image digests set
 * in config): every registration is recorded with its parent, provider and dependency URNs (local-harness.ts),
 * and the test asserts the ordering the profile promises:
 * - the kind cluster Command exists before any Kubernetes resource: every Kubernetes resource has the cluster's
 *   provider explicitly, and that provider depends on the Command (its kubeconfig is the Command's stdout);
 * - every custom resource depends on its CRD and on Kueue's webhook gate;
 * - namespaced objects depend on their Namespace; Agent Sandbox and Temporal wait for Kueue's webhooks;
 * - the ClusterQueue carries the derived quota; the run Job waits for every per-run object and the controllers;
 * - the stack outputs have the CI contract's shape (run as on the host profile; kubeconfig a secret).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { FAKE_KUBECONFIG, find, installMocks, settle, TEST_DIGEST, valueOf, type Registration } from "./local-harness.js";

const GI = 2 ** 30;
const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-mock-"));
const artifactRoot = path.join(projectDir, "artifacts");
const summary = {
  runId: "society-20261130T080000Z-a1b2c3",
  outcome: "succeeded",
  size: 4,
  readyCount: 4,
  timeToReadyMs: 4321,
  ledgerPath: path.join(artifactRoot, "society-20261130T080000Z-a1b2c3"),
  reportPath: path.join(artifactRoot, "society-20261130T080000Z-a1b2c3", "report.html"),
  firstFailure: null,
};
const roles = [
  {
    name: "router",
    app: { command: ["node", "-e", "require('node:http').createServer((q, s) => s.end('ok')).listen(process.env.COHORT_PORT)"] },
    readiness: { http: { path: "/" } },
    resources: { cpu: "100m", memory: "64Mi" },
  },
  {
    name: "agent",
    replicas: 3,
    needs: ["router"],
    app: { command: ["node", "-e", "require('node:net').createServer().listen(process.env.COHORT_PORT)"] },
    readiness: { tcp: {} },
    resources: { cpu: "100m", memory: "64Mi" },
  },
];
const images = {
  kueue: `registry.k8s.io/kueue/kueue:v0.17.0@${TEST_DIGEST}`,
  agentSandbox: `registry.k8s.io/agent-sandbox/agent-sandbox-controller@${TEST_DIGEST}`,
  runtime: `docker.io/library/node@${TEST_DIGEST}`,
};

let regs: Registration[] = [];
let outputs: import("../../stacks/profiles.js").StackOutputs;
let skipReason: string | undefined;

const byType = (type: string) => regs.filter((r) => r.type === type);
const isKubernetes = (r: Registration) => r.type.startsWith("kubernetes:");

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    console.warn(`local mock test SKIPPED: ${skipReason}`);
    return;
  }
  regs = await installMocks({
    preview: false,
    stdoutFor: (name) => (name === "local-kind" ? FAKE_KUBECONFIG : name === "cohort-summary" ? `${JSON.stringify(summary)}\n` : undefined),
  });
  pulumi.runtime.setAllConfig({
    "cohort-lab:artifactRoot": artifactRoot,
    "cohort-lab:cohort": JSON.stringify({ name: "society", roles }),
    "cohort-lab:images": JSON.stringify(images),
    // The Job executor (the default, workflow, is local-workflow.test.ts).
    "cohort-lab:local": JSON.stringify({ temporalPort: 7234, runAs: "job" }),
  });
  const { parseStackConfig, readRawConfig } = await import("../../stacks/config.js");
  const { buildLocal, localProfile } = await import("../../stacks/local.js");
  const raw = readRawConfig();
  const config = parseStackConfig(raw, { stack: "local", projectDir, profileKeys: localProfile.configKeys });
  outputs = buildLocal(
    { stack: "local", projectDir, config, raw },
    { facts: { cpus: 8, memoryBytes: 32 * GI, uid: 1000, gid: 1001, platform: "linux-x64" }, bundle: Buffer.from("// stand-in for dist/cohort.cjs\n"), toolCacheRoot: "/cache" },
  );
  await valueOf(outputs.run);
  await settle(regs, 100);
}, 900_000);

describe("local profile graph", () => {
  it("registers the cluster, the controllers, Temporal, the runtime and the run", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const components = regs.filter((r) => !r.custom).map((r) => `${r.type} ${r.name}`);
    expect(components).toEqual(
      expect.arrayContaining([
        "cohortlab:local:KindCluster local",
        "cohortlab:k8s:Kueue kueue",
        "cohortlab:k8s:AgentSandbox agent-sandbox",
        "cohortlab:k8s:Temporal temporal",
        "cohortlab:runtime:Runtime runtime",
        "cohortlab:runtime:CohortRun cohort",
      ]),
    );
    const kind = find(regs, "command:local:Command", "local-kind");
    expect(kind.parent).toBe(find(regs, "cohortlab:local:KindCluster", "local").urn);
    expect(byType("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")).toHaveLength(12); // 11 Kueue + Sandbox
    expect(
      byType("kubernetes:apps/v1:Deployment")
        .map((r) => r.name)
        .sort(),
    ).toEqual(["agent-sandbox:agent-sandbox-system/agent-sandbox-controller", "kueue:kueue-system/kueue-controller-manager", "temporal:cohort-lab-system/temporal"]);
    expect(byType("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue").map((r) => r.name)).toEqual(["kueue:cohort-lab"]);
    expect(byType("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor").map((r) => r.name)).toEqual(["kueue:cohort-lab-default"]);
    expect(byType("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")).toHaveLength(1);
    expect(byType("kubernetes:batch/v1:Job")).toHaveLength(1);
    expect(find(regs, "command:local:Command", "cohort-summary").parent).toBe(find(regs, "cohortlab:runtime:CohortRun", "cohort").urn);
  });

  it("creates the kind cluster before any Kubernetes resource: explicit provider everywhere, provider after the cluster Command", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const kind = find(regs, "command:local:Command", "local-kind");
    const provider = find(regs, "pulumi:providers:kubernetes", "local-provider");
    expect(provider.dependencies).toContain(kind.urn);
    // Provider inputs reach the engine as strings.
    expect(provider.inputs.deleteUnreachable).toBe("true");
    expect(provider.inputs.enableServerSideApply).toBe("true");
    expect(provider.inputs.context).toBe("kind-cohort-lab");
    expect(String(provider.inputs.clusterIdentifier)).toMatch(/^kind-cohort-lab-[0-9a-f]{16}$/);
    const k8s = regs.filter(isKubernetes);
    expect(k8s.length).toBeGreaterThan(90);
    for (const r of k8s) expect([r.name, r.provider.split("::").slice(0, -1).join("::")]).toEqual([r.name, provider.urn]);
    expect(byType("pulumi:providers:kubernetes")).toHaveLength(1);
  });

  it("makes every custom resource depend on its CRD and on Kueue's webhook gate", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const gate = find(regs, "command:local:Command", "kueue-webhook-probe");
    const crd = (name: string) => find(regs, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", `kueue:${name}`).urn;
    const crs = regs.filter((r) => /^kubernetes:kueue\.x-k8s\.io\//.test(r.type));
    expect(crs.map((r) => r.type.split(":").pop()).sort()).toEqual(["ClusterQueue", "LocalQueue", "ResourceFlavor"]);
    for (const cr of crs) {
      const kind = cr.type.split(":").pop()!.toLowerCase();
      expect(cr.dependencies).toEqual(expect.arrayContaining([crd(`${kind}s.kueue.x-k8s.io`), gate.urn]));
    }
    // The gate probes only after every install object exists (CRDs, webhook configurations, the Deployment).
    const kueueInstall = regs.filter((r) => isKubernetes(r) && r.name.startsWith("kueue:") && !/ClusterQueue|ResourceFlavor/.test(r.type));
    expect(kueueInstall.length).toBe(79);
    expect(gate.dependencies).toEqual(expect.arrayContaining(kueueInstall.map((r) => r.urn)));
  });

  it("orders the install: Namespace first, the manager Deployment after every other object, APIServices after it", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const ns = find(regs, "kubernetes:core/v1:Namespace", "kueue:kueue-system").urn;
    const deployment = find(regs, "kubernetes:apps/v1:Deployment", "kueue:kueue-system/kueue-controller-manager");
    for (const r of regs.filter((x) => x.name.startsWith("kueue:kueue-system/") && x !== deployment)) expect([r.name, r.dependencies]).toEqual([r.name, [ns]]);
    const others = regs.filter((r) => isKubernetes(r) && r.name.startsWith("kueue:") && !/Deployment|APIService|ClusterQueue|ResourceFlavor/.test(r.type));
    expect(deployment.dependencies).toEqual(expect.arrayContaining(others.map((r) => r.urn)));
    for (const api of byType("kubernetes:apiregistration.k8s.io/v1:APIService")) expect(api.dependencies).toEqual([deployment.urn]);
  });

  it("makes Agent Sandbox and Temporal wait for Kueue's webhooks (its pod webhook fails closed in their namespaces)", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const gate = find(regs, "command:local:Command", "kueue-webhook-probe").urn;
    const children = regs.filter((r) => isKubernetes(r) && (r.name.startsWith("agent-sandbox:") || r.name.startsWith("temporal:")));
    expect(children.length).toBe(13);
    for (const r of children) expect([r.name, r.dependencies.includes(gate)]).toEqual([r.name, true]);
  });

  it("re-derives the quota from the real nodes after the cluster exists and before the ClusterQueue", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const capacity = find(regs, "command:local:Command", "local-capacity");
    expect(capacity.dependencies).toContain(find(regs, "command:local:Command", "local-kind").urn);
    // The environment holds the kubeconfig, so the whole map reaches the engine as a secret.
    const environment = capacity.inputs.environment as { value?: Record<string, string> } & Record<string, unknown>;
    expect(environment["4dabf18193072939515e22adb298388d"]).toBe("1b47061264138c4ac30d75fd1eb44270");
    expect(JSON.parse(environment.value!.COHORT_CAPACITY!)).toEqual({
      nodes: ["cohort-lab-worker", "cohort-lab-worker2"],
      reserved: { cpuMilli: 1250, memoryBytes: 1136 * 2 ** 20 },
      quota: { cpuMilli: 14750, memoryBytes: 64400 * 2 ** 20 },
    });
    for (const kind of ["ClusterQueue", "ResourceFlavor"]) {
      expect(regs.find((r) => r.type === `kubernetes:kueue.x-k8s.io/v1beta2:${kind}`)!.dependencies).toContain(capacity.urn);
    }
  });

  it("sets the ClusterQueue quota to what the nodes hold less the system pods", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const cq = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab");
    // 2 workers × 8000m − (kindnet 2 × 100m + coredns 2 × 100m + kueue 500m + temporal 100m + runtime Job 250m)
    // 2 workers × 32Gi − (kindnet 2 × 50Mi + coredns 2 × 70Mi + kueue 512Mi + temporal 128Mi + runtime Job 256Mi)
    expect((cq.inputs.spec as { resourceGroups: unknown }).resourceGroups).toEqual([
      {
        coveredResources: ["cpu", "memory"],
        flavors: [
          {
            name: "cohort-lab-default",
            resources: [
              { name: "cpu", nominalQuota: "14750m" },
              { name: "memory", nominalQuota: "64400Mi" },
            ],
          },
        ],
      },
    ]);
  });

  it("configures the Kueue manager: pinned image by digest, pod integration, waitForPodsReady beyond startupTimeout", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const deployment = find(regs, "kubernetes:apps/v1:Deployment", "kueue:kueue-system/kueue-controller-manager");
    const container = (deployment.inputs.spec as { template: { spec: { containers: { image: string; imagePullPolicy: string }[] } } }).template.spec.containers[0]!;
    expect([container.image, container.imagePullPolicy]).toEqual([images.kueue, "IfNotPresent"]);
    const cm = find(regs, "kubernetes:core/v1:ConfigMap", "kueue:kueue-system/kueue-manager-config");
    const text = (cm.inputs.data as Record<string, string>)["controller_manager_config.yaml"]!;
    const { parse } = await import("yaml");
    const configuration = parse(text) as Record<string, unknown>;
    expect(configuration.integrations).toEqual({ frameworks: ["batch/job", "pod"] });
    // startupTimeout defaults to 5m (RunSpec default); + 1m margin.
    expect(configuration.waitForPodsReady).toEqual({ timeout: "6m", blockAdmission: false, requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: 0 } });
  });

  it("deploys the runtime: namespaced RBAC only, the spec and bundle ConfigMaps, and a Job that waits for everything it needs", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const { RUNTIME_POLICY_RULES } = await import("../../runtime/backends/kubernetes/rbac.js");
    const runtimeComponent = find(regs, "cohortlab:runtime:Runtime", "runtime").urn;
    const runtimeChildren = regs.filter((r) => r.parent === runtimeComponent);
    expect(runtimeChildren.map((r) => r.type.split(":").slice(1).join(":")).sort()).toEqual([
      "core/v1:ConfigMap", // the RunSpec
      "core/v1:ConfigMap", // the compressed bundle (one part for a small bundle)
      "core/v1:Namespace",
      "core/v1:ServiceAccount",
      "kueue.x-k8s.io/v1beta2:LocalQueue",
      "rbac.authorization.k8s.io/v1:Role",
      "rbac.authorization.k8s.io/v1:RoleBinding",
    ]);
    const role = runtimeChildren.find((r) => r.type.endsWith(":Role"))!;
    expect(role.inputs.rules).toEqual(RUNTIME_POLICY_RULES.map((r) => ({ ...r })));
    const job = byType("kubernetes:batch/v1:Job")[0]!;
    expect(job.dependencies).toEqual(expect.arrayContaining(runtimeChildren.map((r) => r.urn)));
    expect(job.dependencies).toEqual(
      expect.arrayContaining([
        find(regs, "kubernetes:apps/v1:Deployment", "agent-sandbox:agent-sandbox-system/agent-sandbox-controller").urn,
        find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab").urn,
        find(regs, "command:local:Command", "kueue-webhook-probe").urn,
      ]),
    );
    const pod = (job.inputs.spec as { template: { spec: Record<string, unknown> } }).template.spec as {
      securityContext: { runAsUser: number; runAsGroup: number };
      containers: { image: string; command: string[] }[];
      volumes: { name: string; hostPath?: { path: string; type: string } }[];
    };
    expect(pod.securityContext.runAsUser).toBe(1000);
    expect(pod.securityContext.runAsGroup).toBe(1001);
    expect(pod.containers[0]!.image).toBe(`docker.io/library/node:24.22.3-bookworm-slim@${TEST_DIGEST}`);
    expect(pod.containers[0]!.command).toEqual([
      "node",
      "/opt/cohort/cohort.cjs",
      "run",
      "--spec",
      "/opt/cohort/spec.json",
      "--artifacts",
      "/var/lib/cohort-lab-artifacts",
      "--profile",
      "local",
      "--backend",
      "kubernetes",
      "--backend-option",
      `namespace=${job.name.split(":")[1]!.split("/")[0]}`,
      "--backend-option",
      "queue=cohort",
      // The roles run in the official Node image, whose user is root.
      "--backend-option",
      "runAsNonRoot=false",
    ]);
    expect(pod.volumes.find((v) => v.name === "artifacts")).toEqual({ name: "artifacts", hostPath: { path: "/var/lib/cohort-lab-artifacts", type: "Directory" } });
    const summaryCommand = find(regs, "command:local:Command", "cohort-summary");
    expect(summaryCommand.dependencies).toContain(job.urn);
    expect([summaryCommand.inputs.create, summaryCommand.inputs.delete]).toEqual([
      `'${process.execPath}' scripts/local-profile.cjs run-summary`,
      `'${process.execPath}' scripts/local-profile.cjs run-forget`,
    ]);
  });

  it("follows the Job's progress: `cohort-progress` runs beside the Job (same dependencies, not the Job), with the summary's triggers and the status pipe", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const job = byType("kubernetes:batch/v1:Job")[0]!;
    const follower = find(regs, "command:local:Command", "cohort-progress");
    const summaryCommand = find(regs, "command:local:Command", "cohort-summary");
    // Under the CohortRun, like the Job and the summary.
    expect(follower.parent).toBe(find(regs, "cohortlab:runtime:CohortRun", "cohort").urn);
    expect(follower.parent).toBe(job.parent);
    // Not after the Job (the engine would run it only once the Job is complete), and nothing waits for it.
    expect(follower.dependencies).not.toContain(job.urn);
    expect(regs.filter((r) => r.dependencies.includes(follower.urn))).toEqual([]);
    // Everything the Job waits for, so it starts with the Job: the per-run objects and the controllers.
    // (plus the kind cluster Command, whose stdout is the kubeconfig in its environment, as for the summary).
    expect(follower.dependencies).toEqual(expect.arrayContaining([...job.dependencies]));
    const kindCommand = find(regs, "command:local:Command", "local-kind").urn;
    expect(follower.dependencies.filter((d) => !job.dependencies.includes(d))).toEqual(job.dependencies.includes(kindCommand) ? [] : [kindCommand]);
    const runtimeComponent = find(regs, "cohortlab:runtime:Runtime", "runtime").urn;
    const runNamespace = regs.find((r) => r.parent === runtimeComponent && r.type === "kubernetes:core/v1:Namespace")!;
    expect(follower.dependencies).toContain(runNamespace.urn);
    // A new run (new Job) replaces it too.
    expect(follower.inputs.triggers).toEqual(summaryCommand.inputs.triggers);
    expect((follower.inputs.triggers as unknown[]).length).toBe(2);
    expect(follower.inputs.create).toBe(`'${process.execPath}' scripts/local-profile.cjs run-progress`);
    expect(follower.inputs.delete).toBeUndefined();
    expect(follower.inputs.update).toBeUndefined();
    // The kubeconfig is a secret: the mocks see the whole map wrapped in Pulumi's secret marker.
    const unwrap = (v: unknown) => ((v as { value?: unknown }).value ?? v) as Record<string, string>;
    const env = unwrap(follower.inputs.environment);
    const summaryEnv = unwrap(summaryCommand.inputs.environment);
    expect(env.COHORT_STATUS_FD).toBe("3");
    for (const key of ["COHORT_KUBECONFIG", "COHORT_NAMESPACE", "COHORT_JOB", "COHORT_CONTAINER", "COHORT_WAIT_MS", "COHORT_KUBECTL_BIN"])
      expect(env[key], key).toBe(summaryEnv[key]);
    expect([env.COHORT_JOB, env.COHORT_CONTAINER]).toEqual(["cohort-run", "runtime"]);
    // The summary has no status pipe: its stdout is the run's outputs.
    expect(summaryEnv.COHORT_STATUS_FD).toBeUndefined();
    expect(follower.inputs.logging).toBe("stderr");
  });

  it("fills roles without an image with the runtime's Node image and mounts the artifacts directory into every kind node", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const cm = regs.find((r) => r.type === "kubernetes:core/v1:ConfigMap" && r.name.startsWith("runtime:") && r.name.endsWith("/cohort-runtime"))!;
    const spec = JSON.parse((cm.inputs.data as Record<string, string>)["spec.json"]!) as { roles: { app: { image: string } }[] };
    expect(spec.roles.map((r) => r.app.image)).toEqual([
      `docker.io/library/node:24.22.3-bookworm-slim@${TEST_DIGEST}`,
      `docker.io/library/node:24.22.3-bookworm-slim@${TEST_DIGEST}`,
    ]);
    const kind = find(regs, "command:local:Command", "local-kind");
    const env = kind.inputs.environment as Record<string, string>;
    expect(env.COHORT_KIND_CONFIG).toContain(`hostPath: ${artifactRoot}`);
    expect(env.COHORT_TEMPORAL_PORT).toBe("7234");
    expect(env.COHORT_KIND_BIN).toBe("/cache/kind-v0.31.0/bin/kind");
    expect(env.COHORT_KIND_SHA256).toBe("eb244cbafcc157dff60cf68693c14c9a75c4e6e6fedaf9cd71c58117cb93e3fa");
    expect(kind.inputs.logging).toBe("stderr");
    expect(kind.inputs.addPreviousOutputInEnv).toBe(false);
    expect(kind.inputs.create).toBe(`'${process.execPath}' scripts/local-profile.cjs create`);
    expect(kind.inputs.delete).toBe(`'${process.execPath}' scripts/local-profile.cjs delete`);
  });

  it("exports the CI contract: the run as on the host profile, kube context, secret kubeconfig, Temporal address, queues", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(outputs.profile).toBe("local");
    expect(await valueOf(outputs.artifactRoot)).toBe(artifactRoot);
    expect(await valueOf(outputs.run)).toEqual({
      id: summary.runId,
      outcome: "succeeded",
      size: 4,
      readyCount: 4,
      timeToReadyMs: 4321,
      ledgerPath: summary.ledgerPath,
      reportPath: summary.reportPath,
      firstFailure: null,
      specSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(await valueOf(outputs.kubeContext)).toBe("kind-cohort-lab");
    expect(await valueOf(outputs.kubeconfig)).toBe(FAKE_KUBECONFIG);
    // Output.isSecret is internal API: a Promise<boolean> on every Output.
    expect(await (outputs.kubeconfig as unknown as { isSecret: Promise<boolean> }).isSecret).toBe(true);
    expect(await valueOf(outputs.temporalAddress)).toBe("127.0.0.1:7234");
    expect(await valueOf(outputs.queues)).toEqual({ clusterQueue: "cohort-lab", localQueue: "cohort" });
  });
});

/**
 * Every custom resource the local profile renders — ResourceFlavor, ClusterQueue, LocalQueue (Pulumi), the
 * webhook gate's dry-run objects, and the members' Sandboxes (the runtime's Kubernetes backend) — is valid
 * against the pinned CRDs' `openAPIV3Schema` (Kueue v0.17.0 `v1beta2`/`v1beta1`, Agent Sandbox v0.5.5 `v1beta1`),
 * read from the release manifests in the tool cache. See crd-schema-validate.ts for how the Kubernetes schema
 * extensions are handled (CEL rules are not evaluated here).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { kueueWebhookProbes } from "../../components/k8s/Kueue.js";
import { AGENT_SANDBOX_MANIFESTS, KUEUE_MANIFESTS, loadManifests, type KubernetesObject } from "../../components/k8s/manifests/cache.js";
import { renderClusterQueue, renderLocalQueue, renderResourceFlavor } from "../../components/k8s/manifests/kueue.js";
import { deriveQuota } from "../../components/k8s/quota.js";
import { resolveKubernetesConfig } from "../../runtime/backends/kubernetes/index.js";
import { renderSandbox } from "../../runtime/backends/kubernetes/render.js";
import { memberIdentities, planMembers } from "../../runtime/core/plan.js";
import { loadRunSpec } from "../../runtime/core/spec.js";
import { KIND_SYSTEM_PODS, kindNodes } from "../../stacks/local.js";
import { ensureLocalTools } from "./crd-schema-tools.js";
import { crdValidator, findCrd, type CrdValidator } from "./crd-schema-validate.js";

let kueue: KubernetesObject[] = [];
let sandbox: KubernetesObject[] = [];
let skipReason: string | undefined;

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    console.warn(`crd-schema: the pinned manifests are unavailable, schema validation is SKIPPED: ${skipReason}`);
    return;
  }
  kueue = loadManifests(KUEUE_MANIFESTS);
  sandbox = loadManifests(AGENT_SANDBOX_MANIFESTS);
}, 900_000);

function validator(objects: KubernetesObject[], crd: string, version: string): CrdValidator {
  return crdValidator(findCrd(objects, crd), version);
}

const IMAGE = `docker.io/library/node:24.22.3-bookworm-slim@sha256:${"0".repeat(64)}`; // test fixture, not a pin
const quota = deriveQuota({ nodes: kindNodes("cohort-lab", 2, { cpus: 8, memoryBytes: 32 * 2 ** 30 }), reserved: KIND_SYSTEM_PODS });

describe("Kueue objects against the pinned Kueue v0.17.0 CRDs", () => {
  it("ResourceFlavor (with and without node labels)", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const v = validator(kueue, "resourceflavors.kueue.x-k8s.io", "v1beta2");
    expect(v.validate(renderResourceFlavor({ name: "cohort-lab-default" }))).toEqual([]);
    expect(v.validate(renderResourceFlavor({ name: "agents", nodeLabels: { "cohort-lab.dev/pool": "agents" } }))).toEqual([]);
  });

  it("ClusterQueue with the derived quota", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const v = validator(kueue, "clusterqueues.kueue.x-k8s.io", "v1beta2");
    const cq = renderClusterQueue({ name: "cohort-lab", flavor: "cohort-lab-default", nominalQuota: quota.nominalQuota });
    expect(v.validate(cq)).toEqual([]);
    // 2 workers × 8 CPU, 32Gi − kindnet 2 × (100m, 50Mi) − coredns 2 × (100m, 70Mi)
    expect(quota.nominalQuota).toEqual({ cpu: "15600m", memory: "65296Mi" });
  });

  it("LocalQueue", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const v = validator(kueue, "localqueues.kueue.x-k8s.io", "v1beta2");
    expect(v.validate(renderLocalQueue({ name: "cohort", namespace: "society-0123456789", clusterQueue: "cohort-lab" }))).toEqual([]);
  });

  it("the webhook gate's dry-run objects (v1beta1 LocalQueue, v1beta2 ResourceFlavor)", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const [lq, rf] = kueueWebhookProbes(IMAGE).map((p) => p.manifest);
    expect(validator(kueue, "localqueues.kueue.x-k8s.io", "v1beta1").validate(lq!)).toEqual([]);
    expect(validator(kueue, "resourceflavors.kueue.x-k8s.io", "v1beta2").validate(rf!)).toEqual([]);
  });

  it("has a live validator: unknown fields, bad quantities, bad names and wrong versions are refused", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const cqv = validator(kueue, "clusterqueues.kueue.x-k8s.io", "v1beta2");
    const cq = renderClusterQueue({ name: "cohort-lab", flavor: "f", nominalQuota: { cpu: "lots", memory: "1Gi" } }) as KubernetesObject & { spec: Record<string, unknown> };
    expect(cqv.validate(cq).some((e) => e.startsWith("/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota"))).toBe(true);
    expect(cqv.validate({ ...cq, spec: { ...cq.spec, cohort: "x" } })).toContain("/spec must NOT have additional properties (cohort)");
    const lqv = validator(kueue, "localqueues.kueue.x-k8s.io", "v1beta2");
    expect(lqv.validate({ apiVersion: "kueue.x-k8s.io/v1beta2", kind: "LocalQueue", metadata: { name: "q", namespace: "n" }, spec: { clusterQueue: "Not_A_Name" } })).toEqual([
      '/spec/clusterQueue must match pattern "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"',
    ]);
    expect(lqv.validate({ apiVersion: "kueue.x-k8s.io/v1beta1", kind: "LocalQueue", metadata: { name: "q", namespace: "n" }, spec: { clusterQueue: "c" } })).toEqual([
      "apiVersion is kueue.x-k8s.io/v1beta1, expected kueue.x-k8s.io/v1beta2",
    ]);
  });
});

/** The sample roster of Pulumi.local.yaml, with the runtime image filled in as stacks/local.ts does. */
const SAMPLE_SPEC = `
apiVersion: cohort-lab/v1
kind: Cohort
name: society
roles:
  - name: router
    app:
      image: ${IMAGE}
      command: ["node", "-e", "require('node:http').createServer((q, s) => s.end('ok')).listen(process.env.COHORT_PORT)"]
    readiness: { http: { path: / } }
    resources: { cpu: 100m, memory: 64Mi }
  - name: agent
    replicas: 3
    needs: [router]
    app:
      image: ${IMAGE}
      command: ["node", "-e", "require('node:net').createServer().listen(process.env.COHORT_PORT)"]
      env: { ROUTER: "$(COHORT_NEEDS)" }
      secretEnv: [TOKEN]
    readiness: { tcp: {} }
    resources: { cpu: 100m, memory: 64Mi }
`;

describe("Sandboxes of the runtime's Kubernetes backend against the pinned Agent Sandbox v0.5.5 CRD", () => {
  it("every member's Sandbox is valid v1beta1", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const v = validator(sandbox, "sandboxes.agents.x-k8s.io", "v1beta1");
    const spec = loadRunSpec(SAMPLE_SPEC);
    const runId = "society-20261130T080000Z-a1b2c3";
    const { ctx: renderCtx } = resolveKubernetesConfig({ spec, runId, namespace: "society-0123456789", queue: "cohort", events: () => undefined });
    const endpoints = new Map(
      memberIdentities(spec)
        .filter((m) => m.wantsPort)
        .map((m) => [m.id, { host: `${m.id}.society-0123456789.svc`, port: 8080 }]),
    );
    const secrets = new Map(memberIdentities(spec).map((m): [string, Record<string, string>] => [m.id, m.role === "agent" ? { TOKEN: `secret-${m.id}` } : {}]));
    const plans = planMembers({ spec, runId, runDir: "/var/lib/cohort-lab-artifacts/x", endpoints, secrets });
    const sandboxes = plans.map((p) => renderSandbox(p, renderCtx) as unknown as KubernetesObject);
    expect(sandboxes).toHaveLength(4);
    for (const s of sandboxes) expect([s.metadata.name, v.validate(s)]).toEqual([s.metadata.name, []]);
  });

  it("has a live validator: a typo in the pod template is refused", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const v = validator(sandbox, "sandboxes.agents.x-k8s.io", "v1beta1");
    const bad = {
      apiVersion: "agents.x-k8s.io/v1beta1",
      kind: "Sandbox",
      metadata: { name: "s", namespace: "n" },
      spec: { podTemplate: { spec: { containers: [{ name: "c", image: IMAGE, comand: ["x"] }] } } },
    };
    expect(v.validate(bad)).toEqual(["/spec/podTemplate/spec/containers/0 must NOT have additional properties (comand)"]);
  });
});

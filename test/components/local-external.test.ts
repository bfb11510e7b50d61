/**
 * `Kueue` and `AgentSandbox` with `controller: "external"` (the `sim` profile runs both controllers as local
 * processes), under mocks: no controller Deployment and no Services that select its pods; Kueue's webhook
 * Service is an ExternalName to localhost and every webhook/conversion `clientConfig.service.port` is the local
 * port; the Sandbox CRD's conversion is `None`; the webhookReady function receives the install resources and its
 * result gates the custom resources, which also depend on their CRDs. Every child has the explicit provider.
 */
import * as command from "@pulumi/command";
import * as k8s from "@pulumi/kubernetes";
import { beforeAll, expect, it } from "vitest";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";
import { find, installMocks, settle, TEST_DIGEST, type Registration } from "./local-harness.js";

let regs: Registration[] = [];
let skipReason: string | undefined;
let installSeen = 0;
const WEBHOOK_PORT = 19443;

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    return;
  }
  regs = await installMocks({ preview: false, stack: "sim" });
  const { Kueue } = await import("../../components/k8s/Kueue.js");
  const { AgentSandbox } = await import("../../components/k8s/AgentSandbox.js");
  const provider = new k8s.Provider("sim-provider", { kubeconfig: "apiVersion: v1\nkind: Config\n" });
  const kueue = new Kueue("kueue", {
    provider,
    controller: "external",
    image: `registry.k8s.io/kueue/kueue:v0.17.0@${TEST_DIGEST}`,
    externalWebhookPort: WEBHOOK_PORT,
    configuration: {
      waitForPodsReady: { timeout: "6m", blockAdmission: false, requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: 0 } },
      excludedNamespaces: ["kube-system", "kueue-system"],
    },
    webhookReady: (install) => {
      installSeen = install.length;
      return [new command.local.Command("kueue-manager-ready", { create: "true" }, { dependsOn: [...install] })];
    },
    queue: { resourceFlavor: "default", clusterQueue: "sim", nominalQuota: { cpu: "63560m", memory: "233472Mi" } },
  });
  new AgentSandbox("agent-sandbox", {
    provider,
    controller: "external",
    image: `registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5@${TEST_DIGEST}`,
    waitFor: kueue.webhookReady,
  });
  await settle(regs, 90);
}, 900_000);

it("installs no controller Deployment, no Services selecting it, no APIService and no manager ConfigMap", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  expect(regs.filter((r) => r.type === "kubernetes:apps/v1:Deployment")).toEqual([]);
  expect(regs.filter((r) => r.type === "kubernetes:apiregistration.k8s.io/v1:APIService")).toEqual([]);
  expect(regs.filter((r) => r.type === "kubernetes:core/v1:Service").map((r) => r.name)).toEqual(["kueue:kueue-system/kueue-webhook-service"]);
  expect(regs.filter((r) => r.type === "kubernetes:core/v1:ConfigMap")).toEqual([]);
  expect(installSeen).toBe(73);
});

it("points Kueue's webhooks and CRD conversions at the local process through an ExternalName Service", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  const svc = find(regs, "kubernetes:core/v1:Service", "kueue:kueue-system/kueue-webhook-service");
  expect(svc.inputs.spec).toEqual({ type: "ExternalName", externalName: "localhost", ports: [{ port: WEBHOOK_PORT, protocol: "TCP", targetPort: WEBHOOK_PORT }] });
  const hooks = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"].flatMap((kind) =>
    regs
      .filter((r) => r.type === `kubernetes:admissionregistration.k8s.io/v1:${kind}`)
      .flatMap((r) => r.inputs.webhooks as { clientConfig: { service: { name: string; port: number } } }[]),
  );
  expect(hooks.length).toBe(43);
  for (const h of hooks) expect(h.clientConfig.service).toMatchObject({ name: "kueue-webhook-service", port: WEBHOOK_PORT });
  const conversions = regs
    .filter((r) => r.type === "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition" && r.name.startsWith("kueue:"))
    .map((r) => [r.name, (r.inputs.spec as { conversion?: { webhook?: { clientConfig: { service: { port: number } } } } }).conversion?.webhook?.clientConfig.service.port]);
  expect(conversions.filter(([, port]) => port !== undefined).sort()).toEqual([
    ["kueue:clusterqueues.kueue.x-k8s.io", WEBHOOK_PORT],
    ["kueue:cohorts.kueue.x-k8s.io", WEBHOOK_PORT],
    ["kueue:localqueues.kueue.x-k8s.io", WEBHOOK_PORT],
    ["kueue:multikueueclusters.kueue.x-k8s.io", WEBHOOK_PORT],
    ["kueue:workloads.kueue.x-k8s.io", WEBHOOK_PORT],
  ]);
});

it("gates the custom resources on their CRDs and on what webhookReady returned", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  const ready = find(regs, "command:local:Command", "kueue-manager-ready");
  expect(ready.dependencies.length).toBe(73);
  const cq = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:sim");
  const rf = find(regs, "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "kueue:default");
  const crd = (n: string) => find(regs, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", `kueue:${n}`).urn;
  expect(cq.dependencies).toEqual(expect.arrayContaining([crd("clusterqueues.kueue.x-k8s.io"), rf.urn, ready.urn]));
  expect(rf.dependencies).toEqual(expect.arrayContaining([crd("resourceflavors.kueue.x-k8s.io"), ready.urn]));
});

it("installs Agent Sandbox's CRD with conversion None and its RBAC, after Kueue's webhooks", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  const crd = find(regs, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "agent-sandbox:sandboxes.agents.x-k8s.io");
  expect((crd.inputs.spec as { conversion: unknown }).conversion).toEqual({ strategy: "None" });
  const children = regs.filter((r) => r.name.startsWith("agent-sandbox:"));
  expect(children.map((r) => r.type.split(":").slice(1).join(":")).sort()).toEqual([
    "apiextensions.k8s.io/v1:CustomResourceDefinition",
    "core/v1:Namespace",
    "core/v1:ServiceAccount",
    "rbac.authorization.k8s.io/v1:ClusterRole",
    "rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "rbac.authorization.k8s.io/v1:Role",
    "rbac.authorization.k8s.io/v1:RoleBinding",
  ]);
  const ready = find(regs, "command:local:Command", "kueue-manager-ready").urn;
  for (const r of children) expect(r.dependencies).toContain(ready);
});

it("gives every Kubernetes child the explicit provider", (ctx) => {
  if (skipReason !== undefined) return ctx.skip(skipReason);
  const provider = find(regs, "pulumi:providers:kubernetes", "sim-provider").urn;
  const k8sChildren = regs.filter((r) => r.type.startsWith("kubernetes:"));
  expect(k8sChildren.length).toBe(82);
  for (const r of k8sChildren) expect([r.name, r.provider.startsWith(`${provider}::`)]).toEqual([r.name, true]);
});

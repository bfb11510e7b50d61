/**
 * Golden files of the local profile's pure renderers (components/k8s/manifests/**), `UPDATE_GOLDEN=1` rewrites them:
 * - the Kueue manager Configuration; the objects the profile changes in Kueue's and Agent Sandbox's release
 *   manifests, in `in-cluster` and `external` mode (everything else must stay byte-for-byte the release's);
 * - the Temporal objects; the per-run objects (Namespace, LocalQueue, RBAC, ConfigMaps, Job) for a small bundle.
 * Plus the runtime Job's unpack step run for real with Node on a multi-part bundle.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { AGENT_SANDBOX_MANIFESTS, KUEUE_MANIFESTS, loadManifests, type KubernetesObject } from "../../components/k8s/manifests/cache.js";
import { renderAgentSandboxInstall } from "../../components/k8s/manifests/agentSandbox.js";
import { renderKueueConfiguration, renderKueueInstall, type KueueConfigurationInput } from "../../components/k8s/manifests/kueue.js";
import { BUNDLE_PART_BYTES, renderRunObjects, RuntimeBundleTooLargeError, UNPACK_SCRIPT, type InClusterRuntimeInput, type RunObjectsInput } from "../../components/run/manifests.js";
import { renderTemporal } from "../../components/k8s/manifests/temporal.js";
import { ensureLocalTools } from "../unit/crd-schema-tools.js";

const DIR = __dirname;
const IMAGE = (repo: string) => `${repo}@sha256:${"cd".repeat(32)}`; // test fixture, not a pin
const configuration: KueueConfigurationInput = {
  waitForPodsReady: { timeout: "6m", blockAdmission: false, requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: 0 } },
  excludedNamespaces: ["kube-system", "kube-public", "kube-node-lease", "local-path-storage", "kueue-system", "agent-sandbox-system", "cohort-lab-system"],
  frameworks: ["pod"],
};

function golden(name: string, text: string): void {
  const file = path.join(DIR, name);
  if (process.env.UPDATE_GOLDEN === "1") fs.writeFileSync(file, text);
  expect(text).toBe(fs.readFileSync(file, "utf8"));
}

const yaml = (objects: unknown[]) => objects.map((o) => YAML.stringify(o, { lineWidth: 0, aliasDuplicateObjects: false })).join("---\n");
const key = (o: KubernetesObject) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;

/** The rendered objects that differ from the release, and the release objects that were dropped. */
function changes(upstream: readonly KubernetesObject[], rendered: readonly KubernetesObject[]): { changed: KubernetesObject[]; dropped: string[] } {
  const byKey = new Map(upstream.map((o) => [key(o), o]));
  const changed = rendered.filter((o) => JSON.stringify(o) !== JSON.stringify(byKey.get(key(o))));
  const kept = new Set(rendered.map(key));
  return { changed, dropped: upstream.map(key).filter((k) => !kept.has(k)) };
}

let kueue: KubernetesObject[] = [];
let sandbox: KubernetesObject[] = [];
let skipReason: string | undefined;

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) {
    skipReason = tools.reason;
    console.warn(`local golden manifests SKIPPED: ${skipReason}`);
    return;
  }
  kueue = loadManifests(KUEUE_MANIFESTS);
  sandbox = loadManifests(AGENT_SANDBOX_MANIFESTS);
}, 900_000);

describe("Kueue", () => {
  it("Configuration", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    golden("kueue-configuration.local.yaml", YAML.stringify(renderKueueConfiguration(kueue, configuration), { lineWidth: 0 }));
  });

  it("in-cluster: only the manager image, pull policy and Configuration change; nothing is dropped", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const rendered = renderKueueInstall(kueue, { controller: "in-cluster", image: IMAGE("registry.k8s.io/kueue/kueue:v0.17.0"), configuration });
    const { changed, dropped } = changes(kueue, rendered);
    expect(dropped).toEqual([]);
    expect(changed.map(key)).toEqual(["ConfigMap/kueue-system/kueue-manager-config", "Deployment/kueue-system/kueue-controller-manager"]);
    expect(rendered.map((o) => o.kind).indexOf("Namespace")).toBe(0);
    expect(rendered.at(-1)?.kind).toBe("APIService");
    golden("kueue-install.in-cluster.changes.yaml", yaml(changed));
  });

  it("external: the webhook Service, webhook configurations and conversion CRDs point at the local port", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const rendered = renderKueueInstall(kueue, { controller: "external", image: IMAGE("registry.k8s.io/kueue/kueue:v0.17.0"), configuration, externalWebhookPort: 19443 });
    const { changed, dropped } = changes(kueue, rendered);
    expect(dropped).toEqual([
      "ConfigMap/kueue-system/kueue-manager-config",
      "Service/kueue-system/kueue-controller-manager-metrics-service",
      "Service/kueue-system/kueue-visibility-server",
      "Deployment/kueue-system/kueue-controller-manager",
      "APIService//v1beta1.visibility.kueue.x-k8s.io",
      "APIService//v1beta2.visibility.kueue.x-k8s.io",
    ]);
    expect(changed.map(key).sort()).toEqual([
      "CustomResourceDefinition//clusterqueues.kueue.x-k8s.io",
      "CustomResourceDefinition//cohorts.kueue.x-k8s.io",
      "CustomResourceDefinition//localqueues.kueue.x-k8s.io",
      "CustomResourceDefinition//multikueueclusters.kueue.x-k8s.io",
      "CustomResourceDefinition//workloads.kueue.x-k8s.io",
      "MutatingWebhookConfiguration//kueue-mutating-webhook-configuration",
      "Service/kueue-system/kueue-webhook-service",
      "ValidatingWebhookConfiguration//kueue-validating-webhook-configuration",
    ]);
    // CRDs are huge: the golden keeps their conversion blocks only.
    const summary = changed.map((o) => (o.kind === "CustomResourceDefinition" ? { name: o.metadata.name, conversion: (o.spec as { conversion: unknown }).conversion } : o));
    golden("kueue-install.external.changes.yaml", yaml(summary));
  });

  it("refuses external mode without a port", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(() => renderKueueInstall(kueue, { controller: "external", image: "x", configuration })).toThrow(
      'controller "external" needs externalWebhookPort, an integer from 1 to 65535 (got undefined)',
    );
  });
});

describe("Agent Sandbox", () => {
  it("in-cluster: only the controller image and pull policy change", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const rendered = renderAgentSandboxInstall(sandbox, { controller: "in-cluster", image: IMAGE("registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5") });
    const { changed, dropped } = changes(sandbox, rendered);
    expect(dropped).toEqual([]);
    expect(changed.map(key)).toEqual(["Deployment/agent-sandbox-system/agent-sandbox-controller"]);
    golden("agent-sandbox-install.in-cluster.changes.yaml", yaml(changed));
  });

  it("external: no Deployment or Services, conversion None", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const rendered = renderAgentSandboxInstall(sandbox, { controller: "external", image: "unused" });
    const { changed, dropped } = changes(sandbox, rendered);
    expect(dropped).toEqual([
      "Service/agent-sandbox-system/agent-sandbox-controller",
      "Deployment/agent-sandbox-system/agent-sandbox-controller",
      "Service/agent-sandbox-system/agent-sandbox-webhook-service",
    ]);
    expect(changed.map((o) => [key(o), (o.spec as { conversion: unknown }).conversion])).toEqual([["CustomResourceDefinition//sandboxes.agents.x-k8s.io", { strategy: "None" }]]);
  });
});

describe("Temporal and the per-run objects", () => {
  it("Temporal", () => {
    golden("temporal.yaml", yaml(renderTemporal({ image: IMAGE("temporalio/temporal:1.8.2"), nodePort: 30733 })));
  });

  const runtime: InClusterRuntimeInput = {
    image: IMAGE("docker.io/library/node:24.22.3-bookworm-slim"),
    bundle: Buffer.from("'use strict';\nconsole.log(JSON.stringify({ hello: 'cohort' }));\n"),
    specJson: '{"apiVersion":"cohort-lab/v1","kind":"Cohort","name":"society"}\n',
    artifactsPath: "/var/lib/cohort-lab-artifacts",
    profile: "local",
    runAs: { uid: 1000, gid: 1000 },
    activeDeadlineSeconds: 4200,
    backendOptions: { runAsNonRoot: "false" },
  };
  const input = { namespace: "society-0123456789", localQueue: "cohort", clusterQueue: "cohort-lab", inClusterRuntime: runtime } satisfies RunObjectsInput;

  it("per-run objects", () => {
    const o = renderRunObjects(input);
    const r = o.inClusterRuntime;
    golden("runtime-objects.yaml", yaml([o.namespace, o.localQueue, o.serviceAccount, o.role, o.roleBinding, r.configMap, ...r.bundleParts, r.job]));
  });

  it("splits a large bundle over several ConfigMaps and the Job's init container rebuilds it exactly (run with Node)", () => {
    // Hash text compresses poorly, so ~1.8 MB of it needs two or more parts of 960 KiB.
    const big = Buffer.from(`'use strict';\n/*${Array.from({ length: 40_000 }, (_, i) => createHash("sha256").update(String(i)).digest("base64")).join("")}*/\n`);
    const r = renderRunObjects({ ...input, inClusterRuntime: { ...runtime, bundle: big } }).inClusterRuntime;
    expect(r.bundleParts.length).toBe(Math.ceil(r.compressedBytes / BUNDLE_PART_BYTES));
    expect(r.bundleParts.length).toBeGreaterThanOrEqual(2);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-unpack-"));
    try {
      const src = path.join(tmp, "src");
      const out = path.join(tmp, "out");
      fs.mkdirSync(src);
      fs.mkdirSync(out);
      // What the projected volume holds.
      fs.writeFileSync(path.join(src, "spec.json"), (r.configMap as unknown as { data: Record<string, string> }).data["spec.json"]!);
      r.bundleParts.forEach((p, i) => fs.writeFileSync(path.join(src, `cohort.cjs.gz.${i}`), Buffer.from((p as unknown as { binaryData: { part: string } }).binaryData.part, "base64")));
      const init = ((r.job.spec as { template: { spec: { initContainers: { command: string[]; env: { name: string; value: string }[] }[] } } }).template.spec.initContainers)[0]!;
      const script = init.command[2]!.replaceAll("/opt/cohort-src", src).replaceAll("/opt/cohort", out);
      const env = Object.fromEntries(init.env.map((e) => [e.name, e.value]));
      const ok = spawnSync(process.execPath, ["-e", script], { env: { ...process.env, ...env }, encoding: "utf8" });
      expect([ok.status, ok.stderr]).toEqual([0, ""]);
      expect(fs.readFileSync(path.join(out, "cohort.cjs")).equals(big)).toBe(true);
      expect(fs.readFileSync(path.join(out, "spec.json"), "utf8")).toBe(runtime.specJson);
      // A damaged part is refused by its SHA-256 (or by gunzip).
      fs.writeFileSync(path.join(src, "cohort.cjs.gz.1"), Buffer.alloc(10));
      const bad = spawnSync(process.execPath, ["-e", script], { env: { ...process.env, ...env }, encoding: "utf8" });
      expect(bad.status).not.toBe(0);
      expect(init.command.slice(0, 2)).toEqual(["node", "-e"]);
      expect(init.command[2]).toBe(UNPACK_SCRIPT);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("refuses a bundle that would need more than 8 ConfigMaps", () => {
    const huge = Buffer.concat(Array.from({ length: 300_000 }, (_, i) => createHash("sha256").update(`x${i}`).digest()));
    expect(() => renderRunObjects({ ...input, inClusterRuntime: { ...runtime, bundle: huge } })).toThrow(RuntimeBundleTooLargeError);
  });
});

/**
 * The Kueue manager Configuration the profiles render (components/k8s/manifests/kueue.ts) is accepted by Kueue's OWN
 * loader at the pinned version — test/tools/kueuecheck runs `sigs.k8s.io/kueue/pkg/config.Load`: strict decoding
 * of `config.kueue.x-k8s.io/v1beta2` (unknown fields are errors), defaulting and validation, as the manager does at
 * start-up. A Configuration is not a custom resource, so no CRD schema exists for it; this is the real check.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { KUEUE_MANIFESTS, loadManifests, type KubernetesObject } from "../../components/k8s/manifests/cache.js";
import { renderKueueConfiguration, type KueueConfigurationInput } from "../../components/k8s/manifests/kueue.js";
import { LOCAL_EXCLUDED_NAMESPACES } from "../../stacks/local.js";
import { ensureLocalTools } from "./crd-schema-tools.js";

let kueuecheck: string | undefined;
let kueue: KubernetesObject[] = [];
let skipReason: string | undefined;

beforeAll(async () => {
  const tools = await ensureLocalTools({ kueuecheck: true });
  if (!tools.ok) {
    skipReason = tools.reason;
    console.warn(`kueue Configuration check SKIPPED: ${skipReason}`);
    return;
  }
  kueuecheck = tools.tools.get("kueuecheck")?.binaries.kueuecheck;
  kueue = loadManifests(KUEUE_MANIFESTS);
}, 3_600_000);

interface Checked {
  ok: boolean;
  error?: string;
  config?: { waitForPodsReady?: unknown; integrations?: unknown; internalCertManagement?: unknown; managedJobsNamespaceSelector?: unknown };
}

function check(...configs: unknown[]): Checked[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kueuecheck-"));
  try {
    const files = configs.map((c, i) => {
      const f = path.join(dir, `c${i}.yaml`);
      fs.writeFileSync(f, typeof c === "string" ? c : YAML.stringify(c));
      return f;
    });
    const r = spawnSync(kueuecheck!, files, { encoding: "utf8" });
    return r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Checked);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const input = (timeout: string): KueueConfigurationInput => ({
  waitForPodsReady: { timeout, blockAdmission: false, requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: 0 } },
  excludedNamespaces: LOCAL_EXCLUDED_NAMESPACES,
  frameworks: ["pod"],
});

describe("Kueue Configuration (Kueue's own loader)", () => {
  it("accepts the local profile's Configurations and reads back what was set", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const results = check(renderKueueConfiguration(kueue, input("6m")), renderKueueConfiguration(kueue, input("21m")), renderKueueConfiguration(kueue, input("2h")));
    expect(results.map((r) => [r.ok, r.error])).toEqual([
      [true, undefined],
      [true, undefined],
      [true, undefined],
    ]);
    const c = results[0]!.config!;
    expect(c.integrations).toMatchObject({ frameworks: ["pod"] });
    expect(c.internalCertManagement).toEqual({ enable: true, webhookServiceName: "kueue-webhook-service", webhookSecretName: "kueue-webhook-server-cert" });
    // Defaulting fills recoveryTimeout (= timeout) and the backoff base/max.
    expect(c.waitForPodsReady).toEqual({
      timeout: "6m0s",
      blockAdmission: false,
      recoveryTimeout: "6m0s",
      requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: 0, backoffBaseSeconds: 60, backoffMaxSeconds: 3600 },
    });
  });

  it("has a live checker: Kueue refuses what its manager would refuse", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const good = renderKueueConfiguration(kueue, input("6m"));
    const [negative, selector, typo, framework] = check(
      renderKueueConfiguration(kueue, {
        ...input("6m"),
        waitForPodsReady: { ...input("6m").waitForPodsReady, requeuingStrategy: { timestamp: "Eviction", backoffLimitCount: -1 } },
      }),
      renderKueueConfiguration(kueue, { ...input("6m"), excludedNamespaces: ["kube-system"] }),
      { ...good, waitForPodsReady: { timeout: "6m", blockAdmision: true } },
      renderKueueConfiguration(kueue, { ...input("6m"), frameworks: ["pod", "sandbox"] }),
    );
    expect(negative?.error).toBe("waitForPodsReady.requeuingStrategy.backoffLimitCount: Invalid value: -1: must be greater than or equal to 0");
    expect(selector?.error).toContain('should not match the "kueue-system" namespace');
    expect(typo?.error).toBe('strict decoding error: unknown field "waitForPodsReady.blockAdmision"');
    expect(framework?.error).toContain('integrations.frameworks[1]: Unsupported value: "sandbox"');
  });
});

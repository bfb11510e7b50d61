/**
 * The shipped Pulumi.local.yaml: its sample cohort passes the local profile's whole plan (config, RunSpec,
 * quota, fit) on small machines, preview warns about exactly the three unknown digests, and the quota
 * arithmetic for a 2-CPU / 8 GiB machine — the smallest this project claims — is exact.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parseStackConfig, PROJECT_DIR, type RawConfig } from "../../stacks/config.js";
import { localProfile, planLocal, type LocalHostFacts } from "../../stacks/local.js";
import { ensureLocalTools } from "./crd-schema-tools.js";

/** The stack file's config as Pulumi hands it to the program: `cohort-lab:` stripped, objects as JSON text. */
function stackFileConfig(): RawConfig {
  const doc = parse(fs.readFileSync(path.join(PROJECT_DIR, "Pulumi.local.yaml"), "utf8")) as { config: Record<string, unknown> };
  return Object.fromEntries(Object.entries(doc.config).map(([k, v]) => [k.replace(/^cohort-lab:/, ""), typeof v === "string" ? v : JSON.stringify(v)]));
}

const facts = (cpus: number, gib: number): LocalHostFacts => ({ cpus, memoryBytes: gib * 2 ** 30, uid: 1000, gid: 1000, platform: "linux-x64" });
let skipReason: string | undefined;

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (!tools.ok) skipReason = tools.reason;
}, 900_000);

describe("Pulumi.local.yaml sample cohort", () => {
  it("plans on a 2-CPU / 8 GiB machine: quota arithmetic, fit, warnings", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const raw = stackFileConfig();
    const config = parseStackConfig(raw, { stack: "local", projectDir: PROJECT_DIR, profileKeys: localProfile.configKeys });
    const warnings: string[] = [];
    const plan = planLocal({ config, raw, projectDir: PROJECT_DIR, facts: facts(2, 8), dryRun: true, warn: (m) => warnings.push(m), bundle: Buffer.from("//") });
    expect(plan.resolved.size).toBe(9);
    expect(plan.resolved.spec.roles.map((r) => [r.name, r.replicas, r.app.image])).toEqual([
      ["router", 1, ""],
      ["agent", 8, ""],
    ]);
    // 2 workers × 2000m − 1250m; 2 × 8Gi − 1136Mi.
    expect(plan.quota.arithmetic).toEqual({
      cpu: "2 nodes × 2000m allocatable − 1250m reserved = 2750m",
      memory: "2 nodes × 8Gi allocatable − 1136Mi reserved = 15248Mi",
    });
    expect(plan.quota.nominalQuota).toEqual({ cpu: "2750m", memory: "15248Mi" });
    expect(plan.configuration.waitForPodsReady.timeout).toBe("6m");
    expect(plan.backendOptions).toEqual({ runAsNonRoot: "false" });
    expect(plan.namespace).toMatch(/^society-[0-9a-f]{10}$/);
    expect(warnings).toHaveLength(1);
    expect(
      warnings[0]!
        .split("\n")
        .slice(1)
        .map((l) => l.split(":")[0] + ":" + l.split(":")[1]),
    ).toEqual(["cohort-lab:images.kueue", "cohort-lab:images.agentSandbox", "cohort-lab:images.runtime"]);
  });

  it("is refused on a 1-CPU machine, with the arithmetic", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const raw = stackFileConfig();
    const config = parseStackConfig(raw, { stack: "local", projectDir: PROJECT_DIR, profileKeys: localProfile.configKeys });
    expect(() => planLocal({ config, raw, projectDir: PROJECT_DIR, facts: facts(1, 8), dryRun: true, warn: () => undefined, bundle: Buffer.from("//") })).toThrow(
      "cohort-lab:cohort: 9 members need 900m CPU (router 1 × 100m + agent 8 × 100m), more than the ClusterQueue quota of 750m (2 nodes × 1000m allocatable − 1250m reserved = 750m); " +
        "Kueue admits the cohort all-or-nothing, so it would wait forever. lower cohort.roles[1].replicas to at most 6, lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("local.runAs workflow: refused naming the key until the run worker image is built; with it, the worker's files and requests are planned", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const raw = { ...stackFileConfig(), local: JSON.stringify({ runAs: "workflow" }) };
    const config = parseStackConfig(raw, { stack: "local", projectDir: PROJECT_DIR, profileKeys: localProfile.configKeys });
    const plan = (images: NonNullable<Parameters<typeof planLocal>[0]["artifacts"]>["images"]) =>
      planLocal({ config, raw, projectDir: PROJECT_DIR, facts: facts(2, 8), dryRun: true, warn: () => undefined, bundle: Buffer.from("//"), artifacts: { images } });
    expect(() => plan({})).toThrow(/cohort-lab:local\.runAs: workflow: the run worker image is not built here; run `npm run toolchain -- local-apps`/);
    const missing = ["cohort-temporal.cjs", "cohort-temporal-workflows.js"].some((f) => !fs.existsSync(path.join(PROJECT_DIR, "dist", f)));
    if (missing) return ctx.skip("dist/ has no Temporal bundles: npm run build");
    const image = { repository: "cohort-lab.local/run-worker", tag: "1.24.0", digest: `sha256:${"ab".repeat(32)}`, archive: "/nonexistent/image.tar" }; // test fixture
    const p = plan({ runWorker: image });
    expect(p.worker?.image).toBe(`cohort-lab.local/run-worker:1.24.0@sha256:${"ab".repeat(32)}`);
    expect(p.worker?.files.map((f) => f.name)).toEqual(["cohort.cjs", "cohort-temporal.cjs", "cohort-temporal-workflows.js"]);
    expect(p.loadImages.map((i) => i.ref)).toContain("cohort-lab.local/run-worker:1.24.0");
    // The worker's 300m replace the runtime Job's 250m in what the quota reserves.
    expect(p.quota.arithmetic.cpu).toBe("2 nodes × 2000m allocatable − 1300m reserved = 2700m");
    expect(() =>
      planLocal({
        config,
        raw: { ...raw, local: JSON.stringify({ runAs: "pod" }) },
        projectDir: PROJECT_DIR,
        facts: facts(2, 8),
        dryRun: true,
        warn: () => undefined,
        bundle: Buffer.from("//"),
      }),
    ).toThrow(/cohort-lab:local\.runAs: must be job or workflow \(got "pod"\)/);
  });
});

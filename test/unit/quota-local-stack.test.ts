/**
 * The shipped Pulumi.local.yaml: its sample cohort passes the local profile's whole plan (config, RunSpec,
 * quota, fit) on small machines, preview warns about exactly the three unknown digests and the run worker image
 * that is not built (the default run mode, `local.runAs: workflow`; `up` refuses them in one pass), and the quota
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
    // 2 workers × 2000m − 1300m; 2 × 8Gi − 1264Mi (the run worker of the default run mode: 300m, 384Mi).
    expect(plan.quota.arithmetic).toEqual({
      cpu: "2 nodes × 2000m allocatable − 1300m reserved = 2700m",
      memory: "2 nodes × 8Gi allocatable − 1264Mi reserved = 15120Mi",
    });
    expect(plan.quota.nominalQuota).toEqual({ cpu: "2700m", memory: "15120Mi" });
    expect(plan.configuration.waitForPodsReady.timeout).toBe("6m");
    expect(plan.backendOptions).toEqual({ runAsNonRoot: "false" });
    expect(plan.local.runAs).toBe("workflow");
    expect(plan.namespace).toMatch(/^society-[0-9a-f]{10}$/);
    // The image digests, and the run worker image that is not built (`up` refuses both).
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toMatch(/^local profile: `pulumi up` refuses until the run worker image is built:\ncohort-lab:local\.runAs: workflow \(the default\)/);
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
      "cohort-lab:cohort: 9 members need 900m CPU (router 1 × 100m + agent 8 × 100m), more than the ClusterQueue quota of 700m (2 nodes × 1000m allocatable − 1300m reserved = 700m); " +
        "Kueue admits the cohort all-or-nothing, so it would wait forever. lower cohort.roles[1].replicas to at most 6, lower the members' requests, or lower what else runs on the nodes",
    );
  });

  it("local.runAs workflow (the default): `up` refused naming the key until the run worker image is built, a preview warns; with it, the worker's files and requests are planned", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const missing = ["cohort-temporal.cjs", "cohort-temporal-workflows.js"].some((f) => !fs.existsSync(path.join(PROJECT_DIR, "dist", f)));
    if (missing) return ctx.skip("dist/ has no Temporal bundles: npm run build");
    const raw = stackFileConfig();
    const config = parseStackConfig(raw, { stack: "local", projectDir: PROJECT_DIR, profileKeys: localProfile.configKeys });
    const warnings: string[] = [];
    const plan = (images: NonNullable<Parameters<typeof planLocal>[0]["artifacts"]>["images"], dryRun = true) =>
      planLocal({ config, raw, projectDir: PROJECT_DIR, facts: facts(2, 8), dryRun, warn: (m) => warnings.push(m), bundle: Buffer.from("//"), artifacts: { images } });
    const digest = `sha256:${"cd".repeat(32)}`; // test fixture: the upstream images by digest, so only the worker is missing
    const upstream = {
      ...raw,
      images: JSON.stringify({
        kueue: `registry.k8s.io/kueue/kueue:v0.17.0@${digest}`,
        agentSandbox: `registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5@${digest}`,
        runtime: `docker.io/library/node:24.22.3-bookworm-slim@${digest}`,
      }),
    };
    expect(() =>
      planLocal({ config, raw: upstream, projectDir: PROJECT_DIR, facts: facts(2, 8), dryRun: false, warn: () => undefined, bundle: Buffer.from("//"), artifacts: { images: {} } }),
    ).toThrow(
      /^cohort-lab:local\.runAs: workflow \(the default\): the run worker image cohort-lab\.local\/run-worker:1\.24\.0 is not built here .*`npm run toolchain -- local-apps`, or run the cohort as a Job: `npm run pulumi -- config set --stack local --path local\.runAs job`$/,
    );
    const previewed = plan({});
    expect(previewed.worker?.image).toBe("cohort-lab.local/run-worker:1.24.0");
    expect(previewed.loadImages).toEqual([]);
    expect(warnings.filter((w) => w.includes("cohort-lab:local.runAs: workflow (the default)"))).toHaveLength(1);
    const image = { repository: "cohort-lab.local/run-worker", tag: "1.24.0", digest: `sha256:${"ab".repeat(32)}`, archive: "/nonexistent/image.tar" }; // test fixture
    const p = plan({ runWorker: image });
    expect(p.worker?.image).toBe(`cohort-lab.local/run-worker:1.24.0@sha256:${"ab".repeat(32)}`);
    expect(p.worker?.files.map((f) => f.name)).toEqual(["cohort.cjs", "cohort-temporal.cjs", "cohort-temporal-workflows.js"]);
    expect(p.loadImages.map((i) => i.ref)).toContain("cohort-lab.local/run-worker:1.24.0");
    // The worker's 300m replace the runtime Job's 250m in what the quota reserves.
    expect(p.quota.arithmetic.cpu).toBe("2 nodes × 2000m allocatable − 1300m reserved = 2700m");
    // The same plan with `cohort-lab:local` set to `local` (no image built).
    const planAs = (local: Record<string, unknown>) =>
      planLocal({
        config,
        raw: { ...raw, local: JSON.stringify(local) },
        projectDir: PROJECT_DIR,
        facts: facts(2, 8),
        dryRun: true,
        warn: () => undefined,
        bundle: Buffer.from("//"),
      });
    const job = planAs({ runAs: "job" });
    expect(job.worker).toBeUndefined();
    expect(job.quota.arithmetic.cpu).toBe("2 nodes × 2000m allocatable − 1250m reserved = 2750m");
    expect(() => planAs({ runAs: "pod" })).toThrow(/cohort-lab:local\.runAs: must be job or workflow \(got "pod"\)/);
  });
});

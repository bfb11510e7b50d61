/**
 * End to end: `pulumi preview --stack local` with the real Pulumi engine (the pinned CLI through the project's
 * launcher, `npm run pulumi`), the real command and kubernetes provider plugins, the file backend in a temp dir,
 * and no network beyond what this machine has (no Docker, no registry). The stack's project directory is a temp
 * copy of Pulumi.yaml + Pulumi.local.yaml whose `main` is this repository's index.ts.
 *
 * Covers: the shipped stack file previews successfully and lists the kind cluster Command, Kueue's install and
 * queue objects, Agent Sandbox, Temporal, and the runtime's per-run objects and, in the default run mode
 * (`local.runAs: workflow`), the run worker's Deployment and no Job; the preview warns naming the image digests
 * that `up` will require and the run worker image that is not built; `pulumi up` is refused before anything is
 * created while they are missing; with digests set, `local.runAs: job` and no Docker engine, `pulumi up` fails at
 * the kind step (the real command provider runs components/kind/steps.cjs) and no Kubernetes resource is
 * created; a cohort that cannot fit is refused at preview with the arithmetic. Wall times are printed.
 *
 * The program is pointed at an empty directory for built node and project images (COHORT_LOCAL_ARTIFACTS_ROOT), so
 * this is the path of a machine that pulls upstream images; test/local runs the images built here for real.
 *
 * Needs the toolchain (`npm run toolchain -- default manifests`) and the bundle (`npm run build`); it fails,
 * not skips, without them.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, afterAll, describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config";
import { copyProject } from "./project";
import { loadExeca } from "../../scripts/lib/process";

const tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-e2e-local-"));
const projectDir = path.join(tmp, "project");
const artifactRoot = path.join(tmp, "artifacts");
const env = {
  ...process.env,
  COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`,
  PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local",
  NO_COLOR: "1",
  // The upstream-images path: no node image or project image built here is seen (test/local runs the built ones).
  COHORT_LOCAL_ARTIFACTS_ROOT: path.join(tmp, "no-built-artifacts"),
};

interface Result {
  readonly exitCode: number;
  readonly stdout: string;
  readonly all: string;
  readonly ms: number;
}

async function pulumi(args: readonly string[]): Promise<Result> {
  const { execa } = await loadExeca();
  const started = performance.now();
  const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir, ...args], { cwd: PROJECT_DIR, env, reject: false, all: true, stdin: "ignore" });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), all: String(r.all), ms: performance.now() - started };
}

async function ok(args: readonly string[]): Promise<Result> {
  const r = await pulumi(args);
  if (r.exitCode !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${r.all.slice(-6000)}`);
  return r;
}

interface PreviewJson {
  steps?: { op: string; urn: string }[];
  diagnostics?: { message: string; severity: string }[];
}

beforeAll(async () => {
  const bundle = path.join(PROJECT_DIR, "dist", "cohort.cjs");
  if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run build\` before the e2e tests`);
  copyProject(projectDir, ["local"]);
  mkdirSync(path.join(tmp, "state"));
  await ok(["stack", "select", "--create", "local"]);
  await ok(["config", "set", "--stack", "local", "artifactRoot", artifactRoot]);
}, 600_000);

afterAll(() => {
  if (process.env.COHORT_E2E_KEEP !== "1") rmSync(tmp, { recursive: true, force: true });
});

describe("local profile, real engine", () => {
  it("previews offline and lists the kind cluster, Kueue, Agent Sandbox, Temporal and runtime resources", async () => {
    const r = await ok(["preview", "--stack", "local", "--json"]);
    console.log(`[e2e local] pulumi preview --stack local: ${(r.ms / 1000).toFixed(1)} s wall`);
    const preview = JSON.parse(r.stdout) as PreviewJson;
    const steps = (preview.steps ?? []).map((s) => {
      const parts = s.urn.split("::");
      return { op: s.op, type: parts[2]!.split("$").pop()!, name: parts[3]! };
    });
    const has = (type: string, name: string) => steps.some((s) => s.type === type && s.name === name && s.op === "create");
    const count = (type: string) => steps.filter((s) => s.type === type).length;
    console.log(`[e2e local] preview steps: ${steps.length}`);
    expect(has("cohortlab:local:KindCluster", "local")).toBe(true);
    expect(has("command:local:Command", "local-kind")).toBe(true);
    expect(has("pulumi:providers:kubernetes", "local-provider")).toBe(true);
    expect(has("cohortlab:k8s:Kueue", "kueue")).toBe(true);
    expect(has("kubernetes:apps/v1:Deployment", "kueue:kueue-system/kueue-controller-manager")).toBe(true);
    expect(has("command:local:Command", "kueue-webhook-probe")).toBe(true);
    expect(has("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kueue:cohort-lab")).toBe(true);
    expect(has("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "kueue:cohort-lab-default")).toBe(true);
    expect(count("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")).toBe(12);
    expect(has("cohortlab:k8s:AgentSandbox", "agent-sandbox")).toBe(true);
    expect(has("kubernetes:apps/v1:Deployment", "agent-sandbox:agent-sandbox-system/agent-sandbox-controller")).toBe(true);
    expect(has("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "agent-sandbox:sandboxes.agents.x-k8s.io")).toBe(true);
    expect(has("cohortlab:k8s:Temporal", "temporal")).toBe(true);
    expect(has("kubernetes:core/v1:Service", "temporal:cohort-lab-system/temporal")).toBe(true);
    expect(has("cohortlab:runtime:Runtime", "runtime")).toBe(true);
    expect(count("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")).toBe(1);
    // The default run mode, workflow: the run worker's Deployment (and its rollout guard), no runtime Job.
    expect(count("kubernetes:batch/v1:Job")).toBe(0);
    expect(steps.some((s) => s.type === "kubernetes:apps/v1:Deployment" && s.name.endsWith("/cohort-run-worker") && s.op === "create")).toBe(true);
    expect(has("command:local:Command", "cohort-worker-guard")).toBe(true);
    expect(has("cohortlab:runtime:CohortRun", "cohort")).toBe(true);
    expect(has("command:local:Command", "cohort-identity")).toBe(true);
    expect(has("command:local:Command", "cohort-run")).toBe(true);
    const warnings = (preview.diagnostics ?? []).filter((d) => d.severity === "warning").map((d) => d.message);
    expect(warnings.some((m) => m.includes("cohort-lab:images.kueue") && m.includes("docker buildx imagetools inspect registry.k8s.io/kueue/kueue:v0.17.0"))).toBe(true);
    expect(
      warnings.some((m) => m.includes("cohort-lab:local.runAs: workflow (the default): the run worker image cohort-lab.local/run-worker:") && m.includes("local.runAs job")),
    ).toBe(true);
  }, 900_000);

  it("refuses `pulumi up` before creating anything while image digests are missing", async () => {
    const r = await pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
    console.log(`[e2e local] pulumi up without digests: exit ${r.exitCode} in ${(r.ms / 1000).toFixed(1)} s`);
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toContain("cohort-lab:images.kueue: no digest is pinned for registry.k8s.io/kueue/kueue:v0.17.0");
    // In the same pass: the default run mode's worker image, not built on this upstream-images path.
    expect(r.all).toContain("cohort-lab:local.runAs: workflow (the default): the run worker image cohort-lab.local/run-worker:");
    const exported = JSON.parse((await ok(["stack", "export", "--stack", "local"])).stdout) as { deployment?: { resources?: { type: string }[] } };
    expect((exported.deployment?.resources ?? []).filter((res) => res.type !== "pulumi:pulumi:Stack")).toEqual([]);
  }, 900_000);

  it("with digests set and the Job executor, `pulumi up` on a machine without Docker fails at the kind step and creates no Kubernetes resource", async (ctx) => {
    const { execa } = await loadExeca();
    const docker = await execa("docker", ["info"], { reject: false, stdin: "ignore" });
    if (docker.exitCode === 0) return ctx.skip("a Docker engine is reachable here: this test would create a real kind cluster");
    const digest = `sha256:${"ab".repeat(32)}`; // test fixture, not a pin: nothing is pulled
    const images: [string, string][] = [
      ["images.kueue", `registry.k8s.io/kueue/kueue:v0.17.0@${digest}`],
      ["images.agentSandbox", `registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5@${digest}`],
      ["images.runtime", `docker.io/library/node:24.22.3-bookworm-slim@${digest}`],
      // No run worker image is built here (nor in any registry): a machine that pulls upstream images runs the Job.
      ["local.runAs", "job"],
    ];
    for (const [k, v] of images) await ok(["config", "set", "--stack", "local", "--path", k, v]);
    try {
      const r = await pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
      console.log(`[e2e local] pulumi up without Docker: exit ${r.exitCode} in ${(r.ms / 1000).toFixed(1)} s`);
      expect(r.exitCode).not.toBe(0);
      expect(r.all).toContain("command:local:Command (local-kind)");
      // Offline: the pinned kind download fails; with network but no engine: Docker is not reachable.
      expect(r.all).toMatch(/kind: download of https:\/\/github\.com\/kubernetes-sigs\/kind\/releases\/download\/v0\.31\.0\/kind-linux-amd64 failed|Docker is not reachable/);
      const exported = JSON.parse((await ok(["stack", "export", "--stack", "local"])).stdout) as { deployment?: { resources?: { type: string }[] } };
      const types = (exported.deployment?.resources ?? []).map((res) => res.type);
      expect(types.filter((t) => t.startsWith("kubernetes:") || t === "command:local:Command")).toEqual([]);
      await ok(["destroy", "--yes", "--stack", "local", "--skip-preview"]);
    } finally {
      for (const [k] of images) await ok(["config", "rm", "--stack", "local", "--path", k]);
    }
  }, 900_000);

  it("refuses a cohort that cannot fit at preview, with the arithmetic", async () => {
    const { parse } = await import("yaml");
    const cohort = (parse(readFileSync(path.join(projectDir, "Pulumi.local.yaml"), "utf8")) as { config: Record<string, { roles: { replicas: number }[] }> }).config[
      "cohort-lab:cohort"
    ]!;
    // A whole object may be set as JSON text in one key (numbers stay numbers).
    await ok(["config", "set", "--stack", "local", "cohort", JSON.stringify({ ...cohort, roles: cohort.roles.map((r, i) => (i === 1 ? { ...r, replicas: 5000 } : r)) })]);
    try {
      const r = await pulumi(["preview", "--stack", "local"]);
      console.log(`[e2e local] oversized cohort: preview exit ${r.exitCode} in ${(r.ms / 1000).toFixed(1)} s`);
      expect(r.exitCode).not.toBe(0);
      expect(r.all).toMatch(/cohort-lab:cohort: 5001 members need 500100m CPU \(router 1 × 100m \+ agent 5000 × 100m\), more than the ClusterQueue quota of \d+m/);
    } finally {
      await ok(["config", "set", "--stack", "local", "cohort", JSON.stringify(cohort)]);
    }
  }, 900_000);
});

/**
 * components/gke/steps.cjs `park-check`, the `gke` profile's park guard (`gke.systemNodes: 0` refuses while any Kueue
 * Workload exists), run for real: the step as a Node child process with the environment its Command gives it
 * (components/gke/Lifecycle.ts `parkGuard`: COHORT_SYSTEM_NODES, COHORT_KUBECONFIG and the pinned kubectl's
 * COHORT_KUBECTL_*, resolved as GkeCluster.kubectlEnvironment does) against a real kube-apiserver: the sim control
 * plane (test/sim/harness.ts, no controllers, no nodes) with Kueue's Workload CRD from the pinned manifests, as the
 * sim stack renders it (components/k8s/manifests/kueue.ts, `controller: "external"`), and Workload objects created
 * through the API server. Kueue itself does not run: the guard only lists Workloads.
 *
 * Covers: no Workload -> parking passes; a Workload -> refused naming `cohort-lab:gke.systemNodes` and the Workload;
 * deleted -> passes; systemNodes other than 0 passes without listing (a kubeconfig that reaches nothing); an API
 * server that cannot be reached refuses. Skips (reason printed) without the sim binaries, the built kubectl or the
 * pinned manifests.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cacheRoot } from "../../common/paths.js";
import { localTools } from "../../components/kind/KindCluster.js";
import { KUEUE_MANIFESTS, loadManifests } from "../../components/k8s/manifests/cache.js";
import { kueueConfiguration, renderKueueInstall } from "../../components/k8s/manifests/kueue.js";
import { controlPlaneBinaries } from "../../simctl/binaries.js";
import { applyObjects } from "../../simctl/install.js";
import { simUnavailableReason, startSim, type SimHarness } from "./harness.js";

const SCRIPT = path.join(__dirname, "..", "..", "components", "gke", "steps.cjs");
const KEY = "cohort-lab:gke.systemNodes";
const CRD = "workloads.kueue.x-k8s.io";

/** The pinned kubectl's environment, as GkeCluster.kubectlEnvironment gives it to the park guard. */
function kubectlEnvironment(): Record<string, string> | string {
  try {
    const tools = localTools(`${process.platform}-${process.arch}`, cacheRoot());
    if (!fs.existsSync(tools.kubectl)) return `kubectl is not in the tool cache (${tools.kubectl}): npm run toolchain -- local`;
    return Object.fromEntries(Object.entries(tools.environment).filter(([key]) => key.startsWith("COHORT_KUBECTL_")));
  } catch (error) {
    return (error as Error).message;
  }
}

const kubectlEnv = kubectlEnvironment();
let workloadCrd: unknown;
let manifestsReason: string | undefined;
try {
  const upstream = loadManifests(KUEUE_MANIFESTS);
  const rendered = renderKueueInstall(upstream, { controller: "external", image: "", configuration: kueueConfiguration({ excludedNamespaces: [] }), externalWebhookPort: 9443 });
  workloadCrd = rendered.find((o) => o.kind === "CustomResourceDefinition" && o.metadata?.name === CRD);
  if (workloadCrd === undefined) manifestsReason = `the pinned Kueue manifests have no CRD ${CRD}`;
} catch (error) {
  manifestsReason = (error as Error).message;
}
const skipReason = simUnavailableReason(controlPlaneBinaries) ?? (typeof kubectlEnv === "string" ? kubectlEnv : undefined) ?? manifestsReason;
if (skipReason !== undefined) console.warn(`gke park-guard tests SKIPPED: ${skipReason}`);

let sim: SimHarness | undefined;
let kubeconfig = "";

/** `park-check` with the Command's environment. */
function parkCheck(systemNodes: number, extra: Record<string, string> = {}): { status: number; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...(kubectlEnv as Record<string, string>),
    COHORT_SYSTEM_NODES: String(systemNodes),
    COHORT_KUBECONFIG: kubeconfig,
    ...extra,
  };
  const r = spawnSync(process.execPath, [SCRIPT, "park-check"], { env, encoding: "utf8", timeout: 60_000 });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** The pinned kubectl against the sim (creating and deleting Workloads as a user would). */
function kubectl(args: string[], input?: string): string {
  const bin = (kubectlEnv as Record<string, string>).COHORT_KUBECTL_BIN!;
  const r = spawnSync(bin, ["--kubeconfig", sim!.kubeconfigPath, ...args], { encoding: "utf8", input, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.error?.message ?? r.stderr}`);
  return r.stdout;
}

function workload(name: string, namespace: string): string {
  return JSON.stringify({
    apiVersion: "kueue.x-k8s.io/v1beta2",
    kind: "Workload",
    metadata: { name, namespace },
    spec: { queueName: "cohort-lab", podSets: [{ name: "main", count: 1, template: { spec: { containers: [{ name: "c", image: "registry.invalid/x:1" }] } } }] },
  });
}

beforeAll(async () => {
  if (skipReason !== undefined) return;
  sim = await startSim({});
  kubeconfig = fs.readFileSync(sim.kubeconfigPath, "utf8");
  await applyObjects(sim.kubeconfigPath, [workloadCrd as never]);
  // Established (the status appears shortly after the create; `kubectl wait` fails before it exists).
  const deadline = Date.now() + 60_000;
  const established = (): boolean =>
    ((JSON.parse(kubectl(["get", "crd", CRD, "-o", "json"])) as { status?: { conditions?: Array<{ type: string; status: string }> | null } }).status?.conditions ?? []).some(
      (c) => c.type === "Established" && c.status === "True",
    );
  while (!established()) {
    if (Date.now() > deadline) throw new Error(`CRD ${CRD} not Established within 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}, 120_000);

afterAll(async () => {
  await sim?.stop();
});

describe("gke park-check (gke.systemNodes: 0 while Kueue Workloads exist)", () => {
  it("passes with no Workload", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(kubectl(["get", CRD, "-A", "-o", "name"])).toBe("");
    const r = parkCheck(0);
    expect([r.status, r.stderr]).toEqual([0, ""]);
  });

  it("refuses while a Workload exists, naming the key and the Workload; passes once it is deleted", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    kubectl(["create", "namespace", "gke-0123456789"]);
    kubectl(["create", "-f", "-"], workload("job-cohort-run-3f9a1", "gke-0123456789"));
    const refused = parkCheck(0);
    expect(refused.status).toBe(1);
    expect(refused.stderr.trim()).toBe(
      `${KEY}: cannot park (0) while 1 Kueue Workload(s) exist (workload.kueue.x-k8s.io/job-cohort-run-3f9a1): a cohort is admitted or waiting; let it finish, then set it to 0`,
    );
    // Any other size is not parking: no listing, so it passes (even with a kubeconfig that reaches nothing).
    expect(parkCheck(1)).toMatchObject({ status: 0, stderr: "" });
    expect(parkCheck(1, { COHORT_KUBECONFIG: "not a kubeconfig", COHORT_KUBECTL_BIN: "/nonexistent/kubectl" })).toMatchObject({ status: 0, stderr: "" });
    kubectl(["delete", CRD, "job-cohort-run-3f9a1", "-n", "gke-0123456789", "--wait=true"]);
    expect(parkCheck(0)).toMatchObject({ status: 0, stderr: "" });
  });

  it("refuses when the Workloads cannot be listed (an API server that is not there)", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const unreachable = kubeconfig.replace(new RegExp(sim!.apiserverUrl.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "g"), "https://127.0.0.1:1");
    expect(unreachable).not.toBe(kubeconfig);
    const r = parkCheck(0, { COHORT_KUBECONFIG: unreachable });
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toMatch(
      new RegExp(`^${KEY}: cannot park: listing Kueue Workloads failed \\(.*127\\.0\\.0\\.1:1.*\\); parking is refused unless the cluster says none exist$`, "s"),
    );
  });
});

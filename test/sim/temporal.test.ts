/**
 * The Temporal side of the sim profile against a real control plane and a real `temporal server start-dev`
 * (simctl starts it with the control plane; docs/temporal.md):
 *
 * - the dev server is ready when simctl returns, and a restart of the server keeps the history (SQLite file);
 * - `cohort submit` runs a cohort through a real `cohort worker` (the built `dist/` bundles, the Kubernetes
 *   backend against the sim with Kueue and Agent Sandbox): the summary line, the ledger, the cleanup;
 * - two submitters with one workflow id: one workflow, one ledger, the same summary line;
 * - the submitter SIGKILLed mid-run, then submitted again: the same run id, the outcome read from the finished run;
 * - the cluster workflow's host steps (`worker-guard`, `run-identity`, `run-submit` of components/kind/steps.cjs)
 *   against this server and worker: the guard refuses a rollout while a run is open and passes once it closed;
 * - the gke steps' `run-submit` (components/gke/steps.cjs, `gke.runAs: workflow`) against a second worker whose
 *   runs export their ledgers to a bucket of fake-gcs-server (the worker's backend setting `ledgerExport`, as the gke
 *   worker's): the summary read back and verified from the bucket, and `run-forget` deleting it. (The port-forward
 *   the gke steps reach Temporal through needs a kubelet: test/unit/port-forward.test.ts, test/local/stack.test.ts.)
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { simQueueNames } from "../../components/sim/queue.js";
import { cleanupKubernetesRun } from "../../runtime/backends/kubernetes/index.js";
import { HttpMethod, type KubeClient } from "../../runtime/backends/kubernetes/client.js";
import type { ApiCallKey } from "../../runtime/backends/kubernetes/counters.js";
import { runLabelValue } from "../../runtime/backends/kubernetes/render.js";
import { readLedger } from "../../runtime/core/ledger/index.js";
import { cpuMillicores } from "../../runtime/core/quantity.js";
import { HEARTBEAT_TIMEOUT_S } from "../../runtime/temporal/contract.js";
import { controlPlaneBinaries, findSimBinaries } from "../../simctl/binaries.js";
import { startController, stopController } from "../../simctl/cluster.js";
import { isRunning } from "../../simctl/procs.js";
import { gcsEmulatorSkipReason, startGcsEmulator } from "../runtime/gcs-emulator.js";
import { startSim, simUnavailableReason, type SimHarness } from "./harness.js";
import { FAKE_IMAGE, adminClient, eventually, list, namespaceWithQueue } from "./k8s-backend-helpers.js";

const execFileP = promisify(execFile);
const unavailable = simUnavailableReason(controlPlaneBinaries);
const projectDir = path.resolve(__dirname, "..", "..");
const runtimeBundle = path.join(projectDir, "dist", "cohort.cjs");
const bundlesMissing = ["cohort.cjs", "cohort-temporal.cjs", "cohort-temporal-workflows.js"].filter((f) => !fs.existsSync(path.join(projectDir, "dist", f)));
const workflowUnavailable = simUnavailableReason() ?? (bundlesMissing.length > 0 ? `dist/${bundlesMissing.join(", dist/")} missing: npm run build` : undefined);
if (workflowUnavailable !== undefined) console.warn(`temporal workflow sim tests skipped: ${workflowUnavailable}`);

async function temporalCli(sim: SimHarness, args: readonly string[]): Promise<string> {
  const binary = sim.state.processes.find((p) => p.component === "temporal")?.binary;
  if (binary === undefined) throw new Error("no temporal process in the sim state");
  const r = await execFileP(binary, [...args, "--address", sim.temporalAddress, "--namespace", "default"], { timeout: 30_000 });
  return r.stdout;
}

describe.skipIf(unavailable !== undefined)("the sim's Temporal dev server", () => {
  let sim: SimHarness;
  beforeAll(async () => {
    sim = await startSim();
  }, 300_000);
  afterAll(async () => {
    await sim?.stop();
  });

  it("is serving on the sim's temporal port when simctl start returns, with its database in the state dir", async () => {
    expect(sim.temporalAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(await temporalCli(sim, ["operator", "cluster", "health"])).toContain("SERVING");
    expect(fs.existsSync(path.join(sim.stateDir, "temporal.db"))).toBe(true);
    const rec = sim.state.processes.find((p) => p.component === "temporal");
    expect(rec?.args).toEqual(expect.arrayContaining(["--headless", "--ip", "127.0.0.1", "--db-filename", path.join(sim.stateDir, "temporal.db")]));
  });

  it("keeps a workflow's history across a restart of the server (stop-controller, start-controller)", async () => {
    const out = JSON.parse(await temporalCli(sim, ["workflow", "start", "--type", "probe", "--task-queue", "probe-q", "--workflow-id", "history-probe", "--output", "json"])) as {
      runId: string;
    };
    expect(out.runId).toMatch(/\S/);
    const before = sim.state.processes.find((p) => p.component === "temporal")!;
    expect(await stopController("temporal", sim.stateDir, 5_000)).toMatch(/temporal \(pid \d+\): /);
    expect(isRunning(before)).toBe(false);
    await expect(temporalCli(sim, ["operator", "cluster", "health", "--command-timeout", "2s"])).rejects.toThrow();
    await startController("temporal", { stateDir: sim.stateDir, binaries: findSimBinaries(process.env, ["temporal"]) });
    const described = JSON.parse(await temporalCli(sim, ["workflow", "describe", "--workflow-id", "history-probe", "--output", "json"])) as {
      workflowExecutionInfo: { execution: { runId: string }; type: { name: string } };
    };
    expect(described.workflowExecutionInfo.execution.runId).toBe(out.runId);
    expect(described.workflowExecutionInfo.type.name).toBe("probe");
  }, 120_000);
});

function cohort(name: string, replicas: number, hold: string, cpu = "10m", admissionTimeout = "2m", role = "agent"): string {
  return `apiVersion: cohort-lab/v1
kind: Cohort
name: ${name}
startupTimeout: 2m
memberTimeout: 90s
admissionTimeout: ${admissionTimeout}
stopGracePeriod: 2s
hold: ${hold}
roles:
  - name: ${role}
    replicas: ${replicas}
    app: { image: "${FAKE_IMAGE}", command: ["serve"] }
    readiness: { tcp: {} }
    resources: { cpu: ${cpu}, memory: 16Mi }
`;
}

interface Exited {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A `node dist/cohort.cjs <args>` child with its output collected. */
function cohortProcess(args: readonly string[], env: NodeJS.ProcessEnv = process.env): { child: ChildProcess; exited: Promise<Exited>; stderr: () => string } {
  const child = spawn(process.execPath, [runtimeBundle, ...args], { stdio: ["ignore", "pipe", "pipe"], env });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const exited = new Promise<Exited>((resolve) => child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, exited, stderr: () => stderr };
}

describe.skipIf(workflowUnavailable !== undefined)("the cohortRun workflow through cohort submit and cohort worker", () => {
  let sim: SimHarness;
  let admin: KubeClient;
  let worker: ReturnType<typeof cohortProcess>;
  let artifacts: string;
  let specDir: string;
  let backendConfigFile: string;
  const ns = `temporal-${Math.random().toString(16).slice(2, 6)}`;
  const taskQueue = "cohort-test-runs";

  beforeAll(async () => {
    sim = await startSim({ nodes: 2, controllers: true });
    admin = adminClient(sim.kubeconfigPath);
    await namespaceWithQueue(admin, ns, simQueueNames.clusterQueue);
    artifacts = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-temporal-ledgers-"));
    specDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-temporal-specs-"));
    const backendConfig = path.join(specDir, "backend.json");
    fs.writeFileSync(backendConfig, JSON.stringify({ kubeconfig: sim.kubeconfigPath, namespace: ns, queue: "cohort" }));
    backendConfigFile = backendConfig;
    worker = await startWorker();
  }, 600_000);

  async function startWorker(): Promise<ReturnType<typeof cohortProcess>> {
    const w = cohortProcess(["worker", "--temporal-address", sim.temporalAddress, "--namespace", "default", "--task-queue", taskQueue, "--backend-config", backendConfigFile]);
    await eventually("the worker to poll", 60_000, async () => (w.stderr().includes("worker polling task queue") ? true : undefined));
    return w;
  }

  afterAll(async () => {
    worker?.child.kill("SIGTERM");
    await worker?.exited;
    await admin?.dispose();
    await sim?.stop();
    for (const d of [artifacts, specDir]) if (d !== undefined) fs.rmSync(d, { recursive: true, force: true });
  });

  function specFile(name: string, replicas: number, hold: string, cpu?: string, admissionTimeout?: string, role?: string): string {
    const file = path.join(specDir, `${name}.yaml`);
    fs.writeFileSync(file, cohort(name, replicas, hold, cpu, admissionTimeout, role));
    return file;
  }

  const submitArgs = (workflowId: string, spec: string): string[] => [
    "submit",
    "--temporal-address",
    sim.temporalAddress,
    "--task-queue",
    taskQueue,
    "--workflow-id",
    workflowId,
    "--artifacts",
    artifacts,
    "--spec",
    spec,
  ];

  async function workflowsWithId(workflowId: string): Promise<unknown[]> {
    const binary = sim.state.processes.find((p) => p.component === "temporal")!.binary;
    const r = await execFileP(binary, [
      "workflow",
      "list",
      "--address",
      sim.temporalAddress,
      "--namespace",
      "default",
      "--query",
      `WorkflowId="${workflowId}"`,
      "--output",
      "json",
    ]);
    const text = r.stdout.trim();
    return text === "" ? [] : (JSON.parse(text) as unknown[]);
  }

  const runDirsOf = (name: string): string[] => fs.readdirSync(artifacts).filter((d) => d.startsWith(`${name}-`));

  async function verifyLedger(dir: string, outcome = "succeeded"): Promise<void> {
    const r = await execFileP(process.execPath, [runtimeBundle, "ledger", "verify", dir]);
    expect(r.stdout).toMatch(new RegExp(`^ok: .*outcome ${outcome}`));
  }

  it("cleanupRun's cleanup deletes a run's Sandboxes (and so their pods) by the run label and waits until they are gone", async () => {
    const runId = "leftover-20261202T000000Z-abcdef";
    // The label value the backend writes (lower-cased, label-safe), which cleanup selects by.
    const labels = { "cohort-lab.dev/run": runLabelValue(runId) };
    expect(labels["cohort-lab.dev/run"]).not.toBe(runId);
    for (const name of ["leftover-a", "leftover-b"]) {
      await admin.request("admin create" as ApiCallKey, HttpMethod.POST, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`, {
        body: {
          apiVersion: "agents.x-k8s.io/v1beta1",
          kind: "Sandbox",
          metadata: { name, namespace: ns, labels },
          spec: { podTemplate: { metadata: { labels }, spec: { containers: [{ name: "m", image: FAKE_IMAGE }] } } },
        },
      });
    }
    const other = { "cohort-lab.dev/run": "another-run" };
    await admin.request("admin create" as ApiCallKey, HttpMethod.POST, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`, {
      body: {
        apiVersion: "agents.x-k8s.io/v1beta1",
        kind: "Sandbox",
        metadata: { name: "not-this-run", namespace: ns, labels: other },
        spec: { podTemplate: { metadata: { labels: other }, spec: { containers: [{ name: "m", image: FAKE_IMAGE }] } } },
      },
    });
    await eventually("the Sandboxes' pods", 60_000, async () => ((await list(admin, `/api/v1/namespaces/${ns}/pods`)).length === 3 ? true : undefined));
    const report = await cleanupKubernetesRun({ kubeconfig: sim.kubeconfigPath, namespace: ns }, runId);
    expect(report.found).toEqual(expect.arrayContaining(["sandbox/leftover-a", "sandbox/leftover-b"]));
    const names = async (p: string) => (await list(admin, p)).map((o) => (o.metadata as { name: string }).name);
    expect(await names(`/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`)).toEqual(["not-this-run"]);
    expect(await names(`/api/v1/namespaces/${ns}/pods`)).toEqual(["not-this-run"]);
    // Idempotent: nothing left is success.
    expect((await cleanupKubernetesRun({ kubeconfig: sim.kubeconfigPath, namespace: ns }, runId)).found).toEqual([]);
    await admin.request("admin delete" as ApiCallKey, HttpMethod.DELETE, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes/not-this-run`);
    await eventually("the other run's pod to go", 60_000, async () => ((await list(admin, `/api/v1/namespaces/${ns}/pods`)).length === 0 ? true : undefined));
  }, 180_000);

  it("a submit runs the cohort through the worker: the summary line, a verified ledger, the run's objects gone", async () => {
    const submit = cohortProcess(submitArgs("wf-basic", specFile("basic", 3, "1s")));
    const r = await submit.exited;
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    const summary = JSON.parse(lines[0]!) as { runId: string; outcome: string; size: number; readyCount: number; ledgerPath: string };
    expect(summary).toMatchObject({ outcome: "succeeded", size: 3, readyCount: 3 });
    expect(summary.ledgerPath).toBe(path.join(artifacts, summary.runId));
    expect(runDirsOf("basic")).toEqual([summary.runId]);
    await verifyLedger(summary.ledgerPath);
    const completion = JSON.parse(fs.readFileSync(path.join(summary.ledgerPath, "completion.json"), "utf8")) as { outcome: string };
    expect(completion.outcome).toBe("succeeded");
    expect(await list(admin, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`)).toEqual([]);
    expect(await list(admin, `/api/v1/namespaces/${ns}/pods`)).toEqual([]);
    const wf = await workflowsWithId("wf-basic");
    expect(wf).toHaveLength(1);
  }, 300_000);

  it("two submitters with one workflow id: one workflow, one ledger, the same summary line", async () => {
    const spec = specFile("twice", 2, "3s");
    const [a, b] = await Promise.all([cohortProcess(submitArgs("wf-twice", spec)).exited, cohortProcess(submitArgs("wf-twice", spec)).exited]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    expect(a.stdout).toBe(b.stdout);
    const summary = JSON.parse(a.stdout) as { runId: string; outcome: string };
    expect(summary.outcome).toBe("succeeded");
    expect(runDirsOf("twice")).toEqual([summary.runId]);
    await verifyLedger(path.join(artifacts, summary.runId));
    expect(await workflowsWithId("wf-twice")).toHaveLength(1);
  }, 300_000);

  it("the submitter SIGKILLed mid-run, then submitted again: the same run, its outcome read from the finished workflow", async () => {
    const spec = specFile("killed", 2, "8s");
    const first = cohortProcess(submitArgs("wf-killed", spec));
    // Mid-run: the worker's `cohort run` has opened the ledger.
    const runId = await eventually("the run's ledger to appear", 120_000, async () => runDirsOf("killed")[0]);
    first.child.kill("SIGKILL");
    const killed = await first.exited;
    expect(killed.signal).toBe("SIGKILL");
    expect(fs.existsSync(path.join(artifacts, runId, "completion.json"))).toBe(false);
    const again = await cohortProcess(submitArgs("wf-killed", spec)).exited;
    expect(again.code, again.stderr).toBe(0);
    const summary = JSON.parse(again.stdout) as { runId: string; outcome: string };
    expect(summary).toMatchObject({ runId, outcome: "succeeded" });
    expect(runDirsOf("killed")).toEqual([runId]);
    await verifyLedger(path.join(artifacts, runId));
    // Once closed, a third submit reads the result instead of starting again.
    const third = await cohortProcess(submitArgs("wf-killed", spec)).exited;
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout).toBe(again.stdout);
    expect(third.stderr).toContain("is closed: reading its result");
    expect(await workflowsWithId("wf-killed")).toHaveLength(1);
  }, 300_000);

  it("the cluster workflow's host steps (components/kind/steps.cjs): worker-guard refuses while a run is open and passes after; run-submit refuses a second run beside it, prints the summary and its progress on fd 3", async () => {
    const steps = path.join(projectDir, "components", "kind", "steps.cjs");
    const stepEnv = {
      ...process.env,
      COHORT_BUNDLE: runtimeBundle,
      COHORT_TEMPORAL_ADDRESS: sim.temporalAddress,
      COHORT_TASK_QUEUE: taskQueue,
      COHORT_WORKFLOW_ID: "wf-steps",
      COHORT_PROFILE: "sim",
      // The worker here is a host process: the path it writes the ledger to is the host's.
      COHORT_ARTIFACTS_DIR: artifacts,
      COHORT_ARTIFACTS_NODE_PATH: artifacts,
      COHORT_UNSUCCESSFUL_RUN_FILE: ".unsuccessful.json",
      COHORT_LOST_WORKFLOW_FILE: ".lost",
      COHORT_STATUS_FD: "3",
    };
    const step = (name: string, extra: Record<string, string> = {}, input = "") =>
      new Promise<{ code: number | null; stdout: string; stderr: string; status: string }>((resolve) => {
        const child = spawn(process.execPath, [steps, name], { env: { ...stepEnv, ...extra }, stdio: ["pipe", "pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        let status = "";
        child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
        child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
        (child.stdio[3] as NodeJS.ReadableStream).setEncoding("utf8").on("data", (d: string) => (status += d));
        child.stdin!.end(input);
        child.once("close", (code) => resolve({ code, stdout, stderr, status }));
      });
    const identity = await step("run-identity");
    expect(identity.stdout).toMatch(/^[0-9a-f]{12}\n$/);
    expect((await step("run-identity", { PULUMI_COMMAND_STDOUT: "0123456789ab\n" })).stdout).toBe("0123456789ab\n");
    // The guard with nothing open: the worker may roll.
    const idle = await step("worker-guard");
    expect(idle.code, idle.stderr).toBe(0);
    const submitting = step("run-submit", {}, cohort("steps", 2, "10s"));
    const runId = await eventually("the run's ledger to appear", 120_000, async () => runDirsOf("steps")[0]);
    // A submit of another workflow id while this run is open: refused, nothing started beside it.
    const second = await step("run-submit", { COHORT_WORKFLOW_ID: "wf-steps-second" }, cohort("steps2", 1, "1s"));
    // `cohort submit --sole` refused it (exit 3, OPEN_RUNS_EXIT) after accepting its spec.
    expect(second.code, second.stderr).toBe(3);
    expect(second.stderr).toMatch(/another run is still open on task queue cohort-test-runs: wf-steps /);
    expect(await workflowsWithId("wf-steps-second")).toHaveLength(0);
    const refused = await step("worker-guard");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/cannot roll while runs are open on task queue cohort-test-runs .*wf-steps/);
    const r = await submitting;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe("");
    expect(JSON.parse(r.stdout)).toMatchObject({ runId, outcome: "succeeded", ledgerPath: path.join(artifacts, runId) });
    // The run's progress (runCohort's heartbeat details, read by the submitter) on the status pipe.
    expect(r.status).toMatch(/(startup|hold): started \d\/2/);
    // The run's last line, from the workflow's result (no heartbeat carries it).
    expect(r.status).toMatch(/^done: started 2\/2 ready 2\/2 stopped 2\/2/m);
    const after = await step("worker-guard");
    expect(after.code, after.stderr).toBe(0);
    expect(fs.existsSync(path.join(artifacts, ".unsuccessful.json"))).toBe(false);
  }, 300_000);

  it.skipIf(gcsEmulatorSkipReason !== undefined)(
    "the gke steps' run-submit (runAs workflow): a worker exporting to the bucket, the summary read back and verified from it, run-forget deleting it",
    async () => {
      const gcs = await startGcsEmulator("cohort-gke-ledgers");
      const gkeQueue = "cohort-test-gke-runs";
      const gkeBackend = path.join(specDir, "backend-gke.json");
      fs.writeFileSync(gkeBackend, JSON.stringify({ kubeconfig: sim.kubeconfigPath, namespace: ns, queue: "cohort", ledgerExport: "gs://cohort-gke-ledgers" }));
      const podDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-gke-pod-"));
      const records = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-gke-records-"));
      const gkeEnv = { ...process.env, STORAGE_EMULATOR_HOST: gcs.endpoint };
      const w = cohortProcess(["worker", "--temporal-address", sim.temporalAddress, "--namespace", "default", "--task-queue", gkeQueue, "--backend-config", gkeBackend], gkeEnv);
      try {
        await eventually("the gke worker to poll", 60_000, async () => (w.stderr().includes("worker polling task queue") ? true : undefined));
        const steps = path.join(projectDir, "components", "gke", "steps.cjs");
        const env = {
          ...gkeEnv,
          COHORT_BUNDLE: runtimeBundle,
          COHORT_RUNTIME_BUNDLE: runtimeBundle,
          COHORT_TEMPORAL_ADDRESS: sim.temporalAddress,
          COHORT_TASK_QUEUE: gkeQueue,
          COHORT_WORKFLOW_ID: "wf-gke-steps",
          COHORT_PROFILE: "gke",
          COHORT_ARTIFACTS_DIR: records,
          COHORT_ARTIFACTS_NODE_PATH: podDir,
          COHORT_LEDGER_URI: "gs://cohort-gke-ledgers",
          COHORT_UNSUCCESSFUL_RUN_FILE: ".unsuccessful.json",
          COHORT_LOST_WORKFLOW_FILE: ".lost",
        };
        const step = (name: string, extra: Record<string, string> = {}, input = "") =>
          new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
            const child = spawn(process.execPath, [steps, name], { env: { ...env, ...extra }, stdio: ["pipe", "pipe", "pipe"] });
            let stdout = "";
            let stderr = "";
            child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
            child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
            child.stdin!.end(input);
            child.once("close", (code) => resolve({ code, stdout, stderr }));
          });
        const r = await step("run-submit", {}, cohort("gkesteps", 2, "2s"));
        expect(r.code, r.stderr).toBe(0);
        const summary = JSON.parse(r.stdout) as { runId: string; outcome: string; ledgerUri: string; reportPath: unknown; firstFailure: unknown };
        expect(summary).toMatchObject({ outcome: "succeeded", ledgerUri: `gs://cohort-gke-ledgers/${summary.runId}`, reportPath: null, firstFailure: null });
        expect(summary.runId).toMatch(/^gkesteps-/);
        expect(await gcs.list(`${summary.runId}/`)).toEqual([`${summary.runId}/completion.json`, `${summary.runId}/manifest.json`, `${summary.runId}/records.ndjson`]);
        // The ledger's home is the bucket: the worker's copy is its scratch directory (an emptyDir in the pod).
        expect(fs.existsSync(path.join(podDir, summary.runId, "completion.json"))).toBe(true);
        // Kept by default; removed by run-forget with keepLedgers false.
        const kept = await step("run-forget", { PULUMI_COMMAND_STDOUT: r.stdout, COHORT_KEEP_LEDGERS: "true" });
        expect(kept.code, kept.stderr).toBe(0);
        expect(await gcs.list(`${summary.runId}/`)).toHaveLength(3);
        const forgot = await step("run-forget", { PULUMI_COMMAND_STDOUT: r.stdout, COHORT_KEEP_LEDGERS: "false" });
        expect(forgot.code, forgot.stderr).toBe(0);
        expect(await gcs.list(`${summary.runId}/`)).toEqual([]);
      } finally {
        w.child.kill("SIGTERM");
        await w.exited;
        await gcs.stop();
        for (const d of [podDir, records]) fs.rmSync(d, { recursive: true, force: true });
      }
    },
    300_000,
  );

  it("the Temporal server restarted mid-run of a run longer than the heartbeat timeout: history kept, the run finishes", async () => {
    // hold 40 s > HEARTBEAT_TIMEOUT_S: the activity lives only because its own timer keeps heartbeating.
    const spec = specFile("restart", 2, "40s");
    const submit = cohortProcess(submitArgs("wf-restart", spec));
    const runId = await eventually("the run's ledger to appear", 120_000, async () => runDirsOf("restart")[0]);
    await stopController("temporal", sim.stateDir, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await startController("temporal", { stateDir: sim.stateDir, binaries: findSimBinaries(process.env, ["temporal"]) });
    const r = await submit.exited;
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ runId, outcome: "succeeded" });
    await verifyLedger(path.join(artifacts, runId));
    expect(await workflowsWithId("wf-restart")).toHaveLength(1);
    expect(HEARTBEAT_TIMEOUT_S).toBeLessThan(40);
  }, 300_000);

  it("a run whose admission waits longer than the heartbeat timeout (quota held by another run): heartbeats keep runCohort alive, it succeeds on its first attempt", async () => {
    // The sim ClusterQueue's cpu quota (derived from the nodes): run A's roster takes 60 % of it, run B's
    // roster 60 % as well, so B's Workload waits until A (held 45 s) releases its quota.
    const cq = await admin.request("admin get" as ApiCallKey, HttpMethod.GET, `/apis/kueue.x-k8s.io/v1beta2/clusterqueues/${simQueueNames.clusterQueue}`);
    const resources = (cq.spec as { resourceGroups: { flavors: { resources: { name: string; nominalQuota: string | number }[] }[] }[] }).resourceGroups[0]!.flavors[0]!.resources;
    const quota = String(resources.find((r) => r.name === "cpu")!.nominalQuota);
    const quotaMilli = cpuMillicores(quota) ?? NaN;
    expect(quotaMilli, `ClusterQueue cpu nominalQuota ${quota}`).toBeGreaterThan(0);
    const memberCpu = `${Math.floor(quotaMilli * 0.3)}m`;
    const occupy = cohortProcess(submitArgs("wf-occupy", specFile("occupy", 2, "45s", memberCpu)));
    const occupyRun = await eventually("run A's ledger to appear", 120_000, async () => runDirsOf("occupy")[0]);
    await eventually("run A's roster to be admitted", 120_000, async () =>
      fs.existsSync(path.join(artifacts, occupyRun, "records.ndjson")) && fs.readFileSync(path.join(artifacts, occupyRun, "records.ndjson"), "utf8").includes('"roster-admitted"')
        ? true
        : undefined,
    );
    const submittedAt = Date.now();
    const waiting = cohortProcess(submitArgs("wf-admission-wait", specFile("waiting", 2, "1s", memberCpu, "3m", "waiter")));
    const [a, b] = await Promise.all([occupy.exited, waiting.exited]);
    const completionOf = (run: string | undefined): string => {
      const f = run === undefined ? "" : path.join(artifacts, run, "completion.json");
      return run !== undefined && fs.existsSync(f) ? fs.readFileSync(f, "utf8") : "(no completion)";
    };
    expect(a.code, `${a.stderr}\n${completionOf(occupyRun)}`).toBe(0);
    expect(b.code, `${b.stderr}\n${completionOf(runDirsOf("waiting")[0])}`).toBe(0);
    const summary = JSON.parse(b.stdout) as { runId: string; outcome: string };
    expect(summary.outcome).toBe("succeeded");
    expect(runDirsOf("waiting")).toEqual([summary.runId]);
    const runDir = path.join(artifacts, summary.runId);
    await verifyLedger(runDir);
    const { records } = await readLedger(runDir);
    const admissionMs = Number(records.find((r) => r.kind === "roster-admitted")?.admissionMs);
    console.log(`admission wait of run B: ${admissionMs} ms (ledger roster-admitted.admissionMs), ${Date.now() - submittedAt} ms submit to exit`);
    expect(admissionMs).toBeGreaterThan(HEARTBEAT_TIMEOUT_S * 1000);
    expect(await workflowsWithId("wf-admission-wait")).toHaveLength(1);
    const history = await temporalCli(sim, ["workflow", "show", "--workflow-id", "wf-admission-wait", "--output", "json"]);
    expect(history).not.toContain("ActivityTaskTimedOut");
    expect(history).not.toMatch(/ACTIVITY_TASK_TIMED_OUT/);
    // runCohort: scheduled once, started on attempt 1, completed (cleanupRun follows as its own activity).
    type HistoryEvent = {
      eventId: string;
      eventType: string;
      activityTaskScheduledEventAttributes?: { activityType?: { name?: string } };
      activityTaskStartedEventAttributes?: { scheduledEventId?: string; attempt?: number };
      activityTaskCompletedEventAttributes?: { scheduledEventId?: string };
    };
    const events = (JSON.parse(history) as { events: HistoryEvent[] }).events;
    const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === "runCohort");
    expect(scheduled).toHaveLength(1);
    const id = String(scheduled[0]!.eventId);
    const started = events.filter((e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === id);
    expect(started.map((e) => e.activityTaskStartedEventAttributes?.attempt ?? 1)).toEqual([1]);
    expect(events.filter((e) => String(e.activityTaskCompletedEventAttributes?.scheduledEventId) === id)).toHaveLength(1);
  }, 400_000);

  it("the worker killed mid-run: the run ends interrupted with its ledger completed, a new worker cleans up, the submitter names the cause", async () => {
    const spec = specFile("lost", 2, "5m");
    const submit = cohortProcess(submitArgs("wf-lost", spec));
    const runId = await eventually("the run's ledger to appear", 120_000, async () => runDirsOf("lost")[0]);
    const runDir = path.join(artifacts, runId);
    await eventually("the members to be ready", 120_000, async () => (fs.readFileSync(path.join(runDir, "records.ndjson"), "utf8").includes('"member-ready"') ? true : undefined));
    worker.child.kill("SIGKILL");
    await worker.exited;
    // The run watches its worker (--watch-pid): it stops its members and completes its ledger on its own.
    await eventually("the ledger's completion", 120_000, async () => (fs.existsSync(path.join(runDir, "completion.json")) ? true : undefined));
    expect((JSON.parse(fs.readFileSync(path.join(runDir, "completion.json"), "utf8")) as { outcome: string }).outcome).toBe("interrupted");
    await verifyLedger(runDir, "interrupted");
    // Nothing heartbeats runCohort any more: after the heartbeat timeout the workflow runs cleanupRun on a worker.
    worker = await startWorker();
    const r = await submit.exited;
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/workflow wf-lost lost the run: .*heartbeat/i);
    const runLabel = runLabelValue(runId);
    expect(await list(admin, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes?labelSelector=cohort-lab.dev/run%3D${runLabel}`)).toEqual([]);
    expect(await list(admin, `/api/v1/namespaces/${ns}/pods?labelSelector=cohort-lab.dev/run%3D${runLabel}`)).toEqual([]);
    expect(await workflowsWithId("wf-lost")).toHaveLength(1);
  }, 400_000);

  it("the worker and its run SIGKILLed together (a lost container): the new worker's cleanup reclaims the members and completes the ledger the run left", async () => {
    const spec = specFile("gone", 2, "5m");
    const submit = cohortProcess(submitArgs("wf-gone", spec));
    const runId = await eventually("the run's ledger to appear", 120_000, async () => runDirsOf("gone")[0]);
    const runDir = path.join(artifacts, runId);
    await eventually("both members to be ready", 120_000, async () =>
      fs.readFileSync(path.join(runDir, "records.ndjson"), "utf8").split('"member-ready"').length === 3 ? true : undefined,
    );
    // The run (the ledger's runtimePid, the worker's child) dies first, then its worker: nothing completes the ledger.
    const runPid = (JSON.parse(fs.readFileSync(path.join(runDir, "manifest.json"), "utf8")) as { runtimePid: number }).runtimePid;
    process.kill(runPid, "SIGKILL");
    worker.child.kill("SIGKILL");
    await worker.exited;
    await new Promise((r) => setTimeout(r, 1_000));
    expect(fs.existsSync(path.join(runDir, "completion.json"))).toBe(false);
    worker = await startWorker();
    const r = await submit.exited;
    expect(r.code).toBe(1);
    // A race: the worker reporting its run's death in the moment between the kills, or the heartbeat timeout.
    expect(r.stderr).toMatch(/workflow wf-gone lost the run: .*(heartbeat|cohort run exited 137 without a summary line)/i);
    // Sealed by cleanupRun after the members were reclaimed: they are recorded stopped by the cleanup.
    const completion = JSON.parse(fs.readFileSync(path.join(runDir, "completion.json"), "utf8")) as Record<string, unknown>;
    expect(completion).toMatchObject({ outcome: "interrupted", interruptedBy: "runtime-lost", sealedBy: "cleanup", readyCount: 2 });
    await verifyLedger(runDir, "interrupted");
    const records = fs
      .readFileSync(path.join(runDir, "records.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { kind: string; member?: string; by?: string; lost?: string });
    expect(records.filter((x) => x.by === "cleanup").map((x) => `${x.kind} ${x.member ?? ""}`.trim())).toEqual([
      "member-stopped agent-0",
      "member-stopped agent-1",
      "teardown-finished",
    ]);
    expect(records.find((x) => x.kind === "run-interrupted")?.lost).toMatch(/heartbeat|cohort run exited 137/i);
    const runLabel = runLabelValue(runId);
    expect(await list(admin, `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes?labelSelector=cohort-lab.dev/run%3D${runLabel}`)).toEqual([]);
    expect(await list(admin, `/api/v1/namespaces/${ns}/pods?labelSelector=cohort-lab.dev/run%3D${runLabel}`)).toEqual([]);
  }, 400_000);
});

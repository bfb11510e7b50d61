/**
 * End to end on a real kind cluster: `pulumi up --stack local` with the real Pulumi engine (the pinned CLI
 * through the launcher), the real command and kubernetes providers, a three-node kind cluster on this machine's
 * Docker engine from the node image built offline, Kueue, Agent Sandbox and Temporal from images built offline
 * and loaded by digest, the cohort runtime as a Job (`local.runAs: job`, set by the harness) or, in the default
 * run mode (`workflow`, the key unset), as a Temporal workflow run by the in-cluster run worker, and the ledger on
 * the host through the mounted artifacts directory.
 *
 * Covers: refusals before anything exists (a cohort over the derived quota, with the arithmetic; the Temporal host
 * port taken, naming it; a foreign cluster of the same name, left untouched; a cluster `<name>1` does not make
 * `<name>` exist); the sample roster of Pulumi.local.yaml (1 router + 8 agents) admitted by Kueue as one gang and
 * Ready, outputs and a verified ledger; a second `up` that changes nothing; a member image that does not exist
 * (the run fails fast, naming the member and the image); the runtime's progress lines on the `cohort-progress`
 * row of `pulumi up` while the Job runs, naming members, stored nowhere; `kind delete cluster` by hand, then `destroy` completes
 * and `up` recreates; `destroy` leaves no container, no Docker network, no kube context; in the default run mode
 * (`local.runAs` unset: workflow) the in-cluster run worker (a Ready Deployment in `cohort-lab-system`, no Job) and a
 * SIGKILLed `up` mid-hold, then an `up` with a changed RoleSpec refused by the rollout guard while the run is open
 * (the worker pod untouched), then `up` with the program as it was, which attaches to the same workflow: one run,
 * one ledger, nothing left open on the task queue; the one run worker rolled in place by the next run; the run worker's container
 * lost mid-hold with the run inside it (both SIGKILLed on their node), after which the restarted worker's cleanup
 * reclaims the members and completes the ledger and `up` fails naming the lost run; the gke steps' supervised
 * `kubectl port-forward` to Temporal's Service (the pinned kubectl), restarted on the same port when Temporal's pod
 * is deleted. Wall times are printed.
 *
 * Skipped, with the reason, when the Docker engine, the built tools, node image, images or manifests are missing.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as os from "node:os";
import * as net from "node:net";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cacheRoot } from "../../common/paths";
import { localTools } from "../../components/kind/KindCluster";
import { PROJECT_DIR } from "../../stacks/config";
import { findLocalArtifacts } from "../../stacks/local";
import { OPENCLAW_MEMBER_CONFIG } from "../../stacks/members";
import { freePort, kindContainers, localUnavailableReason, LocalProject } from "./harness";
import { pulumiUpPid, sigkillPulumi, stillRunningAfter } from "../e2e/project";

const unavailable = localUnavailableReason();
if (unavailable !== undefined) process.stderr.write(`local tier skipped: ${unavailable}\n`);

const name = `cl-e2e-${process.pid % 10000}`;
const project = new LocalProject(name);
/** A container that `kind get clusters` lists as `<name>1`: proves the name check is exact. */
const decoy = `${name}1-control-plane`;
const timings: Record<string, number> = {};

function runDocker(args: readonly string[]): string {
  return execFileSync("docker", args, { encoding: "utf8" });
}

/** A stopped container labelled like a kind node of cluster `cluster` (no Kubernetes in it). */
function fakeKindNode(containerName: string, cluster: string): void {
  // Created, never started: `kind get clusters` lists containers in any state by this label.
  runDocker(["create", "--name", containerName, "--label", `io.x-k8s.kind.cluster=${cluster}`, "--label", "io.x-k8s.kind.role=control-plane", project.nodeImageTag(), "/bin/true"]);
}

/** The run directories (those with a records.ndjson) under the project's artifact root. */
function ledgerDirs(): string[] {
  if (!existsSync(project.artifactRoot)) return [];
  return readdirSync(project.artifactRoot).filter((d) => existsSync(path.join(project.artifactRoot, d, "records.ndjson")));
}

/** The run directory of a run not in `before` once `ready` of its members are ready (its ledger says so), or undefined after 10 minutes. */
async function newRunReady(before: ReadonlySet<string>, ready: number): Promise<string | undefined> {
  for (const deadline = Date.now() + 600_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 500))) {
    for (const dir of ledgerDirs().filter((d) => !before.has(d))) {
      const recs = readFileSync(path.join(project.artifactRoot, dir, "records.ndjson"), "utf8");
      if (recs.split("\n").filter((l) => l.includes('"member-ready"')).length === ready) return path.join(project.artifactRoot, dir);
    }
  }
  return undefined;
}

type WorkerPod = {
  metadata: { name: string; namespace: string; deletionTimestamp?: string };
  spec: { nodeName: string };
  status: { phase: string; containerStatuses?: { restartCount: number; ready: boolean }[] };
};

/** The run worker's one Running pod (an earlier revision's pod may still be terminating beside it); fails the test when there is not exactly one. */
async function runningWorkerPod(): Promise<WorkerPod> {
  const pods = JSON.parse(await project.kubectl(["get", "pods", "-A", "-l", "app.kubernetes.io/name=cohort-run-worker", "-o", "json"])) as { items: WorkerPod[] };
  const running = pods.items.filter((p) => p.metadata.deletionTimestamp === undefined && p.status.phase === "Running");
  expect(running, pods.items.map((p) => `${p.metadata.namespace}/${p.metadata.name} ${p.status.phase} ${p.metadata.deletionTimestamp ?? ""}`).join("; ")).toHaveLength(1);
  return running[0]!;
}

/** After a failed check while `up` runs: SIGKILL it (and its providers) so the later tests do not find the stack locked, then rethrow. */
async function abandonUp(up: Promise<unknown>, error: unknown): Promise<never> {
  const pid = pulumiUpPid(project.projectDir);
  if (pid !== undefined) sigkillPulumi(pid);
  await up;
  throw error;
}

async function ledgerVerify(ledgerPath: string): Promise<{ exitCode: number; out: string }> {
  const r = await execa(process.execPath, [path.join(PROJECT_DIR, "dist", "cohort.cjs"), "ledger", "verify", ledgerPath], { reject: false, all: true });
  return { exitCode: r.exitCode ?? -1, out: String(r.all) };
}

describe.skipIf(unavailable !== undefined)("local stack on a real kind cluster", () => {
  beforeAll(async () => {
    await project.init(await freePort());
    fakeKindNode(decoy, `${name}1`);
  }, 600_000);

  afterAll(async () => {
    const destroyed = await project.pulumi(["destroy", "--yes", "--stack", "local", "--skip-preview"]);
    execFileSync("docker", ["rm", "-f", decoy], { stdio: "ignore" });
    process.stderr.write(`local tier timings (s): ${JSON.stringify(Object.fromEntries(Object.entries(timings).map(([k, v]) => [k, Math.round(v / 100) / 10])))}\n`);
    project.cleanup();
    // A failed clean-up leaves a cluster behind: that fails the tier.
    expect(destroyed.exitCode, destroyed.all.slice(-3000)).toBe(0);
  }, 900_000);

  it("refuses a cohort larger than the derived quota at preview, with the arithmetic, before anything exists", async () => {
    const roster = JSON.stringify({
      name: "society",
      roles: [{ name: "agent", replicas: 400, app: { command: ["sleep", "60"] }, readiness: { tcp: {} }, resources: { cpu: "100m", memory: "64Mi" } }],
    });
    await project.config("--path", "cohort", roster);
    const r = await project.pulumi(["preview", "--stack", "local"]);
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toMatch(
      /cohort-lab:cohort: 400 members need 40000m CPU \(agent 400 × 100m\), more than the ClusterQueue quota of \d+m \(2 nodes × \d+m allocatable − \d+m reserved = \d+m\)/,
    );
    expect(kindContainers(name)).toEqual([]);
    await project.ok(["config", "rm", "--stack", "local", "cohort"]);
    // Restore the shipped roster (config rm removed the whole `cohort` key of Pulumi.local.yaml).
    await project.restoreStackFile();
  }, 600_000);

  it("refuses when the Temporal host port is taken, naming the port, and creates nothing", async () => {
    const port = await freePort();
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen({ host: "127.0.0.1", port }, resolve));
    try {
      await project.config("--path", "local.temporalPort", String(port));
      const r = await project.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
      expect(r.exitCode).not.toBe(0);
      expect(r.all).toContain(`port ${port} on 127.0.0.1 is not free`);
      expect(kindContainers(name)).toEqual([]);
    } finally {
      holder.close();
    }
    // A new free port (the one init chose may be taken by now); the harness field follows it.
    project.temporalPort = await freePort();
    await project.config("--path", "local.temporalPort", String(project.temporalPort));
  }, 600_000);

  it("refuses a foreign kind cluster of the same name and leaves it untouched", async () => {
    const foreign = new LocalProject(`${name}-foreign`);
    try {
      await foreign.init(await freePort());
      fakeKindNode(`${name}-foreign-control-plane`, `${name}-foreign`);
      const r = await foreign.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
      expect(r.exitCode).not.toBe(0);
      expect(r.all).toContain(`a kind cluster named "${name}-foreign" already exists`);
      expect(kindContainers(`${name}-foreign`)).toEqual([`${name}-foreign-control-plane`]);
    } finally {
      execFileSync("docker", ["rm", "-f", `${name}-foreign-control-plane`], { stdio: "ignore" });
      foreign.cleanup();
    }
  }, 600_000);

  it("up: 3 nodes, Kueue, Agent Sandbox, Temporal, the sample roster admitted as one gang and Ready; outputs; verified ledger", async () => {
    const up = await project.ok(["up", "--yes", "--stack", "local", "--skip-preview"], { timedLines: true });
    timings.upCold = up.ms;
    const o = (await project.outputs()) as {
      profile: string;
      run: { id: string; outcome: string; size: number; readyCount: number; timeToReadyMs: number; ledgerPath: string };
      kubeContext: string;
      temporalAddress: string;
      queues: { clusterQueue: string; localQueue: string };
    };
    expect(o.profile).toBe("local");
    expect(o.run).toMatchObject({ outcome: "succeeded", size: 9, readyCount: 9 });
    expect(o.kubeContext).toBe(`kind-${name}`);
    expect(o.temporalAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    timings.timeToReady9 = o.run.timeToReadyMs;
    expect(o.run.ledgerPath.startsWith(project.artifactRoot)).toBe(true);
    expect(existsSync(path.join(o.run.ledgerPath, "completion.json"))).toBe(true);
    const verify = await ledgerVerify(o.run.ledgerPath);
    expect(verify.exitCode, verify.out).toBe(0);

    const nodes = JSON.parse(await project.kubectl(["get", "nodes", "-o", "json"])) as {
      items: { metadata: { name: string }; status: { conditions: { type: string; status: string }[] } }[];
    };
    expect(nodes.items.map((n) => n.metadata.name).sort()).toEqual([`${name}-control-plane`, `${name}-worker`, `${name}-worker2`]);
    for (const n of nodes.items) expect(n.status.conditions.find((c) => c.type === "Ready")?.status).toBe("True");
    // The controllers run the images built here, by digest.
    const pods = JSON.parse(await project.kubectl(["get", "pods", "-A", "-o", "json"])) as {
      items: { metadata: { namespace: string }; spec: { containers: { image: string }[] } }[];
    };
    const images = pods.items
      .filter((p) => ["kueue-system", "agent-sandbox-system", "cohort-lab-system"].includes(p.metadata.namespace))
      .flatMap((p) => p.spec.containers.map((c) => c.image));
    expect(images.length).toBeGreaterThanOrEqual(3);
    for (const image of images) expect(image).toMatch(/^cohort-lab\.local\/[a-z-]+:[^@]+@sha256:[0-9a-f]{64}$/);
    // The roster was one Workload (one gang), recorded in the ledger's admission record.
    const records = readFileSync(path.join(o.run.ledgerPath, "records.ndjson"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { kind: string });
    expect(records.filter((r) => r.kind === "member-ready")).toHaveLength(9);
    // The decoy `<name>1` did not make `<name>` exist, and is untouched.
    expect(kindContainers(`${name}1`)).toEqual([decoy]);

    // Live progress: the follower's row showed the runtime's progress lines from the Job's log, naming members,
    // while the run went on (the sample holds 10 s after all are ready: well before completion.json was written).
    const rows = up.lines.filter((l) => /command:local:Command\s+cohort-progress\s+creating/.test(l.text) && /(startup|hold|teardown|done): started \d+\/9/.test(l.text));
    process.stderr.write(`[local progress] ${rows.length} progress rows:\n${rows.map((l) => l.text).join("\n")}\n`);
    const naming = rows.filter((l) => /\((ready|waiting): [^)]*(router-0|agent-\d)/.test(l.text));
    expect(naming.length, up.all.slice(-6000)).toBeGreaterThan(0);
    const completedAt = Date.parse((JSON.parse(readFileSync(path.join(o.run.ledgerPath, "completion.json"), "utf8")) as { completedAt: string }).completedAt);
    expect(completedAt - naming[0]!.at).toBeGreaterThan(5000);
    // It started with the Job and ended with it (Job polled every 2 s, 2 s grace): it did not hold the up.
    const createdAfter = (re: RegExp) => Number(up.lines.map((l) => re.exec(l.text)?.[1]).find((x) => x !== undefined) ?? NaN);
    const jobSeconds = createdAfter(/kubernetes:batch\/v1:Job\s+\S+\s+created \((\d+)s\)/);
    const followerSeconds = createdAfter(/command:local:Command\s+cohort-progress\s+created \((\d+)s\)/);
    process.stderr.write(`[local progress] Job created after ${jobSeconds} s, cohort-progress after ${followerSeconds} s\n`);
    expect(followerSeconds).toBeLessThanOrEqual(jobSeconds + 6);
    // Ephemeral: the follower stored none of it (stdout empty, stderr at most one note), nor did any resource.
    const state = (await project.ok(["stack", "export", "--stack", "local"])).stdout;
    const follower = (JSON.parse(state) as { deployment: { resources: { urn: string; outputs?: { stdout?: string; stderr?: string } }[] } }).deployment.resources.find((x) =>
      x.urn.endsWith("::cohort-progress"),
    );
    expect(follower, "no cohort-progress resource in the state").toBeDefined();
    expect(follower!.outputs?.stdout ?? "").toBe("");
    expect((follower!.outputs?.stderr ?? "").trim().split("\n").filter(Boolean).length).toBeLessThanOrEqual(1);
    expect(state).not.toContain("startup: started");
  }, 900_000);

  it("a second up changes nothing", async () => {
    const r = await project.ok(["preview", "--stack", "local", "--expect-no-changes"]);
    timings.previewNoChanges = r.ms;
    // And an up: nothing runs again (the progress follower's triggers are stable too).
    const again = await project.ok(["up", "--yes", "--stack", "local", "--skip-preview", "--expect-no-changes"]);
    timings.upNoChanges = again.ms;
  }, 600_000);

  it("pulumi up interrupted during the run (SIGINT), then up again: one run, nothing left beside it", async () => {
    // A longer hold so the interrupt lands while the runtime Job is running.
    await project.config("--path", "cohort.hold", "60s");
    let sawJob = false;
    const started = performance.now();
    const upRun = project.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"], {
      signalWhen: async () => {
        const jobs = JSON.parse(await project.kubectl(["get", "jobs", "-A", "-o", "json"])) as { items: { status?: { active?: number } }[] };
        sawJob = jobs.items.some((j) => (j.status?.active ?? 0) > 0);
        return sawJob;
      },
    });
    const interrupted = await upRun;
    timings.interruptedUp = performance.now() - started;
    expect(sawJob).toBe(true);
    expect(interrupted.exitCode).not.toBe(0);
    const again = await project.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
    timings.upAfterInterrupt = again.ms;
    expect(again.exitCode, again.all.slice(-4000)).toBe(0);
    const o = (await project.outputs()) as { run: { id: string; outcome: string; readyCount: number; ledgerPath: string } };
    expect(o.run).toMatchObject({ outcome: "succeeded", readyCount: 9 });
    // One run namespace and one Job: no run was left beside the one the outputs name.
    const namespaces = (JSON.parse(await project.kubectl(["get", "namespaces", "-o", "json"])) as { items: { metadata: { name: string } }[] }).items.map((n) => n.metadata.name);
    expect(namespaces.filter((n) => n.startsWith("society-"))).toHaveLength(1);
    const jobs = JSON.parse(await project.kubectl(["get", "jobs", "-A", "-o", "json"])) as { items: unknown[] };
    expect(jobs.items).toHaveLength(1);
    const verify = await ledgerVerify(o.run.ledgerPath);
    expect(verify.exitCode, verify.out).toBe(0);
    await project.ok(["config", "rm", "--stack", "local", "--path", "cohort.hold"]);
    await project.restoreStackFile();
  }, 900_000);

  it("a small OpenClaw roster: 2 stock gateways from the member image built here, Ready on the gateway's /healthz", async () => {
    const openclaw = findLocalArtifacts().images.openclaw;
    if (openclaw === undefined) throw new Error("the OpenClaw member image is not built (npm run toolchain -- local-apps)");
    // The host preset's config (tools denied, nested sandbox off, no mDNS, no update checks), bound to the pod's
    // address so the kubelet's probe reaches it; the token is a fresh secret per member (a Secret, never a spec).
    const config = JSON.stringify({ ...OPENCLAW_MEMBER_CONFIG, gateway: { ...OPENCLAW_MEMBER_CONFIG.gateway, bind: "lan" }, logging: { file: "/home/node/logs/openclaw.log" } });
    const roster = JSON.stringify({
      name: "clawsoc",
      startupTimeout: "10m",
      memberTimeout: "8m",
      hold: "5s",
      concurrency: 2,
      stopGracePeriod: "10s",
      roles: [
        {
          name: "gateway",
          replicas: 2,
          app: {
            image: `${openclaw.repository}:${openclaw.tag}@${openclaw.digest}`,
            command: [
              "sh",
              "-c",
              'mkdir -p "$HOME/state" && printf "%s" "$OPENCLAW_MEMBER_CONFIG" > "$HOME/state/openclaw.json" && exec node /opt/openclaw/node_modules/openclaw/openclaw.mjs gateway run --allow-unconfigured --bind lan --port "$COHORT_PORT" --auth token',
            ],
            env: { OPENCLAW_STATE_DIR: "/home/node/state", OPENCLAW_CONFIG_PATH: "/home/node/state/openclaw.json", OPENCLAW_DISABLE_BONJOUR: "1", OPENCLAW_MEMBER_CONFIG: config },
            secretEnv: ["OPENCLAW_GATEWAY_TOKEN"],
          },
          readiness: { http: { path: "/healthz" } },
          resources: { cpu: "500m", memory: "1200Mi" },
        },
      ],
    });
    await project.config("--path", "cohort", roster);
    try {
      const up = await project.ok(["up", "--yes", "--stack", "local", "--skip-preview"]);
      timings.openclawUp = up.ms;
      const o = (await project.outputs()) as { run: { outcome: string; size: number; readyCount: number; timeToReadyMs: number; ledgerPath: string } };
      expect(o.run).toMatchObject({ outcome: "succeeded", size: 2, readyCount: 2 });
      timings.openclawTimeToReady = o.run.timeToReadyMs;
      const verify = await ledgerVerify(o.run.ledgerPath);
      expect(verify.exitCode, verify.out).toBe(0);
      // The token never reaches the ledger.
      expect(readFileSync(path.join(o.run.ledgerPath, "records.ndjson"), "utf8")).not.toMatch(/OPENCLAW_GATEWAY_TOKEN=[0-9a-f]{16}/);
    } finally {
      await project.ok(["config", "rm", "--stack", "local", "cohort"]);
      await project.restoreStackFile();
    }
  }, 900_000);

  it("a member image that does not exist fails the run fast, naming the member and the image", async () => {
    const missing = `cohort-lab.local/no-such-image:v0@sha256:${"0".repeat(64)}`;
    const roster = JSON.stringify({
      name: "society",
      startupTimeout: "4m",
      memberTimeout: "3m",
      hold: "2s",
      roles: [{ name: "ghost", replicas: 1, app: { command: ["sleep", "600"], image: missing }, readiness: { tcp: {} }, resources: { cpu: "50m", memory: "32Mi" } }],
    });
    await project.config("--path", "cohort", roster);
    const r = await project.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
    timings.missingImageUp = r.ms;
    expect(r.exitCode).not.toBe(0);
    expect(r.all).toContain("ghost-0");
    expect(r.all).toContain("no-such-image");
    await project.ok(["config", "rm", "--stack", "local", "cohort"]);
    await project.restoreStackFile();
  }, 900_000);

  it("the default run mode (workflow): the in-cluster run worker; a SIGKILLed up mid-hold, then up: the same run, one workflow, one ledger", async () => {
    // `local.runAs` unset: the default. (The harness sets it back to job at the end of this test.)
    await project.ok(["config", "rm", "--stack", "local", "--path", "local.runAs"]);
    project.runAs = undefined;
    try {
      // Long enough for the kill, cancel, refresh and the refused up (about 150 s on kind here) while the run is open.
      await project.config("--path", "cohort.hold", "240s");
      const before = new Set(ledgerDirs());
      const started = performance.now();
      const first = project.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"], { timedLines: true });
      // Wait until a new run's 9 members are ready (its ledger on the host says so), then kill the CLI mid-hold.
      const runDir = await newRunReady(before, 9);
      try {
        expect(runDir, "the run's members never became ready").toBeDefined();
        timings.workflowToHold = performance.now() - started;
        // The run worker is the Deployment's one Ready pod, polling (its readiness probe is the worker's ready file).
        const deploy = JSON.parse(await project.kubectl(["get", "deployments", "-A", "-l", "app.kubernetes.io/name=cohort-run-worker", "-o", "json"])) as {
          items: { metadata: { namespace: string }; status?: { readyReplicas?: number } }[];
        };
        expect(deploy.items).toHaveLength(1);
        expect(deploy.items[0]!.status?.readyReplicas).toBe(1);
        // No runtime Job runs in workflow mode (the earlier tests' completed Jobs are deleted only at the end of this up).
        const jobs = JSON.parse(await project.kubectl(["get", "jobs", "-A", "-o", "json"])) as { items: { status?: { active?: number } }[] };
        expect(jobs.items.filter((j) => (j.status?.active ?? 0) > 0)).toHaveLength(0);
        // Time for a progress line to travel (runCohort's heartbeat details, the submitter's describe, the status pipe).
        await new Promise((r) => setTimeout(r, 4_000));
      } catch (error) {
        await abandonUp(first, error);
      }
      const workerBefore = await runningWorkerPod();
      expect(workerBefore.metadata.namespace).toBe("cohort-lab-system");
      const pid = pulumiUpPid(project.projectDir);
      expect(pid, "no pulumi up process").toBeDefined();
      const providers = sigkillPulumi(pid!);
      // The CLI's provider plugins are stopped with it (pulumi-resource-kubernetes, at least: seen left running before).
      expect(providers.length).toBeGreaterThanOrEqual(1);
      const killed = await first;
      expect(killed.exitCode).not.toBe(0);
      expect(await stillRunningAfter(providers), "provider plugins still running after the CLI was SIGKILLed").toEqual([]);
      expect(existsSync(path.join(runDir!, "completion.json")), "the run ended with the killed up").toBe(false);
      const progressRows = killed.lines.filter((l) => /command:local:Command\s+cohort-run\s+creating.*(startup|hold): started \d+\/9/.test(l.text));
      process.stderr.write(`[e2e local workflow] ${progressRows.length} progress rows before the kill, e.g. ${progressRows[0]?.text ?? "none"}\n`);
      expect(progressRows.length, killed.all.slice(-4000)).toBeGreaterThan(0);

      await project.ok(["cancel", "--yes", "--stack", "local"]);
      await project.pulumi(["refresh", "--clear-pending-creates", "--stack", "local", "--yes"]);

      // A changed RoleSpec while the run is open is a new run (a new run namespace), so the worker would roll: the
      // rollout guard refuses the up, naming the open workflow, and the running worker is left alone.
      await project.config("--path", "cohort.hold", "241s");
      const refused = await project.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
      timings.workflowRolloutRefused = refused.ms;
      expect(refused.exitCode).not.toBe(0);
      expect(refused.all).toMatch(/the run worker cannot roll while runs are open on task queue cohort-lab-local-runs .*cohort-lab\/local\/[0-9a-f]{12}/);
      const workerAfterRefusal = await runningWorkerPod();
      expect(workerAfterRefusal.metadata.name).toBe(workerBefore.metadata.name);
      expect(workerAfterRefusal.status.containerStatuses?.[0]?.restartCount).toBe(workerBefore.status.containerStatuses?.[0]?.restartCount);
      expect(existsSync(path.join(runDir!, "completion.json")), "the refused up ended the run").toBe(false);
      await project.config("--path", "cohort.hold", "240s");

      const again = await project.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
      timings.workflowUpAfterKill = again.ms;
      expect(again.exitCode, again.all.slice(-4000)).toBe(0);
      // The attached up's row ends with the run's last line (from the workflow's result, CohortRunResult.progress).
      expect(again.all).toMatch(/command:local:Command\s+cohort-run\s+creating.*done: started 9\/9 ready 9\/9 stopped 9\/9/);
      const o = (await project.outputs()) as {
        run: { id: string; outcome: string; readyCount: number; ledgerPath: string };
        queues: { temporalTaskQueue?: string };
        temporalAddress: string;
      };
      expect(o.temporalAddress).toBe(`127.0.0.1:${project.temporalPort}`);
      expect(o.run).toMatchObject({ id: path.basename(runDir!), outcome: "succeeded", readyCount: 9, ledgerPath: realpathSync(runDir!) });
      expect(o.queues.temporalTaskQueue).toBe("cohort-lab-local-runs");
      // One run: the killed up's, attached to and finished; no second ledger beside it.
      expect(ledgerDirs().filter((d) => !before.has(d))).toEqual([path.basename(runDir!)]);
      const verify = await ledgerVerify(runDir!);
      expect(verify.exitCode, verify.out).toBe(0);
      // Nothing open on the task queue; the run's Sandboxes are gone (the workflow's cleanup step).
      const open = await execa(
        process.execPath,
        [path.join(PROJECT_DIR, "dist", "cohort.cjs"), "open-runs", "--temporal-address", o.temporalAddress, "--task-queue", "cohort-lab-local-runs"],
        { reject: false, all: true },
      );
      expect(open.exitCode, String(open.all)).toBe(0);
      const sandboxes = JSON.parse(await project.kubectl(["get", "sandboxes.agents.x-k8s.io", "-A", "-o", "json"])) as { items: unknown[] };
      expect(sandboxes.items).toHaveLength(0);
    } finally {
      // Back to the Job for the later tests, whether or not this one passed.
      project.runAs = "job";
      await project.pulumi(["config", "rm", "--stack", "local", "--path", "cohort.hold"]);
      await project.restoreStackFile();
    }
  }, 1_500_000);

  it("the run worker's container lost mid-hold with the run inside it (both SIGKILLed on their node): up fails naming the lost run; the restarted worker's cleanup reclaims the members and completes the ledger", async () => {
    await project.ok(["config", "rm", "--stack", "local", "--path", "local.runAs"]);
    project.runAs = undefined;
    try {
      // Longer than the heartbeat timeout and the container's restart together: the run cannot end on its own first.
      await project.config("--path", "cohort.hold", "5m");
      const before = new Set(ledgerDirs());
      const started = performance.now();
      const up = project.pulumi(["up", "--yes", "--stack", "local", "--skip-preview"]);
      const runDir = await newRunReady(before, 9);
      let pod: WorkerPod;
      try {
        expect(runDir, "the run's members never became ready").toBeDefined();
        // One worker (the earlier test's, rolled in place to this run's revision), not one per run namespace.
        pod = await runningWorkerPod();
        // On the worker pod's node (a kind node is a container of this Docker engine): the run, then the worker (the
        // container's first process), so nothing in the container completes the ledger.
        const runId = path.basename(runDir!);
        runDocker(["exec", pod.spec.nodeName, "pkill", "-KILL", "-f", `cohort.cjs run .*--run-id ${runId}`]);
        runDocker(["exec", pod.spec.nodeName, "pkill", "-KILL", "-f", "cohort.cjs worker"]);
      } catch (error) {
        await abandonUp(up, error);
      }
      const r = await up;
      timings.lostWorkerUp = performance.now() - started;
      expect(r.exitCode).not.toBe(0);
      // Which the workflow saw first is a race: the worker's own report of its run's death (it outlived it by the
      // moment between the two kills), or the heartbeat timeout after both were gone.
      expect(r.all).toMatch(/lost the run: .*(heartbeat|cohort run exited 137 without a summary line)/i);
      const completion = JSON.parse(readFileSync(path.join(runDir!, "completion.json"), "utf8")) as Record<string, unknown>;
      expect(completion).toMatchObject({ outcome: "interrupted", interruptedBy: "runtime-lost", sealedBy: "cleanup", readyCount: 9, size: 9 });
      const verify = await ledgerVerify(runDir!);
      expect(verify.exitCode, verify.out).toBe(0);
      const stoppedByCleanup = readFileSync(path.join(runDir!, "records.ndjson"), "utf8")
        .trim()
        .split("\n")
        .filter((l) => l.includes('"kind":"member-stopped"') && l.includes('"by":"cleanup"'));
      expect(stoppedByCleanup).toHaveLength(9);
      // The same pod, its container restarted; the run's Sandboxes gone; nothing open on the task queue.
      const after = await runningWorkerPod();
      expect(after.metadata.name).toBe(pod!.metadata.name);
      expect(after.status.containerStatuses?.[0]?.restartCount ?? 0).toBeGreaterThan(pod!.status.containerStatuses?.[0]?.restartCount ?? 0);
      const sandboxes = JSON.parse(await project.kubectl(["get", "sandboxes.agents.x-k8s.io", "-A", "-o", "json"])) as { items: unknown[] };
      expect(sandboxes.items).toHaveLength(0);
      const open = await execa(
        process.execPath,
        [path.join(PROJECT_DIR, "dist", "cohort.cjs"), "open-runs", "--temporal-address", `127.0.0.1:${project.temporalPort}`, "--task-queue", "cohort-lab-local-runs"],
        { reject: false, all: true },
      );
      expect(open.exitCode, String(open.all)).toBe(0);
    } finally {
      project.runAs = "job";
      await project.pulumi(["config", "rm", "--stack", "local", "--path", "cohort.hold"]);
      await project.restoreStackFile();
    }
  }, 1_200_000);

  it("the gke steps' supervised port-forward (gke.runAs workflow) with the pinned kubectl against kind's Temporal: worker-guard through it; Temporal's pod deleted, the forwarder restarted behind the same port", async () => {
    // A single-context kubeconfig of this cluster, as the gke stack gives its steps (COHORT_KUBECONFIG).
    const kubeconfig = await project.kubectl(["config", "view", "--minify", "--flatten"]);
    const tools = localTools(`${process.platform}-${process.arch}`, cacheRoot());
    const bundle = path.join(PROJECT_DIR, "dist", "cohort.cjs");
    const forward = { namespace: "cohort-lab-system", service: "temporal", port: 7233 };
    const guard = await execa(process.execPath, [path.join(PROJECT_DIR, "components", "gke", "steps.cjs"), "worker-guard"], {
      env: {
        ...tools.environment,
        COHORT_BUNDLE: bundle,
        COHORT_TASK_QUEUE: "cohort-lab-local-runs",
        COHORT_TEMPORAL_PORT_FORWARD: JSON.stringify(forward),
        COHORT_KUBECONFIG: kubeconfig,
      },
      extendEnv: true,
      reject: false,
      all: true,
    });
    expect(guard.exitCode, String(guard.all)).toBe(0);
    expect(String(guard.all)).toContain("worker guard: no run open on task queue cohort-lab-local-runs");

    // The supervisor itself, with Temporal's pod replaced under it (nothing is open: the history, an emptyDir, goes
    // with the pod; the later tests recreate the cluster).
    const steps = createRequire(__filename)(path.join(PROJECT_DIR, "components", "run", "workflow-steps.cjs")) as {
      PortForward: new (o: Record<string, unknown>) => { start(): Promise<number>; stop(): Promise<void>; restarts: number };
    };
    const dir = mkdtempSync(path.join(os.tmpdir(), "cohort-local-pf-"));
    const file = path.join(dir, "kubeconfig");
    writeFileSync(file, kubeconfig, { mode: 0o600 });
    const notes: string[] = [];
    const pf = new steps.PortForward({ kubectl: tools.kubectl, kubeconfig: file, ...forward, note: (l: string) => notes.push(l) });
    const openRuns = (port: number) =>
      execa(process.execPath, [bundle, "open-runs", "--temporal-address", `127.0.0.1:${port}`, "--task-queue", "cohort-lab-local-runs", "--wait-s", "120"], {
        reject: false,
        all: true,
      });
    try {
      const port = await pf.start();
      const first = await openRuns(port);
      expect(first.exitCode, String(first.all)).toBe(0);
      const started = performance.now();
      await project.kubectl(["delete", "pod", "-n", "cohort-lab-system", "-l", "app.kubernetes.io/name=temporal", "--wait=true"]);
      await project.kubectl(["rollout", "status", "-n", "cohort-lab-system", "deployment/temporal", "--timeout=180s"]);
      // open-runs retries an unreachable Temporal for up to 120 s: the forwarder is back on the same port within it.
      const again = await openRuns(port);
      timings.portForwardBackAfterTemporalPodDeleted = performance.now() - started;
      expect(again.exitCode, `${String(again.all)}\n${notes.join("\n")}`).toBe(0);
      expect(pf.restarts).toBeGreaterThanOrEqual(1);
      expect(notes[0]).toMatch(new RegExp(`port-forward to service/temporal in cohort-lab-system ended \\(.*\\); restarting it behind 127\\.0\\.0\\.1:${port}`));
      process.stderr.write(`[e2e local port-forward] ${pf.restarts} restart(s): ${notes[0] ?? ""}\n`);
    } finally {
      await pf.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);

  it("kind delete cluster by hand: destroy completes, then up recreates the cluster and runs again", async () => {
    execFileSync(project.kindBinary(), ["delete", "cluster", "--name", name], { env: project.env, stdio: "ignore" });
    const destroy = await project.ok(["destroy", "--yes", "--stack", "local", "--skip-preview"]);
    timings.destroyAfterHandDelete = destroy.ms;
    const up = await project.ok(["up", "--yes", "--stack", "local", "--skip-preview"]);
    timings.upAfterHandDelete = up.ms;
    const o = (await project.outputs()) as { run: { outcome: string; readyCount: number } };
    expect(o.run).toMatchObject({ outcome: "succeeded", readyCount: 9 });
  }, 900_000);

  it("destroy leaves no container, no Docker network and no kube context", async () => {
    const r = await project.ok(["destroy", "--yes", "--stack", "local", "--skip-preview"]);
    timings.destroy = r.ms;
    expect(kindContainers(name)).toEqual([]);
    const networks = runDocker(["network", "ls", "--format", "{{.Name}}"]).split("\n");
    // `kind` stays only while another cluster's nodes use it (the decoy is not attached to it).
    const others = runDocker(["ps", "-a", "--filter", "network=kind", "--format", "{{.Names}}"]).split("\n").filter(Boolean);
    if (others.length === 0) expect(networks).not.toContain("kind");
    else expect(others.filter((n) => n.startsWith(`${name}-`))).toEqual([]);
    const kubeconfig = existsSync(project.kubeconfig) ? readFileSync(project.kubeconfig, "utf8") : "";
    expect(kubeconfig).not.toContain(`kind-${name}`);
  }, 900_000);
});

/**
 * The sim supervisor against the real binaries: `simctl` as a separate process (start, status, stop from
 * another process), the control plane's behaviour (fake nodes shaped by the kwok stage, pods bound by the real
 * scheduler and made Ready after the simulated delay, the failure stage), refusals (busy port naming its
 * holder, a foreign state dir, a GOGC out of range), every process's Go runtime settings, and that nothing is
 * left behind (no process of the sim, no state dir).
 *
 * Skipped, with the reason, when the sim binaries are not built (`npm run toolchain -- sim`).
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import * as k8s from "@kubernetes/client-node";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentPoolTaint } from "../../components/sim/fakeNode";
import { failLabel, readyDelayEnv } from "../../simctl/render";
import { readState, writeState, type SimState } from "../../simctl/state";
import { isRunning } from "../../simctl/procs";
import { PROJECT_DIR } from "../../stacks/config";
import { controlPlaneBinaries } from "../../simctl/binaries";
import { simUnavailableReason } from "./harness";

const unavailable = simUnavailableReason(controlPlaneBinaries);
if (unavailable !== undefined) console.log(`sim tier skipped: ${unavailable}`);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-simctl-"));
// The refusal tests leave their own fixtures (a foreign dir must survive simctl); the file removes them at the end.
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

async function simctl(args: readonly string[], input?: string, env?: Record<string, string>) {
  const r = await execa(process.execPath, ["--import", "tsx", "simctl/main.ts", ...args], {
    cwd: PROJECT_DIR,
    ...(env !== undefined ? { env } : {}),
    reject: false,
    ...(input !== undefined ? { input } : { stdin: "ignore" }),
  });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
}

function pod(name: string, extra: { labels?: Record<string, string>; env?: Record<string, string> } = {}): k8s.V1Pod {
  return {
    metadata: { name, labels: extra.labels ?? {} },
    spec: {
      tolerations: [{ key: agentPoolTaint.key, operator: "Equal", value: agentPoolTaint.value, effect: agentPoolTaint.effect }],
      nodeSelector: { "cohort-lab.dev/pool": "agents" },
      containers: [
        {
          name: "m",
          image: "registry.invalid/member@sha256:" + "ab".repeat(32),
          env: Object.entries(extra.env ?? {}).map(([n, v]) => ({ name: n, value: v })),
          resources: { requests: { cpu: "100m", memory: "128Mi" } },
        },
      ],
    },
  };
}

/** Waits (watch-free polling, test only) until `pred` holds for the pod; returns the pod and the time it took. */
async function podUntil(api: k8s.CoreV1Api, name: string, pred: (p: k8s.V1Pod) => boolean, timeoutMs: number) {
  const started = Date.now();
  for (;;) {
    const p = await api.readNamespacedPod({ name, namespace: "default" });
    if (pred(p)) return { pod: p, ms: Date.now() - started };
    if (Date.now() - started > timeoutMs) throw new Error(`pod ${name}: condition not met in ${timeoutMs} ms (phase ${p.status?.phase})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const ready = (p: k8s.V1Pod) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;

describe.skipIf(unavailable !== undefined)("simctl", () => {
  const dir = path.join(tmp, "state");
  let api: k8s.CoreV1Api;

  beforeAll(async () => {
    const r = await simctl(["start", "--state-dir", dir, "--nodes", "2", "--pod-ready-delay-ms", "1500", "--pod-ready-jitter-ms", "0", "--go-gc", "250"]);
    if (r.exitCode !== 0) throw new Error(`simctl start failed:\n${r.stderr}`);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(path.join(dir, "kubeconfig"));
    api = kc.makeApiClient(k8s.CoreV1Api);
  }, 300_000);

  afterAll(async () => {
    await simctl(["stop", "--state-dir", dir]);
  }, 60_000);

  it("runs every control-plane process, and status says so", async () => {
    const r = await simctl(["status", "--state-dir", dir, "--json"]);
    expect(r.exitCode).toBe(0);
    const s = JSON.parse(r.stdout) as { phase: string; components: { component: string; running: boolean }[] };
    expect(s.phase).toBe("running");
    expect(s.components.map((c) => [c.component, c.running])).toEqual([
      ["etcd", true],
      ["kube-apiserver", true],
      ["kube-controller-manager", true],
      ["kube-scheduler", true],
      ["kwok", true],
      ["temporal", true],
    ]);
  });

  it("runs every process with --go-gc's GOGC and a GOMEMLIMIT of a quarter of the machine's memory, recorded in the state", () => {
    const state = readState(path.join(dir, "sim-state.json"))!;
    expect(state.goGC).toBe(250);
    const limit = `GOMEMLIMIT=${Math.floor(os.totalmem() / 4 / 1048576)}MiB`;
    for (const p of state.processes) {
      const environ = fs.readFileSync(`/proc/${p.pid}/environ`, "utf8").split("\0");
      expect([p.component, environ.filter((e) => e.startsWith("GOGC=") || e.startsWith("GOMEMLIMIT=")).sort()]).toEqual([p.component, ["GOGC=250", limit]]);
    }
  });

  it("a controller restarted in a sim whose state predates goGC runs with Go's defaults, not simctl's environment; an out-of-range goGC starts nothing", async () => {
    const file = path.join(dir, "sim-state.json");
    const { goGC, ...legacy } = readState(file)!;
    writeState(file, legacy as SimState);
    try {
      expect((await simctl(["stop-controller", "temporal", "--state-dir", dir])).exitCode).toBe(0);
      const r = await simctl(["start-controller", "temporal", "--state-dir", dir], undefined, { GOGC: "off", GOMEMLIMIT: "123MiB" });
      expect(r.exitCode, r.stderr).toBe(0);
      const temporal = readState(file)!.processes.find((p) => p.component === "temporal")!;
      const environ = fs.readFileSync(`/proc/${temporal.pid}/environ`, "utf8").split("\0");
      expect(environ.filter((e) => e.startsWith("GOGC=") || e.startsWith("GOMEMLIMIT=")).sort()).toEqual(["GOGC=100", "GOMEMLIMIT=off"]);
      // A state whose goGC is out of range still reads (stop must work) but starts nothing.
      expect((await simctl(["stop-controller", "temporal", "--state-dir", dir])).exitCode).toBe(0);
      writeState(file, { ...readState(file)!, goGC: 5 });
      const refused = await simctl(["start-controller", "temporal", "--state-dir", dir]);
      expect(refused.exitCode).toBe(1);
      expect(refused.stderr).toContain(`${file}: goGC must be an integer from 25 to 10000 (got 5); temporal not started`);
      expect(readState(file)!.processes.map((p) => p.component)).not.toContain("temporal");
    } finally {
      writeState(file, { ...readState(file)!, goGC });
    }
  });

  it("registers fake nodes with the e2-standard-16 allocatable, the pool label and the taint", async () => {
    const nodes = (await api.listNode()).items;
    expect(nodes.map((n) => n.metadata?.name).sort()).toEqual(["agents-0000", "agents-0001"]);
    for (const n of nodes) {
      expect(n.status?.allocatable).toEqual({ cpu: "15890m", "ephemeral-storage": "43Gi", memory: "57Gi", pods: "110" });
      expect(n.metadata?.labels?.["cohort-lab.dev/pool"]).toBe("agents");
      expect(n.spec?.taints).toEqual([{ key: "cohort-lab.dev/agents", value: "true", effect: "NoSchedule" }]);
      expect(n.status?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
    }
  });

  it("the default ServiceAccount exists (the controller manager runs), so plain pods are admitted", async () => {
    const sa = await api.readNamespacedServiceAccount({ name: "default", namespace: "default" });
    expect(sa.metadata?.name).toBe("default");
  });

  it("binds a pod to a fake node (real scheduler) and makes it Ready no sooner than the simulated delay, with a pod IP", async () => {
    await api.createNamespacedPod({ namespace: "default", body: pod("delayed") });
    const { pod: p, ms } = await podUntil(api, "delayed", ready, 60_000);
    expect(p.spec?.nodeName).toMatch(/^agents-000[01]$/);
    expect(p.status?.podIP).toMatch(/^10\.244\./);
    expect(p.status?.phase).toBe("Running");
    expect(ms).toBeGreaterThanOrEqual(1400);
  });

  it("a per-pod delay override (SIM_READY_DELAY) fixes that pod's delay", async () => {
    await api.createNamespacedPod({ namespace: "default", body: pod("slow", { env: { [readyDelayEnv]: "4s" } }) });
    const { ms } = await podUntil(api, "slow", ready, 60_000);
    expect(ms).toBeGreaterThanOrEqual(3800);
  });

  it("the failure stage turns a labelled pod Failed with exit code 1 instead of Ready", async () => {
    await api.createNamespacedPod({ namespace: "default", body: pod("doomed", { labels: { [failLabel]: "true" } }) });
    const { pod: p } = await podUntil(api, "doomed", (x) => x.status?.phase === "Failed", 60_000);
    expect(ready(p)).toBe(false);
    expect(p.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(1);
  });

  it("refuses to start a second sim in the same state dir, naming the running processes", async () => {
    const r = await simctl(["start", "--state-dir", dir]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`a sim is already running in ${dir} \\(etcd pid \\d+, kube-apiserver pid \\d+`));
  });

  it("stop (from another process) ends every process group and removes the state dir; a second stop is a no-op", async () => {
    const state = readState(path.join(dir, "sim-state.json"))!;
    const r = await simctl(["stop", "--state-dir", dir]);
    expect(r.exitCode).toBe(0);
    for (const p of state.processes) expect(isRunning(p)).toBe(false);
    expect(fs.existsSync(dir)).toBe(false);
    const again = await simctl(["stop", "--state-dir", dir]);
    expect(again.exitCode).toBe(0);
    expect(again.stderr).toContain(`nothing to stop in ${dir}`);
  }, 60_000);
});

describe.skipIf(unavailable !== undefined)("simctl refusals", () => {
  it("a busy port is refused before anything starts, naming the port, its role and the holder", async () => {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port: 0 }, resolve));
    const port = (server.address() as net.AddressInfo).port;
    const dir = path.join(tmp, "busy");
    try {
      const r = await simctl(["start", "--state-dir", dir, "--ports", `apiserver=${port}`]);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain(`port ${port} (apiserver) on 127.0.0.1 is in use by pid ${process.pid} (`);
      expect(r.stderr).toContain("rolled back: no process was started; state dir removed");
      expect(fs.existsSync(dir)).toBe(false);
    } finally {
      server.close();
    }
  });

  it("a --go-gc out of range is refused before anything starts, naming the flag", async () => {
    const dir = path.join(tmp, "gogc");
    const r = await simctl(["start", "--state-dir", dir, "--go-gc", "10"]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("--go-gc: must be from 25 to 10000 (got 10)");
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("a non-empty directory that holds no sim state is never used or deleted", async () => {
    const dir = path.join(tmp, "foreign");
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "precious.txt"), "keep me");
    const start = await simctl(["start", "--state-dir", dir]);
    expect(start.exitCode).toBe(1);
    expect(start.stderr).toContain(`${dir} exists, is not empty and holds no sim state (sim-state.json); refusing to use it`);
    const stop = await simctl(["stop", "--state-dir", dir]);
    expect(stop.exitCode).toBe(1);
    expect(stop.stderr).toContain(`${dir} holds no sim state (sim-state.json); refusing to delete it`);
    expect(fs.readFileSync(path.join(dir, "precious.txt"), "utf8")).toBe("keep me");
  });
});

/**
 * The supervised port-forward of the workflow steps (components/run/workflow-steps.cjs `PortForward`,
 * `withTemporal`), with real child processes and real TCP: a stand-in `kubectl` that speaks `kubectl port-forward`'s
 * command line and output (`Forwarding from 127.0.0.1:<port> -> <port>`, kubectl's own lines on stderr) and really
 * forwards to a TCP echo server of the test. (`kubectl port-forward` itself needs a kubelet: the local tier runs the
 * pinned kubectl against kind's Temporal, test/local/stack.test.ts.)
 */
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const require_ = createRequire(__filename);
const ROOT = path.join(__dirname, "..", "..");
type PortForwardT = {
  localPort: number | undefined;
  kubectlPort: number | undefined;
  restarts: number;
  child: { pid?: number } | undefined;
  start(): Promise<number>;
  stop(): Promise<void>;
};
const steps = require_(path.join(ROOT, "components", "run", "workflow-steps.cjs")) as {
  PortForward: new (o: { kubectl: string; kubeconfig: string; namespace: string; service: string; port: number; note: (l: string) => void; readyMs?: number }) => PortForwardT;
  parsePortForward(text: string): { namespace: string; service: string; port: number };
};

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-port-forward-"));
const argvLog = path.join(tmp, "argv.log");
const kubectl = path.join(tmp, "kubectl");
/**
 * The stand-in: listens on LOCAL of `LOCAL:PORT` (0 when empty) on --address, forwards each connection to
 * FAKE_TARGET_PORT, prints kubectl's two `Forwarding from` lines. FAKE_MODE=refuse exits 1 with kubectl's error for
 * a missing Service; FAKE_MODE=hang neither listens nor exits; a file FAKE_ERROR_FILE makes it print kubectl's
 * forwarding error three times once a connection arrives (and then keep running, as kubectl did before
 * kubernetes/kubernetes#103526).
 */
fs.writeFileSync(
  kubectl,
  `#!/usr/bin/env node
const fs = require("node:fs"), net = require("node:net");
const argv = process.argv.slice(2);
fs.appendFileSync(${JSON.stringify(argvLog)}, JSON.stringify(argv) + "\\n");
if (process.env.FAKE_MODE === "refuse") { process.stderr.write('error: services "temporal" not found\\n'); process.exit(1); }
if (process.env.FAKE_MODE === "hang") { setInterval(() => {}, 1000); return; }
const ports = argv.at(-1).split(":");
const address = argv[argv.indexOf("--address") + 1];
const server = net.createServer((c) => {
  if (process.env.FAKE_ERROR_FILE && fs.existsSync(process.env.FAKE_ERROR_FILE)) {
    fs.rmSync(process.env.FAKE_ERROR_FILE);
    for (let i = 0; i < 3; i++) process.stderr.write("E1201 12:00:00.000000  1 portforward.go:413] an error occurred forwarding " + server.address().port + " -> " + ports[1] + ": error forwarding port " + ports[1] + " to pod 0123, uid : network namespace for sandbox 0123 is closed\\n");
    c.destroy();
    return;
  }
  const up = net.connect(Number(process.env.FAKE_TARGET_PORT), "127.0.0.1");
  c.pipe(up).pipe(c);
  up.on("error", () => c.destroy());
  c.on("error", () => up.destroy());
});
server.on("error", (e) => { process.stderr.write("Unable to listen on port " + ports[0] + ": " + e.message + "\\nerror: unable to listen on any of the requested ports\\n"); process.exit(1); });
server.listen(Number(ports[0] || 0), address, () => {
  const p = server.address().port;
  process.stdout.write("Forwarding from " + address + ":" + p + " -> " + ports[1] + "\\nForwarding from [::1]:" + p + " -> " + ports[1] + "\\n");
});
process.on("SIGTERM", () => process.exit(0));
`,
  { mode: 0o755 },
);
const kubeconfig = path.join(tmp, "kubeconfig");
fs.writeFileSync(kubeconfig, "apiVersion: v1\nkind: Config\n");

let echo: net.Server;
let echoPort = 0;
beforeAll(async () => {
  // A forwarder killed mid-connection resets its side: not an error of the echo server.
  echo = net.createServer((c) => c.on("error", () => c.destroy()).pipe(c));
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", () => r()));
  echoPort = (echo.address() as net.AddressInfo).port;
  process.env.FAKE_TARGET_PORT = String(echoPort);
});
afterAll(async () => {
  delete process.env.FAKE_TARGET_PORT;
  delete process.env.FAKE_MODE;
  delete process.env.FAKE_ERROR_FILE;
  await new Promise<void>((r) => echo.close(() => r()));
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Sends `text` to 127.0.0.1:port and resolves with what comes back, or rejects (refused, reset). */
function roundTrip(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, "127.0.0.1");
    let got = "";
    c.setEncoding("utf8");
    c.on("data", (d) => {
      got += d;
      if (got.length >= text.length) {
        c.end();
        resolve(got);
      }
    });
    c.on("error", reject);
    c.on("close", () => (got.length < text.length ? reject(new Error(`closed after ${JSON.stringify(got)}`)) : undefined));
    c.write(text);
  });
}

/** Retries {@link roundTrip} every 100 ms until it answers or `ms` passed. */
async function eventually(port: number, text: string, ms = 10_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await roundTrip(port, text);
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Runs a step asynchronously: the echo server the forward reaches lives in this process, so a spawnSync would starve it. */
function runStep(args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stderr }));
  });
}

const alive = (pid: number | undefined): boolean => {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const argvLines = (): string[][] =>
  fs.existsSync(argvLog)
    ? fs
        .readFileSync(argvLog, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as string[])
    : [];

describe("PortForward", () => {
  it("forwards through the step's own port, and after kubectl dies restarts it behind that same port until stopped", async () => {
    fs.rmSync(argvLog, { force: true });
    const notes: string[] = [];
    const pf = new steps.PortForward({ kubectl, kubeconfig, namespace: "cohort-lab-system", service: "temporal", port: 7233, note: (l) => notes.push(l) });
    const port = await pf.start();
    expect(port).toBeGreaterThan(0);
    expect(await roundTrip(port, "one")).toBe("one");
    const first = pf.child?.pid;
    process.kill(first!, "SIGKILL");
    expect(await eventually(port, "two")).toBe("two");
    expect(pf.restarts).toBe(1);
    expect(pf.child?.pid).not.toBe(first);
    expect(notes.join("\n")).toMatch(
      new RegExp(`port-forward to service/temporal in cohort-lab-system ended \\(exited with SIGKILL\\); restarting it behind 127\\.0\\.0\\.1:${port} \\(restart 1`),
    );
    // Each kubectl picks its own port; the address the step gives out is its listener's and never changes.
    const [a, b] = argvLines();
    expect(a).toEqual(["--kubeconfig", kubeconfig, "port-forward", "--address", "127.0.0.1", "--namespace", "cohort-lab-system", "service/temporal", ":7233"]);
    expect(b).toEqual(a);
    expect(pf.localPort).toBe(port);
    expect(pf.kubectlPort).not.toBe(port);
    const last = pf.child?.pid;
    await pf.stop();
    expect(alive(last)).toBe(false);
    // Stopped means stopped: no restart follows.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(argvLines()).toHaveLength(2);
    await expect(roundTrip(port, "x")).rejects.toThrow();
  });

  it("replaces a kubectl that reports a forwarding error but keeps running", async () => {
    fs.rmSync(argvLog, { force: true });
    const flag = path.join(tmp, "error-once");
    fs.writeFileSync(flag, "");
    process.env.FAKE_ERROR_FILE = flag;
    const notes: string[] = [];
    const pf = new steps.PortForward({ kubectl, kubeconfig, namespace: "ns", service: "temporal", port: 7233, note: (l) => notes.push(l) });
    try {
      const port = await pf.start();
      await expect(roundTrip(port, "lost")).rejects.toThrow();
      expect(await eventually(port, "back")).toBe("back");
      expect(pf.restarts).toBe(1);
      expect(notes[0]).toContain("an error occurred forwarding");
    } finally {
      delete process.env.FAKE_ERROR_FILE;
      await pf.stop();
    }
  });

  it("kills a kubectl that neither listens nor exits (a hanging API server or exec credential), and fails at the budget naming it", async () => {
    fs.rmSync(argvLog, { force: true });
    process.env.FAKE_MODE = "hang";
    const pf = new steps.PortForward({ kubectl, kubeconfig, namespace: "ns", service: "temporal", port: 7233, note: () => undefined, readyMs: 2_500 });
    try {
      // The attempt's budget is what is left of readyMs once the listener is up: 2500 ms, or a ms or two less.
      await expect(pf.start()).rejects.toThrow(/kubectl port-forward to service\/temporal in ns did not listen: did not listen within (24\d\d|2500) ms/);
      expect(alive(pf.child?.pid)).toBe(false);
    } finally {
      delete process.env.FAKE_MODE;
      await pf.stop();
    }
  });

  it("fails naming kubectl's reason when the first process never listens within its budget", async () => {
    fs.rmSync(argvLog, { force: true });
    process.env.FAKE_MODE = "refuse";
    const pf = new steps.PortForward({ kubectl, kubeconfig, namespace: "ns", service: "temporal", port: 7233, note: () => undefined, readyMs: 2_500 });
    try {
      await expect(pf.start()).rejects.toThrow('kubectl port-forward to service/temporal in ns did not listen: error: services "temporal" not found');
      // Retried about once a second within the budget.
      expect(argvLines().length).toBeGreaterThanOrEqual(2);
    } finally {
      delete process.env.FAKE_MODE;
      await pf.stop();
    }
  });

  it("names a missing kubectl", async () => {
    const pf = new steps.PortForward({ kubectl: path.join(tmp, "no-kubectl"), kubeconfig, namespace: "ns", service: "temporal", port: 7233, note: () => undefined, readyMs: 0 });
    await expect(pf.start()).rejects.toThrow(/kubectl port-forward to service\/temporal in ns did not start: spawn .*no-kubectl ENOENT/);
  });
});

describe("parsePortForward", () => {
  it.each([
    ["not json", /COHORT_TEMPORAL_PORT_FORWARD is not JSON/],
    ['{"service":"temporal","port":7233}', /COHORT_TEMPORAL_PORT_FORWARD\.namespace must be a namespace name \(got undefined\)/],
    ['{"namespace":"ns","service":"Temporal","port":7233}', /COHORT_TEMPORAL_PORT_FORWARD\.service must be a Service name \(got "Temporal"\)/],
    ['{"namespace":"ns","service":"temporal","port":70000}', /COHORT_TEMPORAL_PORT_FORWARD\.port must be a port 1-65535 \(got 70000\)/],
  ])("refuses %s naming the field", (text, message) => {
    expect(() => steps.parsePortForward(text)).toThrow(message);
  });
});

describe("the workflow steps through a port-forward (components/gke/steps.cjs)", () => {
  it("worker-guard runs open-runs against the forwarded address while kubectl listens, and leaves no kubectl behind", async () => {
    fs.rmSync(argvLog, { force: true });
    // A stand-in runtime bundle: `open-runs` checks that its --temporal-address answers (through the forward to the echo server).
    const bundle = path.join(tmp, "bundle.cjs");
    const seen = path.join(tmp, "seen.json");
    fs.writeFileSync(
      bundle,
      `const net = require("node:net"), fs = require("node:fs");
const a = process.argv.slice(2); const address = a[a.indexOf("--temporal-address") + 1];
const [host, port] = address.split(":");
const c = net.connect(Number(port), host, () => { c.write("ping"); });
c.on("data", (d) => { fs.writeFileSync(${JSON.stringify(seen)}, JSON.stringify({ address, echoed: String(d) })); c.end(); process.exit(0); });
c.on("error", (e) => { process.stderr.write("cohort: unreachable " + e.message + "\\n"); process.exit(1); });
`,
    );
    const sha = createHash("sha256").update(fs.readFileSync(kubectl)).digest("hex");
    const r = await runStep([path.join(ROOT, "components", "gke", "steps.cjs"), "worker-guard"], {
      PATH: process.env.PATH ?? "",
      FAKE_TARGET_PORT: String(echoPort),
      COHORT_BUNDLE: bundle,
      COHORT_TASK_QUEUE: "cohort-lab-gke-runs",
      COHORT_TEMPORAL_PORT_FORWARD: JSON.stringify({ namespace: "cohort-lab-system", service: "temporal", port: 7233 }),
      COHORT_KUBECONFIG: "apiVersion: v1\nkind: Config\n",
      COHORT_KUBECTL_BIN: kubectl,
      COHORT_KUBECTL_SHA256: sha,
      COHORT_KUBECTL_URL: "",
    });
    expect(r.stderr).toContain("worker guard: no run open on task queue cohort-lab-gke-runs");
    expect(r.status).toBe(0);
    const got = JSON.parse(fs.readFileSync(seen, "utf8")) as { address: string; echoed: string };
    expect(got.echoed).toBe("ping");
    expect(got.address).toMatch(/^127\.0\.0\.1:\d+$/);
    const lines = argvLines();
    expect(lines).toHaveLength(1);
    // The kubeconfig the step wrote for kubectl is removed with the step.
    expect(fs.existsSync(lines[0]![1]!)).toBe(false);
    const left = spawnSync("pgrep", ["-f", kubectl], { encoding: "utf8" }).stdout.trim();
    expect(left).toBe("");
  });

  it("a SIGTERM to the step while kubectl has not listened yet: the step fails naming the signal, no kubectl left, the runtime never started", async () => {
    fs.rmSync(argvLog, { force: true });
    const sha = createHash("sha256").update(fs.readFileSync(kubectl)).digest("hex");
    const marker = path.join(tmp, "bundle-ran");
    const bundle = path.join(tmp, "bundle-marker.cjs");
    fs.writeFileSync(bundle, `require("node:fs").writeFileSync(${JSON.stringify(marker)}, "ran");\n`);
    const child = spawn(process.execPath, [path.join(ROOT, "components", "gke", "steps.cjs"), "worker-guard"], {
      env: {
        PATH: process.env.PATH ?? "",
        FAKE_MODE: "hang",
        COHORT_BUNDLE: bundle,
        COHORT_TASK_QUEUE: "q",
        COHORT_TEMPORAL_PORT_FORWARD: JSON.stringify({ namespace: "ns", service: "temporal", port: 7233 }),
        COHORT_KUBECONFIG: "apiVersion: v1\nkind: Config\n",
        COHORT_KUBECTL_BIN: kubectl,
        COHORT_KUBECTL_SHA256: sha,
        COHORT_KUBECTL_URL: "",
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const closed = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    for (let i = 0; i < 100 && argvLines().length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(argvLines()).toHaveLength(1);
    child.kill("SIGTERM");
    expect(await closed).toBe(1);
    expect(stderr).toContain("stopped by SIGTERM before the port-forward to service/temporal in ns listened");
    expect(fs.existsSync(marker)).toBe(false);
    expect(spawnSync("pgrep", ["-f", kubectl], { encoding: "utf8" }).stdout.trim()).toBe("");
  });

  it("refuses a malformed COHORT_TEMPORAL_PORT_FORWARD before anything runs", () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, "components", "gke", "steps.cjs"), "worker-guard"], {
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "", COHORT_BUNDLE: "/nonexistent", COHORT_TASK_QUEUE: "q", COHORT_TEMPORAL_PORT_FORWARD: '{"namespace":"ns"}' },
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("COHORT_TEMPORAL_PORT_FORWARD.service must be a Service name (got undefined)");
  });
});

/**
 * components/kind/steps.cjs, the host-side steps of the local profile, run for real (Node child processes) against
 * stand-in `docker`, `kind` and `kubectl` executables that keep their state in files and answer the way the real
 * tools do for the calls the script makes (`kind get clusters` one name per line, `kind delete cluster` exit 0 for
 * an unknown name — kind#2182 —, `kubectl get nodes -o json` a NodeList). The stand-ins are pinned by their own
 * SHA-256, which the script checks before every use exactly as it checks the real binaries.
 *
 * Covers the KindCluster rules of docs/local.md "What `pulumi up` builds": exact name match, adopt only what this
 * stack provably created, refuse otherwise; the host port checked before kind runs; idempotent delete after out-of-band deletion, refusing to delete
 * a foreign cluster, SHA-256 enforcement, the webhook probe's retries and deadline, and the run-summary step.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { OWNER_LABELS } from "../../components/kind/kindConfig.js";

const SCRIPT = path.join(__dirname, "..", "..", "components", "kind", "steps.cjs");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-steps-"));
const bin = path.join(tmp, "bin");
const state = path.join(tmp, "state");
fs.mkdirSync(bin);

/** The stand-in kind: clusters are files `<state>/clusters/<name>.json` holding `{ labels }`. */
const FAKE_KIND = `#!/usr/bin/env node
const fs = require("node:fs"), path = require("node:path");
const dir = path.join(process.env.FAKE_STATE, "clusters");
fs.mkdirSync(dir, { recursive: true });
fs.appendFileSync(path.join(process.env.FAKE_STATE, "calls.log"), "kind " + process.argv.slice(2).join(" ") + "\\n");
const a = process.argv.slice(2);
const name = a[a.indexOf("--name") + 1];
const file = (n) => path.join(dir, n + ".json");
if (a[0] === "get" && a[1] === "clusters") {
  const names = fs.readdirSync(dir).map((f) => f.replace(/\\.json$/, "")).sort();
  if (names.length === 0) process.stderr.write("No kind clusters found.\\n"); else process.stdout.write(names.join("\\n") + "\\n");
} else if (a[0] === "get" && a[1] === "kubeconfig") {
  if (!fs.existsSync(file(name))) { process.stderr.write("ERROR: could not locate any control plane nodes for cluster named '" + name + "'.\\n"); process.exit(1); }
  process.stdout.write("apiVersion: v1\\nkind: Config\\ncurrent-context: kind-" + name + "\\n# cluster " + name + "\\n");
} else if (a[0] === "get" && a[1] === "nodes") {
  if (fs.existsSync(file(name))) process.stdout.write(name + "-control-plane\\n");
} else if (a[0] === "create" && a[1] === "cluster") {
  if (process.env.FAKE_KIND_CREATE_FAIL === "1") { fs.writeFileSync(file(name), JSON.stringify({ labels: {} })); process.stderr.write("ERROR: failed to create cluster: boom\\n"); process.exit(1); }
  const config = fs.readFileSync(a[a.indexOf("--config") + 1], "utf8");
  fs.writeFileSync(path.join(process.env.FAKE_STATE, "last-config.yaml"), config);
  const labels = {};
  for (const m of config.matchAll(/^\\s+(cohort-lab\\.dev\\/[a-z-]+): (\\S+)$/gm)) labels[m[1]] = m[2];
  fs.writeFileSync(file(name), JSON.stringify({ labels }));
  process.stderr.write("Creating cluster \\"" + name + "\\" ...\\n");
} else if (a[0] === "delete" && a[1] === "cluster") {
  process.stderr.write("Deleting cluster \\"" + name + "\\" ...\\n");
  fs.rmSync(file(name), { force: true });
} else { process.stderr.write("fake kind: unsupported " + a.join(" ") + "\\n"); process.exit(2); }
`;

/** The stand-in kubectl: nodes from the cluster file named in the kubeconfig; dry-run creates; jobs and logs. */
const FAKE_KUBECTL = `#!/usr/bin/env node
const fs = require("node:fs"), path = require("node:path");
const a = process.argv.slice(2);
const kc = fs.readFileSync(a[a.indexOf("--kubeconfig") + 1], "utf8");
fs.appendFileSync(path.join(process.env.FAKE_STATE, "calls.log"), "kubectl " + a.filter((x, i) => a[i - 1] !== "--kubeconfig").join(" ") + "\\n");
if (a.includes("nodes")) {
  const name = /# cluster (\\S+)/.exec(kc)[1];
  const f = path.join(process.env.FAKE_STATE, "clusters", name + ".json");
  if (process.env.FAKE_API_DOWN === "1" || !fs.existsSync(f)) { process.stderr.write("The connection to the server 127.0.0.1:6443 was refused\\n"); process.exit(1); }
  const { labels } = JSON.parse(fs.readFileSync(f, "utf8"));
  const alloc = JSON.parse(process.env.FAKE_ALLOCATABLE ?? '{"cpu":"8","memory":"33554432Ki","pods":"110"}');
  const items = [name + "-control-plane", name + "-worker", name + "-worker2"].map((n) => ({ metadata: { name: n, labels: { ...labels, "kubernetes.io/hostname": n } }, status: { allocatable: alloc } }));
  process.stdout.write(JSON.stringify({ apiVersion: "v1", kind: "NodeList", items }));
} else if (a.includes("--dry-run=server")) {
  const counter = path.join(process.env.FAKE_STATE, "probe-count");
  const n = fs.existsSync(counter) ? Number(fs.readFileSync(counter, "utf8")) + 1 : 1;
  fs.writeFileSync(counter, String(n));
  const obj = JSON.parse(fs.readFileSync(0, "utf8"));
  if (n < Number(process.env.FAKE_PROBE_READY_AT ?? "1")) { process.stderr.write('Error from server (InternalError): failed calling webhook "mpod.kb.io": connection refused\\n'); process.exit(1); }
  if (obj.kind === "Pod") obj.spec.schedulingGates = [{ name: "kueue.x-k8s.io/admission" }];
  process.stdout.write(JSON.stringify(obj));
} else if (a.includes("job")) {
  process.stdout.write(JSON.stringify({ status: { conditions: [{ type: process.env.FAKE_JOB_STATE ?? "Complete", status: "True" }] } }));
} else if (a.includes("logs")) {
  process.stdout.write(process.env.FAKE_JOB_LOG ?? "");
} else { process.stderr.write("fake kubectl: unsupported " + a.join(" ") + "\\n"); process.exit(2); }
`;

const FAKE_DOCKER = `#!/bin/sh
if [ "$FAKE_DOCKER_DOWN" = 1 ]; then echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1; fi
echo 27.3.1
`;

function install(name: string, text: string): string {
  const file = path.join(bin, name);
  fs.writeFileSync(file, text, { mode: 0o755 });
  return createHash("sha256").update(text).digest("hex");
}
const kindSha = install("kind", FAKE_KIND);
const kubectlSha = install("kubectl", FAKE_KUBECTL);
install("docker", FAKE_DOCKER);

const stackLabel = "a".repeat(63);
const configLabel = "b".repeat(63);
const kindConfig = [
  "kind: Cluster",
  "apiVersion: kind.x-k8s.io/v1alpha4",
  "nodes:",
  "  - role: control-plane",
  "    labels:",
  `      ${OWNER_LABELS.stack}: ${stackLabel}`,
  `      ${OWNER_LABELS.config}: ${configLabel}`,
  "",
].join("\n");

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: `${bin}:${process.env.PATH}`,
    HOME: tmp,
    FAKE_STATE: state,
    COHORT_KIND_BIN: path.join(bin, "kind"),
    COHORT_KIND_URL: "http://127.0.0.1:9/kind-linux-amd64",
    COHORT_KIND_SHA256: kindSha,
    COHORT_KUBECTL_BIN: path.join(bin, "kubectl"),
    COHORT_KUBECTL_URL: "http://127.0.0.1:9/kubectl",
    COHORT_KUBECTL_SHA256: kubectlSha,
    COHORT_CLUSTER_NAME: "kind",
    COHORT_KIND_CONFIG: kindConfig,
    COHORT_OWNER_LABELS: JSON.stringify(OWNER_LABELS),
    COHORT_STACK_LABEL: stackLabel,
    COHORT_CONFIG_LABEL: configLabel,
    COHORT_ARTIFACTS_DIR: path.join(tmp, "artifacts"),
    COHORT_TEMPORAL_PORT: "0",
    COHORT_KIND_WAIT: "5m",
    ...extra,
  };
}

function step(name: string, extra: Record<string, string> = {}): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [SCRIPT, name], { env: env(extra), encoding: "utf8", timeout: 60_000 });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function cluster(name: string, labels: Record<string, string>): void {
  fs.mkdirSync(path.join(state, "clusters"), { recursive: true });
  fs.writeFileSync(path.join(state, "clusters", `${name}.json`), JSON.stringify({ labels }));
}
const clusters = () => (fs.existsSync(path.join(state, "clusters")) ? fs.readdirSync(path.join(state, "clusters")).sort() : []);
const calls = () => (fs.existsSync(path.join(state, "calls.log")) ? fs.readFileSync(path.join(state, "calls.log"), "utf8").trim().split("\n") : []);
const ours = { [OWNER_LABELS.stack]: stackLabel, [OWNER_LABELS.config]: configLabel };

beforeEach(() => {
  fs.rmSync(state, { recursive: true, force: true });
  fs.mkdirSync(state);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("create", () => {
  it("creates the cluster from the rendered config, creates the artifacts directory, prints only the kubeconfig on stdout", () => {
    const r = step("create");
    expect([r.status, r.stderr.includes("kind create cluster --name kind")]).toEqual([0, true]);
    expect(r.stdout).toBe("apiVersion: v1\nkind: Config\ncurrent-context: kind-kind\n# cluster kind\n");
    expect(fs.readFileSync(path.join(state, "last-config.yaml"), "utf8")).toBe(kindConfig);
    expect(fs.statSync(path.join(tmp, "artifacts")).isDirectory()).toBe(true);
    expect(
      calls()
        .filter((c) => c.startsWith("kind create"))
        .map((c) => c.replace(/--config \S+/, "--config <file>")),
    ).toEqual(["kind create cluster --name kind --config <file> --wait 5m"]);
  });

  it("compares names exactly: kind1 and kindabc do not make `kind` exist (field-notes C1)", () => {
    cluster("kind1", {});
    cluster("kindabc", {});
    const r = step("create");
    expect(r.status).toBe(0);
    expect(clusters()).toEqual(["kind.json", "kind1.json", "kindabc.json"]);
  });

  it("adopts a cluster of that name only when every node carries this stack's owner labels", () => {
    cluster("kind", ours);
    const r = step("create");
    expect(r.status).toBe(0);
    expect(r.stderr).toContain("carries this stack's owner labels: adopting it");
    expect(calls().some((c) => c.startsWith("kind create"))).toBe(false);
    expect(r.stdout).toContain("# cluster kind");
  });

  it("refuses a cluster of that name that this stack did not create, naming the conflict", () => {
    cluster("kind", { [OWNER_LABELS.stack]: stackLabel, [OWNER_LABELS.config]: "c".repeat(63) });
    const r = step("create");
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split("\n").at(-1)).toBe(
      `[cohort-lab local] a kind cluster named "kind" already exists and was not created by this stack with this configuration (node kind-control-plane has ${OWNER_LABELS.config}="${"c".repeat(63)}", expected "${configLabel}"); ` +
        "cohort-lab never replaces it. Delete it yourself (kind delete cluster --name kind) or choose another name: pulumi config set --path local.clusterName <name>",
    );
    expect(calls().some((c) => c.startsWith("kind create") || c.startsWith("kind delete"))).toBe(false);
  });

  it("refuses a same-named cluster whose owner cannot be read", () => {
    cluster("kind", ours);
    const r = step("create", { FAKE_API_DOWN: "1" });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      'a kind cluster named "kind" already exists and its owner cannot be checked (kubectl get nodes failed: The connection to the server 127.0.0.1:6443 was refused)',
    );
  });

  it("checks the Temporal host port before kind runs (field-notes C2)", async () => {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const r = step("create", { COHORT_TEMPORAL_PORT: String(port) });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`port ${port} on 127.0.0.1 is not free (EADDRINUSE); the Temporal NodePort is mapped there.`);
      expect(calls().some((c) => c.startsWith("kind create"))).toBe(false);
    } finally {
      server.close();
    }
  });

  it("leaves no half-created nodes when kind create fails", () => {
    const r = step("create", { FAKE_KIND_CREATE_FAIL: "1" });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("removing the nodes kind left behind: kind-control-plane");
    expect(clusters()).toEqual([]);
  });

  it("refuses when Docker is not reachable", () => {
    const r = step("create", { FAKE_DOCKER_DOWN: "1" });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("Docker is not reachable (docker info exited 1: Cannot connect to the Docker daemon");
  });

  it("refuses a kind binary whose SHA-256 is not the pinned one (and cannot download the pinned one)", () => {
    const r = step("create", { COHORT_KIND_SHA256: "0".repeat(64) });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`kind: ${path.join(bin, "kind")} has SHA-256 ${kindSha}, pinned ${"0".repeat(64)}; downloading a fresh copy`);
    expect(r.stderr).toContain("kind: download of http://127.0.0.1:9/kind-linux-amd64 failed");
    expect(calls()).toEqual([]);
  });
});

describe("delete", () => {
  it("is idempotent: a cluster deleted out of band is reported and skipped", () => {
    const r = step("delete");
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('kind cluster "kind" is not there (deleted out of band?); nothing to delete');
    expect(calls().some((c) => c.startsWith("kind delete"))).toBe(false);
  });

  it("deletes this stack's cluster", () => {
    cluster("kind", ours);
    cluster("kind1", {});
    const r = step("delete");
    expect(r.status).toBe(0);
    expect(clusters()).toEqual(["kind1.json"]);
  });

  it("refuses to delete a cluster it cannot prove it created", () => {
    cluster("kind", {});
    const r = step("delete");
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`refusing to delete kind cluster "kind": node kind-control-plane has ${OWNER_LABELS.stack}=null`);
    expect(clusters()).toEqual(["kind.json"]);
  });
});

describe("webhook-probe", () => {
  const probes = JSON.stringify([
    { name: "validating", manifest: { apiVersion: "kueue.x-k8s.io/v1beta2", kind: "ResourceFlavor", metadata: { name: "p" }, spec: {} } },
    {
      name: "pod mutating",
      manifest: { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "default" }, spec: { containers: [] } },
      expectSchedulingGate: "kueue.x-k8s.io/admission",
    },
  ]);

  it("retries until the API server can call the webhooks", () => {
    const r = step("webhook-probe", { COHORT_KUBECONFIG: "# cluster kind\n", COHORT_PROBES: probes, COHORT_PROBE_TIMEOUT_MS: "30000", FAKE_PROBE_READY_AT: "3" });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain("webhook probe validating: passed after 3 attempt(s)");
    expect(r.stderr).toContain("webhook probe pod mutating: passed after 1 attempt(s)");
  });

  it("fails at the deadline with the last error", () => {
    const r = step("webhook-probe", { COHORT_KUBECONFIG: "# cluster kind\n", COHORT_PROBES: probes, COHORT_PROBE_TIMEOUT_MS: "1200", FAKE_PROBE_READY_AT: "1000" });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /webhook probe validating did not pass after \d+ attempts: Error from server \(InternalError\): failed calling webhook "mpod.kb.io": connection refused/,
    );
  });
});

describe("capacity-check", () => {
  const capacity = JSON.stringify({
    nodes: ["kind-worker", "kind-worker2"],
    reserved: { cpuMilli: 1250, memoryBytes: 1136 * 2 ** 20 },
    quota: { cpuMilli: 14750, memoryBytes: 64400 * 2 ** 20 },
  });

  it("passes when the nodes' real allocatable holds the quota (kubelet's units: cores, Ki)", () => {
    cluster("kind", ours);
    const r = step("capacity-check", { COHORT_KUBECONFIG: "# cluster kind\n", COHORT_CAPACITY: capacity });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain("node kind-worker: 8000m CPU, 34359738368 bytes memory allocatable");
    expect(r.stderr).toContain(`capacity: cpu 14750m ≥ quota 14750m, memory ${64400 * 2 ** 20} ≥ quota ${64400 * 2 ** 20} bytes`);
  });

  it("fails before the ClusterQueue when the nodes hold less than the program assumed, with both figures", () => {
    cluster("kind", ours);
    const r = step("capacity-check", {
      COHORT_KUBECONFIG: "# cluster kind\n",
      COHORT_CAPACITY: capacity,
      FAKE_ALLOCATABLE: JSON.stringify({ cpu: "7800m", memory: "33554432Ki", pods: "110" }),
    });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split("\n").at(-1)).toBe(
      "[cohort-lab local] the nodes hold less than the ClusterQueue quota derived from this machine (cpu: 15600m allocatable − 1250m reserved = 14350m < quota 14750m); " +
        "lower it with pulumi config set --path local.queue.cpu|memory <value> and run pulumi up again",
    );
  });
});

describe("run-summary", () => {
  const runId = "society-20261130T080000Z-a1b2c3";
  const summary = {
    runId,
    outcome: "succeeded",
    size: 9,
    readyCount: 9,
    timeToReadyMs: 1234,
    ledgerPath: `/var/lib/cohort-lab-artifacts/${runId}`,
    reportPath: `/var/lib/cohort-lab-artifacts/${runId}/report.html`,
    firstFailure: null,
  };
  const base = {
    COHORT_KUBECONFIG: "# cluster kind\n",
    COHORT_NAMESPACE: "society-0123456789",
    COHORT_JOB: "cohort-run",
    COHORT_CONTAINER: "runtime",
    COHORT_ARTIFACTS_NODE_PATH: "/var/lib/cohort-lab-artifacts",
    COHORT_WAIT_MS: "10000",
  };

  it("prints the runtime's summary with the ledger path on the host, after checking completion.json is there", () => {
    const host = path.join(tmp, "artifacts");
    fs.mkdirSync(path.join(host, runId), { recursive: true });
    fs.writeFileSync(path.join(host, runId, "completion.json"), "{}");
    const r = step("run-summary", { ...base, COHORT_ARTIFACTS_DIR: host, FAKE_JOB_LOG: `started 9/9 ready 9/9\n${JSON.stringify(summary)}\n` });
    expect([r.status, r.stderr]).toEqual([0, ""]);
    expect(JSON.parse(r.stdout)).toEqual({ ...summary, ledgerPath: path.join(host, runId), reportPath: path.join(host, runId, "report.html") });
  });

  it("keeps reportPath null when the runtime wrote no report, or printed an older summary without the field", () => {
    const host = path.join(tmp, "artifacts");
    fs.mkdirSync(path.join(host, runId), { recursive: true });
    fs.writeFileSync(path.join(host, runId, "completion.json"), "{}");
    const { reportPath: _dropped, ...older } = summary;
    for (const printed of [{ ...summary, reportPath: null }, older]) {
      const r = step("run-summary", { ...base, COHORT_ARTIFACTS_DIR: host, FAKE_JOB_LOG: `${JSON.stringify(printed)}\n` });
      expect([r.status, r.stderr]).toEqual([0, ""]);
      expect(JSON.parse(r.stdout)).toEqual({ ...older, ledgerPath: path.join(host, runId), reportPath: null });
    }
  });

  it("fails with the runtime's last line when the Job failed", () => {
    const r = step("run-summary", {
      ...base,
      COHORT_ARTIFACTS_DIR: tmp,
      FAKE_JOB_STATE: "Failed",
      FAKE_JOB_LOG: "started 3/9\nmember agent-2 failed: exited with code 1 before it was ready\n",
    });
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe("[cohort-lab local] the cohort runtime Job society-0123456789/cohort-run failed: member agent-2 failed: exited with code 1 before it was ready");
  });

  it("run-forget removes the ledger only when keepLedgers is false, and only a run directory under the artifact root", () => {
    const host = path.join(tmp, "artifacts");
    const dir = path.join(host, runId);
    fs.mkdirSync(dir, { recursive: true });
    const stored = JSON.stringify({ ...summary, ledgerPath: dir });
    expect(step("run-forget", { COHORT_ARTIFACTS_DIR: host, COHORT_KEEP_LEDGERS: "true", PULUMI_COMMAND_STDOUT: stored }).status).toBe(0);
    expect(fs.existsSync(dir)).toBe(true);
    const outside = step("run-forget", { COHORT_ARTIFACTS_DIR: host, COHORT_KEEP_LEDGERS: "false", PULUMI_COMMAND_STDOUT: JSON.stringify({ ...summary, ledgerPath: tmp }) });
    expect(outside.status).toBe(1);
    expect(outside.stderr).toContain(`refusing to remove ${JSON.stringify(tmp)}: not a run directory directly under ${host}`);
    const r = step("run-forget", { COHORT_ARTIFACTS_DIR: host, COHORT_KEEP_LEDGERS: "false", PULUMI_COMMAND_STDOUT: stored });
    expect([r.status, fs.existsSync(dir)]).toEqual([0, false]);
    expect(step("run-forget", { COHORT_ARTIFACTS_DIR: host, COHORT_KEEP_LEDGERS: "false", PULUMI_COMMAND_STDOUT: stored }).status).toBe(0);
  });

  it("refuses a ledger path that climbs out of the mounted directory with `..`; accepts a root with a trailing slash", () => {
    const escaped = path.join(tmp, "escaped");
    fs.mkdirSync(escaped, { recursive: true });
    fs.writeFileSync(path.join(escaped, "completion.json"), "{}");
    const host = path.join(tmp, "artifacts", "deep");
    const climbing = `/var/lib/cohort-lab-artifacts/${path.relative(host, escaped)}`;
    const r = step("run-summary", { ...base, COHORT_ARTIFACTS_DIR: host, FAKE_JOB_LOG: `${JSON.stringify({ ...summary, ledgerPath: climbing })}\n` });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`the runtime wrote its ledger to ${climbing}, outside the mounted artifacts directory /var/lib/cohort-lab-artifacts`);
    const artifacts = path.join(tmp, "artifacts");
    fs.mkdirSync(path.join(artifacts, runId), { recursive: true });
    fs.writeFileSync(path.join(artifacts, runId, "completion.json"), "{}");
    const slash = step("run-summary", {
      ...base,
      COHORT_ARTIFACTS_NODE_PATH: "/var/lib/cohort-lab-artifacts/",
      COHORT_ARTIFACTS_DIR: artifacts,
      FAKE_JOB_LOG: `${JSON.stringify(summary)}\n`,
    });
    expect([slash.status, slash.stderr]).toEqual([0, ""]);
    expect(JSON.parse(slash.stdout).ledgerPath).toBe(path.join(artifacts, runId));
  });

  it("fails when the ledger did not reach the host", () => {
    const r = step("run-summary", { ...base, COHORT_ARTIFACTS_DIR: path.join(tmp, "nowhere"), FAKE_JOB_LOG: `${JSON.stringify(summary)}\n` });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("has no completion.json on the host: is the artifacts directory mounted into the kind nodes?");
  });
});

#!/usr/bin/env node
// @ts-check
/**
 * Host-side steps of the `local` profile, run by `@pulumi/command` `local.Command` resources
 * (components/kind/KindCluster.ts, components/k8s/Kueue.ts, components/run/kubernetesJob.ts) with the Node binary that runs
 * the Pulumi program. Plain CommonJS with Node built-ins only, so it runs without a build step.
 *
 * Every input arrives in the environment (never in the command line, so nothing long or secret is in it);
 * progress goes to stderr; stdout carries only the step's result. Steps:
 *
 * - `create`: preflight, then `kind create cluster` (or adoption of a cluster this stack provably created);
 *   prints the kubeconfig on stdout (a secret output of the Command).
 *     1. kind and kubectl: the toolchain's builds, checked against their stamps' SHA-256 (COHORT_<TOOL>_URL
 *        empty), or downloaded into the tool cache on first use from the pinned URL and checked against the
 *        pinned SHA-256 before EVERY use (a mismatching cached file is replaced by a fresh, verified copy);
 *     2. Docker reachable (`docker info`);
 *     3. exact-name check: `kind get clusters` compared line by line (never a substring match). A cluster of
 *        that name is adopted only when every node carries this stack's two owner labels (stack and kind
 *        config hashes, components/kind/kindConfig.ts); otherwise the step fails naming the conflict;
 *     4. the artifacts directory: created if missing, must be a directory;
 *     5. the Temporal host port: a bind test on 127.0.0.1;
 *     6. `kind create cluster --name N --config <rendered> --wait <wait>`; on failure, nodes left behind are
 *        deleted (`kind get nodes --name N`) so nothing is half-created.
 * - `delete`: idempotent. `kind delete cluster` exits 0 for an unknown name (kind#2182), so presence is checked
 *   first and reported; a present cluster is deleted only when its nodes carry this stack's owner labels.
 * - `webhook-probe`: server-side dry-run creates (kubectl) until each probe passes or the deadline ends: proves
 *   the API server can call an admission/conversion webhook, not merely that its pod is Ready.
 * - `capacity-check`: the nodes' real `status.allocatable` must hold what the quota was derived from (the program
 *   assumed this machine's CPUs and memory per kind node); otherwise it fails before the ClusterQueue exists.
 * - `run-forget`: the delete step of the summary; removes the run's ledger when keepLedgers is false.
 * - `run-summary`: waits for the runtime Job to finish, then prints the runtime's one-line JSON summary (from
 *   the Job's log) with `ledgerPath` and `reportPath` mapped from the node path to the host path, after checking that the
 *   ledger's `completion.json` is on the host. The wait and the summary line are components/run/job-steps.cjs
 *   `jobSummary`, the code the `gke` profile's step runs too.
 * - `run-progress`: the progress follower of the runtime Job: follows the runtime container's log
 *   (`kubectl logs -f`) while the Job runs and writes each of the runtime's progress lines (not the JSON summary,
 *   not member output) to fd 3, the command provider's status pipe; exits 0 when the Job finished. Never fails:
 *   anything in its way is one note on stderr and exit 0.
 *   (components/run/job-steps.cjs `followJobProgress`, shared with `gke`.)
 * - `worker-guard`, `run-identity`, `run-submit`, `run-keep`: the cluster workflow execution (`local.runAs: workflow`,
 *   components/run/workflow-steps.cjs): the rollout guard of the run worker, the run identity, and `cohort submit`
 *   with the summary's ledger mapped to the host path as `run-summary` maps it.
 *
 * Environment (all steps): COHORT_KIND_BIN/URL/SHA256, COHORT_KUBECTL_BIN/URL/SHA256 (pinned in common/pins.ts).
 * See each step for the rest. Exit status 0 on success, 1 on a refusal or failure (message on stderr), 2 on usage.
 */
"use strict";

const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
// What every cluster profile's host steps share (the pinned tools, the Job's summary line, the progress follower).
const shared = require("../run/job-steps.cjs");
const { StepError, log, env, run, tail, withKubeconfig, sleep, pinnedTool, jobSummary, followJobProgress, isProgressLine, progressFilter, runStepProgram } = shared;
// The cluster workflow execution's steps (components/run/clusterWorkflow.ts), shared with every cluster profile.
const workflowSteps = require("../run/workflow-steps.cjs");

const PREFIX = "[cohort-lab local]";
shared.setLogPrefix(PREFIX);

/**
 * kind and kubectl: built by the toolchain when `COHORT_<TOOL>_URL` is empty (verified against the stamp's
 * SHA-256), otherwise the pinned official download.
 *
 * @returns {Promise<{ kind: string, kubectl: string }>}
 */
async function tools() {
  return { kind: await pinnedTool("kind", "COHORT_KIND"), kubectl: await pinnedTool("kubectl", "COHORT_KUBECTL") };
}

/**
 * A node image built here (scripts/local/node-image.ts): present in Docker with the image ID its stamp records,
 * loaded from the stamp's archive when the Docker data root lost it. No-op for a digest-pinned upstream image.
 */
function ensureNodeImage() {
  const image = process.env.COHORT_NODE_IMAGE ?? "";
  const id = process.env.COHORT_NODE_IMAGE_ID ?? "";
  if (image === "" || id === "") return;
  const inspect = () => run("docker", ["image", "inspect", "--format", "{{.Id}}", image]);
  let r = inspect();
  if (r.status !== 0) {
    const archive = env("COHORT_NODE_IMAGE_ARCHIVE");
    log(`node image ${image} is not in Docker: docker load -i ${archive}`);
    const loaded = run("docker", ["load", "-i", archive]);
    if (loaded.status !== 0) throw new StepError(`docker load -i ${archive} failed: ${tail(loaded.stderr, 5)}; rebuild it with \`npm run toolchain -- local-images\``);
    r = inspect();
  }
  const found = r.stdout.trim();
  if (r.status !== 0 || found !== id) {
    throw new StepError(`node image ${image} has image ID ${found || "(none)"}, but its toolchain stamp records ${id}; rebuild it with \`npm run toolchain -- local-images\``);
  }
}

function checkDocker() {
  const r = run("docker", ["info", "--format", "{{.ServerVersion}}"]);
  if (r.status !== 0) {
    throw new StepError(`Docker is not reachable (docker info exited ${r.status}: ${tail(r.stderr, 3)}); kind needs a running Docker engine`);
  }
  log(`docker engine ${r.stdout.trim()}`);
}

/**
 * Cluster names from `kind get clusters`, one per line; compared exactly (a `grep` would let `kind1` match `kind`: antrea-io/antrea#6838).
 *
 * @param {string} kind
 * @returns {string[]}
 */
function kindClusters(kind) {
  const r = run(kind, ["get", "clusters"]);
  if (r.status !== 0) throw new StepError(`kind get clusters exited ${r.status}: ${tail(r.stderr, 5)}`);
  return r.stdout
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
}

/**
 * Reads the owner labels of every node of cluster `name`.
 *
 * @param {string} kind
 * @param {string} kubectl
 * @param {string} name
 * @returns {{ ok: true, nodes: { name: string, labels: Record<string, string> }[] } | { ok: false, reason: string }}
 */
function nodeLabels(kind, kubectl, name) {
  const kc = run(kind, ["get", "kubeconfig", "--name", name]);
  if (kc.status !== 0) return { ok: false, reason: `kind get kubeconfig failed: ${tail(kc.stderr, 3)}` };
  return withKubeconfig(kc.stdout, (file) => {
    const r = run(kubectl, ["--kubeconfig", file, "get", "nodes", "-o", "json", "--request-timeout=20s"]);
    if (r.status !== 0) return { ok: false, reason: `kubectl get nodes failed: ${tail(r.stderr, 3)}` };
    const list = JSON.parse(r.stdout);
    return { ok: true, nodes: list.items.map((/** @type {any} */ n) => ({ name: n.metadata.name, labels: n.metadata.labels ?? {} })) };
  });
}

/**
 * Whether every node of `name` carries the expected owner labels.
 *
 * @param {{ name: string, labels: Record<string, string> }[]} nodes
 * @returns {string | undefined} undefined when owned, otherwise the first mismatch
 */
function ownershipMismatch(nodes) {
  const keys = JSON.parse(env("COHORT_OWNER_LABELS"));
  const expected = { [keys.stack]: env("COHORT_STACK_LABEL"), [keys.config]: env("COHORT_CONFIG_LABEL") };
  if (nodes.length === 0) return "it has no nodes";
  for (const node of nodes) {
    for (const [key, value] of Object.entries(expected)) {
      if (node.labels[key] !== value) return `node ${node.name} has ${key}=${JSON.stringify(node.labels[key] ?? null)}, expected ${JSON.stringify(value)}`;
    }
  }
  return undefined;
}

/**
 * @param {number} port
 * @returns {Promise<void>}
 */
function checkPortFree(port) {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", (/** @type {NodeJS.ErrnoException} */ err) => {
      reject(
        new StepError(
          `port ${port} on 127.0.0.1 is not free (${err.code ?? err.message}); the Temporal NodePort is mapped there. ` +
            "Stop what holds it or choose another port: pulumi config set --path local.temporalPort <port>",
        ),
      );
    });
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => server.close(() => resolve()));
  });
}

async function create() {
  const { kind, kubectl } = await tools();
  const name = env("COHORT_CLUSTER_NAME");
  checkDocker();
  ensureNodeImage();
  if (kindClusters(kind).includes(name)) {
    const labels = nodeLabels(kind, kubectl, name);
    if (!labels.ok) {
      throw new StepError(
        `a kind cluster named "${name}" already exists and its owner cannot be checked (${labels.reason}); cohort-lab never replaces a cluster it cannot prove it created. Delete it yourself (kind delete cluster --name ${name}) or choose another name: pulumi config set --path local.clusterName <name>`,
      );
    }
    const mismatch = ownershipMismatch(labels.nodes);
    if (mismatch !== undefined) {
      throw new StepError(
        `a kind cluster named "${name}" already exists and was not created by this stack with this configuration (${mismatch}); cohort-lab never replaces it. Delete it yourself (kind delete cluster --name ${name}) or choose another name: pulumi config set --path local.clusterName <name>`,
      );
    }
    log(`kind cluster "${name}" exists and carries this stack's owner labels: adopting it`);
  } else {
    const artifacts = env("COHORT_ARTIFACTS_DIR");
    fs.mkdirSync(artifacts, { recursive: true });
    if (!fs.statSync(artifacts).isDirectory()) throw new StepError(`artifacts path ${artifacts} is not a directory`);
    await checkPortFree(Number(env("COHORT_TEMPORAL_PORT")));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-lab-kind-"));
    try {
      const config = path.join(dir, "kind-config.yaml");
      fs.writeFileSync(config, env("COHORT_KIND_CONFIG"), { mode: 0o600 });
      log(`kind create cluster --name ${name} (this takes a few minutes)`);
      const r = run(kind, ["create", "cluster", "--name", name, "--config", config, "--wait", env("COHORT_KIND_WAIT")], { passStderr: true });
      if (r.status !== 0) {
        const left = run(kind, ["get", "nodes", "--name", name]);
        if (left.status === 0 && left.stdout.trim() !== "") {
          log(`removing the nodes kind left behind: ${left.stdout.trim().split("\n").join(", ")}`);
          run(kind, ["delete", "cluster", "--name", name], { passStderr: true });
        }
        throw new StepError(`kind create cluster --name ${name} failed (exit ${r.status}); see the kind output above`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const labels = nodeLabels(kind, kubectl, name);
    const mismatch = labels.ok ? ownershipMismatch(labels.nodes) : labels.reason;
    if (mismatch !== undefined) throw new StepError(`kind cluster "${name}" was created but its owner labels are not right (${mismatch})`);
  }
  const kc = run(kind, ["get", "kubeconfig", "--name", name]);
  if (kc.status !== 0) throw new StepError(`kind get kubeconfig --name ${name} failed: ${tail(kc.stderr, 5)}`);
  process.stdout.write(kc.stdout);
}

async function del() {
  const { kind, kubectl } = await tools();
  const name = env("COHORT_CLUSTER_NAME");
  checkDocker();
  if (!kindClusters(kind).includes(name)) {
    log(`kind cluster "${name}" is not there (deleted out of band?); nothing to delete`);
    removeIdleKindNetwork();
    return;
  }
  const labels = nodeLabels(kind, kubectl, name);
  const mismatch = labels.ok ? ownershipMismatch(labels.nodes) : `its nodes cannot be read: ${labels.reason}`;
  if (mismatch !== undefined) {
    throw new StepError(
      `refusing to delete kind cluster "${name}": ${mismatch}. cohort-lab deletes only a cluster it can prove it created; if it is yours, run kind delete cluster --name ${name} and destroy again`,
    );
  }
  const r = run(kind, ["delete", "cluster", "--name", name], { passStderr: true });
  if (r.status !== 0) throw new StepError(`kind delete cluster --name ${name} failed (exit ${r.status})`);
  log(`kind cluster "${name}" deleted`);
  removeIdleKindNetwork();
}

/**
 * kind creates the Docker network `kind` for its nodes and never removes it (it is shared by every kind
 * cluster). Remove it once no container uses it (running or stopped), so a destroy leaves no network behind;
 * another cluster's nodes keep it in use and it stays.
 */
function removeIdleKindNetwork() {
  if (run("docker", ["network", "inspect", "kind", "--format", "{{.Name}}"]).status !== 0) return; // no such network
  // Every container that uses it, stopped ones included (`network inspect` lists only running ones): a stopped
  // cluster's nodes need the network to start again.
  const users = run("docker", ["ps", "-a", "--filter", "network=kind", "--format", "{{.Names}}"]);
  const names = users.stdout.split("\n").filter((l) => l.trim() !== "");
  if (users.status !== 0 || names.length > 0) {
    log(`docker network kind is still used by ${names.length > 0 ? names.join(", ") : "containers docker ps cannot list"}: kept`);
    return;
  }
  const rm = run("docker", ["network", "rm", "kind"]);
  log(rm.status === 0 ? "docker network kind removed (no container attached)" : `docker network rm kind failed: ${tail(rm.stderr, 2)}`);
}

async function webhookProbe() {
  const { kubectl } = await tools();
  /** @type {{ name: string, manifest: object, expectSchedulingGate?: string }[]} */
  const probes = JSON.parse(env("COHORT_PROBES"));
  const deadline = Date.now() + Number(env("COHORT_PROBE_TIMEOUT_MS"));
  await withKubeconfig(env("COHORT_KUBECONFIG"), async (file) => {
    for (const probe of probes) {
      let attempts = 0;
      /** @type {string} */
      let last;
      for (;;) {
        attempts += 1;
        const r = run(kubectl, ["--kubeconfig", file, "create", "--dry-run=server", "-o", "json", "--request-timeout=10s", "-f", "-"], {
          input: JSON.stringify(probe.manifest),
        });
        if (r.status === 0) {
          const gates = (JSON.parse(r.stdout).spec?.schedulingGates ?? []).map((/** @type {{name: string}} */ g) => g.name);
          if (probe.expectSchedulingGate === undefined || gates.includes(probe.expectSchedulingGate)) break;
          last = `the dry-run object came back without scheduling gate ${probe.expectSchedulingGate} (gates: ${gates.join(", ") || "none"})`;
        } else {
          last = tail(r.stderr, 3);
        }
        if (Date.now() > deadline) {
          throw new StepError(`webhook probe ${probe.name} did not pass after ${attempts} attempts: ${last}`);
        }
        await sleep(500);
      }
      log(`webhook probe ${probe.name}: passed after ${attempts} attempt(s)`);
    }
  });
}

/**
 * `run-summary`: the runtime's summary line from the Job's log (components/run/job-steps.cjs `jobSummary`), with
 * `ledgerPath` and `reportPath` mapped from the node path to the host path, after checking that the ledger's
 * completion.json reached the host through the kind mount.
 *
 * Environment: as `jobSummary`, and COHORT_ARTIFACTS_DIR (host), COHORT_ARTIFACTS_NODE_PATH (in the nodes).
 */
async function runSummary() {
  const { kubectl } = await tools();
  const { summary } = await jobSummary(kubectl);
  process.stdout.write(`${JSON.stringify(hostMountedSummary(summary))}\n`);
}

/**
 * A run summary with `ledgerPath` and `reportPath` mapped from the nodes' path (COHORT_ARTIFACTS_NODE_PATH) to the
 * host's (COHORT_ARTIFACTS_DIR), after checking that the ledger's completion.json reached the host through the kind mount.
 *
 * @param {Record<string, unknown>} summary
 * @returns {Record<string, unknown>}
 * @throws {StepError} a ledger outside the mounted directory, or without completion.json on the host
 */
function hostMountedSummary(summary) {
  const hostRoot = env("COHORT_ARTIFACTS_DIR");
  // Normalized (a `..` segment cannot climb out of the root; a trailing slash on the root is no refusal).
  const nodeRoot = path.posix.normalize(env("COHORT_ARTIFACTS_NODE_PATH")).replace(/(.)\/$/, "$1");
  const ledger = path.posix.normalize(String(summary.ledgerPath));
  if (ledger !== nodeRoot && !ledger.startsWith(`${nodeRoot}/`)) {
    throw new StepError(`the runtime wrote its ledger to ${String(summary.ledgerPath)}, outside the mounted artifacts directory ${nodeRoot}`);
  }
  const hostLedger = path.join(hostRoot, path.relative(nodeRoot, ledger));
  if (!fs.existsSync(path.join(hostLedger, "completion.json"))) {
    throw new StepError(`the ledger ${hostLedger} has no completion.json on the host: is the artifacts directory mounted into the kind nodes?`);
  }
  // reportPath (the run's report.html, absent from an older runtime's summary) is mapped the same way; a path
  // outside the mounted directory has no host path and becomes null.
  const report = typeof summary.reportPath === "string" ? path.posix.normalize(summary.reportPath) : null;
  const hostReport = report !== null && report.startsWith(`${nodeRoot}/`) ? path.join(hostRoot, path.relative(nodeRoot, report)) : null;
  return { ...summary, ledgerPath: hostLedger, reportPath: hostReport };
}

/** `run-progress`: components/run/job-steps.cjs `followJobProgress` with this profile's pinned kubectl. */
async function runProgress() {
  await followJobProgress(async () => (await tools()).kubectl);
}

/**
 * A Kubernetes quantity (the forms kubelet reports: `8`, `7800m`, `32779524Ki`, `110`) times `scale`, rounded up.
 *
 * @param {string} text
 * @param {number} scale
 */
function quantity(text, scale) {
  const m = /^(\d+)(?:\.(\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$/.exec(text);
  if (m === null) throw new StepError(`unexpected quantity ${JSON.stringify(text)} in the node status`);
  const [, int, frac = "", suffix = ""] = m;
  const binary = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
  const decimal = { m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
  let num = BigInt(int + frac) * BigInt(scale);
  let den = 10n ** BigInt(frac.length);
  if (suffix in binary) num *= 1n << BigInt(binary[/** @type {keyof typeof binary} */ (suffix)]);
  else if (suffix in decimal) {
    const e = decimal[/** @type {keyof typeof decimal} */ (suffix)];
    if (e >= 0) num *= 10n ** BigInt(e);
    else den *= 10n ** BigInt(-e);
  }
  return Number((num + den - 1n) / den);
}

/**
 * The quota was derived at program time from this machine's CPUs and memory (what kind nodes report). This step
 * re-derives it from the nodes' real `status.allocatable` — Σ allocatable of the workers − the same reserved
 * requests — and fails, before the ClusterQueue is created, when that is less than the quota about to be
 * configured, with both figures.
 *
 * Environment: COHORT_KUBECONFIG, COHORT_CAPACITY = `{ nodes: [names], reserved: {cpuMilli, memoryBytes},
 * quota: {cpuMilli, memoryBytes} }`.
 */
async function capacityCheck() {
  const { kubectl } = await tools();
  /** @type {{ nodes: string[], reserved: { cpuMilli: number, memoryBytes: number }, quota: { cpuMilli: number, memoryBytes: number } }} */
  const plan = JSON.parse(env("COHORT_CAPACITY"));
  await withKubeconfig(env("COHORT_KUBECONFIG"), async (file) => {
    const r = run(kubectl, ["--kubeconfig", file, "get", "nodes", "-o", "json", "--request-timeout=30s"]);
    if (r.status !== 0) throw new StepError(`kubectl get nodes failed: ${tail(r.stderr, 3)}`);
    /** @type {Map<string, any>} */
    const nodes = new Map(JSON.parse(r.stdout).items.map((/** @type {any} */ n) => [n.metadata.name, n]));
    const total = { cpuMilli: 0, memoryBytes: 0 };
    for (const name of plan.nodes) {
      const node = nodes.get(name);
      if (node === undefined) throw new StepError(`node ${name} does not exist (nodes: ${[...nodes.keys()].join(", ")})`);
      const a = node.status?.allocatable ?? {};
      const cpu = quantity(String(a.cpu ?? "0"), 1000);
      const memory = quantity(String(a.memory ?? "0"), 1);
      total.cpuMilli += cpu;
      total.memoryBytes += memory;
      log(`node ${name}: ${cpu}m CPU, ${memory} bytes memory allocatable`);
    }
    const derived = { cpuMilli: total.cpuMilli - plan.reserved.cpuMilli, memoryBytes: total.memoryBytes - plan.reserved.memoryBytes };
    const problems = [];
    if (derived.cpuMilli < plan.quota.cpuMilli) {
      problems.push(`cpu: ${total.cpuMilli}m allocatable − ${plan.reserved.cpuMilli}m reserved = ${derived.cpuMilli}m < quota ${plan.quota.cpuMilli}m`);
    }
    if (derived.memoryBytes < plan.quota.memoryBytes) {
      problems.push(`memory: ${total.memoryBytes} allocatable − ${plan.reserved.memoryBytes} reserved = ${derived.memoryBytes} bytes < quota ${plan.quota.memoryBytes} bytes`);
    }
    if (problems.length > 0) {
      throw new StepError(
        `the nodes hold less than the ClusterQueue quota derived from this machine (${problems.join("; ")}); ` +
          "lower it with pulumi config set --path local.queue.cpu|memory <value> and run pulumi up again",
      );
    }
    log(`capacity: cpu ${derived.cpuMilli}m ≥ quota ${plan.quota.cpuMilli}m, memory ${derived.memoryBytes} ≥ quota ${plan.quota.memoryBytes} bytes`);
  });
}

/**
 * The delete step of the run-summary Command (destroy, or the old run after a replacement): with
 * COHORT_KEEP_LEDGERS other than `true`, removes the run's ledger directory named in the stored summary
 * (`PULUMI_COMMAND_STDOUT`), only if it lies inside COHORT_ARTIFACTS_DIR. Idempotent.
 */
async function runForget() {
  const previous = process.env.PULUMI_COMMAND_STDOUT ?? "";
  if (previous.trim() === "" || process.env.COHORT_KEEP_LEDGERS === "true") return;
  const ledger = String(JSON.parse(previous).ledgerPath ?? "");
  const root = path.resolve(env("COHORT_ARTIFACTS_DIR"));
  const target = path.resolve(ledger);
  if (ledger === "" || path.dirname(target) !== root) throw new StepError(`refusing to remove ${JSON.stringify(ledger)}: not a run directory directly under ${root}`);
  fs.rmSync(target, { recursive: true, force: true });
  log(`removed the ledger ${target} (keepLedgers is false)`);
}

const STEPS = {
  create,
  delete: del,
  "webhook-probe": webhookProbe,
  "run-summary": runSummary,
  "run-forget": runForget,
  "run-progress": runProgress,
  "worker-guard": workflowSteps.workerGuard,
  "run-identity": workflowSteps.runIdentity,
  "run-submit": () => workflowSteps.runSubmit(hostMountedSummary),
  "run-keep": workflowSteps.runKeep,
  "capacity-check": capacityCheck,
  "load-images": loadImages,
};

/**
 * `load-images`: makes every image of `COHORT_IMAGES` (JSON `[{ ref: "repo:tag", digest: "sha256:…", archive }]`)
 * resolvable BY DIGEST in every node of the cluster with no registry: `kind load image-archive` (which imports with
 * the node's own `ctr`), then, per node, the image's digest in the node's containerd is checked against the one
 * the archive was built with, and the digest reference `repo@sha256:…` is added as a name (CRI resolves a local
 * image only by a name it has; an import names only the tag), and `crictl inspecti repo@sha256:…` must answer.
 * An image already resolvable by digest on every node is skipped. Prints `{"loaded":[…],"present":[…]}`.
 */
async function loadImages() {
  const { kind } = await tools();
  const name = env("COHORT_CLUSTER_NAME");
  /** @type {{ ref: string, digest: string, archive: string }[]} */
  const images = JSON.parse(env("COHORT_IMAGES"));
  checkDocker();
  const nodesOut = run(kind, ["get", "nodes", "--name", name]);
  const nodes = nodesOut.stdout
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  if (nodesOut.status !== 0 || nodes.length === 0) throw new StepError(`kind cluster "${name}" has no nodes (kind get nodes: ${tail(nodesOut.stderr, 3)})`);
  /** @param {string} node @param {string[]} args */
  const inNode = (node, args) => run("docker", ["exec", node, ...args]);
  const loaded = [];
  const present = [];
  for (const image of images) {
    const repo = image.ref.replace(/:[^:/]+$/, "");
    const digestRef = `${repo}@${image.digest}`;
    const resolvable = (/** @type {string} */ node) => inNode(node, ["crictl", "inspecti", "-q", digestRef]).status === 0;
    if (nodes.every(resolvable)) {
      present.push(digestRef);
      continue;
    }
    if (!fs.existsSync(image.archive)) throw new StepError(`image archive ${image.archive} of ${image.ref} is missing; run \`npm run toolchain -- local-apps\``);
    const started = Date.now();
    const r = run(kind, ["load", "image-archive", image.archive, "--name", name]);
    if (r.status !== 0) throw new StepError(`kind load image-archive ${image.archive} --name ${name} failed: ${tail(r.stderr, 5)}`);
    for (const node of nodes) {
      const ls = inNode(node, ["ctr", "-n", "k8s.io", "images", "ls", `name==${image.ref}`]);
      const row = ls.stdout
        .split("\n")
        .slice(1)
        .map((l) => l.trim().split(/\s+/))
        .find((cols) => cols[0] === image.ref);
      if (ls.status !== 0 || row === undefined)
        throw new StepError(`${image.ref} is not in node ${node}'s containerd after kind load (ctr images ls: ${tail(ls.stderr || ls.stdout, 3)})`);
      if (row[2] !== image.digest) {
        throw new StepError(`${image.ref} in node ${node} has digest ${row[2]}, but it was built with ${image.digest}; rebuild it with \`npm run toolchain -- local-apps\``);
      }
      const tag = inNode(node, ["ctr", "-n", "k8s.io", "images", "tag", "--force", image.ref, digestRef]);
      if (tag.status !== 0) throw new StepError(`ctr images tag ${image.ref} ${digestRef} in ${node} failed: ${tail(tag.stderr, 3)}`);
      let ok = false;
      for (let attempt = 0; attempt < 40 && !ok; attempt++) {
        ok = resolvable(node);
        if (!ok) await new Promise((res) => setTimeout(res, 250));
      }
      if (!ok) throw new StepError(`node ${node}: crictl cannot resolve ${digestRef} after tagging it`);
    }
    log(`loaded ${digestRef} into ${nodes.length} nodes in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    loaded.push(digestRef);
  }
  process.stdout.write(`${JSON.stringify({ loaded, present })}\n`);
}

module.exports = { isProgressLine, progressFilter, runAsProgram };

/** Runs the step named by `process.argv[2]` and exits: the entry point (scripts/local-profile.cjs calls it). */
function runAsProgram() {
  runStepProgram(STEPS, { prefixFailures: true });
}

if (require.main === module) runAsProgram();

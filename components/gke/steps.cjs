#!/usr/bin/env node
// @ts-check
/**
 * Host-side lifecycle checks of the `gke` profile, run by `@pulumi/command` `local.Command` resources
 * (components/gke/Lifecycle.ts) with the Node binary that runs the Pulumi program. Node built-ins only; the
 * tools are the user's `kubectl` (with `gke-gcloud-auth-plugin`) and `gcloud` on PATH. Inputs arrive in the
 * environment; refusals go to stderr with exit status 1.
 *
 * - `park-check` (create/update of the park guard, before the system pool changes): with COHORT_SYSTEM_NODES=0,
 *   refuses while any Kueue Workload exists in any namespace (`kubectl get workloads.kueue.x-k8s.io -A`): parking
 *   would strand an admitted cohort. Key: `cohort-lab:gke.systemNodes`.
 * - `ledger-guard` (delete of the ledger guard, i.e. `pulumi destroy`, before the bucket is deleted): refuses
 *   while `gs://<bucket>` holds objects unless COHORT_DELETE_LEDGERS=true, in which case it removes them
 *   (`gcloud storage rm --recursive`) so the bucket (forceDestroy false) can be deleted. Key: `cohort-lab:gke.deleteLedgers`.
 */
"use strict";

const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

/** @param {string} name */
function env(name) {
  const v = process.env[name];
  if (v === undefined) throw new Error(`missing environment variable ${name}`);
  return v;
}

/** @param {string} file @param {string[]} args */
function run(file, args) {
  return spawnSync(file, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
}

function parkCheck() {
  if (env("COHORT_SYSTEM_NODES") !== "0") return;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-gke-"));
  const file = path.join(dir, "kubeconfig");
  fs.writeFileSync(file, env("COHORT_KUBECONFIG"), { mode: 0o600 });
  try {
    const r = run("kubectl", ["--kubeconfig", file, "get", "workloads.kueue.x-k8s.io", "--all-namespaces", "-o", "name", "--request-timeout=30s"]);
    if (r.error !== undefined || r.status !== 0) {
      throw new Error(
        `cohort-lab:gke.systemNodes: cannot park: listing Kueue Workloads failed (${r.error?.message ?? r.stderr.trim()}); parking is refused unless the cluster says none exist`,
      );
    }
    const workloads = r.stdout.split("\n").filter((l) => l.trim() !== "");
    if (workloads.length > 0) {
      throw new Error(
        `cohort-lab:gke.systemNodes: cannot park (0) while ${workloads.length} Kueue Workload(s) exist (${workloads.slice(0, 5).join(", ")}): a cohort is admitted or waiting; let it finish, then set it to 0`,
      );
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function ledgerGuard() {
  const bucket = env("COHORT_BUCKET");
  const r = run("gcloud", ["storage", "ls", `gs://${bucket}/**`]);
  const objects = r.status === 0 ? r.stdout.split("\n").filter((l) => l.trim() !== "") : [];
  if (r.error !== undefined || (r.status !== 0 && !/One or more URLs matched no objects|matched no objects/.test(r.stderr))) {
    throw new Error(`cohort-lab:gke.deleteLedgers: cannot tell whether gs://${bucket} holds ledgers (${r.error?.message ?? r.stderr.trim()}); destroy is refused until it can`);
  }
  if (objects.length === 0) return;
  if (env("COHORT_DELETE_LEDGERS") !== "true") {
    throw new Error(
      `cohort-lab:gke.deleteLedgers: gs://${bucket} holds ${objects.length} object(s) (ledgers); destroy would lose them. Copy them out, or set gke.deleteLedgers to true`,
    );
  }
  const rm = run("gcloud", ["storage", "rm", "--recursive", `gs://${bucket}/**`]);
  if (rm.status !== 0) throw new Error(`cohort-lab:gke.deleteLedgers: removing the ledgers in gs://${bucket} failed: ${rm.stderr.trim()}`);
  process.stderr.write(`[cohort-lab gke] removed ${objects.length} object(s) from gs://${bucket} (gke.deleteLedgers is true)\n`);
}

/** @type {Record<string, () => void>} */
const STEPS = { "park-check": parkCheck, "ledger-guard": ledgerGuard };

const step = STEPS[process.argv[2] ?? ""];
if (step === undefined) {
  process.stderr.write(`usage: steps.cjs ${Object.keys(STEPS).join("|")}\n`);
  process.exit(2);
}
try {
  step();
} catch (error) {
  process.stderr.write(`${/** @type {Error} */ (error).message}\n`);
  process.exit(1);
}

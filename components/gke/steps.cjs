#!/usr/bin/env node
// @ts-check
/**
 * Host-side steps of the `gke` profile, run by `@pulumi/command` `local.Command` resources (components/gke/Lifecycle.ts,
 * components/run/kubernetesJob.ts) with the Node binary that runs the Pulumi program. Node built-ins only. Inputs
 * arrive in the environment; refusals go to stderr with exit status 1, naming the config key. The two lifecycle
 * guards use what the run steps use (below): the pinned kubectl and the bundled runtime.
 *
 * - `park-check` (create/update of the park guard, before the system pool changes): with COHORT_SYSTEM_NODES=0,
 *   refuses while any Kueue Workload exists in any namespace (`kubectl get workloads.kueue.x-k8s.io -A`, the
 *   pinned kubectl): parking would strand an admitted cohort; a listing that fails refuses too. Key:
 *   `cohort-lab:gke.systemNodes`.
 * - `ledger-guard` (delete of the ledger guard, i.e. `pulumi destroy`, before the bucket is deleted): refuses
 *   while `gs://<bucket>` holds objects (`cohort ledger list --json`) unless COHORT_DELETE_LEDGERS=true, in which
 *   case it removes them (`cohort ledger delete --all`, every completion.json first) and lists again, so the bucket
 *   (forceDestroy false) can be deleted; a listing that fails refuses. Key: `cohort-lab:gke.deleteLedgers`.
 *
 * The run's steps (components/run/kubernetesJob.ts with a `bucket` ledger; {@link GkeCluster.hostStep}) use the
 * pinned kubectl of the tool cache (COHORT_KUBECTL_*, as `local`'s; the kubeconfig's exec credential needs
 * `gke-gcloud-auth-plugin` on PATH) and the bundled runtime on this machine (COHORT_RUNTIME_BUNDLE, dist/cohort.cjs)
 * for every GCS call, with Application Default Credentials (or STORAGE_EMULATOR_HOST):
 *
 * - `run-summary`: the runtime's summary line from the Job's log (components/run/job-steps.cjs `jobSummary`, the
 *   code `local` runs), then {@link summaryFromBucket}: the run's exported ledger is downloaded and verified
 *   (`cohort ledger verify --json <ledgerUri>`) and the summary printed with `outcome` and `firstFailure` from its
 *   completion.json and `reportPath` null (report.html is not exported). Fails naming the object when the export
 *   failed, or the ledger is missing, torn or does not verify.
 * - `run-progress`: components/run/job-steps.cjs `followJobProgress` (never fails).
 * - `run-forget` (delete of the summary): with COHORT_KEEP_LEDGERS other than `true`, `cohort ledger delete
 *   <ledgerUri>` of the stored summary, only a run directly under COHORT_LEDGER_URI; otherwise nothing.
 *
 * With `gke.runAs: workflow` (components/run/clusterWorkflow.ts with a `bucket` ledger) the run's steps are
 * components/run/workflow-steps.cjs's, through a supervised `kubectl port-forward` to Temporal's Service
 * (COHORT_TEMPORAL_PORT_FORWARD): `worker-guard`, `run-identity`, `run-keep` as on `local`; `run-submit` prints
 * {@link summaryFromBucket}'s summary of the ledger the worker's run exported; `run-forget` is the one above.
 */
"use strict";

const fs = require("node:fs");
const shared = require("../run/job-steps.cjs");
const workflowSteps = require("../run/workflow-steps.cjs");
const { StepError, JobFailedError, log, env, run, tail, pinnedTool, withKubeconfig, jobSummary, followJobProgress, runStepProgram } = shared;

shared.setLogPrefix("[cohort-lab gke]");

/** The config keys the guards' refusals name. */
const PARK_KEY = "cohort-lab:gke.systemNodes";
const LEDGERS_KEY = "cohort-lab:gke.deleteLedgers";

/**
 * `park-check` (see the module doc). Environment: COHORT_SYSTEM_NODES, COHORT_KUBECONFIG, COHORT_KUBECTL_* (the
 * pinned kubectl). With a system pool other than 0 nothing is listed. A listing that fails refuses: parking is
 * allowed only when the cluster says no Workload exists.
 */
async function parkCheck() {
  if (env("COHORT_SYSTEM_NODES") !== "0") return;
  let kubectl;
  try {
    kubectl = await pinnedTool("kubectl", "COHORT_KUBECTL");
  } catch (error) {
    throw new StepError(
      `${PARK_KEY}: cannot park: no kubectl to list Kueue Workloads with (${error instanceof Error ? error.message : String(error)}); parking is refused unless the cluster says none exist`,
    );
  }
  const r = withKubeconfig(env("COHORT_KUBECONFIG"), (file) =>
    run(kubectl, ["--kubeconfig", file, "get", "workloads.kueue.x-k8s.io", "--all-namespaces", "-o", "name", "--request-timeout=30s"]),
  );
  if (r.status !== 0) {
    throw new StepError(`${PARK_KEY}: cannot park: listing Kueue Workloads failed (${tail(r.stderr, 3)}); parking is refused unless the cluster says none exist`);
  }
  const workloads = r.stdout.split("\n").filter((l) => l.trim() !== "");
  if (workloads.length > 0) {
    throw new StepError(
      `${PARK_KEY}: cannot park (0) while ${workloads.length} Kueue Workload(s) exist (${workloads.slice(0, 5).join(", ")}): a cohort is admitted or waiting; let it finish, then set it to 0`,
    );
  }
}

/**
 * `cohort ledger list --json gs://<bucket>` through the bundled runtime.
 *
 * @param {string} node - the Node binary
 * @param {string} bundle - dist/cohort.cjs
 * @param {string} uri - `gs://<bucket>`
 * @returns {{ objects: string[], runs: string[] }}
 * @throws {StepError} the listing failed or its output is not the JSON line: the guard cannot tell, so it refuses
 */
function listBucket(node, bundle, uri) {
  const r = run(node, [bundle, "ledger", "list", "--json", uri]);
  let listed;
  try {
    listed = r.status === 0 ? JSON.parse(tail(r.stdout, 1)) : undefined;
  } catch {
    listed = undefined;
  }
  if (listed === undefined || !Array.isArray(listed.objects) || !Array.isArray(listed.runs)) {
    throw new StepError(
      `${LEDGERS_KEY}: cannot tell whether ${uri} holds ledgers (${tail(r.stderr, 1) || `cohort ledger list exited ${r.status}`}); destroy is refused until it can`,
    );
  }
  return listed;
}

/**
 * `ledger-guard` (see the module doc). Environment: COHORT_BUCKET, COHORT_DELETE_LEDGERS, COHORT_RUNTIME_BUNDLE
 * (with Application Default Credentials, or STORAGE_EMULATOR_HOST). Every GCS call is the bundled runtime's
 * (`cohort ledger list --json`, `cohort ledger delete --all`); after a delete the bucket is listed again and must be
 * empty.
 */
function ledgerGuard() {
  const uri = `gs://${env("COHORT_BUCKET")}`;
  const bundle = env("COHORT_RUNTIME_BUNDLE");
  if (!fs.existsSync(bundle)) {
    throw new StepError(`${LEDGERS_KEY}: cannot tell whether ${uri} holds ledgers: the runtime bundle ${bundle} is gone; run npm run build, then destroy again`);
  }
  const node = process.execPath;
  const { objects, runs } = listBucket(node, bundle, uri);
  if (objects.length === 0) return;
  const what = `${objects.length} object(s) (${runs.length} run ledger(s)${runs.length > 0 ? `: ${runs.slice(0, 5).join(", ")}${runs.length > 5 ? ", …" : ""}` : ""})`;
  if (process.env.COHORT_DELETE_LEDGERS !== "true") {
    throw new StepError(`${LEDGERS_KEY}: ${uri} holds ${what}; destroy would lose them. Copy them out, or set gke.deleteLedgers to true`);
  }
  const rm = run(node, [bundle, "ledger", "delete", "--all", uri]);
  if (rm.status !== 0) throw new StepError(`${LEDGERS_KEY}: removing the ledgers in ${uri} failed: ${tail(rm.stderr, 1) || `cohort ledger delete exited ${rm.status}`}`);
  const left = listBucket(node, bundle, uri).objects;
  if (left.length > 0) throw new StepError(`${LEDGERS_KEY}: ${uri} still holds ${left.length} object(s) after the delete (${left.slice(0, 5).join(", ")}); destroy again`);
  log(`${rm.stdout.trim()} (${runs.length} run ledger(s); gke.deleteLedgers is true)`);
}

/** The export destination `gs://<bucket>[/<prefix>]` without a trailing `/`. */
function ledgerDestination() {
  return env("COHORT_LEDGER_URI").replace(/\/+$/, "");
}

/**
 * The GCS half of `run-summary`: the run's ledger as exported by the runtime, downloaded and verified by the bundled
 * runtime (`cohort ledger verify --json`, runtime/core/ledger/remote.ts), and the summary the stack's `run` output is
 * made of: the runtime's summary with `outcome` and `firstFailure` from the verified completion.json and `reportPath`
 * null (report.html stays in the pod).
 *
 * @param {any} summary - the runtime's summary line, parsed (components/run/job-steps.cjs `jobSummary`)
 * @param {readonly string[]} lines - the Job's log lines (for the runtime's `cohort: ledger export failed:` line)
 * @param {{ destination: string, bundle: string, node?: string, noExportLine?: string }} o - COHORT_LEDGER_URI, the
 *   runtime bundle, the Node binary, and what to say when `lines` has no export line (@default "the Job's log has no
 *   export line")
 * @returns {Record<string, unknown>}
 * @throws {StepError} the export failed (no `ledgerUri`), the ledger is elsewhere than `<destination>/<runId>`, or it
 *   does not verify (the runtime's one-line reason, naming the object: a missing completion.json, a torn records.ndjson)
 */
function summaryFromBucket(summary, lines, o) {
  const destination = o.destination.replace(/\/+$/, "");
  const runId = String(summary.runId);
  if (typeof summary.ledgerUri !== "string") {
    const failed = exportFailure(lines);
    throw new StepError(
      `run ${runId}: the runtime did not export its ledger to ${destination} (no ledgerUri in its summary), so its result cannot be read back: ${failed ?? o.noExportLine ?? "the Job's log has no export line"}`,
    );
  }
  const expected = `${destination}/${runId}`;
  if (summary.ledgerUri !== expected) throw new StepError(`run ${runId}: the runtime exported its ledger to ${summary.ledgerUri}, not ${expected}`);
  const r = run(o.node ?? process.execPath, [o.bundle, "ledger", "verify", "--json", expected]);
  if (r.status !== 0) {
    throw new StepError(`run ${runId}: its ledger ${expected} does not verify: ${tail(r.stderr, 1) || `cohort ledger verify exited ${r.status}`}`);
  }
  /** @type {{ runId: string, outcome: string, firstFailure: unknown }} */
  const verified = JSON.parse(tail(r.stdout, 1));
  if (verified.runId !== runId) throw new StepError(`run ${runId}: ${expected} holds the ledger of run ${verified.runId}`);
  return { ...summary, outcome: verified.outcome, firstFailure: verified.firstFailure, reportPath: null };
}

/** The runtime's `cohort: ledger export failed: …` line in the Job's log, if any. */
function exportFailure(/** @type {readonly string[]} */ lines) {
  return [...lines].reverse().find((l) => l.startsWith("cohort: ledger export failed:"));
}

/**
 * `run-summary` (see the module doc). Environment: as `jobSummary`, and COHORT_LEDGER_URI, COHORT_RUNTIME_BUNDLE.
 * A failed Job whose log names a failed export fails naming the export (the runtime exits 1 for it even when the
 * run succeeded, and its last line is then the run's own closing line).
 */
async function runSummary() {
  const kubectl = await pinnedTool("kubectl", "COHORT_KUBECTL");
  let job;
  try {
    job = await jobSummary(kubectl);
  } catch (error) {
    const failed = error instanceof JobFailedError ? exportFailure(error.lines) : undefined;
    if (failed !== undefined) throw new StepError(`${error instanceof Error ? error.message : String(error)}; its ledger was not exported to ${ledgerDestination()}: ${failed}`);
    throw error;
  }
  const { summary, lines } = job;
  const result = summaryFromBucket(summary, lines, { destination: ledgerDestination(), bundle: env("COHORT_RUNTIME_BUNDLE") });
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** `run-progress`: the shared follower with the pinned kubectl. */
async function runProgress() {
  await followJobProgress(() => pinnedTool("kubectl", "COHORT_KUBECTL"));
}

/**
 * `run-forget` (see the module doc). Environment: PULUMI_COMMAND_STDOUT (the stored summary), COHORT_KEEP_LEDGERS,
 * COHORT_LEDGER_URI, COHORT_RUNTIME_BUNDLE. Idempotent (objects already gone are skipped).
 */
async function runForget() {
  const previous = process.env.PULUMI_COMMAND_STDOUT ?? "";
  if (previous.trim() === "" || process.env.COHORT_KEEP_LEDGERS === "true") return;
  const stored = JSON.parse(previous);
  const uri = String(stored.ledgerUri ?? "");
  const destination = ledgerDestination();
  if (uri === "" || uri !== `${destination}/${String(stored.runId)}`) {
    throw new StepError(`refusing to delete ${JSON.stringify(uri)}: not the ledger of run ${String(stored.runId)} directly under ${destination}`);
  }
  const bundle = env("COHORT_RUNTIME_BUNDLE");
  if (!fs.existsSync(bundle)) throw new StepError(`cannot delete ${uri}: the runtime bundle ${bundle} is gone; run npm run build, then destroy again`);
  const r = run(process.execPath, [bundle, "ledger", "delete", uri]);
  if (r.status !== 0) throw new StepError(tail(r.stderr, 1) || `cohort ledger delete ${uri} exited ${r.status}`);
  log(`${r.stdout.trim()} (keepLedgers is false)`);
}

/**
 * `run-submit` of the workflow execution (components/run/workflow-steps.cjs `runSubmit`, through the supervised
 * port-forward of COHORT_TEMPORAL_PORT_FORWARD): the worker's run exported its ledger (its backend setting
 * `ledgerExport`), and the summary printed is {@link summaryFromBucket}'s, as the Job's.
 */
async function workflowRunSubmit() {
  const destination = ledgerDestination();
  const bundle = env("COHORT_RUNTIME_BUNDLE");
  await workflowSteps.runSubmit((summary) =>
    summaryFromBucket(summary, [], {
      destination,
      bundle,
      noExportLine: `the run worker's log has it (kubectl -n ${process.env.COHORT_NAMESPACE ?? "cohort-lab-system"} logs deploy/cohort-run-worker)`,
    }),
  );
}

/** @type {Record<string, () => void | Promise<void>>} */
const STEPS = {
  "park-check": parkCheck,
  "ledger-guard": ledgerGuard,
  "run-summary": runSummary,
  "run-progress": runProgress,
  "run-forget": runForget,
  "worker-guard": workflowSteps.workerGuard,
  "run-identity": workflowSteps.runIdentity,
  "run-submit": workflowRunSubmit,
  "run-keep": workflowSteps.runKeep,
};

module.exports = { summaryFromBucket };

if (require.main === module) runStepProgram(STEPS, { prefixFailures: false });

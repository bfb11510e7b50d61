/**
 * components/gke/steps.cjs, the `gke` profile's run steps, run for real (Node child processes) against the real
 * fake-gcs-server (test/runtime/gcs-emulator.ts) and the shipped bundle: a real cohort (process backend) runs with
 * `--ledger-export gs://<bucket>` as the runtime Job would, and its output (stderr and stdout, as a pod's log holds
 * them) is the Job log a stand-in `kubectl` serves (pinned by its SHA-256 like the real one; `get job` answers
 * Complete or Failed). The Job-log half is therefore the real shared code (components/run/job-steps.cjs `jobSummary`,
 * the code the kind local tier runs); the GCS half is the bundled runtime (`cohort ledger verify --json`,
 * `cohort ledger delete`) against the emulator.
 *
 * Covers: the summary with `outcome` and `firstFailure` from completion.json and `reportPath` null; a torn
 * records.ndjson and a missing completion.json each fail naming the object; a failed export fails naming it;
 * `run-forget` deletes the run's objects only when keepLedgers is false, and only a run under the destination.
 * Without the emulator every test skips with the reason printed.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRunSummary, type RunSummary } from "../../runtime/index.js";
import { gcsEmulatorSkipReason as skipReason, startGcsEmulator, type GcsEmulator } from "../runtime/gcs-emulator.js";
import { buildBundle, runBundle, tempDir } from "../runtime/process-helpers.js";

const SCRIPT = path.join(__dirname, "..", "..", "components", "gke", "steps.cjs");
const BUCKET = "gke-ledgers";
const DESTINATION = `gs://${BUCKET}`;
if (skipReason !== undefined) console.warn(`gke run-step tests SKIPPED: ${skipReason}`);

/** The stand-in kubectl: the Job's state from FAKE_JOB_STATE (default Complete), its log from the file FAKE_JOB_LOG. */
const FAKE_KUBECTL = `#!/usr/bin/env node
const fs = require("node:fs");
const a = process.argv.slice(2);
if (a.includes("get") && a.includes("job")) process.stdout.write(JSON.stringify({ status: { conditions: [{ type: process.env.FAKE_JOB_STATE || "Complete", status: "True" }] } }));
else if (a.includes("logs")) process.stdout.write(fs.readFileSync(process.env.FAKE_JOB_LOG, "utf8"));
else { process.stderr.write("fake kubectl: unsupported " + a.join(" ") + "\\n"); process.exit(2); }
`;

let gcs: GcsEmulator | undefined;
let bundle = "";
let kubectl = "";
let kubectlSha = "";
/** The real run: its summary line and its log (stderr, then the summary on stdout). */
let run: { summary: RunSummary; log: string } | undefined;

function writeSpec(): string {
  const file = path.join(tempDir("gke-steps-spec"), "cohort.json");
  const roles = [{ name: "w", replicas: 2, app: { command: ["sh", "-c", "echo ready; exec sleep 1000"], port: false }, readiness: { log: { pattern: "^ready$" } } }];
  fs.writeFileSync(file, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "gke", stopGracePeriod: "2s", roles }));
  return file;
}

/** Runs a step of components/gke/steps.cjs with the Job's log `log` (and its state). */
function step(name: string, extra: Record<string, string> = {}, log?: string): { status: number; stdout: string; stderr: string } {
  const logFile = path.join(tempDir("gke-steps-log"), "job.log");
  fs.writeFileSync(logFile, log ?? run?.log ?? "");
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    STORAGE_EMULATOR_HOST: gcs?.endpoint ?? "",
    COHORT_KUBECTL_BIN: kubectl,
    COHORT_KUBECTL_URL: "",
    COHORT_KUBECTL_SHA256: kubectlSha,
    COHORT_KUBECONFIG: "apiVersion: v1\nkind: Config\n",
    COHORT_NAMESPACE: "gke-0123456789",
    COHORT_JOB: "cohort-run",
    COHORT_CONTAINER: "runtime",
    COHORT_WAIT_MS: "10000",
    COHORT_LEDGER_URI: DESTINATION,
    COHORT_RUNTIME_BUNDLE: bundle,
    FAKE_JOB_LOG: logFile,
    ...extra,
  };
  const r = spawnSync(process.execPath, [SCRIPT, name], { env, encoding: "utf8", timeout: 120_000 });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(async () => {
  if (skipReason !== undefined) return;
  gcs = await startGcsEmulator(BUCKET);
  bundle = await buildBundle({ shipped: true });
  const bin = tempDir("gke-steps-bin");
  kubectl = path.join(bin, "kubectl");
  fs.writeFileSync(kubectl, FAKE_KUBECTL, { mode: 0o755 });
  kubectlSha = createHash("sha256").update(FAKE_KUBECTL).digest("hex");
  const r = await runBundle(bundle, ["run", "--spec", writeSpec(), "--artifacts", path.join(tempDir("gke-steps-artifacts"), "a"), "--ledger-export", DESTINATION], {
    env: { STORAGE_EMULATOR_HOST: gcs.endpoint },
  });
  if (r.code !== 0) throw new Error(`the cohort run failed (${r.code}): ${r.stderr}`);
  run = { summary: parseRunSummary(r.stdout), log: `${r.stderr}${r.stdout}` };
}, 300_000);

afterAll(async () => {
  await gcs?.stop();
});

describe("gke run-summary (the Job's log, then the exported ledger in GCS)", () => {
  const object = (file: string) => `${run!.summary.runId}/${file}`;

  it("prints the runtime's summary with outcome and firstFailure from the verified completion.json, reportPath null", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const { summary } = run!;
    expect(summary.ledgerUri).toBe(`${DESTINATION}/${summary.runId}`);
    const r = step("run-summary");
    expect([r.status, r.stderr]).toEqual([0, ""]);
    const printed = parseRunSummary(r.stdout);
    const completion = JSON.parse((await gcs!.get(object("completion.json"))).toString("utf8")) as { outcome: string; firstFailure: unknown };
    expect(printed).toEqual({ ...summary, outcome: completion.outcome, firstFailure: completion.firstFailure, reportPath: null });
    // The pod's path stays the ledgerPath; the ledger's home is ledgerUri.
    expect(printed.ledgerPath).toBe(summary.ledgerPath);
    expect(printed.ledgerUri).toBe(`${DESTINATION}/${summary.runId}`);
  });

  it("takes outcome and firstFailure from completion.json, not from the summary line", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const { summary, log } = run!;
    const line = JSON.stringify(summary);
    const altered = log.replace(line, JSON.stringify({ ...summary, outcome: "interrupted", firstFailure: { member: "w-0", reason: "not so" } }));
    expect(altered).not.toBe(log);
    const r = step("run-summary", {}, altered);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ outcome: "succeeded", firstFailure: null });
  });

  it("a torn records.ndjson fails the step, naming the object", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const uri = run!.summary.ledgerUri!;
    const records = await gcs!.get(object("records.ndjson"));
    await gcs!.put(object("records.ndjson"), records.subarray(0, records.length - 20));
    try {
      const r = step("run-summary");
      expect(r.status).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr.trim()).toMatch(
        new RegExp(
          `^run ${run!.summary.runId}: its ledger ${uri} does not verify: cohort: ledger verify failed: ledger ${uri}: torn-final-line at line \\d+: ${uri}/records\\.ndjson: `,
        ),
      );
    } finally {
      await gcs!.put(object("records.ndjson"), records);
    }
  });

  it("a missing completion.json fails the step, naming the object", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const uri = run!.summary.ledgerUri!;
    const completion = await gcs!.get(object("completion.json"));
    await gcs!.remove(object("completion.json"));
    try {
      const r = step("run-summary");
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`its ledger ${uri} does not verify: cohort: ledger verify failed: ledger ${uri}: completion-missing: ${uri}/completion.json does not exist`);
    } finally {
      await gcs!.put(object("completion.json"), completion);
    }
    expect(step("run-summary").status).toBe(0);
  });

  it("a run whose export failed fails the step naming the export (a real run against a bucket that does not exist)", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const r = await runBundle(
      bundle,
      ["run", "--spec", writeSpec(), "--artifacts", path.join(tempDir("gke-steps-artifacts"), "a"), "--ledger-export", "gs://no-such-bucket-here"],
      {
        env: { STORAGE_EMULATOR_HOST: gcs!.endpoint },
      },
    );
    // The runtime exits 1 for a run whose export failed: its Job ends Failed.
    expect(r.code).toBe(1);
    const log = `${r.stderr}${r.stdout}`;
    const failed = step("run-summary", { FAKE_JOB_STATE: "Failed", COHORT_LEDGER_URI: "gs://no-such-bucket-here" }, log);
    expect(failed.status).toBe(1);
    expect(failed.stderr).toMatch(
      /^the cohort runtime Job gke-0123456789\/cohort-run failed: .*; its ledger was not exported to gs:\/\/no-such-bucket-here: cohort: ledger export failed: ledger export to gs:\/\/no-such-bucket-here\/gke-\S+: uploading /,
    );
    // A Job that ended Complete with a summary but no ledgerUri (nothing exported) fails too, naming the destination.
    const complete = step("run-summary", { COHORT_LEDGER_URI: "gs://no-such-bucket-here" }, log);
    expect(complete.status).toBe(1);
    expect(complete.stderr).toContain(
      "the runtime did not export its ledger to gs://no-such-bucket-here (no ledgerUri in its summary), so its result cannot be read back: cohort: ledger export failed:",
    );
  });
});

describe("gke run-forget (delete of the summary)", () => {
  it("keeps the ledger with keepLedgers true; deletes the run's objects with false, idempotently; refuses a run elsewhere", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const r = await runBundle(bundle, ["run", "--spec", writeSpec(), "--artifacts", path.join(tempDir("gke-steps-artifacts"), "a"), "--ledger-export", DESTINATION], {
      env: { STORAGE_EMULATOR_HOST: gcs!.endpoint },
    });
    expect(r.code, r.stderr).toBe(0);
    // What the summary Command stored: the step's own output.
    const summary = step("run-summary", {}, `${r.stderr}${r.stdout}`);
    expect(summary.status, summary.stderr).toBe(0);
    const stored = summary.stdout;
    const { runId } = parseRunSummary(stored);
    const objects = () => gcs!.list(`${runId}/`);
    expect(await objects()).toHaveLength(3);
    expect(step("run-forget", { COHORT_KEEP_LEDGERS: "true", PULUMI_COMMAND_STDOUT: stored }).status).toBe(0);
    expect(await objects()).toHaveLength(3);
    const elsewhere = step("run-forget", { COHORT_KEEP_LEDGERS: "false", PULUMI_COMMAND_STDOUT: stored, COHORT_LEDGER_URI: `${DESTINATION}/other` });
    expect(elsewhere.status).toBe(1);
    expect(elsewhere.stderr).toContain(`refusing to delete "${DESTINATION}/${runId}": not the ledger of run ${runId} directly under ${DESTINATION}/other`);
    expect(await objects()).toHaveLength(3);
    const forgot = step("run-forget", { COHORT_KEEP_LEDGERS: "false", PULUMI_COMMAND_STDOUT: stored });
    expect([forgot.status, forgot.stderr]).toEqual([0, `[cohort-lab gke] deleted 3 object(s) of ${DESTINATION}/${runId} (keepLedgers is false)\n`]);
    expect(await objects()).toEqual([]);
    expect(step("run-forget", { COHORT_KEEP_LEDGERS: "false", PULUMI_COMMAND_STDOUT: stored }).status).toBe(0);
    // The first run's ledger is untouched.
    expect(await gcs!.list(`${run!.summary.runId}/`)).toHaveLength(3);
  });
});

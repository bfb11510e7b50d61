/**
 * components/gke/steps.cjs `ledger-guard`, the `gke` profile's destroy guard, run for real: the step as a Node child
 * process with the environment its Command gives it (components/gke/Lifecycle.ts `ledgerGuard`: COHORT_BUCKET,
 * COHORT_DELETE_LEDGERS, COHORT_RUNTIME_BUNDLE) against the real fake-gcs-server (test/runtime/gcs-emulator.ts) and
 * the shipped bundle, whose `cohort ledger list --json` / `ledger delete --all` make every GCS call. The ledger in the
 * bucket is a real run's export (`cohort run --ledger-export`).
 *
 * Covers: an empty bucket passes; a bucket holding a ledger refuses naming `cohort-lab:gke.deleteLedgers` and the
 * count, leaving the objects; with deleteLedgers true the bucket is emptied and the guard passes; a store that cannot
 * be reached, a bucket that does not exist and a missing bundle refuse (cannot tell, so refuse). The park guard
 * (`park-check`, kubectl against a real kube-apiserver) is test/sim/gke-park-guard.test.ts. Without the emulator
 * every test skips with the reason printed.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRunSummary } from "../../runtime/index.js";
import { gcsEmulatorSkipReason as skipReason, startGcsEmulator, type GcsEmulator } from "../runtime/gcs-emulator.js";
import { buildBundle, runBundle, tempDir } from "../runtime/process-helpers.js";

const SCRIPT = path.join(__dirname, "..", "..", "components", "gke", "steps.cjs");
const BUCKET = "gke-guarded-ledgers";
const KEY = "cohort-lab:gke.deleteLedgers";
if (skipReason !== undefined) console.warn(`gke guard tests SKIPPED: ${skipReason}`);

let gcs: GcsEmulator | undefined;
let bundle = "";

/** `ledger-guard` with the Command's environment (and the emulator as the store). */
function ledgerGuard(deleteLedgers: boolean, extra: Record<string, string> = {}): { status: number; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    STORAGE_EMULATOR_HOST: gcs?.endpoint ?? "",
    COHORT_BUCKET: BUCKET,
    COHORT_DELETE_LEDGERS: String(deleteLedgers),
    COHORT_RUNTIME_BUNDLE: bundle,
    ...extra,
  };
  const r = spawnSync(process.execPath, [SCRIPT, "ledger-guard"], { env, encoding: "utf8", timeout: 120_000 });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

async function exportRun(): Promise<string> {
  const spec = path.join(tempDir("gke-guard-spec"), "cohort.json");
  const roles = [{ name: "w", replicas: 1, app: { command: ["sh", "-c", "echo ready; exec sleep 1000"], port: false }, readiness: { log: { pattern: "^ready$" } } }];
  fs.writeFileSync(spec, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "guard", stopGracePeriod: "2s", roles }));
  const r = await runBundle(bundle, ["run", "--spec", spec, "--artifacts", path.join(tempDir("gke-guard-artifacts"), "a"), "--ledger-export", `gs://${BUCKET}`], {
    env: { STORAGE_EMULATOR_HOST: gcs!.endpoint },
  });
  if (r.code !== 0) throw new Error(`the cohort run failed (${r.code}): ${r.stderr}`);
  return parseRunSummary(r.stdout).runId;
}

beforeAll(async () => {
  if (skipReason !== undefined) return;
  gcs = await startGcsEmulator(BUCKET);
  bundle = await buildBundle({ shipped: true });
}, 300_000);

afterAll(async () => {
  await gcs?.stop();
});

describe("gke ledger-guard (destroy: the bucket's ledgers)", () => {
  let runId = "";

  it("passes on an empty bucket, with deleteLedgers false", (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const r = ledgerGuard(false);
    expect([r.status, r.stderr]).toEqual([0, ""]);
  });

  it("refuses a bucket holding a ledger, naming the key, the count and the run, and leaves every object", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    runId = await exportRun();
    await gcs!.put("notes/readme.txt", Buffer.from("not a ledger\n"));
    const before = await gcs!.list("");
    expect(before).toEqual([`${runId}/completion.json`, `${runId}/manifest.json`, `${runId}/records.ndjson`, "notes/readme.txt"]);
    const r = ledgerGuard(false);
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe(`${KEY}: gs://${BUCKET} holds 4 object(s) (1 run ledger(s): ${runId}); destroy would lose them. Copy them out, or set gke.deleteLedgers to true`);
    expect(await gcs!.list("")).toEqual(before);
    // Not "true" is not true.
    expect(ledgerGuard(false, { COHORT_DELETE_LEDGERS: "yes" }).status).toBe(1);
    expect(await gcs!.list("")).toEqual(before);
  });

  it("refuses when it cannot tell: the store unreachable, the bucket missing, the bundle gone; nothing is deleted", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const before = await gcs!.list("");
    expect(before.length).toBeGreaterThan(0);
    // A closed port: the SDK retries, then the listing fails (measured here: about 16 s).
    const unreachable = ledgerGuard(true, { STORAGE_EMULATOR_HOST: "http://127.0.0.1:1" });
    expect(unreachable.status).toBe(1);
    expect(unreachable.stderr.trim()).toMatch(
      new RegExp(
        `^${KEY}: cannot tell whether gs://${BUCKET} holds ledgers \\(cohort: ledger list failed: listing gs://${BUCKET} failed: .*ECONNREFUSED.*\\); destroy is refused until it can$`,
      ),
    );
    const missing = ledgerGuard(true, { COHORT_BUCKET: "no-such-bucket-here" });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain(`${KEY}: cannot tell whether gs://no-such-bucket-here holds ledgers (cohort: ledger list failed: listing gs://no-such-bucket-here failed:`);
    const gone = ledgerGuard(true, { COHORT_RUNTIME_BUNDLE: path.join(tempDir("gke-guard-nobundle"), "cohort.cjs") });
    expect(gone.status).toBe(1);
    expect(gone.stderr).toMatch(new RegExp(`^${KEY}: cannot tell whether gs://${BUCKET} holds ledgers: the runtime bundle .* is gone; run npm run build`));
    expect(await gcs!.list("")).toEqual(before);
  }, 90_000);

  it("with deleteLedgers true empties the bucket through the runtime and passes; again on the empty bucket", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(runId).not.toBe("");
    const r = ledgerGuard(true);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr.trim()).toBe(`[cohort-lab gke] deleted 4 object(s) under gs://${BUCKET} (1 run ledger(s); gke.deleteLedgers is true)`);
    expect(await gcs!.list("")).toEqual([]);
    expect(ledgerGuard(true)).toMatchObject({ status: 0, stderr: "" });
  });
});

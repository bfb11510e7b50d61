/**
 * The GCS ledger for real: fake-gcs-server (the `gcs` tool set, `npm run toolchain -- gcs`) on a loopback port
 * with a temporary directory as its filesystem backend, and the shipped bundle (copied alone, no node_modules)
 * pointed at it with `STORAGE_EMULATOR_HOST`. A real cohort (process backend) runs with `--ledger-export`; the
 * objects are checked for the layout of the local run directory; `cohort ledger verify|show gs://…` pass; then
 * the objects are damaged through the emulator's API (as another writer of the bucket would) and verify fails
 * naming the object: completion.json deleted, records.ndjson truncated, a record altered; `ledger list` and
 * `ledger delete --all` list and empty a prefix. Without the emulator
 * every test skips with the reason printed. The emulator is stopped after the tests.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatorOrigin } from "../../runtime/gcs/index";
import { deleteAllRemote, parseRunSummary, type LedgerObjectStore } from "../../runtime/index";
import { gcsEmulatorSkipReason as skipReason, startGcsEmulator, type GcsEmulator } from "./gcs-emulator";
import { buildBundle, runBundle, tempDir, type CliExit } from "./process-helpers";

const BUCKET = "cohort-ledgers";
if (skipReason !== undefined) console.warn(`GCS ledger tests SKIPPED: ${skipReason}`);

let gcs: GcsEmulator | undefined;
let endpoint = "";
let bundle = "";

const api = (method: string, url: string, body?: string | Buffer, contentType?: string): Promise<Response> => gcs!.api(method, url, body, contentType);
const objectUrl = (name: string) => `/storage/v1/b/${BUCKET}/o/${encodeURIComponent(name)}`;
const listObjects = (prefix: string): Promise<string[]> => gcs!.list(prefix);
const getObject = (name: string): Promise<Buffer> => gcs!.get(name);
const putObject = (name: string, bytes: Buffer): Promise<void> => gcs!.put(name, bytes);
const deleteObject = (name: string): Promise<void> => gcs!.remove(name);

const cohort = (args: string[]): Promise<CliExit> => runBundle(bundle, args, { env: { STORAGE_EMULATOR_HOST: endpoint } });

function writeSpec(): string {
  const file = path.join(tempDir("gcs-spec"), "cohort.json");
  fs.writeFileSync(
    file,
    JSON.stringify({
      apiVersion: "cohort-lab/v1",
      kind: "Cohort",
      name: "gcs",
      stopGracePeriod: "2s",
      roles: [{ name: "w", replicas: 2, app: { command: ["sh", "-c", "echo ready; exec sleep 1000"], port: false }, readiness: { log: { pattern: "^ready$" } } }],
    }),
  );
  return file;
}

beforeAll(async () => {
  if (skipReason !== undefined) return;
  gcs = await startGcsEmulator(BUCKET);
  endpoint = gcs.endpoint;
  bundle = await buildBundle({ shipped: true });
}, 300_000);

afterAll(async () => {
  await gcs?.stop();
});

describe("STORAGE_EMULATOR_HOST", () => {
  it("is read as the emulator's origin in each of its usual forms", () => {
    expect(emulatorOrigin(undefined)).toBeUndefined();
    expect(emulatorOrigin("")).toBeUndefined();
    expect(emulatorOrigin("127.0.0.1:4443")).toBe("http://127.0.0.1:4443");
    expect(emulatorOrigin("http://127.0.0.1:4443/")).toBe("http://127.0.0.1:4443");
    expect(emulatorOrigin("http://127.0.0.1:4443/storage/v1")).toBe("http://127.0.0.1:4443");
    expect(emulatorOrigin("https://gcs.example:443")).toBe("https://gcs.example:443");
  });
});

describe("deleteAllRemote (an in-memory store)", () => {
  it("deletes every completion.json before any other object, and only under the prefix", async () => {
    const names = new Set(["p/r1/manifest.json", "p/r1/records.ndjson", "p/r1/completion.json", "p/r2/completion.json", "p/r2/manifest.json", "p/x.txt", "px/y"]);
    const order: string[] = [];
    const store: LedgerObjectStore = {
      put: () => Promise.reject(new Error("unused")),
      get: () => Promise.reject(new Error("unused")),
      delete: (name) => Promise.resolve(names.delete(name) && order.push(name) > 0),
      list: (prefix) => Promise.resolve([...names].filter((n) => n.startsWith(prefix)).sort()),
    };
    const done = await deleteAllRemote("gs://bkt/p", () => store);
    expect(order.slice(0, 2).sort()).toEqual(["p/r1/completion.json", "p/r2/completion.json"]);
    expect(order).toHaveLength(6);
    expect(done.deleted).toEqual(order.map((n) => `gs://bkt/${n}`));
    expect([...names]).toEqual(["px/y"]);
  });
});

describe("the ledger in GCS (fake-gcs-server)", () => {
  let runId = "";
  let uri = "";
  const name = (file: string) => `exports/${runId}/${file}`;

  it("cohort run --ledger-export uploads the three ledger files to <prefix>/<runId>/, completion.json last", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const artifacts = path.join(tempDir("gcs-artifacts"), "a");
    const r = await cohort(["run", "--spec", writeSpec(), "--artifacts", artifacts, "--ledger-export", `gs://${BUCKET}/exports/`]);
    expect(r.code, r.stderr).toBe(0);
    const summary = parseRunSummary(r.stdout);
    runId = summary.runId;
    uri = `gs://${BUCKET}/exports/${runId}`;
    expect(summary.outcome).toBe("succeeded");
    expect(JSON.parse(r.stdout.trim()).ledgerUri).toBe(uri);
    expect(r.stderr).toContain(`cohort: ledger exported to ${uri}/ (3 objects,`);
    // The same relative layout as the local run directory, byte for byte.
    expect(await listObjects(`exports/${runId}/`)).toEqual([name("completion.json"), name("manifest.json"), name("records.ndjson")]);
    for (const file of ["manifest.json", "records.ndjson", "completion.json"]) {
      expect((await getObject(name(file))).equals(fs.readFileSync(path.join(summary.ledgerPath, file))), file).toBe(true);
    }
    // Upload order: each object's creation time is not before the previous one's; completion.json is the newest.
    const created = await Promise.all(
      ["manifest.json", "records.ndjson", "completion.json"].map(async (file) =>
        Date.parse(((await (await api("GET", objectUrl(name(file)))).json()) as { timeCreated: string }).timeCreated),
      ),
    );
    expect([...created].sort((a, b) => a - b)).toEqual(created);
  });

  it("cohort ledger verify and show gs://… download the run and pass, leaving no temporary directory", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    expect(uri).not.toBe("");
    const before = new Set(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith("cohort-ledger-")));
    const verified = await cohort(["ledger", "verify", uri]);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(new RegExp(`^ok: ${runId}: \\d+ records, outcome succeeded \\(${uri}\\)\\n$`));
    const shown = await cohort(["ledger", "show", uri]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`run ${runId}`);
    expect(shown.stdout).toContain("w-1");
    const after = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith("cohort-ledger-") && !before.has(n));
    expect(after).toEqual([]);
  });

  it("a run address with nothing exported is manifest-missing, naming the object", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const r = await cohort(["ledger", "verify", `gs://${BUCKET}/exports/nothing-here`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`manifest-missing: gs://${BUCKET}/exports/nothing-here/manifest.json does not exist`);
  });

  it("without completion.json verify fails: run incomplete or export torn", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const completion = await getObject(name("completion.json"));
    await deleteObject(name("completion.json"));
    try {
      const r = await cohort(["ledger", "verify", uri]);
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(
        `cohort: ledger verify failed: ledger ${uri}: completion-missing: ${uri}/completion.json does not exist: run incomplete or export torn (completion.json is uploaded last, after the other two)`,
      );
    } finally {
      await putObject(name("completion.json"), completion);
    }
  });

  it("a truncated records.ndjson fails as torn-final-line, naming the object", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const records = await getObject(name("records.ndjson"));
    await putObject(name("records.ndjson"), records.subarray(0, records.length - 20));
    try {
      const r = await cohort(["ledger", "verify", uri]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`ledger ${uri}: torn-final-line at line \\d+: ${uri}/records\\.ndjson: the object ends inside line \\d+ .*truncated or its upload torn`));
    } finally {
      await putObject(name("records.ndjson"), records);
    }
  });

  it("an altered record breaks the hash chain at the next line, naming the object", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const records = await getObject(name("records.ndjson"));
    const lines = records.toString("utf8").split("\n");
    lines[2] = lines[2]!.replace(/"elapsedMs":([0-9.]+)/, (_m, n: string) => `"elapsedMs":${Number(n) + 0.001}`);
    await putObject(name("records.ndjson"), Buffer.from(lines.join("\n")));
    try {
      const r = await cohort(["ledger", "verify", uri]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`ledger ${uri}: hash-chain-broken at line 4: ${uri}/records.ndjson: expected prev = SHA-256 of line 3`);
    } finally {
      await putObject(name("records.ndjson"), records);
    }
    // Restored: it verifies again.
    expect((await cohort(["ledger", "verify", uri])).code).toBe(0);
  });

  it("cohort ledger verify --json prints one JSON line with the verified completion", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const r = await cohort(["ledger", "verify", "--json", uri]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split("\n").filter((l) => l !== "")).toHaveLength(1);
    const v = JSON.parse(r.stdout) as { ledger: string; runId: string; outcome: string; firstFailure: unknown; completion: { outcome: string; records: number } };
    expect(v).toMatchObject({ ledger: uri, runId, outcome: "succeeded", firstFailure: null });
    expect(v.completion).toEqual(JSON.parse((await getObject(name("completion.json"))).toString("utf8")));
  });

  it("cohort ledger delete removes a run's objects (completion.json first), twice without error; a directory is refused", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const artifacts = path.join(tempDir("gcs-artifacts"), "a");
    const run = await cohort(["run", "--spec", writeSpec(), "--artifacts", artifacts, "--ledger-export", `gs://${BUCKET}/doomed`]);
    expect(run.code, run.stderr).toBe(0);
    const target = parseRunSummary(run.stdout).ledgerUri!;
    const first = await cohort(["ledger", "delete", target]);
    expect([first.code, first.stdout]).toEqual([0, `deleted 3 object(s) of ${target}\n`]);
    expect(await listObjects(`doomed/`)).toEqual([]);
    const again = await cohort(["ledger", "delete", target]);
    expect([again.code, again.stdout]).toEqual([0, `deleted 0 object(s) of ${target}\n`]);
    const dir = await cohort(["ledger", "delete", artifacts]);
    expect(dir.code).toBe(2);
    expect(dir.stderr).toContain("ledger delete: works on a gs:// ledger only");
  });

  it("cohort ledger list gs://BUCKET[/PREFIX] lists every object under it and the runs among them; --json as one line", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const artifacts = path.join(tempDir("gcs-artifacts"), "a");
    const exported = await cohort(["run", "--spec", writeSpec(), "--artifacts", artifacts, "--ledger-export", `gs://${BUCKET}/listed`]);
    expect(exported.code, exported.stderr).toBe(0);
    const listedRun = parseRunSummary(exported.stdout).runId;
    // Not a ledger, and a name that only starts like the prefix (never under it).
    await putObject("listed/notes.txt", Buffer.from("x"));
    await putObject("listedx/other.txt", Buffer.from("y"));
    const text = await cohort(["ledger", "list", `gs://${BUCKET}/listed/`]);
    expect(text.code, text.stderr).toBe(0);
    const under = ["completion.json", "manifest.json", "records.ndjson"].map((f) => `gs://${BUCKET}/listed/${listedRun}/${f}`);
    expect(text.stdout).toBe(
      [`gs://${BUCKET}/listed/notes.txt`, ...under]
        .sort()
        .map((l) => `${l}\n`)
        .join(""),
    );
    const json = await cohort(["ledger", "list", "--json", `gs://${BUCKET}/listed`]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout.split("\n").filter((l) => l !== "")).toHaveLength(1);
    expect(JSON.parse(json.stdout)).toEqual({ uri: `gs://${BUCKET}/listed`, objects: [`gs://${BUCKET}/listed/notes.txt`, ...under].sort(), runs: [listedRun] });
    // The bucket's root: every object, the runs directly under it.
    const root = JSON.parse((await cohort(["ledger", "list", "--json", `gs://${BUCKET}`])).stdout) as { objects: string[]; runs: string[] };
    expect(root.objects).toContain(`gs://${BUCKET}/listedx/other.txt`);
    expect(root.runs).not.toContain(listedRun);
    // Nothing there: an empty listing, exit 0; a bucket that does not exist: one line, exit 1 (never an empty listing).
    expect(await cohort(["ledger", "list", `gs://${BUCKET}/nothing-here`])).toMatchObject({ code: 0, stdout: "" });
    const missing = await cohort(["ledger", "list", "--json", "gs://no-such-bucket-here"]);
    expect([missing.code, missing.stdout]).toEqual([1, ""]);
    expect(missing.stderr.trim()).toMatch(/^cohort: ledger list failed: listing gs:\/\/no-such-bucket-here failed: /);
    const dir = await cohort(["ledger", "list", artifacts]);
    expect(dir.code).toBe(2);
    expect(dir.stderr).toContain("ledger list: works on a gs:// address only");
  });

  it("cohort ledger delete --all deletes every object under the address and nothing beside it", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const before = await listObjects("listed");
    expect(before.length).toBeGreaterThan(1);
    const r = await cohort(["ledger", "delete", "--all", `gs://${BUCKET}/listed`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`deleted ${before.length - 1} object(s) under gs://${BUCKET}/listed\n`);
    expect(await listObjects("listed/")).toEqual([]);
    expect(await listObjects("listedx/")).toEqual(["listedx/other.txt"]);
    const again = await cohort(["ledger", "delete", "--all", `gs://${BUCKET}/listed`]);
    expect([again.code, again.stdout]).toEqual([0, `deleted 0 object(s) under gs://${BUCKET}/listed\n`]);
    await deleteObject("listedx/other.txt");
  });

  it("an export that cannot reach the store is one stderr line and exit 1; the local ledger is intact", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const artifacts = path.join(tempDir("gcs-artifacts"), "a");
    const r = await cohort(["run", "--spec", writeSpec(), "--artifacts", artifacts, "--ledger-export", "gs://no-such-bucket-here"]);
    expect(r.code).toBe(1);
    const summary = parseRunSummary(r.stdout);
    expect(summary.outcome).toBe("succeeded");
    expect(summary.ledgerUri).toBeUndefined();
    expect(r.stderr).toMatch(
      /cohort: ledger export failed: ledger export to gs:\/\/no-such-bucket-here\/gcs-\S+: uploading gs:\/\/no-such-bucket-here\/\S+\/manifest\.json failed: .*\(completion\.json was not uploaded\)/,
    );
    expect((await cohort(["ledger", "verify", summary.ledgerPath])).code).toBe(0);
  });

  it("a malformed --ledger-export is a usage error before anything is created", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const artifacts = path.join(tempDir("gcs-artifacts"), "a");
    const r = await cohort(["run", "--spec", writeSpec(), "--artifacts", artifacts, "--ledger-export", "s3://x/y"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('cohort: run: --ledger-export "s3://x/y" is not a ledger address gs://<bucket>[/<prefix>]: it must start with gs://');
    expect(fs.existsSync(artifacts)).toBe(false);
    // The same destination from a --backend-config mapping (taken out before the backend sees its options).
    const config = path.join(tempDir("gcs-config"), "backend.yaml");
    fs.writeFileSync(config, "ledgerExport: gs://UPPER/x\n");
    const fromConfig = await cohort(["run", "--spec", writeSpec(), "--artifacts", artifacts, "--backend-config", config]);
    expect(fromConfig.code).toBe(2);
    expect(fromConfig.stderr).toContain('cohort: run: --backend-config ledgerExport "gs://UPPER/x" is not a ledger address');
    expect(fs.existsSync(artifacts)).toBe(false);
  });

  it("ledgerExport in --backend-config exports like the flag (the process backend never sees the key)", async (ctx) => {
    if (skipReason !== undefined) return ctx.skip(skipReason);
    const config = path.join(tempDir("gcs-config"), "backend.yaml");
    fs.writeFileSync(config, `ledgerExport: gs://${BUCKET}/from-config\n`);
    const r = await cohort(["run", "--spec", writeSpec(), "--artifacts", path.join(tempDir("gcs-artifacts"), "a"), "--backend-config", config]);
    expect(r.code, r.stderr).toBe(0);
    const summary = parseRunSummary(r.stdout);
    expect(summary.ledgerUri).toBe(`gs://${BUCKET}/from-config/${summary.runId}`);
    expect((await cohort(["ledger", "verify", summary.ledgerUri!])).code).toBe(0);
  });
});

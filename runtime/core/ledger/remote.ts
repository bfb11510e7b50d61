/**
 * The ledger in an object store (`gs://<bucket>/<prefix>`): the export after a run and the read-back that
 * `cohort ledger verify|show gs://…` runs. SDK-free: the store is an interface ({@link LedgerObjectStore});
 * runtime/gcs/ implements it with `@google-cloud/storage`, loaded only when a `gs://` address is used.
 *
 * Layout: a run's three ledger files go to `<prefix>/<runId>/<file>` in the bucket, the same relative layout as
 * the local run directory (`<artifacts>/<runId>/<file>`). Order: `manifest.json`, `records.ndjson`, then
 * `completion.json` LAST, each upload finished before the next starts, so a reader that sees completion.json
 * knows the other two objects are whole (an object write is atomic in GCS: readers see the old object or the
 * new one, never a part). Without completion.json the run is incomplete or its export was torn.
 *
 * Verification of a remote ledger downloads the three objects into a fresh temporary directory and runs the
 * same {@link verifyLedger} as for a local directory, with three stricter rules (an exported ledger is a
 * finished one): every object must exist (`manifest-missing`, `records-missing`, `completion-missing`), and
 * records.ndjson must end with a newline (`torn-final-line`: the object was truncated). Every error names the
 * `gs://` address of the object at fault and never the temporary directory.
 */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { CohortError, LedgerVerifyError, type LedgerVerifyCode } from "../errors";
import { LEDGER_FILES } from "./format";
import { parseCompletion } from "./read";
import { verifyLedger, type VerifyReport } from "./verify";
import type { Completion } from "./format";

/** A parsed `gs://<bucket>[/<prefix>]` address. */
export interface LedgerUri {
  readonly scheme: "gs";
  readonly bucket: string;
  /** Object name prefix without leading or trailing `/`; `""` for the bucket's root. */
  readonly prefix: string;
}

/** GCS bucket names: 3-63 characters (222 with dots), lower-case letters, digits, `-`, `_`, `.`; start and end alphanumeric. */
const BUCKET = /^[a-z0-9](?:[a-z0-9._-]{1,220}[a-z0-9])$/;

/** True when `target` is an object-store address (`gs://…`) rather than a directory. */
export function isLedgerUri(target: string): boolean {
  return target.startsWith("gs://");
}

/**
 * Parses `gs://<bucket>[/<prefix>]` (a trailing `/` is ignored).
 * @throws {CohortError} `ledger-uri-invalid` naming what is wrong (scheme, bucket name, empty or `.`/`..` segments).
 */
export function parseLedgerUri(uri: string): LedgerUri {
  const bad = (why: string): CohortError => new CohortError("ledger-uri-invalid", `${JSON.stringify(uri)} is not a ledger address gs://<bucket>[/<prefix>]: ${why}`);
  if (!uri.startsWith("gs://")) throw bad("it must start with gs://");
  const rest = uri.slice("gs://".length).replace(/\/+$/, "");
  const slash = rest.indexOf("/");
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  const prefix = slash === -1 ? "" : rest.slice(slash + 1);
  if (!BUCKET.test(bucket) || (!bucket.includes(".") && bucket.length > 63)) throw bad(`"${bucket}" is not a bucket name (3-63 lower-case letters, digits, -, _, .)`);
  if (prefix !== "" && prefix.split("/").some((s) => s === "" || s === "." || s === "..")) throw bad(`the prefix "${prefix}" has an empty, "." or ".." segment`);
  return { scheme: "gs", bucket, prefix };
}

/** `gs://<bucket>/<prefix>/<name>` (no doubled `/` for an empty prefix). */
export function formatLedgerUri(at: LedgerUri, ...names: readonly string[]): string {
  const key = [at.prefix, ...names].filter((s) => s !== "").join("/");
  return `gs://${at.bucket}${key === "" ? "" : `/${key}`}`;
}

/** The run's address under an export destination: `gs://<bucket>/<prefix>/<runId>`. */
export function runLedgerUri(destination: LedgerUri, runId: string): LedgerUri {
  return { ...destination, prefix: [destination.prefix, runId].filter((s) => s !== "").join("/") };
}

/** One bucket of an object store, as the export and the read-back need it. */
export interface LedgerObjectStore {
  /** Uploads the local `file` as object `name` (whole, or not at all). */
  put(name: string, file: string, contentType: string): Promise<void>;
  /** The object's bytes, or `undefined` when it does not exist. */
  get(name: string): Promise<Buffer | undefined>;
  /** Deletes object `name`; `false` when it did not exist (idempotent). */
  delete(name: string): Promise<boolean>;
  /** The names of every object whose name starts with `prefix` (`""`: the whole bucket), sorted. */
  list(prefix: string): Promise<string[]>;
}

/** Opens the store of a bucket (runtime/gcs/ for `gs://`). */
export type LedgerStoreFactory = (bucket: string) => LedgerObjectStore | Promise<LedgerObjectStore>;

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  [LEDGER_FILES.manifest]: "application/json",
  [LEDGER_FILES.records]: "application/x-ndjson",
  [LEDGER_FILES.completion]: "application/json",
};

/** Result of {@link exportLedger}. */
export interface ExportReport {
  /** `gs://<bucket>/<prefix>/<runId>`. */
  readonly uri: string;
  /** The objects written, in upload order (completion.json last). */
  readonly objects: readonly string[];
  /** Total bytes uploaded. */
  readonly bytes: number;
}

/**
 * Uploads a finished run directory's `manifest.json`, `records.ndjson` and `completion.json` to
 * `<destination>/<runId>/`, one after the other, completion.json last.
 * @throws {CohortError} `ledger-export-failed`: the run has no completion.json (nothing is uploaded: an export is
 *   of a finished run), a file is missing, or an upload failed (the object and the store's reason are named; the
 *   objects before it may exist, completion.json does not).
 */
export async function exportLedger(runDir: string, runId: string, destination: LedgerUri, store: LedgerObjectStore): Promise<ExportReport> {
  const at = runLedgerUri(destination, runId);
  const uri = formatLedgerUri(at);
  const files = [LEDGER_FILES.manifest, LEDGER_FILES.records, LEDGER_FILES.completion];
  for (const file of files) {
    if (!fs.existsSync(path.join(runDir, file)))
      throw new CohortError("ledger-export-failed", `ledger export to ${uri}: ${path.join(runDir, file)} does not exist; nothing was uploaded (an export needs a finished run)`);
  }
  let bytes = 0;
  const objects: string[] = [];
  for (const file of files) {
    const local = path.join(runDir, file);
    const name = [at.prefix, file].join("/");
    try {
      await store.put(name, local, CONTENT_TYPES[file]!);
    } catch (error) {
      throw new CohortError(
        "ledger-export-failed",
        `ledger export to ${uri}: uploading ${formatLedgerUri(at, file)} failed: ${error instanceof Error ? error.message : String(error)}${
          file === LEDGER_FILES.completion ? "" : ` (${LEDGER_FILES.completion} was not uploaded)`
        }`,
        { cause: error },
      );
    }
    bytes += fs.statSync(local).size;
    objects.push(formatLedgerUri(at, file));
  }
  return { uri, objects, bytes };
}

/** Where {@link fetchLedger} put a remote ledger, and which objects were absent. */
export interface FetchedLedger {
  /** `gs://<bucket>/<prefix>` of the run. */
  readonly uri: string;
  /** Temporary directory holding the objects that exist; removed by {@link FetchedLedger.remove}. */
  readonly dir: string;
  /** Ledger file names whose object does not exist. */
  readonly missing: readonly string[];
  remove(): void;
}

/** Downloads a run's three ledger objects into a fresh temporary directory (absent objects are listed, not written). */
export async function fetchLedger(at: LedgerUri, store: LedgerObjectStore): Promise<FetchedLedger> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "cohort-ledger-"));
  const remove = (): void => fs.rmSync(dir, { recursive: true, force: true });
  const missing: string[] = [];
  try {
    for (const file of [LEDGER_FILES.manifest, LEDGER_FILES.records, LEDGER_FILES.completion]) {
      let bytes: Buffer | undefined;
      try {
        bytes = await store.get([at.prefix, file].filter((s) => s !== "").join("/"));
      } catch (error) {
        throw new CohortError("ledger-fetch-failed", `downloading ${formatLedgerUri(at, file)} failed: ${error instanceof Error ? error.message : String(error)}`, {
          cause: error,
        });
      }
      if (bytes === undefined) missing.push(file);
      else await fsp.writeFile(path.join(dir, file), bytes);
    }
  } catch (error) {
    remove();
    throw error;
  }
  return { uri: formatLedgerUri(at), dir, missing, remove };
}

/** The ledger file a verification code is about (for naming the object at fault). */
function objectOf(code: LedgerVerifyCode): string | undefined {
  if (code.startsWith("manifest-") || code === "spec-digest-mismatch") return LEDGER_FILES.manifest;
  if (code.startsWith("completion-") || code === "count-mismatch" || code === "records-digest-mismatch") return LEDGER_FILES.completion;
  if (["torn-final-line", "blank-line", "invalid-json", "record-invalid", "seq-gap", "seq-mismatch", "hash-chain-broken", "records-missing"].includes(code))
    return LEDGER_FILES.records;
  return undefined;
}

/**
 * Rewrites an error about the temporary copy `fetched.dir` so it names the remote run (`ledger gs://…: <code> …`)
 * and, when one object is at fault, that object's address; other errors pass through with the directory replaced.
 */
export function remoteError(error: unknown, fetched: Pick<FetchedLedger, "uri" | "dir">): unknown {
  if (error instanceof LedgerVerifyError) {
    const file = objectOf(error.code);
    const detail = error.detail.split(fetched.dir).join(fetched.uri);
    return new LedgerVerifyError(error.code, fetched.uri, file === undefined ? detail : `${fetched.uri}/${file}: ${detail}`, error.line, error.byteOffset);
  }
  if (error instanceof CohortError) return new CohortError(error.code, error.message.split(fetched.dir).join(fetched.uri), { cause: error });
  return error;
}

/**
 * Verifies a downloaded ledger: every object present, records.ndjson not truncated, then {@link verifyLedger}.
 * @throws {LedgerVerifyError} naming `fetched.uri` and the object at fault.
 */
export async function verifyFetchedLedger(fetched: FetchedLedger): Promise<VerifyReport> {
  const missing = (code: LedgerVerifyCode, file: string, why: string): LedgerVerifyError =>
    new LedgerVerifyError(code, fetched.uri, `${fetched.uri}/${file} does not exist: ${why}`);
  if (fetched.missing.includes(LEDGER_FILES.manifest)) throw missing("manifest-missing", LEDGER_FILES.manifest, "no ledger was exported here (or it was deleted)");
  if (fetched.missing.includes(LEDGER_FILES.completion))
    throw missing("completion-missing", LEDGER_FILES.completion, `run incomplete or export torn (${LEDGER_FILES.completion} is uploaded last, after the other two)`);
  if (fetched.missing.includes(LEDGER_FILES.records)) throw missing("records-missing", LEDGER_FILES.records, `it was deleted after the export (${LEDGER_FILES.completion} exists)`);
  const records = await fsp.readFile(path.join(fetched.dir, LEDGER_FILES.records));
  if (records.length > 0 && records[records.length - 1] !== 0x0a) {
    const lastNl = records.lastIndexOf(0x0a);
    const line = records.subarray(0, lastNl + 1).reduce((n, b) => (b === 0x0a ? n + 1 : n), 0) + 1;
    throw new LedgerVerifyError(
      "torn-final-line",
      fetched.uri,
      `${fetched.uri}/${LEDGER_FILES.records}: the object ends inside line ${line} (${records.length - lastNl - 1} bytes after the last newline, ${records.length} bytes in all): it was truncated or its upload torn`,
      line,
      lastNl + 1,
    );
  }
  try {
    return await verifyLedger(fetched.dir);
  } catch (error) {
    throw remoteError(error, fetched);
  }
}

/**
 * Downloads and verifies the ledger of one run at `uri` (`gs://<bucket>/<prefix>/<runId>`), removing the copy after.
 * @throws {LedgerVerifyError} as {@link verifyFetchedLedger}; {@link CohortError} `ledger-uri-invalid`, `ledger-fetch-failed`.
 */
export async function verifyRemoteLedger(uri: string, openStore: LedgerStoreFactory): Promise<VerifyReport> {
  const at = parseLedgerUri(uri);
  const fetched = await fetchLedger(at, await openStore(at.bucket));
  try {
    return await verifyFetchedLedger(fetched);
  } finally {
    fetched.remove();
  }
}

/**
 * Deletes the exported ledger of one run at `uri` (`gs://<bucket>/<prefix>/<runId>`): `completion.json` FIRST (so a
 * delete cut short leaves a ledger that reads as incomplete, never one that verifies with a part missing), then
 * `records.ndjson` and `manifest.json`. Objects already gone are skipped: deleting twice is not an error.
 * @returns the `gs://` addresses of the objects that existed and were deleted, in that order
 * @throws {CohortError} `ledger-uri-invalid`; `ledger-delete-failed` naming the object and the store's reason.
 */
export async function deleteRemoteLedger(uri: string, openStore: LedgerStoreFactory): Promise<{ readonly uri: string; readonly deleted: readonly string[] }> {
  const at = parseLedgerUri(uri);
  const store = await openStore(at.bucket);
  const deleted: string[] = [];
  for (const file of [LEDGER_FILES.completion, LEDGER_FILES.records, LEDGER_FILES.manifest]) {
    try {
      if (await store.delete([at.prefix, file].filter((s) => s !== "").join("/"))) deleted.push(formatLedgerUri(at, file));
    } catch (error) {
      throw new CohortError("ledger-delete-failed", `deleting ${formatLedgerUri(at, file)} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }
  return { uri: formatLedgerUri(at), deleted };
}

/**
 * Reads `completion.json` of the run at `uri` (what a cloud profile reads its `run` output back from).
 * @returns the parsed completion, or `null` when the object does not exist (the run is incomplete or its export torn)
 * @throws {LedgerVerifyError} `completion-invalid` naming the object.
 */
export async function readRemoteCompletion(uri: string, openStore: LedgerStoreFactory): Promise<Completion | null> {
  const at = parseLedgerUri(uri);
  const store = await openStore(at.bucket);
  const bytes = await store.get([at.prefix, LEDGER_FILES.completion].filter((s) => s !== "").join("/"));
  if (bytes === undefined) return null;
  const full = formatLedgerUri(at);
  try {
    return parseCompletion(full, bytes);
  } catch (error) {
    throw remoteError(error, { uri: full, dir: full });
  }
}

/** What is stored under an address (`ledger list`): every object, and the runs among them. */
export interface RemoteListing {
  /** `gs://<bucket>[/<prefix>]`. */
  readonly uri: string;
  /** The `gs://` address of every object under it (ledgers or not), sorted. */
  readonly objects: readonly string[];
  /** The run ids directly under it: `<prefix>/<runId>/` holding a ledger file (manifest.json, records.ndjson, completion.json). */
  readonly runs: readonly string[];
}

/** Object names under `at` (the prefix as a directory: `p/` matches `p/x`, never `px`). */
async function namesUnder(at: LedgerUri, store: LedgerObjectStore): Promise<string[]> {
  return (await store.list(at.prefix === "" ? "" : `${at.prefix}/`)).sort();
}

/**
 * Lists every object under `uri` (`gs://<bucket>[/<prefix>]`) and the run ledgers among them.
 * @throws {CohortError} `ledger-uri-invalid`; `ledger-list-failed` with the store's reason (a listing that fails
 *   says nothing about what the bucket holds).
 */
export async function listRemoteLedgers(uri: string, openStore: LedgerStoreFactory): Promise<RemoteListing> {
  const at = parseLedgerUri(uri);
  let names: string[];
  try {
    names = await namesUnder(at, await openStore(at.bucket));
  } catch (error) {
    throw new CohortError("ledger-list-failed", `listing ${formatLedgerUri(at)} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const base = at.prefix === "" ? 0 : at.prefix.length + 1;
  const ledgerFiles = new Set<string>([LEDGER_FILES.manifest, LEDGER_FILES.records, LEDGER_FILES.completion]);
  const runs = new Set<string>();
  for (const name of names) {
    const rel = name.slice(base).split("/");
    if (rel.length === 2 && rel[0] !== "" && ledgerFiles.has(rel[1]!)) runs.add(rel[0]!);
  }
  return { uri: formatLedgerUri(at), objects: names.map((n) => `gs://${at.bucket}/${n}`), runs: [...runs].sort() };
}

/**
 * Deletes EVERY object under `uri` (`gs://<bucket>[/<prefix>]`; no prefix: the whole bucket), ledgers or not: every
 * `completion.json` first (a delete cut short leaves ledgers that read as incomplete, never one that verifies with a
 * part missing), then the rest. Objects gone meanwhile are skipped.
 * @returns the `gs://` addresses of the objects deleted, in that order
 * @throws {CohortError} `ledger-uri-invalid`, `ledger-list-failed`; `ledger-delete-failed` naming the object.
 */
export async function deleteAllRemote(uri: string, openStore: LedgerStoreFactory): Promise<{ readonly uri: string; readonly deleted: readonly string[] }> {
  const at = parseLedgerUri(uri);
  const store = await openStore(at.bucket);
  let names: string[];
  try {
    names = await namesUnder(at, store);
  } catch (error) {
    throw new CohortError("ledger-list-failed", `listing ${formatLedgerUri(at)} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const isCompletion = (n: string): boolean => n === LEDGER_FILES.completion || n.endsWith(`/${LEDGER_FILES.completion}`);
  const ordered = [...names.filter(isCompletion), ...names.filter((n) => !isCompletion(n))];
  const deleted: string[] = [];
  for (const name of ordered) {
    try {
      if (await store.delete(name)) deleted.push(`gs://${at.bucket}/${name}`);
    } catch (error) {
      throw new CohortError("ledger-delete-failed", `deleting gs://${at.bucket}/${name} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }
  return { uri: formatLedgerUri(at), deleted };
}

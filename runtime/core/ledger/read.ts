/**
 * Reading a run directory (./format.ts): {@link readLedger}, and the parsers the verifier (./verify.ts) and
 * the run view (./view.ts) share.
 */
import * as fsp from "node:fs/promises";
import * as path from "node:path";
import { LedgerVerifyError } from "../errors";
import { hexBytes, invalidUtf8 } from "../text";
import { CompletionSchema, LEDGER_FILES, ManifestSchema, describeZodError, type Completion, type LedgerManifest, type LedgerRecord } from "./format";

/**
 * Read a run directory without checking the hash chain, digests or seq order (use `verifyLedger`
 * for that): parses manifest.json, every line of records.ndjson and completion.json if present.
 * A missing records.ndjson reads as no records (the run crashed before its first record).
 * @throws {LedgerVerifyError} `manifest-missing`, `invalid-utf8`, `manifest-invalid`, `torn-final-line`, `blank-line`,
 *   `invalid-json` (line number given) or `completion-invalid`.
 */
export async function readLedger(runDir: string): Promise<{ manifest: LedgerManifest; records: LedgerRecord[]; completion: Completion | null }> {
  const dir = path.resolve(runDir);
  const manifestBytes = await readOptional(path.join(dir, LEDGER_FILES.manifest));
  if (manifestBytes === undefined) throw await manifestMissing(dir);
  const manifest = parseManifest(dir, manifestBytes);
  const recordBytes = (await readOptional(path.join(dir, LEDGER_FILES.records))) ?? Buffer.alloc(0);
  const completionBytes = await readOptional(path.join(dir, LEDGER_FILES.completion));
  const records: LedgerRecord[] = [];
  for (const line of splitLines(dir, recordBytes, completionBytes !== undefined)) records.push(line.value);
  const completion = completionBytes === undefined ? null : parseCompletion(dir, completionBytes);
  return { manifest, records, completion };
}

/**
 * @internal The `manifest-missing` error for run directory `dir`, with a hint when `dir` is not a run directory:
 * it does not exist (`…; no such directory: give a run directory, <artifactRoot>/<runId>`), or it is an artifact
 * root holding runs (`…; this is an artifact root: give one of its run directories, e.g. <dir>/<run>`).
 */
export async function manifestMissing(dir: string): Promise<LedgerVerifyError> {
  const base = `${LEDGER_FILES.manifest} does not exist`;
  let hint = "";
  try {
    const entries = await fsp.readdir(dir, { withFileTypes: true });
    const runs: string[] = [];
    for (const e of entries) {
      if (e.isDirectory() && (await readOptional(path.join(dir, e.name, LEDGER_FILES.manifest)).catch(() => undefined)) !== undefined) runs.push(e.name);
    }
    if (runs.length > 0) hint = `; this is an artifact root: give one of its ${runs.length} run directories, e.g. ${path.join(dir, runs.sort().at(-1)!)}`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") hint = "; no such directory: give a run directory, <artifactRoot>/<runId>";
    else if (code === "ENOTDIR") hint = "; not a directory: give a run directory, <artifactRoot>/<runId>";
  }
  return new LedgerVerifyError("manifest-missing", dir, base + hint);
}

/** @internal Read a file, `undefined` if it does not exist. */
export async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return await fsp.readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * @internal Throws `invalid-utf8` naming the byte offset and the bytes when `bytes` (all of `file`) is not
 * well-formed UTF-8.
 */
function checkUtf8(dir: string, file: string, bytes: Buffer): void {
  const bad = invalidUtf8(bytes);
  if (bad !== undefined) throw new LedgerVerifyError("invalid-utf8", dir, `${file} is not valid UTF-8 at byte ${bad.offset}: ${hexBytes(bad.bytes)} is not a UTF-8 sequence`);
}

/** @internal Parse and shape-check manifest.json. @throws {LedgerVerifyError} `invalid-utf8`, `manifest-invalid`. */
export function parseManifest(dir: string, bytes: Buffer): LedgerManifest {
  checkUtf8(dir, LEDGER_FILES.manifest, bytes);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new LedgerVerifyError("manifest-invalid", dir, `${LEDGER_FILES.manifest} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = ManifestSchema.safeParse(value);
  if (!parsed.success) {
    const { path: p, reason } = describeZodError("manifest", parsed.error);
    throw new LedgerVerifyError("manifest-invalid", dir, `${p}: ${reason}`);
  }
  return value as LedgerManifest;
}

/** @internal Parse and shape-check completion.json. @throws {LedgerVerifyError} `invalid-utf8`, `completion-invalid`. */
export function parseCompletion(dir: string, bytes: Buffer): Completion {
  checkUtf8(dir, LEDGER_FILES.completion, bytes);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new LedgerVerifyError("completion-invalid", dir, `${LEDGER_FILES.completion} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = CompletionSchema.safeParse(value);
  if (!parsed.success) {
    const { path: p, reason } = describeZodError("completion", parsed.error);
    throw new LedgerVerifyError("completion-invalid", dir, `${p}: ${reason}`);
  }
  return value as Completion;
}

/** @internal One line of records.ndjson. */
export interface RawLine {
  /** 1-based line number. */
  readonly number: number;
  /** Byte offset of the line's first byte. */
  readonly offset: number;
  /** The line's bytes without the newline. */
  readonly bytes: Buffer;
  readonly value: LedgerRecord;
}

/**
 * @internal Split records.ndjson into parsed lines. A last line without `\n`, or a last line that does
 * not parse, is `torn-final-line` unless the ledger is complete (a completed ledger cannot have a torn
 * tail, so it is `invalid-json`). Lines must be well-formed UTF-8 (`invalid-utf8`, or torn on the last line of an
 * unfinished ledger) and JSON objects; blank lines are refused.
 */
export function* splitLines(dir: string, bytes: Buffer, complete: boolean): Generator<RawLine> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let offset = 0;
  let number = 0;
  while (offset < bytes.length) {
    number++;
    const nl = bytes.indexOf(0x0a, offset);
    const end = nl === -1 ? bytes.length : nl;
    const isLast = nl === -1 || nl === bytes.length - 1;
    const lineBytes = bytes.subarray(offset, end);
    const torn = (reason: string): LedgerVerifyError =>
      new LedgerVerifyError("torn-final-line", dir, `${reason} (${lineBytes.length} bytes from offset ${offset}); recoverLedger can cut it`, number, offset);
    if (nl === -1 && !complete) {
      throw torn("the final line has no terminating newline");
    }
    if (lineBytes.length === 0) throw new LedgerVerifyError("blank-line", dir, "expected a JSON object, found an empty line", number);
    const bad = invalidUtf8(bytes, offset, end);
    if (bad !== undefined) {
      // A torn write can stop inside a character: on the last line of an unfinished ledger that is torn.
      if (isLast && !complete) throw torn(`the final line is not valid UTF-8 at byte ${bad.offset}`);
      throw new LedgerVerifyError(
        "invalid-utf8",
        dir,
        `${LEDGER_FILES.records} is not valid UTF-8 at byte ${bad.offset} (line ${number}, byte ${bad.offset - offset} of the line): ${hexBytes(bad.bytes)} is not a UTF-8 sequence`,
        number,
        offset,
      );
    }
    let value: unknown;
    try {
      value = JSON.parse(decoder.decode(lineBytes));
    } catch (err) {
      if (isLast && !complete) throw torn(`the final line does not parse: ${(err as Error).message}`);
      throw new LedgerVerifyError("invalid-json", dir, `expected a JSON object, found unparsable text: ${(err as Error).message}`, number);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value))
      throw new LedgerVerifyError("invalid-json", dir, `expected a JSON object, found ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`, number);
    if (nl === -1) throw new LedgerVerifyError("invalid-json", dir, "expected the line to end with a newline (the ledger is complete, so this is not a torn write)", number);
    yield { number, offset, bytes: lineBytes, value: value as LedgerRecord };
    offset = end + 1;
  }
}

/**
 * The GCS implementation of the ledger's object store (runtime/core/ledger/remote.ts `LedgerObjectStore`), with
 * `@google-cloud/storage`. The SDK is a dynamic import on first use: the bundle (dist/cohort.cjs) carries it, but
 * esbuild wraps it so that its code is evaluated only when a run exports to, or a command reads from, `gs://…`;
 * a `host` run never loads it.
 *
 * Credentials and endpoint are the SDK's own: Application Default Credentials (on GKE, the Pod's Kubernetes
 * service account through Workload Identity and the metadata server), and `STORAGE_EMULATOR_HOST`
 * (e.g. `http://127.0.0.1:4443`), which points the SDK at an emulator and turns authentication off
 * (the ledger tests run against fake-gcs-server this way: `npm run toolchain -- gcs`).
 */
import { EventEmitter } from "node:events";
import type { LedgerObjectStore } from "../core/ledger/remote";

/** Retries: the SDK's exponential backoff, bounded so an unreachable store fails a run's export within two minutes. */
const TOTAL_TIMEOUT_S = 120;

/**
 * Opens one bucket.
 *
 * @param bucket - the bucket name (already checked by `parseLedgerUri`)
 */
export async function createGcsLedgerStore(bucket: string): Promise<LedgerObjectStore> {
  const { Storage, IdempotencyStrategy } = await import("@google-cloud/storage");
  // SDK 8.4.0 adds an 11th error/close listener to one internal PassThrough on some downloads, and Node then prints
  // a MaxListenersExceededWarning on stderr (seen intermittently in test/runtime/ledger-gcs.test.ts, in roughly one
  // `ledger verify gs://…` of three). It is not a leak of ours: raise the per-emitter default for this process, which
  // only gs:// commands reach.
  EventEmitter.defaultMaxListeners = Math.max(EventEmitter.defaultMaxListeners, 32);
  // Every write of a ledger object uploads the same bytes to the same name, so retrying it is safe.
  const emulator = emulatorOrigin(process.env.STORAGE_EMULATOR_HOST);
  const storage = new Storage({
    retryOptions: { autoRetry: true, totalTimeout: TOTAL_TIMEOUT_S, idempotencyStrategy: IdempotencyStrategy.RetryAlways },
    ...(emulator !== undefined ? { apiEndpoint: emulator } : {}),
  });
  // The SDK takes STORAGE_EMULATOR_HOST verbatim as the JSON API's base URL but builds upload URLs from the origin
  // (`<origin>/upload/storage/v1/...`), so `http://host:port` broke downloads and `http://host:port/storage/v1` broke
  // uploads (both measured against fake-gcs-server v1.56.1). Either form works with the base URL set from the origin.
  if (emulator !== undefined) storage.baseUrl = `${emulator}/storage/v1`;
  const b = storage.bucket(bucket);
  return {
    async put(name, file, contentType) {
      // One request (no resumable session: the files are small); the SDK checks the MD5/CRC32C the store reports.
      await b.upload(file, { destination: name, resumable: false, contentType, validation: "crc32c", metadata: { contentType, cacheControl: "no-store" } });
    },
    async get(name) {
      const f = b.file(name);
      try {
        // A download of a missing object makes the SDK (8.4.0) print MaxListenersExceededWarning on stderr; asking first does not.
        const [exists] = await f.exists();
        if (!exists) return undefined;
        // No SDK checksum check: the verifier checks every byte against the hash chain and completion.json's digests.
        const [bytes] = await f.download({ validation: false });
        return bytes;
      } catch (error) {
        if ((error as { code?: unknown }).code === 404) return undefined;
        throw error;
      }
    },
    async delete(name) {
      try {
        await b.file(name).delete();
        return true;
      } catch (error) {
        if ((error as { code?: unknown }).code === 404) return false;
        throw error;
      }
    },
    async list(prefix) {
      // Every page (autoPaginate); a bucket that does not exist is an error (404), never an empty listing.
      const [files] = await b.getFiles({ prefix, autoPaginate: true });
      return files.map((f) => f.name).sort();
    },
  };
}

/**
 * The emulator's origin from `STORAGE_EMULATOR_HOST` (`host:port`, `http://host:port` or `http://host:port/storage/v1`;
 * no scheme means `http://`, as the Go and Python SDKs read it), or `undefined` when it is unset or empty.
 */
export function emulatorOrigin(value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value.trim() : `http://${value.trim()}`;
  return withScheme.replace(/\/+$/, "").replace(/\/storage\/v1$/, "");
}

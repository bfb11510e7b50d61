/**
 * fake-gcs-server for the tests that need a real GCS API (test/runtime/ledger-gcs.test.ts, test/components/gke-run-steps.test.ts):
 * the `gcs` tool set's build (`npm run toolchain -- gcs`, common/gcs-catalog.ts) on a free loopback port, its
 * filesystem backend in a temporary directory, one bucket created, and the JSON-API calls the tests damage
 * objects with (as another writer of the bucket would). Without the build, {@link gcsEmulatorSkipReason} says why.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as net from "node:net";
import { findGcsEmulator } from "../../common/gcs-catalog";
import { tempDir } from "./process-helpers";

const found = findGcsEmulator();

/** Why the emulator cannot run here (not built), or `undefined`. */
export const gcsEmulatorSkipReason: string | undefined = "reason" in found ? found.reason : undefined;

/** A running emulator with one bucket. */
export interface GcsEmulator {
  /** `http://127.0.0.1:<port>`: the value of STORAGE_EMULATOR_HOST. */
  readonly endpoint: string;
  readonly bucket: string;
  /** One JSON-API request (`url` from the origin, e.g. `/storage/v1/b`). */
  api(method: string, url: string, body?: string | Buffer, contentType?: string): Promise<Response>;
  /** Object names under `prefix`, sorted. */
  list(prefix: string): Promise<string[]>;
  /** The object's bytes. @throws when it does not exist */
  get(name: string): Promise<Buffer>;
  /** Writes (replaces) the object. */
  put(name: string, bytes: Buffer): Promise<void>;
  /** Deletes the object. */
  remove(name: string): Promise<void>;
  /** SIGTERM (SIGKILL after 5 s), resolved once it exited. */
  stop(): Promise<void>;
}

/** A free loopback port (bound and released; the emulator binds it right after). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts the emulator and creates `bucket`.
 *
 * @throws when it is not built ({@link gcsEmulatorSkipReason}), does not answer within 20 s, or refuses the bucket
 */
export async function startGcsEmulator(bucket: string): Promise<GcsEmulator> {
  if (!("path" in found)) throw new Error(found.reason);
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const root = tempDir("gcs-backend");
  const child: ChildProcess = spawn(
    found.path,
    ["-scheme", "http", "-host", "127.0.0.1", "-port", String(port), "-public-host", `127.0.0.1:${port}`, "-backend", "filesystem", "-filesystem-root", root, "-log-level", "warn"],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr?.on("data", (chunk) => (stderr += chunk));
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      if ((await fetch(`${endpoint}/storage/v1/b`)).ok) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`fake-gcs-server did not start on ${endpoint}: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const api = (method: string, url: string, body?: string | Buffer, contentType = "application/json") =>
    fetch(`${endpoint}${url}`, { method, ...(body !== undefined ? { body, headers: { "content-type": contentType } } : {}) });
  const objectUrl = (name: string) => `/storage/v1/b/${bucket}/o/${encodeURIComponent(name)}`;
  const created = await api("POST", "/storage/v1/b?project=cohort-lab", JSON.stringify({ name: bucket }));
  if (created.status !== 200) throw new Error(`fake-gcs-server refused bucket ${bucket}: ${created.status} ${await created.text()}`);
  return {
    endpoint,
    bucket,
    api,
    async list(prefix) {
      const res = await api("GET", `/storage/v1/b/${bucket}/o?prefix=${encodeURIComponent(prefix)}`);
      if (res.status !== 200) throw new Error(`list ${prefix}: ${res.status}`);
      const json = (await res.json()) as { items?: Array<{ name: string }> };
      return (json.items ?? []).map((i) => i.name).sort();
    },
    async get(name) {
      const res = await api("GET", `${objectUrl(name)}?alt=media`);
      if (res.status !== 200) throw new Error(`get ${name}: ${res.status}`);
      return Buffer.from(await res.arrayBuffer());
    },
    async put(name, bytes) {
      const res = await api("POST", `/upload/storage/v1/b/${bucket}/o?uploadType=media&name=${encodeURIComponent(name)}`, bytes, "application/octet-stream");
      if (res.status !== 200) throw new Error(`put ${name}: ${res.status} ${await res.text()}`);
    },
    async remove(name) {
      const res = await api("DELETE", objectUrl(name));
      if (res.status !== 200 && res.status !== 204) throw new Error(`delete ${name}: ${res.status}`);
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * Credentials of a sim control plane, generated with node:crypto: one random bearer token per API client and
 * the service-account signing key pair. Every file is written 0600 inside the state dir; nothing secret is
 * ever put on a command line.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import { clientNames, tokenFileCsv, type ClientName, type SimLayout } from "./render";

/** A fresh 256-bit token, hex. */
function newToken(): string {
  return crypto.randomBytes(32).toString("hex");
}

/**
 * Creates `pki/` with the token file and the service-account key pair (ECDSA P-256: ES256 tokens).
 *
 * @returns the tokens by client (kept in memory to write kubeconfigs once the API server's CA exists).
 */
export function writeCredentials(l: SimLayout): Record<ClientName, string> {
  fs.mkdirSync(l.apiserverCertDir, { recursive: true, mode: 0o700 });
  const tokens = Object.fromEntries(clientNames.map((c) => [c, newToken()])) as Record<ClientName, string>;
  fs.writeFileSync(l.tokenFile, tokenFileCsv(tokens), { mode: 0o600 });
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  fs.writeFileSync(l.saPrivateKey, privateKey.export({ type: "sec1", format: "pem" }), { mode: 0o600 });
  fs.writeFileSync(l.saPublicKey, publicKey.export({ type: "spki", format: "pem" }), { mode: 0o600 });
  return tokens;
}

/**
 * Reads the API server's self-signed serving certificate bundle (`<cert-dir>/apiserver.crt`: the serving cert, then
 * the CA that signed it), or `undefined` while it is absent or still being written. kube-apiserver creates the file
 * with `os.WriteFile` (client-go `util/cert` WriteCert), which truncates before it writes, so a reader can see it
 * empty or cut; caching such a read would fail every later TLS check with "self-signed certificate in certificate
 * chain".
 *
 * @returns the PEM text when it holds at least one complete certificate and every block in it parses.
 */
export function readServingCa(file: string): string | undefined {
  let pem: string;
  try {
    pem = fs.readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0 || blocks.length !== (pem.match(/-----BEGIN CERTIFICATE-----/g) ?? []).length) return undefined;
  try {
    for (const b of blocks) new crypto.X509Certificate(b);
  } catch {
    return undefined;
  }
  return pem;
}

/**
 * Reads the tokens back from the token file (a later `simctl` process, e.g. `start-controller`).
 *
 * @throws Error when the file is missing or lacks a client.
 */
export function readTokens(l: SimLayout): Record<ClientName, string> {
  const out: Partial<Record<ClientName, string>> = {};
  for (const line of fs.readFileSync(l.tokenFile, "utf8").split("\n")) {
    const [token, user] = line.split(",");
    const client = user?.replace(/^cohort-lab:sim:/, "") as ClientName | undefined;
    if (token && client && (clientNames as readonly string[]).includes(client)) out[client] = token;
  }
  for (const c of clientNames) if (out[c] === undefined) throw new Error(`${l.tokenFile}: no token for ${c}`);
  return out as Record<ClientName, string>;
}

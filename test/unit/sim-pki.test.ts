/**
 * readServingCa: the API server's self-signed serving bundle is used only once it is complete. The fixture is a
 * serving cert followed by the CA that signed it (P-256, the shape kube-apiserver writes into `--cert-dir`).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readServingCa } from "../../simctl/pki";

const bundle = fs.readFileSync(path.join(__dirname, "..", "fixtures", "pki", "apiserver-bundle.crt"), "utf8");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sim-pki-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const f = path.join(dir, name);
  fs.writeFileSync(f, text);
  return f;
}

describe("readServingCa", () => {
  it("returns the whole bundle once both certificates are written", () => {
    expect(readServingCa(write("whole.crt", bundle))).toBe(bundle);
  });

  it("returns undefined while the file is absent, empty (truncated by the writer) or cut mid-block", () => {
    expect(readServingCa(path.join(dir, "absent.crt"))).toBeUndefined();
    expect(readServingCa(write("empty.crt", ""))).toBeUndefined();
    const secondBegin = bundle.indexOf("-----BEGIN CERTIFICATE-----", 10);
    expect(readServingCa(write("cut-second.crt", bundle.slice(0, secondBegin + 60)))).toBeUndefined();
    expect(readServingCa(write("cut-first.crt", bundle.slice(0, 200)))).toBeUndefined();
  });

  it("returns undefined when a complete-looking block does not parse as a certificate", () => {
    const garbled = bundle.replace(/(-----BEGIN CERTIFICATE-----\n)(.{8})/, "$1AAAAAAAA");
    expect(readServingCa(write("garbled.crt", garbled))).toBeUndefined();
  });
});

/**
 * components/kind/steps.cjs `load-images` and the built-tool path of every step, run for real (Node child
 * processes) against stand-in `docker` and `kind` executables that keep each node's containerd image names in
 * files and answer the calls the script makes the way the real tools do (`kind get nodes` one name per line,
 * `ctr images ls` a REF/TYPE/DIGEST table, `crictl inspecti` exit 1 for an unknown reference). test/local runs the
 * same step against real kind nodes.
 *
 * Covers: an image is loaded once into every node and made resolvable by its digest reference; an image already
 * resolvable everywhere is skipped; a digest that differs from the one the archive was built with is refused,
 * naming the node, both digests and the fix; a missing archive is refused with the command that builds it; kind and
 * kubectl built by the toolchain are checked against their stamp's SHA-256 (no download) and a changed binary is
 * refused; the built node image's Docker image ID is checked before kind runs.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";

const SCRIPT = path.join(__dirname, "..", "..", "components", "kind", "steps.cjs");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-images-"));
const bin = path.join(tmp, "bin");
const state = path.join(tmp, "state");
fs.mkdirSync(bin);
const DIGEST = `sha256:${"1".repeat(64)}`;
const OTHER = `sha256:${"2".repeat(64)}`;

/** Stand-in kind: two nodes; `load image-archive` writes the archive's `ref digest` line into each node's name list. */
const FAKE_KIND = `#!/usr/bin/env node
const fs = require("node:fs"), path = require("node:path");
const a = process.argv.slice(2);
fs.appendFileSync(path.join(process.env.FAKE_STATE, "calls.log"), "kind " + a.join(" ") + "\\n");
const nodes = ["c-control-plane", "c-worker"];
if (a[0] === "get" && a[1] === "nodes") process.stdout.write(nodes.join("\\n") + "\\n");
else if (a[0] === "load" && a[1] === "image-archive") {
  const [ref, digest] = fs.readFileSync(a[2], "utf8").trim().split(" ");
  for (const n of nodes) fs.appendFileSync(path.join(process.env.FAKE_STATE, n), ref + " " + (process.env.FAKE_IMPORT_DIGEST || digest) + "\\n");
} else { process.stderr.write("fake kind: unsupported " + a.join(" ") + "\\n"); process.exit(2); }
`;

/** Stand-in docker: `exec <node> ctr|crictl …` against the node's name list file. */
const FAKE_DOCKER = `#!/usr/bin/env node
const fs = require("node:fs"), path = require("node:path");
const a = process.argv.slice(2);
fs.appendFileSync(path.join(process.env.FAKE_STATE, "calls.log"), "docker " + a.join(" ") + "\\n");
if (a[0] === "info") { process.stdout.write("20.10.24\\n"); process.exit(0); }
if (a[0] === "image" && a[1] === "inspect") { const id = process.env.FAKE_IMAGE_ID; if (!id) process.exit(1); process.stdout.write(id + "\\n"); process.exit(0); }
if (a[0] !== "exec") { process.stderr.write("fake docker: unsupported " + a.join(" ") + "\\n"); process.exit(2); }
const file = path.join(process.env.FAKE_STATE, a[1]);
const rows = fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim().split("\\n").filter(Boolean).map((l) => l.split(" ")) : [];
const cmd = a.slice(2);
if (cmd[0] === "crictl" && cmd[1] === "inspecti") {
  const ref = cmd[cmd.length - 1];
  process.exit(rows.some(([name]) => name === ref) ? 0 : 1);
}
if (cmd[0] === "ctr" && cmd.includes("ls")) {
  const want = cmd[cmd.length - 1].replace(/^name==/, "");
  process.stdout.write("REF TYPE DIGEST SIZE PLATFORMS LABELS\\n");
  for (const [name, digest] of rows) if (name === want) process.stdout.write(name + " application/vnd.docker.distribution.manifest.v2+json " + digest + " 1.0MiB linux/amd64 -\\n");
  process.exit(0);
}
if (cmd[0] === "ctr" && cmd.includes("tag")) {
  const [src, dst] = cmd.slice(-2);
  const row = rows.find(([name]) => name === src);
  if (!row) { process.stderr.write("ctr: image " + src + ": not found\\n"); process.exit(1); }
  fs.appendFileSync(file, dst + " " + row[1] + "\\n");
  process.exit(0);
}
process.stderr.write("fake docker: unsupported exec " + cmd.join(" ") + "\\n"); process.exit(2);
`;

function install(name: string, text: string): string {
  fs.writeFileSync(path.join(bin, name), text, { mode: 0o755 });
  return createHash("sha256").update(text).digest("hex");
}
const kindSha = install("kind", FAKE_KIND);
install("docker", FAKE_DOCKER);
const archive = path.join(tmp, "kueue.tar");
fs.writeFileSync(archive, `cohort-lab.local/kueue:v0.17.0 ${DIGEST}\n`);
const image = { ref: "cohort-lab.local/kueue:v0.17.0", digest: DIGEST, archive };

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: `${bin}:${process.env.PATH ?? ""}`,
    FAKE_STATE: state,
    // Built by the toolchain: no URL, the stamp's SHA-256.
    COHORT_KIND_BIN: path.join(bin, "kind"),
    COHORT_KIND_URL: "",
    COHORT_KIND_SHA256: kindSha,
    COHORT_KUBECTL_BIN: path.join(bin, "kind"),
    COHORT_KUBECTL_URL: "",
    COHORT_KUBECTL_SHA256: kindSha,
    COHORT_CLUSTER_NAME: "c",
    COHORT_IMAGES: JSON.stringify([image]),
    ...extra,
  };
}

function step(name: string, extra: Record<string, string> = {}): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [SCRIPT, name], { env: env(extra), encoding: "utf8" });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

const calls = (): string[] => (fs.existsSync(path.join(state, "calls.log")) ? fs.readFileSync(path.join(state, "calls.log"), "utf8").trim().split("\n") : []);
const names = (node: string): string[] =>
  fs
    .readFileSync(path.join(state, node), "utf8")
    .trim()
    .split("\n")
    .map((l) => l.split(" ")[0]!);

beforeEach(() => {
  fs.rmSync(state, { recursive: true, force: true });
  fs.mkdirSync(state);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("load-images", () => {
  it("loads each image once into every node and makes it resolvable by digest", () => {
    const r = step("load-images");
    expect(r.stderr).toContain("loaded cohort-lab.local/kueue@");
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ loaded: [`cohort-lab.local/kueue@${DIGEST}`], present: [] });
    expect(calls().filter((c) => c.startsWith("kind load"))).toEqual([`kind load image-archive ${archive} --name c`]);
    for (const node of ["c-control-plane", "c-worker"]) expect(names(node)).toEqual(["cohort-lab.local/kueue:v0.17.0", `cohort-lab.local/kueue@${DIGEST}`]);
  });

  it("skips an image every node already resolves by digest", () => {
    expect(step("load-images").status).toBe(0);
    fs.rmSync(path.join(state, "calls.log"));
    const r = step("load-images");
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ loaded: [], present: [`cohort-lab.local/kueue@${DIGEST}`] });
    expect(calls().some((c) => c.startsWith("kind load"))).toBe(false);
  });

  it("refuses a digest that differs from the one the archive was built with, naming node, both digests and the fix", () => {
    const r = step("load-images", { FAKE_IMPORT_DIGEST: OTHER });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      `cohort-lab.local/kueue:v0.17.0 in node c-control-plane has digest ${OTHER}, but it was built with ${DIGEST}; rebuild it with \`npm run toolchain -- local-apps\``,
    );
  });

  it("refuses a missing archive with the command that builds it", () => {
    const r = step("load-images", { COHORT_IMAGES: JSON.stringify([{ ...image, archive: path.join(tmp, "gone.tar") }]) });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`image archive ${path.join(tmp, "gone.tar")} of cohort-lab.local/kueue:v0.17.0 is missing; run \`npm run toolchain -- local-apps\``);
  });
});

describe("built kind and kubectl", () => {
  it("are checked against the stamp's SHA-256 and never downloaded", () => {
    const r = step("load-images", { COHORT_KIND_SHA256: "0".repeat(64) });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      `kind: ${path.join(bin, "kind")} has SHA-256 ${kindSha}, but its toolchain stamp records ${"0".repeat(64)}; run \`npm run toolchain -- local\` again`,
    );
    expect(r.stderr).not.toContain("download");
  });

  it("a missing built binary names the command that builds it", () => {
    const r = step("load-images", { COHORT_KIND_BIN: path.join(tmp, "no-kind") });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`kind: ${path.join(tmp, "no-kind")} is missing; run \`npm run toolchain -- local\``);
  });
});

describe("create with a built node image", () => {
  it("refuses a node image whose Docker image ID is not the stamp's, before kind runs", () => {
    const r = step("create", {
      COHORT_NODE_IMAGE: "cohort-lab/kind-node:v1.35.4-0123456789ab",
      COHORT_NODE_IMAGE_ID: `sha256:${"3".repeat(64)}`,
      COHORT_NODE_IMAGE_ARCHIVE: path.join(tmp, "node.tar"),
      FAKE_IMAGE_ID: `sha256:${"4".repeat(64)}`,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      `node image cohort-lab/kind-node:v1.35.4-0123456789ab has image ID sha256:${"4".repeat(64)}, but its toolchain stamp records sha256:${"3".repeat(64)}; rebuild it with \`npm run toolchain -- local-images\``,
    );
    expect(calls().some((c) => c.startsWith("kind create"))).toBe(false);
  });
});

/**
 * Issue #12, finding 8: the build is reproducible. The same source gives the same bundle and launcher
 * bytes on any commit, so an empty commit followed by `npm run build` does not change what the host
 * profile copies (its address is the SHA-256 of `<bundle sha256>:<launcher sha256>`), and
 * `pulumi preview --expect-no-changes` stays quiet.
 *
 * In a temporary clone of this repository (its committed HEAD, with the repo's node_modules linked in):
 * build, make an empty commit, build again, and compare the SHA-256 of dist/cohort.cjs and
 * dist/cohort-launcher. The bundler runs the way `npm run build` runs it (`scripts/run.ts` puts the pinned
 * Node first on PATH and runs `node scripts/bundle.mjs`; this test runs under that Node already). Needs
 * git and Go (like `npm run build`); about a minute on a busy 2-core machine, most of it the first build.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const repo = path.resolve(__dirname, "..", "..");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-build-repro-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const sha256 = (file: string): string => createHash("sha256").update(fs.readFileSync(file)).digest("hex");

function run(command: string, args: readonly string[], cwd: string): string {
  return execFileSync(command, args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    // A fixed identity for the empty commit; nothing else of the caller's git config matters here.
    env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@example.invalid", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@example.invalid" },
  });
}

/** `npm run build` in `clone`; returns the digests of what it wrote. */
function build(clone: string): { bundle: string; map: string; launcher: string } {
  run(process.execPath, ["scripts/bundle.mjs"], clone);
  const dist = path.join(clone, "dist");
  return { bundle: sha256(path.join(dist, "cohort.cjs")), map: sha256(path.join(dist, "cohort.cjs.map")), launcher: sha256(path.join(dist, "cohort-launcher")) };
}

describe("reproducible build", () => {
  it("an empty commit changes neither dist/cohort.cjs nor dist/cohort-launcher", { timeout: 180_000 }, () => {
    const clone = path.join(tmp, "clone");
    run("git", ["clone", "--quiet", "--no-hardlinks", repo, clone], tmp);
    fs.symlinkSync(path.join(repo, "node_modules"), path.join(clone, "node_modules"), "dir");

    const first = build(clone);
    const before = run("git", ["rev-parse", "HEAD"], clone).trim();
    run("git", ["commit", "--quiet", "--allow-empty", "-m", "empty"], clone);
    const after = run("git", ["rev-parse", "HEAD"], clone).trim();
    expect(after).not.toBe(before);
    const second = build(clone);

    expect(second).toEqual(first);
    // The launcher carries no VCS stamp and no build ID that could vary; the bundle names no absolute path.
    const info = run("go", ["version", "-m", path.join(clone, "dist", "cohort-launcher")], clone);
    expect(info).not.toMatch(/vcs/);
    expect(info).toMatch(/-trimpath=true/);
    expect(run("go", ["tool", "buildid", path.join(clone, "dist", "cohort-launcher")], clone).trim()).toBe("");
    expect(fs.readFileSync(path.join(clone, "dist", "cohort.cjs"), "utf8")).not.toContain(clone);
    expect(fs.readFileSync(path.join(clone, "dist", "cohort.cjs.map"), "utf8")).not.toContain(clone);
  });
});

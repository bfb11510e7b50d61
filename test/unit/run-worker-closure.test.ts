/**
 * The Temporal run worker image's npm closure (components/kind/run-worker-closure.ts): Node's `node_modules`
 * resolution over lock keys, the walk of `dependencies`/`optionalDependencies` (optional native packages by the
 * image's platform, package.json `os`/`cpu`/`libc`), the SDK version read from
 * package.json, the closure of this repository's own package-lock.json, and the builder's copy with its trim
 * (scripts/local/app-images/build.ts `copyClosure`).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { repoRoot } from "../../common/paths";
import { IMAGE_RECIPES, runWorkerClosure } from "../../components/kind/app-images";
import {
  resolveLockDependency,
  RunWorkerClosureError,
  TEMPORAL_WORKER_ROOTS,
  temporalSdkVersion,
  temporalWorkerClosure,
  type PackageLockFile,
} from "../../components/kind/run-worker-closure";
import { copyClosure, runWorkerSmokeProgram } from "../../scripts/local/app-images/build";

const I = (c: string) => `sha512-${c.repeat(86)}==`;

/** a -> b@2 (nested under a), c; b@1 at the top; c -> b (the top one) and optional d (installed), e (not installed), f (not locked). */
const lock: PackageLockFile = {
  lockfileVersion: 3,
  packages: {
    "": { dependencies: { a: "1" } },
    "node_modules/a": { version: "1.0.0", integrity: I("a"), dependencies: { b: "^2", c: "^1" } },
    "node_modules/a/node_modules/b": { version: "2.0.0", integrity: I("b"), dependencies: { "@s/x": "1" } },
    "node_modules/b": { version: "1.0.0", integrity: I("c") },
    "node_modules/c": { version: "1.0.0", integrity: I("d"), dependencies: { b: "^1", a: "1" }, optionalDependencies: { d: "1", e: "1", f: "1" } },
    "node_modules/d": { version: "1.0.0", integrity: I("e") },
    "node_modules/e": { version: "1.0.0", integrity: I("f") },
    "node_modules/@s/x": { version: "3.0.0" },
    "node_modules/unrelated": { version: "9.9.9", integrity: I("g") },
  },
};
const installed = (key: string) => key !== "node_modules/e";

describe("resolveLockDependency", () => {
  it("takes the nearest node_modules/<name> from the dependant upward, scoped names included", () => {
    expect(resolveLockDependency(lock, "", "a")).toBe("node_modules/a");
    expect(resolveLockDependency(lock, "node_modules/a", "b")).toBe("node_modules/a/node_modules/b");
    expect(resolveLockDependency(lock, "node_modules/c", "b")).toBe("node_modules/b");
    expect(resolveLockDependency(lock, "node_modules/a/node_modules/b", "@s/x")).toBe("node_modules/@s/x");
    expect(resolveLockDependency(lock, "node_modules/a/node_modules/b", "b")).toBe("node_modules/a/node_modules/b");
    expect(resolveLockDependency(lock, "node_modules/@s/x", "c")).toBe("node_modules/c");
    expect(resolveLockDependency(lock, "node_modules/a", "nope")).toBeUndefined();
  });
});

describe("temporalWorkerClosure", () => {
  it("follows dependencies and installed optional dependencies, each lock key once, sorted", () => {
    const c = temporalWorkerClosure(lock, installed, ["a"]);
    expect(c.map((p) => p.path)).toEqual(["node_modules/@s/x", "node_modules/a", "node_modules/a/node_modules/b", "node_modules/b", "node_modules/c", "node_modules/d"]);
    expect(c.find((p) => p.path === "node_modules/a/node_modules/b")).toEqual({ path: "node_modules/a/node_modules/b", name: "b", version: "2.0.0", integrity: I("b") });
    expect(c.find((p) => p.name === "@s/x")).toMatchObject({ version: "3.0.0", integrity: null });
  });

  it("refuses a required dependency that is not locked or not installed, a link, and a lock without packages", () => {
    expect(() => temporalWorkerClosure(lock, installed, ["a", "missing"])).toThrow(/missing, a dependency of package.json, is not locked; run `npm install`/);
    expect(() => temporalWorkerClosure(lock, (k) => k !== "node_modules/b", ["a"])).toThrow(
      /node_modules\/b \(b, a dependency of node_modules\/c\) is locked but not installed; run `npm ci`/,
    );
    const linked: PackageLockFile = { packages: { "node_modules/a": { link: true, resolved: "packages/a" } } };
    expect(() => temporalWorkerClosure(linked, () => true, ["a"])).toThrow(RunWorkerClosureError);
    expect(() => temporalWorkerClosure({}, () => true, ["a"])).toThrow(/no `packages`/);
  });

  it("takes the image's platform's build of an optional native package, not this machine's, and refuses one npm did not install", () => {
    const native: PackageLockFile = {
      packages: {
        "": { dependencies: { tool: "1" } },
        "node_modules/tool": { version: "1.0.0", optionalDependencies: { "tool-linux-x64-gnu": "1", "tool-linux-x64-musl": "1", "tool-darwin-arm64": "1", "tool-not-mac": "1" } },
        "node_modules/tool-linux-x64-gnu": { version: "1.0.0", os: ["linux"], cpu: ["x64"], libc: ["glibc"] },
        "node_modules/tool-linux-x64-musl": { version: "1.0.0", os: ["linux"], cpu: ["x64"], libc: ["musl"] },
        "node_modules/tool-darwin-arm64": { version: "1.0.0", os: ["darwin"], cpu: ["arm64"] },
        "node_modules/tool-not-mac": { version: "1.0.0", os: ["!darwin"] },
      },
    };
    // Built on linux-x64 glibc: the glibc build, and the package for every OS but darwin.
    const onLinux = (k: string) => k !== "node_modules/tool-darwin-arm64" && k !== "node_modules/tool-linux-x64-musl";
    expect(temporalWorkerClosure(native, onLinux, ["tool"]).map((p) => p.name)).toEqual(["tool", "tool-linux-x64-gnu", "tool-not-mac"]);
    // Built on a Mac: its darwin build is installed, the image's is not: refused, naming the package and the platform.
    const onMac = (k: string) => k === "node_modules/tool" || k === "node_modules/tool-darwin-arm64";
    expect(() => temporalWorkerClosure(native, onMac, ["tool"])).toThrow(
      /node_modules\/tool-linux-x64-gnu \(tool-linux-x64-gnu, a dependency of node_modules\/tool\) is the linux-x64 glibc build the run worker image needs, locked but not installed here/,
    );
    // For a musl image, the musl build.
    const musl = temporalWorkerClosure(native, () => true, ["tool"], { os: "linux", cpu: "x64", libc: "musl" });
    expect(musl.map((p) => p.name)).toEqual(["tool", "tool-linux-x64-musl", "tool-not-mac"]);
  });

  it("of this repository's lockfile: every Temporal root, the native bridge, only the installed swc binary", () => {
    const c = runWorkerClosure(repoRoot);
    const keys = c.map((p) => p.path);
    for (const r of [...TEMPORAL_WORKER_ROOTS, "@temporalio/core-bridge", "@temporalio/proto"]) expect(keys).toContain(`node_modules/${r}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const p of c) {
      expect(fs.existsSync(path.join(repoRoot, p.path))).toBe(true);
      expect(JSON.parse(fs.readFileSync(path.join(repoRoot, p.path, "package.json"), "utf8"))).toMatchObject({ name: p.name, version: p.version });
    }
    // The image's (linux-x64 glibc) swc binary only.
    expect(keys.filter((k) => k.startsWith("node_modules/@swc/core-"))).toEqual(["node_modules/@swc/core-linux-x64-gnu"]);
    // Measured 2026-12-02 with @temporalio/* 1.24.0: 151 packages.
    expect(c.length).toBeGreaterThan(100);
  });
});

describe("temporalSdkVersion", () => {
  const deps = Object.fromEntries(TEMPORAL_WORKER_ROOTS.map((r) => [r, "1.24.0"]));
  it("is the one exact version of every root, and the run worker's tag", () => {
    expect(temporalSdkVersion({ dependencies: deps })).toBe("1.24.0");
    const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    expect(IMAGE_RECIPES.runWorker.tag).toBe(pkg.dependencies["@temporalio/worker"]);
  });
  it("refuses a missing root, a range, and disagreeing roots", () => {
    expect(() => temporalSdkVersion({ dependencies: { ...deps, "@temporalio/client": undefined as unknown as string } })).toThrow(/@temporalio\/client is not a dependency/);
    expect(() => temporalSdkVersion({ dependencies: { ...deps, "@temporalio/common": "^1.24.0" } })).toThrow(/must be an exact version/);
    expect(() => temporalSdkVersion({ dependencies: { ...deps, "@temporalio/workflow": "1.23.0" } })).toThrow(/must agree/);
  });
});

describe("copyClosure", () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-run-worker-"));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const write = (rel: string, text = "x") => {
    fs.mkdirSync(path.dirname(path.join(tmp, "repo", rel)), { recursive: true });
    fs.writeFileSync(path.join(tmp, "repo", rel), text);
  };

  it("keeps the lock layout, skips each package's own node_modules and trims the release directories", () => {
    write("node_modules/@t/bridge/index.js");
    write("node_modules/@t/bridge/releases/x86_64-unknown-linux-gnu/index.node", "native");
    write("node_modules/@t/bridge/releases/aarch64-apple-darwin/index.node");
    write("node_modules/@t/bridge/releases-notes.txt");
    write("node_modules/a/index.js");
    write("node_modules/a/node_modules/b/index.js");
    write("node_modules/a/node_modules/notinclosure/index.js");
    write("node_modules/a/node_modules/.bin/tool");
    const pkgs = [
      { path: "node_modules/@t/bridge", name: "@t/bridge", version: "1.0.0", integrity: null },
      { path: "node_modules/a", name: "a", version: "1.0.0", integrity: null },
      { path: "node_modules/a/node_modules/b", name: "b", version: "1.0.0", integrity: null },
    ];
    const dest = path.join(tmp, "opt", "node_modules");
    const trim = [{ package: "@t/bridge", dir: "releases", keep: ["x86_64-unknown-linux-gnu"] }];
    const got = copyClosure(pkgs, path.join(tmp, "repo"), dest, trim);
    const list = (d: string): string[] =>
      fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? list(path.join(d, e.name)) : [path.relative(dest, path.join(d, e.name))]));
    expect(list(dest).sort()).toEqual([
      "@t/bridge/index.js",
      "@t/bridge/releases-notes.txt",
      "@t/bridge/releases/x86_64-unknown-linux-gnu/index.node",
      "a/index.js",
      "a/node_modules/b/index.js",
    ]);
    expect(got.files).toBe(5);
    expect(() => copyClosure(pkgs, path.join(tmp, "repo"), path.join(tmp, "o2"), [{ ...trim[0]!, keep: ["riscv64"] }])).toThrow(
      /@t\/bridge\/releases\/riscv64 \(kept by the trim rule\)/,
    );
  });

  it("the smoke program is valid JavaScript naming the kept native bridge and every root", () => {
    const program = runWorkerSmokeProgram(IMAGE_RECIPES.runWorker);
    expect(() => new Function("require", program)).not.toThrow();
    expect(program).toContain("/opt/node_modules/@temporalio/core-bridge/releases/x86_64-unknown-linux-gnu/index.node");
    for (const r of TEMPORAL_WORKER_ROOTS) expect(program).toContain(JSON.stringify(r));
  });
});

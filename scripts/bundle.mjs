#!/usr/bin/env node
/**
 * Bundles the cohort runtime (runtime/cli.ts and everything it imports, node_modules included) into ONE
 * CommonJS file, `dist/cohort.cjs`, that runs with plain `node` (>= 22) and no node_modules. Cluster and
 * VM profiles ship this file.
 *
 * Backends are dynamic `import()`s in runtime/backends/index.ts: esbuild keeps each one in the file but
 * wraps it so that its code (and its dependencies') is evaluated only when a run selects it.
 *
 * Usage: `npm run build` (or `node scripts/bundle.mjs [--outfile PATH]`). Writes PATH, PATH.map and the member
 * launcher `cohort-launcher` in PATH's directory (needs Go, like the toolchain).
 * esbuild API: https://esbuild.github.io/api/
 */
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { chmod } from "node:fs/promises";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Builds the compiled member launcher (runtime/launcher/*.go, standard library only) next to the bundle, as
 * `<dir of outfile>/cohort-launcher`: `go build` with `GOTOOLCHAIN=local`, `CGO_ENABLED=0`, `-trimpath`, and
 * `main.version` set to the first 12 hex of the SHA-256 of go.mod and the package's .go files (not its tests),
 * in name order. The runtime's process backend
 * finds it there (runtime/backends/process/launcher.ts, findNativeLauncher). Written through a temp file and a
 * rename, so a failed build never leaves a half-written binary.
 *
 * Reproducible: the same source and Go give the same bytes on any commit and in any directory. `-buildvcs=false`
 * keeps git state out of the binary (Go stamps `vcs.revision`, `vcs.time` and `vcs.modified` by default, so an
 * empty commit changed the launcher, the host profile's copy address and `pulumi preview --expect-no-changes`),
 * `-trimpath` keeps file system paths out, and `-buildid=` leaves the Go build ID empty.
 *
 * @param {string} outDir - directory of the bundle
 * @returns {{ file: string, bytes: number, version: string }}
 * @throws {Error} when `go` is missing or the build fails (with go's output)
 */
export function buildLauncher(outDir) {
  const src = path.join(root, "runtime", "launcher");
  const hash = createHash("sha256");
  const sources = readdirSync(src)
    .filter((f) => f.endsWith(".go") && !f.endsWith("_test.go"))
    .sort();
  for (const f of ["go.mod", ...sources]) hash.update(readFileSync(path.join(src, f)));
  const version = hash.digest("hex").slice(0, 12);
  const file = path.join(outDir, "cohort-launcher");
  const tmp = `${file}.tmp-${process.pid}`;
  try {
    execFileSync("go", ["build", "-trimpath", "-buildvcs=false", "-ldflags", `-s -w -buildid= -X main.version=${version}`, "-o", tmp, "."], {
      cwd: src,
      env: { ...process.env, GOTOOLCHAIN: "local", CGO_ENABLED: "0", GOWORK: "off", GOFLAGS: "-mod=mod" },
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (error) {
    rmSync(tmp, { force: true });
    const output = `${error.stdout ?? ""}${error.stderr ?? ""}`.trim();
    throw new Error(`cannot build the member launcher (runtime/launcher, needs Go >= 1.26 on PATH): ${output || error.message}`, { cause: error });
  }
  renameSync(tmp, file);
  return { file, bytes: statSync(file).size, version };
}

/**
 * Builds the bundle, and the member launcher next to it ({@link buildLauncher}).
 *
 * @param {{ outfile?: string }} [options] - outfile defaults to `<repo>/dist/cohort.cjs`
 * @returns {Promise<{ outfile: string, bytes: number, warnings: number }>}
 */
export async function bundle(options = {}) {
  const outfile = path.resolve(options.outfile ?? path.join(root, "dist", "cohort.cjs"));
  const result = await build({
    absWorkingDir: root,
    entryPoints: [path.join(root, "runtime", "cli.ts")],
    outfile,
    bundle: true,
    platform: "node",
    target: "node22",
    format: "cjs",
    minify: false,
    sourcemap: "linked",
    sourcesContent: false,
    legalComments: "eof",
    banner: { js: "#!/usr/bin/env node" },
    metafile: true,
    logLevel: "warning",
  });
  await chmod(outfile, 0o755);
  const bytes = result.metafile.outputs[path.relative(root, outfile)]?.bytes ?? 0;
  const launcher = buildLauncher(path.dirname(outfile));
  const temporal = await bundleTemporal(path.dirname(outfile));
  // The Node that built the bundle (>= 22: the toolchain's pinned Node 24 under `npm run build`), for bin/cohort.cjs
  // to re-execute with when `npx cohort` starts under an older Node.
  if (Number(process.versions.node.split(".")[0]) >= 22) writeFileSync(path.join(path.dirname(outfile), "cohort.node"), `${process.execPath}\n`);
  return { outfile, bytes, warnings: result.warnings.length, launcher, temporal };
}

/**
 * Builds the Temporal half of the runtime next to the bundle (docs/temporal.md):
 *
 * - `cohort-temporal.cjs`: runtime/temporal/cli.ts (`cohort worker`, `cohort submit`), with every `@temporalio/*`
 *   package left external: they, and the native `@temporalio/core-bridge` (its prebuilt
 *   `releases/x86_64-unknown-linux-gnu/index.node` ships in the npm tarball), resolve from the `node_modules` next
 *   to `dist/`. `dist/cohort.cjs` loads it for those two commands only.
 * - `cohort-temporal-workflows.js`: the workflow code (runtime/temporal/workflows.ts) pre-bundled by the SDK's
 *   `bundleWorkflowCode` (webpack), so the worker does not bundle at start
 *   (https://docs.temporal.io/develop/typescript/core-application#bundle-workflow-code).
 *
 * @param {string} outDir
 * @returns {Promise<{ cli: string, workflows: string, workflowBytes: number }>}
 */
export async function bundleTemporal(outDir) {
  const cli = path.join(outDir, "cohort-temporal.cjs");
  await build({
    absWorkingDir: root,
    entryPoints: [path.join(root, "runtime", "temporal", "cli.ts")],
    outfile: cli,
    bundle: true,
    platform: "node",
    target: "node22",
    format: "cjs",
    external: ["@temporalio/*"],
    sourcemap: "linked",
    sourcesContent: false,
    legalComments: "eof",
    logLevel: "warning",
  });
  const { bundleWorkflowCode } = await import("@temporalio/worker");
  const { code } = await bundleWorkflowCode({ workflowsPath: path.join(root, "runtime", "temporal", "workflows.ts"), logger: quietLogger() });
  const workflows = path.join(outDir, "cohort-temporal-workflows.js");
  writeFileSync(`${workflows}.tmp`, code);
  renameSync(`${workflows}.tmp`, workflows);
  return { cli, workflows, workflowBytes: Buffer.byteLength(code) };
}

/** A Temporal SDK logger that prints only warnings and errors. */
function quietLogger() {
  const say = (level) => (message) => process.stderr.write(`bundleWorkflowCode ${level}: ${message}\n`);
  return { trace() {}, debug() {}, info() {}, log() {}, warn: say("warn"), error: say("error") };
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--outfile");
  const outfile = at === -1 ? undefined : process.argv[at + 1];
  const { outfile: written, bytes, launcher, temporal } = await bundle(outfile === undefined ? {} : { outfile });
  process.stdout.write(`wrote ${path.relative(process.cwd(), written)} (${(bytes / 1024).toFixed(0)} KiB)\n`);
  process.stdout.write(`wrote ${path.relative(process.cwd(), launcher.file)} (${(launcher.bytes / 1024).toFixed(0)} KiB, ${launcher.version})\n`);
  process.stdout.write(
    `wrote ${path.relative(process.cwd(), temporal.cli)} and ${path.relative(process.cwd(), temporal.workflows)} (${(temporal.workflowBytes / 1024).toFixed(0)} KiB)\n`,
  );
}

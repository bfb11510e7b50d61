/**
 * `npm run toolchain [-- <set>...]`: idempotently ensures every pinned tool of the named sets (default:
 * `default`), cached by version outside the work tree, and installs the provider plugins into the repo-local
 * PULUMI_HOME. A warm run only checks stamps and versions. Progress and times go to stderr.
 *
 * Sets: `default` (Node 24 when the system Node is < 22, the Pulumi CLI, pulumi-resource-command,
 * pulumi-resource-kubernetes); any other `<set>` comes from `scripts/toolchain-<set>.ts` exporting
 * `toolSet: ToolSet` (see scripts/lib/tool.ts).
 *
 * Environment: COHORT_LAB_CACHE (cache root), COHORT_TOOLCHAIN_SOURCE (`auto` | `build` | `official`),
 * COHORT_PULUMI_HOME, and the usual Go variables (GOPROXY, GOMODCACHE, GOCACHE, GOFLAGS). See docs/toolchain.md.
 *
 * Bootstrap: execa 10 and the Go builds need Node >= 22. Under an older system Node the first stage ensures
 * the Node tool (Node-20-safe code) and checks the others; when all are warm it finishes there, otherwise it
 * re-executes this script under the cached Node to build the rest.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { toolchain as pins } from "../common/pins";
import { toolchainSource } from "./lib/download";
import { sdkCouplings } from "./lib/env";
import { nodeMajor, nodeTool, systemNodeVersion } from "./lib/node-tool";
import { cacheRoot, envNames, pulumiHome, repoRoot } from "../common/paths";
import { sdkPinMismatches, type PackageJsonLike, type PackageLockLike } from "./lib/pin-checks";
import { reexecUnder } from "./lib/process";
import { ensureTools, NeedsBuildError, ToolBuildError, type ReadyTool, type Tool, type ToolContext, type ToolSet } from "./lib/tool";

const log = (line: string) => process.stderr.write(`toolchain: ${line}\n`);

function usage(): string {
  const extra = fs
    .readdirSync(__dirname)
    .map((f) => /^toolchain-(.+)\.ts$/.exec(f)?.[1])
    .filter((s): s is string => s !== undefined);
  return `usage: npm run toolchain [-- <set>...]   sets: default${extra.map((s) => `, ${s}`).join("")}`;
}

async function loadSet(name: string): Promise<ToolSet> {
  if (name === "default") {
    const { defaultTools } = await import("./lib/default-tools.js");
    return { name, description: "Node 24 (if needed), Pulumi CLI, command and kubernetes plugins", tools: () => defaultTools };
  }
  if (!/^[a-z][a-z0-9-]*$/.test(name)) throw new Error(`unknown tool set ${JSON.stringify(name)}; ${usage()}`);
  const file = path.join(__dirname, `toolchain-${name}.ts`);
  if (!fs.existsSync(file)) throw new Error(`unknown tool set ${JSON.stringify(name)} (no scripts/toolchain-${name}.ts); ${usage()}`);
  const mod = (await import(file)) as { toolSet?: ToolSet };
  if (mod.toolSet === undefined) throw new Error(`scripts/toolchain-${name}.ts does not export toolSet`);
  return mod.toolSet;
}

function formatSize(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

function summary(ready: readonly ReadyTool[]): string[] {
  return ready.map((r) => {
    const bins = Object.values(r.stamp?.binaries ?? {})
      .map((b) => `${b.path} ${formatSize(b.size)}`)
      .join(", ");
    const what = r.outcome === "skipped" ? `skipped (${r.skipReason})` : `${r.outcome.padEnd(10)} ${r.seconds.toFixed(2).padStart(7)}s  source ${r.stamp?.source ?? "?"}  ${bins}`;
    return `  ${r.tool.name.padEnd(28)} ${r.tool.version.padEnd(10)} ${what}`;
  });
}

async function main(argv: readonly string[]): Promise<void> {
  if (argv.includes("-h") || argv.includes("--help")) {
    process.stdout.write(`${usage()}\n`);
    return;
  }
  const started = process.hrtime.bigint();
  const ctx: ToolContext = {
    cacheRoot: cacheRoot(),
    source: toolchainSource(),
    pulumiHome: pulumiHome(),
    env: process.env,
    log,
  };

  // Building binaries that disagree with package.json would only produce a toolchain `npm run pulumi` refuses.
  const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8")) as PackageJsonLike;
  const lockFile = path.join(repoRoot, "package-lock.json");
  const lock = fs.existsSync(lockFile) ? (JSON.parse(fs.readFileSync(lockFile, "utf8")) as PackageLockLike) : undefined;
  const mismatches = sdkPinMismatches(sdkCouplings, pkg, lock);
  if (mismatches.length > 0) throw new Error(mismatches.join("\n"));

  const setNames = argv.filter((a) => !a.startsWith("-"));
  const sets = await Promise.all((setNames.length > 0 ? setNames : ["default"]).map(loadSet));
  // Sets are ensured in the order given, and a set's tools are asked for only once the sets before it are
  // ready: a set may derive its tools from an earlier set's outputs (local-images and local-apps hash the
  // `local` set's binaries), so `toolchain -- local local-images local-apps` works on a cold cache.
  const seen: Tool[] = [];
  const newTools = async (set: ToolSet): Promise<Tool[]> => {
    const fresh: Tool[] = [];
    for (const tool of await set.tools()) {
      if (seen.some((t) => t.name === tool.name && t.version === tool.version)) continue;
      seen.push(tool);
      fresh.push(tool);
    }
    return fresh;
  };

  const ready: ReadyTool[] = [];
  if (nodeMajor(process.version) < pins.node.minSystemMajor && process.env[envNames.stage2] === undefined) {
    // First stage, under the old system Node: fetch Node 24, then finish here if everything else is warm
    // (checks need only node: built-ins); otherwise re-execute under Node 24 to build (execa, Go).
    const [node] = await ensureTools([nodeTool], ctx);
    const bin = node?.binaries.node;
    if (bin === undefined) throw new Error("the Node tool produced no binary");
    try {
      for (const set of sets) ready.push(...(await ensureTools(await newTools(set), { ...ctx, noBuild: true, log: () => undefined })));
    } catch (err) {
      if (!(err instanceof NeedsBuildError)) throw err;
      reexecUnder(bin, __filename, argv, {
        ...process.env,
        [envNames.stage2]: "1",
        [envNames.systemNodeVersion]: systemNodeVersion(),
        COHORT_TOOLCHAIN_STARTED_NS: String(started),
      });
      return;
    }
  } else {
    log(`sets ${sets.map((s) => s.name).join(", ")}, in that order; cache ${ctx.cacheRoot}, source ${ctx.source}`);
    for (const set of sets) {
      const tools = await newTools(set);
      log(`set ${set.name}: ${tools.length} tools`);
      ready.push(...(await ensureTools(tools, ctx)));
    }
  }
  const t0 = process.env.COHORT_TOOLCHAIN_STARTED_NS;
  // hrtime is per process; the first stage's start is only comparable on the same boot, which it is.
  const total = Number(process.hrtime.bigint() - (t0 !== undefined ? BigInt(t0) : started)) / 1e9;
  log(`ready in ${total.toFixed(2)}s (PULUMI_HOME ${ctx.pulumiHome})`);
  for (const line of summary(ready)) process.stderr.write(`${line}\n`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  const message = err instanceof ToolBuildError || err instanceof Error ? err.message : String(err);
  process.stderr.write(`toolchain: failed: ${message}\n`);
  process.exit(1);
});

/**
 * `npm run toolchain -- manifests`: the pinned upstream manifests of the `local` (and `sim`) profile, rendered
 * from Go module zips fetched through the Go module proxy into the tool cache, plus the test-only checker
 * `kindcheck`. Each tool is stamped; a warm run only checks stamps.
 *
 * Tools, in build order:
 * - `kustomize` (pinned CLI, `go install` from the proxy; module hash checked against the pin);
 * - `kueue-manifests`: Kueue's release `manifests.yaml` (see components/manifests/cache.ts for the recipe);
 * - `agent-sandbox-manifests`: Agent Sandbox's release core `sandbox.yaml`;
 * - `kindcheck`: test/tools/kindcheck, which validates a kind config with kind's own loader and validation.
 *
 * Every module zip is fetched with `go mod download -json <module>@<version>`; its `Sum` (the go.sum `h1:`
 * hash, itself checked by the go command against sum.golang.org) must equal the pin, otherwise the build fails.
 * Requires Go (>= toolchain.goMinVersion) and Node >= 22.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import {
  AGENT_SANDBOX_CORE_FILES,
  AGENT_SANDBOX_IMAGE_PLACEHOLDER,
  AGENT_SANDBOX_MANIFESTS,
  KUEUE_MANIFESTS,
  KUSTOMIZE_TOOL,
  type ManifestSet,
} from "../components/manifests/cache";
import { local, toolchain } from "../stacks/pins";
import { checkGo, goEnv, runGo, type GoCommonOptions } from "./lib/go";
import { loadExeca } from "./lib/process";
import { repoRoot, toolDir } from "./lib/paths";
import { ToolBuildError, type BuildContext, type Tool, type ToolSet } from "./lib/tool";

/** `go mod download -json` output fields used here. */
interface ModuleInfo {
  readonly Version?: string;
  readonly Dir?: string;
  readonly Sum?: string;
  readonly Error?: string;
  readonly Origin?: { readonly Hash?: string };
}

/**
 * Fetches `module@version` through the Go proxy and checks its go.sum hash against `goSum`.
 *
 * @returns the module's read-only directory in GOMODCACHE
 * @throws ToolBuildError when the proxy refuses the version or the hash differs (both hashes quoted)
 */
export async function downloadPinnedModule(
  module: { readonly goModule: string; readonly version: string; readonly goSum: string },
  ctx: BuildContext,
  label: string,
): Promise<ModuleInfo & { Dir: string }> {
  const o: GoCommonOptions = { env: ctx.env, log: ctx.log, label };
  const out = await runGo(["mod", "download", "-json", `${module.goModule}@${module.version}`], ctx.workDir, goEnv(ctx.env), o);
  const info = JSON.parse(out) as ModuleInfo;
  if (info.Error !== undefined || info.Dir === undefined) {
    throw new ToolBuildError(`${label}: go mod download ${module.goModule}@${module.version}: ${info.Error ?? "no directory"}`, label);
  }
  if (info.Sum !== module.goSum) {
    throw new ToolBuildError(
      `${label}: ${module.goModule}@${module.version} has go.sum hash ${String(info.Sum)}, but stacks/pins.ts pins ${module.goSum}; refusing to use it`,
      label,
    );
  }
  return info as ModuleInfo & { Dir: string };
}

/** Copies a read-only GOMODCACHE subtree to a writable place. */
function copyWritable(from: string, to: string): void {
  fs.cpSync(from, to, { recursive: true });
  const walk = (dir: string) => {
    fs.chmodSync(dir, 0o755);
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.isFile()) fs.chmodSync(p, 0o644);
    }
  };
  walk(to);
}

async function run(file: string, args: readonly string[], cwd: string, label: string): Promise<void> {
  // execa is ESM-only; a dynamic import works under tsx's CommonJS loader (scripts/lib/process.ts loadExeca).
  const { execa } = await loadExeca();
  const result = await execa(file, args, { cwd, reject: false, stdin: "ignore" });
  if (result.failed) {
    throw new ToolBuildError(`${label}: ${path.basename(file)} ${args.join(" ")} failed in ${cwd}: ${String(result.stderr).trim() || result.shortMessage}`, label);
  }
}

/** The pinned kustomize CLI (`sigs.k8s.io/kustomize/kustomize/v5`). */
export const kustomizeTool: Tool = {
  name: KUSTOMIZE_TOOL.name,
  version: KUSTOMIZE_TOOL.version,
  pin: local.kustomize,
  binaries: { kustomize: KUSTOMIZE_TOOL.binary },
  versionCheck: { binary: "kustomize", args: ["version"], expect: local.kustomize.version },
  buildDescription: "go install from the Go module proxy",
  async build(ctx) {
    await checkGo(toolchain.goMinVersion, ctx.env);
    await downloadPinnedModule(local.kustomize, ctx, "kustomize");
    const o: GoCommonOptions = { env: ctx.env, log: ctx.log, label: "kustomize" };
    const env = { ...goEnv(ctx.env), GOBIN: path.join(ctx.outDir, "bin") };
    // `go install pkg@version` makes kustomize the main module, so `kustomize version` reports the pinned version.
    await runGo(["install", "-trimpath", `${local.kustomize.goModule}@${local.kustomize.version}`], ctx.workDir, env, o);
    return "build";
  },
};

function manifestTool(set: ManifestSet, render: (ctx: BuildContext, out: string) => Promise<void>, description: string): Tool {
  return {
    name: set.name,
    version: set.version,
    pin: set.pin,
    // Not an executable: the stamp's `binaries` entry records the rendered file's size and SHA-256.
    binaries: { manifests: set.file },
    buildDescription: description,
    async build(ctx) {
      await checkGo(toolchain.goMinVersion, ctx.env);
      await render(ctx, path.join(ctx.outDir, set.file));
      return "build";
    },
  };
}

/** Kueue's release `manifests.yaml`, rendered by the pinned kustomize from the pinned module zip. */
export const kueueManifestsTool: Tool = manifestTool(
  KUEUE_MANIFESTS,
  async (ctx, out) => {
    const label = "kueue-manifests";
    const info = await downloadPinnedModule(local.kueue, ctx, label);
    const kustomize = path.join(toolDir(ctx.cacheRoot, KUSTOMIZE_TOOL.name, KUSTOMIZE_TOOL.version), KUSTOMIZE_TOOL.binary);
    if (!fs.existsSync(kustomize)) throw new ToolBuildError(`${label}: ${kustomize} is missing (kustomize comes first in this set)`, label);
    const src = path.join(ctx.workDir, "kueue");
    copyWritable(path.join(info.Dir, "config"), path.join(src, "config"));
    // The Makefile's prepare-manifests + artifacts targets.
    await run(kustomize, ["edit", "set", "image", `controller=${local.kueue.image.repository}:${local.kueue.image.tag}`], path.join(src, "config/components/manager"), label);
    await run(kustomize, ["build", "config/default", "-o", out], src, label);
  },
  "kustomize build of config/default from the Go module zip",
);

/** Agent Sandbox's release core `sandbox.yaml`, assembled from the pinned module zip. */
export const agentSandboxManifestsTool: Tool = manifestTool(
  AGENT_SANDBOX_MANIFESTS,
  async (ctx, out) => {
    const label = "agent-sandbox-manifests";
    const info = await downloadPinnedModule(local.agentSandbox, ctx, label);
    if (local.agentSandbox.commit !== null && info.Origin?.Hash !== undefined && info.Origin.Hash !== local.agentSandbox.commit) {
      throw new ToolBuildError(`${label}: the proxy reports commit ${info.Origin.Hash}, stacks/pins.ts pins ${local.agentSandbox.commit}`, label);
    }
    const image = `${local.agentSandbox.image.repository}:${local.agentSandbox.image.tag}`;
    const parts = AGENT_SANDBOX_CORE_FILES.map((rel) => {
      const text = fs.readFileSync(path.join(info.Dir, rel), "utf8");
      return `# Source: ${local.agentSandbox.goModule}@${local.agentSandbox.version}/${rel}\n${text.replaceAll(AGENT_SANDBOX_IMAGE_PLACEHOLDER, image)}`;
    });
    const text = parts.map((p) => (p.endsWith("\n") ? p : `${p}\n`)).join("---\n");
    if (!text.includes(image)) throw new ToolBuildError(`${label}: the image placeholder ${AGENT_SANDBOX_IMAGE_PLACEHOLDER} was not found`, label);
    fs.writeFileSync(out, text);
  },
  "assembly of the release core manifest from the Go module zip",
);

/** Source files of test/tools/kindcheck; their hash is part of the pin, so an edit rebuilds the checker. */
export const KINDCHECK_SOURCES = ["go.mod", "go.sum", "main.go"] as const;

/** Directory of the kindcheck sources. */
export const kindcheckDir = path.join(repoRoot, "test", "tools", "kindcheck");

function kindcheckSourceSha256(): string {
  const hash = createHash("sha256");
  for (const f of KINDCHECK_SOURCES) {
    const p = path.join(kindcheckDir, f);
    hash.update(`${f}\0${fs.existsSync(p) ? fs.readFileSync(p, "utf8") : "<missing>"}\0`);
  }
  return hash.digest("hex");
}

/**
 * test/tools/kindcheck: validates kind configs with kind's own loader (`encoding.Parse`: strict YAML decoding
 * into `v1alpha4.Cluster`, defaulting, conversion) and `Cluster.Validate`, at the pinned kind version.
 */
export function kindcheckTool(): Tool {
  return {
    name: "kindcheck",
    version: local.kind.version,
    pin: { kind: { goModule: local.kind.goModule, version: local.kind.version, goSum: local.kind.goSum }, sources: kindcheckSourceSha256() },
    binaries: { kindcheck: "bin/kindcheck" },
    versionCheck: { binary: "kindcheck", args: ["--version"], expect: `kind ${local.kind.version}` },
    buildDescription: "go build of test/tools/kindcheck",
    async build(ctx) {
      await checkGo(toolchain.goMinVersion, ctx.env);
      await downloadPinnedModule({ goModule: local.kind.goModule, version: local.kind.version, goSum: local.kind.goSum }, ctx, "kindcheck");
      const src = path.join(ctx.workDir, "kindcheck");
      fs.mkdirSync(src);
      for (const f of KINDCHECK_SOURCES) fs.copyFileSync(path.join(kindcheckDir, f), path.join(src, f));
      const o: GoCommonOptions = { env: ctx.env, log: ctx.log, label: "kindcheck" };
      await runGo(
        ["build", "-mod=readonly", "-trimpath", "-ldflags", `-s -w -X main.kindVersion=${local.kind.version}`, "-o", path.join(ctx.outDir, "bin/kindcheck"), "."],
        src,
        goEnv(ctx.env),
        o,
      );
      return "build";
    },
  };
}

/** Source files of test/tools/kueuecheck. */
export const KUEUECHECK_SOURCES = ["go.mod", "go.sum", "main.go"] as const;

/** Directory of the kueuecheck sources. */
export const kueuecheckDir = path.join(repoRoot, "test", "tools", "kueuecheck");

/**
 * test/tools/kueuecheck: validates Kueue manager Configurations with Kueue's own loader (`pkg/config.Load`: strict
 * decoding, defaulting, validation) at the pinned version. Test-only and a heavy first build (it compiles a part of
 * Kueue), so it is not in the `manifests` set; the tests ensure it on first use.
 */
export function kueuecheckTool(): Tool {
  const hash = createHash("sha256");
  for (const f of KUEUECHECK_SOURCES) {
    const p = path.join(kueuecheckDir, f);
    hash.update(`${f}\0${fs.existsSync(p) ? fs.readFileSync(p, "utf8") : "<missing>"}\0`);
  }
  return {
    name: "kueuecheck",
    version: local.kueue.version,
    pin: { kueue: { goModule: local.kueue.goModule, version: local.kueue.version, goSum: local.kueue.goSum }, sources: hash.digest("hex") },
    binaries: { kueuecheck: "bin/kueuecheck" },
    versionCheck: { binary: "kueuecheck", args: ["--version"], expect: `kueue ${local.kueue.version}` },
    buildDescription: "go build of test/tools/kueuecheck",
    async build(ctx) {
      await checkGo(toolchain.goMinVersion, ctx.env);
      await downloadPinnedModule(local.kueue, ctx, "kueuecheck");
      const src = path.join(ctx.workDir, "kueuecheck");
      fs.mkdirSync(src);
      for (const f of KUEUECHECK_SOURCES) fs.copyFileSync(path.join(kueuecheckDir, f), path.join(src, f));
      const o: GoCommonOptions = { env: ctx.env, log: ctx.log, label: "kueuecheck" };
      await runGo(
        ["build", "-mod=readonly", "-trimpath", "-ldflags", `-s -w -X main.kueueVersion=${local.kueue.version}`, "-o", path.join(ctx.outDir, "bin/kueuecheck"), "."],
        src,
        goEnv(ctx.env),
        o,
      );
      return "build";
    },
  };
}

/** The `manifests` tool set. */
export const toolSet: ToolSet = {
  name: "manifests",
  description: "Kueue and Agent Sandbox release manifests (from the Go module proxy) for the local and sim profiles, and kindcheck",
  tools: () => [kustomizeTool, kueueManifestsTool, agentSandboxManifestsTool, kindcheckTool()],
};

/**
 * `npm run toolchain -- manifests`: the pinned upstream manifests of the `local` (and `sim`) profile, rendered
 * from Go module zips fetched through the Go module proxy into the tool cache, plus the test-only checker
 * `kindcheck`. Each tool is stamped; a warm run only checks stamps.
 *
 * Tools, in build order:
 * - `kustomize` (pinned CLI, `go install` from the proxy; module hash checked against the pin);
 * - `kueue-manifests`: Kueue's release `manifests.yaml` (see components/k8s/manifests/cache.ts for the recipe);
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
} from "../components/k8s/manifests/cache";
import { local, toolchain } from "../common/pins";
import { checkGo, goEnv, runGo, type GoCommonOptions } from "./lib/go";
import { loadExeca } from "./lib/process";
import { repoRoot, toolDir } from "../common/paths";
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
      `${label}: ${module.goModule}@${module.version} has go.sum hash ${String(info.Sum)}, but common/pins.ts pins ${module.goSum}; refusing to use it`,
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
      throw new ToolBuildError(`${label}: the proxy reports commit ${info.Origin.Hash}, common/pins.ts pins ${local.agentSandbox.commit}`, label);
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

/** Source files of test/tools/kueuecheck. */
export const KUEUECHECK_SOURCES = ["go.mod", "go.sum", "main.go"] as const;

/** Directory of the kueuecheck sources. */
export const kueuecheckDir = path.join(repoRoot, "test", "tools", "kueuecheck");

/** A checker under test/tools built against one pinned upstream module (what {@link goCheckerTool} needs). */
interface GoChecker {
  /** Tool and binary name, e.g. `kindcheck`. */
  readonly name: string;
  readonly dir: string;
  readonly sources: readonly string[];
  /** Key of the upstream pin inside the tool's pin (`kind`, `kueue`); part of the stamp, so kept as it was. */
  readonly pinKey: string;
  readonly module: { readonly goModule: string; readonly version: string; readonly goSum: string };
  /** The `-X main.<var>` that stamps the upstream version, and the `--version` output it gives (`kind v0.31.0`). */
  readonly versionVar: string;
  readonly versionExpect: string;
}

/** SHA-256 over the checker's source files (name, NUL, content, NUL each; `<missing>` for an absent file). */
function sourcesSha256(dir: string, sources: readonly string[]): string {
  const hash = createHash("sha256");
  for (const f of sources) {
    const p = path.join(dir, f);
    hash.update(`${f}\0${fs.existsSync(p) ? fs.readFileSync(p, "utf8") : "<missing>"}\0`);
  }
  return hash.digest("hex");
}

/**
 * A checker tool: downloads the pinned upstream module (go.sum checked), copies the checker's sources into the
 * scratch dir and builds them with `-mod=readonly`. The pin holds the upstream module and the sources' hash, so
 * an edit of the checker rebuilds it.
 */
function goCheckerTool(c: GoChecker): Tool {
  const { goModule, version, goSum } = c.module;
  return {
    name: c.name,
    version,
    pin: { [c.pinKey]: { goModule, version, goSum }, sources: sourcesSha256(c.dir, c.sources) },
    binaries: { [c.name]: `bin/${c.name}` },
    versionCheck: { binary: c.name, args: ["--version"], expect: c.versionExpect },
    buildDescription: `go build of test/tools/${c.name}`,
    async build(ctx) {
      await checkGo(toolchain.goMinVersion, ctx.env);
      await downloadPinnedModule(c.module, ctx, c.name);
      const src = path.join(ctx.workDir, c.name);
      fs.mkdirSync(src);
      for (const f of c.sources) fs.copyFileSync(path.join(c.dir, f), path.join(src, f));
      const o: GoCommonOptions = { env: ctx.env, log: ctx.log, label: c.name };
      await runGo(
        ["build", "-mod=readonly", "-trimpath", "-ldflags", `-s -w -X main.${c.versionVar}=${version}`, "-o", path.join(ctx.outDir, `bin/${c.name}`), "."],
        src,
        goEnv(ctx.env),
        o,
      );
      return "build";
    },
  };
}

/**
 * test/tools/kindcheck: validates kind configs with kind's own loader (`encoding.Parse`: strict YAML decoding
 * into `v1alpha4.Cluster`, defaulting, conversion) and `Cluster.Validate`, at the pinned kind version.
 */
export function kindcheckTool(): Tool {
  return goCheckerTool({
    name: "kindcheck",
    dir: kindcheckDir,
    sources: KINDCHECK_SOURCES,
    pinKey: "kind",
    module: local.kind,
    versionVar: "kindVersion",
    versionExpect: `kind ${local.kind.version}`,
  });
}

/**
 * test/tools/kueuecheck: validates Kueue manager Configurations with Kueue's own loader (`pkg/config.Load`: strict
 * decoding, defaulting, validation) at the pinned version. Test-only and a heavy first build (it compiles a part of
 * Kueue), so it is not in the `manifests` set; the tests ensure it on first use.
 */
export function kueuecheckTool(): Tool {
  return goCheckerTool({
    name: "kueuecheck",
    dir: kueuecheckDir,
    sources: KUEUECHECK_SOURCES,
    pinKey: "kueue",
    module: local.kueue,
    versionVar: "kueueVersion",
    versionExpect: `kueue ${local.kueue.version}`,
  });
}

/** The `manifests` tool set. */
export const toolSet: ToolSet = {
  name: "manifests",
  description: "Kueue and Agent Sandbox release manifests (from the Go module proxy) for the local and sim profiles, and kindcheck",
  tools: () => [kustomizeTool, kueueManifestsTool, agentSandboxManifestsTool, kindcheckTool()],
};

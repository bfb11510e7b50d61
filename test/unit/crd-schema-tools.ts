/**
 * Shared by the local-profile tests: makes sure the `manifests` tool set (scripts/toolchain-manifests.ts) is in
 * the tool cache — the pinned Kueue and Agent Sandbox release manifests and the kindcheck binary — building
 * what is missing (needs Go and the Go module proxy once). When Go is absent and nothing is cached, the caller
 * skips with the returned reason (printed), never silently.
 */
import { execFileSync } from "node:child_process";
import { agentSandboxManifestsTool, kindcheckTool, kueuecheckTool, kueueManifestsTool, kustomizeTool } from "../../scripts/toolchain-manifests.js";
import { toolchainSource } from "../../scripts/lib/download.js";
import { cacheRoot, pulumiHome } from "../../common/paths.js";
import { checkToolDir, ensureTools, type ReadyTool } from "../../scripts/lib/tool.js";
import { toolDir } from "../../common/paths.js";

/** The ready tools by name, or why they cannot be had here. */
export type LocalTools = { readonly ok: true; readonly tools: ReadonlyMap<string, ReadyTool> } | { readonly ok: false; readonly reason: string };

function goAvailable(): boolean {
  try {
    execFileSync("go", ["version"], { stdio: "ignore", env: { ...process.env, GOTOOLCHAIN: "local" } });
    return true;
  } catch {
    return false;
  }
}

/**
 * Ensures kustomize, the two manifest sets and kindcheck (warm: only stamps are checked); with `kueuecheck`, also
 * test/tools/kueuecheck (a first build compiles part of Kueue: minutes).
 */
export async function ensureLocalTools(options: { kueuecheck?: boolean } = {}): Promise<LocalTools> {
  const tools = [kustomizeTool, kueueManifestsTool, agentSandboxManifestsTool, kindcheckTool(), ...(options.kueuecheck === true ? [kueuecheckTool()] : [])];
  const root = cacheRoot();
  const missing = tools.filter((t) => checkToolDir(t, toolDir(root, t.name, t.version)) !== undefined);
  if (missing.length > 0 && !goAvailable()) {
    return {
      ok: false,
      reason: `Go is not installed and ${missing.map((t) => t.name).join(", ")} are not in the tool cache ${root}; run npm run toolchain -- manifests where Go is available`,
    };
  }
  const lines: string[] = [];
  const ready = await ensureTools(tools, { cacheRoot: root, source: toolchainSource(), pulumiHome: pulumiHome(), env: process.env, log: (l) => lines.push(l) });
  return { ok: true, tools: new Map(ready.map((r) => [r.tool.name, r])) };
}

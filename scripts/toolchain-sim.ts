/**
 * The `sim` tool set (`npm run toolchain -- sim`): etcd, kube-apiserver, kube-controller-manager and
 * kube-scheduler (Kubernetes 1.35, the `local` node image's minor), kwok, the Kueue manager and the Agent Sandbox
 * controller, each built from the Go module proxy in a throw-away wrapper module (`CGO_ENABLED=0`,
 * `GOTOOLCHAIN=local`, `-trimpath`, `-ldflags "-s -w -X ..."`) and cached by version under
 * `<cache>/<tool>-<version>/bin/`, with the stamp written last (scripts/lib/tool.ts).
 *
 * Cold builds take tens of minutes on 2 cores (figures in docs/sim.md); warm runs only check stamps and versions.
 * `--check` (see scripts/toolchain.ts) or `simctl check` report whether the set is built without building it.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { toolchain } from "../stacks/pins";
import { checkGo, goEnv, runGo } from "./lib/go";
import type { BuildContext, Tool, ToolSet } from "./lib/tool";
import { simToolIds, type SimToolId } from "./sim/catalog";

/**
 * Builds every main package of one pinned module in one wrapper module: `go mod init`, the replaces,
 * `go get <main>@<version>` for each, then one `go build` per binary (they share the build cache).
 *
 * @throws ToolBuildError from the first failing `go` command (with its output tail).
 */
async function buildSimTool(id: SimToolId, ctx: BuildContext): Promise<"build"> {
  await checkGo(toolchain.goMinVersion, ctx.env);
  const env = goEnv(ctx.env);
  const o = { env: ctx.env, log: ctx.log, label: id.name };
  const work = path.join(ctx.workDir, "wrapper");
  fs.mkdirSync(work, { recursive: true });
  await runGo(["mod", "init", `local/cohort-lab-sim-${id.name}`], work, env, o);
  const replaces = Object.entries(id.pin.replace).map(([from, to]) => `-replace=${from}=${to}`);
  if (replaces.length > 0) await runGo(["mod", "edit", ...replaces], work, env, o);
  const mains = Object.entries(id.pin.mainPackages);
  await runGo(["get", ...mains.map(([, pkg]) => `${pkg}@${id.pin.goModuleVersion}`)], work, env, o);
  const ldflags = ["-s", "-w", ...Object.entries(id.pin.versionVars).map(([k, v]) => `-X ${k}=${v}`)].join(" ");
  for (const [binary, pkg] of mains) {
    const started = Date.now();
    const out = path.join(ctx.outDir, id.binaries[binary] as string);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    await runGo(["build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg], work, env, o);
    ctx.log(`${id.name}: built ${binary} in ${((Date.now() - started) / 1000).toFixed(1)}s (${(fs.statSync(out).size / 1e6).toFixed(1)} MB)`);
  }
  const keep = path.join(ctx.outDir, "build");
  fs.mkdirSync(keep, { recursive: true });
  for (const f of ["go.mod", "go.sum"]) if (fs.existsSync(path.join(work, f))) fs.copyFileSync(path.join(work, f), path.join(keep, f));
  return "build";
}

/** A {@link Tool} for one sim tool id; the version check runs its first binary. */
function simTool(id: SimToolId): Tool {
  const first = Object.keys(id.binaries)[0] as string;
  return {
    name: id.name,
    version: id.version,
    pin: id.pin,
    binaries: id.binaries,
    buildDescription: `a Go source build of ${id.pin.goModule}@${id.pin.goModuleVersion} (${Object.keys(id.binaries).join(", ")})`,
    versionCheck: id.pin.versionCheck !== null ? { binary: first, args: id.pin.versionCheck.args, expect: id.pin.versionCheck.expect } : undefined,
    build: (ctx) => buildSimTool(id, ctx),
  };
}

/** The sim tools, in build order (control plane first). */
export const simTools: readonly Tool[] = simToolIds.map(simTool);

export const toolSet: ToolSet = {
  name: "sim",
  description: "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Kueue manager, Agent Sandbox controller",
  tools: () => simTools,
};

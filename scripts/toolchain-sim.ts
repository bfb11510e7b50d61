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
import { toolchain } from "../common/pins";
import { checkGo, goEnv, runGo } from "./lib/go";
import type { BuildContext, Tool, ToolSet } from "./lib/tool";
import { simToolIds, type SimToolId } from "../common/sim-catalog";

/** Options of {@link buildGoWrapperTool} and {@link goWrapperTool}. */
export interface GoWrapperOptions {
  /** Tool set name, used only in the wrapper module's name (`local/cohort-lab-<set>-<name>`). @default "sim" */
  readonly set?: string;
  /**
   * Build with `CGO_ENABLED=1` (the system C compiler) and `-extldflags=-static`, for programs whose packages
   * do not compile without cgo (flanneld's UDP backend). @default false (`CGO_ENABLED=0`)
   */
  readonly cgo?: boolean;
}

/**
 * Builds every main package of one pinned module in one wrapper module (`<workDir>/wrapper`): `go mod init
 * local/cohort-lab-<set>-<name>`, the pin's replaces, `go get <main>@<version>` for each main package, then one
 * `go build -trimpath -ldflags "-s -w -X <versionVars>…"` (plus `-extldflags=-static` with `cgo`) per binary into `<outDir>/<binaries[name]>` (they share
 * the build cache). The wrapper's go.mod/go.sum (the exact build list) are kept in `<outDir>/build/`. Each
 * binary's build time (seconds) and size (MB) is logged as `<name>: built <binary> in <s>s (<MB> MB)`.
 *
 * @param id - cache identity and recipe (see common/sim-catalog.ts; the `local` set uses the same shape).
 * @param ctx - build context from `ensureTools()`.
 * @param options - see {@link GoWrapperOptions}. @default `{ set: "sim", cgo: false }`
 * @returns `"build"` (the stamp's source).
 * @throws ToolBuildError from `checkGo` (Go missing or older than `toolchain.goMinVersion`) or from the first
 *   failing `go` command (with its output tail).
 */
export async function buildGoWrapperTool(id: SimToolId, ctx: BuildContext, options: GoWrapperOptions = {}): Promise<"build"> {
  const set = options.set ?? "sim";
  await checkGo(toolchain.goMinVersion, ctx.env);
  const env = goEnv(ctx.env);
  if (options.cgo === true) env.CGO_ENABLED = "1";
  const o = { env: ctx.env, log: ctx.log, label: id.name };
  const work = path.join(ctx.workDir, "wrapper");
  fs.mkdirSync(work, { recursive: true });
  await runGo(["mod", "init", `local/cohort-lab-${set}-${id.name}`], work, env, o);
  const replaces = Object.entries(id.pin.replace).map(([from, to]) => `-replace=${from}=${to}`);
  if (replaces.length > 0) await runGo(["mod", "edit", ...replaces], work, env, o);
  const mains = Object.entries(id.pin.mainPackages);
  await runGo(["get", ...mains.map(([, pkg]) => `${pkg}@${id.pin.goModuleVersion}`)], work, env, o);
  const ldflags = ["-s", "-w", ...Object.entries(id.pin.versionVars).map(([k, v]) => `-X ${k}=${v}`), ...(options.cgo === true ? ["-extldflags=-static"] : [])].join(" ");
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

/**
 * A {@link Tool} built by {@link buildGoWrapperTool}: cache directory `<id.name>-<id.version>`, the pin as the
 * stamp's pin (so the cache identity is exactly the id's), and a version check that runs the first entry of
 * `id.binaries` with `id.pin.versionCheck.args` (none when the pin's `versionCheck` is `null`).
 *
 * @param id - cache identity and recipe.
 * @param options - passed to {@link buildGoWrapperTool}. @default `{ set: "sim", cgo: false }`
 */
export function goWrapperTool(id: SimToolId, options: GoWrapperOptions = {}): Tool {
  const first = Object.keys(id.binaries)[0] as string;
  return {
    name: id.name,
    version: id.version,
    pin: id.pin,
    binaries: id.binaries,
    buildDescription: `a Go source build of ${id.pin.goModule}@${id.pin.goModuleVersion} (${Object.keys(id.binaries).join(", ")})`,
    versionCheck: id.pin.versionCheck !== null ? { binary: first, args: id.pin.versionCheck.args, expect: id.pin.versionCheck.expect } : undefined,
    build: (ctx) => buildGoWrapperTool(id, ctx, options),
  };
}

/** The sim tools, in build order (control plane first). */
export const simTools: readonly Tool[] = simToolIds.map((id) => goWrapperTool(id));

/** The `sim` tool set (`npm run toolchain -- sim`). */
export const toolSet: ToolSet = {
  name: "sim",
  description: "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Kueue manager, Agent Sandbox controller",
  tools: () => simTools,
};

/**
 * The `local` tool set (`npm run toolchain -- local`): every binary the `local` (kind) profile needs to build a
 * kind node image offline — kind, kubelet/kubeadm/kubectl/kube-proxy, the control plane and etcd (the `sim`
 * set's own tools), CoreDNS, crictl, flanneld, the flannel CNI plugin, pause, the Temporal CLI, the Kueue manager
 * and the Agent Sandbox controller. Go programs are built from the Go module proxy in throw-away wrapper modules
 * by {@link buildGoWrapperTool} (`CGO_ENABLED=0`, `GOTOOLCHAIN=local`, `-trimpath`, `-ldflags "-s -w -X ..."`);
 * pause is compiled with the system gcc from the Kubernetes module zip. Each is cached by version under
 * `<cache>/<tool>-<version>/bin/` with its stamp written last (scripts/lib/tool.ts); paths by logical name come
 * from `findLocalBinaries()` (scripts/local/catalog.ts).
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { goEnv, goModDownload } from "./lib/go";
import { ToolBuildError, type BuildContext, type Tool, type ToolSet } from "./lib/tool";
import { isPauseToolId, localToolIds, type PauseToolId } from "./local/catalog";
import { goWrapperTool, simTools } from "./toolchain-sim";

const execFileAsync = promisify(execFile);

/**
 * Builds pause: `go mod download -json <goModule>@<goModuleVersion>` (module directory in GOMODCACHE), then
 * `gcc <cflags> -DVERSION=<version> -o <outDir>/bin/pause <dir>/<sourcePath>` and `strip` (both from PATH).
 *
 * @returns `"build"` (the stamp's source).
 * @throws ToolBuildError when the proxy refuses the module, the source file is absent, or gcc/strip fail
 *   (with their output).
 */
export async function buildPause(id: PauseToolId, ctx: BuildContext): Promise<"build"> {
  const o = { env: ctx.env, log: ctx.log, label: id.name };
  const { dir } = await goModDownload({ path: id.pin.goModule, ref: id.pin.goModuleVersion }, ctx.workDir, goEnv(ctx.env), o);
  const src = path.join(dir, id.pin.sourcePath);
  if (!fs.existsSync(src)) throw new ToolBuildError(`pause: ${id.pin.sourcePath} is not in ${id.pin.goModule}@${id.pin.goModuleVersion}`, id.name);
  const out = path.join(ctx.outDir, id.binaries.pause as string);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const run = async (cmd: string, args: readonly string[]) => {
    ctx.log(`  ${id.name}| ${cmd} ${args.join(" ")}`);
    try {
      await execFileAsync(cmd, [...args], { env: ctx.env, cwd: ctx.workDir });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new ToolBuildError(`pause: ${cmd} failed: ${(e.stderr ?? "").trim() || e.message}`, id.name);
    }
  };
  const started = Date.now();
  await run("gcc", [...id.pin.cflags, `-DVERSION=${id.pin.version}`, "-o", out, src]);
  await run("strip", [out]);
  ctx.log(`${id.name}: built pause in ${((Date.now() - started) / 1000).toFixed(1)}s (${fs.statSync(out).size} bytes)`);
  return "build";
}

/** A {@link Tool} for pause: cache directory `pause-<version>`, version check `pause -v` -> `pause.c <version>`. */
export function pauseTool(id: PauseToolId): Tool {
  return {
    name: id.name,
    version: id.version,
    pin: id.pin,
    binaries: id.binaries,
    buildDescription: `gcc ${id.pin.cflags.join(" ")} of ${id.pin.sourcePath} from ${id.pin.goModule}@${id.pin.goModuleVersion}`,
    versionCheck: { binary: "pause", args: ["-v"], expect: `pause.c ${id.pin.version}` },
    build: (ctx) => buildPause(id, ctx),
  };
}

/**
 * The `local` tools, in build order (see `localToolIds`). etcd, `kubernetes`, `kueue` and `agent-sandbox` are the
 * `sim` set's own {@link Tool} objects (`simTools`), so both sets share their cache directories and stamps.
 */
export const localTools: readonly Tool[] = localToolIds.map((id) => {
  if (isPauseToolId(id)) return pauseTool(id);
  return simTools.find((t) => t.name === id.name && t.version === id.version) ?? goWrapperTool(id, "local");
});

/** The `local` tool set (`npm run toolchain -- local`). */
export const toolSet: ToolSet = {
  name: "local",
  description: "kind, kubelet, kubeadm, kubectl, kube-proxy, control plane, etcd, CoreDNS, crictl, flannel, pause, Temporal CLI, Kueue, Agent Sandbox (kind node image, offline)",
  tools: () => localTools,
};

/**
 * The `local` tool set (`npm run toolchain -- local`): every binary the `local` (kind) profile needs to build a
 * kind node image offline — kind, kubelet/kubeadm/kubectl/kube-proxy, the control plane and etcd (the `sim`
 * set's own tools), CoreDNS, crictl, flanneld, the flannel CNI plugin, pause, the Temporal CLI, the Kueue manager
 * and the Agent Sandbox controller. Go programs are built from the Go module proxy in throw-away wrapper modules
 * by `buildGoWrapperTool` (scripts/toolchain-sim.ts: `GOTOOLCHAIN=local`, `-trimpath`, `-ldflags "-s -w -X ..."`,
 * `CGO_ENABLED=0` except for flanneld); pause is compiled with the system gcc from the Kubernetes module zip.
 * Each is cached by version under `<cache>/<tool>-<version>/bin/` with its stamp written last
 * (scripts/lib/tool.ts); paths by logical name come from `findLocalBinaries()` (common/local-catalog.ts).
 *
 * Cold builds take minutes per tool on 2 cores (figures in docs/toolchain.md); a warm run only checks stamps.
 */
import { execFile, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { local, type LocalGoProgramPin } from "../common/pins";
import { goEnv, goModDownload } from "./lib/go";
import { ToolBuildError, type BuildContext, type Tool, type ToolSet } from "./lib/tool";
import { isPauseToolId, localToolIds, type PauseToolId } from "../common/local-catalog";
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
 * Tools whose version flag prints to stderr and exits 0: flanneld (`--version`) and the flannel CNI plugin (the
 * "about" line, printed when `CNI_COMMAND` is unset). `checkToolDir()` (scripts/lib/tool.ts) reads only stdout
 * of a command that succeeds, so for these the pin's version check runs once, right after the build
 * ({@link checkedAtBuild}); warm runs check the stamp's pin and binary sizes, as for the Kueue manager.
 */
const stderrVersionTools: ReadonlySet<string> = new Set(["flannel", "cni-flannel"]);

/**
 * Moves a tool's version check from every run to the end of its build, reading stdout and stderr: the binary
 * (`versionCheck.binary`, inside `ctx.outDir`) runs with `versionCheck.args` and the environment of `ctx.env`
 * minus `CNI_COMMAND`, with a 60 s timeout.
 *
 * @returns the same tool (same name, version, pin: the same cache identity) without a warm version check.
 * @throws ToolBuildError (from the build) when the output lacks `versionCheck.expect`.
 */
export function checkedAtBuild(tool: Tool): Tool {
  const check = tool.versionCheck;
  if (check === undefined) return tool;
  return {
    ...tool,
    versionCheck: undefined,
    async build(ctx) {
      const source = await tool.build(ctx);
      const bin = path.join(ctx.outDir, tool.binaries[check.binary] ?? check.binary);
      const env = { ...ctx.env };
      delete env.CNI_COMMAND;
      const r = spawnSync(bin, [...check.args], { env, encoding: "utf8", timeout: 60_000, stdio: ["ignore", "pipe", "pipe"] });
      const out = `${r.stdout ?? ""}${r.stderr ?? ""}`;
      if (!out.includes(check.expect)) {
        throw new ToolBuildError(
          `${tool.name}: ${[bin, ...check.args].join(" ")} printed ${JSON.stringify(out.trim().slice(0, 200))}, expected ${JSON.stringify(check.expect)}`,
          tool.name,
        );
      }
      ctx.log(`${tool.name}: ${[path.basename(bin), ...check.args].join(" ")} printed ${JSON.stringify(out.trim().slice(0, 120))}`);
      return source;
    },
  };
}

/**
 * kind's official release binary (a bare executable, not an archive: `member: ""`) with its pinned SHA-256
 * (common/pins.ts `local.kind`): `COHORT_TOOLCHAIN_SOURCE=auto` tries it first and builds from the Go module proxy
 * when it cannot be downloaded and verified (as on a machine without access to the release site), `official`
 * requires it, `build` never asks for it — the rule of every other tool.
 */
const kindOfficial: NonNullable<Tool["official"]> = {
  artifact: { url: local.kind.platforms["linux-x64"].url, sha256: local.kind.platforms["linux-x64"].sha256, member: "" },
  binary: "kind",
};

/**
 * The `local` tools, in build order (see `localToolIds`). etcd, `kubernetes`, `kueue` and `agent-sandbox` are the
 * `sim` set's own {@link Tool} objects (`simTools`), so both sets share their cache directories and stamps.
 */
export const localTools: readonly Tool[] = localToolIds.map((id) => {
  if (isPauseToolId(id)) return pauseTool(id);
  const shared = simTools.find((t) => t.name === id.name && t.version === id.version);
  if (shared !== undefined) return shared;
  const tool = goWrapperTool(id, { set: "local", cgo: (id.pin as LocalGoProgramPin).cgo === true });
  if (id.name === "kind") return { ...tool, official: kindOfficial };
  return stderrVersionTools.has(id.name) ? checkedAtBuild(tool) : tool;
});

/** The `local` tool set (`npm run toolchain -- local`). */
export const toolSet: ToolSet = {
  name: "local",
  description: "kind, kubelet, kubeadm, kubectl, kube-proxy, control plane, etcd, CoreDNS, crictl, flannel, pause, Temporal CLI, Kueue, Agent Sandbox (kind node image, offline)",
  tools: () => localTools,
};

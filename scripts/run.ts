/**
 * `tsx scripts/run.ts <command> [args...]`: runs a command inside the pinned toolchain environment. Every npm
 * script that needs Node >= 22 or Pulumi goes through it (`npm run pulumi`, `up`, `preview`, `destroy`,
 * `test`, `build`, `typecheck`, ...), so a user never sources anything.
 *
 * Under whatever Node npm started (the system Node 20 on our machines) it finds the toolchain without building
 * anything (scripts/lib/env.ts), computes the environment (PATH with Node 24 and the pinned `pulumi` first,
 * repo-local PULUMI_HOME, the file backend, PULUMI_CONFIG_PASSPHRASE, plugin downloads, registry lookups and
 * update checks disabled) and runs the command with it, forwarding stdio, signals and the exit status. Only
 * when the program itself must run in this process (below) and this Node is older than 22 does it re-execute
 * itself under the cached Node 24 with tsx's loader.
 *
 * For `pulumi`, it first refuses with a clear message (exit code 2) when the toolchain is missing or when the
 * CLI or the plugins in PULUMI_HOME do not match the versions in package.json. `pulumi up` and `pulumi preview`
 * (and their aliases, and `refresh`/`destroy` with `--run-program`) are run against the SDK's in-process language
 * runtime (scripts/lib/pulumi-host.ts); every other subcommand, `destroy` and `refresh` included, runs the CLI
 * directly (they work from the state and need no language runtime).
 *
 * Why no `pulumi-language-nodejs` (checked on 2026-11-30 on this network):
 * - The language host is its own Go module, github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3,
 *   without tags, so it can only be fetched by commit (pseudo-version). The Go module proxy answers
 *   `403 This module version is not available.` for it at every form we tried: `@v/list`, the pkg/v3.259.0 tag
 *   commit a05d88f24d05726fa3beae771bfdedb0c0c6a94a, the pkg/v3.248.0 commit dc7edd58bc13179f81b80983aab4eb7f74a01b41,
 *   and pseudo-versions built from them. GitHub and get.pulumi.com (the release archive that bundles it) are
 *   unreachable here. So `go install`/`go build` of it is impossible.
 * - The npm registry has no package that ships the binary (the `pulumi` npm package only wraps the online installer).
 * - Old github.com/pulumi/pulumi/sdk/v3 releases (v3.68.0 and before; gone by v3.90.0) still carried
 *   `nodejs/cmd/pulumi-language-nodejs` as a package inside the sdk module, which the proxy serves, so a 2023-era
 *   host could be built. It would not match @pulumi/pulumi 3.259.0 (three years of language-protocol changes),
 *   so it was not used.
 * What we do instead is the Automation API's inline-program path, which the engine supports for exactly these
 * subcommands (`--client`, `--exec-kind auto.inline`). Consequences: subcommands that need the language host
 * for something else (`pulumi about`'s dependency list, `pulumi install`, `pulumi convert`, `pulumi import`'s
 * code generation, `pulumi watch`, `runtime: nodejs` policy packs) are not available through this launcher.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { ensureBackendDir, resolveToolchain, toolchainEnv, ToolchainError, type Toolchain } from "./lib/env";
import { toolchain as pins } from "../common/pins";
import { nodeMajor } from "./lib/node-tool";
import { envNames } from "../common/paths";
import { parsePulumiArgs } from "./lib/pulumi-args";
import { exitLike, forwardSignals, reexecUnder } from "./lib/process";
import { findProject as findProjectForHintDir, missingStackHint, pendingCreateHints, stackArgument, staleLockHints, teeStderr } from "./lib/pulumi-host";

/** The project name for {@link pendingCreateHints}, or `""`. */
function findProjectForHint(dir: string): string {
  return findProjectForHintDir(dir)?.name ?? "";
}

/** Exit code when the launcher refuses to start (toolchain missing or mismatched, bad usage). */
const refusalExitCode = 2;

function refuse(lines: readonly string[]): never {
  process.stderr.write(`cohort-lab: cannot run: ${lines.join("\n  ")}\n`);
  process.exit(refusalExitCode);
}

async function main(argv: readonly string[]): Promise<void> {
  const [command, ...args] = argv;
  if (command === undefined || command === "") refuse(["usage: tsx scripts/run.ts <command> [args...]"]);

  let tc: Toolchain;
  try {
    tc = resolveToolchain({ needPulumi: command === "pulumi" });
  } catch (err) {
    if (err instanceof ToolchainError) refuse(err.problems);
    throw err;
  }
  const env = toolchainEnv(tc);
  delete env[envNames.stage2];

  if (command !== "pulumi") {
    // Any other command (vitest, tsc, node, tsx, ...): resolved through the new PATH, whose first entries are the
    // cached Node and node_modules/.bin, so `#!/usr/bin/env node` scripts run under Node >= 22.
    runDirect(command, args, env);
    return;
  }

  ensureBackendDir(tc.backendUrl);
  fs.mkdirSync(tc.pulumiHome, { recursive: true });
  const pulumiBin = (tc.pulumi as NonNullable<Toolchain["pulumi"]>).bin;
  const inv = parsePulumiArgs(args);
  const backendFromEnv = (process.env[envNames.backendUrl] ?? "") !== "";
  // Once per command: not again in the re-executed second stage.
  if (
    process.env[envNames.stage2] === undefined &&
    !inv.help &&
    (inv.subcommand === "up" ||
      inv.subcommand === "update" ||
      inv.subcommand === "preview" ||
      inv.subcommand === "pre" ||
      inv.subcommand === "destroy" ||
      inv.subcommand === "down")
  ) {
    try {
      const project = findProjectForHint(inv.cwd ?? process.cwd());
      for (const line of pendingCreateHints(env.PULUMI_BACKEND_URL ?? "", project, stackArgument(args))) process.stderr.write(`${line}\n`);
    } catch {
      // only a hint
    }
  }
  if (!inv.runsProgram || inv.hasClient || inv.help) {
    runDirect(pulumiBin, args, env, { backendFromEnv });
    return;
  }

  // The program runs in this process (the SDK's in-process language runtime), which needs Node >= 22.
  if (nodeMajor(process.version) < pins.node.minSystemMajor) {
    if (process.env[envNames.stage2] !== undefined) throw new Error(`re-executed under ${process.version}, still older than ${pins.node.minSystemMajor}`);
    reexecUnder(tc.node.bin, __filename, argv, { ...env, [envNames.stage2]: "1" });
    return;
  }
  const { findProject, runPulumiInline, ProjectError } = await import("./lib/pulumi-host.js");
  let project: Awaited<ReturnType<typeof findProject>>;
  try {
    project = findProject(inv.cwd ?? process.cwd());
  } catch (err) {
    if (err instanceof ProjectError) refuse([(err as Error).message]);
    throw err;
  }
  if (project === undefined || project.runtime !== "nodejs") {
    runDirect(pulumiBin, args, env, { backendFromEnv }); // the CLI reports the missing project or the other runtime itself
    return;
  }
  const status = await runPulumiInline({ pulumiBin, args, invocation: inv, project, env, backendFromEnv });
  exitLike(status.exitCode, status.signal);
}

/**
 * Runs `file` with stdio inherited and signals forwarded, then ends this process with its status. Uses
 * `node:child_process` because this may run under the system Node 20, where execa 10 is not available.
 * With `pulumi` set, the CLI's stderr is copied through instead, so that `no stack named '<stack>' found`
 * can be followed by the backend that was searched (scripts/lib/pulumi-host.ts `missingStackHint`).
 */
function runDirect(file: string, args: readonly string[], env: Record<string, string>, pulumi?: { readonly backendFromEnv: boolean }): void {
  const child = spawn(file, args, { stdio: pulumi === undefined ? "inherit" : ["inherit", "inherit", "pipe"], env });
  const tail = pulumi === undefined ? undefined : teeStderr(child.stderr);
  const stop = forwardSignals(child);
  child.on("error", (err) => {
    stop();
    refuse([`${file}: ${err.message}`]);
  });
  child.on("close", (code, signal) => {
    stop();
    if (tail !== undefined && code !== 0) {
      const hint = missingStackHint(tail(), env.PULUMI_BACKEND_URL ?? "", pulumi?.backendFromEnv ?? false);
      if (hint !== undefined) process.stderr.write(`${hint}\n`);
      for (const line of staleLockHints(tail(), args)) process.stderr.write(`${line}\n`);
    }
    exitLike(code, signal);
  });
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`cohort-lab: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});

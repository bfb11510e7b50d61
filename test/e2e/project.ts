/**
 * The e2e tests' copy of the Pulumi project outside the work tree: `Pulumi.yaml` with `main` pointing back at
 * this repository's `index.ts`, the stack files named, and `node_modules` linked, so each test file runs the
 * real program against its own file backend and stack files without touching the repository's.
 */
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { PROJECT_DIR } from "../../stacks/config";

/**
 * Creates `projectDir` (and its parents) holding the project file, `Pulumi.<stack>.yaml` copied for each of
 * `stacks`, and a `node_modules` link to this repository's.
 *
 * @throws when `projectDir` already holds any of these files (a test reusing a directory by mistake)
 */
export function copyProject(projectDir: string, stacks: readonly string[]): void {
  mkdirSync(projectDir, { recursive: true });
  const project = readFileSync(path.join(PROJECT_DIR, "Pulumi.yaml"), "utf8");
  writeFileSync(path.join(projectDir, "Pulumi.yaml"), `${project.trimEnd()}\nmain: ${path.join(PROJECT_DIR, "index.ts")}\n`, { flag: "wx" });
  for (const stack of stacks) {
    writeFileSync(path.join(projectDir, `Pulumi.${stack}.yaml`), readFileSync(path.join(PROJECT_DIR, `Pulumi.${stack}.yaml`)), { flag: "wx" });
  }
  symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(projectDir, "node_modules"));
}

/**
 * The pid of the `pulumi up` CLI running on the project in `projectDir` (not the launcher's npm, sh or node stages
 * above it), found in /proc by its command line; `undefined` when none runs. The tests SIGKILL it mid-run.
 */
export function pulumiUpPid(projectDir: string): number | undefined {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    if ((argv[0] ?? "").endsWith("/pulumi") && argv.includes("up") && argv.includes(projectDir)) return Number(d);
  }
  return undefined;
}

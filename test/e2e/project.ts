/**
 * The e2e tests' copy of the Pulumi project outside the work tree: `Pulumi.yaml` with `main` pointing back at
 * this repository's `index.ts`, the stack files named, and `node_modules` linked, so each test file runs the
 * real program against its own file backend and stack files without touching the repository's.
 */
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
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

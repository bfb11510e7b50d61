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

/** Pids whose parent is `pid` (from `/proc/<pid>/stat`, field 4), with their argv[0]. */
function childProcesses(pid: number): { pid: number; argv0: string }[] {
  const out: { pid: number; argv0: string }[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      // The command name (field 2) is in parentheses and may hold spaces: the fields after it follow the last ")".
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push({ pid: Number(d), argv0: readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0")[0] ?? "" });
    } catch {
      continue; // exited meanwhile
    }
  }
  return out;
}

/**
 * SIGKILLs the `pulumi` CLI `pid` (a cancelled CI job), then stops (SIGTERM) the resource provider plugins it had
 * started (`pulumi-resource-*`, its direct children). A SIGKILLed CLI cannot stop them: the command provider
 * watches its parent and exits, but pulumi-resource-kubernetes is reparented to init and keeps running (seen in
 * the sim and local tiers), where a CI runner would kill the job's whole process tree. A test that simulates the
 * kill must not leave them behind.
 *
 * @returns the provider pids signalled
 */
export function sigkillPulumi(pid: number): number[] {
  // (A provider that exited is reaped by init, or stays a zombie where init does not reap: see stillRunningAfter.)
  const providers = childProcesses(pid)
    .filter((c) => path.basename(c.argv0).startsWith("pulumi-resource-"))
    .map((c) => c.pid);
  process.kill(pid, "SIGKILL");
  for (const p of providers) {
    try {
      process.kill(p, "SIGTERM");
    } catch {
      // already gone
    }
  }
  return providers;
}

/** Whether `pid` is a live process: it exists and is not a zombie (`/proc/<pid>/stat` state `Z`). */
function processRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/**
 * Waits up to `timeoutMs` for the processes {@link sigkillPulumi} signalled to stop.
 *
 * @returns the pids still running then (empty when all stopped)
 */
export async function stillRunningAfter(pids: readonly number[], timeoutMs = 10_000): Promise<number[]> {
  const stopBy = Date.now() + timeoutMs;
  while (pids.some((p) => processRunning(p)) && Date.now() < stopBy) await new Promise((r) => setTimeout(r, 200));
  return pids.filter((p) => processRunning(p));
}

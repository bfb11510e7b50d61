/**
 * Runs the SHIPPED runtime for a benchmark: `node <bundle> <args>` as a child process, the way a profile runs
 * it, with stdin closed and stdout/stderr collected. Shared by bench/startup.ts and bench/liveness.ts.
 */
import { spawn } from "node:child_process";

/** How one `cohort` run ended: exit code, what it printed, and its wall time in ms (spawn to close). */
export interface CohortCliExit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly wallMs: number;
}

/** Runs `node <bundle> ...args` and resolves when it has exited and closed its output. Never rejects. */
export function runCohortCli(bundle: string, args: readonly string[]): Promise<CohortCliExit> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bundle, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("close", (code) => resolve({ code, stdout, stderr, wallMs: performance.now() - started }));
  });
}

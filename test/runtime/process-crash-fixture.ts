/**
 * Fixture for process.test.ts: a runtime that starts members with the real process backend and then
 * dies of an uncaught exception (argv[2] = "throw") or process.exit (argv[2] = "exit"); argv[3] is the
 * launcher (`native`, `perl` or `direct`). Prints the member process group ids, one per line, before dying.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ProcessBackend } from "../../runtime/backends/process/index";

async function main(): Promise<void> {
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-crash-"));
  const backend = new ProcessBackend({ runDir, events: () => undefined, launcher: process.argv[3] === "direct" ? "direct" : process.argv[3] === "native" ? "native" : "perl" });
  for (const id of ["m-0", "m-1"]) {
    const handle = await backend.start(
      {
        id,
        role: "m",
        index: 0,
        runId: "crash",
        command: ["sh", "-c", "sleep 1000 & exec sleep 1000"],
        env: { COHORT_RUN_ID: "crash-fixture" },
        secretEnv: [],
        image: "",
        resources: {},
        port: 0,
        workDir: path.join(runDir, "members", id),
        files: {},
      },
      new AbortController().signal,
    );
    process.stdout.write(`${String(handle.detail?.pgid)}\n`);
  }
  if (process.argv[2] === "exit") process.exit(7);
  throw new Error("boom: an uncaught exception in the runtime");
}

void main();

import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";

// One config for every test tier (see README "Tests"). Each file runs in its own forked process:
// Pulumi's runtime keeps process-wide state, and runtime tests spawn real child processes.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The sim tier needs the sim binaries and minutes per file: `npm run test:sim` (vitest.sim.config.mts).
    exclude: [...configDefaults.exclude, "test/sim/**", "test/local/**", "test/multipass/**"],
    pool: "forks",
    // Each file's temp fixtures (and its child processes') under one root removed after the file: test/setup/tmpdir.ts.
    setupFiles: ["test/setup/tmpdir.ts"],
    // One file at a time: the e2e tier starts real OpenClaw gateways (about 1 GB and 20 s of CPU each)
    // and the runtime tests measure real process start-up; on a 2-core machine a second test file
    // running beside them starves them (OpenClaw exits with code 78 when its 5 s start-up lease misses).
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default"],
    // Runtime code run from source finds the compiled member launcher that `npm run build` (pretest) writes.
    env: { COHORT_LAUNCHER: path.join(path.dirname(fileURLToPath(import.meta.url)), "dist", "cohort-launcher") },
  },
});

import { configDefaults, defineConfig } from "vitest/config";

// One config for every test tier (see README "Tests"). Each file runs in its own forked process:
// Pulumi's runtime keeps process-wide state, and runtime tests spawn real child processes.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The sim tier needs the sim binaries and minutes per file: `npm run test:sim` (vitest.sim.config.ts).
    exclude: [...configDefaults.exclude, "test/sim/**"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default"],
  },
});

import { defineConfig } from "vitest/config";

// The opt-in multipass tier (`npm run test:multipass`): tests against the Multipass stand-in (test/tools/multipass/),
// whose instances are real systemd-nspawn containers with systemd as PID 1 and cloud-init. Needs root and
// `npm run toolchain -- multipass`. Files run one at a time: each boots its own instances.
export default defineConfig({
  test: {
    include: ["test/multipass/**/*.test.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 600_000,
    reporters: ["default"],
  },
});

import { defineConfig } from "vitest/config";

// The opt-in sim tier (`npm run test:sim`): tests against a real control plane (simctl/, test/sim/harness.ts).
// Files run one at a time: each starts its own etcd, kube-apiserver, controller-manager, scheduler, kwok and
// controllers, which on a 2-core machine must not compete with another file's.
export default defineConfig({
  test: {
    include: ["test/sim/**/*.test.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 900_000,
    reporters: ["default"],
    // Each file's temp fixtures and its child processes' (the Pulumi Kubernetes provider's kubeconfig<N> files, a
    // killed Temporal worker's cohort-worker-* output) under one root removed after the file: test/setup/tmpdir.ts.
    setupFiles: ["test/setup/tmpdir.ts"],
  },
});

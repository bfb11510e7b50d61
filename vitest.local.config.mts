import { defineConfig } from "vitest/config";

// The `local` tier (`npm run test:local`): `pulumi up --stack local` for real, a kind cluster on this machine's
// Docker engine (test/local). Needs the Docker engine (scripts/docker-engine.sh), the `local`, `local-images` and
// `local-apps` tool sets and the manifests; each file skips with the reason printed when they are missing.
// Files run one at a time: a kind cluster of three nodes uses most of a 2-core machine.
export default defineConfig({
  test: {
    include: ["test/local/**/*.test.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 900_000,
    hookTimeout: 900_000,
    reporters: ["default"],
    // Each file's temp fixtures and its child processes' (the Pulumi Kubernetes provider's kubeconfig<N> files, a
    // killed Temporal worker's cohort-worker-* output) under one root removed after the file: test/setup/tmpdir.ts.
    setupFiles: ["test/setup/tmpdir.ts"],
  },
});

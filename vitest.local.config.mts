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
  },
});

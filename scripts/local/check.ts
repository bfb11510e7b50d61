/**
 * `npm run -s local-check`: exit 0 and print "ready" when the tool cache holds everything the `local` tier
 * (`npm run test:local`) needs — kind and kubectl, the node image, the project images, the manifests and the
 * runtime bundle — otherwise exit 1 and print what is missing and the command that builds it; exit 3 when the
 * check itself fails (an unreadable record, a crash), which .ci/run treats as a failure, not a skip. Reads only
 * the cache: no Docker engine needed (.ci/run decides with it whether to start one).
 */
import { localBuildMissing } from "./readiness";

// Exit 0: ready; 1: something is not built (the line says what and how to build it); 3: the check itself failed.
try {
  const missing = localBuildMissing();
  process.stdout.write(missing === undefined ? "local tool set, node image, images and manifests: ready\n" : `${missing}\n`);
  process.exitCode = missing === undefined ? 0 : 1;
} catch (error) {
  process.stdout.write(`local-check could not read the tool cache: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 3;
}

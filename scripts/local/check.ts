/**
 * `npm run -s local-check`: exit 0 and print "ready" when the tool cache holds everything the `local` tier
 * (`npm run test:local`) needs — kind and kubectl, the node image, the project images, the manifests and the
 * runtime bundle — otherwise exit 1 and print what is missing and the command that builds it. Reads only the
 * cache: no Docker engine needed (.ci/run decides with it whether to start one).
 */
import { localBuildMissing } from "./readiness";

const missing = localBuildMissing();
process.stdout.write(missing === undefined ? "local tool set, node image, images and manifests: ready\n" : `${missing}\n`);
process.exitCode = missing === undefined ? 0 : 1;

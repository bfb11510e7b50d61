/**
 * The bundle's first statement (the first import of runtime/cli.ts): `node dist/cohort.cjs ...` under a Node older
 * than {@link MIN_NODE_MAJOR} (the system Node 20) exits 1 with ONE stderr line,
 * `cohort: needs Node >= 22 (this is v20.x); run it with Node >= 22, or through bin/cohort.cjs (npx cohort), which
 * uses the Node the build recorded in dist/cohort.node`, instead of failing later with an error such as
 * `TEXT_ENCODINGS.union is not a function`. The version check is the one bin/cohort.cjs uses (../node-version.cjs).
 * Only when the bundle is the main module (`require.main.filename === __filename`; in the bundle `__filename` is dist/cohort.cjs): a program that require()s it (bin/cohort.cjs) checks for itself.
 */
import { MIN_NODE_MAJOR, nodeTooOld } from "../node-version.cjs";

if (nodeTooOld() && typeof require !== "undefined" && require.main !== undefined && require.main.filename === __filename) {
  process.stderr.write(
    `cohort: needs Node >= ${MIN_NODE_MAJOR} (this is ${process.version}); run it with Node >= ${MIN_NODE_MAJOR}, or through bin/cohort.cjs (npx cohort), which uses the Node the build recorded in dist/cohort.node\n`,
  );
  process.exit(1);
}

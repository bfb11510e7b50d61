#!/usr/bin/env node
// `cohort` (package.json "bin"): runs the bundled runtime, dist/cohort.cjs (built by `npm run build`).
//
// The runtime needs Node >= 22. Under an older Node (the system Node 20 that `npx cohort` finds on PATH), it
// re-executes itself with the Node that built the bundle, whose path `npm run build` records in
// dist/cohort.node (the toolchain's pinned Node 24), forwarding signals and the exit status.
"use strict";
const path = require("node:path");
const fs = require("node:fs");
const dist = path.join(__dirname, "..", "dist");
const bundle = path.join(dist, "cohort.cjs");
if (!fs.existsSync(bundle)) {
  process.stderr.write(`cohort: ${bundle} does not exist; build it with \`npm run build\` (scripts/bundle.mjs)\n`);
  process.exit(1);
}
// The version check the bundle's entry makes too (runtime/core/require-node.ts).
const { nodeTooOld } = require("../runtime/node-version.cjs");
if (nodeTooOld()) {
  let node = "";
  try {
    node = fs.readFileSync(path.join(dist, "cohort.node"), "utf8").trim();
    fs.accessSync(node, fs.constants.X_OK);
  } catch {
    process.stderr.write(
      `cohort: needs Node >= 22 (this is ${process.version}) and no Node recorded by the build in ${path.join(dist, "cohort.node")} can be run; ` +
        "run `npm run toolchain && npm run build` (the toolchain provides the pinned Node 24), or run cohort with Node >= 22\n",
    );
    process.exit(1);
  }
  const { spawn } = require("node:child_process");
  const child = spawn(node, [bundle, ...process.argv.slice(2)], { stdio: "inherit" });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
  child.on("error", (error) => {
    process.stderr.write(`cohort: cannot run ${node}: ${error.message}\n`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    if (signal !== null) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
} else {
  require(bundle)
    .main(process.argv.slice(2))
    .then((code) => {
      process.exitCode = code;
      setTimeout(() => process.exit(code), 2000).unref();
    });
}

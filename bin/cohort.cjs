#!/usr/bin/env node
// `cohort` (package.json "bin"): runs the bundled runtime, dist/cohort.cjs (built by `npm run build`).
//
// The runtime needs Node >= 22. Under an older Node (the system Node 20 that `npx cohort` finds on PATH), it
// re-executes itself with the Node that built the bundle, whose path `npm run build` records in
// dist/cohort.node (the toolchain's pinned Node 24), forwarding signals (each once) and the exit status; the
// runtime stops its run when this wrapper dies (runtime/core/wrapper-link.ts).
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
  // The runtime runs in its own session (`detached`: setsid), so a signal to this process group (a terminal's
  // Ctrl-C, `kill -INT -<pgid>`) reaches this wrapper only, and the runtime gets each signal exactly once: the copy
  // forwarded here (before, it got a group signal twice and took the second for "kill the members now"). Being
  // outside the terminal's session, it is never stopped by job control (SIGTTIN/SIGTTOU).
  // Descriptor 3 is the child end of a pipe this wrapper never writes to: when the wrapper exits, however it exits
  // (even SIGKILL, which it cannot forward), the runtime reads end of file and stops its run as a SIGTERM would
  // (runtime/core/wrapper-link.ts). The caller's descriptors >= 3 did not reach the runtime before either.
  const child = spawn(node, [bundle, ...process.argv.slice(2)], {
    stdio: ["inherit", "inherit", "inherit", "pipe"],
    detached: true,
    env: { ...process.env, COHORT_WRAPPER_FD: "3", COHORT_WRAPPER_PID: String(process.pid) },
  });
  // This end stays open (and unread) for as long as the wrapper lives; it must not keep the wrapper alive.
  child.stdio[3].on("error", () => undefined);
  child.stdio[3].unref();
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

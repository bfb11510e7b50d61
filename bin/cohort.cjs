#!/usr/bin/env node
// `cohort` (package.json "bin"): runs the bundled runtime, dist/cohort.cjs (built by `npm run build`).
"use strict";
const path = require("node:path");
const fs = require("node:fs");
const bundle = path.join(__dirname, "..", "dist", "cohort.cjs");
if (!fs.existsSync(bundle)) {
  process.stderr.write(`cohort: ${bundle} does not exist; build it with \`npm run build\` (scripts/bundle.mjs)\n`);
  process.exit(1);
}
require(bundle)
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code;
    setTimeout(() => process.exit(code), 2000).unref();
  });

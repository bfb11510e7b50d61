/**
 * State compatibility only: `local` stacks created before the host-side steps moved to components/kind/steps.cjs
 * store this path in the delete steps of their Commands; `pulumi destroy` of such a stack runs it. The next
 * `pulumi up` stores the new path. Runs components/kind/steps.cjs with the same arguments; no code of its own.
 */
"use strict";
const { spawnSync } = require("node:child_process");
const path = require("node:path");
const r = spawnSync(process.execPath, [path.join(__dirname, "..", "components", "kind", "steps.cjs"), ...process.argv.slice(2)], { stdio: "inherit" });
process.exit(r.status ?? 1);

// The Node version cohort needs, shared by bin/cohort.cjs (which re-executes an older Node's call with the Node
// the build recorded) and the bundle's entry (runtime/core/require-node.ts, which refuses to start under it).
// Plain CommonJS so that bin/cohort.cjs can require it without the bundle; esbuild inlines it into dist/cohort.cjs.
"use strict";

/** The oldest Node major the runtime runs on (it uses e.g. Set.prototype.union, new in Node 22). */
const MIN_NODE_MAJOR = 22;

/**
 * True when `version` (default: this process's, `process.versions.node`, e.g. "20.20.2") is older than
 * MIN_NODE_MAJOR.
 * @param {string} [version]
 * @returns {boolean}
 */
function nodeTooOld(version = process.versions.node) {
  return Number(String(version).split(".")[0]) < MIN_NODE_MAJOR;
}

module.exports = { MIN_NODE_MAJOR, nodeTooOld };

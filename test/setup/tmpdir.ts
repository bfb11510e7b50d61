/**
 * Vitest setup file of the default, sim and local tiers (`setupFiles` in vitest.config.mts, vitest.sim.config.mts,
 * vitest.local.config.mts; not the multipass tier, whose instances mount overlays under their temp dirs): every
 * test file gets its own temp root,
 * `<os.tmpdir()>/cohort-test-XXXXXX`, as `TMPDIR` for itself and every process it starts (Node's `os.tmpdir()`,
 * Go's `os.TempDir()` and mktemp(1) all read it), and the root is removed after the file's last hook. Tests keep
 * creating their fixtures with `fs.mkdtempSync(path.join(os.tmpdir(), ...))`; none is left in /tmp.
 *
 * A file that needs a fixture to outlive it cannot have one here; none does.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll } from "vitest";

const previous = process.env.TMPDIR;
const root = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-test-"));
process.env.TMPDIR = root;

// Registered first, so it runs after every afterAll of the test file itself (vitest runs after-hooks in
// reverse order of registration: `sequence.hooks` "stack").
afterAll(() => {
  if (previous === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = previous;
  fs.rmSync(root, { recursive: true, force: true });
});

/**
 * runtime/core/atomic.ts `writeFileAtomic` on a full file system: the ENOSPC of the write names the file (Node's
 * own message, `ENOSPC: no space left on device, write`, named none, so `cohort run` printed just that for its
 * manifest). Needs a tmpfs small enough to fill: root and mount(8); skipped otherwise.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { writeFileAtomic } from "../../runtime/core/atomic";
import { tempDir } from "./process-helpers";

const mnt = tempDir("enospc");
const mounted = process.getuid?.() === 0 && spawnSync("mount", ["-t", "tmpfs", "-o", "size=200k", "tmpfs", mnt]).status === 0;
afterAll(() => {
  if (mounted) spawnSync("umount", [mnt]);
});

describe.skipIf(!mounted)(`writeFileAtomic on a full file system${mounted ? "" : " (skipped: cannot mount a tmpfs here)"}`, () => {
  it("ENOSPC names the target file and keeps the code; no temp file is left", async () => {
    // Fill the tmpfs: writes fail with ENOSPC at the limit.
    try {
      fs.writeFileSync(path.join(mnt, "fill"), Buffer.alloc(400 * 1024));
    } catch (error) {
      expect((error as NodeJS.ErrnoException).code).toBe("ENOSPC");
    }
    const target = path.join(mnt, "manifest.json");
    const error = await writeFileAtomic(target, "x".repeat(64 * 1024), { noClobber: true, syncDir: false }).then(
      () => undefined,
      (e: unknown) => e as NodeJS.ErrnoException,
    );
    expect(error?.code).toBe("ENOSPC");
    expect(error?.message).toBe(`ENOSPC: no space left on device, write '${target}'`);
    expect(fs.readdirSync(mnt)).toEqual(["fill"]);
  });
});

/**
 * `ProgressTail` (runtime/temporal/activities.ts): how `runCohort` follows the progress file of the run it started,
 * on a real file appended to as the runtime appends to it.
 */
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import * as os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ProgressTail } from "../../runtime/temporal/activities";

const dir = mkdtempSync(path.join(os.tmpdir(), "cohort-progress-tail-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("ProgressTail", () => {
  it("returns the last complete line written since the previous poll, keeps a partial line until its newline", () => {
    const file = path.join(dir, "progress");
    const tail = new ProgressTail(file);
    expect(tail.poll(), "no file yet").toBeUndefined();
    appendFileSync(file, "admission: started 0/3 ready 0/3\nstartup: started 1/3 ready 0/3\nstartup: star");
    expect(tail.poll()).toBe("startup: started 1/3 ready 0/3");
    expect(tail.poll(), "nothing new").toBeUndefined();
    appendFileSync(file, "ted 3/3 ready 2/3\n\n");
    expect(tail.poll(), "the partial line completed, the empty line skipped").toBe("startup: started 3/3 ready 2/3");
    appendFileSync(file, "hold: started 3/3 ready 3/3\n");
    expect(tail.poll()).toBe("hold: started 3/3 ready 3/3");
  });

  it("reads more than one buffer of new bytes in one poll", () => {
    const file = path.join(dir, "big");
    const tail = new ProgressTail(file);
    const lines = Array.from({ length: 5000 }, (_, i) => `startup: started ${i}/5000 ready 0/5000`);
    appendFileSync(file, `${lines.join("\n")}\n`);
    expect(tail.poll()).toBe(lines.at(-1));
  });
});

/**
 * runtime/index.ts is the one door into the runtime (issue #11): importing it from a Pulumi program must stay
 * cheap: no backend SDK (@kubernetes/client-node, execa) and no CLI (cli-progress, the Node version check).
 */
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { describe, expect, it } from "vitest";

const repo = path.resolve(__dirname, "../..");

describe("runtime/index.ts (the door)", () => {
  it("loads no backend SDK and no CLI module", () => {
    const code = `require("./runtime/index.ts"); const loaded = Object.keys(require.cache); process.stdout.write(JSON.stringify(loaded));`;
    const child = spawnSync(process.execPath, [path.join(repo, "node_modules/tsx/dist/cli.mjs"), "-e", code], { cwd: repo, encoding: "utf8", timeout: 60_000 });
    expect(child.stderr).toBe("");
    const loaded = JSON.parse(child.stdout) as string[];
    expect(loaded.some((file) => file.includes(path.join("runtime", "index.ts")))).toBe(true);
    for (const heavy of [
      "@kubernetes/client-node",
      `${path.sep}execa${path.sep}`,
      "cli-progress",
      path.join("runtime", "cli.ts"),
      path.join("runtime", "backends", "kubernetes", "client.ts"),
    ])
      expect(loaded.filter((file) => file.includes(heavy))).toEqual([]);
  });

  it("exports the names the rest of the repository imports", async () => {
    const door = await import("../../runtime/index.js");
    for (const name of [
      "canonicalJson",
      "sha256Hex",
      "readLedger",
      "LedgerWriter",
      "verifyLedger",
      "DEFAULT_FSYNC_POLICY",
      "SpecError",
      "MAX_COHORT_SIZE",
      "RUNSPEC_API_VERSION",
      "RUNSPEC_KIND",
      "validateRunSpec",
      "formatDurationMs",
      "parseDurationMs",
      "criticalPath",
      "Launcher",
      "NATIVE_LAUNCHER_NAME",
      "launcherBeside",
      "openRunCgroups",
      "createMemberCgroupAsync",
      "killCgroup",
      "CgroupWatcher",
      "removeCgroupTree",
      "removeCohortDirIfEmpty",
      "RUNTIME_POLICY_RULES",
      "OUTCOMES",
      "parseRunSummary",
      "runSummarySchema",
    ])
      expect(door, name).toHaveProperty(name);
  });
});

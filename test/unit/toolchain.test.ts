/**
 * The toolchain's own logic: the tool cache (stamps, atomic finish, rebuild on pin change), verified downloads,
 * the environment the launcher computes, its refusal messages, and reading pulumi command lines.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { toolchain as pins } from "../../common/pins";
import { ArtifactRefusedError, downloadVerified, toolchainSource } from "../../scripts/lib/download";
import { defaultLocalPassphrase, resolveToolchain, toolchainEnv, ToolchainError, type Toolchain } from "../../scripts/lib/env";
import { cacheRoot, toolDir } from "../../common/paths";
import { insertAfterSubcommand, parsePulumiArgs } from "../../scripts/lib/pulumi-args";
import { readStamp } from "../../common/stamp";
import { ensureTool, ToolBuildError, type Tool, type ToolContext } from "../../scripts/lib/tool";

let tmp: string;
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-toolchain-unit-"));
});

function ctx(extra: Partial<ToolContext> = {}): ToolContext & { lines: string[] } {
  const lines: string[] = [];
  return { cacheRoot: path.join(tmp, "cache"), source: "auto", pulumiHome: path.join(tmp, "home"), env: process.env, log: (l) => lines.push(l), lines, ...extra };
}

/** A tool whose build writes a shell script that prints `version`. */
function fakeTool(version: string, builds: { count: number }, opts: { fail?: boolean; print?: string } = {}): Tool {
  return {
    name: "fake",
    version: "v1",
    pin: { version },
    binaries: { fake: "bin/fake" },
    versionCheck: { binary: "fake", args: ["--version"], expect: version },
    async build(b) {
      builds.count++;
      fs.mkdirSync(path.join(b.outDir, "bin"));
      fs.writeFileSync(path.join(b.outDir, "bin", "fake"), `#!/bin/sh\necho ${opts.print ?? version}\n`, { mode: 0o755 });
      if (opts.fail === true) throw new ToolBuildError("fake: build failed half-way", "fake");
      return "build";
    },
  };
}

describe("ensureTool", () => {
  it("builds once, stamps the pin and the binary, then is warm", async () => {
    const builds = { count: 0 };
    const c = ctx();
    const first = await ensureTool(fakeTool("1.0.0", builds), c);
    expect(first.outcome).toBe("built");
    const dir = toolDir(c.cacheRoot, "fake", "v1");
    const stamp = readStamp(dir);
    const bin = fs.readFileSync(path.join(dir, "bin", "fake"));
    expect(stamp).toMatchObject({
      schema: 1,
      tool: "fake",
      version: "v1",
      pin: { version: "1.0.0" },
      source: "build",
      binaries: { fake: { path: "bin/fake", size: bin.length, sha256: crypto.createHash("sha256").update(bin).digest("hex") } },
    });
    const second = await ensureTool(fakeTool("1.0.0", builds), c);
    expect(second.outcome).toBe("warm");
    expect(builds.count).toBe(1);
    expect(second.binaries).toEqual({ fake: path.join(dir, "bin", "fake") });
  });

  it("rebuilds when the pin changes", async () => {
    const builds = { count: 0 };
    const c = ctx();
    await ensureTool(fakeTool("1.0.0", builds), c);
    const r = await ensureTool(fakeTool("2.0.0", builds), c);
    expect(r.outcome).toBe("built");
    expect(builds.count).toBe(2);
    expect(c.lines).toContain("fake v1: stamp records a different pin; producing it");
    expect(readStamp(r.dir as string)?.pin).toEqual({ version: "2.0.0" });
  });

  it("leaves nothing that looks finished when a build fails half-way", async () => {
    const c = ctx();
    await expect(ensureTool(fakeTool("1.0.0", { count: 0 }, { fail: true }), c)).rejects.toThrow("fake: build failed half-way");
    expect(fs.existsSync(toolDir(c.cacheRoot, "fake", "v1"))).toBe(false);
    expect(fs.readdirSync(path.join(c.cacheRoot, ".tmp"))).toEqual([]);
    expect(fs.readdirSync(path.join(c.cacheRoot, ".locks"))).toEqual([]);
  });

  it("rebuilds a directory without a stamp (an interrupted copy)", async () => {
    const c = ctx();
    const dir = toolDir(c.cacheRoot, "fake", "v1");
    fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
    fs.writeFileSync(path.join(dir, "bin", "fake"), "partial");
    const builds = { count: 0 };
    const r = await ensureTool(fakeTool("1.0.0", builds), c);
    expect(r.outcome).toBe("built");
    expect(c.lines[0]).toBe("fake v1: no valid stamp (unfinished build); producing it");
    expect(fs.readFileSync(path.join(dir, "bin", "fake"), "utf8")).toBe("#!/bin/sh\necho 1.0.0\n");
  });

  it("refuses a binary that fails its version check", async () => {
    await expect(ensureTool(fakeTool("1.0.0", { count: 0 }, { print: "0.9.0" }), ctx())).rejects.toThrow(
      'fake v1: after producing it: bin/fake --version printed "0.9.0", expected "1.0.0"',
    );
  });

  it("skips a tool that reports a skip reason", async () => {
    const builds = { count: 0 };
    const r = await ensureTool({ ...fakeTool("1.0.0", builds), skipReason: () => "not needed here" }, ctx());
    expect(r).toMatchObject({ outcome: "skipped", skipReason: "not needed here", binaries: {} });
    expect(builds.count).toBe(0);
  });

  it("refuses an official download whose SHA-256 is unknown in official mode, and builds instead in auto mode", async () => {
    const official = { artifact: { url: "https://example.invalid/fake.tgz", sha256: null, member: "fake" }, binary: "fake" };
    const builds = { count: 0 };
    await expect(ensureTool({ ...fakeTool("1.0.0", builds), official }, ctx({ source: "official" }))).rejects.toThrow(
      "fake v1: refusing to download https://example.invalid/fake.tgz: no SHA-256 is pinned for it in common/pins.ts",
    );
    expect(builds.count).toBe(0);
    const c = ctx({ source: "auto" });
    const r = await ensureTool({ ...fakeTool("1.0.0", builds), official }, c);
    expect(r.outcome).toBe("built");
    expect(c.lines).toContain("fake v1: no SHA-256 pinned for https://example.invalid/fake.tgz; using a source build");
  });
});

describe("downloadVerified", () => {
  const body = Buffer.from("archive bytes\n");
  const sum = crypto.createHash("sha256").update(body).digest("hex");
  let server: http.Server;
  let url: string;
  let requests = 0;
  beforeAll(async () => {
    server = http.createServer((_req, res) => {
      requests++;
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/a.tgz`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("writes the file when the sum matches", async () => {
    const dest = path.join(tmp, "ok.tgz");
    await downloadVerified({ url, sha256: sum, member: "x" }, dest);
    expect(fs.readFileSync(dest)).toEqual(body);
  });

  it("removes the file and names both sums on a mismatch", async () => {
    const dest = path.join(tmp, "bad.tgz");
    const wrong = "0".repeat(64);
    const err = await downloadVerified({ url, sha256: wrong, member: "x" }, dest).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArtifactRefusedError);
    expect((err as Error).message).toBe(`SHA-256 mismatch for ${url}: pinned ${wrong}, downloaded ${sum}`);
    expect(fs.existsSync(dest)).toBe(false);
  });

  it('an official artifact that is the executable itself (member "") is installed as the binary, verified and executable', async () => {
    const script = Buffer.from("#!/bin/sh\necho 2.0.0\n");
    const scriptSum = crypto.createHash("sha256").update(script).digest("hex");
    const bare = http.createServer((_req, res) => res.end(script));
    await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
    try {
      const official = { artifact: { url: `http://127.0.0.1:${(bare.address() as AddressInfo).port}/fake-linux-amd64`, sha256: scriptSum, member: "" }, binary: "fake" };
      const builds = { count: 0 };
      const r = await ensureTool({ ...fakeTool("2.0.0", builds), official }, ctx({ source: "auto" }));
      expect(r.outcome).toBe("downloaded");
      expect(builds.count).toBe(0);
      expect(fs.readFileSync(r.binaries.fake!)).toEqual(script);
      expect(fs.statSync(r.binaries.fake!).mode & 0o111).not.toBe(0);
    } finally {
      await new Promise<void>((resolve) => bare.close(() => resolve()));
    }
  });

  it("auto mode builds when the pinned official download cannot be fetched (no route to the release site)", async () => {
    const closed = await new Promise<number>((resolve) => {
      const s = http.createServer();
      s.listen(0, "127.0.0.1", () => {
        const port = (s.address() as AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    const official = { artifact: { url: `http://127.0.0.1:${closed}/fake-linux-amd64`, sha256: "0".repeat(64), member: "" }, binary: "fake" };
    const builds = { count: 0 };
    const c = ctx({ source: "auto" });
    const r = await ensureTool({ ...fakeTool("3.0.0", builds), official }, c);
    expect(r.outcome).toBe("built");
    expect(builds.count).toBe(1);
    expect(c.lines.some((l) => l.includes("download of http://127.0.0.1:") && l.endsWith("using a source build"))).toBe(true);
  });

  it("makes no request when no sum is pinned", async () => {
    const before = requests;
    await expect(downloadVerified({ url, sha256: null, member: "x" }, path.join(tmp, "n.tgz"))).rejects.toThrow(
      `refusing to download ${url}: no SHA-256 is pinned for it in common/pins.ts`,
    );
    expect(requests).toBe(before);
  });

  it("reads COHORT_TOOLCHAIN_SOURCE", () => {
    expect(toolchainSource({})).toBe("auto");
    expect(toolchainSource({ COHORT_TOOLCHAIN_SOURCE: "official" })).toBe("official");
    expect(() => toolchainSource({ COHORT_TOOLCHAIN_SOURCE: "download" })).toThrow('COHORT_TOOLCHAIN_SOURCE: expected one of official, build, auto; got "download"');
  });
});

describe("cacheRoot", () => {
  it("prefers COHORT_LAB_CACHE, then XDG_CACHE_HOME, then ~/.cache", () => {
    expect(cacheRoot({ COHORT_LAB_CACHE: "/c", XDG_CACHE_HOME: "/x" })).toBe("/c");
    expect(cacheRoot({ XDG_CACHE_HOME: "/x" })).toBe("/x/cohort-lab");
    expect(cacheRoot({})).toBe(path.join(os.homedir(), ".cache", "cohort-lab"));
  });
});

describe("toolchainEnv", () => {
  const tc: Toolchain = {
    repoRoot: "/repo",
    cacheRoot: "/cache",
    pulumiHome: "/repo/.pulumi-home",
    backendUrl: "file:///repo/.pulumi-state",
    node: { bin: "/cache/node-24.22.3/bin/node", version: "v24.22.3", fromCache: true },
    pulumi: { bin: "/cache/pulumi-v3.259.0/bin/pulumi", binDir: "/cache/pulumi-v3.259.0/bin", root: "/cache/pulumi-v3.259.0", version: "v3.259.0" },
    plugins: [],
  };

  it("puts Node, pulumi and node_modules/.bin first and disables every download", () => {
    const env = toolchainEnv(tc, { PATH: "/usr/bin:/repo/node_modules/.bin", PULUMI_BACKEND_URL: "https://api.pulumi.com" });
    expect(env.PATH).toBe("/cache/node-24.22.3/bin:/cache/pulumi-v3.259.0/bin:/repo/node_modules/.bin:/usr/bin");
    expect(env).toMatchObject({
      PULUMI_HOME: "/repo/.pulumi-home",
      PULUMI_BACKEND_URL: "file:///repo/.pulumi-state",
      PULUMI_CONFIG_PASSPHRASE: defaultLocalPassphrase,
      PULUMI_SKIP_UPDATE_CHECK: "true",
      PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
      PULUMI_DISABLE_REGISTRY_RESOLVE: "true",
      PULUMI_IGNORE_AMBIENT_PLUGINS: "true",
      COHORT_LAB_REPO: "/repo",
      COHORT_LAB_NODE: "/cache/node-24.22.3/bin/node",
    });
  });

  it("keeps a passphrase or passphrase file the user set", () => {
    expect(toolchainEnv(tc, { PATH: "", PULUMI_CONFIG_PASSPHRASE: "mine" }).PULUMI_CONFIG_PASSPHRASE).toBe("mine");
    expect(toolchainEnv(tc, { PATH: "", PULUMI_CONFIG_PASSPHRASE_FILE: "/f" }).PULUMI_CONFIG_PASSPHRASE).toBeUndefined();
  });
});

describe("resolveToolchain", () => {
  /** A repo with package.json and installed SDK packages at the pinned versions. */
  function fakeRepo(overrides: Record<string, string> = {}): string {
    const repo = path.join(tmp, "repo");
    const deps: Record<string, string> = {
      [pins.pulumi.npmPackage]: pins.pulumi.version,
      [pins.command.npmPackage]: pins.command.version,
      [pins.kubernetes.npmPackage]: pins.kubernetes.version,
      ...overrides,
    };
    for (const [name, version] of Object.entries(deps)) {
      fs.mkdirSync(path.join(repo, "node_modules", name), { recursive: true });
      fs.writeFileSync(path.join(repo, "node_modules", name, "package.json"), JSON.stringify({ version }));
    }
    fs.writeFileSync(path.join(repo, "package.json"), JSON.stringify({ dependencies: deps }));
    return repo;
  }
  const env = () => ({ COHORT_LAB_CACHE: path.join(tmp, "cache"), COHORT_LAB_SYSTEM_NODE_VERSION: "v24.0.0", PATH: "" });

  it("lists everything missing, each with its fix", () => {
    const repo = fakeRepo();
    const err = (() => {
      try {
        resolveToolchain({ env: env(), repoRoot: repo });
      } catch (e) {
        return e;
      }
      return undefined;
    })() as ToolchainError;
    expect(err).toBeInstanceOf(ToolchainError);
    expect(err.missing).toBe(true);
    expect(err.problems).toEqual([
      `the Pulumi CLI v${pins.pulumi.version} is not built in ${path.join(tmp, "cache", `pulumi-v${pins.pulumi.version}`)}: run \`npm run toolchain\``,
      `PULUMI_HOME (${path.join(repo, ".pulumi-home")}) has no pulumi-resource-command, and package.json pins @pulumi/command ${pins.command.version}: run \`npm run toolchain\``,
      `PULUMI_HOME (${path.join(repo, ".pulumi-home")}) has no pulumi-resource-kubernetes, and package.json pins @pulumi/kubernetes ${pins.kubernetes.version}: run \`npm run toolchain\``,
    ]);
  });

  it("names both versions when package.json and the pins disagree", () => {
    const repo = fakeRepo({ [pins.command.npmPackage]: "9.9.9" });
    expect(() => resolveToolchain({ env: env(), repoRoot: repo })).toThrow(
      `package.json pins @pulumi/command 9.9.9 but common/pins.ts builds pulumi-resource-command ${pins.command.version}: update the toolchain section of common/pins.ts, then run \`npm run toolchain\``,
    );
  });

  it("requires only Node when Pulumi is not needed", () => {
    const repo = fakeRepo();
    const tc = resolveToolchain({ env: env(), repoRoot: repo, needPulumi: false });
    expect(tc).toMatchObject({ repoRoot: repo, pulumi: undefined, plugins: [], node: { fromCache: false } });
  });
});

describe("parsePulumiArgs", () => {
  it.each([
    [["up", "--yes"], { subcommand: "up", subcommandIndex: 0, runsProgram: true }],
    [["-C", "dir", "preview", "--diff"], { subcommand: "preview", subcommandIndex: 2, cwd: "dir", runsProgram: true }],
    [["--cwd=dir", "pre"], { subcommand: "pre", cwd: "dir", runsProgram: true }],
    [["-v", "9", "--color", "never", "update"], { subcommand: "update", subcommandIndex: 4, runsProgram: true }],
    [["destroy", "--yes"], { subcommand: "destroy", runsProgram: false }],
    [["refresh", "--run-program"], { subcommand: "refresh", runsProgram: true }],
    [["down", "--run-program=true"], { subcommand: "down", runsProgram: true }],
    [["stack", "output", "--json"], { subcommand: "stack", runsProgram: false }],
    [["up", "--client=127.0.0.1:1"], { hasClient: true }],
    [["up", "--help"], { help: true }],
    [["version"], { subcommand: "version", runsProgram: false }],
    [[], { subcommand: undefined, subcommandIndex: -1, runsProgram: false }],
  ])("%j", (args, expected) => {
    expect(parsePulumiArgs(args)).toMatchObject(expected);
  });

  it("inserts flags right after the subcommand, before a `--`", () => {
    const args = ["-C", "d", "up", "--yes", "--", "x"];
    expect(insertAfterSubcommand(args, parsePulumiArgs(args), ["--client=a"])).toEqual(["-C", "d", "up", "--client=a", "--yes", "--", "x"]);
  });
});

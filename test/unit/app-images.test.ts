/**
 * The `local-apps` images (components/kind/app-images.ts): recipes, input hashing, the pure parsers (`ctr images ls`,
 * APT sources), the lookup against a fake cache, and, when the images are built on this machine, that a second
 * fresh private containerd computes the same digest from each archive and that each image runs under Docker.
 */
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { localImages } from "../../common/pins";
import {
  APP_IMAGE_KEYS,
  AppImagesMissingError,
  debianMirrorFromSources,
  digestFromRows,
  dockerChanges,
  findAppImages,
  IMAGE_FILES,
  IMAGE_RECIPES,
  imagePin,
  imageRef,
  imageToolName,
  imageVersion,
  inputHash,
  nodeImportArgs,
  parseCtrImagesLs,
  planImages,
  readImageDir,
  RUN_WORKER_IMAGE_KEY,
  type ImageInputs,
  type ImagePlan,
  type ImageRecord,
} from "../../components/kind/app-images";
import { containerdDigest } from "../../scripts/local/app-images/build";
import { sha256File, writeStamp } from "../../common/stamp";

const D1 = `sha256:${"a".repeat(64)}`;
const D2 = `sha256:${"b".repeat(64)}`;

describe("recipes", () => {
  it("mirror the upstream layouts (Kueue /manager as 65532, Agent Sandbox, Temporal as 1000, Node, OpenClaw)", () => {
    expect(IMAGE_RECIPES.kueue).toMatchObject({ target: "/manager", config: { entrypoint: ["/manager"], user: "65532:65532" } });
    expect(IMAGE_RECIPES.agentSandbox).toMatchObject({ target: "/agent-sandbox-controller", config: { entrypoint: ["/agent-sandbox-controller"], user: "65532:65532" } });
    expect(IMAGE_RECIPES.temporal).toMatchObject({ target: "/temporal", config: { entrypoint: ["/temporal"], user: "1000:1000" } });
    expect(IMAGE_RECIPES.temporal.dirs).toContainEqual({ path: "/var/lib/temporal", mode: 0o755, uid: 1000, gid: 1000 });
    expect(IMAGE_RECIPES.temporal.passwd).toContain("temporal:x:1000:1000:");
    for (const k of ["kueue", "agentSandbox", "temporal"] as const) {
      const r = IMAGE_RECIPES[k];
      expect(r.dirs).toContainEqual({ path: "/tmp", mode: 0o1777, uid: 0, gid: 0 });
      expect(r.passwd).toContain("nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin");
      expect(r.group).toContain("nonroot:x:65532:");
      expect(r.config.env.SSL_CERT_FILE).toBe("/etc/ssl/certs/ca-certificates.crt");
    }
    expect(IMAGE_RECIPES.runtime.target).toBe("/usr/local/bin/node");
    expect(IMAGE_RECIPES.runtime.config.user).toBeUndefined();
    expect(IMAGE_RECIPES.openclaw.entry).toBe("/opt/openclaw/node_modules/openclaw/openclaw.mjs");
    expect(IMAGE_RECIPES.openclaw.config).toMatchObject({ user: "1000:1000", workdir: "/home/node", env: { HOME: "/home/node" } });
  });

  it("the run worker: the runtime's user, workdir, env and CMD, /opt/node_modules, core-bridge trimmed to linux x64", () => {
    const r = IMAGE_RECIPES.runWorker;
    expect(RUN_WORKER_IMAGE_KEY).toBe("runWorker");
    expect(APP_IMAGE_KEYS.indexOf("runWorker")).toBeGreaterThan(APP_IMAGE_KEYS.indexOf("runtime"));
    expect(r).toMatchObject({ repository: "cohort-lab.local/run-worker", nodeModules: "/opt/node_modules" });
    expect(r.trim).toEqual([{ package: "@temporalio/core-bridge", dir: "releases", keep: ["x86_64-unknown-linux-gnu"] }]);
    const { labels: runtimeLabels, ...runtimeConfig } = IMAGE_RECIPES.runtime.config;
    const { labels: workerLabels, ...workerConfig } = r.config;
    expect(workerConfig).toEqual(runtimeConfig);
    expect(workerLabels["org.opencontainers.image.version"]).toBe(r.tag);
    expect(Object.keys(workerLabels)).toEqual(Object.keys(runtimeLabels));
  });

  it("name repositories under the local host, never with a latest tag", () => {
    for (const k of APP_IMAGE_KEYS) {
      const r = IMAGE_RECIPES[k];
      expect(r.repository.startsWith(`${localImages.registryHost}/`)).toBe(true);
      expect(r.tag).not.toBe("latest");
      expect(r.tag).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/);
    }
    expect(IMAGE_RECIPES.kueue.tag).toBe("v0.17.0");
  });

  it("docker --change lines are Dockerfile instructions with JSON exec forms", () => {
    expect(dockerChanges(IMAGE_RECIPES.kueue.config).slice(0, 3)).toEqual(['ENTRYPOINT ["/manager"]', "USER 65532:65532", "WORKDIR /"]);
    expect(dockerChanges({ workdir: "/w", env: { A: 'x "y"' }, labels: { "a.b": "c" } })).toEqual(["WORKDIR /w", 'ENV A="x \\"y\\""', 'LABEL "a.b"="c"']);
  });
});

describe("input hashing", () => {
  const inputs: ImageInputs = { key: "kueue", recipe: IMAGE_RECIPES.kueue, binaries: { kueue: "1".repeat(64) }, bases: { a: "1", b: "2" }, builder: "f".repeat(64) };
  it("ignores key order and changes with any input", () => {
    const h = inputHash(inputs);
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(inputHash({ ...inputs, bases: { b: "2", a: "1" } })).toBe(h);
    expect(inputHash({ ...inputs, binaries: { kueue: "2".repeat(64) } })).not.toBe(h);
    expect(inputHash({ ...inputs, builder: "e".repeat(64) })).not.toBe(h);
    expect(imageVersion("v0.17.0", h)).toBe(`v0.17.0-${h.slice(0, 12)}`);
  });
  it("names tools image-<kebab key>", () => {
    expect(imageToolName("agentSandbox")).toBe("image-agent-sandbox");
    expect(imageToolName("kueue")).toBe("image-kueue");
  });
});

/** A fake toolchain Node in `cache` (what planImages hashes for the runtime image). */
async function fakeNode(cache: string): Promise<string> {
  const nodeDir = path.join(cache, "node-24.22.3");
  fs.mkdirSync(path.join(nodeDir, "bin"), { recursive: true });
  fs.writeFileSync(path.join(nodeDir, "bin", "node"), "fake node");
  const nodeSha = await sha256File(path.join(nodeDir, "bin", "node"));
  writeStamp(nodeDir, {
    schema: 1,
    tool: "node",
    version: "24.22.3",
    pin: {},
    source: "npm",
    createdAt: "",
    buildSeconds: 0,
    binaries: { node: { path: "bin/node", size: 9, sha256: nodeSha } },
  });
  return nodeSha;
}

/** Writes a finished image directory for `plan` (archive, record, stamp), as the builder would. */
async function finishImageDir(plan: ImagePlan): Promise<ImageRecord> {
  fs.mkdirSync(plan.dir, { recursive: true });
  fs.writeFileSync(path.join(plan.dir, IMAGE_FILES.archive), "archive");
  const record: ImageRecord = {
    schema: 1,
    key: plan.key,
    repository: plan.recipe.repository,
    tag: plan.recipe.tag,
    reference: `${plan.recipe.repository}:${plan.recipe.tag}`,
    digest: D1,
    dockerImageId: D2,
    archive: IMAGE_FILES.archive,
    archiveSha256: "0".repeat(64),
    archiveBytes: 7,
    imageBytes: 1,
    platform: "linux/amd64",
    inputHash: plan.inputHash,
    containerd: "test",
  };
  fs.writeFileSync(path.join(plan.dir, IMAGE_FILES.record), JSON.stringify(record));
  const stampBinary = async (name: string) => ({ path: name, size: fs.statSync(path.join(plan.dir, name)).size, sha256: await sha256File(path.join(plan.dir, name)) });
  writeStamp(plan.dir, {
    schema: 1,
    tool: plan.name,
    version: plan.version,
    pin: imagePin(plan),
    source: "build",
    createdAt: "",
    buildSeconds: 0,
    binaries: { archive: await stampBinary(IMAGE_FILES.archive), record: await stampBinary(IMAGE_FILES.record) },
  });
  return record;
}

describe("the run worker's plan", () => {
  let tmp: string;
  let repo: string;
  const v = IMAGE_RECIPES.runWorker.tag;
  const sri = (c: string) => `sha512-${c.repeat(86)}==`;
  /** A repository whose lock gives the five roots (all at the SDK version), a shared dependency and an unrelated package. */
  const writeRepo = (patch: Record<string, object> = {}) => {
    const roots = Object.fromEntries(
      ["worker", "client", "activity", "common", "workflow"].map((n) => [
        `node_modules/@temporalio/${n}`,
        { version: v, integrity: sri(n[0] as string), dependencies: { long: "^5" } },
      ]),
    );
    const packages = {
      "": { dependencies: {} },
      ...roots,
      "node_modules/long": { version: "5.3.2", integrity: sri("l") },
      "node_modules/unrelated": { version: "1.0.0", integrity: sri("u") },
      ...patch,
    };
    fs.writeFileSync(path.join(repo, "package-lock.json"), JSON.stringify({ lockfileVersion: 3, packages }));
    for (const k of Object.keys(packages)) if (k !== "") fs.mkdirSync(path.join(repo, k), { recursive: true });
  };
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-app-images-rw-"));
    repo = path.join(tmp, "repo");
    fs.mkdirSync(repo);
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it("hashes the closure and the runtime image's version; a lockfile change rebuilds it and nothing else", async () => {
    const env = { COHORT_LAB_CACHE: path.join(tmp, "cache") };
    await fakeNode(env.COHORT_LAB_CACHE);
    writeRepo();
    const before = planImages(env, "f".repeat(64), repo);
    const rw = before.runWorker as ImagePlan;
    const runtime = before.runtime as ImagePlan;
    expect(rw.inputs.bases[runtime.name]).toBe(runtime.version);
    expect(rw.inputs.packages?.map((p) => `${p.name}@${p.version}`)).toEqual([
      `@temporalio/activity@${v}`,
      `@temporalio/client@${v}`,
      `@temporalio/common@${v}`,
      `@temporalio/worker@${v}`,
      `@temporalio/workflow@${v}`,
      "long@5.3.2",
    ]);
    expect(rw.name).toBe("image-run-worker");
    expect(rw.version.startsWith(`${v}-`)).toBe(true);
    expect((before.openclaw as ImagePlan).inputs.packages).toBeUndefined();

    // An unrelated package moves: nothing changes.
    writeRepo({ "node_modules/unrelated": { version: "2.0.0", integrity: sri("v") } });
    const unrelated = planImages(env, "f".repeat(64), repo);
    const hashOf = (p: ImagePlan | Error) => (p instanceof Error ? p.message : p.inputHash);
    for (const k of APP_IMAGE_KEYS) expect(hashOf(unrelated[k])).toBe(hashOf(before[k]));

    // A package of the closure moves (same version, new integrity): only the run worker changes.
    writeRepo({ "node_modules/long": { version: "5.3.2", integrity: sri("m") } });
    const after = planImages(env, "f".repeat(64), repo);
    for (const k of APP_IMAGE_KEYS) {
      if (k === "runWorker") expect(hashOf(after[k])).not.toBe(hashOf(before[k]));
      else expect(hashOf(after[k])).toBe(hashOf(before[k]));
    }
    // The builder source and the runtime image are inputs too.
    expect((planImages(env, "e".repeat(64), repo).runWorker as ImagePlan).inputHash).not.toBe((after.runWorker as ImagePlan).inputHash);
  });

  it("is an AppImageSourceMissingError when the runtime cannot be built, the lock is missing or disagrees, or a package is not installed", async () => {
    const env = { COHORT_LAB_CACHE: path.join(tmp, "cache") };
    writeRepo();
    expect(String(planImages(env, "f".repeat(64), repo).runWorker)).toMatch(/image runWorker: built on the runtime image, which cannot be built: .*npm run toolchain/);
    await fakeNode(env.COHORT_LAB_CACHE);
    writeRepo({ "node_modules/@temporalio/client": { version: "0.0.1" } });
    expect(String(planImages(env, "f".repeat(64), repo).runWorker)).toMatch(/package-lock.json locks @temporalio\/client 0.0.1 but package.json pins /);
    writeRepo();
    fs.rmSync(path.join(repo, "node_modules", "long"), { recursive: true });
    expect(String(planImages(env, "f".repeat(64), repo).runWorker)).toMatch(/node_modules\/long .* is locked but not installed; run `npm ci`/);
    fs.rmSync(path.join(repo, "package-lock.json"));
    expect(String(planImages(env, "f".repeat(64), repo).runWorker)).toMatch(/cannot read .*package-lock.json/);
  });

  it("findAppImages(env, [RUN_WORKER_IMAGE_KEY]) returns the run worker's AppImage (this repository's lockfile)", async () => {
    const env = { COHORT_LAB_CACHE: path.join(tmp, "cache") };
    await fakeNode(env.COHORT_LAB_CACHE);
    expect(() => findAppImages(env, [RUN_WORKER_IMAGE_KEY])).toThrow(/runWorker \(image-run-worker-.*: not built\)/);
    const plan = planImages(env).runWorker as ImagePlan;
    await finishImageDir(plan);
    expect(findAppImages(env, [RUN_WORKER_IMAGE_KEY]).runWorker).toEqual({
      repository: "cohort-lab.local/run-worker",
      tag: v,
      digest: D1,
      ref: `cohort-lab.local/run-worker:${v}@${D1}`,
      archive: path.join(plan.dir, "image.tar"),
      dockerImageId: D2,
    });
  });
});

describe("ctr images ls", () => {
  const text = [
    "REF                                TYPE                                                 DIGEST     SIZE     PLATFORMS   LABELS ",
    `cohort-lab.local/probe:v1          application/vnd.docker.distribution.manifest.v2+json ${D1} 11.3 KiB linux/amd64 -      `,
    `cohort-lab.local/probe@${D1} application/vnd.docker.distribution.manifest.v2+json ${D1} 11.3 KiB linux/amd64 -      `,
    "",
  ].join("\n");
  it("parses rows and picks the tagged digest, checked against the repo@digest name", () => {
    const rows = parseCtrImagesLs(text);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toEqual({ ref: "cohort-lab.local/probe:v1", type: "application/vnd.docker.distribution.manifest.v2+json", digest: D1 });
    expect(digestFromRows(rows, "cohort-lab.local/probe", "v1")).toBe(D1);
  });
  it("refuses a missing tag, a missing or different digest name, and a foreign format", () => {
    const rows = parseCtrImagesLs(text);
    expect(() => digestFromRows(rows, "cohort-lab.local/probe", "v2")).toThrow(/no image cohort-lab.local\/probe:v2/);
    expect(() => digestFromRows([rows[0]!], "cohort-lab.local/probe", "v1")).toThrow(/no image cohort-lab.local\/probe@sha256/);
    expect(() => digestFromRows([rows[0]!, { ...rows[1]!, digest: D2 }], "cohort-lab.local/probe", "v1")).toThrow(/@sha256/);
    expect(() => parseCtrImagesLs("NAME DIGEST\nx y\n")).toThrow(/header/);
    expect(parseCtrImagesLs("")).toEqual([]);
  });
  it("node import arguments name the digest after the repository", () => {
    expect(nodeImportArgs({ repository: "cohort-lab.local/kueue" })).toEqual([
      "--namespace=k8s.io",
      "images",
      "import",
      "--all-platforms",
      "--digests",
      "--base-name",
      "cohort-lab.local/kueue",
      "--snapshotter=overlayfs",
      "-",
    ]);
  });
  it("image refs need a full digest", () => {
    expect(imageRef("r/x", "v1", D1)).toBe(`r/x:v1@${D1}`);
    expect(() => imageRef("r/x", "v1", "sha256:abc")).toThrow(/not an image digest/);
  });
});

describe("debianMirrorFromSources", () => {
  const deb822 = [
    "Types: deb",
    "URIs: http://mirror.example/debian/",
    "Suites: bookworm bookworm-updates",
    "Components: main",
    "",
    "Types: deb",
    "URIs: http://mirror.example/debian-security",
    "Suites: bookworm-security",
    "Components: main",
  ].join("\n");
  it("reads deb822 and one-line sources, skipping other suites, deb-src and disabled stanzas", () => {
    expect(debianMirrorFromSources([{ name: "debian.sources", text: deb822 }], "bookworm")).toBe("http://mirror.example/debian");
    expect(debianMirrorFromSources([{ name: "debian.sources", text: deb822 }], "trixie")).toBeUndefined();
    expect(debianMirrorFromSources([{ name: "debian.sources", text: `Enabled: no\n${deb822}` }], "bookworm")).toBeUndefined();
    const list = "# c\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main contrib\n";
    expect(debianMirrorFromSources([{ name: "sources.list", text: list }], "bookworm")).toBe("http://one.example/debian");
    expect(debianMirrorFromSources([{ name: "x.list", text: "deb http://one.example/debian bookworm contrib\n" }], "bookworm")).toBeUndefined();
  });
});

describe("findAppImages against a fake cache", () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-app-images-"));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it("names every missing image and the command that builds them", () => {
    const env = { COHORT_LAB_CACHE: tmp };
    let err: unknown;
    try {
      findAppImages(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AppImagesMissingError);
    const msg = (err as Error).message;
    expect(msg).toContain("npm run toolchain -- local-apps");
    for (const k of APP_IMAGE_KEYS) expect(msg).toContain(`${k} (`);
    expect(msg).toContain("run `npm run toolchain -- local`");
  });

  it("returns repository, tag, digest, ref, archive and image ID of a finished directory; a changed record is refused", async () => {
    const env = { COHORT_LAB_CACHE: tmp };
    const nodeDir = path.join(tmp, "node-24.22.3");
    fs.mkdirSync(path.join(nodeDir, "bin"), { recursive: true });
    fs.writeFileSync(path.join(nodeDir, "bin", "node"), "fake node");
    const nodeSha = await sha256File(path.join(nodeDir, "bin", "node"));
    writeStamp(nodeDir, {
      schema: 1,
      tool: "node",
      version: "24.22.3",
      pin: {},
      source: "npm",
      createdAt: "",
      buildSeconds: 0,
      binaries: { node: { path: "bin/node", size: 9, sha256: nodeSha } },
    });
    const plan = planImages(env).runtime as ImagePlan;
    expect(plan.inputs.binaries).toEqual({ node: nodeSha });
    fs.mkdirSync(plan.dir, { recursive: true });
    fs.writeFileSync(path.join(plan.dir, IMAGE_FILES.archive), "archive");
    const record: ImageRecord = {
      schema: 1,
      key: "runtime",
      repository: plan.recipe.repository,
      tag: plan.recipe.tag,
      reference: `${plan.recipe.repository}:${plan.recipe.tag}`,
      digest: D1,
      dockerImageId: D2,
      archive: IMAGE_FILES.archive,
      archiveSha256: "0".repeat(64),
      archiveBytes: 7,
      imageBytes: 1,
      platform: "linux/amd64",
      inputHash: plan.inputHash,
      containerd: "test",
    };
    fs.writeFileSync(path.join(plan.dir, IMAGE_FILES.record), JSON.stringify(record));
    const stampBinary = async (name: string) => ({ path: name, size: fs.statSync(path.join(plan.dir, name)).size, sha256: await sha256File(path.join(plan.dir, name)) });
    writeStamp(plan.dir, {
      schema: 1,
      tool: plan.name,
      version: plan.version,
      pin: imagePin(plan),
      source: "build",
      createdAt: "",
      buildSeconds: 0,
      binaries: { archive: await stampBinary(IMAGE_FILES.archive), record: await stampBinary(IMAGE_FILES.record) },
    });
    const found = findAppImages(env, ["runtime"]).runtime;
    expect(found).toEqual({
      repository: "cohort-lab.local/node",
      tag: plan.recipe.tag,
      digest: D1,
      ref: `cohort-lab.local/node:${plan.recipe.tag}@${D1}`,
      archive: path.join(plan.dir, "image.tar"),
      dockerImageId: D2,
    });
    expect(() => findAppImages(env, ["runtime", "openclaw"])).toThrow(/openclaw \(image-openclaw-.*: not built\)/);
    fs.writeFileSync(path.join(plan.dir, IMAGE_FILES.record), JSON.stringify({ ...record, digest: D2 }));
    expect(readImageDir(plan.dir)).toMatch(/image.json differs from the stamp/);
  });
});

function has(cmd: string, args: string[]): boolean {
  try {
    execFileSync(cmd, args, { stdio: "ignore", timeout: 20_000 });
    return true;
  } catch {
    return false;
  }
}

function built(): Partial<ReturnType<typeof findAppImages>> {
  const out: Partial<ReturnType<typeof findAppImages>> = {};
  for (const k of APP_IMAGE_KEYS) {
    try {
      Object.assign(out, findAppImages(process.env, [k]));
    } catch {
      // not built here
    }
  }
  return out;
}

const images = built();
const canRun = Object.keys(images).length > 0 && process.getuid?.() === 0 && has("containerd", ["--version"]) && has("docker", ["info"]);
if (!canRun) {
  // Say why the built-image checks skip (they need the local image sets built and a running engine: the local tier).
  const why = [
    Object.keys(images).length === 0 ? "no app image built (`npm run toolchain -- local-images local-apps`)" : "",
    process.getuid?.() !== 0 ? "not root" : "",
    !has("containerd", ["--version"]) ? "no containerd" : "",
    !has("docker", ["info"]) ? "no running Docker engine (`bash scripts/docker-engine.sh start`)" : "",
  ].filter((w) => w !== "");
  console.log(`app-images: the built-image checks skip: ${why.join("; ")}`);
}

/** What each image must print when run: [args after the image, expected output]. */
const runChecks: Record<string, [string[], RegExp]> = {
  runtime: [["node", "-e", "console.log(process.version)"], /^v24\.22\.3$/m],
  openclaw: [["node", "/opt/openclaw/node_modules/openclaw/openclaw.mjs", "--version"], /2026\.9\.6/],
  // `-e` resolves from the working directory (/), so the paths are absolute; the builder's smoke check covers /opt/cohort.
  runWorker: [
    ["node", "-e", "require('/opt/node_modules/@temporalio/core-bridge'); console.log(require('/opt/node_modules/@temporalio/worker/package.json').version)"],
    new RegExp(`^${IMAGE_RECIPES.runWorker.tag.replace(/\./g, "\\.")}$`, "m"),
  ],
  temporal: [["--version"], /temporal version 1\.5\.1/],
  agentSandbox: [["--version"], /version v0\.5\.5/],
  kueue: [["--help"], /Usage of \/manager|-config/],
};

describe.skipIf(!canRun)("built images on this machine (root, Docker, containerd)", () => {
  for (const [key, image] of Object.entries(images)) {
    it(`${key}: a second fresh private containerd computes the recorded digest`, { timeout: 300_000 }, async () => {
      const { digest } = await containerdDigest(image.archive, image.repository, image.tag, { unpack: false });
      expect(digest).toBe(image.digest);
    });
    it(`${key}: runs under Docker`, { timeout: 120_000 }, () => {
      const [args, expected] = runChecks[key] as [string[], RegExp];
      // stdout and stderr together, whatever the exit status (Kueue's manager prints its usage on stderr, exit 0).
      const r = spawnSync("docker", ["run", "--rm", "--network=none", image.dockerImageId, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 110_000 });
      expect(`${r.stdout ?? ""}${r.stderr ?? ""}`).toMatch(expected);
    });
  }
});

/**
 * The `local` tool set (scripts/toolchain-local.ts) and its catalog (common/local-catalog.ts): the
 * `localBuild` pins' formats and couplings, the exact cache paths other code consumes, and the lookup's
 * missing-binary error. Nothing is built here.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { local, localBuild, sim } from "../../common/pins";
import { malformedPins } from "../../scripts/lib/pin-checks";
import { writeStamp } from "../../common/stamp";
import { findLocalBinaries, isPauseToolId, localBinaryLocations, localBinaryNames, LocalBinariesMissingError, localBinDirEnv, localToolIds } from "../../common/local-catalog";
import { checkedAtBuild, localTools, toolSet } from "../../scripts/toolchain-local";
import { ToolBuildError, type BuildContext, type Tool } from "../../scripts/lib/tool";
import { simTools } from "../../scripts/toolchain-sim";

/** The cache paths (relative to the cache root) that the lead and the node-image builder consume. */
const expectedPaths: Readonly<Record<string, string>> = {
  kind: "kind-v0.31.0/bin/kind",
  kubelet: "kubernetes-node-v1.35.4/bin/kubelet",
  kubeadm: "kubernetes-node-v1.35.4/bin/kubeadm",
  kubectl: "kubernetes-node-v1.35.4/bin/kubectl",
  "kube-proxy": "kubernetes-node-v1.35.4/bin/kube-proxy",
  "kube-apiserver": "kubernetes-v1.35.4/bin/kube-apiserver",
  "kube-controller-manager": "kubernetes-v1.35.4/bin/kube-controller-manager",
  "kube-scheduler": "kubernetes-v1.35.4/bin/kube-scheduler",
  etcd: "etcd-v3.6.14/bin/etcd",
  coredns: "coredns-v1.13.1/bin/coredns",
  crictl: "crictl-v1.36.0/bin/crictl",
  flanneld: "flannel-v0.27.4/bin/flanneld",
  "cni-flannel": "cni-flannel-v0.9.1/bin/flannel",
  temporal: "temporal-v1.5.1/bin/temporal",
  pause: "pause-3.10.1/bin/pause",
  kueue: "kueue-v0.17.0/bin/kueue",
  "agent-sandbox-controller": "agent-sandbox-v0.5.5/bin/agent-sandbox-controller",
};

const goPins = [localBuild.kubernetesNode, localBuild.coredns, localBuild.crictl, localBuild.flannel, localBuild.flannelCni, localBuild.temporal, localBuild.kind];

describe("localBuild pins", () => {
  it("has no malformed field", () => {
    expect(malformedPins(localBuild, "localBuild")).toEqual([]);
  });

  it("builds main packages inside each pinned module, at a release tag", () => {
    for (const pin of goPins) {
      expect(pin.goModuleVersion).toMatch(/^v\d+\.\d+\.\d+$/);
      for (const pkg of Object.values(pin.mainPackages)) expect(pkg === pin.goModule || pkg.startsWith(`${pin.goModule}/`)).toBe(true);
      for (const target of Object.keys(pin.versionVars)) expect(target.startsWith(pin.goModule) || target.startsWith("k8s.io/component-base/")).toBe(true);
      expect(pin.versionCheck).not.toBeNull();
    }
  });

  it("builds the node binaries from the same Kubernetes release, replaces and version stamps as the sim control plane", () => {
    const node = localBuild.kubernetesNode;
    expect([node.goModule, node.goModuleVersion]).toEqual([sim.kubernetes.goModule, sim.kubernetes.goModuleVersion]);
    expect(node.replace).toEqual(sim.kubernetes.replace);
    expect(node.versionVars).toEqual(sim.kubernetes.versionVars);
    expect(Object.keys(node.mainPackages).sort()).toEqual(["kube-proxy", "kubeadm", "kubectl", "kubelet"]);
    expect(node.versionCheck).toEqual({ args: ["version", "-o", "short"], expect: sim.kubernetes.goModuleVersion });
  });

  it("builds kind from the local profile's kind pin, stamping its commit", () => {
    expect(localBuild.kind.goModule).toBe(local.kind.goModule);
    expect(localBuild.kind.goModuleVersion).toBe(local.kind.version);
    expect(localBuild.kind.commit).toBe(local.kind.commit);
    expect(Object.values(localBuild.kind.versionVars)).toEqual([local.kind.commit]);
    expect(localBuild.kind.versionCheck?.expect).toBe("kind v0.31.0");
  });

  it("stamps each program with the version its upstream release prints", () => {
    expect(localBuild.crictl.versionVars["sigs.k8s.io/cri-tools/pkg/version.Version"]).toBe("1.36.0");
    expect(localBuild.flannel.versionVars["github.com/flannel-io/flannel/pkg/version.Version"]).toBe("v0.27.4");
    expect(localBuild.flannelCni.versionVars["github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion"]).toBe("v0.9.1");
    expect(localBuild.temporal.versionVars["github.com/temporalio/cli/temporalcli.Version"]).toBe("1.5.1");
    expect(localBuild.coredns.versionVars["github.com/coredns/coredns/coremain.GitCommit"]).toBe(localBuild.coredns.commit);
  });

  it("compiles pause from the Kubernetes module of the node binaries", () => {
    expect(localBuild.pause).toMatchObject({
      goModule: localBuild.kubernetesNode.goModule,
      goModuleVersion: localBuild.kubernetesNode.goModuleVersion,
      sourcePath: "build/pause/linux/pause.c",
      version: "3.10.1",
    });
    expect(localBuild.pause.cflags).toContain("-static");
  });
});

describe("local catalog", () => {
  it("puts every logical executable at the cache path its consumers use", () => {
    const locations = localBinaryLocations();
    expect([...locations.keys()].sort()).toEqual([...localBinaryNames].sort());
    expect(Object.fromEntries([...locations].map(([k, v]) => [k, v.relPath]))).toEqual(expectedPaths);
  });

  it("reuses the sim set's tool objects (same cache directories and stamps: the Temporal CLI too, since the sim supervises a dev server) and leaves out kwok", () => {
    const shared = ["etcd", "kubernetes", "kueue", "agent-sandbox", "temporal"];
    for (const name of shared) {
      const tool = localTools.find((t) => t.name === name);
      expect(tool).toBeDefined();
      expect(simTools).toContain(tool);
    }
    expect(localTools.some((t) => t.name === "kwok")).toBe(false);
    expect(localTools.filter((t) => !shared.includes(t.name)).every((t) => !simTools.includes(t))).toBe(true);
  });

  it("has one tool per cache directory, each with a warm version check where the program prints it on stdout", () => {
    const dirs = localTools.map((t) => `${t.name}-${t.version}`);
    expect(new Set(dirs).size).toBe(dirs.length);
    expect(localTools.map((t) => t.name)).toEqual(localToolIds.map((id) => id.name));
    // kueue has no version flag; flanneld and the CNI plugin print theirs to stderr: checked once, at build time.
    for (const t of localTools) expect(t.versionCheck === undefined).toBe(["kueue", "flannel", "cni-flannel"].includes(t.name));
    const pause = localTools.find((t) => t.name === "pause");
    expect(pause?.versionCheck).toEqual({ binary: "pause", args: ["-v"], expect: "pause.c 3.10.1" });
    expect(localToolIds.filter(isPauseToolId).map((id) => id.name)).toEqual(["pause"]);
  });

  it("is the `local` tool set", async () => {
    expect(toolSet.name).toBe("local");
    expect(await toolSet.tools()).toBe(localTools);
  });
});

describe("findLocalBinaries", () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-catalog-"));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** Writes a finished (stamped) tool directory for every tool, optionally leaving files out. */
  function fakeCache(omitTools: readonly string[] = [], omitFiles: readonly string[] = []): string {
    const root = path.join(tmp, "cache");
    for (const id of localToolIds) {
      if (omitTools.includes(id.name)) continue;
      const dir = path.join(root, `${id.name}-${id.version}`);
      const binaries: Record<string, { path: string; size: number; sha256: string }> = {};
      for (const [key, rel] of Object.entries(id.binaries)) {
        binaries[key] = { path: rel, size: 0, sha256: "0".repeat(64) };
        if (omitFiles.includes(rel.replace(/^bin\//, ""))) continue;
        fs.mkdirSync(path.join(dir, path.dirname(rel)), { recursive: true });
        fs.writeFileSync(path.join(dir, rel), "");
      }
      fs.mkdirSync(dir, { recursive: true });
      writeStamp(dir, { schema: 1, tool: id.name, version: id.version, pin: id.pin, source: "build", createdAt: new Date(0).toISOString(), buildSeconds: 0, binaries });
    }
    return root;
  }

  it("returns absolute cache paths by logical name", () => {
    const root = fakeCache();
    const found = findLocalBinaries({ COHORT_LAB_CACHE: root });
    expect(Object.keys(found).sort()).toEqual([...localBinaryNames].sort());
    for (const [name, rel] of Object.entries(expectedPaths)) expect(found[name as keyof typeof found]).toBe(path.join(root, rel));
  });

  it("returns only the needed ones, and does not require the others", () => {
    const root = fakeCache(["temporal"]);
    expect(findLocalBinaries({ COHORT_LAB_CACHE: root }, ["kubelet", "pause"])).toEqual({
      kubelet: path.join(root, expectedPaths.kubelet as string),
      pause: path.join(root, expectedPaths.pause as string),
    });
  });

  it("names each missing executable, why, and the command that builds them", () => {
    const root = fakeCache(["temporal", "kubernetes-node"], ["flanneld"]);
    let error: unknown;
    try {
      findLocalBinaries({ COHORT_LAB_CACHE: root });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(LocalBinariesMissingError);
    const e = error as LocalBinariesMissingError;
    expect(e.name).toBe("LocalBinariesMissingError");
    expect(e.missing).toEqual([
      "kubelet (kubernetes-node-v1.35.4: not built)",
      "kubeadm (kubernetes-node-v1.35.4: not built)",
      "kubectl (kubernetes-node-v1.35.4: not built)",
      "kube-proxy (kubernetes-node-v1.35.4: not built)",
      `flanneld (${path.join(root, expectedPaths.flanneld as string)} missing)`,
      "temporal (temporal-v1.5.1: not built)",
    ]);
    expect(e.message).toContain("Run `npm run toolchain -- local`");
  });

  it("throws on an empty cache", () => {
    expect(() => findLocalBinaries({ COHORT_LAB_CACHE: path.join(tmp, "empty") }, ["kind"])).toThrow(
      /^local binaries not built: kind \(kind-v0\.31\.0: not built\)\. Run `npm run toolchain -- local`/,
    );
  });

  it("reads a COHORT_LOCAL_BIN_DIR override by logical name", () => {
    const dir = path.join(tmp, "bin");
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, "kind"), "");
    expect(findLocalBinaries({ [localBinDirEnv]: dir }, ["kind"])).toEqual({ kind: path.join(dir, "kind") });
    expect(() => findLocalBinaries({ [localBinDirEnv]: dir }, ["kind", "cni-flannel"])).toThrow(`cni-flannel (not in ${localBinDirEnv}=${dir})`);
  });
});

describe("checkedAtBuild", () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-check-"));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** A tool whose build writes a script that prints `text` on stderr and exits 0 (as flanneld --version does). */
  function stderrTool(text: string): Tool {
    return {
      name: "fake",
      version: "v1",
      pin: { text },
      binaries: { fake: "bin/fake" },
      versionCheck: { binary: "fake", args: ["--version"], expect: "v1.2.3" },
      async build(b) {
        fs.mkdirSync(path.join(b.outDir, "bin"));
        fs.writeFileSync(path.join(b.outDir, "bin", "fake"), `#!/bin/sh\necho "\${CNI_COMMAND}${text}" >&2\n`, { mode: 0o755 });
        return "build";
      },
    };
  }
  const buildCtx = (lines: string[]): BuildContext => ({
    cacheRoot: tmp,
    source: "build",
    pulumiHome: tmp,
    env: { ...process.env, CNI_COMMAND: "ADD-" },
    log: (l) => lines.push(l),
    outDir: fs.mkdtempSync(path.join(tmp, "out-")),
    workDir: tmp,
  });

  it("keeps the cache identity, drops the warm check, and reads stderr once after the build (without CNI_COMMAND)", async () => {
    const inner = stderrTool("v1.2.3");
    const tool = checkedAtBuild(inner);
    expect([tool.name, tool.version, tool.pin, tool.binaries]).toEqual([inner.name, inner.version, inner.pin, inner.binaries]);
    expect(tool.versionCheck).toBeUndefined();
    const lines: string[] = [];
    await expect(tool.build(buildCtx(lines))).resolves.toBe("build");
    expect(lines).toEqual(['fake: fake --version printed "v1.2.3"']);
  });

  it("fails the build when the output lacks the version", async () => {
    await expect(checkedAtBuild(stderrTool("v9")).build(buildCtx([]))).rejects.toThrow(ToolBuildError);
    await expect(checkedAtBuild(stderrTool("v9")).build(buildCtx([]))).rejects.toThrow('printed "v9", expected "v1.2.3"');
  });
});

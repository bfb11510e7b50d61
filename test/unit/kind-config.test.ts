/**
 * components/kind/kindConfig.ts: the rendered kind config is checked with kind's OWN loader and validation
 * at the pinned version (test/tools/kindcheck: strict YAML decoding into v1alpha4.Cluster, defaulting,
 * conversion, Cluster.Validate — what `kind create cluster --config` runs first), and against a golden file.
 */
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ARTIFACTS_NODE_PATH, OWNER_LABELS, renderKindConfig, TEMPORAL_NODE_PORT, type KindConfigInput } from "../../components/kind/kindConfig.js";
import { pinnedNodeImage } from "../../components/kind/KindCluster.js";
import { ensureLocalTools } from "./crd-schema-tools.js";

const GOLDEN = path.join(__dirname, "..", "golden", "kind-config.default.yaml");
const base: KindConfigInput = {
  clusterName: "cohort-lab",
  nodeImage: pinnedNodeImage(),
  artifactsHostPath: "/home/user/cohort-lab/artifacts",
  temporalHostPort: 7233,
  stackId: "organization/cohort-lab/local",
};

let kindcheck: string | undefined;
let skipReason: string | undefined;

beforeAll(async () => {
  const tools = await ensureLocalTools();
  if (tools.ok) kindcheck = tools.tools.get("kindcheck")?.binaries.kindcheck;
  else {
    skipReason = tools.reason;
    console.warn(`kind-config: kindcheck unavailable, kind's validation is SKIPPED: ${skipReason}`);
  }
}, 900_000);

interface CheckResult {
  file: string;
  ok: boolean;
  error?: string;
  name?: string;
  nodes?: {
    role: string;
    image: string;
    labels: Record<string, string> | null;
    extraMounts: { hostPath: string; containerPath: string }[] | null;
    extraPortMappings: { containerPort: number; hostPort: number; listenAddress: string; protocol: string }[] | null;
  }[];
}

/** Runs kindcheck over YAML texts; one result per text. */
function check(...yamls: string[]): CheckResult[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kindcheck-"));
  try {
    const files = yamls.map((y, i) => {
      const f = path.join(dir, `c${i}.yaml`);
      fs.writeFileSync(f, y);
      return f;
    });
    const r = spawnSync(kindcheck!, files, { encoding: "utf8" });
    return r.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as CheckResult);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe("renderKindConfig with an offline node image", () => {
  const offline: KindConfigInput = {
    ...base,
    nodeImage: "cohort-lab/kind-node:v1.35.4-0123456789ab",
    kubeadm: { imageRepository: "offline.invalid", etcdImageTag: "3.6.14", allowCgroupV1: true },
  };

  it("renders kubeadmConfigPatches for the image repository, the etcd tag and cgroup v1", () => {
    const r = renderKindConfig(offline);
    expect(r.config.kubeadmConfigPatches).toEqual([
      "kind: ClusterConfiguration\nimageRepository: offline.invalid\netcd:\n  local:\n    imageTag: 3.6.14\n",
      "kind: KubeletConfiguration\nfailCgroupV1: false\n",
    ]);
    expect(r.config.nodes.every((n) => n.image === offline.nodeImage)).toBe(true);
    // The patches are part of what kind is asked to build: they change the config label.
    expect(r.configLabel).not.toBe(renderKindConfig({ ...offline, kubeadm: {} }).configLabel);
    expect(renderKindConfig({ ...offline, kubeadm: {} }).config.kubeadmConfigPatches).toBeUndefined();
  });

  it("is accepted by kind's own loader and validation", (ctx) => {
    if (kindcheck === undefined) return ctx.skip(skipReason ?? "kindcheck unavailable");
    const [result] = check(renderKindConfig(offline).yaml);
    expect(result!.ok, result!.error).toBe(true);
    expect(result!.nodes!.map((n) => n.image)).toEqual(Array(3).fill(offline.nodeImage));
  });
});

describe("renderKindConfig", () => {
  it("renders the golden config (1 control-plane + 2 workers, pinned image, mounts, Temporal port, owner labels)", () => {
    const rendered = renderKindConfig(base);
    if (process.env.UPDATE_GOLDEN === "1") fs.writeFileSync(GOLDEN, rendered.yaml);
    expect(rendered.yaml).toBe(fs.readFileSync(GOLDEN, "utf8"));
    expect(rendered.stackLabel).toHaveLength(63);
    expect(rendered.configLabel).toHaveLength(63);
    expect(rendered.config.nodes.map((n) => n.role)).toEqual(["control-plane", "worker", "worker"]);
  });

  it("is accepted by kind's own loader and validation, which sees exactly the intended nodes", (ctx) => {
    if (kindcheck === undefined) return ctx.skip(skipReason);
    const rendered = renderKindConfig(base);
    const [result] = check(rendered.yaml);
    expect(result?.error).toBeUndefined();
    expect(result?.ok).toBe(true);
    expect(result?.name).toBe("cohort-lab");
    const labels = { [OWNER_LABELS.stack]: rendered.stackLabel, [OWNER_LABELS.config]: rendered.configLabel };
    const mounts = [{ hostPath: base.artifactsHostPath, containerPath: ARTIFACTS_NODE_PATH, readOnly: false, propagation: "" }];
    expect(result?.nodes).toEqual([
      {
        role: "control-plane",
        image: pinnedNodeImage(),
        labels,
        extraMounts: mounts,
        extraPortMappings: [{ containerPort: TEMPORAL_NODE_PORT, hostPort: 7233, listenAddress: "127.0.0.1", protocol: "TCP" }],
      },
      { role: "worker", image: pinnedNodeImage(), labels, extraMounts: mounts, extraPortMappings: null },
      { role: "worker", image: pinnedNodeImage(), labels, extraMounts: mounts, extraPortMappings: null },
    ]);
  });

  it("keeps kind's validation happy across the input ranges", (ctx) => {
    if (kindcheck === undefined) return ctx.skip(skipReason);
    const variants: KindConfigInput[] = [
      { ...base, workers: 1, temporalHostPort: 1024 },
      { ...base, workers: 16, temporalHostPort: 65535 },
      { ...base, clusterName: "a.b-c9", artifactsHostPath: "/tmp/dir with spaces/and 'quotes'" },
    ];
    const results = check(...variants.map((v) => renderKindConfig(v).yaml));
    expect(results.map((r) => [r.ok, r.error])).toEqual(variants.map(() => [true, undefined]));
    expect(results[1]?.nodes).toHaveLength(17);
    expect(results[2]?.nodes?.[0]?.extraMounts?.[0]?.hostPath).toBe("/tmp/dir with spaces/and 'quotes'");
  });

  it("has a live checker: kind refuses an unknown field and an invalid role in a config like ours", (ctx) => {
    if (kindcheck === undefined) return ctx.skip(skipReason);
    const yaml = renderKindConfig(base).yaml;
    const [unknown, badRole, goodAgain] = check(yaml.replace("containerPort:", "containerPorts:"), yaml.replace("role: worker", "role: wrker"), yaml);
    expect(unknown?.ok).toBe(false);
    expect(unknown?.error).toContain("field containerPorts not found in type v1alpha4.PortMappingAlias");
    expect(badRole?.ok).toBe(false);
    expect(badRole?.error).toBe('invalid configuration for node 1: "wrker" is not a valid node role');
    expect(goodAgain?.ok).toBe(true);
  });

  it("reports the pinned kind version", (ctx) => {
    if (kindcheck === undefined) return ctx.skip(skipReason);
    expect(execFileSync(kindcheck, ["--version"], { encoding: "utf8" }).trim()).toBe("kind v0.31.0");
  });

  it("changes the config label with what kind builds, and the stack label only with the stack", () => {
    const a = renderKindConfig(base);
    expect(renderKindConfig({ ...base, stackId: "organization/cohort-lab/other" }).configLabel).toBe(a.configLabel);
    expect(renderKindConfig({ ...base, stackId: "organization/cohort-lab/other" }).stackLabel).not.toBe(a.stackLabel);
    for (const change of [{ temporalHostPort: 7234 }, { workers: 3 }, { artifactsHostPath: "/elsewhere" }, { clusterName: "other" }]) {
      const b = renderKindConfig({ ...base, ...change });
      expect(b.configLabel).not.toBe(a.configLabel);
      expect(b.stackLabel).toBe(a.stackLabel);
    }
  });

  it.each([
    [{ clusterName: "Cohort" }, 'clusterName: must match ^[a-z0-9.-]+$ and have at most 50 characters (got "Cohort")'],
    [{ clusterName: "x".repeat(51) }, `clusterName: must match ^[a-z0-9.-]+$ and have at most 50 characters (got "${"x".repeat(51)}")`],
    [
      { nodeImage: "kindest/node:v1.35.0" },
      'nodeImage: must be pinned by digest, name[:tag]@sha256:<64 hex>, or a node image built here (^cohort-lab\\/kind-node:v\\d+\\.\\d+\\.\\d+-[0-9a-f]{12}$) (got "kindest/node:v1.35.0")',
    ],
    [{ nodeImage: "cohort-lab/kind-node:v1.35.4-latest" }, "nodeImage: must be pinned by digest"],
    [{ kubeadm: { imageRepository: "Offline" } }, 'kubeadm.imageRepository: must be an image repository such as offline.invalid (got "Offline")'],
    [{ kubeadm: { etcdImageTag: "3.6 14" } }, 'kubeadm.etcdImageTag: must be an image tag (got "3.6 14")'],
    [{ workers: 0 }, "workers: must be an integer from 1 to 16 (got 0)"],
    [{ artifactsHostPath: "artifacts" }, 'artifactsHostPath: must be an absolute path (got "artifacts")'],
    [{ temporalHostPort: 80 }, "temporalHostPort: must be an integer from 1024 to 65535 (got 80)"],
    [{ stackId: " " }, "stackId: must not be empty"],
  ])("refuses %j", (change, message) => {
    expect(() => renderKindConfig({ ...base, ...change })).toThrow(message);
  });
});

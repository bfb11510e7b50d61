/**
 * stacks/local.ts with images built here: the node image choice (`local.nodeImage` auto|built|upstream), built
 * project images replacing unset `images.*` keys (and loaded into the nodes), a member image named by repository
 * getting the built digest, and the lookup of what the toolchain built (newest finished node image of the pinned
 * Kubernetes version; unfinished directories ignored).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { pinnedNodeImage } from "../../components/kind/KindCluster.js";
import { parseStackConfig } from "../../stacks/config.js";
import {
  BUILT_NODE_SYSTEM_PODS,
  chooseNodeImage,
  findLocalArtifacts,
  localProfile,
  parseLocalConfig,
  resolveLocalRunSpec,
  type BuiltImages,
  type BuiltNodeImage,
} from "../../stacks/local.js";
import { StackConfigError } from "../../stacks/config.js";

const D = (c: string) => `sha256:${c.repeat(64)}`;
const built: BuiltImages = {
  kueue: { repository: "cohort-lab.local/kueue", tag: "v0.17.0", digest: D("1"), archive: "/c/kueue/image.tar" },
  runtime: { repository: "cohort-lab.local/node", tag: "24.22.3-bookworm", digest: D("2"), archive: "/c/node/image.tar" },
  openclaw: { repository: "cohort-lab.local/openclaw", tag: "2026.9.6-node24.22.3", digest: D("3"), archive: "/c/oc/image.tar" },
};
const nodeImage: BuiltNodeImage = {
  tag: "cohort-lab/kind-node:v1.35.4-0123456789ab",
  id: D("9"),
  archive: "/c/node.tar",
  imageRepository: "offline.invalid",
  etcdImageTag: "3.6.14",
};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-local-built-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("chooseNodeImage", () => {
  it.each([
    ["auto", nodeImage, false, nodeImage.tag],
    ["auto", nodeImage, true, pinnedNodeImage()],
    ["auto", undefined, false, pinnedNodeImage()],
    ["built", nodeImage, true, nodeImage.tag],
    ["upstream", nodeImage, false, pinnedNodeImage()],
  ] as const)("%s with built=%s, upstream present=%s -> %s", (mode, b, present, ref) => {
    expect(chooseNodeImage(mode, b, () => present).image.ref).toBe(ref);
  });

  it("a built node image carries its image ID and archive for the create step", () => {
    expect(chooseNodeImage("built", nodeImage, () => false)).toEqual({ image: { ref: nodeImage.tag, imageId: nodeImage.id, archive: nodeImage.archive }, built: nodeImage });
  });

  it("refuses `built` when none is built, naming the key and the command", () => {
    expect(() => chooseNodeImage("built", undefined, () => false)).toThrow(StackConfigError);
    expect(() => chooseNodeImage("built", undefined, () => false)).toThrow(
      "cohort-lab:local.nodeImage: built: no node image is built here; run `npm run toolchain -- local local-images`",
    );
  });
});

describe("parseLocalConfig with built images", () => {
  it("uses a built image for an unset key, loads it, and keeps an explicit key", () => {
    const given = `registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.5@${D("a")}`;
    const { images } = parseLocalConfig({ images: JSON.stringify({ agentSandbox: given }) }, built);
    expect(images.refs).toEqual({
      kueue: `cohort-lab.local/kueue:v0.17.0@${D("1")}`,
      agentSandbox: given,
      runtime: `cohort-lab.local/node:24.22.3-bookworm@${D("2")}`,
      // Not built: the pinned upstream digest.
      temporal: expect.stringMatching(/^temporalio\/temporal:1\.8\.2@sha256:[0-9a-f]{64}$/),
    });
    expect(images.missing).toEqual([]);
    expect(images.load).toEqual([
      { ref: "cohort-lab.local/kueue:v0.17.0", digest: D("1"), archive: "/c/kueue/image.tar" },
      { ref: "cohort-lab.local/node:24.22.3-bookworm", digest: D("2"), archive: "/c/node/image.tar" },
    ]);
  });

  it("refuses a nodeImage mode that does not exist", () => {
    expect(() => parseLocalConfig({ local: JSON.stringify({ nodeImage: "latest" }) })).toThrow('cohort-lab:local.nodeImage: must be one of auto, built, upstream (got "latest")');
  });
});

describe("resolveLocalRunSpec with built images", () => {
  it("loads a member image built here, named by its digest reference", () => {
    const raw = {
      cohort: JSON.stringify({
        name: "society",
        roles: [
          { name: "gw", replicas: 2, app: { command: ["sleep", "1"], image: `cohort-lab.local/openclaw:2026.9.6-node24.22.3@${D("3")}` }, readiness: { tcp: {} } },
          { name: "plain", replicas: 1, app: { command: ["sleep", "1"] }, readiness: { tcp: {} } },
        ],
      }),
    };
    const config = parseStackConfig(raw, { stack: "local", projectDir: tmp, profileKeys: localProfile.configKeys });
    const r = resolveLocalRunSpec(config, `cohort-lab.local/node:24.22.3-bookworm@${D("2")}`, tmp, built);
    expect(r.spec.roles.map((x) => x.app.image)).toEqual([`cohort-lab.local/openclaw:2026.9.6-node24.22.3@${D("3")}`, `cohort-lab.local/node:24.22.3-bookworm@${D("2")}`]);
    expect(r.memberImages).toEqual([{ ref: "cohort-lab.local/openclaw:2026.9.6-node24.22.3", digest: D("3"), archive: "/c/oc/image.tar" }]);
    expect(r.usesRuntimeImage).toBe(true);
  });
});

describe("findLocalArtifacts", () => {
  it("finds the newest finished node image of the pinned version and ignores unfinished directories", () => {
    const make = (hash: string, createdAt: string, finished: boolean) => {
      const dir = path.join(tmp, `kind-node-image-v1.35.4-${hash}`);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, "image.json"), JSON.stringify({ tag: `cohort-lab/kind-node:v1.35.4-${hash}`, id: D(hash[0]!), archive: "node-image.tar" }));
      if (finished)
        fs.writeFileSync(path.join(dir, "cohort-lab-stamp.json"), JSON.stringify({ schema: 1, tool: "kind-node-image", version: `v1.35.4-${hash}`, createdAt, binaries: {} }));
    };
    make("aaaaaaaaaaaa", "2026-12-01T10:00:00Z", true);
    make("bbbbbbbbbbbb", "2026-12-01T11:00:00Z", true);
    make("cccccccccccc", "2026-12-01T12:00:00Z", false);
    const found = findLocalArtifacts({ COHORT_LOCAL_ARTIFACTS_ROOT: tmp });
    expect(found.nodeImage).toEqual({
      tag: "cohort-lab/kind-node:v1.35.4-bbbbbbbbbbbb",
      id: D("b"),
      archive: path.join(tmp, "kind-node-image-v1.35.4-bbbbbbbbbbbb", "node-image.tar"),
      imageRepository: "offline.invalid",
      etcdImageTag: "3.6.14",
    });
    expect(found.images).toEqual({});
  });

  it("counts the built node image's CNI DaemonSet, kube-proxy and CoreDNS against the workers", () => {
    expect(BUILT_NODE_SYSTEM_PODS.map((p) => [p.name, p.placement, p.requests])).toEqual([
      ["kube-flannel-ds", "daemonset", { cpu: "100m", memory: "50Mi" }],
      ["kube-proxy", "daemonset", {}],
      ["coredns", "replicas", { cpu: "100m", memory: "70Mi" }],
    ]);
  });
});

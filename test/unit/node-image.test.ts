/**
 * scripts/local/node-image.ts, the pure parts: the input hash (changes with every input, stable under key
 * order), the rendered default-cni.yaml (parses, names the pinned flannel image, host-gw, kind's template
 * marker), the containerd config (restrict_oom_score_adj, sandbox image, CNI bin_dir), the containerd.service
 * adaptation, the apt sources parser, the kubeadm patches and the component image names.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import * as YAML from "yaml";
import { kubeadmPatches } from "../../components/kind/kindConfig";
import {
  adaptContainerdService,
  COMPONENT_IMAGES,
  elfIsDynamic,
  ETCD_IMAGE_TAG,
  FLANNEL_IMAGE,
  FLANNELD_LAUNCH,
  IMAGE_REPOSITORY,
  inputHash,
  KUBERNETES_VERSION,
  nodeImageTag,
  PAUSE_IMAGE,
  parseAptSources,
  POD_SUBNET,
  renderContainerdConfig,
  renderDefaultCni,
  type NodeImageInputs,
} from "../../scripts/local/node-image.js";

const base: NodeImageInputs = {
  kubernetesVersion: "v1.35.4",
  kindModule: { version: "v0.31.0", goSum: "h1:x" },
  binaries: { kubelet: "a".repeat(64), kubeadm: "b".repeat(64) },
  files: { "scripts/local/node-image.ts": "c".repeat(64) },
  debian: { suite: "bookworm", node: ["systemd", "containerd"], imageBase: ["iptables"] },
};

describe("inputHash", () => {
  it("is 12 hex digits and stable under key order", () => {
    const h = inputHash(base);
    expect(h).toMatch(/^[0-9a-f]{12}$/);
    const reordered: NodeImageInputs = {
      debian: base.debian,
      files: base.files,
      binaries: { kubeadm: "b".repeat(64), kubelet: "a".repeat(64) },
      kindModule: base.kindModule,
      kubernetesVersion: base.kubernetesVersion,
    };
    expect(inputHash(reordered)).toBe(h);
  });

  it("changes when any input changes", () => {
    const h = inputHash(base);
    const variants: NodeImageInputs[] = [
      { ...base, binaries: { ...base.binaries, kubelet: "d".repeat(64) } },
      { ...base, binaries: { ...base.binaries, etcd: "e".repeat(64) } },
      { ...base, kindModule: { ...base.kindModule, version: "v0.32.0" } },
      { ...base, files: { ...base.files, "scripts/local/node-image.ts": "f".repeat(64) } },
      { ...base, debian: { ...base.debian, node: [...base.debian.node, "dbus"] } },
      { ...base, debian: { ...base.debian, imageBase: [] } },
      { ...base, kubernetesVersion: "v1.35.5" },
    ];
    const hashes = variants.map(inputHash);
    for (const v of hashes) expect(v).not.toBe(h);
    expect(new Set(hashes).size).toBe(hashes.length);
  });

  it("names the image tag", () => {
    expect(nodeImageTag("0123456789ab")).toBe(`cohort-lab/kind-node:${KUBERNETES_VERSION}-0123456789ab`);
  });
});

describe("renderDefaultCni", () => {
  const docs = YAML.parseAllDocuments(renderDefaultCni(POD_SUBNET)).map((d) => d.toJS() as Record<string, any>);
  const byKind = (k: string) => docs.filter((d) => d.kind === k);

  it("parses into the flannel objects", () => {
    expect(docs.map((d) => d.kind)).toEqual(["Namespace", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "ConfigMap", "DaemonSet"]);
  });

  it("runs the pinned flannel image, never pulling, with --ip-masq --kube-subnet-mgr on the host network", () => {
    const [ds] = byKind("DaemonSet");
    const spec = ds.spec.template.spec;
    expect(spec.hostNetwork).toBe(true);
    const all = [...spec.initContainers, ...spec.containers];
    for (const c of all) {
      expect(c.image).toBe(FLANNEL_IMAGE);
      expect(c.imagePullPolicy).toBe("Never");
    }
    expect(FLANNEL_IMAGE).toBe("offline.invalid/flannel:v0.27.4");
    expect(spec.containers[0].command).toEqual(["/bin/sh", "-c", FLANNELD_LAUNCH, "flanneld"]);
    expect(spec.containers[0].args).toEqual(["--ip-masq", "--kube-subnet-mgr"]);
    expect(spec.containers[0].env.map((e: { name: string }) => e.name)).toContain("POD_NAME");
    expect(spec.serviceAccountName).toBe("flannel");
  });

  it("configures host-gw on the pod subnet and the flannel plugin delegating to bridge, then portmap", () => {
    const [cm] = byKind("ConfigMap");
    expect(JSON.parse(cm.data["net-conf.json"])).toEqual({ Network: "10.244.0.0/16", EnableNFTables: false, Backend: { Type: "host-gw" } });
    const cni = JSON.parse(cm.data["cni-conf.json"]);
    expect(cni.plugins.map((p: { type: string }) => p.type)).toEqual(["flannel", "portmap"]);
    expect(cni.plugins[0].delegate.type).toBe("bridge");
  });

  it("the launcher points client-go at kind's CONTROL_PLANE_ENDPOINT and execs flanneld with the args", () => {
    const r = spawnSync("/bin/sh", ["-c", `${FLANNELD_LAUNCH.replace("exec /opt/bin/flanneld", "echo")}`, "flanneld", "--ip-masq"], {
      env: { PATH: "/usr/bin:/bin", CONTROL_PLANE_ENDPOINT: "c-control-plane:6443" },
      encoding: "utf8",
    });
    expect(r.stdout).toBe("--ip-masq\n");
    const env = spawnSync("/bin/sh", ["-c", `${FLANNELD_LAUNCH.replace('exec /opt/bin/flanneld "$@"', 'echo "$KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT"')}`, "flanneld"], {
      env: { PATH: "/usr/bin:/bin", CONTROL_PLANE_ENDPOINT: "c-control-plane:6443" },
      encoding: "utf8",
    });
    expect(env.stdout).toBe("c-control-plane 6443\n");
  });

  it("leaves the pod subnet for kind to template when none is given", () => {
    const text = renderDefaultCni();
    expect(text).toContain("# would you kindly template this file");
    expect(text).toContain("# would you kindly patch this file");
    expect(text).toContain("{{ .PodSubnet }}");
    expect(YAML.parseAllDocuments(text).every((d) => d.errors.length === 0)).toBe(true);
    expect(renderDefaultCni(POD_SUBNET)).not.toContain("would you kindly");
  });
});

describe("renderContainerdConfig", () => {
  const toml = renderContainerdConfig();
  it("restricts oom_score_adj (no CAP_SYS_RESOURCE here)", () => {
    expect(toml).toMatch(/^\s*restrict_oom_score_adj = true$/m);
    expect(toml).not.toMatch(/restrict_oom_score_adj = false/);
  });
  it("uses the offline pause image and /opt/cni/bin, keeps kind's sed target, has no fuse-overlayfs", () => {
    expect(toml).toContain(`sandbox_image = "${PAUSE_IMAGE}"`);
    expect(PAUSE_IMAGE).toBe("offline.invalid/pause:3.10.1");
    expect(toml).toContain('bin_dir = "/opt/cni/bin"');
    expect(toml).toMatch(/^\s*snapshotter = "overlayfs"$/m);
    expect(toml).not.toContain("fuse-overlayfs");
    expect(toml).toMatch(/^version = 2$/m);
  });
});

describe("adaptContainerdService", () => {
  it("points ExecStart at Debian's containerd", () => {
    const unit = "[Service]\nExecStartPre=-/sbin/modprobe overlay\nExecStart=/usr/local/bin/containerd\nType=notify\n";
    expect(adaptContainerdService(unit)).toBe("[Service]\nExecStartPre=-/sbin/modprobe overlay\nExecStart=/usr/bin/containerd\nType=notify\n");
  });
  it("refuses a unit without kind's ExecStart line", () => {
    expect(() => adaptContainerdService("[Service]\nExecStart=/opt/containerd\n")).toThrow(/ExecStart=\/usr\/local\/bin\/containerd/);
  });
});

describe("parseAptSources", () => {
  it("reads deb822 and one-line entries, keeping bookworm suites only", () => {
    const deb822 =
      "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n";
    const oneLine = "deb https://packages.example/apt cloud-sdk-bookworm main\ndeb [arch=amd64] http://old.example/debian bookworm main contrib\n";
    expect(parseAptSources([deb822, oneLine], "bookworm")).toEqual([
      { uris: ["http://mirror.example/debian"], suites: ["bookworm", "bookworm-updates"], components: ["main"] },
      { uris: ["http://mirror.example/debian-security"], suites: ["bookworm-security"], components: ["main"] },
      { uris: ["http://old.example/debian"], suites: ["bookworm"], components: ["main", "contrib"] },
    ]);
  });
});

describe("kubeadm patches and image names", () => {
  it("set the image repository, the etcd tag and failCgroupV1: false", () => {
    // The renderer the profile uses (components/kind/kindConfig.ts), with this image's facts.
    const [cluster, kubelet] = kubeadmPatches({ imageRepository: IMAGE_REPOSITORY, etcdImageTag: ETCD_IMAGE_TAG, allowCgroupV1: true }).map((p) => YAML.parse(p));
    expect(cluster).toEqual({ kind: "ClusterConfiguration", imageRepository: IMAGE_REPOSITORY, etcd: { local: { imageTag: ETCD_IMAGE_TAG } } });
    expect(kubelet).toEqual({ kind: "KubeletConfiguration", failCgroupV1: false });
  });
  it("name every image under offline.invalid as kubeadm derives it", () => {
    expect(COMPONENT_IMAGES.map((i) => i.ref).sort()).toEqual([
      "offline.invalid/coredns:v1.13.1",
      "offline.invalid/etcd:3.6.14",
      "offline.invalid/flannel:v0.27.4",
      "offline.invalid/kube-apiserver:v1.35.4",
      "offline.invalid/kube-controller-manager:v1.35.4",
      "offline.invalid/kube-proxy:v1.35.4",
      "offline.invalid/kube-scheduler:v1.35.4",
      "offline.invalid/pause:3.10.1",
    ]);
  });
});

describe("elfIsDynamic", () => {
  it("tells a dynamically linked ELF file (PT_INTERP) and refuses a non-ELF file", () => {
    expect(elfIsDynamic(process.execPath)).toBe(true); // node is linked against glibc
    expect(() => elfIsDynamic(__filename)).toThrow(/not a 64-bit ELF file/);
  });
});

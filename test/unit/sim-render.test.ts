/**
 * The sim supervisor's pure parts (simctl/render.ts, ports.ts, controllers.ts, components/sim/*): every
 * component's flags, the kwok stages (delay arithmetic, failure selectors, node shape), kubeconfig and token
 * file formats, the fake node manifest and the quota it yields. Exact outputs and exact error strings.
 */
import { parse, parseAllDocuments } from "yaml";
import { describe, expect, it } from "vitest";
import { deriveQuota } from "../../components/k8s/quota";
import { e2Standard16AgentNode, fakeNodeManifest, fakeNodeName, toNodeCapacity } from "../../components/sim/fakeNode";
import { kueueConfiguration } from "../../components/k8s/manifests/kueue";
import { goRuntimeEnv } from "../../components/sim/goRuntime";
import { simExcludedNamespaces, simFlavor } from "../../components/sim/queue";
import { externalKueueConfig } from "../../simctl/controllers";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { FREE_PORT_FLOOR, localPortRange, parsePortOverrides, portNames, resolvePorts, type PortMap } from "../../simctl/ports";
import { apiserverArgs, controllerManagerArgs, etcdArgs, kubeconfigYaml, kwokArgs, kwokConfig, kwokStages, schedulerConfig, simLayout, tokenFileCsv } from "../../simctl/render";

const l = simLayout("/s");
const ports = Object.fromEntries(portNames.map((n, i) => [n, 40000 + i])) as PortMap;

describe("component flags", () => {
  it("Go runtime: GOGC as given, GOMEMLIMIT a quarter of the machine's memory in MiB, never below 256 MiB", () => {
    expect(goRuntimeEnv(400, 24 * 1024 ** 3)).toEqual({ GOGC: "400", GOMEMLIMIT: "6144MiB" });
    expect(goRuntimeEnv(100, 2 * 1024 ** 3 + 5)).toEqual({ GOGC: "100", GOMEMLIMIT: "512MiB" });
    expect(goRuntimeEnv(100, 512 * 1024 ** 2)).toEqual({ GOGC: "100", GOMEMLIMIT: "256MiB" });
  });

  it("etcd: one loopback member, no fsync, 8 GiB quota", () => {
    expect(etcdArgs(l, ports)).toEqual([
      "--name=sim",
      "--data-dir=/s/etcd",
      "--listen-client-urls=http://127.0.0.1:40000",
      "--advertise-client-urls=http://127.0.0.1:40000",
      "--listen-peer-urls=http://127.0.0.1:40001",
      "--initial-advertise-peer-urls=http://127.0.0.1:40001",
      "--initial-cluster=sim=http://127.0.0.1:40001",
      "--initial-cluster-state=new",
      "--unsafe-no-fsync=true",
      "--quota-backend-bytes=8589934592",
      "--log-level=warn",
    ]);
  });

  it("kube-apiserver: token auth, RBAC, generated serving cert, SA keys, raised inflight limits", () => {
    const args = apiserverArgs(l, ports);
    expect(args).toContain("--etcd-servers=http://127.0.0.1:40000");
    expect(args).toContain("--secure-port=40002");
    expect(args).toContain("--bind-address=127.0.0.1");
    expect(args).toContain("--cert-dir=/s/pki/apiserver");
    expect(args).toContain("--token-auth-file=/s/pki/tokens.csv");
    expect(args).toContain("--authorization-mode=RBAC");
    expect(args).toContain("--service-account-issuer=https://127.0.0.1:40002");
    expect(args).toContain("--service-account-key-file=/s/pki/sa.pub");
    expect(args).toContain("--service-account-signing-key-file=/s/pki/sa.key");
    expect(args).toContain("--max-requests-inflight=3000");
    expect(args).toContain("--max-mutating-requests-inflight=1500");
    expect(args).toContain("--endpoint-reconciler-type=none");
    // No secret ever appears in an argument list.
    expect(args.join(" ")).not.toMatch(/token=|--token /);
  });

  it("kube-controller-manager: own kubeconfig, SA key, root CA, no leader election, node IPAM off", () => {
    expect(controllerManagerArgs(l, ports)).toEqual([
      "--kubeconfig=/s/kubeconfigs/kube-controller-manager.kubeconfig",
      "--authentication-kubeconfig=/s/kubeconfigs/kube-controller-manager.kubeconfig",
      "--authorization-kubeconfig=/s/kubeconfigs/kube-controller-manager.kubeconfig",
      "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
      "--bind-address=127.0.0.1",
      "--secure-port=40003",
      "--service-account-private-key-file=/s/pki/sa.key",
      "--root-ca-file=/s/pki/apiserver/apiserver.crt",
      "--use-service-account-credentials=false",
      "--leader-elect=false",
      "--kube-api-qps=1000",
      "--kube-api-burst=2000",
      "--controllers=*,-node-ipam-controller",
      "--service-cluster-ip-range=10.96.0.0/16",
      "--profiling=false",
      "--v=1",
    ]);
  });

  it("kube-scheduler config: client QPS 1000/2000 and no leader election", () => {
    expect(parse(schedulerConfig(l))).toEqual({
      apiVersion: "kubescheduler.config.k8s.io/v1",
      kind: "KubeSchedulerConfiguration",
      clientConnection: { kubeconfig: "/s/kubeconfigs/kube-scheduler.kubeconfig", qps: 1000, burst: 2000 },
      leaderElection: { leaderElect: false },
    });
  });

  it("kwok: manages only annotated fake nodes", () => {
    expect(kwokArgs(l, ports)).toEqual([
      "--kubeconfig=/s/kubeconfigs/kwok.kubeconfig",
      "--config=/s/config/kwok.yaml",
      "--manage-all-nodes=false",
      "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
      "--server-address=127.0.0.1:40005",
      "--node-ip=10.240.0.1",
      "--cidr=10.244.0.0/16",
    ]);
  });
});

describe("kwok stages", () => {
  const stages = kwokStages({ podReadyDelayMs: 2000, podReadyJitterMs: 1000 }) as { metadata: { name: string }; spec: Record<string, unknown> }[];
  const byName = (n: string) => stages.find((s) => s.metadata.name === n)!.spec as Record<string, any>;

  it("are, in order: node-initialize, the two failure stages, pod-ready, pod-delete", () => {
    expect(stages.map((s) => s.metadata.name)).toEqual(["node-initialize", "pod-fail-label", "pod-fail-env", "pod-ready", "pod-delete"]);
  });

  it("pod-ready waits delay + U[0, jitter): kwok's jitter bound is absolute (delay + jitter)", () => {
    expect(byName("pod-ready").delay).toEqual({
      durationMilliseconds: 2000,
      durationFrom: { expressionFrom: '(.spec.containers[0].env // []) | .[] | select(.name == "SIM_READY_DELAY") | .value' },
      jitterDurationMilliseconds: 3000,
      jitterDurationFrom: { expressionFrom: '(.spec.containers[0].env // []) | .[] | select(.name == "SIM_READY_DELAY") | .value' },
    });
  });

  it("pod-ready skips pods selected for failure; the failure stages select them by label or env", () => {
    const ready = byName("pod-ready").selector.matchExpressions as { key: string; operator: string; values?: string[] }[];
    expect(ready).toContainEqual({ key: '.metadata.labels["sim.cohort-lab.dev/fail"]', operator: "NotIn", values: ["true"] });
    expect(ready).toContainEqual({ key: '(.spec.containers[0].env // []) | .[] | select(.name == "SIM_FAIL") | .value', operator: "NotIn", values: ["true"] });
    expect(byName("pod-fail-label").selector.matchExpressions).toContainEqual({ key: '.metadata.labels["sim.cohort-lab.dev/fail"]', operator: "In", values: ["true"] });
    expect(byName("pod-fail-env").next.statusTemplate).toContain("phase: Failed");
    expect(byName("pod-fail-env").next.statusTemplate).toContain("exitCode: 1");
  });

  it("node-initialize copies the allocatable annotation into status", () => {
    const t = byName("node-initialize").next.statusTemplate as string;
    expect(t).toContain('{{ $shape := index $annotations "sim.cohort-lab.dev/allocatable" }}');
    expect(t).toContain("allocatable: {{ $shape }}");
  });

  it("the config file is a KwokConfiguration followed by the five stages", () => {
    const docs = parseAllDocuments(kwokConfig({ podReadyDelayMs: 0, podReadyJitterMs: 0 })).map((d) => d.toJS() as { kind: string });
    expect(docs.map((d) => d.kind)).toEqual(["KwokConfiguration", "Stage", "Stage", "Stage", "Stage", "Stage"]);
    expect((docs[0] as unknown as { options: { cidr: string } }).options.cidr).toBe("10.244.0.0/16");
  });
});

describe("credentials", () => {
  it("token file: one line per client, every client in system:masters with its own user", () => {
    const csv = tokenFileCsv({
      admin: "a",
      "kube-controller-manager": "b",
      "kube-scheduler": "c",
      kwok: "d",
      kueue: "e",
      "agent-sandbox-controller": "f",
    });
    expect(csv).toBe(
      [
        'a,cohort-lab:sim:admin,cohort-lab-sim-admin,"system:masters"',
        'b,cohort-lab:sim:kube-controller-manager,cohort-lab-sim-kube-controller-manager,"system:masters"',
        'c,cohort-lab:sim:kube-scheduler,cohort-lab-sim-kube-scheduler,"system:masters"',
        'd,cohort-lab:sim:kwok,cohort-lab-sim-kwok,"system:masters"',
        'e,cohort-lab:sim:kueue,cohort-lab-sim-kueue,"system:masters"',
        'f,cohort-lab:sim:agent-sandbox-controller,cohort-lab-sim-agent-sandbox-controller,"system:masters"',
      ].join("\n") + "\n",
    );
  });

  it("kubeconfig embeds the CA and the token under one context", () => {
    expect(parse(kubeconfigYaml("ctx", "https://127.0.0.1:1", "PEM", "tok"))).toEqual({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "ctx", cluster: { server: "https://127.0.0.1:1", "certificate-authority-data": Buffer.from("PEM").toString("base64") } }],
      users: [{ name: "ctx", user: { token: "tok" } }],
      contexts: [{ name: "ctx", context: { cluster: "ctx", user: "ctx" } }],
      "current-context": "ctx",
    });
  });
});

describe("ports", () => {
  it("parses overrides", () => {
    expect(parsePortOverrides("apiserver=6443, etcdClient=2379")).toEqual({ apiserver: 6443, etcdClient: 2379 });
  });

  it("picks free ports below the kernel's ephemeral range (nothing else is handed them before their component binds), all different", async () => {
    const { low } = localPortRange();
    const ports = await resolvePorts({});
    const values = Object.values(ports);
    expect(new Set(values).size).toBe(portNames.length);
    for (const port of values) {
      expect(port).toBeGreaterThanOrEqual(FREE_PORT_FLOOR);
      expect(port).toBeLessThan(low);
    }
  });

  it("reads the ephemeral range from its sysctl file; Linux's default when unreadable", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-port-range-"));
    try {
      fs.writeFileSync(path.join(dir, "range"), "40000\t50000\n");
      expect(localPortRange(path.join(dir, "range"))).toEqual({ low: 40000, high: 50000 });
      expect(localPortRange(path.join(dir, "missing"))).toEqual({ low: 32768, high: 60999 });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses unknown names with the list of known ones", () => {
    expect(() => parsePortOverrides("api=1")).toThrow(
      '--ports: "api=1" is not <name>=<port> with a name among etcdClient, etcdPeer, apiserver, controllerManager, scheduler, kwok, kueueWebhook, kueueHealth, kueueMetrics, sandboxHealth, sandboxMetrics, temporal',
    );
  });
});

describe("fake nodes and quota", () => {
  it("an e2-standard-16 agent node: pool label, taint, kwok annotation, allocatable annotation and status", () => {
    expect(fakeNodeName("agents", 7)).toBe("agents-0007");
    expect(fakeNodeManifest("agents", 7, e2Standard16AgentNode)).toEqual({
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: "agents-0007",
        labels: {
          "cohort-lab.dev/pool": "agents",
          "cloud.google.com/gke-nodepool": "agents",
          "node.kubernetes.io/instance-type": "e2-standard-16",
          "kubernetes.io/os": "linux",
          "kubernetes.io/arch": "amd64",
          type: "kwok",
          "kubernetes.io/hostname": "agents-0007",
        },
        annotations: {
          "kwok.x-k8s.io/node": "fake",
          "sim.cohort-lab.dev/allocatable": '{"cpu":"15890m","ephemeral-storage":"43Gi","memory":"57Gi","pods":"110"}',
          "node.alpha.kubernetes.io/ttl": "0",
        },
      },
      spec: { taints: [{ key: "cohort-lab.dev/agents", value: "true", effect: "NoSchedule" }] },
      status: {
        allocatable: { cpu: "15890m", memory: "57Gi", "ephemeral-storage": "43Gi", pods: "110" },
        capacity: { cpu: "15890m", memory: "57Gi", "ephemeral-storage": "43Gi", pods: "110" },
      },
    });
  });

  it("8 fake nodes give the arithmetic of 8 × e2-standard-16 (the flavor tolerates the agent taint)", () => {
    const flavor = simFlavor();
    const q = deriveQuota({
      nodes: Array.from({ length: 8 }, (_, i) => toNodeCapacity(fakeNodeManifest("agents", i, e2Standard16AgentNode))),
      reserved: [],
      flavorNodeLabels: flavor.nodeLabels,
      flavorTolerations: flavor.tolerations,
    });
    expect(q.nominalQuota).toEqual({ cpu: "127120m", memory: "456Gi" });
    expect(q.podCapacity).toBe(880);
  });

  it("without the toleration no fake node is eligible", () => {
    expect(() => deriveQuota({ nodes: [toNodeCapacity(fakeNodeManifest("agents", 0, e2Standard16AgentNode))], reserved: [], flavorNodeLabels: simFlavor().nodeLabels })).toThrow(
      "no node can run the cohort: agents-0000 (taint cohort-lab.dev/agents=true:NoSchedule)",
    );
  });
});

describe("Kueue's external Configuration", () => {
  it("keeps the profile's fields and replaces only the process ones", () => {
    const base = {
      apiVersion: "config.kueue.x-k8s.io/v1beta2",
      kind: "Configuration",
      waitForPodsReady: kueueConfiguration({ waitForPodsReadyTimeout: "3m", excludedNamespaces: simExcludedNamespaces }).waitForPodsReady,
      integrations: { frameworks: ["pod"] },
      controller: { groupKindConcurrency: { Pod: 5 } },
    };
    expect(parse(externalKueueConfig(base, l, ports))).toEqual({
      ...base,
      namespace: "kueue-system",
      health: { healthProbeBindAddress: "127.0.0.1:40007" },
      metrics: { bindAddress: "127.0.0.1:40008" },
      webhook: { port: 40006, host: "127.0.0.1", certDir: "/s/kueue/certs" },
      leaderElection: { leaderElect: false },
      clientConnection: { qps: 1000, burst: 2000 },
    });
  });
});

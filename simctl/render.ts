/**
 * Pure renderers of the sim control plane: each component's argument list and config file, the kwok stages
 * (fake node shape, simulated pod start-up delay and failure injection) and kubeconfigs. No I/O here, so every
 * output is checked by unit tests (test/unit/sim-render.test.ts).
 *
 * Flag sets follow controller-runtime envtest v0.23 and kwokctl v0.8.0 (binary runtime); see the upstream
 * sources named on each function.
 */
import { stringify } from "yaml";
import { allocatableAnnotation, kwokNodeAnnotation } from "../components/sim/fakeNode";
import { simBinaryNames } from "./binaries";
import type { PortMap } from "./ports";

/** Files and directories of one sim state dir (all absolute). */
export interface SimLayout {
  readonly stateDir: string;
  readonly stateFile: string;
  readonly logsDir: string;
  readonly pkiDir: string;
  /** kube-apiserver writes its self-signed serving cert (leaf + CA) here as `apiserver.crt`/`apiserver.key`. */
  readonly apiserverCertDir: string;
  /** The CA bundle clients trust: kube-apiserver's generated `apiserver.crt` (leaf followed by its CA). */
  readonly apiserverCaFile: string;
  readonly tokenFile: string;
  readonly saPublicKey: string;
  readonly saPrivateKey: string;
  readonly etcdDataDir: string;
  readonly configDir: string;
  /** Admin kubeconfig (the one users, Pulumi and the runtime use). */
  readonly kubeconfig: string;
  /** Per-component kubeconfigs (`<component>.kubeconfig`). */
  readonly kubeconfigsDir: string;
  /** Kueue's webhook serving cert dir (filled by its internal cert manager). */
  readonly kueueCertDir: string;
}

/** Lays out a state dir. */
export function simLayout(stateDir: string): SimLayout {
  const j = (...p: string[]) => [stateDir, ...p].join("/");
  return {
    stateDir,
    stateFile: j("sim-state.json"),
    logsDir: j("logs"),
    pkiDir: j("pki"),
    apiserverCertDir: j("pki", "apiserver"),
    apiserverCaFile: j("pki", "apiserver", "apiserver.crt"),
    tokenFile: j("pki", "tokens.csv"),
    saPublicKey: j("pki", "sa.pub"),
    saPrivateKey: j("pki", "sa.key"),
    etcdDataDir: j("etcd"),
    configDir: j("config"),
    kubeconfig: j("kubeconfig"),
    kubeconfigsDir: j("kubeconfigs"),
    kueueCertDir: j("kueue", "certs"),
  };
}

/** The processes the sim supervises, in start order: one per sim executable (simctl/binaries.ts). */
export const componentNames = simBinaryNames;

/** One supervised process. */
export type ComponentName = (typeof componentNames)[number];

/** The API clients that get their own token (and user name, so the API server's metrics tell them apart). */
export const clientNames = ["admin", "kube-controller-manager", "kube-scheduler", "kwok", "kueue", "agent-sandbox-controller"] as const;
export type ClientName = (typeof clientNames)[number];

/**
 * Simulated pod behaviour: the kwok pod-ready stage waits `podReadyDelayMs` plus a uniform random extra in
 * `[0, podReadyJitterMs)` before marking a pod Running and Ready.
 */
export interface PodTiming {
  /** Minimum delay from a pod bound to a fake node to Ready, in milliseconds. @default 0 */
  readonly podReadyDelayMs: number;
  /** Width of the uniform random extra delay, in milliseconds. @default 0 */
  readonly podReadyJitterMs: number;
}

/** Client QPS/burst given to every controller (the sim must not be bound by client-side throttling). */
export const controllerClientQps = { qps: 1000, burst: 2000 } as const;

/** API server inflight limits (raised from 400/200 for 1,000-member bursts). */
export const apiserverInflight = { readOnly: 3000, mutating: 1500 } as const;

/** The service CIDR; the API server's generated cert carries the first address of it. */
export const serviceClusterIpRange = "10.96.0.0/16";

/** Pod IPs kwok assigns (a /16: room for 65k simulated pods). */
export const podCidr = "10.244.0.0/16";

/**
 * etcd flags: one member on loopback. `--unsafe-no-fsync` is deliberate: this is a simulator whose state is
 * thrown away on destroy, and skipping fsync removes disk latency from the measured API write path (envtest
 * sets it too). Never use these flags for data you keep.
 *
 * @see https://etcd.io/docs/v3.6/op-guide/configuration/
 */
export function etcdArgs(l: SimLayout, p: PortMap): string[] {
  const client = `http://127.0.0.1:${p.etcdClient}`;
  const peer = `http://127.0.0.1:${p.etcdPeer}`;
  return [
    "--name=sim",
    `--data-dir=${l.etcdDataDir}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=sim=${peer}`,
    "--initial-cluster-state=new",
    "--unsafe-no-fsync=true",
    "--quota-backend-bytes=8589934592",
    "--log-level=warn",
  ];
}

/**
 * kube-apiserver flags. Authentication is a static token file (one token per client, admin in
 * `system:masters`); the serving cert is self-signed by the API server into `--cert-dir`; service account
 * tokens are signed with a key pair generated by simctl. `--endpoint-reconciler-type=none` because the
 * advertise address is loopback, which the `kubernetes` Endpoints object may not hold.
 *
 * @see https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/
 */
export function apiserverArgs(l: SimLayout, p: PortMap): string[] {
  return [
    `--etcd-servers=http://127.0.0.1:${p.etcdClient}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    `--secure-port=${p.apiserver}`,
    `--cert-dir=${l.apiserverCertDir}`,
    `--token-auth-file=${l.tokenFile}`,
    "--authorization-mode=RBAC",
    `--service-cluster-ip-range=${serviceClusterIpRange}`,
    `--service-account-issuer=https://127.0.0.1:${p.apiserver}`,
    `--service-account-key-file=${l.saPublicKey}`,
    `--service-account-signing-key-file=${l.saPrivateKey}`,
    "--allow-privileged=true",
    "--endpoint-reconciler-type=none",
    `--max-requests-inflight=${apiserverInflight.readOnly}`,
    `--max-mutating-requests-inflight=${apiserverInflight.mutating}`,
    "--profiling=false",
    "--v=1",
  ];
}

/** Paths every Kubernetes component may serve without authorization (health and metrics on loopback). */
const alwaysAllow = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics";

/**
 * kube-controller-manager flags: the namespace controller, garbage collector, service-account and token
 * controllers and the node lifecycle controller run (they make namespace deletion, cascade deletion and the
 * `default` ServiceAccount behave as on a real cluster); node IPAM is off (kwok assigns pod IPs).
 *
 * @see https://kubernetes.io/docs/reference/command-line-tools-reference/kube-controller-manager/
 */
export function controllerManagerArgs(l: SimLayout, p: PortMap): string[] {
  const kc = `${l.kubeconfigsDir}/kube-controller-manager.kubeconfig`;
  return [
    `--kubeconfig=${kc}`,
    `--authentication-kubeconfig=${kc}`,
    `--authorization-kubeconfig=${kc}`,
    alwaysAllow,
    "--bind-address=127.0.0.1",
    `--secure-port=${p.controllerManager}`,
    `--service-account-private-key-file=${l.saPrivateKey}`,
    `--root-ca-file=${l.apiserverCaFile}`,
    "--use-service-account-credentials=false",
    "--leader-elect=false",
    `--kube-api-qps=${controllerClientQps.qps}`,
    `--kube-api-burst=${controllerClientQps.burst}`,
    "--controllers=*,-node-ipam-controller",
    `--service-cluster-ip-range=${serviceClusterIpRange}`,
    "--profiling=false",
    "--v=1",
  ];
}

/**
 * KubeSchedulerConfiguration: leader election off and a client rate far above the 50 QPS default, so binding
 * 1,000 pods is not throttled client-side.
 *
 * @see https://kubernetes.io/docs/reference/config-api/kube-scheduler-config.v1/
 */
export function schedulerConfig(l: SimLayout): string {
  return stringify({
    apiVersion: "kubescheduler.config.k8s.io/v1",
    kind: "KubeSchedulerConfiguration",
    clientConnection: {
      kubeconfig: `${l.kubeconfigsDir}/kube-scheduler.kubeconfig`,
      qps: controllerClientQps.qps,
      burst: controllerClientQps.burst,
    },
    leaderElection: { leaderElect: false },
  });
}

/** kube-scheduler flags (the config file above carries the client settings). */
export function schedulerArgs(l: SimLayout, p: PortMap): string[] {
  const kc = `${l.kubeconfigsDir}/kube-scheduler.kubeconfig`;
  return [
    `--config=${l.configDir}/kube-scheduler.yaml`,
    `--authentication-kubeconfig=${kc}`,
    `--authorization-kubeconfig=${kc}`,
    alwaysAllow,
    "--bind-address=127.0.0.1",
    `--secure-port=${p.scheduler}`,
    "--profiling=false",
    "--v=1",
  ];
}

/** The annotation that marks a Node as a kwok fake node (the selector kwok is started with). */
export const fakeNodeAnnotation = kwokNodeAnnotation;

/** Pod label that makes kwok fail the pod (phase Failed, exit code 1) instead of making it Ready. */
export const failLabel = "sim.cohort-lab.dev/fail";

/** Container env var with the same effect as {@link failLabel} (settable from a RunSpec role's `app.env`). */
export const failEnv = "SIM_FAIL";

/**
 * Container env var (Go duration, e.g. `5s`) that fixes that pod's simulated start-up delay, overriding the
 * sim's delay and jitter (settable from a RunSpec role's `app.env`).
 */
export const readyDelayEnv = "SIM_READY_DELAY";

const envValue = (name: string) => `(.spec.containers[0].env // []) | .[] | select(.name == "${name}") | .value`;

/** kwok Stage documents (multi-doc YAML after the KwokConfiguration). */
export function kwokStages(t: PodTiming): object[] {
  const stage = (name: string, kind: string, spec: object) => ({
    apiVersion: "kwok.x-k8s.io/v1alpha1",
    kind: "Stage",
    metadata: { name },
    spec: { resourceRef: { apiGroup: "v1", kind }, ...spec },
  });
  const delay = {
    durationMilliseconds: t.podReadyDelayMs,
    durationFrom: { expressionFrom: envValue(readyDelayEnv) },
    jitterDurationMilliseconds: t.podReadyDelayMs + t.podReadyJitterMs,
    // kwok: a jitter bound <= the duration means "exactly the bound", so an override fixes the delay.
    jitterDurationFrom: { expressionFrom: envValue(readyDelayEnv) },
  };
  const live = [
    { key: ".metadata.deletionTimestamp", operator: "DoesNotExist" },
    { key: ".status.phase", operator: "In", values: ["Pending"] },
  ];
  const failStatus = `{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 1
      reason: Error
      message: "simulated failure (sim fail stage)"
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPWith .spec.nodeName }}
hostIP: {{ . | Quote }}
{{ end }}
phase: Failed
reason: Error
message: "simulated failure (sim fail stage)"
startTime: {{ $now | Quote }}
`;
  const readyStatus = `{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ $hostIPs := NodeIPsWith .spec.nodeName }}
{{ with $hostIPs }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
{{ with $podIPs }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
`;
  const nodeStatus = `{{ $now := Now }}
{{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $lastTransitionTime | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
{{ with NodeName }}
- address: {{ . | Quote }}
  type: Hostname
{{ end }}
{{ $annotations := or .metadata.annotations dict }}
{{ $shape := index $annotations "${allocatableAnnotation}" }}
{{ if $shape }}
allocatable: {{ $shape }}
capacity: {{ $shape }}
{{ else }}
allocatable:
{{ with .status.allocatable }}
{{ YAML . 1 }}
{{ else }}
  cpu: "1k"
  memory: 1Ti
  pods: "1M"
{{ end }}
capacity:
{{ with .status.capacity }}
{{ YAML . 1 }}
{{ else }}
  cpu: "1k"
  memory: 1Ti
  pods: "1M"
{{ end }}
{{ end }}
nodeInfo:
  architecture: amd64
  bootID: ""
  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
  kernelVersion: {{ printf "kwok-%s" Version | Quote }}
  kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  machineID: ""
  operatingSystem: linux
  osImage: ""
  systemUUID: ""
phase: Running
`;
  return [
    stage("node-initialize", "Node", {
      selector: {
        matchExpressions: [{ key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: "NotIn", values: ["True"] }],
      },
      next: { statusTemplate: nodeStatus },
    }),
    stage("pod-fail-label", "Pod", {
      selector: { matchExpressions: [...live, { key: `.metadata.labels["${failLabel}"]`, operator: "In", values: ["true"] }] },
      delay,
      next: { statusTemplate: failStatus },
    }),
    stage("pod-fail-env", "Pod", {
      selector: { matchExpressions: [...live, { key: envValue(failEnv), operator: "In", values: ["true"] }] },
      delay,
      next: { statusTemplate: failStatus },
    }),
    stage("pod-ready", "Pod", {
      selector: {
        matchExpressions: [
          ...live,
          { key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: "NotIn", values: ["True"] },
          { key: `.metadata.labels["${failLabel}"]`, operator: "NotIn", values: ["true"] },
          { key: envValue(failEnv), operator: "NotIn", values: ["true"] },
        ],
      },
      delay,
      next: { statusTemplate: readyStatus },
    }),
    stage("pod-delete", "Pod", {
      selector: { matchExpressions: [{ key: ".metadata.deletionTimestamp", operator: "Exists" }] },
      next: { delete: true },
    }),
  ];
}

/**
 * The kwok config file: a KwokConfiguration (fake nodes selected by {@link fakeNodeAnnotation}, pod IPs from
 * {@link podCidr}) followed by the stages.
 *
 * @see https://kwok.sigs.k8s.io/docs/user/kwok-configuration/ and https://kwok.sigs.k8s.io/docs/user/stages-configuration/
 */
export function kwokConfig(t: PodTiming): string {
  const docs: object[] = [
    {
      apiVersion: "config.kwok.x-k8s.io/v1alpha1",
      kind: "KwokConfiguration",
      // Every option is explicit: kwok v0.8.0 does not apply its defaults to a KwokConfiguration read from
      // --config (an unset nodeLeaseParallelism is 0 and refused), so these are its defaults unless noted.
      options: {
        cidr: podCidr,
        manageAllNodes: false,
        enableDebuggingHandlers: true,
        enableContentionProfiling: false,
        enableProfilingHandler: false,
        podPlayStageParallelism: 16, // default 4: 1,000-member bursts
        nodePlayStageParallelism: 4,
        nodeLeaseDurationSeconds: 40,
        nodeLeaseParallelism: 4,
        podsOnNodeSyncParallelism: 1,
        enablePodsOnNodeSyncListPager: true,
        enablePodsOnNodeSyncStreamWatch: false,
      },
    },
    ...kwokStages(t),
  ];
  return docs.map((d) => stringify(d, { lineWidth: 0 })).join("---\n");
}

/** kwok flags. */
export function kwokArgs(l: SimLayout, p: PortMap): string[] {
  return [
    `--kubeconfig=${l.kubeconfigsDir}/kwok.kubeconfig`,
    `--config=${l.configDir}/kwok.yaml`,
    "--manage-all-nodes=false",
    `--manage-nodes-with-annotation-selector=${fakeNodeAnnotation.key}=${fakeNodeAnnotation.value}`,
    `--server-address=127.0.0.1:${p.kwok}`,
    "--node-ip=10.240.0.1",
    `--cidr=${podCidr}`,
  ];
}

/**
 * A kubeconfig with an embedded CA and a bearer token (the token is a secret: the file is written 0600).
 *
 * @param contextName - cluster, user and context name.
 */
export function kubeconfigYaml(contextName: string, server: string, caPem: string, token: string): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: contextName, cluster: { server, "certificate-authority-data": Buffer.from(caPem).toString("base64") } }],
    users: [{ name: contextName, user: { token } }],
    contexts: [{ name: contextName, context: { cluster: contextName, user: contextName } }],
    "current-context": contextName,
  });
}

/**
 * The static token file: `token,user,uid,"group"` per line. Every client is in `system:masters` (no RBAC wiring
 * for out-of-cluster controllers) but has its own user name, so API server metrics and audit tell them apart.
 *
 * @see https://kubernetes.io/docs/reference/access-authn-authz/authentication/#static-token-file
 */
export function tokenFileCsv(tokens: Readonly<Record<ClientName, string>>): string {
  return clientNames.map((c) => `${tokens[c]},cohort-lab:sim:${c},cohort-lab-sim-${c},"system:masters"`).join("\n") + "\n";
}

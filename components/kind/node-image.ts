/**
 * Facts of the offline kind node image that both its builder (scripts/local/node-image.ts, run by the
 * toolchain) and the local profile (stacks/local.ts, components/kind/) need: the pinned versions and image
 * names inside the node, its pod network, and the default CNI manifest the node carries. Pure: no I/O.
 */
import * as YAML from "yaml";
import { local, localBuild, sim } from "../../common/pins.js";

/** Kubernetes version of the node (also written to `/kind/version`): the pinned Kubernetes release of the binaries. */
export const KUBERNETES_VERSION = localBuild.kubernetesNode.goModuleVersion;

/**
 * The kind Go module whose `images/base/files` the image is built from; `goSum` is the go.sum `h1:` hash the
 * go command reports for the zip (checked before any file is read).
 * @see https://pkg.go.dev/sigs.k8s.io/kind@v0.31.0
 */
export const KIND_MODULE = { goModule: local.kind.goModule, version: local.kind.version, goSum: local.kind.goSum } as const;

/**
 * The image repository of every image in the node (RFC 2606 `.invalid`: any accidental pull fails at DNS,
 * without leaving the machine). kubeadm names its images `<imageRepository>/<name>:<tag>`
 * (cmd/kubeadm/app/images/images.go; with a custom repository CoreDNS has no extra `/coredns` element).
 * @see https://www.rfc-editor.org/rfc/rfc2606#section-2
 */
export const IMAGE_REPOSITORY = "offline.invalid";

/** etcd image tag (kubeadm `etcd.local.imageTag`; kubeadm's own default for 1.35 is a different 3.6 build): the pinned etcd without `v`. */
export const ETCD_IMAGE_TAG = sim.etcd.goModuleVersion.replace(/^v/, "");
/** CoreDNS image tag (kubeadm 1.35's default CoreDNS version, cmd/kubeadm/app/constants/constants.go): the pinned CoreDNS. */
export const COREDNS_IMAGE_TAG = localBuild.coredns.goModuleVersion;
/** pause image tag (kubeadm 1.35's `PauseVersion`); also containerd's `sandbox_image`: the pinned pause. */
export const PAUSE_IMAGE_TAG = localBuild.pause.version;
/** flannel image tag (the flanneld release): the pinned flanneld. */
export const FLANNEL_IMAGE_TAG = localBuild.flannel.goModuleVersion;

/** The pod network of the cluster (kind's default podSubnet; flannel's Network). */
export const POD_SUBNET = "10.244.0.0/16";

/** Repository of the node image in the local Docker engine; the tag is `<KUBERNETES_VERSION>-<12 hex>`. */
export const NODE_IMAGE_REPOSITORY = "cohort-lab/kind-node";

/** Full name of the pause image, containerd's `sandbox_image`. */
export const PAUSE_IMAGE = `${IMAGE_REPOSITORY}/pause:${PAUSE_IMAGE_TAG}`;
/** Full name of the flannel image the default CNI manifest runs. */
export const FLANNEL_IMAGE = `${IMAGE_REPOSITORY}/flannel:${FLANNEL_IMAGE_TAG}`;

/** The flannel CNI config (`cni-conf.json`): the flannel meta plugin delegating to bridge (+ host-local IPAM), then portmap. */
function flannelCniConf(): string {
  return JSON.stringify(
    {
      name: "cbr0",
      cniVersion: "0.3.1",
      plugins: [
        { type: "flannel", delegate: { type: "bridge", hairpinMode: true, isDefaultGateway: true } },
        { type: "portmap", capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

/**
 * The flannel container's shell launcher: with kind's `CONTROL_PLANE_ENDPOINT` (host:port) set, point
 * client-go's in-cluster config at it (`KUBERNETES_SERVICE_HOST`/`_PORT`), then exec flanneld with the args.
 */
export const FLANNELD_LAUNCH =
  'if [ -n "${CONTROL_PLANE_ENDPOINT:-}" ]; then export KUBERNETES_SERVICE_HOST="${CONTROL_PLANE_ENDPOINT%:*}" KUBERNETES_SERVICE_PORT="${CONTROL_PLANE_ENDPOINT##*:}"; fi; exec /opt/bin/flanneld "$@"';

/**
 * `/kind/manifests/default-cni.yaml`: flannel v0.27.4 with the host-gw backend (all kind nodes share one
 * Docker bridge, so a route per node is enough: no VXLAN), modelled on flannel's
 * Documentation/kube-flannel.yml. Differences: the image is {@link FLANNEL_IMAGE} with `imagePullPolicy:
 * Never`; no `install-cni-plugin` init container (the flannel CNI plugin is in the node at
 * /opt/cni/bin/flannel); the delegate names `bridge` explicitly; flanneld is started through
 * {@link FLANNELD_LAUNCH}. It carries kind's magic comments "would you kindly template this file" (kind renders
 * `{{ .PodSubnet }}`, the config's networking.podSubnet, into net-conf.json) and "would you kindly patch this
 * file" (kind adds env CONTROL_PLANE_ENDPOINT to the DaemonSet's first container) at create time
 * (kind v0.31.0 pkg/cluster/internal/create/actions/installcni/cni.go).
 *
 * @param podSubnet - when given, substituted for the template (for tests and `kubectl apply` by hand);
 *   otherwise the template stays for kind to fill in.
 * @returns a multi-document YAML stream.
 * @see https://github.com/flannel-io/flannel/blob/v0.27.4/Documentation/kube-flannel.yml
 */
export function renderDefaultCni(podSubnet?: string): string {
  const labels = { "k8s-app": "flannel" };
  const ns = "kube-flannel";
  const netConf = JSON.stringify({ Network: podSubnet ?? "{{ .PodSubnet }}", EnableNFTables: false, Backend: { Type: "host-gw" } }, null, 2);
  const docs: unknown[] = [
    { kind: "Namespace", apiVersion: "v1", metadata: { name: ns, labels: { ...labels, "pod-security.kubernetes.io/enforce": "privileged" } } },
    {
      kind: "ClusterRole",
      apiVersion: "rbac.authorization.k8s.io/v1",
      metadata: { name: "flannel", labels },
      rules: [
        { apiGroups: [""], resources: ["pods"], verbs: ["get"] },
        { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] },
        { apiGroups: [""], resources: ["nodes/status"], verbs: ["patch"] },
      ],
    },
    {
      kind: "ClusterRoleBinding",
      apiVersion: "rbac.authorization.k8s.io/v1",
      metadata: { name: "flannel", labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "flannel" },
      subjects: [{ kind: "ServiceAccount", name: "flannel", namespace: ns }],
    },
    { kind: "ServiceAccount", apiVersion: "v1", metadata: { name: "flannel", namespace: ns, labels } },
    {
      kind: "ConfigMap",
      apiVersion: "v1",
      metadata: { name: "kube-flannel-cfg", namespace: ns, labels: { tier: "node", app: "flannel", ...labels } },
      data: { "cni-conf.json": `${flannelCniConf()}\n`, "net-conf.json": `${netConf}\n` },
    },
    {
      kind: "DaemonSet",
      apiVersion: "apps/v1",
      metadata: { name: "kube-flannel-ds", namespace: ns, labels: { tier: "node", app: "flannel", ...labels } },
      spec: {
        selector: { matchLabels: { app: "flannel" } },
        template: {
          metadata: { labels: { tier: "node", app: "flannel" } },
          spec: {
            affinity: {
              nodeAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: {
                  nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/os", operator: "In", values: ["linux"] }] }],
                },
              },
            },
            hostNetwork: true,
            priorityClassName: "system-node-critical",
            tolerations: [{ operator: "Exists", effect: "NoSchedule" }],
            serviceAccountName: "flannel",
            initContainers: [
              {
                name: "install-cni",
                image: FLANNEL_IMAGE,
                imagePullPolicy: "Never",
                command: ["cp"],
                args: ["-f", "/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/10-flannel.conflist"],
                volumeMounts: [
                  { name: "cni", mountPath: "/etc/cni/net.d" },
                  { name: "flannel-cfg", mountPath: "/etc/kube-flannel/" },
                ],
              },
            ],
            containers: [
              {
                name: "kube-flannel",
                image: FLANNEL_IMAGE,
                imagePullPolicy: "Never",
                // kind adds CONTROL_PLANE_ENDPOINT (`<cluster>-control-plane:6443`, a name in the apiserver's
                // certificate) to this container; flanneld then talks to the API server directly instead of
                // through the `kubernetes` Service, which a node's kube-proxy may not have programmed yet.
                command: ["/bin/sh", "-c", FLANNELD_LAUNCH, "flanneld"],
                args: ["--ip-masq", "--kube-subnet-mgr"],
                resources: { requests: { cpu: "100m", memory: "50Mi" } },
                securityContext: { privileged: false, capabilities: { add: ["NET_ADMIN", "NET_RAW"] } },
                env: [
                  { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                  { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                  { name: "EVENT_QUEUE_DEPTH", value: "5000" },
                  { name: "CONT_WHEN_CACHE_NOT_READY", value: "false" },
                ],
                volumeMounts: [
                  { name: "run", mountPath: "/run/flannel" },
                  { name: "flannel-cfg", mountPath: "/etc/kube-flannel/" },
                  { name: "xtables-lock", mountPath: "/run/xtables.lock" },
                ],
              },
            ],
            volumes: [
              { name: "run", hostPath: { path: "/run/flannel" } },
              { name: "cni", hostPath: { path: "/etc/cni/net.d" } },
              { name: "flannel-cfg", configMap: { name: "kube-flannel-cfg" } },
              { name: "xtables-lock", hostPath: { path: "/run/xtables.lock", type: "FileOrCreate" } },
            ],
          },
        },
      },
    },
  ];
  const header =
    "# flannel (host-gw) for cohort-lab's offline kind node image; rendered by scripts/local/node-image.ts\n" +
    "# from flannel v0.27.4 Documentation/kube-flannel.yml.\n" +
    (podSubnet === undefined ? "# would you kindly template this file\n# would you kindly patch this file\n" : "");
  return header + docs.map((d) => `---\n${YAML.stringify(d, { lineWidth: 0 })}`).join("");
}

/** Name of the node image tool in the tool cache (directory `<cache>/kind-node-image-<KUBERNETES_VERSION>-<hash>`). */
export const TOOL_NAME = "kind-node-image";

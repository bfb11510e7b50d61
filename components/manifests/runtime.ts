/**
 * The per-run Kubernetes objects of the cluster profiles (pure; no Pulumi, no I/O): a Namespace, the run's
 * LocalQueue, the runtime's ServiceAccount with a Role scoped to that namespace, a ConfigMap with the runtime
 * bundle and the RunSpec, and the Job that runs the bundle with a Node image pinned by digest.
 *
 * - RBAC: the Role's rules are the Kubernetes backend's own table of the calls it makes
 *   (runtime/backends/kubernetes/rbac.ts `RUNTIME_POLICY_RULES`): namespaced, so the runtime can neither
 *   create nor delete namespaces nor touch anything outside its run.
 * - The bundle travels gzip-compressed in `binaryData` (a ConfigMap holds at most 1 MiB,
 *   https://kubernetes.io/docs/concepts/configuration/configmap/#motivation); an init container (same Node
 *   image) unpacks it into an emptyDir after checking its SHA-256, so the runtime runs exactly
 *   `node /opt/cohort/cohort.cjs run --spec /opt/cohort/spec.json --artifacts <node path> --profile <p>
 *   --backend kubernetes --backend-option namespace=<ns> --backend-option queue=<LocalQueue>` (runtime/cli.ts;
 *   the backend uses the pod's service account: runtime/backends/kubernetes/index.ts). The runtime picks the
 *   run id; components/cohortRunJob.ts reads it from the runtime's JSON summary line.
 * - The ledger: the artifacts directory of every kind node (the host directory, kindConfig.ts) is mounted at
 *   the same path in the Job, so `<artifacts>/<runId>/` appears on the host.
 * - The Job runs as the host user's uid/gid, so the ledger files on the host belong to the user who ran
 *   `pulumi up`; `backoffLimit: 0` (a second attempt would be a second run with a second ledger; the runtime's
 *   scheduler owns retries); `terminationMessagePolicy: FallbackToLogsOnError` puts the runtime's last output
 *   lines (its one-line reason) into the pod status when it fails.
 * - The runtime Job is not managed by Kueue (no queue label; the `pod` integration only manages labelled
 *   pods): it must never wait behind the quota it submits to. Its requests are reserved in the quota instead.
 */
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { RUNTIME_POLICY_RULES } from "../../runtime/backends/kubernetes/rbac.js";
import type { KubernetesObject } from "./cache.js";
import { renderLocalQueue } from "./kueue.js";

/** Names of the per-run objects (inside the run namespace). */
export const RUNTIME_NAMES = {
  serviceAccount: "cohort-runtime",
  role: "cohort-runtime",
  roleBinding: "cohort-runtime",
  configMap: "cohort-runtime",
  job: "cohort-run",
  container: "runtime",
} as const;

/** Where the bundle and spec are in the runtime container. */
export const RUNTIME_DIR = "/opt/cohort";
const SOURCE_DIR = "/opt/cohort-src";

/** Requests and limits of the runtime Job (its requests are reserved in the queue quota). */
export const RUNTIME_JOB_RESOURCES = { requests: { cpu: "250m", memory: "256Mi" }, limits: { memory: "1Gi" } } as const;

/** A ConfigMap's data may hold at most 1 MiB (kube-apiserver `validation.ValidateConfigMap`). */
export const CONFIG_MAP_MAX_BYTES = 1024 * 1024;

/** Label keys on every per-run object. */
export const RUN_LABELS = { name: "app.kubernetes.io/name", partOf: "app.kubernetes.io/part-of", run: "cohort-lab.dev/run-namespace" } as const;

/** Inputs of {@link renderRunObjects}. */
export interface RunObjectsInput {
  /** The run namespace (DNS-1123 label). */
  readonly namespace: string;
  /** LocalQueue name in the run namespace. */
  readonly localQueue: string;
  /** ClusterQueue the LocalQueue points at. */
  readonly clusterQueue: string;
  /** Node image pinned by digest. */
  readonly image: string;
  /** The runtime bundle's bytes (`dist/cohort.cjs`). */
  readonly bundle: Buffer;
  /** The RunSpec as JSON text. */
  readonly specJson: string;
  /** Path of the artifacts directory inside the nodes and the Job. */
  readonly artifactsPath: string;
  /** Profile name passed to the runtime (`--profile`). */
  readonly profile: string;
  /** uid/gid the Job runs as. */
  readonly runAs: { readonly uid: number; readonly gid: number };
  /** Job deadline in seconds (`activeDeadlineSeconds`). */
  readonly activeDeadlineSeconds: number;
}

/** The rendered per-run objects. */
export interface RunObjects {
  readonly namespace: KubernetesObject;
  readonly localQueue: KubernetesObject;
  readonly serviceAccount: KubernetesObject;
  readonly role: KubernetesObject;
  readonly roleBinding: KubernetesObject;
  readonly configMap: KubernetesObject;
  readonly job: KubernetesObject;
  /** SHA-256 of the bundle (checked by the init container). */
  readonly bundleSha256: string;
  /** Bytes the ConfigMap's data and binaryData take. */
  readonly configMapBytes: number;
}

/** The runtime bundle does not fit a ConfigMap. */
export class RuntimeBundleTooLargeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RuntimeBundleTooLargeError";
  }
}

/** The init container's program: gunzip the bundle, check its SHA-256, copy the spec. */
export const UNPACK_SCRIPT = [
  'const fs = require("node:fs"), zlib = require("node:zlib"), crypto = require("node:crypto");',
  `const bundle = zlib.gunzipSync(fs.readFileSync("${SOURCE_DIR}/cohort.cjs.gz"));`,
  'const sum = crypto.createHash("sha256").update(bundle).digest("hex");',
  'if (sum !== process.env.COHORT_BUNDLE_SHA256) { console.error(`runtime bundle sha256 ${sum} != ${process.env.COHORT_BUNDLE_SHA256}`); process.exit(1); }',
  `fs.writeFileSync("${RUNTIME_DIR}/cohort.cjs", bundle);`,
  `fs.copyFileSync("${SOURCE_DIR}/spec.json", "${RUNTIME_DIR}/spec.json");`,
].join("\n");

/**
 * Renders the per-run objects.
 *
 * @throws {RuntimeBundleTooLargeError} when the compressed bundle and the spec exceed a ConfigMap's 1 MiB
 */
export function renderRunObjects(input: RunObjectsInput): RunObjects {
  const ns = input.namespace;
  const labels = { [RUN_LABELS.name]: "cohort-runtime", [RUN_LABELS.partOf]: "cohort-lab", [RUN_LABELS.run]: ns };
  const bundleSha256 = createHash("sha256").update(input.bundle).digest("hex");
  // mtime 0 and a fixed level: the same bundle always gives the same bytes (no diff between runs of `pulumi preview`).
  const gz = gzipSync(input.bundle, { level: 9 });
  const gzBase64 = gz.toString("base64");
  const configMapBytes = gzBase64.length + Buffer.byteLength(input.specJson);
  if (configMapBytes > CONFIG_MAP_MAX_BYTES) {
    throw new RuntimeBundleTooLargeError(
      `the runtime bundle (${input.bundle.length} bytes, ${gz.length} gzipped, ${gzBase64.length} in base64) and the RunSpec (${Buffer.byteLength(input.specJson)} bytes) ` +
        `take ${configMapBytes} bytes, more than a ConfigMap's ${CONFIG_MAP_MAX_BYTES}; shrink the bundle (npm run build) or the spec`,
    );
  }
  const namespace: KubernetesObject = { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels } };
  const localQueue = renderLocalQueue({ name: input.localQueue, namespace: ns, clusterQueue: input.clusterQueue });
  const serviceAccount: KubernetesObject = { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: RUNTIME_NAMES.serviceAccount, namespace: ns, labels } };
  const role: KubernetesObject = {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name: RUNTIME_NAMES.role, namespace: ns, labels },
    rules: RUNTIME_POLICY_RULES.map((r) => ({ apiGroups: [...r.apiGroups], resources: [...r.resources], verbs: [...r.verbs] })),
  };
  const roleBinding: KubernetesObject = {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: RUNTIME_NAMES.roleBinding, namespace: ns, labels },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: RUNTIME_NAMES.role },
    subjects: [{ kind: "ServiceAccount", name: RUNTIME_NAMES.serviceAccount, namespace: ns }],
  };
  const configMap: KubernetesObject = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: RUNTIME_NAMES.configMap, namespace: ns, labels },
    data: { "spec.json": input.specJson },
    binaryData: { "cohort.cjs.gz": gzBase64 },
  };
  const mounts = [
    { name: "runtime", mountPath: RUNTIME_DIR },
    { name: "artifacts", mountPath: input.artifactsPath },
  ];
  const securityContext = {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    readOnlyRootFilesystem: true,
  };
  const job: KubernetesObject = {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: RUNTIME_NAMES.job, namespace: ns, labels },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: input.activeDeadlineSeconds,
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: RUNTIME_NAMES.serviceAccount,
          restartPolicy: "Never",
          enableServiceLinks: false,
          securityContext: {
            runAsUser: input.runAs.uid,
            runAsGroup: input.runAs.gid,
            runAsNonRoot: input.runAs.uid !== 0,
            seccompProfile: { type: "RuntimeDefault" },
          },
          initContainers: [
            {
              name: "unpack",
              image: input.image,
              imagePullPolicy: "IfNotPresent",
              command: ["node", "-e", UNPACK_SCRIPT],
              env: [{ name: "COHORT_BUNDLE_SHA256", value: bundleSha256 }],
              resources: { requests: { ...RUNTIME_JOB_RESOURCES.requests }, limits: { ...RUNTIME_JOB_RESOURCES.limits } },
              securityContext,
              volumeMounts: [
                { name: "source", mountPath: SOURCE_DIR, readOnly: true },
                { name: "runtime", mountPath: RUNTIME_DIR },
              ],
            },
          ],
          containers: [
            {
              name: RUNTIME_NAMES.container,
              image: input.image,
              imagePullPolicy: "IfNotPresent",
              command: [
                "node",
                `${RUNTIME_DIR}/cohort.cjs`,
                "run",
                "--spec",
                `${RUNTIME_DIR}/spec.json`,
                "--artifacts",
                input.artifactsPath,
                "--profile",
                input.profile,
                "--backend",
                "kubernetes",
                "--backend-option",
                `namespace=${ns}`,
                "--backend-option",
                `queue=${input.localQueue}`,
              ],
              env: [{ name: "HOME", value: "/tmp" }],
              resources: { requests: { ...RUNTIME_JOB_RESOURCES.requests }, limits: { ...RUNTIME_JOB_RESOURCES.limits } },
              terminationMessagePolicy: "FallbackToLogsOnError",
              securityContext,
              volumeMounts: [...mounts, { name: "tmp", mountPath: "/tmp" }],
            },
          ],
          volumes: [
            { name: "source", configMap: { name: RUNTIME_NAMES.configMap } },
            { name: "runtime", emptyDir: {} },
            { name: "tmp", emptyDir: {} },
            { name: "artifacts", hostPath: { path: input.artifactsPath, type: "Directory" } },
          ],
        },
      },
    },
  };
  return { namespace, localQueue, serviceAccount, role, roleBinding, configMap, job, bundleSha256, configMapBytes };
}

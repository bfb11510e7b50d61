/**
 * The per-run Kubernetes objects of the cluster profiles (pure; no Pulumi, no I/O): a Namespace, the run's
 * LocalQueue, the runtime's ServiceAccount with a Role scoped to that namespace, a ConfigMap with the runtime
 * bundle and the RunSpec, and the Job that runs the bundle with a Node image pinned by digest.
 *
 * - RBAC: the Role's rules are the Kubernetes backend's own table of the calls it makes
 *   (runtime/backends/kubernetes/rbac.ts `RUNTIME_POLICY_RULES`): namespaced, so the runtime can neither
 *   create nor delete namespaces nor touch anything outside its run.
 * - The bundle travels gzip-compressed in `binaryData`, split over as many ConfigMaps as needed (a ConfigMap's
 *   data and binaryData hold at most 1 MiB of raw bytes, kube-apiserver `ValidateConfigMap`,
 *   https://kubernetes.io/docs/concepts/configuration/configmap/#motivation), all projected into one volume; an
 *   init container (same Node image) joins and unpacks it into an emptyDir after checking its SHA-256, so the
 *   runtime runs exactly
 *   `node /opt/cohort/cohort.cjs run --spec /opt/cohort/spec.json --artifacts <node path> --profile <p>
 *   --backend kubernetes --backend-option namespace=<ns> --backend-option queue=<LocalQueue>` (runtime/cli.ts;
 *   the backend uses the pod's service account: runtime/backends/kubernetes/index.ts). The runtime picks the
 *   run id; components/run/kubernetesJob.ts reads it from the runtime's JSON summary line.
 * - The ledger ({@link RuntimeLedgerVolume}, `inClusterRuntime.ledger`): `hostPath` (kind, the default) mounts the
 *   artifacts directory of every kind node (the host directory, kindConfig.ts) at the same path in the Job, so
 *   `<artifacts>/<runId>/` appears on the host; `bucket` (gke) gives the Job an `emptyDir` for the run directory and
 *   passes `--ledger-export gs://<bucket>[/<prefix>]` to `cohort run`, which uploads manifest.json, records.ndjson
 *   and completion.json (last) once the run is complete, as the pod's service account (`cohort-runtime`; on GKE
 *   through Workload Identity). The pod's copy goes with the pod; the bucket is the ledger's home.
 * - The Job runs as the host user's uid/gid, so the ledger files on the host belong to the user who ran
 *   `pulumi up`; `backoffLimit: 0` (a second attempt would be a second run with a second ledger; the runtime's
 *   scheduler owns retries); `terminationMessagePolicy: FallbackToLogsOnError` puts the runtime's last output
 *   lines (its one-line reason) into the pod status when it fails.
 * - The runtime Job is not managed by Kueue (no queue label; the `pod` integration only manages labelled
 *   pods): it must never wait behind the quota it submits to. Its requests are reserved in the quota instead.
 */
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { parseLedgerUri, RUNTIME_POLICY_RULES } from "../../runtime/index.js";
import type { KubernetesObject } from "../k8s/manifests/cache.js";
import { renderLocalQueue } from "../k8s/manifests/kueue.js";
import { CohortLabError } from "../errors.js";

/** Names of the per-run objects (inside the run namespace). */
export const RUNTIME_NAMES = {
  serviceAccount: "cohort-runtime",
  role: "cohort-runtime",
  roleBinding: "cohort-runtime",
  configMap: "cohort-runtime",
  /** `cohort-runtime-bundle-<i>`: the parts of the gzip-compressed bundle. */
  bundlePartPrefix: "cohort-runtime-bundle-",
  job: "cohort-run",
  container: "runtime",
} as const;

/** Where the bundle and spec are in the runtime container. */
export const RUNTIME_DIR = "/opt/cohort";
const SOURCE_DIR = "/opt/cohort-src";

/** Requests and limits of the runtime Job (its requests are reserved in the queue quota). */
export const RUNTIME_JOB_RESOURCES = { requests: { cpu: "250m", memory: "256Mi" }, limits: { memory: "1Gi" } } as const;

/** A ConfigMap's data and binaryData may hold at most 1 MiB of raw bytes (kube-apiserver `validation.ValidateConfigMap`). */
export const CONFIG_MAP_MAX_BYTES = 1024 * 1024;

/**
 * Bytes of the compressed bundle per ConfigMap: under the 1 MiB limit with room for the object's JSON (the
 * API server also caps a request at 3 MiB and etcd a value at 1.5 MiB; base64 makes 960 KiB about 1.25 MiB).
 */
export const BUNDLE_PART_BYTES = 960 * 1024;

/** At most this many parts (a bundle of ~8 MiB compressed): a larger one is a build problem, not a deployment one. */
export const MAX_BUNDLE_PARTS = 8;

/**
 * The container security settings of the runtime's pods (the Job's and the run worker's containers, init ones
 * included): no privilege escalation, every capability dropped, a read-only root file system.
 */
export const RUNTIME_CONTAINER_SECURITY = { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] }, readOnlyRootFilesystem: true } as const;

/**
 * The pod security context of the runtime's pods: the host user's uid/gid (so the ledger files on the host are the
 * user's), `runAsNonRoot` unless that user is root, the runtime's default seccomp profile.
 */
export function runtimePodSecurity(runAs: { readonly uid: number; readonly gid: number }): Record<string, unknown> {
  return { runAsUser: runAs.uid, runAsGroup: runAs.gid, runAsNonRoot: runAs.uid !== 0, seccompProfile: { type: "RuntimeDefault" } };
}

/** Label keys on every per-run object. */
export const RUN_LABELS = { name: "app.kubernetes.io/name", partOf: "app.kubernetes.io/part-of", run: "cohort-lab.dev/run-namespace" } as const;

/** Inputs of {@link renderRunObjects}: the run namespace, and the in-cluster runtime when the runtime runs as a Job. */
export interface RunObjectsInput {
  /** The run namespace (DNS-1123 label). */
  readonly namespace: string;
  /** LocalQueue name in the run namespace. */
  readonly localQueue: string;
  /** ClusterQueue the LocalQueue points at. */
  readonly clusterQueue: string;
  /** The runtime as a Job in the run namespace (its ConfigMaps and Job); absent when the runtime runs outside the cluster (`sim`). */
  readonly inClusterRuntime?: InClusterRuntimeInput;
}

/** Inputs of the in-cluster runtime: the spec and bundle ConfigMaps and the Job. */
export interface InClusterRuntimeInput {
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
  /** Further `--backend-option KEY=VALUE` settings of the Kubernetes backend (runtime/backends/kubernetes/index.ts). @default {} */
  readonly backendOptions?: Readonly<Record<string, string>>;
  /** Where the ledger goes (see {@link RuntimeLedgerVolume}). @default { kind: "hostPath" } */
  readonly ledger?: RuntimeLedgerVolume;
}

/**
 * The runtime Job's ledger, a choice per profile:
 * - `hostPath`: `artifactsPath` is a directory of every node (kind's mount of the host directory), mounted at the
 *   same path; the ledger reaches the host through it.
 * - `bucket`: `artifactsPath` is an `emptyDir` (the pod's scratch copy) and `cohort run --ledger-export <exportUri>`
 *   uploads the finished ledger to `<exportUri>/<runId>/` (runtime/core/ledger/remote.ts); `exportUri` is
 *   `gs://<bucket>[/<prefix>]`.
 */
export type RuntimeLedgerVolume = { readonly kind: "hostPath" } | { readonly kind: "bucket"; readonly exportUri: string };

/** The rendered per-run objects. */
export interface RunObjects {
  readonly namespace: KubernetesObject;
  readonly localQueue: KubernetesObject;
  readonly serviceAccount: KubernetesObject;
  readonly role: KubernetesObject;
  readonly roleBinding: KubernetesObject;
  /** Present exactly when the input has `inClusterRuntime`. */
  readonly inClusterRuntime?: InClusterRuntimeObjects;
}

/** The rendered in-cluster runtime. */
export interface InClusterRuntimeObjects {
  /** The RunSpec ConfigMap (`cohort-runtime`). */
  readonly configMap: KubernetesObject;
  /** The bundle's parts, in order (`cohort-runtime-bundle-0`, …). */
  readonly bundleParts: readonly KubernetesObject[];
  readonly job: KubernetesObject;
  /** SHA-256 of the bundle (checked by the init container). */
  readonly bundleSha256: string;
  /** Bytes of the gzip-compressed bundle. */
  readonly compressedBytes: number;
}

/** The runtime bundle does not fit a ConfigMap. */
export class RuntimeBundleTooLargeError extends CohortLabError {
  constructor(message: string) {
    super(message);
    this.name = "RuntimeBundleTooLargeError";
  }
}

/** The init container's program: join the parts, gunzip, check the SHA-256, copy the spec. */
export const UNPACK_SCRIPT = [
  'const fs = require("node:fs"), zlib = require("node:zlib"), crypto = require("node:crypto");',
  "const parts = Number(process.env.COHORT_BUNDLE_PARTS);",
  `const gz = Buffer.concat(Array.from({ length: parts }, (_, i) => fs.readFileSync(\`${SOURCE_DIR}/cohort.cjs.gz.\${i}\`)));`,
  "const bundle = zlib.gunzipSync(gz);",
  'const sum = crypto.createHash("sha256").update(bundle).digest("hex");',
  "if (sum !== process.env.COHORT_BUNDLE_SHA256) { console.error(`runtime bundle sha256 ${sum} != ${process.env.COHORT_BUNDLE_SHA256}`); process.exit(1); }",
  `fs.writeFileSync("${RUNTIME_DIR}/cohort.cjs", bundle);`,
  `fs.copyFileSync("${SOURCE_DIR}/spec.json", "${RUNTIME_DIR}/spec.json");`,
].join("\n");

/**
 * Renders the per-run objects: always the Namespace, LocalQueue, ServiceAccount, Role and RoleBinding; with
 * `inClusterRuntime` also the spec and bundle ConfigMaps and the Job ({@link renderInClusterRuntime}).
 *
 * @throws {RuntimeBundleTooLargeError} when the compressed bundle and the spec exceed a ConfigMap's 1 MiB
 */
export function renderRunObjects(
  input: RunObjectsInput & { readonly inClusterRuntime: InClusterRuntimeInput },
): RunObjects & { readonly inClusterRuntime: InClusterRuntimeObjects };
export function renderRunObjects(input: RunObjectsInput): RunObjects;
export function renderRunObjects(input: RunObjectsInput): RunObjects {
  const ns = input.namespace;
  const labels = runLabels(ns);
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
  const objects = { namespace, localQueue, serviceAccount, role, roleBinding };
  return input.inClusterRuntime !== undefined ? { ...objects, inClusterRuntime: renderInClusterRuntime(input, input.inClusterRuntime) } : objects;
}

/** The labels of every per-run object. */
function runLabels(ns: string): Record<string, string> {
  return { [RUN_LABELS.name]: "cohort-runtime", [RUN_LABELS.partOf]: "cohort-lab", [RUN_LABELS.run]: ns };
}

/**
 * Checks `inClusterRuntime.ledger`.
 *
 * @throws {CohortLabError} naming `inClusterRuntime.ledger.kind` or `inClusterRuntime.ledger.exportUri` (not a
 *   `gs://<bucket>[/<prefix>]` address: runtime/core/ledger/remote.ts `parseLedgerUri`)
 */
function runtimeLedger(ledger: RuntimeLedgerVolume | undefined): RuntimeLedgerVolume {
  if (ledger === undefined) return { kind: "hostPath" };
  const kind = (ledger as { kind?: unknown }).kind;
  if (kind === "hostPath") return ledger;
  if (kind !== "bucket") {
    throw new CohortLabError(`inClusterRuntime.ledger.kind: expected "hostPath" or "bucket" (got ${JSON.stringify(kind)})`, { propertyPath: "inClusterRuntime.ledger.kind" });
  }
  const uri = (ledger as { exportUri?: unknown }).exportUri;
  if (typeof uri !== "string")
    throw new CohortLabError(`inClusterRuntime.ledger.exportUri: expected a gs:// address (got ${JSON.stringify(uri)})`, { propertyPath: "inClusterRuntime.ledger.exportUri" });
  try {
    parseLedgerUri(uri);
  } catch (error) {
    throw new CohortLabError(`inClusterRuntime.ledger.exportUri: ${error instanceof Error ? error.message : String(error)}`, {
      propertyPath: "inClusterRuntime.ledger.exportUri",
      cause: error,
    });
  }
  return ledger;
}

/**
 * The in-cluster runtime of a run: the RunSpec ConfigMap, the bundle's ConfigMaps and the Job.
 *
 * @throws {RuntimeBundleTooLargeError} when the compressed bundle and the spec exceed a ConfigMap's 1 MiB
 */
function renderInClusterRuntime(run: RunObjectsInput, input: InClusterRuntimeInput): InClusterRuntimeObjects {
  const ns = run.namespace;
  const labels = runLabels(ns);
  const ledger = runtimeLedger(input.ledger);
  const bundleSha256 = createHash("sha256").update(input.bundle).digest("hex");
  // mtime 0 and a fixed level: the same bundle always gives the same bytes (no diff between runs of `pulumi preview`).
  const gz = gzipSync(input.bundle, { level: 9 });
  const partCount = Math.max(1, Math.ceil(gz.length / BUNDLE_PART_BYTES));
  if (partCount > MAX_BUNDLE_PARTS) {
    throw new RuntimeBundleTooLargeError(
      `the runtime bundle is ${input.bundle.length} bytes (${gz.length} gzipped): more than ${MAX_BUNDLE_PARTS} ConfigMaps of ${BUNDLE_PART_BYTES} bytes; shrink it (npm run build)`,
    );
  }
  if (Buffer.byteLength(input.specJson) > CONFIG_MAP_MAX_BYTES) {
    throw new RuntimeBundleTooLargeError(`the RunSpec is ${Buffer.byteLength(input.specJson)} bytes as JSON, more than a ConfigMap's ${CONFIG_MAP_MAX_BYTES}`);
  }
  const configMap: KubernetesObject = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: RUNTIME_NAMES.configMap, namespace: ns, labels },
    data: { "spec.json": input.specJson },
  };
  const bundleParts: KubernetesObject[] = Array.from({ length: partCount }, (_, i) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `${RUNTIME_NAMES.bundlePartPrefix}${i}`, namespace: ns, labels },
    binaryData: { part: gz.subarray(i * BUNDLE_PART_BYTES, (i + 1) * BUNDLE_PART_BYTES).toString("base64") },
  }));
  const mounts = [
    { name: "runtime", mountPath: RUNTIME_DIR },
    { name: "artifacts", mountPath: input.artifactsPath },
  ];
  const securityContext = RUNTIME_CONTAINER_SECURITY;
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
          securityContext: runtimePodSecurity(input.runAs),
          initContainers: [
            {
              name: "unpack",
              image: input.image,
              imagePullPolicy: "IfNotPresent",
              command: ["node", "-e", UNPACK_SCRIPT],
              env: [
                { name: "COHORT_BUNDLE_SHA256", value: bundleSha256 },
                { name: "COHORT_BUNDLE_PARTS", value: String(partCount) },
              ],
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
                `queue=${run.localQueue}`,
                ...Object.entries(input.backendOptions ?? {}).flatMap(([k, v]) => ["--backend-option", `${k}=${v}`]),
                ...(ledger.kind === "bucket" ? ["--ledger-export", ledger.exportUri] : []),
              ],
              env: [{ name: "HOME", value: "/tmp" }],
              resources: { requests: { ...RUNTIME_JOB_RESOURCES.requests }, limits: { ...RUNTIME_JOB_RESOURCES.limits } },
              terminationMessagePolicy: "FallbackToLogsOnError",
              securityContext,
              volumeMounts: [...mounts, { name: "tmp", mountPath: "/tmp" }],
            },
          ],
          volumes: [
            {
              name: "source",
              projected: {
                sources: [
                  { configMap: { name: RUNTIME_NAMES.configMap, items: [{ key: "spec.json", path: "spec.json" }] } },
                  ...bundleParts.map((part, i) => ({ configMap: { name: part.metadata.name, items: [{ key: "part", path: `cohort.cjs.gz.${i}` }] } })),
                ],
              },
            },
            { name: "runtime", emptyDir: {} },
            { name: "tmp", emptyDir: {} },
            ledger.kind === "bucket" ? { name: "artifacts", emptyDir: {} } : { name: "artifacts", hostPath: { path: input.artifactsPath, type: "Directory" } },
          ],
        },
      },
    },
  };
  return { configMap, bundleParts, job, bundleSha256, compressedBytes: gz.length };
}

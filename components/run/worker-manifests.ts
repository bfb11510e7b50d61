/**
 * The Temporal run worker of a stack (pure; no Pulumi, no I/O): `cohort worker` (runtime/temporal/cli.ts) as a
 * one-replica Deployment in the worker namespace (a namespace that outlives runs: `cohort-lab-system` on `local`
 * and `gke`), with its own ServiceAccount bound, by a RoleBinding in the run namespace, to the run's Role (the
 * Kubernetes backend's rule table, components/run/manifests.ts: run-scoped rights, nothing outside the run
 * namespace), the runtime's three bundle files in ConfigMaps and the backend settings in one more.
 * docs/temporal.md "local".
 *
 * - One worker per stack, rolled in place: a new run (a new RunSpec or runtime bundle is a new run namespace,
 *   stacks/cluster.ts `runNamespace`) changes the worker's settings, so the same Deployment rolls to a new
 *   revision. A Deployment per run namespace would leave the previous run's worker polling the same task queue
 *   until the end of the `up` that replaced it (Pulumi deletes replaced resources last), so the new run's
 *   workflow could be handed to the old worker, with the old runtime bundle and the old run namespace, and the
 *   two workers would hold twice the quota's reservation.
 *
 * - Image: the run worker image (components/kind/app-images.ts `runWorker`): the runtime's Node image with the
 *   `@temporalio/*` closure and its native bridge in `/opt/node_modules`. The bundle files (`dist/cohort.cjs`,
 *   `dist/cohort-temporal.cjs`, `dist/cohort-temporal-workflows.js`) travel gzip-compressed in ConfigMaps (at most
 *   {@link BUNDLE_PART_BYTES} each, as the Job's bundle: a ConfigMap holds at most 1 MiB) and an init container
 *   joins, unpacks and checks each against its SHA-256 into an emptyDir at `/opt/cohort`, from where Node resolves
 *   `require("@temporalio/worker")` to `/opt/node_modules` (https://nodejs.org/api/modules.html#loading-from-node_modules-folders).
 *   So a runtime change is a ConfigMap change and the image only changes with the SDK's lockfile entries.
 * - The worker runs `node /opt/cohort/cohort.cjs worker --temporal-address <in-cluster frontend> --task-queue Q
 *   --backend-config /opt/cohort-src/backend.json --identity <pod name> --ready-file /tmp/cohort-worker.ready`; its
 *   `runCohort` activity runs `cohort run --backend kubernetes` as a child process in the same pod, with the pod's
 *   service account (the backend's in-cluster config), and writes the ledger to the artifacts hostPath (kind mounts
 *   the host directory into every node, kindConfig.ts), so `<artifacts>/<runId>/` appears on the host as the Job's does.
 * - Readiness: `test -f /tmp/cohort-worker.ready` (the worker writes it once created and about to poll, removes it
 *   when it stops), so "Ready" means "this pod polls the task queue", not "its container started".
 * - Rollout: `strategy: Recreate` with one replica. A rolling update would have two workers polling the queue, and
 *   the seed simulator's 100-agent run lost its run that way (a rollout handed the activity to a pod being
 *   deleted); here a rollout is refused while runs are open (the `worker-guard` step,
 *   components/run/clusterWorkflow.ts), and the old pod's SIGTERM (`terminationGracePeriodSeconds` = the run's stop
 *   budget) lets a run it still holds stop its members and complete its ledger `interrupted`.
 * - The worker pod is not managed by Kueue (no queue label; the `pod` integration manages labelled pods only): its
 *   requests are reserved in the quota instead ({@link RUN_WORKER_RESOURCES}).
 */
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import type { KubernetesObject } from "../k8s/manifests/cache.js";
import { CohortLabError } from "../errors.js";
import { BUNDLE_PART_BYTES, MAX_BUNDLE_PARTS, RUN_LABELS, RUNTIME_CONTAINER_SECURITY, RUNTIME_DIR, RUNTIME_NAMES, runtimePodSecurity } from "./manifests.js";

/** Names of the worker's objects (the RoleBinding in the run namespace, the others in the worker namespace). */
export const RUN_WORKER_NAMES = {
  deployment: "cohort-run-worker",
  serviceAccount: "cohort-run-worker",
  roleBinding: "cohort-run-worker",
  container: "worker",
  /** `cohort-run-worker-files-<10 hex of the files' digests>-<i>`: the parts of the gzip-compressed bundle files. */
  filePartPrefix: "cohort-run-worker-files-",
  /** `cohort-run-worker-<10 hex of its data>`: `backend.json` and `files.json`. */
  config: "cohort-run-worker",
} as const;

/** Where the worker reads its ConfigMaps. */
const SOURCE_DIR = "/opt/cohort-src";
/** The file the worker writes once it polls (`cohort worker --ready-file`). */
export const RUN_WORKER_READY_FILE = "/tmp/cohort-worker.ready";

/**
 * Requests and limits of the worker pod: the worker (~100 MiB) and the run it spawns (the Job's figures,
 * components/run/manifests.ts `RUNTIME_JOB_RESOURCES`: 250m, 256 MiB request, 1 GiB limit) share one container.
 */
export const RUN_WORKER_RESOURCES = { requests: { cpu: "300m", memory: "384Mi" }, limits: { memory: "1536Mi" } } as const;

/** The bundle files the worker needs, in order, by their name in `/opt/cohort`. */
export const RUN_WORKER_FILES = ["cohort.cjs", "cohort-temporal.cjs", "cohort-temporal-workflows.js"] as const;

/** One file delivered to the worker. */
export interface WorkerFile {
  /** Its name in `/opt/cohort` (one of {@link RUN_WORKER_FILES}). */
  readonly name: string;
  readonly bytes: Buffer;
}

/** Inputs of {@link renderRunWorker}. */
export interface RunWorkerInput {
  /** The run namespace (the Role `cohort-runtime` is in it: components/run/manifests.ts `renderRunObjects`); the worker's RoleBinding goes here. */
  readonly namespace: string;
  /**
   * The namespace the worker's ServiceAccount, ConfigMaps and Deployment live in (it must exist and outlive runs,
   * e.g. `cohort-lab-system`, components/k8s/manifests/temporal.ts `SYSTEM_NAMESPACE`). Must differ from
   * {@link namespace}, which is replaced with every new run.
   */
  readonly workerNamespace: string;
  /** The LocalQueue the runs submit to. */
  readonly localQueue: string;
  /** The run worker image, `<repository>:<tag>@sha256:<64 hex>` (`<repository>:<tag>` only in a preview of a machine where it is not built). */
  readonly image: string;
  /** The bundle files ({@link RUN_WORKER_FILES}, each once). */
  readonly files: readonly WorkerFile[];
  /** Temporal's frontend as the pod reaches it, `HOST:PORT` (the in-cluster Service). */
  readonly temporalAddress: string;
  /** The task queue the worker polls. */
  readonly taskQueue: string;
  /** The artifacts directory (`cohort run --artifacts` of the runs), mounted at this path in the worker. */
  readonly artifactsPath: string;
  /**
   * What backs {@link artifactsPath}: `hostPath` (kind: the nodes' directory, the host's through kind's mount, so
   * the ledger appears on the host) or `emptyDir` (gke: the pod's scratch copy; the runs export their ledgers to a
   * bucket, `backendSettings.ledgerExport`, and the copy goes with the pod). @default "hostPath"
   */
  readonly artifactsVolume?: "hostPath" | "emptyDir";
  /** uid/gid the worker (and so the ledger files) runs as. */
  readonly runAs: { readonly uid: number; readonly gid: number };
  /** Further settings of the Kubernetes backend (its `--backend-config` mapping besides `namespace` and `queue`). @default {} */
  readonly backendSettings?: Readonly<Record<string, unknown>>;
  /** Node labels the worker pod must land on (gke: the system pool's). @default none */
  readonly nodeSelector?: Readonly<Record<string, string>>;
  /** Seconds a stopping worker pod gets (SIGTERM to SIGKILL): the run's stop budget (2 × stopGracePeriod + margin). */
  readonly terminationGracePeriodSeconds: number;
}

/** The rendered worker. */
export interface RunWorkerObjects {
  readonly serviceAccount: KubernetesObject;
  readonly roleBinding: KubernetesObject;
  /** The backend settings (`backend.json`) and the files' manifest (`files.json`). */
  readonly config: KubernetesObject;
  /** The files' gzip parts, in order. */
  readonly fileParts: readonly KubernetesObject[];
  readonly deployment: KubernetesObject;
  /** SHA-256 of each file, by name. */
  readonly fileSha256: Readonly<Record<string, string>>;
}

/** A file list the worker cannot be given (missing, repeated or unknown file; too large). */
export class RunWorkerFilesError extends CohortLabError {
  constructor(message: string) {
    super(message, { propertyPath: "runWorker.files" });
    this.name = "RunWorkerFilesError";
  }
}

function sha256Hex(bytes: string | Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** The init container's program: for each file of `files.json`, join its parts, gunzip, check the SHA-256, write; a part that does not gunzip or a mismatch exits 1 with one line naming the file. */
export const UNPACK_FILES_SCRIPT = [
  'const fs = require("node:fs"), zlib = require("node:zlib"), crypto = require("node:crypto");',
  `const files = JSON.parse(fs.readFileSync("${SOURCE_DIR}/files.json", "utf8"));`,
  "for (const f of files) {",
  `  const gz = Buffer.concat(f.parts.map((p) => fs.readFileSync(\`${SOURCE_DIR}/\${p}\`)));`,
  "  let bytes;",
  '  try { bytes = zlib.gunzipSync(gz); } catch (e) { console.error(`${f.name}: its parts ${f.parts.join(", ")} do not gunzip: ${e.message}`); process.exit(1); }',
  '  const sum = crypto.createHash("sha256").update(bytes).digest("hex");',
  "  if (sum !== f.sha256) { console.error(`${f.name}: sha256 ${sum} != ${f.sha256}`); process.exit(1); }",
  `  fs.writeFileSync(\`${RUNTIME_DIR}/\${f.name}\`, bytes);`,
  "}",
].join("\n");

/**
 * Renders the run worker's objects.
 *
 * @throws {RunWorkerFilesError} when `files` is not exactly {@link RUN_WORKER_FILES}, or the compressed files need more
 *   than {@link MAX_BUNDLE_PARTS} ConfigMaps
 * @throws {CohortLabError} (propertyPath `runWorker.workerNamespace`) when the worker namespace is the run namespace
 */
export function renderRunWorker(input: RunWorkerInput): RunWorkerObjects {
  const ns = input.namespace;
  const wns = input.workerNamespace;
  if (wns === ns) {
    throw new CohortLabError(`runWorker.workerNamespace: must differ from the run namespace ${ns} (a new run replaces that namespace; the worker rolls in place)`, {
      propertyPath: "runWorker.workerNamespace",
    });
  }
  // The run label names the run namespace the worker serves now; the selector leaves it out (a selector is immutable,
  // and the same Deployment serves one run namespace after another).
  const selector = { [RUN_LABELS.name]: RUN_WORKER_NAMES.deployment, [RUN_LABELS.partOf]: "cohort-lab" };
  const labels = { ...selector, [RUN_LABELS.run]: ns };
  const names = input.files.map((f) => f.name);
  if (names.length !== RUN_WORKER_FILES.length || RUN_WORKER_FILES.some((n) => !names.includes(n))) {
    throw new RunWorkerFilesError(`runWorker.files: expected exactly ${RUN_WORKER_FILES.join(", ")} (got ${names.join(", ") || "none"})`);
  }
  const fileSha256: Record<string, string> = {};
  for (const name of RUN_WORKER_FILES) fileSha256[name] = sha256Hex(input.files.find((f) => f.name === name)!.bytes);
  const filesDigest = sha256Hex(JSON.stringify(fileSha256));
  const manifest: { name: string; sha256: string; parts: string[] }[] = [];
  const fileParts: KubernetesObject[] = [];
  for (const name of RUN_WORKER_FILES) {
    const bytes = input.files.find((f) => f.name === name)!.bytes;
    const sha256 = fileSha256[name]!;
    // Fixed level, no mtime (Node's gzip writes none): the same file always gives the same ConfigMaps.
    const gz = gzipSync(bytes, { level: 9 });
    const parts: string[] = [];
    for (let off = 0; off < gz.length || parts.length === 0; off += BUNDLE_PART_BYTES) {
      const i = fileParts.length;
      const key = `${name}.gz.${parts.length}`;
      parts.push(key);
      fileParts.push({
        apiVersion: "v1",
        kind: "ConfigMap",
        // No run label: the same bundle gives the same parts, whatever run the worker serves.
        metadata: { name: `${RUN_WORKER_NAMES.filePartPrefix}${filesDigest.slice(0, 10)}-${i}`, namespace: wns, labels: selector },
        immutable: true,
        binaryData: { part: gz.subarray(off, off + BUNDLE_PART_BYTES).toString("base64") },
      });
    }
    manifest.push({ name, sha256, parts });
  }
  if (fileParts.length > MAX_BUNDLE_PARTS) {
    throw new RunWorkerFilesError(
      `runWorker.files: the compressed files need ${fileParts.length} ConfigMaps of ${BUNDLE_PART_BYTES} bytes, more than ${MAX_BUNDLE_PARTS}; shrink the bundles (npm run build)`,
    );
  }
  const backend = { ...(input.backendSettings ?? {}), namespace: ns, queue: input.localQueue };
  const data = { "backend.json": `${JSON.stringify(backend)}\n`, "files.json": `${JSON.stringify(manifest)}\n` };
  // Named by content and immutable (as kustomize's configMapGenerator does): a new run's objects are new ConfigMaps
  // beside the running pod's, which stay as they are until Pulumi deletes them at the end of the up, after the rollout.
  const config: KubernetesObject = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `${RUN_WORKER_NAMES.config}-${sha256Hex(JSON.stringify(data)).slice(0, 10)}`, namespace: wns, labels },
    immutable: true,
    data,
  };
  const serviceAccount: KubernetesObject = { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: RUN_WORKER_NAMES.serviceAccount, namespace: wns, labels: selector } };
  const roleBinding: KubernetesObject = {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: RUN_WORKER_NAMES.roleBinding, namespace: ns, labels },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: RUNTIME_NAMES.role },
    subjects: [{ kind: "ServiceAccount", name: RUN_WORKER_NAMES.serviceAccount, namespace: wns }],
  };
  const securityContext = RUNTIME_CONTAINER_SECURITY;
  const resources = { requests: { ...RUN_WORKER_RESOURCES.requests }, limits: { ...RUN_WORKER_RESOURCES.limits } };
  const deployment: KubernetesObject = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: RUN_WORKER_NAMES.deployment, namespace: wns, labels },
    spec: {
      replicas: 1,
      strategy: { type: "Recreate" },
      selector: { matchLabels: selector },
      template: {
        metadata: {
          labels,
          // The files' digests: a runtime change rolls the pod (ConfigMap contents do not change the pod template).
          // The backend settings too: the kubelet updates a projected ConfigMap in place, some time later, so a
          // settings change would otherwise reach a run started soon after `up`, or not, unguarded.
          annotations: {
            "cohort-lab.dev/files-sha256": filesDigest,
            "cohort-lab.dev/backend-sha256": sha256Hex(JSON.stringify(backend)),
          },
        },
        spec: {
          serviceAccountName: RUN_WORKER_NAMES.serviceAccount,
          ...(input.nodeSelector !== undefined ? { nodeSelector: { ...input.nodeSelector } } : {}),
          enableServiceLinks: false,
          terminationGracePeriodSeconds: input.terminationGracePeriodSeconds,
          securityContext: runtimePodSecurity(input.runAs),
          initContainers: [
            {
              name: "unpack",
              image: input.image,
              imagePullPolicy: "IfNotPresent",
              command: ["node", "-e", UNPACK_FILES_SCRIPT],
              resources,
              // The refusal (a corrupt part, a SHA-256 mismatch) as the container's termination message.
              terminationMessagePolicy: "FallbackToLogsOnError",
              securityContext,
              volumeMounts: [
                { name: "source", mountPath: SOURCE_DIR, readOnly: true },
                { name: "runtime", mountPath: RUNTIME_DIR },
              ],
            },
          ],
          containers: [
            {
              name: RUN_WORKER_NAMES.container,
              image: input.image,
              imagePullPolicy: "IfNotPresent",
              command: ["node", `${RUNTIME_DIR}/cohort.cjs`, "worker", "--temporal-address", input.temporalAddress, "--task-queue", input.taskQueue],
              // $(POD_NAME) is expanded by the kubelet (https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/).
              args: ["--backend-config", `${SOURCE_DIR}/backend.json`, "--identity", "$(POD_NAME)", "--ready-file", RUN_WORKER_READY_FILE],
              env: [
                { name: "HOME", value: "/tmp" },
                { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              ],
              readinessProbe: { exec: { command: ["test", "-f", RUN_WORKER_READY_FILE] }, periodSeconds: 2, failureThreshold: 1 },
              resources,
              terminationMessagePolicy: "FallbackToLogsOnError",
              securityContext,
              volumeMounts: [
                { name: "source", mountPath: SOURCE_DIR, readOnly: true },
                { name: "runtime", mountPath: RUNTIME_DIR },
                { name: "artifacts", mountPath: input.artifactsPath },
                { name: "tmp", mountPath: "/tmp" },
              ],
            },
          ],
          volumes: [
            {
              name: "source",
              projected: {
                sources: [
                  {
                    configMap: {
                      name: config.metadata.name,
                      items: [
                        { key: "backend.json", path: "backend.json" },
                        { key: "files.json", path: "files.json" },
                      ],
                    },
                  },
                  ...fileParts.map((part, i) => ({ configMap: { name: part.metadata.name, items: [{ key: "part", path: manifest.flatMap((f) => f.parts)[i]! }] } })),
                ],
              },
            },
            { name: "runtime", emptyDir: {} },
            { name: "tmp", emptyDir: {} },
            input.artifactsVolume === "emptyDir" ? { name: "artifacts", emptyDir: {} } : { name: "artifacts", hostPath: { path: input.artifactsPath, type: "Directory" } },
          ],
        },
      },
    },
  };
  return { serviceAccount, roleBinding, config, fileParts, deployment, fileSha256 };
}

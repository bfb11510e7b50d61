/**
 * Where the pinned upstream manifests live at program time, and how a component loads them.
 *
 * The manifests are not vendored into the repository: `npm run toolchain -- manifests`
 * (`scripts/toolchain-manifests.ts`) fetches the pinned Go module zips through the Go module proxy, checks
 * their go.sum `h1:` hashes against `common/pins.ts`, renders them exactly as the upstream release does, and
 * writes the result into the tool cache (`<cache>/<set>-<version>/`, see `common/paths.ts`) together with
 * a stamp that records the pin and the SHA-256 of every file. Components read them from there; a missing,
 * unfinished or stale directory is a {@link ManifestsMissingError} that names the command to run.
 *
 * - Kueue: `kustomize build config/default` after `kustomize edit set image controller=<repository>:<tag>`
 *   in `config/components/manager` — the Makefile's `artifacts` and `prepare-manifests` targets
 *   (https://github.com/kubernetes-sigs/kueue/blob/v0.17.0/Makefile), i.e. the release's `manifests.yaml`.
 * - Agent Sandbox: the release's core `sandbox.yaml` ("core controller + base CRDs + webhook Service",
 *   https://github.com/kubernetes-sigs/agent-sandbox/blob/v0.5.5/docs/api-migration-guide.md): the zip's
 *   `k8s/controller.yaml`, `k8s/rbac.generated.yaml` and `k8s/crds/agents.x-k8s.io_sandboxes.yaml`, with the
 *   `ko://` image placeholder replaced by the published controller image.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { cacheRoot, toolDir } from "../../../common/paths.js";
import { canonicalJson, readStamp } from "../../../common/stamp.js";
import { local } from "../../../common/pins.js";
import { CohortLabError } from "../../errors.js";

/** A Kubernetes object as parsed from a manifest (apiVersion, kind and metadata.name are checked on load). */
export interface KubernetesObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
    readonly [field: string]: unknown;
  };
  readonly [field: string]: unknown;
}

/** One rendered manifest set in the tool cache. */
export interface ManifestSet {
  /** Tool name in the cache, e.g. `kueue-manifests`. */
  readonly name: string;
  /** Upstream version, e.g. `v0.17.0`. */
  readonly version: string;
  /** File name inside the set's directory. */
  readonly file: string;
  /** The pin the set is rendered from (stored in the stamp; a different pin makes the directory stale). */
  readonly pin: unknown;
}

/** The `kustomize` CLI that renders Kueue's overlay (identity shared with the tool set). */
export const KUSTOMIZE_TOOL = { name: "kustomize", version: local.kustomize.version, binary: "bin/kustomize" } as const;

/** Kueue's release manifests (`manifests.yaml`), rendered from the pinned module zip. */
export const KUEUE_MANIFESTS: ManifestSet = {
  name: "kueue-manifests",
  version: local.kueue.version,
  file: "manifests.yaml",
  pin: {
    goModule: local.kueue.goModule,
    version: local.kueue.version,
    goSum: local.kueue.goSum,
    image: `${local.kueue.image.repository}:${local.kueue.image.tag}`,
    kustomize: local.kustomize,
    overlay: "config/default",
  },
};

/** The files of Agent Sandbox's core `sandbox.yaml`, in release order. */
export const AGENT_SANDBOX_CORE_FILES: readonly string[] = ["k8s/controller.yaml", "k8s/rbac.generated.yaml", "k8s/crds/agents.x-k8s.io_sandboxes.yaml"];

/** Agent Sandbox's core release manifest (`sandbox.yaml`), assembled from the pinned module zip. */
export const AGENT_SANDBOX_MANIFESTS: ManifestSet = {
  name: "agent-sandbox-manifests",
  version: local.agentSandbox.version,
  file: "sandbox.yaml",
  pin: {
    goModule: local.agentSandbox.goModule,
    version: local.agentSandbox.version,
    goSum: local.agentSandbox.goSum,
    commit: local.agentSandbox.commit,
    image: `${local.agentSandbox.image.repository}:${local.agentSandbox.image.tag}`,
    files: AGENT_SANDBOX_CORE_FILES,
  },
};

/** The image placeholder in Agent Sandbox's `k8s/controller.yaml` that its release tooling replaces. */
export const AGENT_SANDBOX_IMAGE_PLACEHOLDER = "ko://sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller";

/** The manifests of a set are not in the tool cache (or are stale or damaged). */
export class ManifestsMissingError extends CohortLabError {
  constructor(message: string) {
    super(message);
    this.name = "ManifestsMissingError";
  }
}

/** The command that fills the cache. */
export const MANIFESTS_FIX = "run `npm run toolchain -- manifests` (needs Go and the Go module proxy once; offline afterwards)";

/**
 * Absolute path of a set's file in the tool cache.
 *
 * @param env - environment (`COHORT_LAB_CACHE`, `XDG_CACHE_HOME`). @default process.env
 */
export function manifestPath(set: ManifestSet, env: NodeJS.ProcessEnv = process.env): string {
  return path.join(toolDir(cacheRoot(env), set.name, set.version), set.file);
}

/**
 * Parses a multi-document YAML manifest into objects, skipping empty documents.
 *
 * @throws {Error} naming the document index when a document is not a Kubernetes object
 */
export function parseManifests(text: string, source: string): KubernetesObject[] {
  const out: KubernetesObject[] = [];
  YAML.parseAllDocuments(text).forEach((doc, index) => {
    if (doc.errors.length > 0) throw new Error(`${source}: document ${index}: ${doc.errors[0]?.message}`);
    const value = doc.toJS({ maxAliasCount: 0 }) as unknown;
    if (value === null || value === undefined) return;
    const obj = value as Partial<KubernetesObject>;
    if (typeof obj.apiVersion !== "string" || typeof obj.kind !== "string" || typeof obj.metadata?.name !== "string") {
      throw new Error(`${source}: document ${index} is not a Kubernetes object (apiVersion, kind and metadata.name are required)`);
    }
    out.push(obj as KubernetesObject);
  });
  return out;
}

/**
 * Loads a set from the tool cache after checking its stamp: same pin as `common/pins.ts`, and the file's
 * SHA-256 equal to the one recorded when it was rendered.
 *
 * @throws {ManifestsMissingError} naming the path, what is wrong and {@link MANIFESTS_FIX}
 */
export function loadManifests(set: ManifestSet, env: NodeJS.ProcessEnv = process.env): KubernetesObject[] {
  const dir = toolDir(cacheRoot(env), set.name, set.version);
  const file = path.join(dir, set.file);
  const stamp = readStamp(dir);
  if (stamp === undefined) throw new ManifestsMissingError(`${set.name} ${set.version} is not in the tool cache (${dir}); ${MANIFESTS_FIX}`);
  if (canonicalJson(stamp.pin) !== canonicalJson(set.pin)) {
    throw new ManifestsMissingError(`${set.name} ${set.version} in ${dir} was rendered from another pin than common/pins.ts; ${MANIFESTS_FIX}`);
  }
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch {
    throw new ManifestsMissingError(`${file} is missing; ${MANIFESTS_FIX}`);
  }
  const recorded = stamp.binaries.manifests?.sha256;
  const actual = createHash("sha256").update(bytes).digest("hex");
  if (recorded !== actual) {
    throw new ManifestsMissingError(`${file} changed after it was rendered (sha256 ${actual}, stamp ${String(recorded)}); ${MANIFESTS_FIX}`);
  }
  return parseManifests(bytes.toString("utf8"), file);
}

/**
 * Backend registry: one entry per backend, loaded lazily so a bundle carries every backend but a run
 * loads only the one it uses (kwok's runtime registry, kubernetes-sigs/kwok `pkg/kwokctl/runtime/registry.go`, is the
 * model; docs/architecture.md "How to add a backend").
 *
 * To add a backend: implement `Backend` (runtime/core/backend.ts) in `runtime/backends/<name>/index.ts`
 * with a factory `(context: BackendContext) => Backend | Promise<Backend>`, and add one line to
 * {@link BACKENDS}.
 */
import type { Backend, MemberEventSink } from "../core/backend";
import { BackendUnavailableError } from "../core/errors";
import type { CompiledRunSpec } from "../core/spec";

/** What every backend factory gets. */
export interface BackendContext {
  /** The run id (`<name>-<yyyymmddThhmmssZ>-<6 hex>`). */
  readonly runId: string;
  /** Absolute run directory `<artifacts>/<runId>`. */
  readonly runDir: string;
  /** The compiled RunSpec of the run. */
  readonly spec: CompiledRunSpec;
  /** Sink for member events (exits, readiness); the scheduler's `events`. */
  readonly events: MemberEventSink;
  /**
   * Backend-specific settings: `cohort run --backend-config FILE` (a YAML/JSON mapping) overlaid with
   * `--backend-option KEY=VALUE` (repeatable; VALUE is parsed as JSON when it is valid JSON, else kept as
   * a string). @default {}
   */
  readonly options: Readonly<Record<string, unknown>>;
  /**
   * Optional sink for a backend's own ledger records (e.g. the process backend's `member-killed` and
   * `backend-warning`); appended to the run's ledger in call order. Never throws.
   */
  readonly record?: (kind: string, fields: Record<string, unknown> & { member?: string }) => void;
}

/** Creates a backend for one run. */
export type BackendFactory = (context: BackendContext) => Backend | Promise<Backend>;

/** Backend name -> lazy loader of its factory. */
const BACKENDS: Readonly<Record<string, () => Promise<BackendFactory>>> = {
  process: async () => (await import("./process/index.js")).createProcessBackend,
  kubernetes: async () => (await import("./kubernetes/index.js")).createKubernetesBackend,
};

/** Names of the registered backends, sorted. */
export function backendNames(): string[] {
  return Object.keys(BACKENDS).sort();
}

/**
 * Loads and creates backend `name`. Does not call `available()`.
 *
 * @throws {BackendUnavailableError} for an unknown name, listing the known ones
 */
export async function createBackend(name: string, context: BackendContext): Promise<Backend> {
  const load = Object.hasOwn(BACKENDS, name) ? BACKENDS[name] : undefined;
  if (load === undefined) {
    throw new BackendUnavailableError(name, `unknown backend "${name}" (known: ${backendNames().join(", ")})`);
  }
  const factory = await load();
  return factory(context);
}

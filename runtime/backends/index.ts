/**
 * Backend registry: one entry per backend, loaded lazily so a bundle carries every backend but a run
 * loads only the one it uses (kwok's runtime registry, kubernetes-sigs/kwok `pkg/kwokctl/runtime/registry.go`, is the
 * model; docs/architecture.md "How to add a backend").
 *
 * To add a backend: implement `Backend` (runtime/core/backend.ts) in `runtime/backends/<name>/index.ts`
 * with a factory `(context: BackendContext) => Backend | Promise<Backend>` (`BackendFactory`,
 * runtime/core/backend.ts), and add one line to
 * {@link BACKENDS}.
 */
import type { Backend, BackendContext, BackendFactory } from "../core/backend";
import { BackendUnavailableError } from "../core/errors";

export type { BackendContext, BackendFactory } from "../core/backend";

/** Backend name -> lazy loader of its factory. */
const BACKENDS: Readonly<Record<string, () => Promise<BackendFactory>>> = {
  process: async () => (await import("./process/index.js")).createProcessBackend,
  kubernetes: async () => (await import("./kubernetes/index.js")).createKubernetesBackend,
  systemd: async () => (await import("./systemd/index.js")).createSystemdBackend,
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

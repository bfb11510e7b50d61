/**
 * Agent Sandbox's install objects (pure; no Pulumi, no I/O), from the release's core `sandbox.yaml`
 * (components/k8s/manifests/cache.ts). Changes to the release:
 * - the controller image: the pinned digest when known, the release tag otherwise (preview only; `pulumi up`
 *   refuses it); `imagePullPolicy: IfNotPresent` (a digest names immutable content, see kueue.ts);
 * - `controller: "external"` (the `sim` profile runs the controller as a local process with
 *   `--enable-webhook=false`): no Deployment and no Services (both select the controller's pods), and the
 *   CRD's `conversion` becomes `{ strategy: None }`, which the controller requires when its webhook is off
 *   (docs/sim.md "What runs"). Only `v1beta1` (the storage version) is used then.
 *
 * @see https://github.com/kubernetes-sigs/agent-sandbox/blob/v0.5.5/k8s/controller.yaml
 */
import type { KubernetesObject } from "./cache.js";
import { ManifestShapeError, type ControllerMode } from "./kueue.js";

/** Namespace, Deployment and container of the release. */
export const AGENT_SANDBOX_NAMESPACE = "agent-sandbox-system";
export const AGENT_SANDBOX_DEPLOYMENT = "agent-sandbox-controller";
export const AGENT_SANDBOX_CONTAINER = "agent-sandbox-controller";
/** The Sandbox CRD. */
export const SANDBOX_CRD = "sandboxes.agents.x-k8s.io";

/** Options of {@link renderAgentSandboxInstall}. */
export interface AgentSandboxInstallOptions {
  readonly controller: ControllerMode;
  /** Controller image reference (in-cluster). */
  readonly image: string;
}

type Mutable = { [key: string]: unknown };

/**
 * Renders the Agent Sandbox install objects in apply order (Namespace first, Deployment last).
 *
 * @throws {ManifestShapeError} when the Deployment, its container or the Sandbox CRD is missing
 */
export function renderAgentSandboxInstall(upstream: readonly KubernetesObject[], options: AgentSandboxInstallOptions): KubernetesObject[] {
  const external = options.controller === "external";
  if (!upstream.some((o) => o.kind === "Deployment" && o.metadata.name === AGENT_SANDBOX_DEPLOYMENT)) {
    throw new ManifestShapeError(`the Agent Sandbox manifests have no Deployment ${AGENT_SANDBOX_DEPLOYMENT}`);
  }
  if (!upstream.some((o) => o.kind === "CustomResourceDefinition" && o.metadata.name === SANDBOX_CRD)) {
    throw new ManifestShapeError(`the Agent Sandbox manifests have no CustomResourceDefinition ${SANDBOX_CRD}`);
  }
  const out: KubernetesObject[] = [];
  for (const original of upstream) {
    const obj = structuredClone(original) as unknown as Mutable & KubernetesObject;
    if (external && (obj.kind === "Deployment" || obj.kind === "Service")) continue;
    if (obj.kind === "Deployment" && obj.metadata.name === AGENT_SANDBOX_DEPLOYMENT) {
      const containers = ((obj.spec as Mutable).template as { spec: { containers: Mutable[] } }).spec.containers;
      const controller = containers.find((c) => c.name === AGENT_SANDBOX_CONTAINER);
      if (controller === undefined) throw new ManifestShapeError(`the Agent Sandbox Deployment has no container ${AGENT_SANDBOX_CONTAINER}`);
      controller.image = options.image;
      controller.imagePullPolicy = "IfNotPresent";
    }
    if (external && obj.kind === "CustomResourceDefinition") {
      (obj.spec as Mutable).conversion = { strategy: "None" };
    }
    out.push(obj);
  }
  const rank = (o: KubernetesObject) => (o.kind === "Namespace" ? 0 : o.kind === "CustomResourceDefinition" ? 1 : o.kind === "Deployment" ? 3 : 2);
  return out
    .map((o, i) => ({ o, i }))
    .sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i)
    .map(({ o }) => o);
}

/**
 * `AgentSandbox` (token `cohortlab:k8s:AgentSandbox`): the pinned Agent Sandbox release (core controller and the
 * `Sandbox` API, `agents.x-k8s.io/v1beta1`), applied server-side, one typed resource per release object.
 *
 * - `in-cluster`: the release's Deployment with the controller image pinned by digest; pulumi-kubernetes awaits
 *   its rollout. The members' Sandboxes are created by the runtime (v1beta1, the storage version, so no
 *   conversion call is needed); depend on {@link AgentSandbox.ready} before starting the runtime.
 * - `external` (the `sim` profile runs the controller as a local process with `--enable-webhook=false`): no
 *   Deployment or Services, and the CRD's conversion is `None` (components/k8s/manifests/agentSandbox.ts).
 *
 * Pinned release and commit: common/pins.ts `local.agentSandbox` (v0.5.5, commit from the Go proxy's Origin).
 *
 * @see https://github.com/kubernetes-sigs/agent-sandbox/tree/v0.5.5
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { objectKey } from "./k8sObject.js";
import { applyRelease } from "./release.js";
import { renderAgentSandboxInstall, SANDBOX_CRD } from "./manifests/agentSandbox.js";
import { AGENT_SANDBOX_MANIFESTS, loadManifests, type KubernetesObject } from "./manifests/cache.js";
import type { ControllerMode } from "./manifests/kueue.js";

/** Arguments of {@link AgentSandbox}. */
export interface AgentSandboxArgs {
  /** The cluster's provider; every Kubernetes child gets it explicitly. */
  readonly provider: k8s.Provider;
  readonly controller: ControllerMode;
  /** Controller image (`repository:tag@sha256:…`; a tag-only reference is for preview only). */
  readonly image: string;
  /** The release objects. @default loadManifests(AGENT_SANDBOX_MANIFESTS) (the tool cache) */
  readonly manifests?: readonly KubernetesObject[];
  /**
   * Resources every child waits for (e.g. Kueue's webhook gate: its pod webhook fails closed in this namespace).
   * Given to each child's `dependsOn`, because a component's own `dependsOn` does not reach its children's
   * registrations. @default []
   */
  readonly waitFor?: readonly pulumi.Resource[];
}

/**
 * Agent Sandbox on a cluster.
 *
 * Children: one resource per release object (`<name>:<namespace>/<object>` or `<name>:<object>`).
 *
 * @throws {ManifestsMissingError} when the release manifests are not in the tool cache
 */
export class AgentSandbox extends pulumi.ComponentResource {
  public readonly provider: k8s.Provider;
  public readonly install: readonly pulumi.CustomResource[];
  /** The `sandboxes.agents.x-k8s.io` CRD. */
  public readonly sandboxCrd: pulumi.CustomResource;
  public readonly deployment?: pulumi.CustomResource;
  /** Depend on these before creating Sandboxes (CRD; and the awaited Deployment in-cluster). */
  public readonly ready: readonly pulumi.Resource[];
  public readonly objects: readonly KubernetesObject[];

  constructor(name: string, args: AgentSandboxArgs, opts?: pulumi.ComponentResourceOptions) {
    const upstream = args.manifests ?? loadManifests(AGENT_SANDBOX_MANIFESTS);
    const rendered = renderAgentSandboxInstall(upstream, { controller: args.controller, image: args.image });
    super("cohortlab:k8s:AgentSandbox", name, {}, opts);
    this.provider = args.provider;
    const applied = applyRelease(name, rendered, { parent: this, provider: args.provider, waitFor: args.waitFor ?? [] });
    const deployment = applied.find((a) => a.object.kind === "Deployment")?.resource;
    this.install = applied.map((a) => a.resource);
    this.sandboxCrd = applied.find((a) => a.object.kind === "CustomResourceDefinition" && a.object.metadata.name === SANDBOX_CRD)!.resource;
    if (deployment !== undefined) this.deployment = deployment;
    this.ready = deployment !== undefined ? [this.sandboxCrd, deployment] : [this.sandboxCrd];
    this.objects = rendered;
    this.registerOutputs({
      provider: this.provider,
      install: this.install,
      sandboxCrd: this.sandboxCrd,
      deployment: this.deployment,
      ready: this.ready,
      objects: rendered.map(objectKey),
    });
  }
}

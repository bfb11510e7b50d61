/**
 * How a release's objects are applied (Kueue, Agent Sandbox): one typed resource per object (components/k8s/k8sObject.ts),
 * in the release's order, with the order the API server needs made explicit:
 *
 * - the Namespace first;
 * - every other object after the Namespace;
 * - a Deployment after every object before it (its ServiceAccount, RBAC, ConfigMaps, Services, CRDs, webhooks):
 *   pulumi-kubernetes awaits its rollout, so what waits for the Deployment waits for a serving controller;
 * - an APIService after the Deployment before it (its backend), or after nothing but `waitFor` when there is none.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { createObject } from "./k8sObject.js";
import type { KubernetesObject } from "./manifests/cache.js";

/** One applied object: the rendered object and its resource. */
export interface AppliedObject {
  readonly object: KubernetesObject;
  readonly resource: pulumi.CustomResource;
}

/**
 * Creates one resource per object of a release, in order (see the module comment).
 *
 * @param prefix - the resource name prefix (the component's name): `<prefix>:<namespace>/<object>` or `<prefix>:<object>`
 * @param o.waitFor - resources every object waits for (a component's own `dependsOn` does not reach its children). @default []
 * @returns the objects with their resources, in apply order
 */
export function applyRelease(
  prefix: string,
  objects: readonly KubernetesObject[],
  o: { readonly parent: pulumi.Resource; readonly provider: k8s.Provider; readonly waitFor?: readonly pulumi.Resource[] },
): AppliedObject[] {
  const applied: AppliedObject[] = [];
  let namespace: pulumi.CustomResource | undefined;
  let deployment: pulumi.CustomResource | undefined;
  for (const object of objects) {
    let own: pulumi.Resource[] = [];
    if (object.kind === "Deployment") own = applied.map((a) => a.resource);
    else if (object.kind === "APIService") own = deployment !== undefined ? [deployment] : [];
    else if (object.kind !== "Namespace" && namespace !== undefined) own = [namespace];
    const resource = createObject(prefix, object, { parent: o.parent, provider: o.provider, dependsOn: [...(o.waitFor ?? []), ...own] });
    if (object.kind === "Namespace") namespace = resource;
    if (object.kind === "Deployment") deployment = resource;
    applied.push({ object, resource });
  }
  return applied;
}

/**
 * Turns a rendered Kubernetes object (components/k8s/manifests/**) into the matching typed `@pulumi/kubernetes`
 * resource, so every object of a release is one resource in the graph with its own explicit provider and
 * dependencies (unlike `yaml/v2.ConfigGroup`, whose children are built by the provider and are invisible to
 * mock tests and to `dependsOn` of single objects).
 *
 * Names follow `yaml/v2`'s convention: `<prefix>:<namespace>/<name>` for namespaced objects and
 * `<prefix>:<name>` for cluster-scoped ones. Kinds without a typed class (custom resources) become
 * `apiextensions.CustomResource`.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { KubernetesObject } from "./manifests/cache.js";

type Ctor = new (name: string, args: never, opts?: pulumi.CustomResourceOptions) => pulumi.CustomResource;

/** Typed classes by `apiVersion/kind`. */
const TYPED: Readonly<Record<string, Ctor>> = {
  "v1/Namespace": k8s.core.v1.Namespace as unknown as Ctor,
  "v1/ServiceAccount": k8s.core.v1.ServiceAccount as unknown as Ctor,
  "v1/ConfigMap": k8s.core.v1.ConfigMap as unknown as Ctor,
  "v1/Secret": k8s.core.v1.Secret as unknown as Ctor,
  "v1/Service": k8s.core.v1.Service as unknown as Ctor,
  "apps/v1/Deployment": k8s.apps.v1.Deployment as unknown as Ctor,
  "batch/v1/Job": k8s.batch.v1.Job as unknown as Ctor,
  "rbac.authorization.k8s.io/v1/Role": k8s.rbac.v1.Role as unknown as Ctor,
  "rbac.authorization.k8s.io/v1/RoleBinding": k8s.rbac.v1.RoleBinding as unknown as Ctor,
  "rbac.authorization.k8s.io/v1/ClusterRole": k8s.rbac.v1.ClusterRole as unknown as Ctor,
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding as unknown as Ctor,
  "apiextensions.k8s.io/v1/CustomResourceDefinition": k8s.apiextensions.v1.CustomResourceDefinition as unknown as Ctor,
  "apiregistration.k8s.io/v1/APIService": k8s.apiregistration.v1.APIService as unknown as Ctor,
  "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration": k8s.admissionregistration.v1.MutatingWebhookConfiguration as unknown as Ctor,
  "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration": k8s.admissionregistration.v1.ValidatingWebhookConfiguration as unknown as Ctor,
};

/** The Pulumi resource name of an object: `<prefix>:<namespace>/<name>` or `<prefix>:<name>`. */
export function objectResourceName(prefix: string, obj: KubernetesObject): string {
  return obj.metadata.namespace !== undefined ? `${prefix}:${obj.metadata.namespace}/${obj.metadata.name}` : `${prefix}:${obj.metadata.name}`;
}

/** `<kind>/<namespace>/<name>` (or `<kind>/<name>`), for messages and lookups. */
export function objectKey(obj: KubernetesObject): string {
  return obj.metadata.namespace !== undefined ? `${obj.kind}/${obj.metadata.namespace}/${obj.metadata.name}` : `${obj.kind}/${obj.metadata.name}`;
}

/**
 * Creates the typed resource of `obj` (or a `CustomResource` for other kinds).
 *
 * @param opts - must carry the explicit `provider` (callers never rely on a default provider)
 * @throws {Error} when `opts.provider` is missing
 */
export function createObject(prefix: string, obj: KubernetesObject, opts: pulumi.CustomResourceOptions): pulumi.CustomResource {
  if (opts.provider === undefined) throw new Error(`${objectKey(obj)}: a Kubernetes object needs an explicit provider`);
  const ctor = TYPED[`${obj.apiVersion}/${obj.kind}`];
  const name = objectResourceName(prefix, obj);
  if (ctor !== undefined) return new ctor(name, obj as never, opts);
  return new k8s.apiextensions.CustomResource(name, obj as unknown as k8s.apiextensions.CustomResourceArgs, opts);
}

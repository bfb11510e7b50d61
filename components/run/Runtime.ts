/**
 * `Runtime` (token `cohortlab:runtime:Runtime`): the cohort runtime deployed into a cluster for one run — the
 * run Namespace, its Kueue LocalQueue, the runtime's ServiceAccount with a Role scoped to that namespace (the
 * Kubernetes backend's own rule table; no cluster-wide rights, no delete outside the run), a ConfigMap with the
 * RunSpec and ConfigMaps with the parts of the compressed runtime bundle (components/run/manifests.ts). The
 * Job that runs it is created by the Kubernetes-Job executor of `CohortRun` (components/run/kubernetesJob.ts) from {@link Runtime.jobObject}.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { createObject } from "../k8s/k8sObject.js";
import type { KubernetesObject } from "../k8s/manifests/cache.js";
import { renderRunObjects, type RunObjectsInput } from "./manifests.js";

/** Arguments of {@link Runtime}. */
export interface RuntimeArgs extends RunObjectsInput {
  readonly provider: k8s.Provider;
  /** Resources the LocalQueue must wait for: its CRD and Kueue's webhook gate (Kueue.crds, Kueue.webhookReady). */
  readonly localQueueDependsOn: readonly pulumi.Resource[];
}

/**
 * Children: `<name>:<ns>` (Namespace), `<name>:<ns>/<object>` (LocalQueue, ServiceAccount, Role, RoleBinding, ConfigMaps).
 *
 * @throws {RuntimeBundleTooLargeError} when the compressed bundle needs more than 8 ConfigMaps or the spec more than one
 */
export class Runtime extends pulumi.ComponentResource {
  public readonly provider: k8s.Provider;
  /** The run namespace and LocalQueue names. */
  public readonly namespaceName: string;
  public readonly localQueueName: string;
  /** Every per-run resource created here (the Job depends on all of them). */
  public readonly resources: readonly pulumi.CustomResource[];
  /** The Job to run (created by the executor). */
  public readonly jobObject: KubernetesObject;
  /** SHA-256 of the bundle in the ConfigMaps. */
  public readonly bundleSha256: string;

  constructor(name: string, args: RuntimeArgs, opts?: pulumi.ComponentResourceOptions) {
    const objects = renderRunObjects(args);
    super("cohortlab:runtime:Runtime", name, {}, opts);
    this.provider = args.provider;
    const base = { parent: this, provider: args.provider };
    const namespace = createObject(name, objects.namespace, base);
    const inNamespace = { ...base, dependsOn: [namespace] };
    const localQueue = createObject(name, objects.localQueue, { ...base, dependsOn: [namespace, ...args.localQueueDependsOn] });
    const serviceAccount = createObject(name, objects.serviceAccount, inNamespace);
    const role = createObject(name, objects.role, inNamespace);
    const roleBinding = createObject(name, objects.roleBinding, { ...base, dependsOn: [namespace, role, serviceAccount] });
    const configMap = createObject(name, objects.configMap, inNamespace);
    const parts = objects.bundleParts.map((part) => createObject(name, part, inNamespace));
    this.resources = [namespace, localQueue, serviceAccount, role, roleBinding, configMap, ...parts];
    this.namespaceName = args.namespace;
    this.localQueueName = args.localQueue;
    this.jobObject = objects.job;
    this.bundleSha256 = objects.bundleSha256;
    this.registerOutputs({ namespace: this.namespaceName, localQueue: this.localQueueName, bundleSha256: this.bundleSha256 });
  }
}

/**
 * `RunNamespace` (token `cohortlab:runtime:Runtime`, the token of its former name `Runtime`: kept so the URNs of
 * existing stacks do not change): one run's namespace and its objects, for every cluster profile — the run
 * Namespace, its Kueue LocalQueue, the runtime's ServiceAccount with a Role scoped to that namespace (the
 * Kubernetes backend's own rule table; no cluster-wide rights, no delete outside the run) and its RoleBinding
 * (components/run/manifests.ts `renderRunObjects`, the renderer simctl/cohort.ts applies without Pulumi).
 *
 * With `inClusterRuntime` (`local`: the runtime runs as a Job) also a ConfigMap with the RunSpec and ConfigMaps
 * with the parts of the compressed runtime bundle; the Job that runs it is created by the Kubernetes-Job
 * executor of `CohortRun` (components/run/kubernetesJob.ts) from {@link RunNamespace.jobObject}. Without it
 * (`sim`: the runtime runs out of cluster with the ServiceAccount's credentials) there is no ConfigMap and no Job.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { createObject } from "../k8s/k8sObject.js";
import type { KubernetesObject } from "../k8s/manifests/cache.js";
import { renderRunObjects, type RunObjectsInput } from "./manifests.js";

/** Arguments of {@link RunNamespace}. */
export interface RunNamespaceArgs extends RunObjectsInput {
  readonly provider: k8s.Provider;
  /** Resources the LocalQueue must wait for: its CRD and Kueue's webhook gate (Kueue.localQueueReady). */
  readonly localQueueDependsOn: readonly pulumi.Resource[];
  /** Resources the Namespace, and so every object of the run, waits for. @default none */
  readonly waitFor?: readonly pulumi.Resource[];
  /**
   * Aliases given to every child, for objects that existed before under another parent: `sim` created them
   * at the stack root before this component (`[{ parent: pulumi.rootStackResource }]`), so its stacks keep
   * them without a replacement. @default none
   */
  readonly childAliases?: readonly pulumi.Input<pulumi.Alias>[];
}

/**
 * Children: `<name>:<ns>` (Namespace), `<name>:<ns>/<object>` (LocalQueue, ServiceAccount, Role, RoleBinding and,
 * with `inClusterRuntime`, the ConfigMaps).
 *
 * @throws {RuntimeBundleTooLargeError} when the compressed bundle needs more than 8 ConfigMaps or the spec more than one
 */
export class RunNamespace extends pulumi.ComponentResource {
  public readonly provider: k8s.Provider;
  /** The run namespace and LocalQueue names. */
  public readonly namespaceName: string;
  public readonly localQueueName: string;
  /** Every per-run resource created here (the Job, or the run's credentials, depend on all of them). */
  public readonly resources: readonly pulumi.CustomResource[];
  /** The Job to run (created by the executor); only with `inClusterRuntime`. */
  public readonly jobObject?: KubernetesObject;
  /** SHA-256 of the bundle in the ConfigMaps; only with `inClusterRuntime`. */
  public readonly bundleSha256?: string;

  constructor(name: string, args: RunNamespaceArgs, opts?: pulumi.ComponentResourceOptions) {
    const objects = renderRunObjects(args);
    super("cohortlab:runtime:Runtime", name, {}, opts);
    this.provider = args.provider;
    const base: pulumi.CustomResourceOptions = {
      parent: this,
      provider: args.provider,
      ...(args.childAliases !== undefined ? { aliases: [...args.childAliases] } : {}),
    };
    const namespace = createObject(name, objects.namespace, { ...base, ...(args.waitFor !== undefined ? { dependsOn: [...args.waitFor] } : {}) });
    const inNamespace = { ...base, dependsOn: [namespace] };
    const localQueue = createObject(name, objects.localQueue, { ...base, dependsOn: [namespace, ...args.localQueueDependsOn] });
    const serviceAccount = createObject(name, objects.serviceAccount, inNamespace);
    const role = createObject(name, objects.role, inNamespace);
    const roleBinding = createObject(name, objects.roleBinding, { ...base, dependsOn: [namespace, role, serviceAccount] });
    const resources = [namespace, localQueue, serviceAccount, role, roleBinding];
    const runtime = objects.inClusterRuntime;
    if (runtime !== undefined) {
      const configMap = createObject(name, runtime.configMap, inNamespace);
      const parts = runtime.bundleParts.map((part) => createObject(name, part, inNamespace));
      resources.push(configMap, ...parts);
      this.jobObject = runtime.job;
      this.bundleSha256 = runtime.bundleSha256;
    }
    this.resources = resources;
    this.namespaceName = args.namespace;
    this.localQueueName = args.localQueue;
    this.registerOutputs({
      namespace: this.namespaceName,
      localQueue: this.localQueueName,
      ...(this.bundleSha256 !== undefined ? { bundleSha256: this.bundleSha256 } : {}),
    });
  }
}

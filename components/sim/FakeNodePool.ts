/**
 * `FakeNodePool` (token `cohortlab:sim:FakeNodePool`): a pool of simulated nodes on a `SimCluster`, shaped like a
 * real node pool (default: GKE `e2-standard-16` agent nodes: 15890m CPU, 57Gi memory, 110 pods, the agent
 * pool's label and taint). Each node is a `kubernetes:core/v1:Node` with the kwok annotation; kwok's
 * node-initialize stage makes it Ready with the allocatable carried in its annotation (a Node's status cannot be
 * set through the provider). A gate Command waits until every node is Ready with that allocatable.
 *
 * The pool's {@link FakeNodePool.capacities} are what the quota arithmetic (components/k8s/quota.ts) sees: the
 * same allocatable, labels and taints the nodes are registered with, known before any resource exists.
 */
import * as command from "@pulumi/command";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { e2Standard16AgentNode, fakeNodeManifest, toNodeCapacity, type FakeNodeManifest, type FakeNodeShape } from "./fakeNode.js";
import type { SimctlStep } from "./SimCluster.js";

/** Arguments of {@link FakeNodePool}. Plain values, checked before any resource exists. */
export interface FakeNodePoolArgs {
  /** The sim's provider (every Node gets it explicitly). */
  readonly provider: k8s.Provider;
  /** Node name prefix (DNS-1123 label, at most 40 characters): nodes are `<pool>-0000`, `<pool>-0001`, ... */
  readonly pool: string;
  /** Number of nodes, 1 to 5000. */
  readonly count: number;
  /** Shape of every node. @default e2Standard16AgentNode */
  readonly shape?: FakeNodeShape;
  /** The sim the nodes join (a `SimCluster`): it runs the readiness gate (`simctl wait-nodes`). */
  readonly sim: { simctl(words: readonly string[], args?: readonly string[]): SimctlStep };
}

/**
 * A pool of fake nodes.
 *
 * Children: `<name>-<pool>-<NNNN>` (one Node each) and `<name>-ready` (the readiness gate Command).
 *
 * @throws {pulumi.InputPropertyError} when `pool` is not a DNS-1123 label of at most 40 characters or `count` is out of range
 */
export class FakeNodePool extends pulumi.ComponentResource {
  public readonly nodes: readonly k8s.core.v1.Node[];
  /** Resolves once every node is Ready: depend on it before anything that schedules pods. */
  public readonly ready: command.local.Command;
  /** The rendered Node manifests. */
  public readonly manifests: readonly FakeNodeManifest[];
  /** What the quota arithmetic sees (components/k8s/quota.ts `NodeCapacity`). */
  public readonly capacities: ReturnType<typeof toNodeCapacity>[];

  constructor(name: string, args: FakeNodePoolArgs, opts?: pulumi.ComponentResourceOptions) {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(args.pool) || args.pool.length > 40) {
      throw new pulumi.InputPropertyError({
        propertyPath: "pool",
        reason: `FakeNodePool ${name}: pool must be a DNS-1123 label of at most 40 characters (got ${JSON.stringify(args.pool)})`,
      });
    }
    if (!Number.isInteger(args.count) || args.count < 1 || args.count > 5000) {
      throw new pulumi.InputPropertyError({ propertyPath: "count", reason: `FakeNodePool ${name}: count must be an integer from 1 to 5000 (got ${args.count})` });
    }
    const shape = args.shape ?? e2Standard16AgentNode;
    const manifests = Array.from({ length: args.count }, (_, i) => fakeNodeManifest(args.pool, i, shape));
    super("cohortlab:sim:FakeNodePool", name, {}, opts);
    this.nodes = manifests.map(
      (m) =>
        new k8s.core.v1.Node(
          `${name}-${m.metadata.name}`,
          { metadata: { name: m.metadata.name, labels: m.metadata.labels, annotations: m.metadata.annotations }, spec: { taints: [...m.spec.taints] } },
          { parent: this, provider: args.provider },
        ),
    );
    const wait = args.sim.simctl(["wait-nodes"], ["--pool", args.pool, "--count", String(args.count)]);
    this.ready = new command.local.Command(
      `${name}-ready`,
      {
        create: wait.command,
        dir: wait.dir,
        triggers: [args.pool, args.count, JSON.stringify(shape)],
        logging: "stderr",
        addPreviousOutputInEnv: false,
      },
      { parent: this, dependsOn: [...this.nodes] },
    );
    this.manifests = manifests;
    this.capacities = manifests.map(toNodeCapacity);
    this.registerOutputs({ nodes: this.nodes, ready: this.ready, manifests: manifests.map((m) => m.metadata.name), capacities: this.capacities });
  }
}

/**
 * Registers simulated nodes directly through the API (the `simctl start --nodes N` path and the test harness;
 * the Pulumi stack uses the `FakeNodePool` component with the same manifests) and waits until kwok has made
 * them Ready with the wanted allocatable.
 */
import * as fs from "node:fs";
import { allocatableAnnotation, e2Standard16AgentNode, fakeNodeManifest, type FakeNodeShape } from "../components/sim/fakeNode";
import { readTokens } from "./pki";
import { httpGet, waitUntil } from "./probe";
import { simLayout } from "./render";
import { readState } from "./state";

/** Options of {@link registerFakeNodes}. */
export interface RegisterNodesOptions {
  readonly stateDir: string;
  /** How many nodes. */
  readonly count: number;
  /** Name prefix. @default "agents" */
  readonly pool?: string;
  /** @default e2Standard16AgentNode */
  readonly shape?: FakeNodeShape;
  /** Deadline for all nodes Ready, milliseconds. @default 120000 */
  readonly timeoutMs?: number;
}

/**
 * Creates `count` fake nodes (an existing node of the same name is left as is) and waits until all are Ready.
 *
 * @returns the node names.
 * @throws Error naming the node and the API answer when a create fails, or when nodes are not Ready in time.
 */
export async function registerFakeNodes(o: RegisterNodesOptions): Promise<string[]> {
  const l = simLayout(o.stateDir);
  const state = readState(l.stateFile);
  if (state === undefined) throw new Error(`no sim in ${o.stateDir}`);
  const token = readTokens(l).admin;
  const ca = fs.readFileSync(l.apiserverCaFile, "utf8");
  const pool = o.pool ?? "agents";
  const shape = o.shape ?? e2Standard16AgentNode;
  const manifests = Array.from({ length: o.count }, (_, i) => fakeNodeManifest(pool, i, shape));
  const batch = 50;
  for (let i = 0; i < manifests.length; i += batch) {
    await Promise.all(
      manifests.slice(i, i + batch).map(async (m) => {
        const r = await httpGet(`${state.apiserverUrl}/api/v1/nodes`, { ca, token, method: "POST", body: JSON.stringify(m), timeoutMs: 30_000 });
        if (r.status !== 201 && r.status !== 409) throw new Error(`creating node ${m.metadata.name}: HTTP ${r.status}: ${r.body.slice(0, 300)}`);
      }),
    );
  }
  const names = manifests.map((m) => m.metadata.name);
  await waitNodesReady({ stateDir: o.stateDir, names, ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}) });
  return names;
}

/** Options of {@link waitNodesReady}. */
export interface WaitNodesOptions {
  readonly stateDir: string;
  /** Node names that must all be Ready. */
  readonly names: readonly string[];
  /** @default 120000 */
  readonly timeoutMs?: number;
}

interface NodeView {
  metadata: { name: string; annotations?: Record<string, string> };
  spec?: { taints?: Array<{ key: string }> };
  status?: { conditions?: Array<{ type: string; status: string }>; allocatable?: Record<string, string> };
}

/**
 * True when the node can take pods: Ready, without the node lifecycle controller's `node.kubernetes.io/*` taints
 * (not-ready, unreachable: it removes them once it has seen the node Ready), and with the wanted allocatable
 * (annotation) in its status (kwok's node-initialize stage ran).
 */
function initialised(n: NodeView): boolean {
  if (!n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) return false;
  if (n.spec?.taints?.some((t) => t.key.startsWith("node.kubernetes.io/"))) return false;
  const wanted = n.metadata.annotations?.[allocatableAnnotation];
  if (wanted === undefined) return true;
  const want = JSON.parse(wanted) as Record<string, string>;
  return Object.entries(want).every(([k, v]) => n.status?.allocatable?.[k] === v);
}

/**
 * Waits until every named node is Ready with the wanted allocatable (kwok's node-initialize stage ran).
 *
 * @throws ComponentNotReadyError with the count reached when the deadline passes
 */
export async function waitNodesReady(o: WaitNodesOptions): Promise<void> {
  const l = simLayout(o.stateDir);
  const state = readState(l.stateFile);
  if (state === undefined) throw new Error(`no sim in ${o.stateDir}`);
  const token = readTokens(l).admin;
  const ca = fs.readFileSync(l.apiserverCaFile, "utf8");
  const wanted = new Set(o.names);
  await waitUntil(
    async () => {
      const r = await httpGet(`${state.apiserverUrl}/api/v1/nodes`, { ca, token, timeoutMs: 30_000 });
      if (r.status !== 200) return `listing nodes: HTTP ${r.status}`;
      const items = (JSON.parse(r.body) as { items: NodeView[] }).items;
      const ready = items.filter((n) => wanted.has(n.metadata.name) && initialised(n));
      return ready.length === wanted.size ? true : `${ready.length}/${wanted.size} nodes Ready`;
    },
    { component: "fake nodes", timeoutMs: o.timeoutMs ?? 120_000, intervalMs: 250 },
  );
}

/**
 * The sim test harness: a real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
 * as local processes in a fresh temp state dir, with fake nodes, optionally the Kueue manager and the Agent
 * Sandbox controller (their CRDs and wiring applied exactly as the `Kueue`/`AgentSandbox` components render them
 * in `controller: "external"` mode) and a ResourceFlavor + ClusterQueue whose quota is derived from the fake
 * nodes by components/k8s/quota.ts (as on `local`).
 *
 * Use from any test tier that needs a real API server:
 *
 *   const sim = await startSim({ nodes: 4, podReadyDelayMs: 0, jitterMs: 0 });
 *   try { ... sim.kubeconfigPath ... } finally { await sim.stop(); }
 *
 * `simUnavailableReason()` tells a test to skip (binaries not built) instead of failing. Every process the
 * harness starts is stopped by `stop()`, and also (SIGKILL) if the test process exits without calling it.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as k8s from "@kubernetes/client-node";
import { e2Standard16AgentNode, fakeNodeManifest, type FakeNodeShape } from "../../components/sim/fakeNode.js";
import { controlPlaneBinaries, findSimBinaries, type SimBinaries } from "../../simctl/binaries.js";
import { startController, startSim as startControlPlane, stopSim } from "../../simctl/cluster.js";
import { registerFakeNodes } from "../../simctl/nodes.js";
import type { SimState } from "../../simctl/state.js";
import { createQueue, installControllerObjects, type SimQueue } from "../../simctl/install.js";

/** Options of {@link startSim}. */
export interface SimHarnessOptions {
  /** Fake nodes to register (GKE e2-standard-16 agent nodes by default). @default 0 */
  readonly nodes?: number;
  /** Shape of every fake node. @default e2Standard16AgentNode */
  readonly nodeShape?: FakeNodeShape;
  /** Simulated pod start-up: minimum delay (ms). @default 0 */
  readonly podReadyDelayMs?: number;
  /** Simulated pod start-up: uniform random extra (ms). @default 0 */
  readonly jitterMs?: number;
  /**
   * Also install and start Kueue and the Agent Sandbox controller, and create the ResourceFlavor and ClusterQueue
   * (quota derived from the fake nodes). Needs the pinned manifests (`npm run toolchain -- manifests`).
   * @default false
   */
  readonly controllers?: boolean;
  /** Lower the derived ClusterQueue quota (quantities), e.g. to test refusals. @default derived */
  readonly quotaOverride?: { readonly cpu?: string; readonly memory?: string };
  /** Kueue's `waitForPodsReady.timeout` (Go duration), e.g. "20s" to test eviction. @default "5m" */
  readonly waitForPodsReadyTimeout?: string;
  /** `GOGC` of the sim's processes (components/sim/goRuntime.ts). @default SIM_GO_GC_DEFAULT */
  readonly goGC?: number;
  /** Progress lines. @default none */
  readonly log?: (line: string) => void;
}

/** A running sim. */
export interface SimHarness {
  /** Admin kubeconfig (token auth; `system:masters`). */
  readonly kubeconfigPath: string;
  readonly stateDir: string;
  readonly apiserverUrl: string;
  /** `127.0.0.1:<port>` of the Temporal dev server simctl started with the control plane. */
  readonly temporalAddress: string;
  readonly state: SimState;
  /** Node names registered. */
  readonly nodes: readonly string[];
  /** With `controllers`: the queue objects created. */
  readonly queue?: SimQueue;
  /** A client-node KubeConfig loaded from `kubeconfigPath`. */
  kubeConfig(): k8s.KubeConfig;
  /** Stops every process and removes the state dir. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Why the sim cannot run here (binaries not built), or `undefined` when it can.
 *
 * @param needed - the executables the test needs. @default all (controllers included)
 */
export function simUnavailableReason(needed?: Parameters<typeof findSimBinaries>[1]): string | undefined {
  try {
    findSimBinaries(process.env, needed);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

const live = new Set<SimState>();
process.on("exit", () => {
  // Last resort when a test process ends without stop(): kill every process group synchronously.
  for (const state of live) {
    for (const p of state.processes) {
      try {
        process.kill(-p.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    fs.rmSync(state.stateDir, { recursive: true, force: true });
  }
});

/**
 * Starts a sim in a new temp dir.
 *
 * @throws SimBinariesMissingError when the binaries are not built (check {@link simUnavailableReason} first)
 * @throws SimStartError when a component fails (nothing is left running)
 */
export async function startSim(o: SimHarnessOptions = {}): Promise<SimHarness> {
  const binaries: SimBinaries = findSimBinaries(process.env, o.controllers === true ? undefined : controlPlaneBinaries);
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-lab-sim-"));
  const log = o.log ?? (() => {});
  const state = await startControlPlane({
    stateDir,
    binaries,
    podReadyDelayMs: o.podReadyDelayMs ?? 0,
    podReadyJitterMs: o.jitterMs ?? 0,
    ...(o.goGC !== undefined ? { goGC: o.goGC } : {}),
    log,
  });
  live.add(state);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await stopSim(stateDir);
    live.delete(state);
  };
  try {
    const shape = o.nodeShape ?? e2Standard16AgentNode;
    const nodes = (o.nodes ?? 0) > 0 ? await registerFakeNodes({ stateDir, count: o.nodes ?? 0, shape }) : [];
    let queue: SimQueue | undefined;
    if (o.controllers === true) {
      const configurationFile = path.join(stateDir, "config", "kueue-base.yaml");
      await installControllerObjects({
        kubeconfigPath: state.kubeconfig,
        kueueWebhookPort: state.ports.kueueWebhook,
        configurationFile,
        log,
        ...(o.waitForPodsReadyTimeout !== undefined ? { waitForPodsReadyTimeout: o.waitForPodsReadyTimeout } : {}),
      });
      await startController("kueue", { stateDir, binaries, log, configurationFile });
      await startController("agent-sandbox", { stateDir, binaries, log });
      queue = await createQueue(
        state.kubeconfig,
        nodes.map((_, i) => fakeNodeManifest("agents", i, shape)),
        o.quotaOverride,
      );
    }
    const current = { ...state };
    return {
      kubeconfigPath: state.kubeconfig,
      stateDir,
      apiserverUrl: state.apiserverUrl,
      temporalAddress: `127.0.0.1:${state.ports.temporal}`,
      state: current,
      nodes,
      ...(queue !== undefined ? { queue } : {}),
      kubeConfig() {
        const kc = new k8s.KubeConfig();
        kc.loadFromFile(state.kubeconfig);
        return kc;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

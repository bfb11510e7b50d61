/**
 * The sim profile's run path without Pulumi (simctl/cohort.ts: the same per-run objects, ServiceAccount
 * credentials and shipped runtime bundle as `pulumi up --stack sim`) on one sim with 2 fake e2-standard-16 nodes,
 * Kueue and Agent Sandbox, and the queue derived from the nodes:
 * - a cohort admitted as ONE gang Workload and Ready, with at most 2 writes per member and no per-member GET;
 * - a member whose pod fails (kwok failure stage via SIM_FAIL) fails the run, naming it;
 * - a cohort that fits the quota but not the nodes (3 members of 10 CPU on two 15.89-CPU nodes) is reported as
 *   admitted-but-unschedulable, naming the member, instead of hanging.
 *
 * Skipped, with the reason, when the sim binaries or the bundle are missing.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCohortOnSim } from "../../simctl/cohort";
import { PROJECT_DIR } from "../../stacks/config";
import { simUnavailableReason, startSim, type SimHarness } from "./harness";

const BUNDLE = path.join(PROJECT_DIR, "dist", "cohort.cjs");
const unavailable = simUnavailableReason() ?? (fs.existsSync(BUNDLE) ? undefined : `${BUNDLE} is missing (npm run build)`);
if (unavailable !== undefined) console.log(`sim scenarios skipped: ${unavailable}`);
const IMAGE = `registry.invalid/member@sha256:${"cd".repeat(32)}`;
const artifactRoot = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-sim-scenarios-"));

function spec(name: string, roles: string): string {
  return `apiVersion: cohort-lab/v1
kind: Cohort
name: ${name}
startupTimeout: 3m
memberTimeout: 3m
admissionTimeout: 1m
hold: 1s
concurrency: 200
stopGracePeriod: 1s
roles:
${roles}`;
}

describe.skipIf(unavailable !== undefined)("sim scenarios (runtime out of cluster, ServiceAccount credentials)", () => {
  let sim: SimHarness;

  beforeAll(async () => {
    sim = await startSim({ nodes: 2, controllers: true, podReadyDelayMs: 200, jitterMs: 300 });
  }, 900_000);

  afterAll(async () => {
    await sim?.stop();
    fs.rmSync(artifactRoot, { recursive: true, force: true });
  }, 120_000);

  it("admits 100 members as one gang Workload and gets them Ready; <= 2 writes per member, no per-member GET", async () => {
    const r = await runCohortOnSim({
      stateDir: sim.stateDir,
      namespace: "scenario-100",
      bundlePath: BUNDLE,
      artifactRoot,
      specText: spec(
        "hundred",
        `  - name: router
    app: { image: "${IMAGE}", command: [router] }
    resources: { cpu: 250m, memory: 256Mi }
  - name: agent
    replicas: 99
    needs: [router]
    app: { image: "${IMAGE}", command: [agent] }
    resources: { cpu: 100m, memory: 128Mi }
`,
      ),
    });
    expect(r.summary, r.stderr.slice(-3000)).toMatchObject({ outcome: "succeeded", size: 100, readyCount: 100, firstFailure: null });
    const stats = (
      r.records.find((x) => x.kind === "backend-stats") as unknown as {
        stats: { podGroup: string; memberWritesPerMember: number; apiCalls: { calls: Record<string, number>; clientThrottleWaits: number } };
      }
    ).stats;
    expect(stats.memberWritesPerMember).toBeLessThanOrEqual(2);
    expect(Object.keys(stats.apiCalls.calls).filter((k) => k.startsWith("get pods") || k.startsWith("get sandboxes"))).toEqual([]);
    expect(stats.apiCalls.clientThrottleWaits).toBe(0);
    console.log(`[sim scenarios] 100 members: timeToReady ${r.summary?.timeToReadyMs} ms, runtime wall ${Math.round(r.wallMs)} ms, pod group ${stats.podGroup}`);
  });

  it("a member whose pod fails fails the run fast, naming it", async () => {
    const r = await runCohortOnSim({
      stateDir: sim.stateDir,
      namespace: "scenario-fail",
      bundlePath: BUNDLE,
      artifactRoot,
      specText: spec(
        "failing",
        `  - name: agent
    replicas: 10
    app: { image: "${IMAGE}", command: [agent] }
    resources: { cpu: 100m, memory: 64Mi }
  - name: doomed
    app: { image: "${IMAGE}", command: [doomed], env: { SIM_FAIL: "true" } }
    resources: { cpu: 100m, memory: 64Mi }
`,
      ),
    });
    expect(r.exitCode).toBe(1);
    expect(r.summary?.outcome).toBe("failed");
    expect(r.summary?.firstFailure?.member).toBe("doomed-0");
    expect(r.reason).toContain("doomed-0");
    console.log(`[sim scenarios] failing member: ${r.reason} (runtime wall ${Math.round(r.wallMs)} ms)`);
  });

  it("a cohort that fits the quota but not the nodes is reported admitted-but-unschedulable, naming the member", async () => {
    const r = await runCohortOnSim({
      stateDir: sim.stateDir,
      namespace: "scenario-unschedulable",
      bundlePath: BUNDLE,
      artifactRoot,
      specText: spec(
        "toobig",
        `  - name: heavy
    replicas: 3
    app: { image: "${IMAGE}", command: [heavy] }
    resources: { cpu: "10", memory: 1Gi }
`,
      ),
    });
    expect(r.exitCode).toBe(1);
    expect(r.summary?.outcome).toBe("failed");
    expect(r.summary?.firstFailure?.member).toMatch(/^heavy-[012]$/);
    expect(r.reason.toLowerCase()).toContain("unschedulable");
    console.log(`[sim scenarios] unschedulable: ${r.reason} (runtime wall ${Math.round(r.wallMs)} ms)`);
  });
});

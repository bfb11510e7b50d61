/**
 * Benchmark of the `local` profile (`npm run bench:local`): `pulumi up --stack local` for real on this machine's
 * Docker engine (a three-node kind cluster from the node image built here, Kueue, Agent Sandbox and Temporal from
 * the images built here), for the shipped 9-member roster and a 50-member roster, then `pulumi destroy`; and, in
 * the same run, the same rosters on the `sim` profile's control plane with kwok nodes (the runtime bundle out of
 * cluster, simctl/cohort.ts), so the difference between simulated and real nodes shows as a ratio.
 *
 * Printed:
 * - build times of the node image and the project images: the cold build each stamp recorded (`buildSeconds`),
 *   and a warm `npm run toolchain -- local local-images local-apps` timed now;
 * - `pulumi up` wall time, split by the times the state records for each resource (`pulumi stack export`,
 *   `modified`/`created`): cluster create (the kind Command), image load (the load-images Command), controllers
 *   ready (the last of Kueue's webhook probe, Agent Sandbox's and Temporal's Deployments) and the run (until the
 *   summary Command); the run further split by its ledger (completion.json `phasesMs`): admission, time to ready,
 *   hold, teardown;
 * - `pulumi destroy` wall time;
 * - memory of the cluster at rest (`docker stats --no-stream` of the node containers, after the run);
 * - on sim: admission -> all ready for the same roster; the ratio local / sim.
 *
 * Env: BENCH_SIZES (default "9,50"), BENCH_KEEP=1 keeps the temp project. Needs the local tool sets
 * (`npm run toolchain -- local local-images local-apps manifests`), the sim set for the comparison
 * (`npm run toolchain -- sim`), the bundle (`npm run build`) and a Docker engine (`bash scripts/docker-engine.sh start`).
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { loadExeca } from "../scripts/lib/process";
import { readStamp } from "../common/stamp";
import { cacheRoot } from "../common/paths";
import { localBuildMissing } from "../scripts/local/readiness";
import { runCohortOnSim } from "../simctl/cohort";
import { PROJECT_DIR } from "../stacks/config";
import { freePort, LocalProject } from "../test/local/harness";
import { simUnavailableReason, startSim } from "../test/sim/harness";

const SIZES = (process.env.BENCH_SIZES ?? "9,50").split(",").map((s) => Number(s.trim()));
const BUNDLE = path.join(PROJECT_DIR, "dist", "cohort.cjs");
const load = (): string =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");
const s = (ms: number | undefined): string => (ms === undefined ? "n/a" : `${(ms / 1000).toFixed(1)} s`);

/** A roster of `size` members: one router and `size - 1` agents that reach it before they listen (Pulumi.local.yaml's shape). */
function roster(size: number): Record<string, unknown> {
  const cpu = size > 20 ? "20m" : "100m";
  return {
    name: "bench",
    startupTimeout: "8m",
    memberTimeout: "5m",
    admissionTimeout: "5m",
    hold: "5s",
    concurrency: 64,
    stopGracePeriod: "5s",
    roles: [
      {
        name: "router",
        replicas: 1,
        app: { command: ["node", "-e", 'require("node:http").createServer((q, r) => r.end("router\\n")).listen(Number(process.env.COHORT_PORT))'] },
        readiness: { http: { path: "/" } },
        resources: { cpu, memory: "64Mi" },
      },
      {
        name: "agent",
        replicas: size - 1,
        needs: ["router"],
        app: {
          command: [
            "node",
            "-e",
            'const [h, p] = JSON.parse(process.env.COHORT_NEEDS).router[0].split(":"); require("node:http").get({ host: h, port: Number(p), path: "/" }, (r) => { r.resume(); require("node:net").createServer((c) => { c.on("error", () => {}); c.end("agent\\n"); }).listen(Number(process.env.COHORT_PORT)); }).on("error", (e) => { console.error(e.message); process.exit(1); });',
          ],
        },
        readiness: { tcp: {} },
        resources: { cpu, memory: "64Mi" },
      },
    ],
  };
}

/**
 * When each resource of the stack was last created or updated, in ms since the epoch, by resource name (the last URN
 * segment), from `pulumi stack export` (the state's `created`/`modified` RFC 3339 times).
 */
async function resourceTimes(project: LocalProject): Promise<Map<string, number>> {
  const exported = JSON.parse((await project.ok(["stack", "export", "--stack", "local"])).stdout) as {
    deployment?: { resources?: { urn: string; created?: string; modified?: string }[] };
  };
  const out = new Map<string, number>();
  for (const r of exported.deployment?.resources ?? []) {
    const at = r.modified ?? r.created;
    if (at !== undefined) out.set(r.urn.split("::").pop()!, Date.parse(at));
  }
  return out;
}

/** Seconds from `from` to the latest of `names` (resources that finished in this `up`), or undefined. */
function until(times: Map<string, number>, from: number, names: readonly string[]): number | undefined {
  const found = names.map((n) => times.get(n)).filter((t): t is number => t !== undefined && t >= from - 1000);
  return found.length === 0 ? undefined : Math.round((Math.max(...found) - from) / 100) / 10;
}

function stampSeconds(prefix: string): { tool: string; seconds: number }[] {
  const root = cacheRoot();
  return fs
    .readdirSync(root)
    .filter((d) => d.startsWith(prefix))
    .map((d) => ({ tool: d, stamp: readStamp(path.join(root, d)) }))
    .filter((x) => x.stamp !== undefined)
    .map((x) => ({ tool: x.tool, seconds: Math.round(x.stamp!.buildSeconds) }));
}

/** Resident memory of the cluster's node containers (`docker stats --no-stream`), MiB by container. */
function clusterMemory(clusterName: string): Record<string, string> {
  const names = execFileSync("docker", ["ps", "--filter", `label=io.x-k8s.kind.cluster=${clusterName}`, "--format", "{{.Names}}"], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
  if (names.length === 0) return {};
  const out = execFileSync("docker", ["stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}", ...names], { encoding: "utf8" });
  return Object.fromEntries(
    out
      .split("\n")
      .filter(Boolean)
      .map((l) => [l.split(" ")[0]!, l.split(" ").slice(1).join(" ")]),
  );
}

interface LocalFigures {
  size: number;
  outcome: string;
  upWallMs: number;
  clusterCreateS?: number;
  imageLoadS?: number;
  controllersReadyS?: number;
  runS?: number;
  phasesMs: Record<string, number>;
  timeToReadyMs?: number;
  memoryAtRest: Record<string, string>;
}

async function benchLocal(): Promise<{ figures: LocalFigures[]; destroyMs: number }> {
  const project = new LocalProject(`cl-bench-${process.pid % 10000}`);
  await project.init(await freePort());
  const figures: LocalFigures[] = [];
  let destroyMs: number;
  try {
    for (const size of SIZES) {
      if (size !== 9) await project.config("cohort", JSON.stringify(roster(size)));
      const startedAt = Date.now();
      const up = await project.ok(["up", "--yes", "--stack", "local", "--skip-preview"]);
      const times = await resourceTimes(project);
      const o = (await project.outputs()) as { run: { outcome: string; timeToReadyMs: number; ledgerPath: string } };
      const completion = JSON.parse(fs.readFileSync(path.join(o.run.ledgerPath, "completion.json"), "utf8")) as { phasesMs: Record<string, number> };
      // Phases end when their last resource finished; each is counted from the end of the one before it.
      const clusterEnd = until(times, startedAt, ["local-kind"]);
      const imagesEnd = until(times, startedAt, ["local-images"]);
      const controllersEnd = until(times, startedAt, ["kueue-webhook-probe", "agent-sandbox:agent-sandbox-system/agent-sandbox-controller", "temporal:cohort-lab-system/temporal"]);
      const runEnd = until(times, startedAt, ["cohort-summary"]);
      const cluster = clusterEnd !== undefined ? { start: 0, end: clusterEnd } : undefined;
      const images = imagesEnd !== undefined ? { start: clusterEnd ?? 0, end: imagesEnd } : undefined;
      const controllers = controllersEnd !== undefined ? { start: imagesEnd ?? clusterEnd ?? 0, end: controllersEnd } : undefined;
      const run = runEnd !== undefined ? { start: controllersEnd ?? 0, end: runEnd } : undefined;
      const f: LocalFigures = {
        size,
        outcome: o.run.outcome,
        upWallMs: Math.round(up.ms),
        ...(cluster !== undefined ? { clusterCreateS: Math.round((cluster.end - cluster.start) * 10) / 10 } : {}),
        ...(images !== undefined ? { imageLoadS: Math.round((images.end - images.start) * 10) / 10 } : {}),
        ...(controllers !== undefined ? { controllersReadyS: Math.round((controllers.end - controllers.start) * 10) / 10 } : {}),
        ...(run !== undefined ? { runS: Math.round((run.end - run.start) * 10) / 10 } : {}),
        phasesMs: completion.phasesMs,
        timeToReadyMs: o.run.timeToReadyMs,
        memoryAtRest: clusterMemory(project.clusterName),
      };
      figures.push(f);
      console.log(
        `local ${String(size).padStart(3)} members: ${f.outcome}; pulumi up ${s(f.upWallMs)} = cluster create ${f.clusterCreateS ?? "n/a"} s, image load ${f.imageLoadS ?? "n/a"} s, ` +
          `controllers ready ${f.controllersReadyS ?? "n/a"} s, run ${f.runS ?? "n/a"} s (state times; a phase that did not run in this up is n/a); ledger phases ${JSON.stringify(f.phasesMs)}; ` +
          `time to ready ${s(f.timeToReadyMs)}; cluster memory at rest ${JSON.stringify(f.memoryAtRest)}; load ${load()}`,
      );
    }
  } finally {
    const d = await project.pulumi(["destroy", "--yes", "--stack", "local", "--skip-preview"]);
    destroyMs = d.ms;
    console.log(`local pulumi destroy: ${s(d.ms)} (exit ${d.exitCode})`);
    if (process.env.BENCH_KEEP !== "1") project.cleanup();
  }
  return { figures, destroyMs };
}

async function benchSim(): Promise<Map<number, number | undefined>> {
  const out = new Map<number, number | undefined>();
  const why = simUnavailableReason();
  if (why !== undefined) {
    console.log(`sim comparison skipped: ${why}`);
    return out;
  }
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-bench-local-sim-"));
  const sim = await startSim({ nodes: 2, controllers: true });
  try {
    for (const size of SIZES) {
      const spec = { apiVersion: "cohort-lab/v1", kind: "Cohort", ...roster(size) } as Record<string, unknown>;
      // The sim's pods are not processes: commands are not run; kwok makes every pod Running and Ready.
      for (const role of spec.roles as { app: Record<string, unknown> }[]) role.app = { ...role.app, image: `registry.invalid/bench/member@sha256:${"ab".repeat(32)}` };
      const r = await runCohortOnSim({
        stateDir: sim.stateDir,
        specText: JSON.stringify(spec),
        namespace: `bench-local-${size}`,
        bundlePath: BUNDLE,
        artifactRoot: path.join(work, "artifacts"),
      });
      const ready = r.records.find((x) => x.kind === "roster-ready") as unknown as { timeToReadyMs?: number } | undefined;
      out.set(size, ready?.timeToReadyMs);
      console.log(`sim   ${String(size).padStart(3)} members: ${r.summary?.outcome ?? `exit ${r.exitCode}`}; admission -> all ready ${s(ready?.timeToReadyMs)}; load ${load()}`);
    }
  } finally {
    await sim.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
  return out;
}

async function main(): Promise<void> {
  const missing = localBuildMissing();
  if (missing !== undefined) throw new Error(`bench:local needs the local tool sets: ${missing}`);
  console.log(`bench:local  sizes ${SIZES.join(", ")}  cpus ${os.cpus().length}  memory ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB  load ${load()}`);
  for (const prefix of ["kind-node-image-", "image-", "kubernetes-node-", "kind-v"]) {
    for (const b of stampSeconds(prefix)) console.log(`cold build (from its stamp): ${b.tool} ${b.seconds} s`);
  }
  const warmStarted = performance.now();
  const { execa } = await loadExeca();
  await execa("npm", ["run", "-s", "toolchain", "--", "local", "local-images", "local-apps"], { cwd: PROJECT_DIR, stdin: "ignore" });
  console.log(`warm npm run toolchain -- local local-images local-apps: ${s(performance.now() - warmStarted)}`);
  const local = await benchLocal();
  const sim = await benchSim();
  for (const f of local.figures) {
    const simMs = sim.get(f.size);
    const ratio = f.timeToReadyMs !== undefined && simMs !== undefined && simMs > 0 ? (f.timeToReadyMs / simMs).toFixed(2) : "n/a";
    console.log(`time to ready, ${f.size} members: local ${s(f.timeToReadyMs)} vs sim ${s(simMs)}: ratio local/sim ${ratio}`);
  }
  console.log(`bench:local figures ${JSON.stringify({ local: local.figures, destroyMs: Math.round(local.destroyMs), sim: Object.fromEntries(sim) })}`);
}

main().catch((err: unknown) => {
  console.error(`bench:local failed: ${(err as Error).stack ?? String(err)}`);
  process.exit(1);
});

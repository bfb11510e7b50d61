/**
 * Scale benchmark of the `sim` profile (`npm run bench:sim`): the shipped runtime bundle, out of cluster, against
 * a real control plane with kwok nodes and the real Kueue and Agent Sandbox controllers (the path of
 * `pulumi up --stack sim`, simctl/cohort.ts), for 100 and 1,000 members, with no simulated start-up delay
 * and with a simulated delay of 2 s ± 1 s (kwok pod-ready stage: 1 s + U[0, 2 s)).
 *
 * The roster is flat (one role, no `needs`), so the ideal time from admission to all ready is the slowest
 * simulated start: the figure "ratio" is admission -> all ready divided by the slowest simulated start-up delay
 * kwok can draw (`podReadyDelayMs + jitterMs`, the upper bound of 1 s + U[0, 2 s)); with no simulated delay there
 * is no ratio (the absolute time is the figure). The slowest member's own start -> ready (`member-ready`
 * `startToReadyMs` in the ledger: gate removal to Ready) is printed beside it.
 *
 * Printed per run: submission -> admission of the gang Workload (the ledger's `roster-admitted.admissionMs`, and
 * the backend's own admission timings), admission -> all ready (`roster-ready.timeToReadyMs`), the ratio, API
 * calls the runtime made (writes and reads per member, watches, conflicts, 429s, client-side throttle waits, any
 * per-member GET), the RSS of kube-apiserver, etcd and the controllers after the run, and the CPU seconds each
 * of them and the runtime process used during the run (Linux /proc, clock ticks of 10 ms), to show where the
 * time goes on the machine. Targets
 * (docs/sim.md "Against the issue's targets"): admission <= 2 s; 1,000 Ready <= 20 s with no delay; <= 2 writes per member,
 * no per-member polling, no client-side throttle waits.
 *
 * The admission paths of the Kubernetes backend run side by side on the same sim, one after the other per size
 * (`admission: "podGroup"`, Kueue's pod integration gating every pod; `"workload"`, the runtime's own
 * Workload, Sandboxes created at start: runtime/backends/kubernetes/workload.ts; `"workloadGated"`, the same
 * Workload created once every gated member exists). Per run it also prints "last member created -> admission"
 * (the backend's `membersCreatedMs`, every Sandbox created and every pod seen, to `admittedMs`; n/a when the
 * members are created after admission), submission -> all Ready (`admissionMs` + `timeToReadyMs`), the load
 * average before and after, and a markdown table of every run at the end. Per run it also prints the runtime's watch re-opens and
 * relists, its 409 conflicts, and the WHOLE CLUSTER's writes per member: the delta of the kube-apiserver's
 * `apiserver_request_total` (verbs POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION; read from `/metrics` with
 * the sim's admin token) over the run, divided by the members, with the largest contributors by resource. Those
 * are every client's writes (runtime, Kueue, Agent Sandbox, kube-scheduler, kube-controller-manager, kwok),
 * including the background ones (node leases and status) that do not scale with the run.
 *
 * Env: BENCH_SIZES (default "100,1000"), BENCH_NODES (default 12), BENCH_PATHS (default "podGroup,workload"; any of
 * podGroup, workload, workloadGated), BENCH_BACKEND_OPTIONS (space-separated `--backend-option` KEY=VALUE values for every
 * run, e.g. "createConcurrency=64"; default none),
 * BENCH_DELAYS (simulated pod-ready delays in ms to run, default "0,1000"), BENCH_GOGC (the sim processes' `GOGC`
 * values to run, each on its own sim, default the sim's default: "400"; "100,400" measures Go's default against
 * it side by side: components/sim/goRuntime.ts), BENCH_KEEP=1 keeps the artifacts.
 * Needs the sim binaries and manifests (`npm run toolchain -- sim manifests`) and the bundle (`npm run build`).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { LedgerRecord } from "../runtime/index";
import { runCohortOnSim, type SimRunResult } from "../simctl/cohort";
import { simStatus } from "../simctl/cluster";
import { isGoGcInRange, SIM_GO_GC_DEFAULT, SIM_GO_GC_RANGE } from "../components/sim/goRuntime";
import { PROJECT_DIR } from "../stacks/config";
import { simUnavailableReason, startSim } from "../test/sim/harness";
import { adminClient, apiserverMetrics } from "../test/sim/k8s-backend-helpers";

const SIZES = (process.env.BENCH_SIZES ?? "100,1000").split(",").map((s) => Number(s.trim()));
const NODES = Number(process.env.BENCH_NODES ?? 12);
const PATHS = (process.env.BENCH_PATHS ?? "podGroup,workload").split(",").map((s) => s.trim()) as ("podGroup" | "workload" | "workloadGated")[];
const DELAYS = (process.env.BENCH_DELAYS ?? "0,1000").split(",").map((s) => Number(s.trim()));
const GOGCS = (process.env.BENCH_GOGC ?? String(SIM_GO_GC_DEFAULT)).split(",").map((s) => Number(s.trim()));
for (const g of GOGCS) {
  if (!isGoGcInRange(g)) throw new Error(`BENCH_GOGC: "${g}" is not an integer from ${SIM_GO_GC_RANGE.min} to ${SIM_GO_GC_RANGE.max}`);
}
/** Extra `--backend-option KEY=VALUE` values for every run, space-separated (e.g. `createConcurrency=64`). */
const BACKEND_OPTIONS = (process.env.BENCH_BACKEND_OPTIONS ?? "").split(/\s+/).filter((s) => s !== "");
for (const p of PATHS) if (p !== "podGroup" && p !== "workload" && p !== "workloadGated") throw new Error(`BENCH_PATHS: "${p}" is not podGroup, workload or workloadGated`);
const WORK = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-bench-sim-"));
const BUNDLE = path.join(PROJECT_DIR, "dist", "cohort.cjs");
const IMAGE = `registry.invalid/bench/member@sha256:${"ab".repeat(32)}`;
const load = (): string =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");

/** CPU seconds (user + system) of a process, or of this process's waited-for children (`children`), from /proc. */

/** The Kubernetes backend's `backend-stats` ledger record, as far as this benchmark reads it. */
interface BackendStats {
  readonly admission?: unknown;
  readonly writesPerMember?: number;
  readonly memberWritesPerMember?: number;
  readonly watches?: Record<string, { relists: number; reopens: number }>;
  readonly apiCalls?: {
    readonly calls?: Record<string, number>;
    readonly reads?: number;
    readonly watches?: number;
    readonly conflicts?: number;
    readonly throttled?: number;
    readonly clientThrottleWaits?: number;
    readonly maxInFlight?: number;
  };
}

function cpuSeconds(pid: number | "self", children = false): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[0] is field 3 (state): utime/stime are fields 14/15, cutime/cstime 16/17 (proc(5)); USER_HZ is 100 on Linux.
    const [u, s] = children ? [fields[13], fields[14]] : [fields[11], fields[12]];
    return (Number(u) + Number(s)) / 100;
  } catch {
    return Number.NaN;
  }
}

function cpuSnapshot(stateDir: string): Record<string, number> {
  const out: Record<string, number> = { runtime: cpuSeconds("self", true) };
  for (const c of simStatus(stateDir).components) if (c.running) out[c.component] = cpuSeconds(c.pid);
  return out;
}

const WRITE_VERBS = new Set(["POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"]);

/**
 * The kube-apiserver's `apiserver_request_total` write counters, by `<VERB> <resource>[/<subresource>][.<group>]`
 * (Prometheus text format, k8s.io/apiserver `pkg/endpoints/metrics`), summed over codes and components.
 */
async function apiserverWrites(admin: ReturnType<typeof adminClient>): Promise<Map<string, number>> {
  const text = await apiserverMetrics(admin);
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const close = line.lastIndexOf("}");
    const labels: Record<string, string> = {};
    for (const m of line.slice(line.indexOf("{") + 1, close).matchAll(/(\w+)="([^"]*)"/g)) labels[m[1]!] = m[2]!;
    const verb = labels.verb ?? "";
    if (!WRITE_VERBS.has(verb)) continue;
    const key = `${verb} ${labels.resource ?? ""}${labels.subresource ? `/${labels.subresource}` : ""}${labels.group ? `.${labels.group}` : ""}`;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(close + 1).trim()));
  }
  return out;
}

/** `after - before` per key, keys with a positive delta, largest first. */
function delta(before: Map<string, number>, after: Map<string, number>): [string, number][] {
  return [...after.entries()]
    .map(([k, v]): [string, number] => [k, v - (before.get(k) ?? 0)])
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1]);
}

interface Timing {
  readonly label: string;
  readonly podReadyDelayMs: number;
  readonly jitterMs: number;
}

const TIMINGS: readonly Timing[] = [
  { label: "no delay", podReadyDelayMs: 0, jitterMs: 0 },
  { label: "2 s ± 1 s", podReadyDelayMs: 1000, jitterMs: 2000 },
];

function spec(size: number): string {
  return `apiVersion: cohort-lab/v1
kind: Cohort
name: bench
startupTimeout: 10m
memberTimeout: 10m
admissionTimeout: 5m
hold: 1s
concurrency: ${Math.max(size, 1)}
stopGracePeriod: 1s
roles:
  - name: agent
    replicas: ${size}
    app: { image: "${IMAGE}", command: [agent] }
    resources: { cpu: 10m, memory: 16Mi }
`;
}

function record(records: readonly LedgerRecord[], kind: string): (LedgerRecord & Record<string, unknown>) | undefined {
  return records.find((r) => r.kind === kind) as (LedgerRecord & Record<string, unknown>) | undefined;
}

interface Figures {
  timing: string;
  /** `GOGC` of the sim's processes. */
  goGC: number;
  admission: string;
  watchReopens: number | null;
  watchRelists: number | null;
  clusterWritesPerMember: number;
  clusterWritesTop: Record<string, number>;
  members: number;
  outcome: string;
  submissionToAdmissionMs: number | null;
  /** The backend's `membersCreatedMs` (every Sandbox created and every pod seen) to `admittedMs`; null when created after admission. */
  createdToAdmissionMs: number | null;
  backendAdmission: unknown;
  admissionToAllReadyMs: number | null;
  submissionToAllReadyMs: number | null;
  slowestMemberStartMs: number | null;
  slowestSimulatedStartMs: number;
  ratio: number | null;
  writesPerMember: number | null;
  memberWritesPerMember: number | null;
  readsPerMember: number | null;
  perMemberGets: number;
  watches: number | null;
  conflicts: number | null;
  throttled429: number | null;
  clientThrottleWaits: number | null;
  maxInFlight: number | null;
  calls: unknown;
  rssMiB: Record<string, number>;
  cpuSeconds: Record<string, number>;
  runtimeWallMs: number;
  loadBefore: string;
  loadAfter: string;
}

function figures(
  timing: Timing,
  goGC: number,
  admission: string,
  size: number,
  r: SimRunResult,
  rss: Record<string, number>,
  cpu: Record<string, number>,
  writes: [string, number][],
  loadBefore: string,
): Figures {
  const admitted = record(r.records, "roster-admitted");
  const rosterReady = record(r.records, "roster-ready");
  const starts = r.records.filter((x) => x.kind === "member-ready").map((x) => Number((x as unknown as { startToReadyMs: number }).startToReadyMs));
  const slowest = starts.length > 0 ? Math.max(...starts) : null;
  const simulated = timing.podReadyDelayMs + timing.jitterMs;
  const statsRec = record(r.records, "backend-stats") as { stats?: BackendStats } | undefined;
  const stats = statsRec?.stats;
  const calls = (stats?.apiCalls?.calls ?? {}) as Record<string, number>;
  const ttr = rosterReady !== undefined ? Number(rosterReady.timeToReadyMs) : null;
  const watches = stats?.watches !== undefined ? Object.values(stats.watches) : undefined;
  const milestones = (stats?.admission ?? {}) as { membersCreatedMs?: number; admittedMs?: number };
  const createdToAdmission =
    milestones.membersCreatedMs !== undefined && milestones.admittedMs !== undefined && milestones.membersCreatedMs <= milestones.admittedMs
      ? Math.round(milestones.admittedMs - milestones.membersCreatedMs)
      : null;
  const submissionToAdmission = admitted !== undefined ? Number(admitted.admissionMs) : null;
  return {
    timing: timing.label,
    goGC,
    admission,
    // The ListWatch's `reopens` counts every watch request it opened, the first included.
    watchReopens: watches !== undefined ? watches.reduce((a, w) => a + Math.max(0, w.reopens - 1), 0) : null,
    watchRelists: watches !== undefined ? watches.reduce((a, w) => a + w.relists, 0) : null,
    clusterWritesPerMember: Number((writes.reduce((a, [, v]) => a + v, 0) / size).toFixed(2)),
    clusterWritesTop: Object.fromEntries(writes.slice(0, 10).map(([k, v]) => [k, Number((v / size).toFixed(3))])),
    members: size,
    outcome: r.summary?.outcome ?? `no summary (exit ${r.exitCode}): ${r.reason}`,
    submissionToAdmissionMs: submissionToAdmission !== null ? Math.round(submissionToAdmission) : null,
    createdToAdmissionMs: createdToAdmission,
    backendAdmission: stats?.admission ?? null,
    admissionToAllReadyMs: ttr !== null ? Math.round(ttr) : null,
    submissionToAllReadyMs: ttr !== null && submissionToAdmission !== null ? Math.round(submissionToAdmission + ttr) : null,
    slowestMemberStartMs: slowest !== null ? Math.round(slowest) : null,
    slowestSimulatedStartMs: simulated,
    ratio: ttr !== null && simulated > 0 ? Number((ttr / simulated).toFixed(2)) : null,
    writesPerMember: stats !== undefined ? Number(Number(stats.writesPerMember).toFixed(3)) : null,
    memberWritesPerMember: stats !== undefined ? Number(stats.memberWritesPerMember) : null,
    readsPerMember: stats !== undefined ? Number((Number(stats.apiCalls?.reads) / size).toFixed(4)) : null,
    perMemberGets: Object.entries(calls)
      .filter(([k]) => k.startsWith("get pods") || k.startsWith("get sandboxes"))
      .reduce((a, [, n]) => a + n, 0),
    watches: stats?.apiCalls?.watches ?? null,
    conflicts: stats?.apiCalls?.conflicts ?? null,
    throttled429: stats?.apiCalls?.throttled ?? null,
    clientThrottleWaits: stats?.apiCalls?.clientThrottleWaits ?? null,
    maxInFlight: stats?.apiCalls?.maxInFlight ?? null,
    calls,
    rssMiB: rss,
    cpuSeconds: cpu,
    runtimeWallMs: Math.round(r.wallMs),
    loadBefore,
    loadAfter: load(),
  };
}

const seconds = (ms: number | null): string => (ms === null ? "n/a" : `${(ms / 1000).toFixed(ms < 1000 ? 2 : 1)} s`);

/** CPU seconds of every sim process and the runtime during the run, summed. */
function cpuSum(f: Figures): string {
  const values = Object.values(f.cpuSeconds).filter((v) => !Number.isNaN(v));
  return values.reduce((a, v) => a + v, 0).toFixed(1);
}

/** One markdown table row per run (docs/sim.md "Measured"). */
function tableRow(f: Figures): string {
  const cpu = (k: string): string => (f.cpuSeconds[k] === undefined || Number.isNaN(f.cpuSeconds[k]) ? "?" : f.cpuSeconds[k]!.toFixed(1));
  return (
    `| ${f.members.toLocaleString("en-US")} | ${f.admission} | ${f.goGC} | ${seconds(f.submissionToAdmissionMs)} | ${seconds(f.createdToAdmissionMs)} | ${seconds(f.admissionToAllReadyMs)} | ` +
    `${seconds(f.submissionToAllReadyMs)} | ${f.writesPerMember} | ${f.clusterWritesPerMember} | ${f.watchReopens} | ${f.conflicts} | ` +
    `${cpu("kube-apiserver")} | ${cpu("kueue")} | ${cpu("agent-sandbox-controller")} | ${cpu("etcd")} | ${cpu("runtime")} | ${cpuSum(f)} | ${f.rssMiB["kube-apiserver"] ?? "?"} | ${f.loadBefore.split(" ")[0]} → ${f.loadAfter.split(" ")[0]} |`
  );
}

async function main(): Promise<void> {
  const why = simUnavailableReason();
  if (why !== undefined) throw new Error(`bench:sim needs the sim: ${why}`);
  if (!fs.existsSync(BUNDLE)) throw new Error(`${BUNDLE} does not exist: run npm run build`);
  console.log(
    `bench:sim  sizes ${SIZES.join(", ")}  nodes ${NODES} (e2-standard-16)  cpus ${os.cpus().length}  load ${load()}${BACKEND_OPTIONS.length > 0 ? `  backend options ${BACKEND_OPTIONS.join(" ")}` : ""}`,
  );
  const all: Figures[] = [];
  for (const [goGC, timing] of GOGCS.flatMap((g) => TIMINGS.filter((t) => DELAYS.includes(t.podReadyDelayMs)).map((t) => [g, t] as const))) {
    const bootStarted = performance.now();
    const sim = await startSim({ nodes: NODES, controllers: true, podReadyDelayMs: timing.podReadyDelayMs, jitterMs: timing.jitterMs, goGC });
    const admin = adminClient(sim.kubeconfigPath);
    console.log(`sim up (${timing.label}, GOGC ${goGC}) in ${((performance.now() - bootStarted) / 1000).toFixed(1)} s; quota ${JSON.stringify(sim.queue?.nominalQuota)}`);
    try {
      for (const size of SIZES) {
        for (const admission of PATHS) {
          const loadBefore = load();
          const cpuBefore = cpuSnapshot(sim.stateDir);
          const writesBefore = await apiserverWrites(admin);
          const r = await runCohortOnSim({
            stateDir: sim.stateDir,
            specText: spec(size),
            namespace: `bench-${size}-${timing.podReadyDelayMs}-${admission.toLowerCase()}`,
            bundlePath: BUNDLE,
            artifactRoot: path.join(WORK, "artifacts"),
            admission,
            backendOptions: BACKEND_OPTIONS,
          });
          const writes = delta(writesBefore, await apiserverWrites(admin));
          const rss: Record<string, number> = {};
          for (const c of simStatus(sim.stateDir).components) if (c.rssBytes !== undefined) rss[c.component] = Math.round(c.rssBytes / 1048576);
          const cpuAfter = cpuSnapshot(sim.stateDir);
          const cpu: Record<string, number> = {};
          for (const [k, v] of Object.entries(cpuAfter)) cpu[k] = Number((v - (cpuBefore[k] ?? 0)).toFixed(1));
          const f = figures(timing, goGC, admission, size, r, rss, cpu, writes, loadBefore);
          all.push(f);
          console.log(
            `${timing.label.padEnd(10)} GOGC ${String(goGC).padEnd(5)} ${admission.padEnd(13)} ${String(size).padStart(5)} members: ${f.outcome}; submission->admission ${f.submissionToAdmissionMs} ms; ` +
              `last member created->admission ${f.createdToAdmissionMs ?? "n/a (members created after admission)"} ms; ` +
              `admission->all ready ${f.admissionToAllReadyMs} ms; submission->all ready ${f.submissionToAllReadyMs} ms; slowest member start->ready ${f.slowestMemberStartMs} ms; ` +
              `ratio to the slowest simulated start (${f.slowestSimulatedStartMs} ms) ${f.ratio ?? "n/a"}; backend admission ${JSON.stringify(f.backendAdmission)}; ` +
              `runtime writes/member ${f.writesPerMember} (member writes ${f.memberWritesPerMember}); reads/member ${f.readsPerMember}; per-member GETs ${f.perMemberGets}; ` +
              `watches ${f.watches} (re-opened ${f.watchReopens}, relisted ${f.watchRelists}); 409 ${f.conflicts}; 429 ${f.throttled429}; client throttle waits ${f.clientThrottleWaits}; ` +
              `WHOLE-CLUSTER writes/member ${f.clusterWritesPerMember} (top ${JSON.stringify(f.clusterWritesTop)}); ` +
              `RSS MiB ${JSON.stringify(f.rssMiB)}; CPU s during the run ${JSON.stringify(f.cpuSeconds)} (wall ${(f.runtimeWallMs / 1000).toFixed(1)} s); load before ${f.loadBefore}, after ${f.loadAfter}`,
          );
          if (r.summary?.outcome !== "succeeded") console.log(r.stderr.split("\n").slice(-15).join("\n"));
        }
      }
    } finally {
      await admin.dispose();
      await sim.stop();
    }
  }
  console.log(
    [
      "| members | path | GOGC | submission → admitted | last member created → admitted | admission → all Ready | submission → all Ready | runtime writes / member | whole-cluster writes / member | runtime watch re-opens | 409s | kube-apiserver CPU s | Kueue CPU s | Agent Sandbox CPU s | etcd CPU s | runtime CPU s | all sim processes + runtime CPU s | kube-apiserver RSS MiB | load average (1 min) before → after |",
      "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
      ...all.map(tableRow),
    ].join("\n"),
  );
  console.log(`bench:sim figures ${JSON.stringify(all)}`);
  if (process.env.BENCH_KEEP !== "1") fs.rmSync(WORK, { recursive: true, force: true });
  else console.log(`artifacts kept in ${WORK}`);
}

main().catch((err: unknown) => {
  console.error(`bench:sim failed: ${(err as Error).stack ?? String(err)}`);
  process.exit(1);
});

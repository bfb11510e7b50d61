/**
 * Start-up benchmark of the cohort runtime (`npm run bench:startup`).
 *
 * 1. Parallel start: 200 members in a graph three levels deep (1 router -> 20 mid -> 179 leaf; every
 *    member of a level needs every member of the level above), each member sleeping a known delay and
 *    then listening on COHORT_PORT (tcp readiness). Runs the SHIPPED runtime (the esbuild bundle, as a
 *    child process, `node cohort.cjs run`) and reads its ledger. Prints time to ready (admission -> roster
 *    ready), the critical path (the longest chain of configured delays: the lower bound with unbounded
 *    concurrency), their ratio and the target check: time to ready <= 1.05 x critical path + 0.3 s.
 * 2. Sequential baseline: the same cohort with `concurrency: 1` (start one member, wait until it is
 *    ready, start the next). Skipped with BENCH_BASELINE=0 (it takes minutes: the sum of all delays).
 * 3. Placement latency from the parallel run's ledger: for each member of levels 1-2, the last
 *    dependency's `member-ready` -> the dependant's spawn call (`member-started.elapsedMs - startMs`) and
 *    -> spawned (`member-started`), p50/p99 (targets 5 ms and 25 ms, docs/host.md "Measured: the runtime and the process backend").
 * 3b. Spawn floor: the compiled launcher alone starts as many listeners at once as the widest level has
 *    (179), no runtime, right after each parallel run (the machine is shared: a floor from another minute
 *    is not comparable). Printed: its p50/p99, the dependant-spawned p50 against 1.3 x the floor's p50
 *    (issue #17; PASS/FAIL), time to ready against 1.05 x (critical path + the floor's last start), and
 *    where a dependant's latency goes (scheduler, per-member set-up, the launcher round trip).
 *    Where the runtime puts each member into a cgroup of its own (root, cgroup2 or the v1 freezer), each floor
 *    is measured a second time with its listeners in new cgroups too, and time to ready is also printed against
 *    that like-for-like floor (beside the target, not instead of it).
 *    Also printed beside the target, not instead of it: the launcher-alone schedule (`floorSchedule`), an estimate
 *    of time to ready if only the launcher stood between one level being ready and the next one's members
 *    starting, from a floor measured at every level's width, each level's spread in it, and time to ready against
 *    it (what the runtime adds).
 * 3c. The same at 1,000 members in 5 levels (1 -> 99 -> 200 -> 300 -> 400; floor: 400 at once).
 *    BENCH_CASES picks the cases (default `200,1000`); BENCH_REPEAT runs each case that many times
 *    (default 3) and prints each run and the medians.
 * 4. Runtime peak RSS with 1,000 members (cheap `sh` -> `sleep` members, log readiness), from the
 *    runtime's own `process.resourceUsage().maxRSS` recorded in completion.json.
 * 5. Ledger append throughput (LedgerWriter, default fsync policy): fire-and-forget appends as the
 *    scheduler does them, and awaited one-by-one appends.
 *
 * Members: a tiny C listener compiled with `cc` when available (about 1 ms of CPU to start), else perl
 * (Socket), else node; the choice is printed. The machine's load average is printed next to the figures.
 * Env: BENCH_BASELINE=0 skips (2); BENCH_CASES, BENCH_REPEAT (3b, 3c); BENCH_RSS_MEMBERS (default 1000, 0 skips 4 and 5); BENCH_KEEP=1 keeps the artifacts;
 * BENCH_LAUNCHER=perl|direct|auto (default auto) picks how the process backend forks members.
 * BENCH_COMPARE_BUNDLE=<cohort.cjs> runs that runtime bundle too, in turn with this tree's in every repeat of
 * every case (3b, 3c), and prints its tables and the two medians side by side.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import {
  CgroupWatcher,
  Launcher,
  LedgerWriter,
  createMemberCgroupAsync,
  criticalPath,
  killCgroup,
  openRunCgroups,
  readLedger,
  removeCgroupTree,
  removeCohortDirIfEmpty,
  type CgroupHierarchy,
  type LedgerRecord,
} from "../runtime/index";
import { runCohortCli } from "./cohort-cli";

const WORK = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-bench-startup-"));
const load = (): string =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");

// ---- the cohort ---------------------------------------------------------------------------------

/** Deterministic, spread delays in [lowMs, lowMs + spanMs), including both ends' neighbourhood. */
function delays(count: number, lowMs: number, spanMs: number, salt: number): number[] {
  return Array.from({ length: count }, (_, i) => (count === 1 ? lowMs : lowMs + Math.round((((i * 7919 + salt * 104729) % count) / (count - 1)) * (spanMs - 1))));
}

interface Level {
  readonly name: string;
  readonly replicas: number;
  readonly needs: readonly string[];
  readonly delaysMs: readonly number[];
}

/** A chain of levels: each member of a level needs every member of the level above; delays 1000-1999 ms. */
function chain(names: readonly string[], widths: readonly number[]): Level[] {
  return widths.map((replicas, i) => ({ name: names[i]!, replicas, needs: i === 0 ? [] : [names[i - 1]!], delaysMs: delays(replicas, 1000, 1000, i) }));
}

/** The cohorts: 200 members in 3 levels (the original bench) and 1,000 in 5. */
const CASES: Readonly<Record<string, { readonly label: string; readonly levels: Level[] }>> = {
  "200": { label: "200 members, 3 levels", levels: chain(["router", "mid", "leaf"], [1, 20, 179]) },
  "1000": { label: "1,000 members, 5 levels", levels: chain(["router", "l1", "l2", "l3", "l4"], [1, 99, 200, 300, 400]) },
};
const LEVELS = CASES["200"]!.levels;

const LISTENER_C = `
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
int main(void) {
  const char *list = getenv("DELAYS"), *idx = getenv("COHORT_INDEX"), *port = getenv("COHORT_PORT");
  if (!list || !idx || !port) { fprintf(stderr, "DELAYS, COHORT_INDEX and COHORT_PORT are required\\n"); return 2; }
  long want = atol(idx), ms = 0; const char *p = list;
  for (long i = 0; i <= want && p; i++) { ms = atol(p); p = strchr(p, ','); if (p) p++; }
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L }; nanosleep(&ts, NULL);
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1; setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a; memset(&a, 0, sizeof a); a.sin_family = AF_INET; a.sin_port = htons((unsigned short)atoi(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 128)) { perror("listen"); return 1; }
  for (;;) pause();
}
`;
const LISTENER_PERL =
  "my @d = split /,/, $ENV{DELAYS}; select(undef, undef, undef, $d[$ENV{COHORT_INDEX}] / 1000); " +
  "socket(S, PF_INET, SOCK_STREAM, 0) or die; setsockopt(S, SOL_SOCKET, SO_REUSEADDR, 1); " +
  'bind(S, sockaddr_in($ENV{COHORT_PORT}, INADDR_LOOPBACK)) or die "bind: $!"; listen(S, 128) or die; sleep 1 while 1';
const LISTENER_NODE =
  'const d=process.env.DELAYS.split(",")[+process.env.COHORT_INDEX];setTimeout(()=>require("net").createServer().listen(+process.env.COHORT_PORT,"127.0.0.1"),+d)';

function has(program: string, args: string[]): boolean {
  try {
    execFileSync(program, args, { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

function listener(): { kind: string; command: string[] } {
  const source = path.join(WORK, "listener.c");
  const binary = path.join(WORK, "listener");
  fs.writeFileSync(source, LISTENER_C);
  if (has("cc", ["-O2", "-o", binary, source])) return { kind: "C (cc)", command: [binary] };
  if (has("perl", ["-MSocket", "-e", "1"])) return { kind: "perl", command: ["perl", "-MSocket", "-e", LISTENER_PERL] };
  return { kind: "node", command: [process.execPath, "-e", LISTENER_NODE] };
}

function startupSpec(name: string, command: string[], concurrency: number, levels: readonly Level[] = LEVELS): object {
  return {
    apiVersion: "cohort-lab/v1",
    kind: "Cohort",
    name,
    concurrency,
    memberTimeout: "60s",
    startupTimeout: "30m",
    stopGracePeriod: "2s",
    roles: levels.map((level) => ({
      name: level.name,
      replicas: level.replicas,
      needs: level.needs,
      app: { command, env: { DELAYS: level.delaysMs.join(",") } },
      readiness: { tcp: {} },
    })),
  };
}

// ---- running the shipped runtime ----------------------------------------------------------------

interface CliRun {
  summary: { runId: string; outcome: string; size: number; readyCount: number; timeToReadyMs: number | null; ledgerPath: string };
  records: LedgerRecord[];
  completion: Record<string, unknown> | null;
  wallMs: number;
}

async function runCli(bundle: string, spec: object, label: string): Promise<CliRun> {
  const specFile = path.join(WORK, `${label}.json`);
  fs.writeFileSync(specFile, JSON.stringify(spec));
  const artifacts = path.join(WORK, "artifacts");
  const launcher = process.env.BENCH_LAUNCHER ?? "auto";
  const { code, stdout, stderr, wallMs } = await runCohortCli(bundle, ["run", "--spec", specFile, "--artifacts", artifacts, "--backend-option", `launcher=${launcher}`]);
  if (code !== 0) throw new Error(`${label}: cohort run exited ${code}\n${stderr.split("\n").slice(-15).join("\n")}`);
  const summary = JSON.parse(stdout) as CliRun["summary"];
  const { records, completion } = await readLedger(summary.ledgerPath);
  return { summary, records, completion: completion as Record<string, unknown> | null, wallMs };
}

// ---- figures --------------------------------------------------------------------------------------

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/**
 * Per dependant member (ms): last dependency ready -> the scheduler asked the backend to start it
 * (`toStart`), -> the spawn call was issued (`toSpawnCall`: after waiting for the spawns queued before
 * it), -> the process existed (`toSpawned`).
 */
function placement(
  records: readonly LedgerRecord[],
  levels: readonly Level[] = LEVELS,
): { toStart: number[]; toSpawnCall: number[]; toSpawned: number[]; setUp: number[]; roundTrip: number[] } {
  const readyAt = new Map<string, number>();
  const startedRec = new Map<string, LedgerRecord>();
  for (const r of records) {
    if (r.kind === "member-ready") readyAt.set(r.member!, r.elapsedMs);
    if (r.kind === "member-started") startedRec.set(r.member!, r);
  }
  const roleReady = new Map<string, number>();
  for (const level of levels) {
    const times = Array.from({ length: level.replicas }, (_, i) => readyAt.get(`${level.name}-${i}`) ?? Number.NaN);
    roleReady.set(level.name, Math.max(...times));
  }
  const toStart: number[] = [];
  const toSpawnCall: number[] = [];
  const toSpawned: number[] = [];
  const setUp: number[] = [];
  const roundTrip: number[] = [];
  for (const level of levels) {
    if (level.needs.length === 0) continue;
    const depsReady = Math.max(...level.needs.map((need) => roleReady.get(need)!));
    for (let i = 0; i < level.replicas; i++) {
      const r = startedRec.get(`${level.name}-${i}`);
      if (r === undefined) continue;
      const startAt = r.elapsedMs - (r.startMs as number);
      toStart.push(startAt - depsReady);
      toSpawnCall.push(startAt + (r.queuedMs as number) - depsReady);
      toSpawned.push(r.elapsedMs - depsReady);
      setUp.push(r.queuedMs as number);
      roundTrip.push(r.spawnMs as number);
    }
  }
  return { toStart, toSpawnCall, toSpawned, setUp, roundTrip };
}

async function ledgerThroughput(): Promise<{ fireAndForget: number; awaited: number }> {
  const n = 20_000;
  const open = (tag: string) =>
    LedgerWriter.open(path.join(WORK, `ledger-${tag}`), {
      runId: `bench-${tag}`,
      profile: "bench",
      backend: "process",
      spec: { roles: [] },
      tools: {},
      createdAt: new Date().toISOString(),
    });
  const fields = (i: number) => ({ member: `agent-${i % 1000}`, pid: 100000 + i, pgid: 100000 + i, port: 20000 + (i % 10000), endpoint: "127.0.0.1:20000", startMs: 3.25 });
  const w1 = await open("fire");
  let t = performance.now();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) pending.push(w1.append("member-started", fields(i)));
  await Promise.all(pending);
  const fireAndForget = n / ((performance.now() - t) / 1000);
  await w1.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} });
  const w2 = await open("awaited");
  t = performance.now();
  for (let i = 0; i < n / 4; i++) await w2.append("member-started", fields(i));
  const awaited = n / 4 / ((performance.now() - t) / 1000);
  await w2.complete({ outcome: "succeeded", firstFailure: null, phasesMs: {} });
  return { fireAndForget, awaited };
}

/** A spawn floor's figures: ms from the burst to each start read back. */
interface Floor {
  readonly count: number;
  readonly lastMs: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** When each listener's pid was read back, in ms from the first request, by index (the order they were asked for). */
  readonly startsMs: readonly number[];
}

/**
 * What process creation alone costs on this machine: the compiled launcher (no runtime, no scheduler, no
 * probes) starts `count` copies of the bench's listener at once (each sleeping 60 s), and the time until the
 * last one has exec'd is the floor under the widest level's spread of start times. Printed beside the time to
 * ready, so that the part of the gap that no scheduler can remove is visible in the same run.
 *
 * With `cgroups` set, each listener is started into a cgroup of its own, made before the clock starts, as the
 * process backend does for every member (made at admission, entered with clone3 CLONE_INTO_CGROUP on cgroup2,
 * or by a write to `tasks` on the v1 freezer; runtime/backends/process/cgroup.ts). The cgroups live under
 * `<mount>/cohort/<bench run id>` and are killed and removed before this returns.
 *
 * @returns ms from the burst until the last start, the median and p99 start
 * @throws {Error} when a cgroup cannot be made, or the launcher refuses a spawn
 */
async function spawnFloor(launcherPath: string, command: readonly string[], count: number, cgroups: CgroupHierarchy | null = null): Promise<Floor> {
  const launcher = await Launcher.start({ kind: "native", path: launcherPath });
  launcher.onOutput = (_member, _fd, socket) => {
    socket.resume();
    socket.on("error", () => undefined);
  };
  const dir = fs.mkdtempSync(path.join(WORK, "floor-"));
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", DELAYS: Array.from({ length: count }, () => "60000").join(",") };
  let runDir: string | null = null;
  try {
    if (cgroups !== null) {
      const opened = openRunCgroups(cgroups.kind, `bench-floor-${process.pid}-${path.basename(dir).slice("floor-".length)}`);
      if ("unavailable" in opened) throw new Error(`spawn floor: cannot make its cgroups: ${opened.unavailable}`);
      runDir = opened.dir;
    }
    const inRun = runDir;
    const memberCgroups = inRun === null ? [] : await Promise.all(Array.from({ length: count }, (_, i) => createMemberCgroupAsync(inRun, `floor-${i}`)));
    const t0 = performance.now();
    const at = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        launcher
          .spawn({
            id: `floor-${i}`,
            dir,
            argv: command,
            env: { ...env, COHORT_INDEX: String(i), COHORT_PORT: "1" },
            ...(cgroups !== null ? { cgroup: { kind: cgroups.kind, dir: memberCgroups[i]! } } : {}),
          })
          .then(() => performance.now() - t0),
      ),
    );
    return { count, lastMs: Math.max(...at), p50Ms: percentile(at, 50), p99Ms: percentile(at, 99), startsMs: at };
  } finally {
    await launcher.close(); // SIGKILLs every listener it started
    if (cgroups !== null && runDir !== null) {
      killCgroup(cgroups.kind, runDir);
      await new CgroupWatcher().waitEmpty(cgroups.kind, runDir, AbortSignal.timeout(5_000));
      if (!removeCgroupTree(runDir)) process.stderr.write(`bench: cgroup ${runDir} could not be removed (still busy); \`cohort reap\` does not know it: rmdir it by hand\n`);
      removeCohortDirIfEmpty(cgroups);
    }
  }
}

// ---- dependant spawn against the spawn floor (issue #17) -------------------------------------------

/** The target of issue #17: a dependant is spawned within this factor of the spawn floor's p50 (p50 against p50). */
const SPAWN_RATIO_TARGET = 1.3;
/** ... and time to ready stays within this factor of critical path + the floor's last start. */
const READY_BOUND_FACTOR = 1.05;

interface CaseRun {
  readonly run: CliRun;
  readonly floor: Floor;
  /** The same floor with each listener in a new cgroup of its own, as the run's members are; null: no cgroups here. */
  readonly cgroupFloor: Floor | null;
  readonly criticalPathMs: number;
  /** {@link floorSchedule} of the case, with floors like the run's members (in cgroups where they are). */
  readonly schedule: FloorSchedule;
  readonly load: string;
}

/** See {@link floorSchedule}. */
interface FloorSchedule {
  /** Time to ready with nothing but the launcher between the levels, in ms. */
  readonly totalMs: number;
  /** Each level's spread: how long after its longest delay its last member was ready, in ms, in chain order. */
  readonly spreadsMs: readonly number[];
}

/**
 * The launcher-alone schedule of a chain of levels: the time to ready if nothing but the compiled launcher
 * stood between a level being all ready and the next level's members being started. Level k starts when
 * level k-1 is all ready; its member i is started `floors.get(width).startsMs[i]` ms later (the launcher
 * alone starting that many listeners at once, asked for in index order, as the runtime asks for a level's
 * members), is ready `delaysMs[i]` after that, and the level is ready at its last member. The sum over the
 * levels estimates the time to ready of a runtime that adds nothing to the launcher: it counts the spread of
 * start times of every level the critical path crosses (four bursts at 1,000 members in 5 levels), where
 * "critical path + floor last" counts one. An estimate, not a strict bound: each width's floor is one sample
 * (taken after the run, with its spread from run to run), and a floor's start is when the pid was read back,
 * a little after the exec (the member's delay starts at the exec). Printed beside the target, it separates
 * what the runtime adds from what spawning N processes on this machine costs. The bench's cases are chains,
 * so the levels are summed in order.
 *
 * @param floors - a floor for every level width, keyed by width
 * @throws {Error} when a width has no floor
 */
function floorSchedule(levels: readonly Level[], floors: ReadonlyMap<number, Floor>): FloorSchedule {
  let totalMs = 0;
  const spreadsMs = levels.map((level) => {
    const floor = floors.get(level.replicas);
    if (floor === undefined) throw new Error(`floor schedule: no floor measured for a level of ${level.replicas}`);
    const levelMs = Math.max(...level.delaysMs.map((delay, i) => floor.startsMs[i]! + delay));
    totalMs += levelMs;
    return levelMs - Math.max(...level.delaysMs);
  });
  return { totalMs, spreadsMs };
}

/**
 * Where the process backend's `cgroup: auto` puts members on this machine (the same choice: cgroup2 with
 * `cgroup.kill`, else the v1 freezer), found by making and removing a probe run directory; null with the
 * reason when the runtime would run without cgroups (not root, none mounted).
 */
function memberCgroupHierarchy(): { hierarchy: CgroupHierarchy } | { unavailable: string } {
  const opened = openRunCgroups("auto", `bench-probe-${process.pid}`);
  if ("unavailable" in opened) return opened;
  removeCgroupTree(opened.dir);
  removeCohortDirIfEmpty(opened.hierarchy);
  return { hierarchy: opened.hierarchy };
}

/**
 * One parallel run of a case, then the spawn floor for its widest level twice (right after, on the same
 * machine state): plain, and with each listener in a new cgroup when `cgroups` is set, the order alternating
 * with `index`.
 */
async function runCase(bundle: string, launcherFile: string, command: string[], name: string, index: number, cgroups: CgroupHierarchy | null): Promise<CaseRun> {
  const { levels } = CASES[name]!;
  const size = levels.reduce((sum, level) => sum + level.replicas, 0);
  const run = await runCli(bundle, startupSpec(`bench-${name}`, command, Math.max(256, size), levels), `case-${name}-${index}`);
  const widest = Math.max(...levels.map((level) => level.replicas));
  const launcherPath = process.env.COHORT_LAUNCHER || launcherFile;
  let floor: Floor;
  let cgroupFloor: Floor | null = null;
  if (cgroups !== null && index % 2 === 1) {
    cgroupFloor = await spawnFloor(launcherPath, command, widest, cgroups);
    floor = await spawnFloor(launcherPath, command, widest);
  } else {
    floor = await spawnFloor(launcherPath, command, widest);
    if (cgroups !== null) cgroupFloor = await spawnFloor(launcherPath, command, widest, cgroups);
  }
  // The other levels' floors, like the members (each in a cgroup where they are), for the launcher-alone schedule.
  // Measured after the widest level's floors, so that those stay right after the run as before (the target's
  // bound); one sample each, so the schedule carries a floor's run-to-run spread.
  const floors = new Map<number, Floor>([[widest, cgroupFloor ?? floor]]);
  for (const level of levels) {
    if (!floors.has(level.replicas)) floors.set(level.replicas, await spawnFloor(launcherPath, command, level.replicas, cgroups));
  }
  const cp = criticalPath(
    levels.map((level) => ({ name: level.name, needs: level.needs })),
    (role) => Math.max(...levels.find((level) => level.name === role)!.delaysMs),
  );
  return { run, floor, cgroupFloor, criticalPathMs: cp.totalMs, schedule: floorSchedule(levels, floors), load: load().split(" ")[0]! };
}

function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/**
 * Prints one case: per run, the floor, the dependants' spawn latency and its ratio to the floor, time to ready
 * against its bound, and where a dependant's latency goes; then the medians over the runs with PASS/FAIL.
 */
function printCase(out: (line?: string) => void, name: string, runs: readonly CaseRun[]): void {
  const { label, levels } = CASES[name]!;
  const widest = Math.max(...levels.map((level) => level.replicas));
  const f = (ms: number): string => ms.toFixed(0).padStart(5);
  out(`dependant spawn vs spawn floor, ${label} (${levels.map((l) => `${l.name} x${l.replicas}`).join(" -> ")}; floor: ${widest} at once)`);
  const withCgroups = runs.every((c) => c.cgroupFloor !== null);
  out(
    `  run  floor p50/p99/last  spawned p50/p99  ratio  | sched p50/p99  set-up p50/p99  round trip p50/p99 | ready / (cp + floor last)${withCgroups ? "  | cgroup floor p50/last  ready / (cp + it)" : ""}  | floor schedule  ready / it  load`,
  );
  const rows = runs.map((c, i) => {
    const p = placement(c.run.records, levels);
    const spawned50 = percentile(p.toSpawned, 50);
    const ratio = spawned50 / c.floor.p50Ms;
    const ttr = c.run.summary.timeToReadyMs!;
    const bound = c.criticalPathMs + c.floor.lastMs;
    const pp = (v: number[]): string => `${f(percentile(v, 50))}/${f(percentile(v, 99))}`;
    out(
      `  ${String(i + 1).padStart(3)}  ${f(c.floor.p50Ms)}/${f(c.floor.p99Ms)}/${f(c.floor.lastMs)}  ${pp(p.toSpawned)}    ${ratio.toFixed(2)}  |  ${pp(p.toStart)}   ${pp(p.setUp)}     ${pp(p.roundTrip)}     | ${(ttr / 1000).toFixed(3)} / ${(bound / 1000).toFixed(3)} s = ${(ttr / bound).toFixed(3)}` +
        (withCgroups ? `  | ${f(c.cgroupFloor!.p50Ms)}/${f(c.cgroupFloor!.lastMs)}          ${(ttr / (c.criticalPathMs + c.cgroupFloor!.lastMs)).toFixed(3)}` : "") +
        `  | ${(c.schedule.totalMs / 1000).toFixed(3)} s        ${(ttr / c.schedule.totalMs).toFixed(3)}` +
        `  ${c.load}`,
    );
    return {
      ratio,
      spawned50,
      spawned99: percentile(p.toSpawned, 99),
      floor50: c.floor.p50Ms,
      floor99: c.floor.p99Ms,
      ready: ttr / bound,
      cgroupFloorLast: c.cgroupFloor?.lastMs ?? Number.NaN,
      floorLast: c.floor.lastMs,
      readyCgroup: c.cgroupFloor === null ? Number.NaN : ttr / (c.criticalPathMs + c.cgroupFloor.lastMs),
      readySchedule: ttr / c.schedule.totalMs,
      scheduleOverCp: c.schedule.totalMs / bound,
    };
  });
  const m = (key: keyof (typeof rows)[number]): number => median(rows.map((row) => row[key]));
  const ratio = m("ratio");
  const ready = m("ready");
  out(
    `  median of ${rows.length}: floor p50/p99 ${m("floor50").toFixed(0)}/${m("floor99").toFixed(0)} ms; dependant spawned p50/p99 ${m("spawned50").toFixed(0)}/${m("spawned99").toFixed(0)} ms`,
  );
  out(`  dependant spawned p50 / floor p50 = ${ratio.toFixed(2)} (target <= ${SPAWN_RATIO_TARGET}): ${ratio <= SPAWN_RATIO_TARGET ? "PASS" : "FAIL"}`);
  out(`  time to ready / (critical path + floor last) = ${ready.toFixed(3)} (target <= ${READY_BOUND_FACTOR}): ${ready <= READY_BOUND_FACTOR ? "PASS" : "FAIL"}`);
  if (withCgroups) {
    // Not the target: the floor above starts bare processes, while the run's members each enter a new cgroup.
    out(
      `  like for like (the floor's listeners each in a new cgroup, as the members are): floor last ${m("cgroupFloorLast").toFixed(0)} ms against ${m("floorLast").toFixed(0)} bare; time to ready / (critical path + it) = ${m("readyCgroup").toFixed(3)}`,
    );
  }
  // Not the target either: an estimate that counts every level's spread of start times (floorSchedule).
  const spreads = levels.map((level, k) => `${level.name} ${median(runs.map((c) => c.schedule.spreadsMs[k]!)).toFixed(0)}`).join(", ");
  out(
    `  launcher-alone schedule (each level started by the launcher alone${withCgroups ? ", in cgroups" : ""}, at once, when the level above is ready): ${m("scheduleOverCp").toFixed(3)} x (critical path + floor last, the target's bound); time to ready / it = ${m("readySchedule").toFixed(3)}; each level's spread in it (ms past its longest delay): ${spreads}`,
  );
  out(
    "  (sched: last dependency ready -> start requested; set-up: start requested -> spawn request written; round trip: request -> pid read back: the launcher's queue, the fork/exec and the runtime's event loop)",
  );
  out();
}

// ---- main -----------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const out = (line = ""): void => void process.stdout.write(`${line}\n`);
  out(`cohort start-up bench  (${os.cpus().length} CPUs, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, work dir ${WORK})`);
  const { bundle } = (await import("../scripts/bundle.mjs")) as typeof import("../scripts/bundle.mjs");
  const built = await bundle({ outfile: path.join(WORK, "cohort.cjs") });
  const member = listener();
  out(`runtime: ${path.basename(built.outfile)} (${(built.bytes / 1024).toFixed(0)} KiB bundle, run as a child process); members: ${member.kind} listener`);
  const cgroupChoice = memberCgroupHierarchy();
  const cgroups = "hierarchy" in cgroupChoice ? cgroupChoice.hierarchy : null;
  out(
    "unavailable" in cgroupChoice
      ? `member cgroups: none (${cgroupChoice.unavailable}); the floor is measured bare only`
      : `member cgroups (the backend's cgroup: auto): ${cgroupChoice.hierarchy.kind} at ${cgroupChoice.hierarchy.mount}; each floor is also measured with its listeners in new cgroups there`,
  );

  const cp = criticalPath(
    LEVELS.map((level) => ({ name: level.name, needs: level.needs })),
    (role) => Math.max(...LEVELS.find((level) => level.name === role)!.delaysMs),
  );
  out(`cohort: ${LEVELS.map((l) => `${l.name} x${l.replicas} (delays ${Math.min(...l.delaysMs)}-${Math.max(...l.delaysMs)} ms)`).join(" -> ")}; tcp readiness`);
  out();

  const loadBefore = load();
  const caseNames = (process.env.BENCH_CASES ?? "200,1000")
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  for (const name of caseNames) if (CASES[name] === undefined) throw new Error(`BENCH_CASES: unknown case "${name}" (known: ${Object.keys(CASES).join(", ")})`);
  const repeat = Math.max(1, Math.floor(Number(process.env.BENCH_REPEAT ?? 3)));
  // BENCH_COMPARE_BUNDLE: another runtime bundle (e.g. main's dist/cohort.cjs before a change), run in turn with
  // this tree's in every repeat (the order alternating), so both are measured under the same minute's load.
  const compare = process.env.BENCH_COMPARE_BUNDLE;
  if (compare !== undefined && !fs.existsSync(compare)) throw new Error(`BENCH_COMPARE_BUNDLE: ${compare} does not exist`);
  if (compare !== undefined) out(`compared with: ${compare} (each repeat runs both, the order alternating)`);
  const caseResults = new Map<string, CaseRun[]>();
  const compareResults = new Map<string, CaseRun[]>();
  for (const name of caseNames) {
    const runs: CaseRun[] = [];
    const other: CaseRun[] = [];
    for (let i = 0; i < repeat; i++) {
      if (compare !== undefined && i % 2 === 0) other.push(await runCase(compare, built.launcher.file, member.command, name, i + 1000, cgroups));
      runs.push(await runCase(built.outfile, built.launcher.file, member.command, name, i, cgroups));
      if (compare !== undefined && i % 2 === 1) other.push(await runCase(compare, built.launcher.file, member.command, name, i + 1000, cgroups));
    }
    caseResults.set(name, runs);
    if (compare !== undefined) compareResults.set(name, other);
  }
  const first200 = caseResults.get("200")?.[0];
  const parallel = first200?.run ?? (await runCli(built.outfile, startupSpec("bench", member.command, 256), "parallel"));
  const loadAfterParallel = load();
  const ttr = parallel.summary.timeToReadyMs!;
  const target = 1.05 * cp.totalMs + 300;
  const { toStart, toSpawnCall, toSpawned } = placement(parallel.records);
  const spawnMs = parallel.records.filter((r) => r.kind === "member-started").map((r) => r.spawnMs as number);

  let sequential: CliRun | null = null;
  let loadAfterSeq = "";
  if (process.env.BENCH_BASELINE !== "0") {
    out(`sequential baseline running (about ${(LEVELS.reduce((sum, l) => sum + l.delaysMs.reduce((a, b) => a + b, 0), 0) / 1000).toFixed(0)} s of delays)...`);
    sequential = await runCli(built.outfile, startupSpec("bench-seq", member.command, 1), "sequential");
    loadAfterSeq = load();
  }

  const floor = first200?.floor ?? (await spawnFloor(built.launcher.file, member.command, LEVELS[2]!.replicas));

  const rssMembers = Number(process.env.BENCH_RSS_MEMBERS ?? 1000);
  const rssRun =
    rssMembers <= 0
      ? null
      : await runCli(
          built.outfile,
          {
            apiVersion: "cohort-lab/v1",
            kind: "Cohort",
            name: "bench-rss",
            memberTimeout: "5m",
            startupTimeout: "30m",
            hold: "2s",
            stopGracePeriod: "5s",
            roles: [{ name: "idle", replicas: rssMembers, app: { command: ["sh", "-c", "echo ready; exec sleep 600"], port: false }, readiness: { log: { pattern: "^ready$" } } }],
          },
          "rss",
        );
  const runtime = (rssRun?.completion?.runtime ?? {}) as { maxRssKiB?: number; cpuUserMs?: number; cpuSystemMs?: number };
  const parallelRuntime = (parallel.completion?.runtime ?? {}) as { maxRssKiB?: number };
  const loadAfterRss = load();
  const ledger = rssMembers <= 0 ? null : await ledgerThroughput();

  const row = (label: string, value: string, note = ""): void => out(`  ${label.padEnd(44)} ${value.padStart(14)}  ${note}`);
  out("start-up (200 members, 3 levels)                       value  notes");
  row("critical path (longest chain of delays)", `${(cp.totalMs / 1000).toFixed(3)} s`, cp.roles.join(" -> "));
  row(
    "time to ready, parallel (admission -> ready)",
    `${(ttr / 1000).toFixed(3)} s`,
    `concurrency 256; wall ${(parallel.wallMs / 1000).toFixed(1)} s incl. runtime boot and teardown`,
  );
  row("ratio time to ready / critical path", (ttr / cp.totalMs).toFixed(3));
  row("target: <= 1.05 x critical path + 0.3 s", `${(target / 1000).toFixed(3)} s`, ttr <= target ? "MET" : `MISSED by ${((ttr - target) / 1000).toFixed(3)} s`);
  if (sequential !== null) {
    const seq = sequential.summary.timeToReadyMs!;
    row("time to ready, sequential (concurrency 1)", `${(seq / 1000).toFixed(3)} s`, `parallel is ${(seq / ttr).toFixed(1)}x faster`);
  } else {
    row("time to ready, sequential (concurrency 1)", "skipped", "BENCH_BASELINE=0");
  }
  const pp = (values: number[]): string => `${percentile(values, 50).toFixed(1)}/${percentile(values, 99).toFixed(1)} ms`;
  row("placement: dep ready -> start requested p50/p99", pp(toStart), `scheduler only (${toStart.length} dependants)`);
  row("placement: dep ready -> spawn call      p50/p99", pp(toSpawnCall), "targets 5 / 25 ms; includes waiting for earlier spawns");
  row("placement: dep ready -> spawned         p50/p99", pp(toSpawned));
  const launcherUsed = (parallel.records.find((r) => r.kind === "backend-stats")?.stats as { launcher?: string } | undefined)?.launcher ?? "?";
  row("one spawn request -> pid                p50/p99", pp(spawnMs), `launcher: ${launcherUsed} (BENCH_LAUNCHER=perl|direct)`);
  row(
    `spawn floor: ${floor.count} listeners at once`,
    `${floor.lastMs.toFixed(0)} ms`,
    `the launcher alone, no runtime (p50 ${floor.p50Ms.toFixed(0)} ms); critical path + floor = ${((cp.totalMs + floor.lastMs) / 1000).toFixed(3)} s`,
  );
  row("runtime peak RSS, 200-member run", `${((parallelRuntime.maxRssKiB ?? 0) / 1024).toFixed(1)} MiB`);
  if (rssRun !== null && ledger !== null) {
    row(
      `runtime peak RSS, ${rssMembers} members`,
      `${((runtime.maxRssKiB ?? 0) / 1024).toFixed(1)} MiB`,
      `time to ready ${((rssRun.summary.timeToReadyMs ?? 0) / 1000).toFixed(1)} s; runtime CPU ${(((runtime.cpuUserMs ?? 0) + (runtime.cpuSystemMs ?? 0)) / 1000).toFixed(1)} s`,
    );
    row("ledger appends, fire-and-forget (scheduler)", `${Math.round(ledger.fireAndForget)} rec/s`, "default fsync policy, 20,000 member-started records");
    row("ledger appends, awaited one by one", `${Math.round(ledger.awaited)} rec/s`, "5,000 records");
  } else {
    row("runtime peak RSS, ledger appends", "skipped", "BENCH_RSS_MEMBERS=0");
  }
  out();
  for (const [name, runs] of caseResults) {
    const other = compareResults.get(name);
    if (other !== undefined) out(`--- this tree's runtime (${path.basename(built.outfile)}) ---`);
    printCase(out, name, runs);
    if (other === undefined) continue;
    out(`--- compared runtime (${compare}) ---`);
    printCase(out, name, other);
    const ready = (c: CaseRun): number => c.run.summary.timeToReadyMs! / (c.criticalPathMs + c.floor.lastMs);
    const mine = median(runs.map(ready));
    const theirs = median(other.map(ready));
    out(
      `  side by side, ${CASES[name]!.label}: time to ready / (critical path + floor last), medians: this ${mine.toFixed(3)}, compared ${theirs.toFixed(3)}; this / compared = ${(mine / theirs).toFixed(3)}`,
    );
    out();
  }
  out(
    `load average (1/5/15 min): before ${loadBefore}; after the cases ${loadAfterParallel}${sequential ? `; after sequential ${loadAfterSeq}` : ""}; after ${rssMembers}-member run ${loadAfterRss}`,
  );
  if (process.env.BENCH_KEEP !== "1") fs.rmSync(WORK, { recursive: true, force: true });
  else out(`artifacts kept in ${WORK}`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});

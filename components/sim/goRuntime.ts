/**
 * The Go runtime settings of the sim's processes (every one is a Go program). Pure: simctl applies them when it
 * spawns a process; the stack and SimCluster check `goGC` against the same range before anything starts.
 */

/**
 * The Go garbage collector's `GOGC` given to every sim process (all are Go programs: etcd, the Kubernetes
 * components, kwok, Kueue, the Agent Sandbox controller, the Temporal CLI) unless `--go-gc` says otherwise.
 *
 * 400 (Go's default is 100): on a 2-core machine running a 1,000-member cohort, garbage collection was the
 * largest single use of kube-apiserver's CPU (a CPU profile of the 25 s from admission to all Ready: `mallocgc`
 * 16%, background mark workers 15% of 27.9 CPU-s), and the machine is CPU-bound; a heap allowed to grow 5x its
 * live size instead of 2x collects about 2.5x less often, at the cost of memory this simulator has (measured
 * before/after in one `npm run bench:sim` run: docs/sim.md "GOGC"). Each process also gets a `GOMEMLIMIT`
 * ({@link goRuntimeEnv}): a heap nearing a quarter of the machine's memory is collected more often instead of
 * growing to 5x.
 *
 * @see https://go.dev/doc/gc-guide ("GOGC", "Memory limit")
 */
export const SIM_GO_GC_DEFAULT = 400;

/** Bounds of `--go-gc` (and `cohort-lab:sim.goGC`): Go accepts any positive percentage; above 10000 it is `off` in all but name. */
export const SIM_GO_GC_RANGE = { min: 25, max: 10000 } as const;

/** Whether `goGC` is an integer within {@link SIM_GO_GC_RANGE}: the one check behind every way of setting it. */
export function isGoGcInRange(goGC: number): boolean {
  return Number.isInteger(goGC) && goGC >= SIM_GO_GC_RANGE.min && goGC <= SIM_GO_GC_RANGE.max;
}

/** Go's own defaults, spelled out (`GOMEMLIMIT=off`: no limit), for a process that must not inherit another setting. */
export const GO_RUNTIME_DEFAULTS: Readonly<Record<"GOGC" | "GOMEMLIMIT", string>> = { GOGC: "100", GOMEMLIMIT: "off" };

/**
 * The Go runtime environment of one sim process: `GOGC` = `goGC`, and `GOMEMLIMIT` = a quarter of the machine's
 * memory (a soft limit: the collector runs more often as the heap nears it, so a larger `GOGC` cannot take a
 * process past it by deferring collection; with ~8 processes the sum may exceed the machine, but only heaps that
 * really are that large reach it).
 *
 * @param goGC - percentage, {@link SIM_GO_GC_RANGE}
 * @param totalMemoryBytes - the machine's memory (`os.totalmem()`)
 * @returns `{ GOGC: "<goGC>", GOMEMLIMIT: "<MiB>MiB" }`
 * @see https://pkg.go.dev/runtime ("GOGC", "GOMEMLIMIT")
 */
export function goRuntimeEnv(goGC: number, totalMemoryBytes: number): Record<"GOGC" | "GOMEMLIMIT", string> {
  return { GOGC: String(goGC), GOMEMLIMIT: `${Math.max(256, Math.floor(totalMemoryBytes / 4 / 1048576))}MiB` };
}

/**
 * What liveness probing costs (`npm run bench:liveness`): the SHIPPED runtime (the esbuild bundle, run as a
 * child process, `node cohort.cjs run`) holds N idle tcp listeners (one role, `readiness: { tcp: {} }`) for
 * a fixed hold, once per liveness mode, and prints per run: time to ready (admission -> roster ready), the
 * runtime's CPU time for the whole run (user + system, from completion.json `runtime`), and its peak RSS.
 * The CPU difference between `on` and `off` over the same hold is the hold-phase cost of liveness.
 *
 * Members: a tiny C listener compiled with `cc` (listens at once, then sleeps); without `cc`, a perl one.
 * Env (all optional):
 * - BENCH_MEMBERS: comma-separated cohort sizes. @default "200,1000"
 * - BENCH_HOLD: the hold, a RunSpec duration. @default "30s"
 * - BENCH_MODES: comma-separated liveness modes: `on` (the role's default liveness), `off` (`liveness: false`),
 *   `none` (no `liveness` field at all: for runtimes that predate it), `period=<duration>` (liveness with that
 *   period). @default "on,off"
 * - BENCH_KEEP=1 keeps the artifacts.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { readLedger } from "../runtime/index";
import { runCohortCli } from "./cohort-cli";

const WORK = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-bench-liveness-"));

const LISTENER_C = `
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
  const char *port = getenv("COHORT_PORT");
  if (!port) { fprintf(stderr, "COHORT_PORT is required\\n"); return 2; }
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1; setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a; memset(&a, 0, sizeof a); a.sin_family = AF_INET; a.sin_port = htons((unsigned short)atoi(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 128)) { perror("listen"); return 1; }
  for (;;) { int c = accept(s, NULL, NULL); if (c >= 0) close(c); }
}
`;
const LISTENER_PERL =
  "socket(S, PF_INET, SOCK_STREAM, 0) or die; setsockopt(S, SOL_SOCKET, SO_REUSEADDR, 1); " +
  'bind(S, sockaddr_in($ENV{COHORT_PORT}, INADDR_LOOPBACK)) or die "bind: $!"; listen(S, 128) or die; while (accept(C, S)) { close C }';

function listener(): { kind: string; command: string[] } {
  const source = path.join(WORK, "listener.c");
  const binary = path.join(WORK, "listener");
  fs.writeFileSync(source, LISTENER_C);
  try {
    execFileSync("cc", ["-O2", "-o", binary, source], { stdio: "ignore" });
    return { kind: "C (cc)", command: [binary] };
  } catch {
    return { kind: "perl", command: ["perl", "-MSocket", "-e", LISTENER_PERL] };
  }
}

/** The `liveness` field for a mode, or undefined for `none`. */
function livenessOf(mode: string): unknown {
  if (mode === "on" || mode === "none") return undefined;
  if (mode === "off") return false;
  const period = /^period=(.+)$/.exec(mode);
  if (period !== null) return { period: period[1] };
  throw new Error(`BENCH_MODES: unknown mode "${mode}" (on, off, none, period=<duration>)`);
}

interface Figures {
  timeToReadyMs: number;
  cpuMs: number;
  maxRssKiB: number;
  livenessRecords: number;
  wallMs: number;
}

async function runOnce(bundle: string, command: string[], size: number, hold: string, mode: string): Promise<Figures> {
  const liveness = livenessOf(mode);
  const spec = {
    apiVersion: "cohort-lab/v1",
    kind: "Cohort",
    name: "bench-liveness",
    concurrency: 256,
    memberTimeout: "60s",
    startupTimeout: "10m",
    stopGracePeriod: "2s",
    hold,
    roles: [{ name: "idle", replicas: size, app: { command }, readiness: { tcp: {} }, ...(liveness !== undefined ? { liveness } : {}) }],
  };
  const specFile = path.join(WORK, `spec-${size}-${mode}.json`);
  fs.writeFileSync(specFile, JSON.stringify(spec));
  const { code, stdout, stderr, wallMs } = await runCohortCli(bundle, ["run", "--spec", specFile, "--artifacts", path.join(WORK, "artifacts")]);
  if (code !== 0) throw new Error(`${size} members, mode ${mode}: cohort run exited ${code}\n${stderr.split("\n").slice(-15).join("\n")}`);
  const summary = JSON.parse(stdout) as { timeToReadyMs: number; ledgerPath: string };
  const { records, completion } = await readLedger(summary.ledgerPath);
  const runtime = ((completion as Record<string, unknown> | null)?.runtime ?? {}) as { maxRssKiB?: number; cpuUserMs?: number; cpuSystemMs?: number };
  return {
    timeToReadyMs: summary.timeToReadyMs,
    cpuMs: (runtime.cpuUserMs ?? 0) + (runtime.cpuSystemMs ?? 0),
    maxRssKiB: runtime.maxRssKiB ?? 0,
    livenessRecords: records.filter((r) => r.kind === "member-unhealthy").length,
    wallMs,
  };
}

async function main(): Promise<void> {
  const out = (line = ""): void => void process.stdout.write(`${line}\n`);
  const sizes = (process.env.BENCH_MEMBERS ?? "200,1000").split(",").map(Number);
  const hold = process.env.BENCH_HOLD ?? "30s";
  const modes = (process.env.BENCH_MODES ?? "on,off").split(",");
  out(
    `cohort liveness bench  (${os.cpus().length} CPUs, node ${process.version}, hold ${hold}, load ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")})`,
  );
  const { bundle } = (await import("../scripts/bundle.mjs")) as typeof import("../scripts/bundle.mjs");
  const built = await bundle({ outfile: path.join(WORK, "cohort.cjs") });
  const member = listener();
  out(`members: ${member.kind} listener, tcp readiness; modes: ${modes.join(", ")}`);
  out(`  ${"members".padEnd(8)} ${"mode".padEnd(14)} ${"time to ready".padStart(14)} ${"runtime CPU".padStart(12)} ${"peak RSS".padStart(10)} ${"wall".padStart(8)}  unhealthy`);
  for (const size of sizes) {
    for (const mode of modes) {
      const f = await runOnce(built.outfile, member.command, size, hold, mode);
      out(
        `  ${String(size).padEnd(8)} ${mode.padEnd(14)} ${`${(f.timeToReadyMs / 1000).toFixed(3)} s`.padStart(14)} ${`${(f.cpuMs / 1000).toFixed(2)} s`.padStart(12)} ${`${(f.maxRssKiB / 1024).toFixed(1)} MiB`.padStart(10)} ${`${(f.wallMs / 1000).toFixed(1)} s`.padStart(8)}  ${f.livenessRecords}`,
      );
    }
  }
  out(
    `load average after: ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`,
  );
  if (process.env.BENCH_KEEP !== "1") fs.rmSync(WORK, { recursive: true, force: true });
  else out(`artifacts kept in ${WORK}`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});

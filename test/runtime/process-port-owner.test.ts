/**
 * Issue #12, finding 4, with real child processes and the real scheduler, process backend and ledger writer:
 * a stranger listening on a member's port does not make the member ready (the listener must be in the
 * member's own process tree: /proc/net/tcp{,6} and /proc/<pid>/fd), and a member that exits with
 * EADDRINUSE gets a reason naming the port and who holds it. Linux only (/proc).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ProcessBackend } from "../../runtime/backends/process/index";
import { runCohort, tempDir } from "./process-helpers";

const sh = (script: string) => ["sh", "-c", script];

const strangers: ChildProcess[] = [];
afterEach(() => {
  for (const child of strangers.splice(0)) child.kill("SIGKILL");
});

/** A process that listens on 127.0.0.1:`port` (the stranger). Resolves once it listens. */
function stranger(port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", `require("net").createServer(()=>{}).listen(${port},"127.0.0.1",()=>console.log("up"))`], { stdio: ["ignore", "pipe", "inherit"] });
  strangers.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.once("data", () => resolve(child));
    child.once("exit", (code) => reject(new Error(`the stranger exited (${code})`)));
  });
}

/** Waits for `<runDir>/members/<member>/port.txt` (the member writes its COHORT_PORT there) and returns the port. */
async function memberPort(runDir: string, member: string): Promise<number> {
  const file = path.join(runDir, "members", member, "port.txt");
  for (;;) {
    try {
      const text = fs.readFileSync(file, "utf8");
      if (text.endsWith("\n")) return Number(text.trim());
    } catch {
      // not yet
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const nodeListener = [process.execPath, "-e", `require("net").createServer().listen(+process.env.COHORT_PORT, "127.0.0.1")`];
const commandOf = (pid: number) => fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim();

describe.runIf(process.platform === "linux")("a stranger on a member's port", () => {
  /**
   * A member that writes its port, then takes 4 s before it would listen, while a stranger takes the port: the run
   * must fail at the member's 2 s deadline naming the stranger's pid and command.
   */
  async function strangerHoldsThePort(hooks: Parameters<typeof runCohort>[2] = {}): Promise<Awaited<ReturnType<typeof runCohort>>> {
    let held: Promise<ChildProcess> | null = null;
    const run = await runCohort(
      [
        {
          name: "agent",
          app: {
            command: sh('echo "$COHORT_PORT" > port.txt; sleep 4; exec "$0" -e "require(\\"net\\").createServer().listen(+process.env.COHORT_PORT)"').concat([process.execPath]),
          },
          readiness: { tcp: {} },
        },
      ],
      { memberTimeout: "2s" },
      { ...hooks, onRunDir: (runDir) => (held = memberPort(runDir, "agent-0").then(stranger)) },
    );
    const child = await held!;
    const port = Number(fs.readFileSync(path.join(run.runDir, "members", "agent-0", "port.txt"), "utf8"));
    expect(run.result.outcome).toBe("failed");
    expect(run.result.firstFailure?.member).toBe("agent-0");
    expect(run.result.firstFailure!.reason.split("\n")[0]).toMatch(
      new RegExp(
        `^member agent-0 was not ready within 2s \\(memberTimeout\\); last tcp 127\\.0\\.0\\.1:${port} probe: port ${port} is held by pid ${child.pid} \\(${commandOf(child.pid!)}\\), not by member agent-0 \\(\\d+ attempts\\)$`,
      ),
    );
    return run;
  }

  it("does not make the member ready: the run fails at the member's deadline, naming the stranger's pid and command", async () => {
    await strangerHoldsThePort();
  });

  it("with the compiled launcher the owner check asks the kernel (sock_diag lookup): a stranger is named with /proc/net/tcp unreadable, and no warning", async () => {
    const missing = path.join(tempDir("no-proc-net"), "tcp");
    const { records } = await strangerHoldsThePort({ launcher: "native", procNetTcp: [missing, `${missing}6`] });
    expect(records.filter((r) => r.kind === "backend-warning")).toEqual([]);
  });

  it("with portOwner=off (a port served on the member's behalf, e.g. by docker-proxy) any listener makes it ready, as before", async () => {
    let held: Promise<ChildProcess> | null = null;
    const { result } = await runCohort(
      [{ name: "agent", app: { command: sh('echo "$COHORT_PORT" > port.txt; exec sleep 1000') }, readiness: { tcp: {} } }],
      { memberTimeout: "5s" },
      { portOwner: "off", onRunDir: (runDir) => (held = memberPort(runDir, "agent-0").then(stranger)) },
    );
    await held!;
    expect(result.outcome).toBe("succeeded");
  });

  it("with the perl launcher (no sock_diag lookup) where /proc/net/tcp cannot be read: the connect alone decides, as before, and one backend-warning record says so", async () => {
    const missing = path.join(tempDir("no-proc-net"), "tcp");
    const { result, records } = await runCohort(
      [{ name: "web", replicas: 2, app: { command: nodeListener }, readiness: { tcp: {} } }],
      {},
      { launcher: "perl", procNetTcp: [missing, `${missing}6`] },
    );
    expect(result.outcome).toBe("succeeded");
    expect(records.filter((r) => r.kind === "backend-warning")).toEqual([
      expect.objectContaining({
        backend: "process",
        topic: "port-owner",
        message: expect.stringMatching(/^cannot read \/proc\/net\/tcp or \/proc\/net\/tcp6: tcp\/http readiness probes accept any listener/),
      }),
    ]);
  });

  it("a member that exits with EADDRINUSE before it is ready: the reason names the port and who holds it", async () => {
    let held: Promise<ChildProcess> | null = null;
    const { result, runDir } = await runCohort(
      [
        {
          name: "agent",
          app: {
            command: sh('echo "$COHORT_PORT" > port.txt; sleep 1; exec "$0" -e "require(\\"net\\").createServer().listen(+process.env.COHORT_PORT,\\"127.0.0.1\\")"').concat([
              process.execPath,
            ]),
          },
          readiness: { tcp: {} },
        },
      ],
      { memberTimeout: "10s" },
      { onRunDir: (dir) => (held = memberPort(dir, "agent-0").then(stranger)) },
    );
    const child = await held!;
    const port = Number(fs.readFileSync(path.join(runDir, "members", "agent-0", "port.txt"), "utf8"));
    expect(result.outcome).toBe("failed");
    expect(result.firstFailure!.reason.split("\n")[0]).toBe(
      `member agent-0 exited before it was ready (exit code 1): port ${port} was already in use (EADDRINUSE), held by pid ${child.pid} (${commandOf(child.pid!)})`,
    );
  });

  it.each(["native", "perl"] as const)(
    "the member's own listener, in a child of its leader, is the member's (the run succeeds); the cost of one owner check is printed (launcher %s)",
    async (launcher) => {
      const { result, records } = await runCohort([
        {
          name: "web",
          app: { command: sh(`"$0" -e 'require("http").createServer((q,s)=>s.end("ok")).listen(+process.env.COHORT_PORT)' & wait`).concat([process.execPath]) },
          readiness: { http: { path: "/" } },
        },
      ]);
      expect(result.outcome).toBe("succeeded");
      expect(records.find((r) => r.kind === "member-ready")).toMatchObject({ member: "web-0", probe: "http" });

      // The check alone, against a live member (no assertion on the figure: it depends on the host's load).
      const runDir = path.join(tempDir("owner"), "run");
      const backend = new ProcessBackend({ runDir, events: () => undefined, launcher });
      await backend.available();
      const signal = new AbortController().signal;
      const port = (await backend.endpoints([{ id: "m-0", role: "m", index: 0, wantsPort: true }], signal)).get("m-0")!.port;
      const plan = {
        id: "m-0",
        role: "m",
        index: 0,
        runId: "owner-check",
        command: sh(`"$0" -e 'require("net").createServer().listen(${port})' & wait`).concat([process.execPath]),
        env: { COHORT_RUN_ID: "owner-check" },
        secretEnv: [],
        image: "",
        resources: {},
        port,
        workDir: path.join(runDir, "members", "m-0"),
        files: {},
      };
      const handle = await backend.start(plan, signal);
      try {
        // The compiled launcher watches the port (sock_diag), the perl one cannot: its handle has no whenListening.
        if (launcher === "perl") expect(handle.whenListening).toBeUndefined();
        else await handle.whenListening!(port, signal);
        let owner = await handle.listenerOwner!(port);
        for (let i = 0; i < 500 && owner.owner !== "member"; i++) {
          await new Promise((resolve) => setTimeout(resolve, 10));
          owner = await handle.listenerOwner!(port);
        }
        expect(owner).toMatchObject({ owner: "member" });
        expect((owner as { pid: number }).pid).not.toBe(handle.detail!.pid); // the listener is the leader's child
        const rounds = 50;
        let started = performance.now();
        for (let i = 0; i < rounds; i++) await handle.listenerOwner!(port);
        const one = (performance.now() - started) / rounds;
        started = performance.now();
        await Promise.all(Array.from({ length: rounds }, () => handle.listenerOwner!(port)));
        const together = performance.now() - started;
        const sockets = ["/proc/net/tcp", "/proc/net/tcp6"].map((f) => fs.readFileSync(f, "utf8").split("\n").length - 2).reduce((a, b) => a + b, 0);
        console.log(
          `owner check (launcher ${launcher}): ${one.toFixed(2)} ms each, one after another; ${rounds} at once: ${together.toFixed(2)} ms in all (${sockets} TCP sockets on the host)`,
        );
      } finally {
        await backend.stop("m-0", 1_000);
        await backend.close();
      }
    },
  );
});

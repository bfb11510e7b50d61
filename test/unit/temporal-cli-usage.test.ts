/**
 * runtime/temporal/cli.ts `main` on bad input, with no Temporal server: usage errors exit 2 with one line, an
 * unreachable server makes `open-runs` exit 1 with one line naming the address (the `worker-guard` step reports
 * the last lines of its stderr), and `worker --ready-file` refuses an unusable file before connecting and removes
 * a file a dead worker left; `submit --sole` checks the RunSpec and the task queue before it connects.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../runtime/temporal/cli.js";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-temporal-cli-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (d) => (out += String(d)));
  stderr.on("data", (d) => (err += String(d)));
  const code = await main(argv, { stdout, stderr, stdin: () => "" });
  return { code, stdout: out, stderr: err };
}

describe("cohort open-runs", () => {
  it("exits 2 on an unexpected positional argument, with one line and no stack", async () => {
    const r = await cli(["open-runs", "--temporal-address", "127.0.0.1:1", "--task-queue", "q", "extra"]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain("Unexpected argument 'extra'");
  });

  it("refuses a task queue that would end the visibility query's string literal", async () => {
    const r = await cli(["open-runs", "--temporal-address", "127.0.0.1:1", "--task-queue", "q' OR TaskQueue = 'x"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--task-queue must be letters, digits");
  });

  it("refuses a --wait-s that is not plain digits, and an empty --namespace, before connecting", async () => {
    for (const w of ["", " 3", "0x3", "1e3", "-1"]) {
      const r = await cli(["open-runs", "--temporal-address", "127.0.0.1:1", "--task-queue", "q", `--wait-s=${w}`]);
      expect(r.code, w).toBe(2);
      expect(r.stderr, w).toContain("--wait-s must be an integer >= 0");
    }
    const r = await cli(["open-runs", "--temporal-address", "127.0.0.1:1", "--task-queue", "q", "--namespace="]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--namespace must not be empty");
  });

  it("exits 1 with one line naming the address when Temporal stays unreachable", { timeout: 30_000 }, async () => {
    const r = await cli(["open-runs", "--temporal-address", "127.0.0.1:1", "--task-queue", "q", "--wait-s", "0"]);
    expect(r.code).toBe(1);
    const last = r.stderr.trim().split("\n").at(-1);
    expect(last).toMatch(/^cohort: open-runs: Temporal at 127\.0\.0\.1:1 unreachable for 0 s \(--wait-s\): /);
    expect(r.stderr).not.toContain("    at ");
  });
});

describe("cohort submit --sole", () => {
  const base = ["submit", "--temporal-address", "127.0.0.1:1", "--workflow-id", "w", "--artifacts", tmp, "--sole"];

  it("refuses a bad RunSpec, naming the field, before it connects to list the open runs", { timeout: 10_000 }, async () => {
    const spec = path.join(tmp, "bad-spec.json");
    fs.writeFileSync(spec, JSON.stringify({ name: "x", roles: [{ name: "a", replicas: -1, app: { command: ["true"] } }] }));
    const started = Date.now();
    const r = await cli([...base, "--task-queue", "q", "--spec", spec]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/replicas/);
    expect(r.stderr).not.toContain("unreachable");
    // Nothing waited on the unreachable address (its retries start at 1 s).
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("refuses a task queue that would end the visibility query's string literal", async () => {
    const r = await cli([...base, "--task-queue", "q'", "--spec", "-"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("submit: --task-queue must be letters, digits");
  });
});

describe("cohort worker --ready-file", () => {
  const backend = path.join(tmp, "backend.json");
  fs.writeFileSync(backend, "{}");
  const args = (readyFile: string) => ["worker", "--temporal-address", "127.0.0.1:1", "--task-queue", "q", "--backend-config", backend, "--ready-file", readyFile];

  it("refuses a directory, or a file in a directory it cannot create, before connecting", async () => {
    const dir = path.join(tmp, "a-directory");
    fs.mkdirSync(dir);
    const r = await cli(args(dir));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--ready-file ${dir} cannot be written`);
    const blocker = path.join(tmp, "a-file");
    fs.writeFileSync(blocker, "");
    const under = await cli(args(path.join(blocker, "ready")));
    expect(under.code).toBe(2);
    expect(under.stderr).toContain("cannot be written");
  });

  it("removes a ready file a dead worker left before anything else can fail", async () => {
    const stale = path.join(tmp, "stale.ready");
    fs.writeFileSync(stale, "12345\n");
    // A missing backend config fails the worker after the ready file's check: the stale file is gone by then.
    const r = await cli(["worker", "--temporal-address", "127.0.0.1:1", "--task-queue", "q", "--backend-config", path.join(tmp, "none.json"), "--ready-file", stale]);
    expect(r.code).not.toBe(0);
    expect(fs.existsSync(stale)).toBe(false);
  });
});

describe("--temporal-address, --task-queue and --backend-config are checked before anything connects", () => {
  const backend = path.join(tmp, "backend-ok.yaml");
  fs.writeFileSync(backend, "namespace: x\n");
  const spec = path.join(tmp, "ok-spec.json");
  fs.writeFileSync(spec, JSON.stringify({ apiVersion: "cohort-lab/v1", kind: "Cohort", name: "x", roles: [{ name: "a", app: { command: ["true"] } }] }));
  const commands = (address: string, taskQueue = "q"): Record<string, string[]> => ({
    worker: ["worker", "--temporal-address", address, "--task-queue", taskQueue, "--backend-config", backend],
    submit: ["submit", "--temporal-address", address, "--task-queue", taskQueue, "--workflow-id", "w", "--artifacts", tmp, "--spec", spec],
    "open-runs": ["open-runs", "--temporal-address", address, "--task-queue", taskQueue, "--wait-s", "60"],
  });

  it("refuses an address whose port is out of range or missing, naming the flag and the reason, at once (exit 2, one line)", { timeout: 10_000 }, async () => {
    const cases: [string, string][] = [
      ["host:99999", "port 99999 is out of range"],
      ["host:0", "port 0 is out of range"],
      ["host", "no port"],
      [":7233", "no host"],
      ["host:72a", 'port "72a" is not a decimal number'],
      ["::1:7233", "not in the form HOST:PORT"],
    ];
    for (const [address, reason] of cases) {
      for (const [command, argv] of Object.entries(commands(address))) {
        const started = Date.now();
        const r = await cli(argv);
        expect(r.code, `${command} ${address}`).toBe(2);
        expect(r.stderr, `${command} ${address}`).toBe(
          `cohort: ${command}: --temporal-address must be HOST:PORT with a port from 1 to 65535: ${reason} (got ${JSON.stringify(address)})\n`,
        );
        expect(Date.now() - started).toBeLessThan(1_000);
      }
    }
  });

  it("accepts host:port, an IPv6 address in brackets and the ports 1 and 65535 (they fail later, unreachable)", async () => {
    for (const address of ["127.0.0.1:1", "[::1]:65535", "temporal-frontend.ns.svc:7233"]) {
      const r = await cli(["open-runs", "--temporal-address", address, "--task-queue", "q", "--wait-s", "0"]);
      expect(r.stderr, address).not.toContain("--temporal-address must be");
    }
  }, 60_000);

  it("the same --task-queue rule for worker, submit and open-runs", async () => {
    for (const [command, argv] of Object.entries(commands("127.0.0.1:1", "q' OR TaskQueue = 'x"))) {
      const r = await cli(argv);
      expect(r.code, command).toBe(2);
      expect(r.stderr, command).toContain(`cohort: ${command}: --task-queue must be letters, digits and - _ . /`);
    }
  });

  it("worker: a --backend-config that is missing, a directory, not YAML or not a mapping is one line naming the flag, the path and the reason (exit 2)", async () => {
    const bad = path.join(tmp, "bad.yaml");
    fs.writeFileSync(bad, "a: [1, 2\n");
    const list = path.join(tmp, "list.yaml");
    fs.writeFileSync(list, "- 1\n");
    const cases: [string, string][] = [
      ["/nonexistent", "does not exist"],
      [tmp, "is a directory"],
      [bad, "not valid YAML: "],
      [list, "expected a mapping"],
    ];
    for (const [file, reason] of cases) {
      const r = await cli(["worker", "--temporal-address", "127.0.0.1:1", "--task-queue", "q", "--backend-config", file]);
      expect(r.code, file).toBe(2);
      expect(r.stderr.split("\n"), file).toHaveLength(2);
      expect(r.stderr, file).toContain(`cohort: worker: --backend-config ${file}: ${reason}`);
      expect(r.stderr, file).not.toContain("    at ");
    }
  });
});

/**
 * The Multipass stand-in (test/tools/multipass/) against its contract: Multipass 1.16's verbs, JSON, messages and
 * exit codes, with real instances (systemd as PID 1, cloud-init from a NoCloud seed, an address on the test's
 * bridge), the launch-timeout fault knob, and delete/purge leaving no process, mount or veth behind.
 *
 * Needs root and `npm run toolchain -- multipass`; skips with the reason otherwise. Run: `npm run test:multipass --
 * test/multipass/standin.test.ts`.
 */
import * as fs from "node:fs";
import * as http from "node:http";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { standinUnavailableReason, startStandin, type Standin } from "../tools/multipass/harness";

const skip = standinUnavailableReason();

const USER_DATA = `#cloud-config
users:
  - default
write_files:
  - path: /etc/cohort-standin/marker
    content: "written by cloud-init\\n"
runcmd:
  - [sh, -c, "echo runcmd-ran > /var/tmp/runcmd"]
`;

interface InfoJson {
  errors: unknown[];
  info: Record<
    string,
    {
      state: string;
      ipv4: string[];
      release: string;
      cpu_count: string;
      image_release: string;
      memory: { total?: number; used?: number };
      disks: Record<string, { total: string }>;
      load: number[];
    }
  >;
}

function httpGet(url: string, timeoutMs = 2000): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
  });
}

/** Processes whose command line mentions `needle` (the harness's state directory). */
function processesMentioning(needle: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, "utf8").replace(/\0/g, " ");
      const stat = fs.readFileSync(`/proc/${e}/stat`, "utf8");
      if (cmd.includes(needle) && !/\) Z /.test(stat)) out.push(`${e}: ${cmd}`);
    } catch {
      // exited
    }
  }
  return out;
}

describe.skipIf(skip !== undefined)(`multipass stand-in${skip !== undefined ? ` (skipped: ${skip})` : ""}`, () => {
  let mp: Standin;
  let state: string;
  const mpx = async (args: readonly string[], o: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ exitCode: number; stdout: string; stderr: string }> => {
    const r = await execa(mp.bin, args, { env: o.env ?? { ...process.env, ...mp.env }, input: o.input, reject: false });
    return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
  };
  const times: Record<string, number> = {};

  beforeAll(async () => {
    mp = await startStandin();
    state = mp.env.MULTIPASS_STANDIN_STATE as string;
  });
  afterAll(async () => {
    await mp?.stop();
    if (state !== undefined) {
      expect(processesMentioning(state)).toEqual([]);
      expect(fs.readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(state);
      expect(fs.existsSync(`/sys/class/net/${mp.bridge}`)).toBe(false);
    }
    process.stderr.write(`stand-in launch to cloud-init done (s): ${JSON.stringify(times)}\n`);
  });

  it("version, and Multipass's message and exit code for an instance that does not exist", async () => {
    const v = await mpx(["version"]);
    expect(v.exitCode).toBe(0);
    expect(v.stdout).toMatch(/^multipass\s+1\.16\.3\+cohort-standin\nmultipassd\s+1\.16\.3\+cohort-standin$/);
    for (const verb of ["info", "delete", "exec", "start", "stop"]) {
      const r = await mpx(verb === "exec" ? [verb, "nope", "--", "true"] : [verb, "nope"]);
      expect(r.exitCode, verb).toBe(2);
      expect(r.stderr, verb).toBe(`${verb} failed: instance "nope" does not exist`);
    }
    const l = await mpx(["list", "--format", "json"]);
    expect(JSON.parse(l.stdout)).toEqual({ list: [] });
  });

  it("launches two instances in parallel: cloud-init done, write_files written, systemd PID 1 running, info JSON with the IPv4", async () => {
    const launchOne = async (name: string) => {
      const t0 = Date.now();
      const r = await mpx(["launch", "--name", name, "--cpus", "2", "--memory", "1G", "--disk", "5G", "--cloud-init", "-", "24.04"], { input: USER_DATA });
      expect(r.stderr).toBe("");
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toBe(`Launched: ${name}`);
      const w = await mpx(["exec", name, "--", "cloud-init", "status", "--wait"]);
      times[name] = (Date.now() - t0) / 1000;
      expect(w.exitCode, w.stdout + w.stderr).toBe(0);
      expect(w.stdout).toMatch(/status: done/);
    };
    await Promise.all([launchOne("m1"), launchOne("m2")]);

    const info = JSON.parse((await mpx(["info", "m1", "m2", "--format", "json"])).stdout) as InfoJson;
    expect(info.errors).toEqual([]);
    const addrs: string[] = [];
    for (const name of ["m1", "m2"]) {
      const i = info.info[name];
      expect(i?.state).toBe("Running");
      expect(i?.cpu_count).toBe("2");
      expect(i?.release).toBe("Debian GNU/Linux 12 (bookworm)");
      expect(i?.memory.total).toBe(1024 ** 3);
      expect(typeof i?.memory.used).toBe("number");
      expect(i?.disks.sda1?.total).toBe(String(5 * 1024 ** 3));
      expect(i?.load).toHaveLength(3);
      expect(i?.ipv4).toHaveLength(1);
      const ip = i?.ipv4[0] as string;
      expect(ip.split(".").slice(0, 3)).toEqual(mp.hostAddress.split(".").slice(0, 3));
      addrs.push(ip);

      expect((await mpx(["exec", name, "--", "cat", "/etc/cohort-standin/marker"])).stdout).toBe("written by cloud-init");
      expect((await mpx(["exec", name, "--", "cat", "/var/tmp/runcmd"])).stdout).toBe("runcmd-ran");
      expect((await mpx(["exec", name, "--", "cat", "/proc/1/comm"])).stdout).toBe("systemd");
      const sr = await mpx(["exec", name, "--", "systemctl", "is-system-running", "--wait"]);
      expect(sr.stdout.trim(), (await mpx(["exec", name, "--", "systemctl", "--failed", "--no-pager"])).stdout).toMatch(/^(running|degraded)$/);
      // exec runs as `ubuntu` (Multipass's SSH user) with a login-like environment; sudo works without a password.
      expect((await mpx(["exec", name, "--", "id", "-un"])).stdout).toBe("ubuntu");
      // cloud-init put the hostname in /etc/hosts (manage_etc_hosts, as Multipass's vendor-data): sudo resolves it.
      expect(await mpx(["exec", name, "--", "sudo", "-n", "id", "-un"])).toEqual({ exitCode: 0, stdout: "root", stderr: "" });
      expect((await mpx(["exec", name, "--", "sh", "-c", "echo $PATH; hostname"])).stdout).toBe(`/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n${name}`);
    }
    expect(new Set(addrs).size).toBe(2);
    // exec passes stdin, stdout, stderr and the exit code through.
    const e = await mpx(["exec", "m1", "--", "sh", "-c", "cat; echo err >&2; exit 7"], { input: "from stdin" });
    expect([e.exitCode, e.stdout, e.stderr]).toEqual([7, "from stdin", "err"]);
    // The instances reach each other across the bridge.
    expect((await mpx(["exec", "m1", "--", "python3", "-c", `import socket; socket.create_connection(("${addrs[1]}", 22), 2)`])).stderr).toMatch(/ConnectionRefused/);

    const list = JSON.parse((await mpx(["list", "--format", "json"])).stdout) as { list: { name: string; state: string; ipv4: string[]; release: string }[] };
    expect(list.list.map((r) => [r.name, r.state, r.ipv4])).toEqual([
      ["m1", "Running", [addrs[0]]],
      ["m2", "Running", [addrs[1]]],
    ]);
    const dup = await mpx(["launch", "--name", "m1"]);
    expect([dup.exitCode, dup.stderr]).toEqual([2, 'launch failed: instance "m1" already exists']);
  });

  it("a transient unit's TCP port is reachable from the host across the bridge; systemctl sees it active, then stopped", async () => {
    const ip = (JSON.parse((await mpx(["info", "m1", "--format", "json"])).stdout) as InfoJson).info.m1?.ipv4[0] as string;
    const run = await mpx(["exec", "m1", "--", "sudo", "systemd-run", "--unit=t1", "python3", "-m", "http.server", "8080"]);
    expect(run.exitCode, run.stderr).toBe(0);
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = await httpGet(`http://${ip}:8080/`).catch(() => 0);
      if (status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(200);
    expect((await mpx(["exec", "m1", "--", "systemctl", "is-active", "t1"])).stdout).toBe("active");
    expect((await mpx(["exec", "m1", "--", "sudo", "systemctl", "stop", "t1"])).exitCode).toBe(0);
    const after = await mpx(["exec", "m1", "--", "systemctl", "is-active", "t1"]);
    expect([after.exitCode, after.stdout]).toEqual([3, "inactive"]);
    await expect(httpGet(`http://${ip}:8080/`)).rejects.toThrow(/ECONNREFUSED/);
  });

  it("the launch-timeout knob: launch fails as Multipass does while the instance comes up; a relaunch is refused", async () => {
    const t0 = Date.now();
    const r = await mpx(["launch", "--name", "slow", "--cloud-init", "-"], { input: USER_DATA, env: { ...process.env, ...mp.env, MULTIPASS_STANDIN_LAUNCH_TIMEOUT_AFTER: "1" } });
    expect([r.exitCode, r.stderr]).toEqual([2, "launch failed: timed out waiting for initialization to complete"]);
    expect(Date.now() - t0).toBeLessThan(8000);
    const again = await mpx(["launch", "--name", "slow"]);
    expect([again.exitCode, again.stderr]).toEqual([2, 'launch failed: instance "slow" already exists']);
    const w = await mpx(["exec", "slow", "--", "cloud-init", "status", "--wait"]);
    expect(w.exitCode, w.stderr).toBe(0);
    expect((await mpx(["exec", "slow", "--", "cat", "/etc/cohort-standin/marker"])).stdout).toBe("written by cloud-init");
    const i = JSON.parse((await mpx(["info", "slow", "--format", "json"])).stdout) as InfoJson;
    expect(i.info.slow?.state).toBe("Running");
    const c = await mpx(["launch", "--name", "x", "--cpus", "two"]);
    expect([c.exitCode, c.stderr]).toEqual([1, "error: Invalid CPU count 'two', need a positive integer value."]);
  });

  it("stop/start, delete (Deleted, name still taken), purge, delete --purge: nothing left behind", async () => {
    expect((await mpx(["stop", "m2"])).exitCode).toBe(0);
    const stopped = JSON.parse((await mpx(["info", "m2", "--format", "json"])).stdout) as InfoJson;
    expect([stopped.info.m2?.state, stopped.info.m2?.ipv4, stopped.info.m2?.release]).toEqual(["Stopped", [], "Not Available"]);
    expect((await mpx(["start", "m2"])).exitCode).toBe(0);
    expect((await mpx(["exec", "m2", "--", "cat", "/etc/cohort-standin/marker"])).stdout).toBe("written by cloud-init");

    const dir = `${state}/instances/m2`;
    expect((await mpx(["delete", "m2"])).exitCode).toBe(0);
    const del = JSON.parse((await mpx(["info", "m2", "--format", "json"])).stdout) as InfoJson;
    expect([del.info.m2?.state, del.info.m2?.ipv4]).toEqual(["Deleted", []]);
    expect(processesMentioning(dir)).toEqual([]);
    expect(fs.readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(dir);
    const ex = await mpx(["exec", "m2", "--", "true"]);
    expect([ex.exitCode, ex.stderr]).toEqual([2, 'exec failed: instance "m2" is deleted']);
    expect((await mpx(["launch", "--name", "m2"])).stderr).toBe('launch failed: instance "m2" already exists');
    expect((await mpx(["purge"])).exitCode).toBe(0);
    expect((await mpx(["info", "m2"])).stderr).toBe('info failed: instance "m2" does not exist');

    const rec = JSON.parse(fs.readFileSync(`${state}/instances/slow/instance.json`, "utf8")) as { hostIf: string };
    expect(fs.existsSync(`/sys/class/net/${rec.hostIf}`)).toBe(true);
    expect((await mpx(["delete", "--purge", "slow"])).exitCode).toBe(0);
    expect(fs.existsSync(`/sys/class/net/${rec.hostIf}`)).toBe(false);
    expect(processesMentioning(`${state}/instances/slow`)).toEqual([]);
    const again = await mpx(["delete", "--purge", "slow"]);
    expect([again.exitCode, again.stderr]).toEqual([2, 'delete failed: instance "slow" does not exist']);
    const list = JSON.parse((await mpx(["list", "--format", "json"])).stdout) as { list: { name: string }[] };
    expect(list.list.map((r) => r.name)).toEqual(["m1"]);
  });
});

/**
 * MultipassFleet through the real Pulumi engine (the pinned CLI through the launcher, a file backend, a temp project
 * whose program is test/multipass/fleet-program.ts) against the Multipass stand-in: `up` launches two VMs and
 * exports their IPv4s, a second `preview --expect-no-changes` passes, a VM deleted by hand is launched again by a
 * plain `up` (the other VM keeps its machine-id and PID 1 start time) after which a preview has no changes, a VM
 * deleted by hand does not block `destroy`, and `destroy` purges the rest.
 *
 * Needs root and `npm run toolchain -- multipass`. Run: `npm run test:multipass -- test/multipass/fleet-engine.test.ts`.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../../common/paths";
import { multipass } from "../../common/pins";
import { standinUnavailableReason, startStandin, type Standin } from "../tools/multipass/harness";

const skip = standinUnavailableReason();
/** A stand-in secret in the user-data: it must reach the VM and never the state in clear text. */
const SENTINEL = "sentinel-token-5f1c2a";

describe.skipIf(skip !== undefined)(`MultipassFleet with the real engine against the stand-in${skip !== undefined ? ` (skipped: ${skip})` : ""}`, () => {
  let mp: Standin;
  let tmp: string;
  let env: NodeJS.ProcessEnv;
  const projectDir = () => path.join(tmp, "project");
  const pulumi = async (args: readonly string[]) => {
    const started = performance.now();
    const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir(), ...args], { cwd: repoRoot, env, reject: false, all: true, stdin: "ignore" });
    const out = { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), all: String(r.all), s: (performance.now() - started) / 1000 };
    if (out.exitCode !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${out.exitCode}:\n${out.all.slice(-6000)}`);
    return out;
  };
  const list = async () => {
    const r = await execa(mp.bin, ["list", "--format", "json"], { env: { ...process.env, ...mp.env } });
    return (JSON.parse(String(r.stdout)) as { list: { name: string; state: string }[] }).list.map((i) => `${i.name}:${i.state}`);
  };

  beforeAll(async () => {
    mp = await startStandin();
    tmp = mkdtempSync(path.join(os.tmpdir(), "mpfleet-engine-"));
    mkdirSync(projectDir(), { recursive: true });
    mkdirSync(path.join(tmp, "state"));
    writeFileSync(
      path.join(projectDir(), "Pulumi.yaml"),
      `name: mpfleet-test\nruntime:\n  name: nodejs\n  options:\n    typescript: true\nmain: ${path.join(repoRoot, "test/multipass/fleet-program.ts")}\n`,
    );
    symlinkSync(path.join(repoRoot, "node_modules"), path.join(projectDir(), "node_modules"));
    const args = {
      prefix: "eng",
      image: multipass.image,
      machines: [
        { name: "a", cpus: 1, memory: "1G", disk: "5G" },
        { name: "b", cpus: 2, memory: "1G", disk: "5G" },
      ],
      userData: `#cloud-config\nusers:\n  - default\nwrite_files:\n  - path: /etc/app-token\n    content: ${SENTINEL}\n`,
      multipass: mp.bin,
      environment: mp.env,
      launchTimeoutSeconds: 120,
    };
    env = {
      ...process.env,
      COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`,
      PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local",
      NO_COLOR: "1",
      MPFLEET_ARGS: JSON.stringify(args),
    };
    await pulumi(["stack", "select", "--create", "dev"]);
  });
  afterAll(async () => {
    if (tmp !== undefined) {
      await pulumi(["destroy", "--yes", "--skip-preview", "--stack", "dev"]).catch(() => undefined);
      rmSync(tmp, { recursive: true, force: true });
    }
    await mp?.stop();
  });

  it("up: two VMs with their IPv4s; a second preview changes nothing; a VM deleted by hand: a plain up relaunches exactly it; no changes after; deleted again, destroy purges the rest", async () => {
    const up = await pulumi(["up", "--yes", "--skip-preview", "--stack", "dev"]);
    process.stderr.write(`pulumi up (2 VMs): ${up.s.toFixed(1)} s\n`);
    const out = JSON.parse((await pulumi(["stack", "output", "--json", "--stack", "dev"])).stdout) as { instances: { machine: string; instance: string; ipv4: string }[] };
    expect(out.instances.map((i) => [i.machine, i.instance])).toEqual([
      ["a", "eng-a"],
      ["b", "eng-b"],
    ]);
    for (const i of out.instances) expect(i.ipv4.split(".").slice(0, 3)).toEqual(mp.hostAddress.split(".").slice(0, 3));
    expect(await list()).toEqual(["eng-a:Running", "eng-b:Running"]);
    const token = await execa(mp.bin, ["exec", "eng-b", "--", "cat", "/etc/app-token"], { env: { ...process.env, ...mp.env } });
    expect(String(token.stdout)).toBe(SENTINEL);
    expect((await pulumi(["stack", "export", "--stack", "dev"])).stdout).not.toContain(SENTINEL);

    const preview = await pulumi(["preview", "--expect-no-changes", "--stack", "dev"]);
    process.stderr.write(`pulumi preview --expect-no-changes: ${preview.s.toFixed(1)} s\n`);

    // Deleted by hand: a plain `up` launches exactly that VM again (a fresh launch id), the other one untouched.
    const identity = async (vm: string) =>
      String(
        (
          await execa(mp.bin, ["exec", vm, "--", "sh", "-c", "cat /etc/machine-id; cut -d' ' -f22 /proc/1/stat; cat /etc/cohort-lab/multipass-owner"], {
            env: { ...process.env, ...mp.env },
          })
        ).stdout,
      );
    const [a0, b0] = [await identity("eng-a"), await identity("eng-b")];
    expect(a0).toMatch(/\ncohort-lab\/mpfleet-test\/dev\nlaunch-id: [0-9a-f]{16}$/);
    await execa(mp.bin, ["delete", "--purge", "eng-a"], { env: { ...process.env, ...mp.env } });
    expect(await list()).toEqual(["eng-b:Running"]);
    const relaunch = await pulumi(["up", "--yes", "--skip-preview", "--stack", "dev"]);
    process.stderr.write(`pulumi up after eng-a was deleted by hand: ${relaunch.s.toFixed(1)} s\n`);
    expect(relaunch.all).toMatch(/eng-a: does not exist \(deleted out of band\)/);
    expect(relaunch.all).toMatch(/fleet-a\s+replaced/);
    expect(relaunch.all).not.toMatch(/fleet-b\s+replaced|eng-b: (deleted|multipass launch)/);
    expect(await list()).toEqual(["eng-a:Running", "eng-b:Running"]);
    const [a1, b1] = [await identity("eng-a"), await identity("eng-b")];
    expect(b1).toBe(b0);
    // A new instance: another PID 1 start time and launch id (the stand-in derives machine-id from the name).
    expect(a1.split("\n")[1]).not.toBe(a0.split("\n")[1]);
    expect(a1.split("\n").pop()).not.toBe(a0.split("\n").pop());
    const again = JSON.parse((await pulumi(["stack", "output", "--json", "--stack", "dev"])).stdout) as typeof out;
    expect(again.instances[1]).toEqual(out.instances[1]);
    expect(again.instances[0]?.instance).toBe("eng-a");
    await pulumi(["preview", "--expect-no-changes", "--stack", "dev"]);

    await execa(mp.bin, ["delete", "--purge", "eng-a"], { env: { ...process.env, ...mp.env } });
    const destroy = await pulumi(["destroy", "--yes", "--skip-preview", "--stack", "dev"]);
    process.stderr.write(`pulumi destroy: ${destroy.s.toFixed(1)} s\n`);
    expect(destroy.all).toMatch(/eng-a: does not exist \(deleted out of band\)/);
    expect(await list()).toEqual([]);
  });
});

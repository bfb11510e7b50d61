/**
 * `pulumi up --stack multipass` with the real engine (the pinned CLI through the launcher, a file backend, a temp
 * project whose program is this repository's index.ts and whose stack file is the repository's Pulumi.multipass.yaml)
 * against the Multipass stand-in: three VMs, the cohort's roles on different VMs as systemd units, a verified ledger,
 * no unit left after the run, a second `preview --expect-no-changes`, a VM deleted by hand launched again (alone: the
 * others keep their machine-id and PID 1 start time) by a plain `up` that runs the cohort again, no changes after,
 * and `destroy` purging every instance.
 *
 * Needs root and `npm run toolchain -- multipass`. Run: `npm run test:multipass -- test/multipass/stack.test.ts`.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_DIR } from "../../stacks/config";
import { standinUnavailableReason, startStandin, type Standin } from "../tools/multipass/harness";

const bundle = path.join(PROJECT_DIR, "dist", "cohort.cjs");
const skip = standinUnavailableReason() ?? (existsSync(bundle) ? undefined : `${bundle} is missing: npm run build`);

describe.skipIf(skip !== undefined)(`the multipass stack with the real engine against the stand-in${skip !== undefined ? ` (skipped: ${skip})` : ""}`, () => {
  let mp: Standin;
  let tmp: string;
  let env: NodeJS.ProcessEnv;
  const prefix = `st${Math.random().toString(16).slice(2, 8)}`;
  const projectDir = () => path.join(tmp, "project");
  const pulumi = async (args: readonly string[]) => {
    const started = performance.now();
    const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", projectDir(), ...args], { cwd: PROJECT_DIR, env, reject: false, all: true, stdin: "ignore" });
    const out = { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), all: String(r.all), s: (performance.now() - started) / 1000 };
    if (out.exitCode !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${out.exitCode}:\n${out.all.slice(-6000)}`);
    return out;
  };
  const mpExec = async (args: readonly string[]) => execa(mp.bin, args, { env: { ...process.env, ...mp.env }, reject: false });

  beforeAll(async () => {
    mp = await startStandin();
    tmp = mkdtempSync(path.join(os.tmpdir(), "mpstack-engine-"));
    mkdirSync(projectDir(), { recursive: true });
    mkdirSync(path.join(tmp, "state"));
    const project = readFileSync(path.join(PROJECT_DIR, "Pulumi.yaml"), "utf8");
    writeFileSync(path.join(projectDir(), "Pulumi.yaml"), `${project.trimEnd()}\nmain: ${path.join(PROJECT_DIR, "index.ts")}\n`);
    writeFileSync(path.join(projectDir(), "Pulumi.multipass.yaml"), readFileSync(path.join(PROJECT_DIR, "Pulumi.multipass.yaml")));
    symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(projectDir(), "node_modules"));
    env = { ...process.env, COHORT_PULUMI_BACKEND_URL: `file://${path.join(tmp, "state")}`, PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local", NO_COLOR: "1" };
    await pulumi(["stack", "select", "--create", "multipass"]);
    const set = (...kv: string[]) => pulumi(["config", "set", "--plaintext", "--stack", "multipass", ...kv]);
    await set("artifactRoot", path.join(tmp, "artifacts"));
    await set("--path", "multipass.cli", mp.bin);
    await set("--path", "multipass.prefix", prefix);
    await set("--path", "multipass.stateDir", path.join(tmp, "mp-state"));
    await set("--path", "multipass.launchTimeout", "240");
    for (const [k, v] of Object.entries(mp.env)) await set("--path", `multipass.environment.${k}`, v);
  });
  afterAll(async () => {
    if (tmp !== undefined) {
      await pulumi(["destroy", "--yes", "--skip-preview", "--stack", "multipass"]).catch(() => undefined);
      rmSync(tmp, { recursive: true, force: true });
    }
    await mp?.stop();
  });

  it("up: 3 VMs, the roles as units on their VMs, ready across the bridge, a verified ledger; nothing left; no changes after; a VM deleted by hand relaunched alone by a plain up with the cohort; destroy purges", async () => {
    const up = await pulumi(["up", "--yes", "--skip-preview", "--stack", "multipass"]);
    process.stderr.write(`pulumi up --stack multipass (3 VMs, 4 members): ${up.s.toFixed(1)} s\n`);
    const out = JSON.parse((await pulumi(["stack", "output", "--json", "--stack", "multipass"])).stdout) as {
      profile: string;
      run: { id: string; outcome: string; size: number; readyCount: number; ledgerPath: string; timeToReadyMs: number };
    };
    expect(out.profile).toBe("multipass");
    expect(out.run).toMatchObject({ outcome: "succeeded", size: 4, readyCount: 4 });
    process.stderr.write(`time to ready: ${out.run.timeToReadyMs} ms\n`);
    const records = readFileSync(path.join(out.run.ledgerPath, "records.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const placed = Object.fromEntries(records.filter((r) => r.kind === "member-started").map((r) => [r.member, [r.unit, r.instance]]));
    expect(placed).toEqual({
      "api-0": [`cohort-${out.run.id}-api-0.service`, `${prefix}-vm1`],
      "worker-0": [`cohort-${out.run.id}-worker-0.service`, `${prefix}-vm2`],
      "worker-1": [`cohort-${out.run.id}-worker-1.service`, `${prefix}-vm2`],
      "edge-0": [`cohort-${out.run.id}-edge-0.service`, `${prefix}-vm3`],
    });
    const verify = await execa(process.execPath, [bundle, "ledger", "verify", out.run.ledgerPath], { reject: false });
    expect(verify.exitCode, String(verify.stderr)).toBe(0);
    for (const vm of ["vm1", "vm2", "vm3"]) {
      const units = await mpExec(["exec", `${prefix}-${vm}`, "--", "sudo", "-n", "systemctl", "list-units", "--all", "--plain", "--no-legend", `cohort-${out.run.id}-*`]);
      expect(String(units.stdout).trim()).toBe("");
    }
    await pulumi(["preview", "--expect-no-changes", "--stack", "multipass"]);

    // vm2 deleted by hand: a plain `up` launches exactly it again (one new instance) and runs the cohort again.
    const identity = async (vm: string) =>
      String((await mpExec(["exec", `${prefix}-${vm}`, "--", "sh", "-c", "cat /etc/machine-id; cut -d' ' -f22 /proc/1/stat; cat /etc/cohort-lab/multipass-owner"])).stdout);
    const before = { vm1: await identity("vm1"), vm2: await identity("vm2"), vm3: await identity("vm3") };
    expect((await mpExec(["delete", "--purge", `${prefix}-vm2`])).exitCode).toBe(0);
    const relaunch = await pulumi(["up", "--yes", "--skip-preview", "--stack", "multipass"]);
    process.stderr.write(`pulumi up after ${prefix}-vm2 was deleted by hand: ${relaunch.s.toFixed(1)} s\n`);
    expect(relaunch.all).toMatch(new RegExp(`${prefix}-vm2: does not exist \\(deleted out of band\\)`));
    expect(relaunch.all).not.toMatch(new RegExp(`${prefix}-vm[13]: (deleted and purged|multipass launch)`));
    expect(await identity("vm1")).toBe(before.vm1);
    expect(await identity("vm3")).toBe(before.vm3);
    const vm2 = await identity("vm2");
    expect(vm2.split("\n")[1]).not.toBe(before.vm2.split("\n")[1]);
    expect(vm2.split("\n").pop()).not.toBe(before.vm2.split("\n").pop());
    const rerun = (JSON.parse((await pulumi(["stack", "output", "--json", "--stack", "multipass"])).stdout) as typeof out).run;
    expect(rerun).toMatchObject({ outcome: "succeeded", size: 4, readyCount: 4 });
    expect(rerun.id).not.toBe(out.run.id);
    const rerunRecords = readFileSync(path.join(rerun.ledgerPath, "records.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rerunRecords.filter((r) => r.kind === "member-started" && String(r.member).startsWith("worker-")).map((r) => r.instance)).toEqual([`${prefix}-vm2`, `${prefix}-vm2`]);
    await pulumi(["preview", "--expect-no-changes", "--stack", "multipass"]);
    const destroy = await pulumi(["destroy", "--yes", "--skip-preview", "--stack", "multipass"]);
    process.stderr.write(`pulumi destroy --stack multipass: ${destroy.s.toFixed(1)} s\n`);
    const list = JSON.parse(String((await mpExec(["list", "--format", "json"])).stdout)) as { list: { name: string }[] };
    expect(list.list.filter((i) => i.name.startsWith(prefix))).toEqual([]);
  });
});

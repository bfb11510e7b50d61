/**
 * MultipassFleet's steps (components/multipass/steps.cjs) run as real child processes, exactly as its Commands run
 * them, against the Multipass stand-in: a fresh launch, adoption of our own VM, a launch that times out while the VM
 * comes up (reconciled once, no second VM), a foreign VM of the same name (refused, untouched), a VM deleted by hand
 * (delete succeeds), and delete of our VM.
 *
 * Needs root and `npm run toolchain -- multipass`. Run: `npm run test:multipass -- test/multipass/fleet-steps.test.ts`.
 */
import * as path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../../common/paths";
import { MULTIPASS_STEPS_ENTRY, OWNER_FILE, withOwnerMarker } from "../../components/multipass";
import { standinUnavailableReason, startStandin, type Standin } from "../tools/multipass/harness";

const skip = standinUnavailableReason();
const OWNER = "cohort-lab/cohort-lab/fleet-test";
const USER_DATA = `#cloud-config
users:
  - default
write_files:
  - path: /etc/cohort-standin/app
    content: "app config\\n"
`;

interface Result {
  exitCode: number;
  stdout: string;
  stderr: string;
}

describe.skipIf(skip !== undefined)(`MultipassFleet steps against the stand-in${skip !== undefined ? ` (skipped: ${skip})` : ""}`, () => {
  let mp: Standin;
  const cli = async (args: readonly string[], input?: string): Promise<Result> => {
    const r = await execa(mp.bin, args, { env: { ...process.env, ...mp.env }, input, reject: false });
    return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
  };
  const step = async (name: "launch" | "delete", instance: string, extra: Record<string, string> = {}, owner = OWNER): Promise<Result> => {
    const r = await execa(process.execPath, [MULTIPASS_STEPS_ENTRY, name], {
      cwd: repoRoot,
      env: {
        ...process.env,
        ...mp.env,
        ...extra,
        COHORT_MULTIPASS: mp.bin,
        COHORT_MP_INSTANCE: instance,
        COHORT_MP_OWNER: owner,
        COHORT_MP_IMAGE: "24.04",
        COHORT_MP_CPUS: "1",
        COHORT_MP_MEMORY: "1G",
        COHORT_MP_DISK: "5G",
        COHORT_MP_LAUNCH_TIMEOUT: "120",
        COHORT_MP_READY_TIMEOUT: "120",
      },
      input: name === "launch" ? withOwnerMarker(USER_DATA, owner) : "",
      reject: false,
    });
    return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
  };
  const names = async () => (JSON.parse((await cli(["list", "--format", "json"])).stdout) as { list: { name: string; state: string }[] }).list.map((r) => `${r.name}:${r.state}`);

  beforeAll(async () => {
    mp = await startStandin();
  });
  afterAll(async () => {
    await mp?.stop();
  });

  it("launch: a fresh VM with cloud-init done, the owner marker and the app's files, and its IPv4; again: adopted, no second VM", async () => {
    const t0 = Date.now();
    const r = await step("launch", "fl-a");
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { instance: string; ipv4: string; adopted: boolean };
    expect(out.instance).toBe("fl-a");
    expect(out.adopted).toBe(false);
    expect(out.ipv4.split(".").slice(0, 3)).toEqual(mp.hostAddress.split(".").slice(0, 3));
    expect(r.stderr).toMatch(/fl-a: cloud-init done/);
    process.stderr.write(`launch step fl-a (launch + cloud-init + marker): ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    expect((await cli(["exec", "fl-a", "--", "cat", OWNER_FILE])).stdout).toBe(OWNER);
    expect((await cli(["exec", "fl-a", "--", "cat", "/etc/cohort-standin/app"])).stdout).toBe("app config");

    const again = await step("launch", "fl-a");
    expect(again.exitCode, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ instance: "fl-a", ipv4: out.ipv4, adopted: true });
    expect(again.stderr).not.toMatch(/multipass launch/);
    expect(await names()).toEqual(["fl-a:Running"]);
  });

  it("a launch that times out while the VM comes up is reconciled once: no relaunch, no second VM, cloud-init waited for", async () => {
    const r = await step("launch", "fl-b", { MULTIPASS_STANDIN_LAUNCH_TIMEOUT_AFTER: "1" });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/launch reported "launch failed: timed out waiting for initialization to complete".*reconciling, not relaunching/);
    expect(r.stderr.match(/multipass launch /g)).toHaveLength(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ instance: "fl-b", adopted: false });
    expect((await cli(["exec", "fl-b", "--", "cloud-init", "status"])).stdout).toMatch(/status: done/);
    expect(await names()).toEqual(["fl-a:Running", "fl-b:Running"]);
  });

  it("a foreign VM of the same name (another owner's marker, or none) is refused and left untouched, by launch and by delete", async () => {
    const other = withOwnerMarker(USER_DATA, "someone-else");
    expect((await cli(["launch", "--name", "fl-c", "--cloud-init", "-"], other)).exitCode).toBe(0);
    expect((await cli(["launch", "--name", "fl-d", "--cloud-init", "-"], USER_DATA)).exitCode).toBe(0);
    const bootId = async (n: string) => (await cli(["exec", n, "--", "sh", "-c", "cut -d' ' -f22 /proc/1/stat; cat /etc/machine-id"])).stdout;
    // PID 1's start time and the machine id: the same values afterwards mean no restart and no new instance.
    const before = { c: await bootId("fl-c"), d: await bootId("fl-d") };

    const c = await step("launch", "fl-c");
    expect(c.exitCode).toBe(1);
    expect(c.stderr).toContain(
      'multipass instance "fl-c" exists but its owner marker says "someone-else", not this stack\'s "cohort-lab/cohort-lab/fleet-test": refusing to adopt or change it',
    );
    const d = await step("launch", "fl-d");
    expect(d.exitCode).toBe(1);
    expect(d.stderr).toContain(`multipass instance "fl-d" exists but has no owner marker ${OWNER_FILE}`);
    for (const n of ["fl-c", "fl-d"]) {
      const del = await step("delete", n);
      expect(del.exitCode, del.stderr).toBe(0);
      expect(del.stderr).toMatch(/not this stack's instance, left as it was/);
    }
    expect(await names()).toEqual(["fl-a:Running", "fl-b:Running", "fl-c:Running", "fl-d:Running"]);
    expect({ c: await bootId("fl-c"), d: await bootId("fl-d") }).toEqual(before);
    expect((await cli(["exec", "fl-c", "--", "cat", OWNER_FILE])).stdout).toBe("someone-else");

    // A Deleted (not purged) instance of the name: launch refuses it (its marker cannot be read), delete leaves it.
    expect((await cli(["delete", "fl-d"])).exitCode).toBe(0);
    const deleted = await step("launch", "fl-d");
    expect(deleted.exitCode).toBe(1);
    expect(deleted.stderr).toContain('multipass instance "fl-d" exists but is Deleted, so its owner marker cannot be read without changing it');
    expect((await step("delete", "fl-d")).stderr).toMatch(/is Deleted but not purged/);
  });

  it("a VM deleted by hand: delete succeeds; our VM: delete purges it", async () => {
    expect((await cli(["delete", "--purge", "fl-b"])).exitCode).toBe(0);
    const gone = await step("delete", "fl-b");
    expect(gone.exitCode, gone.stderr).toBe(0);
    expect(gone.stderr).toMatch(/fl-b: does not exist \(deleted out of band\); nothing to delete/);
    const del = await step("delete", "fl-a");
    expect(del.exitCode, del.stderr).toBe(0);
    expect(del.stderr).toMatch(/fl-a: deleted and purged/);
    expect(await names()).toEqual(["fl-c:Running", "fl-d:Deleted"]);
    expect((await cli(["info", "fl-a"])).stderr).toBe('info failed: instance "fl-a" does not exist');
    expect(path.isAbsolute(mp.bin)).toBe(true);
  });
});

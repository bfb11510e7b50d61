import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { StackConfigError } from "../../stacks/config";
import { checkMachineFit, defaultPrefix, multipassSizeBytes, parseMultipassConfig, placeRoles, resolveMultipassCli, systemdBackendConfig } from "../../stacks/multipass-plan";
import { resolveSystemdConfig } from "../../runtime/backends/systemd/config";
import { loadRunSpec, validateRunSpec } from "../../runtime/core/spec";

const SPEC = validateRunSpec({
  apiVersion: "cohort-lab/v1",
  kind: "Cohort",
  name: "society",
  roles: [
    { name: "api", app: { command: ["api"] }, resources: { cpu: "500m", memory: "256Mi" } },
    { name: "worker", replicas: 3, needs: ["api"], app: { command: ["w"] }, resources: { cpu: "250m", memory: "128Mi" } },
    { name: "probe", app: { command: ["p"] } },
  ],
} as never);

function issues(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(StackConfigError);
    return (error as StackConfigError).issues.map((i) => `${i.key}: ${i.reason}`);
  }
  throw new Error("expected a StackConfigError");
}

describe("multipass profile plan: config", () => {
  it("defaults to three 1-CPU machines and Multipass sizes in binary multiples", () => {
    const c = parseMultipassConfig({});
    expect(c.machines.map((m) => m.name)).toEqual(["vm1", "vm2", "vm3"]);
    expect(c.basePort).toBe(8000);
    expect(multipassSizeBytes("2G")).toBe(2 * 2 ** 30);
    expect(multipassSizeBytes("512M")).toBe(512 * 2 ** 20);
    expect(multipassSizeBytes("1.5GiB")).toBe(1.5 * 2 ** 30);
    expect(multipassSizeBytes("2 cows")).toBeUndefined();
  });
  it("refuses bad fields naming cohort-lab:multipass.<field>", () => {
    const raw = (v: unknown) => ({ multipass: JSON.stringify(v) });
    expect(issues(() => parseMultipassConfig(raw({ machines: [{ name: "vm1", cpus: 0, memory: "1G", disk: "5G" }] })))).toEqual([
      "cohort-lab:multipass.machines[0].cpus: must be an integer from 1 to 256 (got 0)",
    ]);
    expect(issues(() => parseMultipassConfig(raw({ machines: [{ name: "vm1", cpus: 1, memory: "100M", disk: "5G" }] })))).toEqual([
      'cohort-lab:multipass.machines[0].memory: must be a Multipass size of at least 512M, e.g. 2G or 512M (got "100M")',
    ]);
    expect(
      issues(() =>
        parseMultipassConfig(
          raw({
            machines: [
              { name: "a", cpus: 1, memory: "1G", disk: "5G" },
              { name: "a", cpus: 1, memory: "1G", disk: "5G" },
            ],
          }),
        ),
      ),
    ).toEqual(['cohort-lab:multipass.machines[1].name: machine "a" is listed twice']);
    expect(issues(() => parseMultipassConfig(raw({ cli: "multipass" })))).toEqual(["cohort-lab:multipass.cli: must be the absolute path of the multipass CLI"]);
    expect(issues(() => parseMultipassConfig(raw({ vms: 3 })))[0]).toMatch(/^cohort-lab:multipass\.vms: unknown field \(known fields: machines, placement, cli,/);
    expect(issues(() => parseMultipassConfig({ multipass: "3" }))[0]).toMatch(/^cohort-lab:multipass: must be an object/);
  });
});

describe("multipass profile plan: placement and fit", () => {
  const machines = parseMultipassConfig({}).machines;
  it("places roles on the machines in turn by default", () => {
    expect(placeRoles(SPEC, machines, undefined)).toEqual({ api: "vm1", worker: "vm2", probe: "vm3" });
    expect(placeRoles(SPEC, machines.slice(0, 2), undefined)).toEqual({ api: "vm1", worker: "vm2", probe: "vm1" });
  });
  it("refuses an unknown machine, an unknown role and an unplaced role", () => {
    expect(issues(() => placeRoles(SPEC, machines, { api: "vm1", worker: "vm9", probe: "vm1", db: "vm1" }))).toEqual([
      'cohort-lab:multipass.placement.worker: machine "vm9" is not in multipass.machines (known: vm1, vm2, vm3)',
      'cohort-lab:multipass.placement.db: the cohort has no role "db" (roles: api, worker, probe)',
    ]);
    expect(issues(() => placeRoles(SPEC, machines, { api: "vm1", worker: "vm2" }))).toEqual([
      'cohort-lab:multipass.placement.probe: role "probe" is not placed on a machine (known: vm1, vm2, vm3); once multipass.placement is set, every role needs an entry',
    ]);
  });
  it("refuses members' requests above a machine's cpus or memory, with the arithmetic", () => {
    const placement = { api: "vm1", worker: "vm1", probe: "vm2" };
    expect(issues(() => checkMachineFit(SPEC, machines, placement))).toEqual([
      "cohort-lab:multipass.machines[0].cpus: machine vm1 holds api 1 x (500m CPU, 256Mi) + worker 3 x (250m CPU, 128Mi) = 1250m CPU requested, more than its 1 CPU (1000m); raise cpus or place roles elsewhere",
    ]);
    const small = [{ ...machines[0]!, cpus: 2, memory: "512M" }, machines[1]!];
    expect(issues(() => checkMachineFit(SPEC, small, placement))).toEqual([
      "cohort-lab:multipass.machines[0].memory: machine vm1 holds api 1 x (500m CPU, 256Mi) + worker 3 x (250m CPU, 128Mi) = 640Mi requested, more than its memory 512M (512Mi); raise memory or place roles elsewhere",
    ]);
    expect(() => checkMachineFit(SPEC, machines, { api: "vm1", worker: "vm2", probe: "vm3" })).not.toThrow();
  });
});

describe("multipass profile plan: CLI and the backend config", () => {
  it("finds multipass on PATH or refuses naming cohort-lab:multipass.cli", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mp-cli-"));
    try {
      expect(issues(() => resolveMultipassCli(undefined, { PATH: dir }))[0]).toMatch(/^cohort-lab:multipass\.cli: unset, and no multipass on PATH/);
      fs.writeFileSync(path.join(dir, "multipass"), "#!/bin/sh\n", { mode: 0o755 });
      expect(resolveMultipassCli(undefined, { PATH: `/nonexistent:${dir}` })).toBe(path.join(dir, "multipass"));
      expect(issues(() => resolveMultipassCli(path.join(dir, "nope")))).toEqual([`cohort-lab:multipass.cli: ${dir}/nope is not an executable file`]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  it("derives a config the runtime's systemd backend accepts", () => {
    expect(defaultPrefix("multipass")).toBe("cohort-multipass");
    expect(defaultPrefix("my_stack.")).toBe("cohort-my-stack");
    const config = systemdBackendConfig({
      cli: "/usr/bin/multipass",
      environment: { MULTIPASS_STANDIN_STATE: "/tmp/s" },
      instances: [
        { machine: "vm1", instance: "cohort-multipass-vm1", ipv4: "10.1.2.2" },
        { machine: "vm2", instance: "cohort-multipass-vm2", ipv4: "10.1.2.3" },
      ],
      placement: { api: "vm1", worker: "vm2", probe: "vm1" },
      basePort: 8000,
    });
    const resolved = resolveSystemdConfig(config, loadRunSpec(JSON.stringify(SPEC)));
    expect(resolved.placement.get("worker")?.ipv4).toBe("10.1.2.3");
    expect(resolved.environment).toEqual({ MULTIPASS_STANDIN_STATE: "/tmp/s" });
  });
});

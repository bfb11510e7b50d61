/**
 * The `multipass` profile refuses before creating anything (no resource registered), each refusal naming its key:
 * a role placed on an unknown machine, an unplaced role, members' requests above a machine's cpus or memory, no custom
 * roster, no multipass CLI, a bad `cohort-lab:multipass` field; and the registry knows the profile.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import type { RawConfig } from "../../stacks/config.js";
import { installMocks, settle, type Registration } from "./local-harness.js";

const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-multipass-refusals-"));
const cli = path.join(projectDir, "multipass");
let regs: Registration[] = [];
let build: (raw: RawConfig, env?: NodeJS.ProcessEnv) => void;

const roles = (cpu = "250m", memory = "128Mi") => [
  { name: "api", app: { command: ["api"] }, resources: { cpu, memory } },
  { name: "worker", replicas: 3, needs: ["api"], app: { command: ["w"] }, resources: { cpu, memory } },
];

beforeAll(async () => {
  fs.writeFileSync(cli, "#!/bin/sh\n", { mode: 0o755 });
  regs = await installMocks({ preview: false, stack: "multipass" });
  const { parseStackConfig } = await import("../../stacks/config.js");
  const { buildMultipass, multipassProfile } = await import("../../stacks/multipass.js");
  build = (raw, env) => {
    const config = parseStackConfig(raw, { stack: "multipass", projectDir, profileKeys: multipassProfile.configKeys });
    buildMultipass({ stack: "multipass", projectDir, config, raw }, { bundle: Buffer.from("//"), ...(env !== undefined ? { env } : {}) });
  };
});

async function refusal(raw: RawConfig, env?: NodeJS.ProcessEnv): Promise<string> {
  let message = "";
  try {
    build(raw, env);
  } catch (error) {
    expect(error).toBeInstanceOf(pulumi.RunError);
    message = (error as Error).message;
  }
  await settle(regs, 0);
  expect(regs).toEqual([]);
  if (message === "") throw new Error("the program was not refused");
  return message;
}

const mp = (v: Record<string, unknown>) => JSON.stringify({ cli, ...v });
const cohort = (r: unknown = roles()) => JSON.stringify({ name: "society", roles: r });

describe("multipass profile refusals before any resource", () => {
  it("a role placed on an unknown machine", async () => {
    expect(await refusal({ multipass: mp({ placement: { api: "vm1", worker: "vm7" } }), cohort: cohort() })).toBe(
      'cohort-lab:multipass.placement.worker: machine "vm7" is not in multipass.machines (known: vm1, vm2, vm3)',
    );
  });
  it("a role left unplaced once placement is set", async () => {
    expect(await refusal({ multipass: mp({ placement: { api: "vm1" } }), cohort: cohort() })).toMatch(
      /^cohort-lab:multipass\.placement\.worker: role "worker" is not placed on a machine/,
    );
  });
  it("members' requests above the machine's cpus and memory, with the arithmetic", async () => {
    expect(await refusal({ multipass: mp({}), cohort: cohort(roles("500m", "512Mi")) })).toBe(
      [
        "cohort-lab:multipass.machines[1].cpus: machine vm2 holds worker 3 x (500m CPU, 512Mi) = 1500m CPU requested, more than its 1 CPU (1000m); raise cpus or place roles elsewhere",
        "cohort-lab:multipass.machines[1].memory: machine vm2 holds worker 3 x (500m CPU, 512Mi) = 1536Mi requested, more than its memory 1G (1024Mi); raise memory or place roles elsewhere",
      ].join("\n"),
    );
  });
  it("no custom roster", async () => {
    expect(await refusal({ multipass: mp({}) })).toMatch(/^cohort-lab:cohort\.roles: the multipass profile runs members as systemd units on the VMs/);
  });
  it("no multipass CLI on PATH", async () => {
    expect(await refusal({ cohort: cohort() }, { PATH: path.join(projectDir, "empty") })).toMatch(/^cohort-lab:multipass\.cli: unset, and no multipass on PATH/);
  });
  it("members that would take ports past 65535 on a machine, and exec readiness (found by the adversarial review: both failed only after the VMs launched)", async () => {
    expect(await refusal({ multipass: mp({ basePort: 65535 }), cohort: cohort() })).toBe(
      "cohort-lab:multipass.basePort: machine vm2 holds 3 members on ports 65535..65537, past 65535; lower basePort to at most 65533",
    );
    const probed = [{ name: "api", app: { command: ["api"] }, readiness: { exec: { command: ["true"] } } }];
    expect(await refusal({ multipass: mp({}), cohort: cohort(probed) })).toBe(
      "cohort-lab:cohort.roles[0].readiness.exec: the multipass profile probes members from the host across the network and cannot run exec probes on the VM; use tcp or http readiness",
    );
  });
  it("a moving image alias", async () => {
    expect(await refusal({ multipass: mp({ image: "lts" }), cohort: cohort() })).toBe(
      "cohort-lab:multipass.image: must be a fixed release such as 24.04, not a moving alias (lts, devel, daily)",
    );
  });
  it("a bad field", async () => {
    expect(await refusal({ multipass: mp({ machines: [] }), cohort: cohort() })).toBe("cohort-lab:multipass.machines: must list at least one machine");
  });
  it("is registered as a profile", async () => {
    const { PROFILES } = await import("../../stacks/profiles.js");
    expect(PROFILES.multipass?.configKeys).toEqual(["multipass"]);
  });
});

/**
 * The `multipass` profile's graph under Pulumi mocks: MultipassFleet (one launch Command per machine) -> the backend
 * config file Command (the systemd backend's config on stdin, from the fleet's IPv4s and the placement) -> CohortRun
 * (process executor, `--backend systemd`, the config file, profile `multipass`). The backend config is checked with
 * the runtime's own schema. The fleet's steps and the backend run for real in test/multipass/.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { multipass as pins } from "../../common/pins.js";
import { resolveSystemdConfig } from "../../runtime/backends/systemd/config.js";
import { compileRunSpec } from "../../runtime/core/spec.js";
import { find, installMocks, settle, valueOf, type Registration } from "./local-harness.js";

const projectDir = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-multipass-"));
const cli = path.join(projectDir, "bin", "multipass");
let regs: Registration[] = [];
const RUN_ID = "society-20261202T070000Z-a1b2c3";
const SUMMARY = {
  runId: RUN_ID,
  outcome: "succeeded",
  size: 3,
  readyCount: 3,
  timeToReadyMs: 5385,
  ledgerPath: path.join(projectDir, "artifacts", RUN_ID),
  reportPath: path.join(projectDir, "artifacts", RUN_ID, "report.html"),
  firstFailure: null,
};

const ROLES = [
  { name: "api", app: { command: ["python3", "-m", "http.server", "$(COHORT_PORT)"] }, resources: { cpu: "500m", memory: "256Mi" } },
  { name: "worker", replicas: 2, needs: ["api"], app: { command: ["python3", "-m", "http.server", "$(COHORT_PORT)"] }, resources: { cpu: "250m", memory: "128Mi" } },
];

beforeAll(async () => {
  fs.mkdirSync(path.dirname(cli));
  fs.writeFileSync(cli, `#!/bin/sh\necho '{"list": []}'\n`, { mode: 0o755 });
  regs = await installMocks({
    preview: false,
    stack: "multipass",
    stdoutFor: (name) =>
      ({
        "fleet-vm1": '{"instance":"cohort-multipass-vm1","ipv4":"10.9.0.2","adopted":false}\n',
        "fleet-vm2": '{"instance":"cohort-multipass-vm2","ipv4":"10.9.0.3","adopted":false}\n',
        "cohort-run": `${JSON.stringify(SUMMARY)}\n`,
      })[name],
  });
});

describe("multipass profile (mocks)", () => {
  it("fleet -> backend config file -> CohortRun on the systemd backend", async () => {
    const { parseStackConfig } = await import("../../stacks/config.js");
    const { buildMultipass, multipassProfile, MULTIPASS_USER_DATA } = await import("../../stacks/multipass.js");
    const raw = {
      multipass: JSON.stringify({
        cli,
        environment: { MULTIPASS_STANDIN_STATE: "/var/tmp/s" },
        machines: [
          { name: "vm1", cpus: 1, memory: "1G", disk: "5G" },
          { name: "vm2", cpus: 1, memory: "1G", disk: "5G" },
        ],
        placement: { api: "vm1", worker: "vm2" },
      }),
      cohort: JSON.stringify({ name: "society", roles: ROLES }),
    };
    const config = parseStackConfig(raw, { stack: "multipass", projectDir, profileKeys: multipassProfile.configKeys });
    const outputs = buildMultipass({ stack: "multipass", projectDir, config, raw }, { bundle: Buffer.from("// bundle\n") });
    expect(outputs.profile).toBe("multipass");
    await settle(regs, 6);

    const fleet = find(regs, "cohortlab:multipass:MultipassFleet", "fleet");
    const vm1 = find(regs, "command:local:Command", "fleet-vm1");
    expect(vm1.parent).toBe(fleet.urn);
    const vmEnv = vm1.inputs.environment as Record<string, string>;
    expect(vmEnv.MULTIPASS_STANDIN_STATE).toBe("/var/tmp/s");
    // The user-data is a secret stdin input of the launch step (components/multipass): the profile's keeps the default user and manages /etc/hosts.
    const stdin = (vm1.inputs.stdin as { value: string }).value;
    expect(MULTIPASS_USER_DATA).toContain("manage_etc_hosts: true");
    expect(stdin).toContain("manage_etc_hosts: true");
    expect(stdin).toContain("- default");
    expect(JSON.stringify(vm1.inputs)).toContain(pins.image);

    const file = path.join(projectDir, ".multipass", "multipass", "backend.json");
    const backendConfig = find(regs, "command:local:Command", "backend-config");
    expect(backendConfig.inputs.create).toContain(`cat > '${file}.tmp'`);
    expect(backendConfig.inputs.create).toContain("umask 077");
    expect(backendConfig.inputs.delete).toBe(`rm -f '${file}'`);
    expect(backendConfig.dependencies).toEqual(expect.arrayContaining([vm1.urn, find(regs, "command:local:Command", "fleet-vm2").urn]));
    const json = JSON.parse(String(backendConfig.inputs.stdin)) as Record<string, unknown>;
    expect(json).toEqual({
      multipass: cli,
      environment: { MULTIPASS_STANDIN_STATE: "/var/tmp/s" },
      instances: [
        { machine: "vm1", instance: "cohort-multipass-vm1", ipv4: "10.9.0.2" },
        { machine: "vm2", instance: "cohort-multipass-vm2", ipv4: "10.9.0.3" },
      ],
      placement: { api: "vm1", worker: "vm2" },
      basePort: 8000,
    });
    // The runtime's systemd backend accepts it for this cohort.
    const { resolveRunSpec } = await import("../../stacks/config.js");
    const spec = compileRunSpec(resolveRunSpec(config.cohort, { nodePath: process.execPath, projectDir }).spec);
    expect(resolveSystemdConfig(json, spec).placement.get("worker")?.ipv4).toBe("10.9.0.3");

    const run = find(regs, "command:local:Command", "cohort-run");
    const env = run.inputs.environment as Record<string, string>;
    expect(env.COHORT_BACKEND).toBe("systemd");
    expect(env.COHORT_BACKEND_CONFIG).toBe(file);
    expect(env.COHORT_PROFILE).toBe("multipass");
    // No VMs yet (the CLI lists none): fresh launch ids, and the run's last trigger names them (a VM launched again
    // runs the cohort again).
    const runTriggers = run.inputs.triggers as string[];
    expect(runTriggers).toHaveLength(7);
    expect(runTriggers[6]).toMatch(/^launch-ids:vm1=[0-9a-f]{16},vm2=[0-9a-f]{16}$/);
    expect(find(regs, "cohortlab:runtime:CohortRun", "cohort").dependencies).toEqual(expect.arrayContaining([backendConfig.urn, vm1.urn]));
    expect(await valueOf(outputs.artifactRoot)).toBe(config.artifactRoot);
    expect((await valueOf(outputs.run)).id).toBe(RUN_ID);
  });
});

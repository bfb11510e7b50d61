/**
 * The launcher's hints after a killed `pulumi up` (scripts/lib/pulumi-host.ts): a stale diy-backend lock (its
 * pid gone on this host) gets the exact `cancel` command, a live one how to interrupt it; pending creates in the
 * file backend's state get the exact non-interactive `refresh` that clears them. (End to end with the real
 * engine in test/e2e/host-interrupt.test.ts.)
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { pendingCreateHints, stackArgument, staleLockHints } from "../../scripts/lib/pulumi-host";

const lockError = (host: string, pid: number) =>
  "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`.\n" +
  `  file:///s/.pulumi/locks/organization/cohort-lab/host/1c.json?no_tmp_dir=true: created by root@${host} (pid ${pid}) at 2026-12-01T20:30:54Z\n`;

describe("staleLockHints", () => {
  it("a lock whose pid is gone on this host: the exact cancel command", () => {
    expect(staleLockHints(lockError("vm", 7106), ["up", "--stack", "host"], "vm", () => false)).toEqual([
      "cohort-lab: file:///s/.pulumi/locks/organization/cohort-lab/host/1c.json?no_tmp_dir=true is stale: pid 7106 on this host is gone (a killed pulumi); remove it with `npm run pulumi -- cancel --stack host --yes`, then run the command again (a cohort run the killed pulumi started stops by itself; the next up refuses to start beside it while it does)",
    ]);
  });

  it("a lock whose pid still runs: wait or interrupt it once", () => {
    expect(staleLockHints(lockError("vm", 42), ["up", "-s", "host"], "vm", () => true)).toEqual([
      "cohort-lab: pid 42 (the pulumi that holds file:///s/.pulumi/locks/organization/cohort-lab/host/1c.json?no_tmp_dir=true) is still running on this host: wait for it, or interrupt it once (`kill -INT 42`: Pulumi cancels gracefully and its cohort run ends as interrupted)",
    ]);
  });

  it("a lock from another host is not judged; no lock error, no hint", () => {
    expect(staleLockHints(lockError("ci-7", 42), ["up", "--stack=host"], "vm", () => false)).toEqual([
      "cohort-lab: file:///s/.pulumi/locks/organization/cohort-lab/host/1c.json?no_tmp_dir=true was created on ci-7, not this host (vm): check there whether pid 42 still runs before `npm run pulumi -- cancel --stack host --yes`",
    ]);
    expect(staleLockHints("error: something else\n", ["up"], "vm", () => false)).toEqual([]);
  });

  it("stackArgument reads --stack, -s and --stack=", () => {
    expect([stackArgument(["up", "--stack", "a"]), stackArgument(["-s", "b", "up"]), stackArgument(["up", "--stack=c"]), stackArgument(["up"])]).toEqual([
      "a",
      "b",
      "c",
      undefined,
    ]);
  });
});

describe("pendingCreateHints", () => {
  const backend = mkdtempSync(path.join(os.tmpdir(), "cohort-hints-"));
  mkdirSync(path.join(backend, ".pulumi", "stacks", "cohort-lab"), { recursive: true });
  const state = (pending: unknown[]) =>
    writeFileSync(
      path.join(backend, ".pulumi", "stacks", "cohort-lab", "host.json"),
      JSON.stringify({ version: 3, checkpoint: { stack: "host", latest: { resources: [], pending_operations: pending } } }),
    );
  const urn = "urn:pulumi:host::cohort-lab::cohortlab:runtime:CohortRun$command:local:Command::cohort-run";

  it("names the pending creates and the command that clears them", () => {
    state([{ resource: { urn }, type: "creating" }]);
    expect(pendingCreateHints(`file://${backend}`, "cohort-lab", "host")).toEqual([
      `cohort-lab: stack host holds 1 pending create(s) left by an interrupted \`pulumi up\` (${urn}); Pulumi keeps them until they are cleared. Clear them with \`npm run pulumi -- refresh --clear-pending-creates --stack host --yes\``,
    ]);
  });

  it("a pending Multipass VM launch: run up (it adopts the VM) before destroy", () => {
    const vm = "urn:pulumi:host::cohort-lab::cohortlab:multipass:MultipassFleet$command:local:Command::fleet-vm1";
    state([{ resource: { urn: vm }, type: "creating" }]);
    const hints = pendingCreateHints(`file://${backend}`, "cohort-lab", "host");
    expect(hints).toHaveLength(2);
    expect(hints[1]).toBe(
      "cohort-lab: a pending create is a Multipass VM launch: the VM may exist. After clearing, run `npm run pulumi -- up --yes --stack host` (it adopts VMs with this stack's owner marker) before any `destroy`; a destroy straight after clearing leaves such VMs running",
    );
  });

  it("nothing for other pending operations, no state, another backend or no stack", () => {
    state([{ resource: { urn }, type: "updating" }]);
    expect(pendingCreateHints(`file://${backend}`, "cohort-lab", "host")).toEqual([]);
    expect(pendingCreateHints(`file://${backend}`, "cohort-lab", "other")).toEqual([]);
    expect(pendingCreateHints("https://api.pulumi.com", "cohort-lab", "host")).toEqual([]);
    expect(pendingCreateHints(`file://${backend}`, "cohort-lab", undefined)).toEqual([]);
  });
});

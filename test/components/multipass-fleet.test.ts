/**
 * MultipassFleet's resource graph under Pulumi mocks: one `command:local:Command` per machine under the component,
 * the steps' command lines (no user-data in them), the user-data on stdin with the owner marker added, the CLI's
 * environment, the identity triggers, the IPv4 outputs parsed from the steps' stdout, and the refusals of bad
 * arguments before any resource exists. The steps themselves run for real in test/multipass/fleet-steps.test.ts.
 */
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { multipass } from "../../common/pins.js";
import { find, installMocks, settle, valueOf, type Registration } from "./local-harness.js";

type Fleet = typeof import("../../components/multipass/index.js");
let regs: Registration[];
let mod: Fleet;
let cli: string;

/**
 * A multipass CLI of a few lines (a real executable the component runs at evaluation): `list --format json` prints
 * `$FAKE_LIST` (default no instances), `exec <vm> -- cat <marker>` prints `$FAKE_MARKER_<vm with - as _>` or fails
 * as cat does on a missing file.
 */
const FAKE_CLI = String.raw`#!/bin/sh
case "$1" in
  list) if [ -n "$FAKE_LIST" ]; then printf '%s\n' "$FAKE_LIST"; else echo '{"list": []}'; fi ;;
  exec) v=$(printf '%s' "$2" | tr - _); eval "m=\${FAKE_MARKER_$v-}"; if [ -n "$m" ]; then printf '%b' "$m"; else echo "cat: $5: No such file or directory" >&2; exit 1; fi ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
`;

const USER_DATA = `#cloud-config
users:
  - default
write_files:
  - path: /etc/app.conf
    content: "secret-ish: 1\\n"
`;

beforeAll(async () => {
  cli = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mpfleet-mock-")), "multipass");
  fs.writeFileSync(cli, FAKE_CLI, { mode: 0o755 });
  regs = await installMocks({
    preview: false,
    stack: "multipass",
    stdoutFor: (name) =>
      ({ "fleet-a": '{"instance":"cl-a","ipv4":"10.9.0.2","adopted":false}\n', "fleet-b": '{"instance":"cl-b","ipv4":"10.9.0.3","adopted":true}\n' })[name] ??
      `{"instance":"${name}","ipv4":"10.9.0.9","adopted":true}\n`,
  });
  mod = await import("../../components/multipass/index.js");
});

describe("MultipassFleet (mocks)", () => {
  it("one launch Command per machine, user-data on stdin with the owner marker, IPv4s from the steps' stdout", async () => {
    const fleet = new mod.MultipassFleet("fleet", {
      prefix: "cl",
      image: multipass.image,
      machines: [
        { name: "a", cpus: 2, memory: "2G", disk: "10G" },
        { name: "b", cpus: 1, memory: "512M", disk: "5G" },
      ],
      userData: USER_DATA,
      multipass: cli,
      environment: { MULTIPASS_STANDIN_STATE: "/var/tmp/state" },
      launchTimeoutSeconds: 120,
      nodePath: "/opt/node/bin/node",
      projectDir: "/repo",
    });
    expect(await valueOf(fleet.instances)).toEqual([
      { machine: "a", instance: "cl-a", ipv4: "10.9.0.2" },
      { machine: "b", instance: "cl-b", ipv4: "10.9.0.3" },
    ]);
    await settle(regs, 3);
    const component = find(regs, "cohortlab:multipass:MultipassFleet", "fleet");
    const a = find(regs, "command:local:Command", "fleet-a");
    const b = find(regs, "command:local:Command", "fleet-b");
    expect(fleet.ready).toHaveLength(2);
    for (const r of [a, b]) expect(r.parent).toBe(component.urn);
    expect(a.inputs.create).toBe("'/opt/node/bin/node' components/multipass/steps.cjs launch");
    expect(a.inputs.delete).toBe("'/opt/node/bin/node' components/multipass/steps.cjs delete");
    expect(a.inputs.dir).toBe("/repo");
    expect(a.inputs.logging).toBe("stderr");
    expect(a.inputs.environment).toEqual({
      MULTIPASS_STANDIN_STATE: "/var/tmp/state",
      COHORT_MULTIPASS: cli,
      COHORT_MP_INSTANCE: "cl-a",
      COHORT_MP_OWNER: "cohort-lab/cohort-lab/multipass",
      COHORT_MP_IMAGE: "24.04",
      COHORT_MP_CPUS: "2",
      COHORT_MP_MEMORY: "2G",
      COHORT_MP_DISK: "10G",
      COHORT_MP_LAUNCH_TIMEOUT: "120",
      COHORT_MP_READY_TIMEOUT: "600",
    });
    expect((b.inputs.environment as Record<string, string>).COHORT_MP_INSTANCE).toBe("cl-b");
    // The user-data reaches the step on stdin only, with the owner marker appended to its write_files.
    // A secret input: the mock monitor sees the SDK's secret envelope.
    const envelope = a.inputs.stdin as Record<string, unknown>;
    expect(envelope["4dabf18193072939515e22adb298388d"]).toBe("1b47061264138c4ac30d75fd1eb44270");
    const stdin = envelope.value as string;
    expect(stdin.startsWith("#cloud-config\n")).toBe(true);
    expect(parse(stdin)).toEqual({
      users: ["default"],
      write_files: [
        { path: "/etc/app.conf", content: "secret-ish: 1\n" },
        {
          path: "/etc/cohort-lab/multipass-owner",
          content: expect.stringMatching(/^cohort-lab\/cohort-lab\/multipass\nlaunch-id: [0-9a-f]{16}\n$/),
          permissions: "0644",
          owner: "root:root",
        },
      ],
    });
    expect(`${String(a.inputs.create)} ${String(a.inputs.delete)}`).not.toMatch(/secret-ish|cloud-config/);
    const triggers = a.inputs.triggers as unknown[];
    expect(triggers.slice(0, 5)).toEqual(["cl-a", "24.04", 2, "2G", "10G"]);
    expect(triggers[5]).toMatch(/^[0-9a-f]{64}$/);
    // No VM of the name: a fresh launch id, in the trigger and in the marker.
    const id = /launch-id: ([0-9a-f]{16})/.exec(stdin)?.[1];
    expect(triggers[6]).toBe(`launch-id:${id}`);
    expect(((b.inputs.triggers as unknown[])[6] as string).startsWith("launch-id:")).toBe(true);
    expect((b.inputs.triggers as unknown[])[6]).not.toBe(triggers[6]);
  });

  it("launch ids from what the CLI shows: ours kept, a legacy marker gives the pre-launch-id inputs byte for byte, a deleted or foreign VM a fresh id", async () => {
    const owner = "cohort-lab/cohort-lab/multipass";
    process.env.FAKE_LIST = JSON.stringify({ list: ["a", "b", "c", "d"].map((m) => ({ name: `lg-${m}`, state: "Running", ipv4: ["10.9.0.9"] })) });
    process.env.FAKE_MARKER_lg_a = `${owner}\\n`;
    process.env.FAKE_MARKER_lg_b = `${owner}\\nlaunch-id: feedfacecafe0001\\n`;
    process.env.FAKE_MARKER_lg_c = "someone/else/prod\\nlaunch-id: feedfacecafe0001\\n";
    try {
      const machines = ["a", "b", "c", "d", "e"].map((name) => ({ name, cpus: 1, memory: "1G", disk: "5G" }));
      new mod.MultipassFleet("lg", { prefix: "lg", image: multipass.image, machines, userData: USER_DATA, multipass: cli });
      await settle(regs, 9);
      const cmd = (m: string) => find(regs, "command:local:Command", `lg-${m}`).inputs;
      const stdin = (m: string) => (cmd(m).stdin as { value: string }).value;
      const triggers = (m: string) => cmd(m).triggers as unknown[];
      const sha = (text: string) => crypto.createHash("sha256").update(text).digest("hex");
      // Legacy (marker of one line): exactly what the component produced before launch ids.
      expect(stdin("a")).toBe(mod.withOwnerMarker(USER_DATA, owner));
      expect(triggers("a")).toEqual(["lg-a", multipass.image, 1, "1G", "5G", sha(mod.withOwnerMarker(USER_DATA, owner))]);
      // Ours with a launch id: kept.
      expect(stdin("b")).toBe(mod.withOwnerMarker(USER_DATA, owner, "feedfacecafe0001"));
      expect(triggers("b")[6]).toBe("launch-id:feedfacecafe0001");
      // Foreign (another owner, or no marker) and absent: fresh ids (the launch step refuses a foreign VM).
      for (const m of ["c", "d", "e"]) expect(triggers(m)[6]).toMatch(/^launch-id:[0-9a-f]{16}$/);
      expect(new Set(["c", "d", "e"].map((m) => triggers(m)[6])).size).toBe(3);
    } finally {
      for (const k of ["FAKE_LIST", "FAKE_MARKER_lg_a", "FAKE_MARKER_lg_b", "FAKE_MARKER_lg_c"]) delete process.env[k];
    }
  });

  it("observeFleet: a VM that is not Running, a CLI that cannot run, and a CLI that prints no list are errors naming them", async () => {
    process.env.FAKE_LIST = JSON.stringify({ list: [{ name: "x-a", state: "Stopped" }] });
    try {
      await expect(mod.observeFleet(cli, ["x-a"], "me")).rejects.toThrow(/instance x-a is Stopped, so its owner marker cannot be read.*multipass start x-a/);
      process.env.FAKE_LIST = "Starting multipassd...";
      await expect(mod.observeFleet(cli, ["x-a"], "me")).rejects.toThrow(new RegExp(`${cli} list --format json printed no \\{"list"`));
    } finally {
      delete process.env.FAKE_LIST;
    }
    await expect(mod.observeFleet("/nonexistent/bin/multipass", ["x-a"], "me")).rejects.toThrow(/could not run the multipass CLI \/nonexistent\/bin\/multipass \(list --format\)/);
    expect(mod.parseMarker("me\n")).toEqual({ owner: "me", launchId: mod.LEGACY_LAUNCH_ID });
    expect(mod.parseMarker(mod.markerText("me", "abc"))).toEqual({ owner: "me", launchId: "abc" });
  });

  it("refuses bad arguments naming the field, before any resource exists", () => {
    const base = { prefix: "cl", image: "24.04", machines: [{ name: "a", cpus: 1, memory: "1G", disk: "5G" }], userData: USER_DATA, multipass: "/usr/bin/multipass" };
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ prefix: "1cl" }, /prefix must start with a letter/],
      [{ multipass: "multipass" }, /multipass must be an absolute path/],
      [{ machines: [] }, /machines must name at least one machine/],
      [{ machines: [{ name: "a", cpus: 1.5, memory: "1G", disk: "5G" }] }, /machines\[0\]\.cpus must be a positive integer \(got 1\.5\)/],
      [{ machines: [{ name: "a", cpus: 1, memory: "lots", disk: "5G" }] }, /machines\[0\]\.memory must be a size such as 2G/],
      [{ machines: [{ name: "a-", cpus: 1, memory: "1G", disk: "5G" }] }, /machines\[0\]\.name gives the instance name "cl-a-"/],
      [
        {
          machines: [
            { name: "a", cpus: 1, memory: "1G", disk: "5G" },
            { name: "a", cpus: 1, memory: "1G", disk: "5G" },
          ],
        },
        /machines\[1\]\.name repeats "a"/,
      ],
      [{ launchTimeoutSeconds: 0 }, /launchTimeoutSeconds must be a positive integer/],
    ];
    const before = regs.length;
    for (const [change, message] of cases) expect(() => new mod.MultipassFleet("bad", { ...base, ...change } as never)).toThrow(message);
    expect(regs.length).toBe(before);
  });

  it("withOwnerMarker: adds write_files to user-data without any, and refuses what is not a cloud-config mapping", () => {
    expect(parse(mod.withOwnerMarker("#cloud-config\n", "me"))).toEqual({ write_files: [{ path: mod.OWNER_FILE, content: "me\n", permissions: "0644", owner: "root:root" }] });
    expect(() => mod.withOwnerMarker("- a\n- b\n", "me")).toThrow(/userData must be a #cloud-config mapping/);
    expect(() => mod.withOwnerMarker("write_files: 3\n", "me")).toThrow(/userData write_files must be a list/);
    expect(() => mod.withOwnerMarker("a: [\n", "me")).toThrow(/userData is not YAML/);
  });
});

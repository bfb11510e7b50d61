/**
 * The substitute `pulumi-resource-command` (scripts/lib/command-provider.ts) against upstream v1.2.1 semantics,
 * with real /bin/sh child processes.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { checkInputs, diffInputs, globFiles, makeCommandProvider, runCommand, sig, STATUS_FD_ENV, unknownValue, urnName } from "../../scripts/lib/command-provider";

const secret = (value: unknown) => ({ [sig.key]: sig.secret, value });
const urn = "urn:pulumi:dev::proj::command:local:Command::write";
let tmp: string;
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-cmd-provider-"));
});

describe("runCommand", () => {
  it("runs under /bin/sh -c in dir with the extra environment and stdin, and trims one trailing newline", async () => {
    const lines: string[] = [];
    const out = await runCommand('cat; printf "%s\\n\\n" "$GREETING"; pwd; echo oops >&2', { dir: tmp, environment: { GREETING: "hi" }, stdin: "in:" }, {}, (l) => lines.push(l));
    expect(out).toEqual({ stdout: `in:hi\n\n${fs.realpathSync(tmp)}`, stderr: "oops" });
    expect(lines.sort()).toEqual(["", "in:hi", fs.realpathSync(tmp), "oops"].sort());
  });

  it("exports the previous outputs unless addPreviousOutputInEnv is false", async () => {
    const cmd = 'echo "[$PULUMI_COMMAND_STDOUT|$PULUMI_COMMAND_STDERR]"';
    expect((await runCommand(cmd, {}, { stdout: "o", stderr: "e" }, () => undefined)).stdout).toBe("[o|e]");
    expect((await runCommand(cmd, { addPreviousOutputInEnv: false }, { stdout: "o", stderr: "e" }, () => undefined)).stdout).toBe("[|]");
  });

  it("status pipe (COHORT_STATUS_FD=3): fd 3 lines are logged as they come, captured nowhere, and absent from the failure message", async () => {
    const lines: string[] = [];
    const environment = { [STATUS_FD_ENV]: "3" };
    // The first status line must reach the logger while the command still runs (it waits for it to be logged).
    const marker = path.join(tmp, "logged");
    const log = (line: string) => {
      lines.push(line);
      if (line === "progress 1") fs.writeFileSync(marker, "");
    };
    const cmd = `echo "progress 1" >&3; while [ ! -e ${JSON.stringify(marker)} ]; do sleep 0.05; done; printf 'progress 2' >&3; echo out; echo err >&2`;
    const out = await runCommand(cmd, { logging: "none", environment }, {}, log);
    expect(out).toEqual({ stdout: "out", stderr: "err" });
    expect(lines).toEqual(["progress 1", "progress 2"]);

    lines.length = 0;
    const failed = runCommand('echo "startup: ready 1/2" >&3; echo "member web-1 failed" >&2; exit 1', { logging: "none", environment }, {}, (l) => lines.push(l));
    await expect(failed).rejects.toThrow(/^exit status 1: running .*:\nmember web-1 failed\n$/);
    expect(lines).toEqual(["startup: ready 1/2"]);
    // Without the key there is no fd 3 (as upstream).
    await expect(runCommand("echo x >&3", { logging: "none" }, {}, () => undefined)).rejects.toThrow(/exit status/);
  });

  it("status pipe: every line written just before the command exits is logged", async () => {
    const lines: string[] = [];
    await runCommand('i=0; while [ $i -lt 3000 ]; do i=$((i + 1)); echo "line $i"; done >&3', { environment: { [STATUS_FD_ENV]: "3" } }, {}, (l) => lines.push(l));
    expect(lines).toHaveLength(3000);
    expect(lines.at(-1)).toBe("line 3000");
  });

  it("status pipe: a process the command left holding fd 3 does not delay the result", async () => {
    const started = Date.now();
    const out = await runCommand("(sleep 5) </dev/null >/dev/null 2>&1 & echo done", { environment: { [STATUS_FD_ENV]: "3" } }, {}, () => undefined);
    expect(out.stdout).toBe("done");
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it("logs only the selected streams", async () => {
    const lines: string[] = [];
    await runCommand("echo out; echo err >&2", { logging: "stderr" }, {}, (l) => lines.push(l));
    expect(lines).toEqual(["err"]);
    lines.length = 0;
    await runCommand("echo out; echo err >&2", { logging: "none" }, {}, (l) => lines.push(l));
    expect(lines).toEqual([]);
  });

  it("uses the interpreter and fails with the exit status and the output", async () => {
    expect((await runCommand("print(6*7)", { interpreter: ["python3", "-c"] }, {}, () => undefined)).stdout).toBe("42");
    await expect(runCommand("echo partial; exit 3", {}, {}, () => undefined)).rejects.toThrow('exit status 3: running "echo partial; exit 3":\npartial\n');
  });

  it("returns matched files as assets and an archive (globs in order, ! excludes)", async () => {
    fs.mkdirSync(path.join(tmp, "src", "deep"), { recursive: true });
    for (const f of ["src/a.js", "src/deep/b.js", "src/secret.js", "top.txt"]) fs.writeFileSync(path.join(tmp, f), f);
    expect(globFiles(tmp, ["src/**.js", "!**secret.*"]).sort()).toEqual(["src/a.js", "src/deep/b.js"]);
    expect(globFiles(tmp, ["*"])).toEqual(["top.txt"]);
    const out = await runCommand("true", { dir: tmp, assetPaths: ["*.txt"], archivePaths: ["src/*.js"] }, {}, () => undefined);
    expect(out.assets).toEqual({ "top.txt": { [sig.key]: sig.asset, path: path.join(tmp, "top.txt") } });
    expect(out.archive).toEqual({
      [sig.key]: sig.archive,
      assets: {
        "src/a.js": { [sig.key]: sig.asset, path: path.join(tmp, "src/a.js") },
        "src/secret.js": { [sig.key]: sig.asset, path: path.join(tmp, "src/secret.js") },
      },
    });
  });
});

describe("diffInputs and checkInputs", () => {
  it("updates on command changes, replaces only on trigger changes, compares secrets by value", () => {
    expect(diffInputs({ create: "a", stdout: "x" }, { create: "a" })).toEqual({ changed: [], replaces: [] });
    expect(diffInputs({ create: "a" }, { create: "b" })).toEqual({ changed: ["create"], replaces: [] });
    expect(diffInputs({ triggers: [1] }, { triggers: [2] })).toEqual({ changed: ["triggers"], replaces: ["triggers"] });
    expect(diffInputs({ environment: { A: secret("1") } }, { environment: { A: "1" } })).toEqual({ changed: [], replaces: [] });
    expect(diffInputs({ dir: "/a" }, { dir: unknownValue })).toEqual({ changed: ["dir"], replaces: [] });
  });

  it("names each property of the wrong type", () => {
    expect(checkInputs({ create: 1, interpreter: ["sh", 2], environment: { A: 1 }, logging: "all", addPreviousOutputInEnv: "yes", triggers: {} }, false)).toEqual([
      { property: "create", reason: "create must be a string" },
      { property: "interpreter", reason: "interpreter must be a list of strings" },
      { property: "environment.A", reason: "environment.A must be a string" },
      { property: "logging", reason: 'logging must be one of stdout, stderr, stdoutAndStderr, none; got "all"' },
      { property: "addPreviousOutputInEnv", reason: "addPreviousOutputInEnv must be a boolean" },
      { property: "triggers", reason: "triggers must be a list" },
    ]);
    expect(checkInputs({ create: unknownValue, environment: secret({ A: "1" }) }, false)).toEqual([]);
    expect(checkInputs({}, true)).toEqual([{ property: "command", reason: "command is required" }]);
  });
});

describe("the provider", () => {
  const provider = makeCommandProvider("1.2.1", () => () => undefined);
  const file = () => path.join(tmp, "f.txt");
  const inputs = () => ({
    create: 'echo created > "$F"; cat "$F"',
    update: 'echo "updated after $PULUMI_COMMAND_STDOUT" > "$F"; cat "$F"',
    delete: 'rm "$F"',
    environment: { F: secret(file()) },
  });

  it("creates, updates with the previous stdout, and deletes with the command stored in state", async () => {
    const created = await provider.create(urn, inputs());
    expect(created.id).toMatch(/^write[0-9a-f]{8}$/);
    expect(created.outs).toMatchObject({ stdout: "created", stderr: "", environment: { F: secret(file()) } });
    expect(fs.readFileSync(file(), "utf8")).toBe("created\n");
    const updated = await provider.update(created.id, urn, created.outs, { ...inputs(), triggers: [] });
    expect(updated.outs.stdout).toBe("updated after created");
    await provider.delete(created.id, urn, updated.outs);
    expect(fs.existsSync(file())).toBe(false);
  });

  it("runs command:local:run as an invoke and refuses remote resources", async () => {
    expect((await provider.invoke("command:local:run", { command: "echo hi" })).outputs).toMatchObject({ command: "echo hi", stdout: "hi", stderr: "" });
    await expect(provider.check("urn:pulumi:dev::proj::command:remote:Command::r", {}, {})).rejects.toThrow(
      "command:remote:Command needs the upstream pulumi-resource-command plugin; this toolchain runs a substitute that implements only command:local:Command and command:local:run (see docs/toolchain.md)",
    );
    expect(urnName(urn)).toBe("write");
  });
});

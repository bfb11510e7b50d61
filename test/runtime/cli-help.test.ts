/**
 * `cohort --help` and `cohort <command> --help` (issue #16): a user can learn the CLI from them: every
 * command, its flags, an example and the exit codes. In-process (`main` with collected output).
 */
import { describe, expect, it } from "vitest";
import { main } from "../../runtime/cli";

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const sink = (append: (s: string) => void) => ({ write: (chunk: string | Uint8Array) => (append(String(chunk)), true) }) as unknown as NodeJS.WritableStream;
  const code = await main(args, { stdout: sink((s) => (stdout += s)), stderr: sink((s) => (stderr += s)), stdin: () => "" });
  return { code, stdout, stderr };
}

const COMMANDS: readonly (readonly string[])[] = [
  ["run"],
  ["ledger"],
  ["ledger", "verify"],
  ["ledger", "show"],
  ["ledger", "recover"],
  ["ledger", "report"],
  ["ledger", "junit"],
  ["reap"],
];

/** Every flag each command accepts. */
const FLAGS: Readonly<Record<string, readonly string[]>> = {
  run: [
    "--spec",
    "--artifacts",
    "--backend",
    "--profile",
    "--run-id",
    "--backend-config",
    "--backend-option",
    "--kubeconfig",
    "--namespace",
    "--queue",
    "--progress-fd",
    "--lock",
    "--watch-pid",
  ],
  "ledger report": ["--out"],
  "ledger junit": ["--out"],
  reap: ["--grace", "--artifacts"],
};

describe("cohort --help", () => {
  it("lists every command with what it does, the exit codes, examples and how to get a command's help", async () => {
    for (const args of [["--help"], ["-h"], ["help"]]) {
      const r = await cli(args);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      for (const command of ["run", "ledger verify", "ledger show", "ledger recover", "ledger report", "ledger junit", "reap", "version"])
        expect(r.stdout).toMatch(new RegExp(`^  cohort ${command}\\b.*\\S`, "m"));
      expect(r.stdout).toContain("cohort <command> --help");
      expect(r.stdout).toMatch(/^Exit codes:$/m);
      expect(r.stdout).toMatch(/^Examples:$/m);
      for (const code of ["0", "1", "2", "130"]) expect(r.stdout).toMatch(new RegExp(`^  ${code}\\s`, "m"));
    }
  });

  it.each(COMMANDS.map((c) => [c.join(" "), c] as const))("cohort %s --help: usage, every flag explained, an example, exit codes", async (_name, command) => {
    const r = await cli([...command, "--help"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout.startsWith(`usage: cohort ${command.join(" ")}`)).toBe(true);
    expect(r.stdout).toMatch(/^Examples?:$/m);
    expect(r.stdout).toMatch(/^Exit codes:$/m);
    for (const flag of FLAGS[command.join(" ")] ?? []) expect(r.stdout).toMatch(new RegExp(`^  ${flag}\\b.*\\S`, "m"));
    // `cohort help <command>` is the same text.
    expect((await cli(["help", ...command])).stdout).toBe(r.stdout);
  });

  it("a usage error names the problem, shows the short usage and points to --help (exit 2)", async () => {
    const r = await cli(["run", "--spec", "x.yaml"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("cohort: run: --artifacts DIR is required");
    expect(r.stderr).toContain("usage: cohort run --spec FILE|- --artifacts DIR");
    expect(r.stderr).toContain("cohort run --help");
  });
});

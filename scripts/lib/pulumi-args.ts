/**
 * Reading a `pulumi` command line just enough to know whether it runs the program (and so needs a language
 * runtime), which directory it works in, and where to insert extra flags.
 *
 * Node-20-safe (pure).
 */

/**
 * Subcommands (with their aliases) that always run the program: `up`/`update`, `preview`/`pre`.
 *
 * @see https://github.com/pulumi/pulumi/blob/v3.259.0/pkg/cmd/pulumi/operations/up.go (and preview.go)
 */
export const programSubcommands: ReadonlySet<string> = new Set(["up", "update", "preview", "pre"]);

/**
 * Subcommands that run the program only with `--run-program` (`refresh`, `destroy`/`down`/`dn`). Without it
 * they work from the state alone and need no language runtime (checked with the pinned CLI: `destroy` and
 * `refresh` of the fixture stack succeed with no language host and print no warning).
 */
export const optionalProgramSubcommands: ReadonlySet<string> = new Set(["refresh", "destroy", "down", "dn"]);

/** Root persistent flags of the CLI that take a value as the next argument when written without `=`. */
const valueFlags = new Set(["-C", "--cwd", "--color", "--tracing", "--tracing-header", "--otel-traces", "--profiling", "--memprofilerate", "-v", "--verbose"]);

/** What the launcher needs to know about a `pulumi` command line. */
export interface PulumiInvocation {
  /** The first positional argument (the subcommand), if any. */
  readonly subcommand?: string;
  /** Index of the subcommand in the argument list (-1 when absent). */
  readonly subcommandIndex: number;
  /** Value of `-C`/`--cwd`, if given. */
  readonly cwd?: string;
  /**
   * True when the command runs the program through a language runtime: {@link programSubcommands}, or
   * {@link optionalProgramSubcommands} with `--run-program`.
   */
  readonly runsProgram: boolean;
  /** True when the caller already passed `--client` (then the launcher adds nothing). */
  readonly hasClient: boolean;
  /** True when help was asked for (`-h`, `--help`). */
  readonly help: boolean;
}

/**
 * Parses a `pulumi` argument list (without the leading `pulumi`).
 *
 * @example parsePulumiArgs(["-C", "dir", "up", "--yes"]) // { subcommand: "up", subcommandIndex: 2, cwd: "dir", runsProgram: true, ... }
 */
export function parsePulumiArgs(args: readonly string[]): PulumiInvocation {
  let cwd: string | undefined;
  let subcommandIndex = -1;
  let hasClient = false;
  let help = false;
  let runProgramFlag = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === "--") break;
    if (a === "-h" || a === "--help") help = true;
    if (a === "--client" || a.startsWith("--client=")) hasClient = true;
    if (a === "--run-program" || a === "--run-program=true") runProgramFlag = true;
    if (a === "--run-program=false") runProgramFlag = false;
    if (a.startsWith("-")) {
      const eq = a.indexOf("=");
      const name = eq >= 0 ? a.slice(0, eq) : a;
      if (name === "-C" || name === "--cwd") cwd = eq >= 0 ? a.slice(eq + 1) : args[i + 1];
      else if (/^-C./.test(a)) cwd = a.slice(2);
      if (eq < 0 && valueFlags.has(name)) i++;
      continue;
    }
    if (subcommandIndex < 0) subcommandIndex = i;
  }
  const subcommand = subcommandIndex >= 0 ? args[subcommandIndex] : undefined;
  return {
    subcommand,
    subcommandIndex,
    cwd,
    runsProgram: subcommand !== undefined && (programSubcommands.has(subcommand) || (optionalProgramSubcommands.has(subcommand) && runProgramFlag)),
    hasClient,
    help,
  };
}

/**
 * Inserts `extra` right after the subcommand, so that a later `--` in the user's arguments cannot turn
 * the extra flags into positional arguments.
 */
export function insertAfterSubcommand(args: readonly string[], inv: PulumiInvocation, extra: readonly string[]): string[] {
  if (inv.subcommandIndex < 0) return [...args, ...extra];
  return [...args.slice(0, inv.subcommandIndex + 1), ...extra, ...args.slice(inv.subcommandIndex + 1)];
}

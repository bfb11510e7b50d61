/**
 * `roles[].readiness.log.pattern`: the regular expression a `log` readiness probe matches against each line
 * of a member's output.
 *
 * Patterns use RE2 syntax (https://github.com/google/re2/wiki/Syntax, the same as Go's `regexp` package)
 * and are matched by `re2js`, a pure-JavaScript port of RE2 whose matching time is linear in the length of
 * the line. The probe runs on the runtime's event loop, so a backtracking engine (JavaScript's `RegExp`)
 * would let a pattern such as `^(a+)+$` and a line such as `aaaa…ab` block every deadline, signal handler
 * and ledger write for seconds or more. RE2 has no backreferences (`\1`) and no lookaround (`(?=`,
 * `(?!`, `(?<=`, `(?<!`): such patterns are refused when the RunSpec is validated, by the same engine that
 * runs them.
 *
 * A pattern matches anywhere in the line unless anchored (`^`, `$` are the line's ends), like a
 * JavaScript `RegExp` without flags; `(?i)` makes it case-insensitive.
 */
import { RE2JS } from "re2js";

/** A compiled log pattern: `test(line)` tells whether the pattern matches somewhere in `line`. */
export interface LogPattern {
  /** Whether the pattern matches somewhere in `line` (linear time in the length of `line`). */
  test(line: string): boolean;
}

/**
 * Compiles a `log` readiness pattern with RE2 (see the module doc).
 *
 * @param pattern - RE2 syntax, e.g. `"listening on port \\d+"`
 * @returns a matcher whose `test` runs in time linear in the line's length
 * @throws {SyntaxError} with the reason {@link logPatternProblem} gives when the pattern is not valid RE2
 */
export function compileLogPattern(pattern: string): LogPattern {
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern);
  } catch (error) {
    throw new SyntaxError(describeCompileError(error), { cause: error });
  }
  return { test: (line) => re.test(line) };
}

/**
 * Why `pattern` cannot be a `log` readiness pattern, or `undefined` if it can.
 *
 * @param pattern - the pattern as written in the RunSpec
 * @returns a one-line reason starting with `invalid or unsupported in RE2 syntax: `, naming what RE2 lacks
 *   when the pattern uses a backreference or lookaround
 */
export function logPatternProblem(pattern: string): string | undefined {
  try {
    RE2JS.compile(pattern);
    return undefined;
  } catch (error) {
    return describeCompileError(error);
  }
}

/** `re2js` messages read `error parsing regexp: <what>: <where>`; the prefix is dropped and a hint added. */
function describeCompileError(error: unknown): string {
  const message = (error instanceof Error ? error.message : String(error)).replace(/^error parsing regexp: /, "");
  let hint = "";
  if (/^invalid escape sequence: `\\[1-9]/.test(message)) hint = " (backreferences are not supported)";
  else if (/`\(\?<?[=!]/.test(message)) hint = " (lookaround is not supported)";
  return `invalid or unsupported in RE2 syntax: ${message}${hint}`;
}

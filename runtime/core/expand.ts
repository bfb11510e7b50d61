/**
 * `$(VAR)` expansion with Kubernetes semantics, for member commands, env values and exec probes.
 *
 * Rules (Kubernetes `third_party/forked/golang/expansion/expand.go`,
 * https://github.com/kubernetes/kubernetes/blob/master/third_party/forked/golang/expansion/expand.go,
 * and https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/):
 * - `$(NAME)` is replaced by the value of `NAME` when it is defined;
 * - an undefined `$(NAME)` is left unchanged, as the literal text `$(NAME)`;
 * - `$$` becomes a single `$`, so `$$(NAME)` gives the literal `$(NAME)` and is never expanded;
 * - a `$` followed by any other character, an unclosed `$(` and a trailing `$` are kept as written.
 * Shell syntax such as `$NAME` or `${NAME}` is not touched (a shell in the command expands it).
 */

/** One piece of a scanned string: literal text, or a `$(name)` reference. */
type Piece = { readonly text: string } | { readonly ref: string };

function scan(input: string): Piece[] {
  const pieces: Piece[] = [];
  let checkpoint = 0;
  for (let cursor = 0; cursor < input.length; cursor++) {
    if (input[cursor] !== "$" || cursor + 1 >= input.length) continue;
    if (cursor > checkpoint) pieces.push({ text: input.slice(checkpoint, cursor) });
    const next = input[cursor + 1];
    if (next === "$") {
      pieces.push({ text: "$" });
      cursor += 1;
    } else if (next === "(") {
      const close = input.indexOf(")", cursor + 2);
      if (close === -1) {
        pieces.push({ text: "$(" });
        cursor += 1;
      } else {
        pieces.push({ ref: input.slice(cursor + 2, close) });
        cursor = close;
      }
    } else {
      pieces.push({ text: `$${next}` });
      cursor += 1;
    }
    checkpoint = cursor + 1;
  }
  if (checkpoint < input.length) pieces.push({ text: input.slice(checkpoint) });
  return pieces;
}

/**
 * Expands `$(NAME)` references in `input` from `vars`.
 *
 * @param input - e.g. `"--port=$(COHORT_PORT)"`
 * @param vars - variable values; names that are absent stay as `$(NAME)`
 * @returns the expanded string, e.g. `"--port=40123"`
 */
export function expandVars(input: string, vars: Readonly<Record<string, string>>): string {
  let out = "";
  for (const piece of scan(input)) {
    if ("text" in piece) out += piece.text;
    else out += Object.hasOwn(vars, piece.ref) ? vars[piece.ref] : `$(${piece.ref})`;
  }
  return out;
}

/**
 * Names referenced as `$(NAME)` in `input` (escaped `$$(NAME)` excluded), in order of appearance.
 * Used to refuse secret references in commands before anything runs.
 */
export function referencedVars(input: string): string[] {
  const names: string[] = [];
  for (const piece of scan(input)) if ("ref" in piece) names.push(piece.ref);
  return names;
}

/**
 * Expands an ordered env map the way Kubernetes expands a container's `env` list: each value may
 * reference `base` variables and env entries defined EARLIER in `env` (a later or undefined name stays
 * literal).
 *
 * @param base - variables defined before `env` (the runtime's `COHORT_*` variables, secrets)
 * @param env - the role's `app.env`, in declaration order
 * @returns base plus the expanded env entries (env entries override nothing in base: names are disjoint)
 */
export function expandEnv(base: Readonly<Record<string, string>>, env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = { ...base };
  for (const [name, value] of Object.entries(env)) out[name] = expandVars(value, out);
  return out;
}

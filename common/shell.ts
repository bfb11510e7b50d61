/**
 * Quoting for POSIX `sh` (the interpreter of every command:local:Command here, `["/bin/sh", "-c"]`).
 *
 * Single quotes keep every character literal except `'` itself, which is written `'\''` (close, escaped
 * quote, reopen). @see https://pubs.opengroup.org/onlinepubs/9799919799/utilities/V3_chap02.html#tag_19_02_02
 */

/** `text` as one single-quoted `sh` word, always quoted (stable command lines: `a b` -> `'a b'`, `x` -> `'x'`). */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

/** `text` as one `sh` word, quoted only when it holds a character outside `[A-Za-z0-9_.:/@=+-]` (for hints people read). */
export function shellWord(text: string): string {
  return /^[A-Za-z0-9_.:/@=+-]+$/.test(text) ? text : shellQuote(text);
}

/**
 * The artifact root of `cohort run --artifacts DIR`: made ready for one run directory, one `mkdir(2)` at a
 * time. Node's recursive `mkdir` cannot be used there: on a file system that answers ENOENT for a new entry
 * in a directory that exists (`/proc/1`) it retries forever, and on a read-only mount it reports ENOENT
 * instead of EROFS. Here every refusal is an {@link ArtifactsDirError} naming the path and the reason.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { ArtifactsDirError } from "./errors";

const NOT_WRITABLE = new Set(["EACCES", "EROFS", "EPERM"]);

/** `<dir> <why>` for a refused write: `/mnt/ro is on a read-only file system`. */
function why(code: string, dir: string): string {
  if (code === "EROFS") return `${dir} is on a read-only file system`;
  if (code === "EPERM") return `${dir} does not allow new directories (a special file system such as /proc)`;
  return `${dir} is not writable by this user`;
}

/**
 * Creates `runDir` and any missing directory between the artifact root's nearest existing ancestor and it,
 * after checking that ancestor is a directory this process may write to.
 *
 * @param artifacts - the artifact root as the user gave it (`--artifacts`), used in messages
 * @param runDir - absolute path of the run directory, `<artifacts>/<runId>`; it must not exist yet
 * @throws {ArtifactsDirError} `--artifacts <DIR>: not a directory (<path> is a file)`,
 *   `--artifacts <DIR>: not writable (EROFS): <dir> is on a read-only file system`, or
 *   `--artifacts <DIR>: cannot create the run directory <runDir> there (mkdir: ENOENT although <parent> exists; ...)`
 */
export function prepareRunDir(artifacts: string, runDir: string): void {
  const prefix = `--artifacts ${artifacts}`;
  const { missing } = checkArtifactsDir(artifacts, runDir);
  for (const dir of missing) {
    try {
      fs.mkdirSync(dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "EIO";
      if (code === "EEXIST" && dir !== runDir && fs.statSync(dir).isDirectory()) continue;
      if (NOT_WRITABLE.has(code)) throw new ArtifactsDirError(`${prefix}: not writable (${code}): ${why(code, path.dirname(dir))}`, code);
      if (code === "ENOENT") {
        throw new ArtifactsDirError(
          `${prefix}: cannot create the run directory ${runDir} there (mkdir: ENOENT although ${path.dirname(dir)} exists; ` +
            `a file system that does not allow new directories, such as /proc)`,
          code,
        );
      }
      throw new ArtifactsDirError(`${prefix}: cannot create ${dir} (${code}: ${(error as Error).message})`, code);
    }
  }
}

/**
 * The checks of {@link prepareRunDir} that change nothing: the nearest existing ancestor of `runDir` is a
 * directory this user can write to and enter (`access(2)` W_OK|X_OK; a read-only mount answers EROFS).
 * `cohort run --lock` makes them before it writes its lock file, so that an unusable root is refused the same way
 * with or without `--lock`.
 *
 * @param artifacts - the artifact root as the user gave it (`--artifacts`), used in messages
 * @param runDir - absolute path of the run directory, `<artifacts>/<runId>`
 * @returns the nearest existing ancestor and the directories still to create, outermost first (`runDir` last)
 * @throws {ArtifactsDirError} as {@link prepareRunDir} does: not a directory, not writable (EACCES, EROFS, EPERM)
 */
export function checkArtifactsDir(artifacts: string, runDir: string): { readonly existing: string; readonly missing: readonly string[] } {
  const prefix = `--artifacts ${artifacts}`;
  // Nearest existing ancestor of runDir.
  const missing: string[] = [];
  let existing = path.resolve(runDir);
  for (;;) {
    let stat: fs.Stats;
    try {
      stat = fs.statSync(existing);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if ((code === "ENOENT" || code === "ENOTDIR") && path.dirname(existing) !== existing) {
        missing.unshift(existing);
        existing = path.dirname(existing);
        continue;
      }
      throw new ArtifactsDirError(`${prefix}: cannot use ${existing} (${code ?? (error as Error).message})`, code);
    }
    if (!stat.isDirectory()) throw new ArtifactsDirError(`${prefix}: not a directory (${existing} is ${stat.isFile() ? "a file" : "not a directory"})`, "ENOTDIR");
    break;
  }
  try {
    fs.accessSync(existing, fs.constants.W_OK | fs.constants.X_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "EACCES";
    throw new ArtifactsDirError(`${prefix}: not writable (${code}): ${why(code, existing)}`, code);
  }
  return { existing, missing };
}

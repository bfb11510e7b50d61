/**
 * Crash-safe file primitives for the ledger: atomic whole-file writes and directory fsync.
 *
 * An atomic write puts the bytes in a uniquely named temporary file in the SAME directory, fsyncs it,
 * then `rename()`s it over the target (or `link()`s it, when the target must not already exist) and
 * fsyncs the directory so that the new name itself is durable. A reader therefore sees either no file
 * or the complete file, never a prefix, even across a power loss. Unique temp names (pid + random)
 * keep concurrent writers from interleaving in one temp file; atomicity is per file, not per tree.
 *
 * Sources: rename(2) and link(2) atomicity, https://man7.org/linux/man-pages/man2/rename.2.html,
 * https://man7.org/linux/man-pages/man2/link.2.html; fsync of the directory for the entry,
 * https://man7.org/linux/man-pages/man2/fsync.2.html ("Calling fsync() does not necessarily ensure
 * that the entry in the directory containing the file has also reached disk").
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as path from "node:path";

/** Options of {@link writeFileAtomic}. */
export interface AtomicWriteOptions {
  /**
   * Refuse to replace an existing target: the temp file is `link()`ed to the target, which fails with
   * `EEXIST` (the error is rethrown unchanged, `code: "EEXIST"`) if the target exists.
   * @default false (rename over any existing target)
   */
  readonly noClobber?: boolean;
  /** File mode of the new file. @default 0o644 */
  readonly mode?: number;
  /** fsync the parent directory after the rename/link. @default true */
  readonly syncDir?: boolean;
}

/** The unique temp name used for `target`: `.<base>.tmp-<pid>-<12 hex>` in the same directory. */
export function tempNameFor(target: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.tmp-${process.pid}-${randomBytes(6).toString("hex")}`);
}

/**
 * fsync a directory so that entries created, renamed or removed in it are durable.
 * @throws the underlying `NodeJS.ErrnoException` if the directory cannot be opened or synced.
 */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await fsp.open(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Write `data` to `target` atomically: unique temp file in the same directory, write, fsync, close,
 * rename (or link with `noClobber`), fsync of the directory. On any failure the temp file is removed
 * and the target is untouched.
 * @throws the underlying `NodeJS.ErrnoException` (`EEXIST` when `noClobber` and the target exists); a failed
 *   write or fsync (ENOSPC, EDQUOT, EIO), which Node reports without a path, names `target` in its message.
 */
export async function writeFileAtomic(target: string, data: string | Uint8Array, options: AtomicWriteOptions = {}): Promise<void> {
  const tmp = tempNameFor(target);
  let created = false;
  try {
    const handle = await fsp.open(tmp, "wx", options.mode ?? 0o644);
    created = true;
    try {
      await handle.writeFile(data);
      await handle.sync();
    } catch (err) {
      throw namingFile(err, target);
    } finally {
      await handle.close();
    }
    if (options.noClobber) {
      await linkNoClobber(tmp, target);
    } else {
      await fsp.rename(tmp, target);
      created = false;
    }
    if (options.syncDir ?? true) await fsyncDir(path.dirname(target));
  } finally {
    if (created) await fsp.rm(tmp, { force: true }).catch(() => undefined);
  }
}

/**
 * `err` with `file` in its message when Node gave none (`ENOSPC: no space left on device, write` becomes
 * `ENOSPC: no space left on device, write '<file>'`, Node's form for calls that name a path); `code` is kept.
 */
function namingFile(err: unknown, file: string): unknown {
  const e = err as NodeJS.ErrnoException;
  if (!(err instanceof Error) || typeof e.code !== "string" || e.path !== undefined) return err;
  e.message = `${e.message} '${file}'`;
  e.path = file;
  return e;
}

/**
 * `link(tmp, target)` — atomic and refuses an existing target. The temp name is removed by the caller.
 * Filesystems without hard links (EPERM/ENOTSUP/ENOSYS, e.g. some FUSE mounts) fall back to an
 * exclusive copy (`COPYFILE_EXCL`), which still refuses an existing target but is not atomic in content.
 */
async function linkNoClobber(tmp: string, target: string): Promise<void> {
  try {
    await fsp.link(tmp, target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "ENOSYS" && code !== "EOPNOTSUPP") throw err;
    await fsp.copyFile(tmp, target, fs.constants.COPYFILE_EXCL);
    const handle = await fsp.open(target, "r+");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }
}

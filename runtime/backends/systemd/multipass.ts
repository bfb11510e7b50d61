/**
 * Running commands on a Multipass instance: `<multipass> exec <instance> -- <become...> <argv...>` as a
 * child process of the runtime (execa, https://github.com/sindresorhus/execa). Multipass passes stdin,
 * stdout and stderr through and exits with the remote command's status; 2 means the command failed in
 * the daemon (e.g. `exec failed: instance "NAME" does not exist`), 3 the daemon is unreachable, 255 SSH
 * could not be opened (field notes of Multipass 1.16, `include/multipass/cli/return_codes.h`).
 */
import type { ResultPromise } from "execa";

let execaModule: Promise<typeof import("execa")> | null = null;
/** execa, loaded once (ESM-only: a dynamic import works in Node, tsx, vitest and the esbuild bundle). */
function loadExeca(): Promise<typeof import("execa")> {
  execaModule ??= import("execa");
  return execaModule;
}

/** What a finished `multipass exec` gives. */
export interface ExecResult {
  /** The remote command's exit status, or Multipass's own (2, 3, 255); null when killed (timeout, abort). */
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
}

/** The Multipass CLI at an absolute path, with extra environment (e.g. a stand-in's state directory). */
export class MultipassCli {
  readonly #bin: string;
  readonly #env: Readonly<Record<string, string>>;
  /** `multipass exec` calls made, by purpose (for `stats()`). */
  readonly calls: Record<string, number> = {};

  constructor(bin: string, environment: Readonly<Record<string, string>>) {
    this.#bin = bin;
    this.#env = environment;
  }

  /** The argv of `exec`: `exec <instance> -- <command...>`. */
  static execArgs(instance: string, command: readonly string[]): string[] {
    return ["exec", instance, "--", ...command];
  }

  /**
   * Runs `command` on `instance` to completion. `input` goes to its stdin (never to a command line).
   * Never rejects for a non-zero exit; rejects only if the CLI cannot be spawned.
   */
  async run(purpose: string, instance: string, command: readonly string[], options: { input?: string; timeoutMs: number; signal?: AbortSignal }): Promise<ExecResult> {
    this.calls[purpose] = (this.calls[purpose] ?? 0) + 1;
    const { execa } = await loadExeca();
    const result = await execa(this.#bin, MultipassCli.execArgs(instance, command), {
      env: this.#env,
      ...(options.input !== undefined ? { input: options.input } : { stdin: "ignore" as const }),
      reject: false,
      timeout: options.timeoutMs,
      forceKillAfterDelay: 2000,
      ...(options.signal !== undefined ? { cancelSignal: options.signal } : {}),
      stripFinalNewline: true,
      encoding: "utf8",
    });
    if (result.cause !== undefined && result.exitCode === undefined && result.signal === undefined && !result.timedOut && !result.isCanceled) {
      throw new Error(`cannot run ${this.#bin}: ${(result.cause as Error).message ?? String(result.cause)}`, { cause: result.cause });
    }
    return { exitCode: result.exitCode ?? null, stdout: String(result.stdout ?? ""), stderr: String(result.stderr ?? ""), timedOut: result.timedOut };
  }

  /**
   * Starts a long-lived `exec` (e.g. `journalctl -f`): stdin, stdout and stderr piped, not buffered. The subprocess
   * is wrapped (`{ child }`) because it is a thenable that an `await` would otherwise wait out.
   */
  async stream(purpose: string, instance: string, command: readonly string[]): Promise<{ readonly child: ResultPromise }> {
    this.calls[purpose] = (this.calls[purpose] ?? 0) + 1;
    const { execa } = await loadExeca();
    const child = execa(this.#bin, MultipassCli.execArgs(instance, command), {
      env: this.#env,
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      buffer: false,
      reject: false,
      encoding: "utf8",
    });
    return { child };
  }
}

/**
 * Pure parts of the systemd backend: unit names, the member's environment file, the set-up script sent
 * on `multipass exec`'s stdin, and the `systemd-run` / teardown command lines. No I/O here.
 *
 * Sources: systemd.unit(5) "valid unit names" (ASCII letters, digits, `:`, `-`, `_`, `.`, `\`; at most
 * 255 characters), systemd.exec(5) `EnvironmentFile=` (double-quoted values, `\` escapes `"`, `\`, `` ` ``
 * and `$`), systemd.service(5) "Command lines" (`$VAR`/`${VAR}` are expanded in ExecStart=, `$$` is a
 * literal `$`), systemd-run(1).
 */
import { createHash } from "node:crypto";
import * as path from "node:path";
import type { MemberPlan } from "../../core/backend.js";

/** Longest unit name systemd accepts (UNIT_NAME_MAX). */
export const UNIT_NAME_MAX = 255;
/** Root-only directory on the instance holding every member's env file (tmpfs: gone at reboot). */
export const ENV_DIR = "/run/cohort";
/** Parent of the members' working directories on the instance. */
export const WORK_ROOT = "/var/lib/cohort";

/**
 * The transient unit of one member: `cohort-<runId>-<member>.service`, any character outside systemd's
 * unit-name alphabet (`[A-Za-z0-9:_.-]`) replaced with `_`. Stable (the same inputs give the same name);
 * a name longer than 255 characters keeps a prefix and ends with 12 hex of the SHA-256 of the full name.
 */
export function unitName(runId: string, member: string): string {
  const base = `cohort-${runId}-${member}`.replace(/[^A-Za-z0-9:_.-]/g, "_");
  const full = `${base}.service`;
  if (full.length <= UNIT_NAME_MAX) return full;
  const hash = createHash("sha256").update(base).digest("hex").slice(0, 12);
  return `${base.slice(0, UNIT_NAME_MAX - ".service".length - 13)}-${hash}.service`;
}

/** `<ENV_DIR>/<unit>.env`: the member's environment file on its instance (mode 0600, root). */
export function envFilePath(unit: string): string {
  return `${ENV_DIR}/${unit}.env`;
}

/** `<WORK_ROOT>/<runId>/<member>`: the member's working directory on its instance (its COHORT_MEMBER_DIR). */
export function instanceWorkDir(runId: string, member: string): string {
  return `${WORK_ROOT}/${runId.replace(/[^A-Za-z0-9:_.-]/g, "_")}/${member}`;
}

/**
 * Renders an `EnvironmentFile=` document: one `NAME="value"` line per entry, in the given order, with
 * `\`, `"`, `` ` `` and `$` escaped by a backslash (systemd's env-file parser keeps newlines inside double
 * quotes, so a multi-line value survives).
 *
 * @throws {Error} for a name that is not an environment variable name, or a value with a NUL byte
 */
export function renderEnvFile(env: Readonly<Record<string, string>>): string {
  let out = "";
  for (const [name, value] of Object.entries(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`environment name "${name}" cannot go into an EnvironmentFile`);
    if (value.includes("\0")) throw new Error(`environment ${name}: a NUL byte cannot go into an EnvironmentFile`);
    out += `${name}="${value.replace(/[\\"`$]/g, (c) => `\\${c}`)}"\n`;
  }
  return out;
}

/** POSIX-shell single quoting. */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The member's environment on its instance: the plan's, with COHORT_MEMBER_DIR pointing at the instance's directory. */
export function instanceEnvironment(plan: MemberPlan): Record<string, string> {
  return { ...plan.env, COHORT_MEMBER_DIR: instanceWorkDir(plan.runId, plan.id) };
}

/**
 * The `sh -s` script (sent on stdin, never on a command line) that prepares one member on its instance:
 * `umask 077`, the root-only {@link ENV_DIR}, the env file, the working directory and `app.files` (each
 * base64 in a quoted here-document, written with `>` into a fresh directory).
 *
 * @throws {Error} for a file path that is absolute or leaves the member's directory
 */
export function setupScript(plan: MemberPlan, unit: string): string {
  const dir = instanceWorkDir(plan.runId, plan.id);
  const lines = [
    "set -eu",
    "umask 077",
    `mkdir -p ${shQuote(ENV_DIR)}`,
    `chmod 0700 ${shQuote(ENV_DIR)}`,
    `rm -rf ${shQuote(dir)}`,
    `mkdir -p ${shQuote(dir)}`,
    `base64 -d > ${shQuote(envFilePath(unit))} <<'COHORT_EOF'`,
    ...base64Lines(renderEnvFile(instanceEnvironment(plan))),
    "COHORT_EOF",
  ];
  for (const [relative, content] of Object.entries(plan.files)) {
    const normal = path.posix.normalize(relative);
    if (path.posix.isAbsolute(relative) || normal === ".." || normal.startsWith("../") || normal === ".") {
      throw new Error(`file "${relative}" would be written outside the member's directory`);
    }
    const target = `${dir}/${normal}`;
    lines.push(`mkdir -p ${shQuote(path.posix.dirname(target))}`, `base64 -d > ${shQuote(target)} <<'COHORT_EOF'`, ...base64Lines(content), "COHORT_EOF");
  }
  return `${lines.join("\n")}\n`;
}

function base64Lines(text: string): string[] {
  const b64 = Buffer.from(text, "utf8").toString("base64");
  const out: string[] = [];
  for (let i = 0; i < b64.length; i += 76) out.push(b64.slice(i, i + 76));
  return out;
}

/** Escapes `$` as `$$` so that systemd's ExecStart= variable expansion leaves the argument as the core made it. */
export function escapeExecArg(arg: string): string {
  return arg.replace(/\$/g, "$$$$");
}

/**
 * The `systemd-run` argv (without the `become` prefix) that starts the member as a transient service:
 * `Type=exec` (systemd-run fails when the command cannot be executed), `KillMode=control-group`,
 * `TimeoutStopSec=` the stop grace (SIGTERM to the whole unit, then SIGKILL), `--collect` (the unit is
 * unloaded once it is inactive or failed, so nothing is left after teardown), the env file and the
 * working directory. The command's `$` are escaped ({@link escapeExecArg}).
 */
export function systemdRunArgv(plan: MemberPlan, unit: string, stopGraceMs: number): string[] {
  const graceSec = Math.max(1, Math.ceil(stopGraceMs / 1000));
  return [
    "systemd-run",
    "--collect",
    `--unit=${unit}`,
    `--description=cohort member ${plan.id} of ${plan.runId}`,
    "-p",
    "Type=exec",
    "-p",
    `EnvironmentFile=${envFilePath(unit)}`,
    "-p",
    `WorkingDirectory=${instanceWorkDir(plan.runId, plan.id)}`,
    "-p",
    "KillMode=control-group",
    "-p",
    `TimeoutStopSec=${graceSec}s`,
    "--",
    ...plan.command.map(escapeExecArg),
  ];
}

/**
 * The `sh -c` teardown of one unit: `systemctl stop` (SIGTERM, SIGKILL after TimeoutStopSec), then
 * `systemctl kill --signal=SIGKILL` for anything left, `reset-failed`, and the env file removed. Every step
 * tolerates a unit that is already gone (idempotent); the script exits 0.
 */
export function stopScript(unit: string): string {
  const u = shQuote(unit);
  return [
    `systemctl stop ${u} 2>/dev/null`,
    `systemctl kill --signal=SIGKILL ${u} 2>/dev/null`,
    `systemctl reset-failed ${u} 2>/dev/null`,
    `rm -f ${shQuote(envFilePath(unit))}`,
    "true",
  ].join("; ");
}

/**
 * Secret values of the plan that occur in its command (the core expands `$(VAR)` in `app.command`). The
 * systemd backend refuses such a member: its command line is visible in `ps` and `systemctl status`.
 */
export function secretsInCommand(plan: MemberPlan): string[] {
  const names: string[] = [];
  for (const name of plan.secretEnv) {
    const value = plan.env[name];
    if (value !== undefined && value !== "" && plan.command.some((arg) => arg.includes(value))) names.push(name);
  }
  return names;
}

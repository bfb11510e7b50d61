/**
 * Reading `journalctl -o json` entries (one JSON object per line, journalctl(1) "json"; field names from
 * systemd.journal-fields(7)) into what the systemd backend needs: a member's output lines, and the
 * manager's (PID 1's) messages about its unit, from which exits are derived.
 *
 * Manager messages carry `UNIT=<name>` and `_PID=1` (`OBJECT_SYSTEMD_UNIT`-style `UNIT` field of
 * log_unit_struct); output of the service carries `_SYSTEMD_UNIT=<name>`. The message ids come from
 * systemd's `src/systemd/sd-messages.h`:
 * - `98e322203f7a4ed290d09fe03c09fe15` SD_MESSAGE_UNIT_PROCESS_EXIT: "Main process exited, code=exited,
 *   status=1/FAILURE", fields `EXIT_CODE` (`exited` | `killed` | `dumped`) and `EXIT_STATUS` (an exit status,
 *   or a signal number for killed/dumped). Logged at debug level for a clean exit, so it may be absent.
 * - `d9b373ed55a64feb8242e02dbe79a49c` SD_MESSAGE_UNIT_FAILURE_RESULT: "Failed with result 'exit-code'.",
 *   field `UNIT_RESULT` (`exit-code`, `signal`, `core-dump`, `timeout`, `oom-kill`, `resources`, ...).
 * - `7ad2d189f7e94e70a38c781354912448` SD_MESSAGE_UNIT_SUCCESS: "Deactivated successfully."
 * - `be02cf6855d2428ba40df7e9d022f03d` SD_MESSAGE_UNIT_FAILED: "Failed to start ...".
 * - `641257651c1b4ec9a8624d7a40a9e1e7` SD_MESSAGE_SPAWN_FAILED: "Failed at step EXEC spawning ...".
 */
import { constants as osConstants } from "node:os";

export const MESSAGE_PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15";
export const MESSAGE_FAILURE_RESULT = "d9b373ed55a64feb8242e02dbe79a49c";
export const MESSAGE_SUCCESS = "7ad2d189f7e94e70a38c781354912448";
export const MESSAGE_UNIT_FAILED = "be02cf6855d2428ba40df7e9d022f03d";
export const MESSAGE_SPAWN_FAILED = "641257651c1b4ec9a8624d7a40a9e1e7";

/** What one journal entry means for one unit of the run. */
export type JournalFact =
  /** A line the member wrote (stdout/stderr of the service). */
  | { readonly kind: "output"; readonly unit: string; readonly line: string }
  /** A message of the service manager about the unit; `end` when it says the unit is done. */
  | {
      readonly kind: "manager";
      readonly unit: string;
      readonly line: string;
      readonly exit?: { readonly code: "exited" | "killed" | "dumped" | string; readonly status: number };
      readonly end?: { readonly result: string };
    };

/** `MESSAGE` is a string, an array of bytes (not valid UTF-8, or with control characters), or null. */
export function journalMessage(value: unknown): string {
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((b) => typeof b === "number")) return Buffer.from(value as number[]).toString("utf8");
  return "";
}

function field(entry: Record<string, unknown>, name: string): string | undefined {
  const v = entry[name];
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return journalMessage(v);
  return undefined;
}

/**
 * Interprets one parsed `journalctl -o json` entry for the units in `units` (unit name set). Returns
 * undefined for an entry about another unit or with nothing to say.
 */
export function journalFact(entry: unknown, units: ReadonlySet<string>): JournalFact | undefined {
  if (entry === null || typeof entry !== "object" || Array.isArray(entry)) return undefined;
  const e = entry as Record<string, unknown>;
  const line = journalMessage(e.MESSAGE).replace(/\r?\n$/, "");
  const managerUnit = field(e, "UNIT");
  if (managerUnit !== undefined && units.has(managerUnit) && field(e, "_PID") === "1") {
    const id = field(e, "MESSAGE_ID");
    if (id === MESSAGE_PROCESS_EXIT) {
      const status = Number(field(e, "EXIT_STATUS"));
      return { kind: "manager", unit: managerUnit, line, exit: { code: field(e, "EXIT_CODE") ?? "exited", status: Number.isInteger(status) ? status : -1 } };
    }
    if (id === MESSAGE_FAILURE_RESULT) return { kind: "manager", unit: managerUnit, line, end: { result: field(e, "UNIT_RESULT") ?? "unknown" } };
    if (id === MESSAGE_SUCCESS) return { kind: "manager", unit: managerUnit, line, end: { result: "success" } };
    return { kind: "manager", unit: managerUnit, line };
  }
  const serviceUnit = field(e, "_SYSTEMD_UNIT");
  if (serviceUnit !== undefined && units.has(serviceUnit) && field(e, "_PID") !== "1") return { kind: "output", unit: serviceUnit, line };
  return undefined;
}

const SIGNAL_NAMES = new Map<number, string>(Object.entries(osConstants.signals).map(([name, n]) => [n, name]));

/** Linux signal number -> name (`9` -> `SIGKILL`), or `SIG<n>` when unknown. */
export function signalName(n: number): string {
  return SIGNAL_NAMES.get(n) ?? `SIG${n}`;
}

/** How a unit ended, as the backend reports it (an `exited` event's fields). */
export interface UnitEnd {
  readonly reason: string;
  readonly exitCode: number | null;
  readonly signal: string | null;
}

/**
 * The `exited` event's fields from the unit's result and the last process-exit message (if any):
 * e.g. `unit cohort-r-api-0.service failed (result exit-code): main process exited with status 3`,
 * `... (result signal): main process killed by SIGKILL`, `... deactivated successfully: main process
 * exited with status 0`.
 */
export function describeEnd(unit: string, result: string, exit: { code: string; status: number } | undefined): UnitEnd {
  let exitCode: number | null = null;
  let signal: string | null = null;
  let how = "";
  if (exit !== undefined) {
    if (exit.code === "exited") {
      exitCode = exit.status;
      how = `main process exited with status ${exit.status}`;
    } else {
      signal = signalName(exit.status);
      how = `main process ${exit.code === "dumped" ? "dumped core on" : "killed by"} ${signal}`;
    }
  } else if (result === "success") {
    exitCode = 0;
    how = "main process exited with status 0";
  }
  const head = result === "success" ? `unit ${unit} deactivated successfully` : `unit ${unit} failed (result ${result})`;
  return { reason: how === "" ? head : `${head}: ${how}`, exitCode, signal };
}

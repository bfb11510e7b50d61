/**
 * The contract between the cohort runtime's core (scheduler, ledger) and a backend adapter
 * (`runtime/backends/<name>/`). The core never imports a backend's SDK; a backend never decides
 * ordering, deadlines or teardown order. See ../../../shared/DESIGN.md ("Principles") and STYLE.md §11.
 */

/** One member as the core hands it to a backend: every field is resolved (no defaults left). */
export interface MemberPlan {
  /** `<role>-<index>`, e.g. `agent-3`; unique within the run; DNS-1123 label. */
  readonly id: string;
  readonly role: string;
  /** 0-based index within the role. */
  readonly index: number;
  /** The run id (`<cohort name>-<UTC yyyymmddThhmmssZ>-<6 hex>`). */
  readonly runId: string;
  /** argv; `$(VAR)` references are already expanded by the core (Kubernetes semantics). */
  readonly command: readonly string[];
  /** Environment for the member: the DESIGN.md COHORT_* variables plus the role's `app.env`. */
  readonly env: Readonly<Record<string, string>>;
  /**
   * Names of env entries whose values are secrets (generated per member). A backend must never log
   * them; the ledger redacts their values.
   */
  readonly secretEnv: readonly string[];
  /** Image pinned by digest (`name@sha256:<64 hex>`); Kubernetes backends only, "" otherwise. */
  readonly image: string;
  /** Kubernetes quantities, e.g. `{ cpu: "100m", memory: "128Mi" }`. */
  readonly resources: Readonly<Record<string, string>>;
  /** Port the member listens on (process backend: a free loopback port; cluster: the container port). */
  readonly port: number;
  /** Per-member working directory (process backend) — holds its files and state. */
  readonly workDir: string;
  /** Files to write into `workDir` before start (relative path -> content). */
  readonly files: Readonly<Record<string, string>>;
}

/** What a backend reports about a member it started. */
export type MemberEvent =
  | { readonly kind: "started"; readonly member: string; readonly detail?: Readonly<Record<string, unknown>> }
  /** The backend's own readiness signal (e.g. Kubernetes Pod Ready); process backends rely on probes instead. */
  | { readonly kind: "ready"; readonly member: string; readonly detail?: Readonly<Record<string, unknown>> }
  /** The member exited / its pod terminated / it was evicted. `reason` is one line, human readable. */
  | {
      readonly kind: "exited";
      readonly member: string;
      readonly reason: string;
      readonly exitCode?: number | null;
      readonly signal?: string | null;
      /** The last lines of the member's output, if the backend has them. */
      readonly outputTail?: string;
    };

/** Where a member can be reached for readiness probes. */
export interface MemberEndpoint {
  readonly host: string;
  readonly port: number;
}

/** A handle to one started member. */
export interface MemberHandle {
  readonly member: string;
  /** Address for tcp/http probes. */
  readonly endpoint: MemberEndpoint;
  /** Lines of the member's combined output as they arrive (for `log` readiness probes). */
  onOutputLine?(listener: (line: string) => void): () => void;
  /** The last `lines` lines of output (for failure messages). */
  outputTail?(lines: number): Promise<string>;
}

/**
 * A backend adapter. Keep it narrow (STYLE.md §11): `available`, `start`, `stop`, plus optional
 * capabilities. Backends report exits and readiness through the `events` callback given at creation.
 */
export interface Backend {
  /** Registry name: `"process" | "kubernetes" | ...`. */
  readonly name: string;
  /** Resolves if the backend can run here; rejects with `BackendUnavailableError` naming what is missing. */
  available(): Promise<void>;
  /**
   * Optional: called once with the complete roster before any `start` (cluster backends submit the
   * whole roster here for all-or-nothing admission). Resolves when the roster is admitted.
   */
  admit?(members: readonly MemberPlan[], signal: AbortSignal): Promise<void>;
  /** Starts one member. Resolves once it is started (spawned / created), not when it is ready. */
  start(member: MemberPlan, signal: AbortSignal): Promise<MemberHandle>;
  /** Stops one member: SIGTERM (or delete), then SIGKILL after `graceMs`. Idempotent. */
  stop(member: string, graceMs: number): Promise<void>;
  /** Optional: release whole-run resources (namespace, ...) after every member is stopped. Idempotent. */
  close?(): Promise<void>;
}

/** Callback through which a backend reports member events to the core. */
export type MemberEventSink = (event: MemberEvent) => void;

/**
 * The contract between the cohort runtime's core (scheduler, ledger) and a backend adapter
 * (`runtime/backends/<name>/`). The core never imports a backend's SDK; a backend never decides
 * ordering, deadlines or teardown order. See docs/architecture.md "Backend".
 *
 * Extensions by the runtime core (all optional, so existing adapters keep compiling):
 * `MemberPlan.readiness`, `MemberHandle.detail`, `MemberHandle.exec`, `MemberHandle.listenerOwner`,
 * `MemberHandle.whenListening`, `MemberEvent.cause`, `Backend.readiness`, `Backend.restarts`, `Backend.endpoints`, `Backend.stats` and
 * {@link MemberIdentity}.
 */
import type { CompiledReadiness, CompiledRunSpec } from "./spec";

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
  /** Environment for the member: the COHORT_* variables (runtime/README.md "Member environment") plus the role's `app.env`. */
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
  /**
   * The role's readiness gate, `$(VAR)`-expanded (exec command). Backends whose platform checks readiness
   * itself (`Backend.readiness === "backend"`, e.g. a Pod readinessProbe) render it; others ignore it:
   * the core probes the member.
   */
  readonly readiness?: CompiledReadiness;
}

/** A member before it is planned: what `Backend.endpoints` gets. */
export interface MemberIdentity {
  /** `<role>-<index>`. */
  readonly id: string;
  readonly role: string;
  readonly index: number;
  /** `false` when the role set `app.port: false` (the member gets no COHORT_PORT). */
  readonly wantsPort: boolean;
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
      /**
       * The backend's diagnosis of why it exited, one line, e.g. `port 43121 was already in use (EADDRINUSE)`;
       * the core appends it to the failure summary.
       */
      readonly cause?: string;
    };

/** Where a member can be reached for readiness probes. */
export interface MemberEndpoint {
  readonly host: string;
  readonly port: number;
}

/**
 * Who holds the listening socket of a port (see {@link MemberHandle.listenerOwner}).
 *
 * - `member`: a process of the member's own tree (its cgroup, process group or descendants) listens; `pid` is one.
 * - `other`: another process listens; `pid` and `command` (its name, e.g. `python3`) when the backend could see it.
 * - `none`: nothing listens on the port: nothing would accept a connection at the probed address, where the
 *   backend can ask that (process backend: the compiled launcher's sock_diag lookup), else no address at all.
 * - `unknown`: the backend cannot tell here (e.g. no readable /proc/net); the core then trusts the connect alone.
 */
export type ListenerOwner =
  | { readonly owner: "member"; readonly pid: number }
  | { readonly owner: "other"; readonly pid?: number; readonly command?: string }
  | { readonly owner: "none" }
  | { readonly owner: "unknown"; readonly why: string };

/** A handle to one started member. */
export interface MemberHandle {
  readonly member: string;
  /** Address for tcp/http probes. */
  readonly endpoint: MemberEndpoint;
  /** Lines of the member's combined output as they arrive (for `log` readiness probes). */
  onOutputLine?(listener: (line: string) => void): () => void;
  /** The last `lines` lines of output (for failure messages). */
  outputTail?(lines: number): Promise<string>;
  /**
   * Facts about the started member for the ledger's `member-started` record, e.g. `{ pid, pgid }`.
   * JSON values only; never secrets.
   */
  readonly detail?: Readonly<Record<string, unknown>>;
  /**
   * Runs `command` the way an exec readiness probe runs (process backend: with the member's environment,
   * in its directory). Resolves with the exit code (null if killed); rejects only if it cannot run at all.
   * Must stop the command when `signal` aborts.
   */
  exec?(command: readonly string[], signal: AbortSignal): Promise<{ readonly exitCode: number | null }>;
  /**
   * Who holds the LISTEN socket of TCP `port` on the member's host. The core calls it after a tcp/http
   * probe attempt succeeded, so that a stranger listening on the member's port (another program, a
   * leftover of an earlier run) does not make the member ready: the attempt fails unless the owner is
   * `member` (or `unknown`). Process backend: the socket that accepts connections to the endpoint's address (the
   * compiled launcher's sock_diag exact lookup, runtime/launcher/listen.go; else every LISTEN socket of the port in
   * /proc/net/tcp{,6}) and /proc/<pid>/fd (Linux; runtime/backends/process/sockets.ts). Never rejects (a failure
   * to look is `unknown`).
   */
  listenerOwner?(port: number): Promise<ListenerOwner>;
  /**
   * Resolves as soon as a LISTEN socket would accept a TCP connection to `port` at {@link endpoint}'s host (it
   * may be there already), so that a tcp/http probe attempts right away instead of at its next retry
   * (runtime/core/probes.ts). A wake-up only: the probe's connect and the owner check still decide, and while
   * the watch is pending the probe keeps retrying, less often. Rejects when the backend cannot tell (the probe
   * then retries on its plain schedule); stops watching and rejects when `signal` aborts. Process backend: the
   * compiled launcher asks the kernel every 10 ms (sock_diag exact lookups, runtime/launcher/listen.go).
   */
  whenListening?(port: number, signal: AbortSignal): Promise<void>;
}

/**
 * A backend adapter. Keep it narrow: `available`, `start`, `stop`, plus optional
 * capabilities. Backends report exits and readiness through the `events` callback given at creation.
 */
export interface Backend {
  /** Registry name: `"process" | "kubernetes" | ...`. */
  readonly name: string;
  /** Resolves if the backend can run here; rejects with `BackendUnavailableError` naming what is missing. */
  available(): Promise<void>;
  /**
   * Who decides readiness. `"probe"` (default): the core runs the role's probe (tcp, http, exec, log)
   * against the handle. `"backend"`: the backend emits a `ready` event per member (e.g. Pod Ready),
   * using `MemberPlan.readiness`; the core runs no probe.
   * @default "probe"
   */
  readonly readiness?: "probe" | "backend";
  /**
   * Whether `start` may be called again for a member once `stop` resolved for it (the core restarts
   * members that exit, or are not ready by their deadline, before they are ready: RunSpec
   * `roles[].restart`). The new start gets the same plan (same port, directory and secrets); the backend
   * must report no event of the earlier incarnation after its `stop` resolved. Without it, a RunSpec
   * that asks for restarts fails the run before any member starts.
   * @default false
   */
  readonly restarts?: boolean;
  /**
   * Optional: assigns each member the address it will listen on, before any member is planned (its
   * peers' addresses go into COHORT_NEEDS). Members with `wantsPort: false` may be omitted. Without this
   * method the core reserves a free loopback port per member (runtime/core/ports.ts).
   */
  endpoints?(members: readonly MemberIdentity[], signal: AbortSignal): Promise<ReadonlyMap<string, MemberEndpoint>>;
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
  /**
   * Optional: JSON-safe counters of the run (API calls, ...), no secrets. The core records them as a
   * `backend-stats` ledger record after `close()`.
   */
  stats?(): unknown;
}

/** Callback through which a backend reports member events to the core. */
export type MemberEventSink = (event: MemberEvent) => void;

/** What every backend factory gets. */
export interface BackendContext {
  /** The run id (`<name>-<yyyymmddThhmmssZ>-<6 hex>`). */
  readonly runId: string;
  /** Absolute run directory `<artifacts>/<runId>`. */
  readonly runDir: string;
  /** The compiled RunSpec of the run. */
  readonly spec: CompiledRunSpec;
  /** Sink for member events (exits, readiness); the scheduler's `events`. */
  readonly events: MemberEventSink;
  /**
   * Backend-specific settings: `cohort run --backend-config FILE` (a YAML/JSON mapping) overlaid with
   * `--backend-option KEY=VALUE` (repeatable; VALUE is parsed as JSON when it is valid JSON, else kept as
   * a string). @default {}
   */
  readonly options: Readonly<Record<string, unknown>>;
  /**
   * Optional sink for a backend's own ledger records (e.g. the process backend's `member-killed` and
   * `backend-warning`); appended to the run's ledger in call order. Never throws.
   */
  readonly record?: (kind: string, fields: Record<string, unknown> & { member?: string }) => void;
}

/** Creates a backend for one run. */
export type BackendFactory = (context: BackendContext) => Backend | Promise<Backend>;

/**
 * `SimCluster` (token `cohortlab:sim:SimCluster`): a real Kubernetes control plane — etcd, kube-apiserver,
 * kube-controller-manager, kube-scheduler and kwok — run as supervised local processes by `simctl`
 * (simctl/main.ts), and the Kubernetes provider built from its kubeconfig.
 *
 * - create: `simctl start` (ports checked free, every component gated by a real readiness signal, rolled back
 *   completely when any fails); stdout is one JSON line with the kubeconfig, so it is a secret output
 *   (`additionalSecretOutputs`) and only stderr (progress) is logged.
 * - delete: `simctl stop` (SIGTERM to every process group it started, SIGKILL after 10 s, then the state dir is
 *   removed); idempotent, so a sim stopped by hand is not an error.
 * - triggers: the state dir, the ports, the simulated pod timing and the binaries' pins, so any change replaces
 *   the control plane (delete first: the state dir is reused).
 * - The out-of-cluster controllers (Kueue, Agent Sandbox) are added by {@link SimCluster.controller} once their
 *   CRDs exist; their start is their readiness gate (Kueue: webhooks answering through the API server).
 * - A run's credentials (the token of its ServiceAccount and the backend config of the out-of-cluster runtime)
 *   are written by {@link SimCluster.runCredentials} once its {@link RunNamespace} exists.
 * - The provider: `deleteUnreachable: true` (the sim is ephemeral: once it is gone, destroy drops its objects
 *   from state), server-side apply, `clusterIdentifier` = the state dir + ports (replaced with the sim).
 *
 * @see docs/sim.md
 */
import * as path from "node:path";
import * as command from "@pulumi/command";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { local, sim as simPins } from "../../common/pins.js";
import { shellQuote } from "../../common/shell.js";
import { jsonDigest } from "../digest.js";
import { RUNTIME_NAMES } from "../run/manifests.js";
import type { RunNamespace } from "../run/RunNamespace.js";
import { SIM_PORT_BLOCK } from "./ports.js";
import { isGoGcInRange, SIM_GO_GC_RANGE } from "./goRuntime.js";

/** Arguments of {@link SimCluster}. Plain values: all are checked before any resource exists. */
export interface SimClusterArgs {
  /** Absolute path of the state dir (pids, logs, PKI, etcd data, kubeconfig); created by start, removed by stop. */
  readonly stateDir: string;
  /** Project directory (holds simctl/main.ts and node_modules/tsx); the commands run there. */
  readonly projectDir: string;
  /** Node binary (>= 22) that runs simctl. @default process.execPath */
  readonly nodePath?: string;
  /** First port of the block of {@link SIM_PORT_BLOCK} (12) loopback ports the sim uses; `undefined` = free ports picked at start. */
  readonly portBase?: number;
  /** Simulated pod start-up: minimum delay from bind to Ready, milliseconds. @default 0 */
  readonly podReadyDelayMs?: number;
  /** Simulated pod start-up: width of the uniform random extra delay, milliseconds. @default 0 */
  readonly podReadyJitterMs?: number;
  /** Kube context name in the kubeconfig. @default "cohort-lab-sim" */
  readonly contextName?: string;
  /**
   * `GOGC` of every sim process, an integer from 25 to 10000 (./goRuntime.ts SIM_GO_GC_RANGE); passed to
   * `simctl start --go-gc` only when set, so a stack that never set it keeps its control plane's identity.
   * @default SIM_GO_GC_DEFAULT (400), applied by simctl
   */
  readonly goGC?: number;
}

/** What `simctl start --print-kubeconfig` prints (one JSON line). */
export interface SimStartSummary {
  readonly stateDir: string;
  readonly kubeconfig: string;
  readonly kubeconfigYaml: string;
  readonly apiserverUrl: string;
  readonly contextName: string;
  readonly ports: Readonly<Record<string, number>>;
  /** `host:port` of the Temporal dev server's frontend; absent from a sim started before Temporal was part of it. */
  readonly temporalAddress?: string;
}

/**
 * Parses simctl's summary line.
 *
 * @throws {Error} naming the field when stdout is not the expected JSON
 */
export function parseSimSummary(stdout: string): SimStartSummary {
  const last = stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .at(-1);
  if (last === undefined) throw new Error("simctl printed no summary line");
  const v = JSON.parse(last) as Partial<SimStartSummary>;
  for (const f of ["stateDir", "kubeconfig", "kubeconfigYaml", "apiserverUrl", "contextName"] as const) {
    if (typeof v[f] !== "string" || v[f] === "") throw new Error(`simctl's summary has no valid "${f}"`);
  }
  if (v.ports === undefined || typeof v.ports !== "object") throw new Error('simctl\'s summary has no valid "ports"');
  return v as SimStartSummary;
}

/**
 * The program entry the Commands run, relative to the project directory: a stable path (it is stored in every
 * sim stack's state as part of the create and delete steps, so moving it would update every existing stack);
 * it forwards to simctl/main.ts.
 */
export const SIMCTL_ENTRY = "scripts/sim/simctl.ts";

/**
 * The shell command that runs simctl: `'<node>' --import tsx scripts/sim/simctl.ts <args>` ({@link SIMCTL_ENTRY}) (every argument
 * single-quoted; none is secret).
 */
export function simctlCommand(nodePath: string, args: readonly string[]): string {
  return [nodePath, "--import", "tsx", SIMCTL_ENTRY, ...args].map(shellQuote).join(" ");
}

/** A simctl command line and the directory to run it in ({@link SimCluster.simctl}). */
export interface SimctlStep {
  readonly command: string;
  readonly dir: string;
}

/**
 * A sim control plane.
 *
 * Children: `<name>-control-plane` (command:local:Command), `<name>-provider` (pulumi:providers:kubernetes), and
 * one `<name>-<controller>` Command per {@link SimCluster.controller} call, `<name>-run-credentials` from
 * {@link SimCluster.runCredentials}.
 *
 * @throws {pulumi.InputPropertyError} when `stateDir` or `projectDir` is not absolute, or a port/delay is out of range
 */
export class SimCluster extends pulumi.ComponentResource {
  /** The control-plane Command (its stdout, a secret, is simctl's summary). */
  public readonly controlPlane: command.local.Command;
  public readonly provider: k8s.Provider;
  /** Admin kubeconfig (a secret: it carries a bearer token). */
  public readonly kubeconfig: pulumi.Output<string>;
  /** Absolute path of the admin kubeconfig file in the state dir. */
  public readonly kubeconfigPath: pulumi.Output<string>;
  public readonly apiserverUrl: pulumi.Output<string>;
  public readonly kubeContext: pulumi.Output<string>;
  /** The loopback ports by name (`kueueWebhook` is what the Kueue webhook Service points at). */
  public readonly ports: pulumi.Output<Readonly<Record<string, number>>>;
  /**
   * `host:port` (loopback) of the Temporal dev server simctl supervises with the control plane (docs/temporal.md);
   * `""` for a sim started by a simctl that had no Temporal (recreate the stack to get one).
   */
  public readonly temporalAddress: pulumi.Output<string>;
  /** Absolute path of the state dir (pids, logs, PKI, etcd data, kubeconfig). */
  public readonly stateDir: string;
  /** Node binary and project directory of the simctl commands. */
  private readonly nodePath: string;
  private readonly projectDir: string;
  private readonly baseName: string;

  constructor(name: string, args: SimClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    for (const field of ["stateDir", "projectDir"] as const) {
      if (!path.isAbsolute(args[field]))
        throw new pulumi.InputPropertyError({ propertyPath: field, reason: `SimCluster ${name}: ${field} must be absolute (got ${JSON.stringify(args[field])})` });
    }
    if (args.portBase !== undefined && (!Number.isInteger(args.portBase) || args.portBase < 1024 || args.portBase > 65535 - SIM_PORT_BLOCK)) {
      throw new pulumi.InputPropertyError({
        propertyPath: "portBase",
        reason: `SimCluster ${name}: portBase must be an integer from 1024 to ${65535 - SIM_PORT_BLOCK} (got ${args.portBase})`,
      });
    }
    for (const [field, v] of [
      ["podReadyDelayMs", args.podReadyDelayMs],
      ["podReadyJitterMs", args.podReadyJitterMs],
    ] as const) {
      if (v !== undefined && (!Number.isInteger(v) || v < 0 || v > 3_600_000))
        throw new pulumi.InputPropertyError({ propertyPath: field, reason: `SimCluster ${name}: ${field} must be an integer from 0 to 3600000 (got ${v})` });
    }
    if (args.goGC !== undefined && !isGoGcInRange(args.goGC)) {
      throw new pulumi.InputPropertyError({
        propertyPath: "goGC",
        reason: `SimCluster ${name}: goGC must be an integer from ${SIM_GO_GC_RANGE.min} to ${SIM_GO_GC_RANGE.max} (got ${args.goGC})`,
      });
    }
    super("cohortlab:sim:SimCluster", name, {}, opts);
    const nodePath = args.nodePath ?? process.execPath;
    const startArgs = [
      "start",
      "--state-dir",
      args.stateDir,
      "--pod-ready-delay-ms",
      String(args.podReadyDelayMs ?? 0),
      "--pod-ready-jitter-ms",
      String(args.podReadyJitterMs ?? 0),
      "--print-kubeconfig",
      ...(args.portBase !== undefined ? ["--port-base", String(args.portBase)] : []),
      ...(args.contextName !== undefined ? ["--context", args.contextName] : []),
      ...(args.goGC !== undefined ? ["--go-gc", String(args.goGC)] : []),
    ];
    this.controlPlane = new command.local.Command(
      `${name}-control-plane`,
      {
        create: simctlCommand(nodePath, startArgs),
        delete: simctlCommand(nodePath, ["stop", "--state-dir", args.stateDir]),
        dir: args.projectDir,
        triggers: [args.stateDir, jsonDigest({ startArgs, pins: simPins, kueue: local.kueue.version, agentSandbox: local.agentSandbox.version })],
        logging: "stderr",
        addPreviousOutputInEnv: false,
      },
      { parent: this, additionalSecretOutputs: ["stdout"], deleteBeforeReplace: true },
    );
    const summary = this.controlPlane.stdout.apply(parseSimSummary);
    this.kubeconfig = pulumi.secret(summary.apply((s) => s.kubeconfigYaml));
    this.kubeconfigPath = pulumi.unsecret(summary.apply((s) => s.kubeconfig));
    this.apiserverUrl = pulumi.unsecret(summary.apply((s) => s.apiserverUrl));
    this.kubeContext = pulumi.unsecret(summary.apply((s) => s.contextName));
    this.ports = pulumi.unsecret(summary.apply((s) => s.ports));
    this.temporalAddress = pulumi.unsecret(summary.apply((s) => s.temporalAddress ?? ""));
    this.provider = new k8s.Provider(
      `${name}-provider`,
      {
        kubeconfig: this.kubeconfig,
        clusterIdentifier: `sim-${jsonDigest([args.stateDir, startArgs]).slice(0, 16)}`,
        deleteUnreachable: true,
        enableServerSideApply: true,
      },
      { parent: this, dependsOn: [this.controlPlane] },
    );
    this.baseName = name;
    this.stateDir = args.stateDir;
    this.nodePath = nodePath;
    this.projectDir = args.projectDir;
    this.registerOutputs({
      controlPlane: this.controlPlane,
      provider: this.provider,
      kubeconfig: this.kubeconfig,
      kubeconfigPath: this.kubeconfigPath,
      apiserverUrl: this.apiserverUrl,
      kubeContext: this.kubeContext,
      ports: this.ports,
      temporalAddress: this.temporalAddress,
      stateDir: this.stateDir,
    });
  }

  /**
   * How a Command runs simctl against this sim: `simctl <words> --state-dir <stateDir> <args>` and the project
   * directory to run it in.
   */
  public simctl(words: readonly string[], args: readonly string[] = []): SimctlStep {
    return { command: simctlCommand(this.nodePath, [...words, "--state-dir", this.stateDir, ...args]), dir: this.projectDir };
  }

  /**
   * Starts an out-of-cluster controller after `dependsOn` (its CRDs and, for Kueue, its webhook wiring): the
   * Command's create is `simctl start-controller`, which returns once the controller is ready; its delete stops
   * only that controller. Returns the Command: depend on it before creating the controller's objects.
   *
   * @param configuration - Kueue: the base Configuration (YAML) rendered by components/k8s/manifests/kueue.ts; it
   *   travels on stdin and is a trigger (a new Configuration restarts the manager).
   */
  public controller(controllerName: "kueue" | "agent-sandbox", dependsOn: readonly pulumi.Resource[], configuration?: string): command.local.Command {
    const start = this.simctl(["start-controller", controllerName], configuration !== undefined ? ["--configuration", "-"] : []);
    return new command.local.Command(
      `${this.baseName}-${controllerName}`,
      {
        create: start.command,
        delete: this.simctl(["stop-controller", controllerName]).command,
        dir: start.dir,
        ...(configuration !== undefined ? { stdin: configuration } : {}),
        triggers: [this.stateDir, jsonDigest({ configuration: configuration ?? null })],
        logging: "stderr",
        addPreviousOutputInEnv: false,
      },
      { parent: this, dependsOn: [this.controlPlane, ...dependsOn], deleteBeforeReplace: true },
    );
  }

  /**
   * Writes the credentials of a run whose runtime runs out of cluster, after every object of its namespace:
   * `simctl run-credentials` issues a token of the run's ServiceAccount and writes the Kubernetes backend's
   * config file (`<state>/runs/<ns>/backend.json`); stdout's last line is `{"backendConfig": <path>}`. A new
   * run namespace replaces it.
   *
   * @param opts - e.g. `aliases` for a stack whose Command existed under another name or parent
   * @param flavors - the ResourceFlavors the roster may be admitted to (name → `nodeLabels`, `tolerations`), written
   *   into the backend config for the `workload` admission path (`simctl run-credentials --flavors`); omitted = the
   *   sim flavor (docs/sim.md "Admission paths")
   */
  public runCredentials(
    run: RunNamespace,
    opts: Pick<pulumi.CustomResourceOptions, "aliases"> = {},
    flavors?: Readonly<Record<string, { readonly nodeLabels?: Readonly<Record<string, string>>; readonly tolerations?: readonly object[] }>>,
  ): command.local.Command {
    return new command.local.Command(
      `${this.baseName}-run-credentials`,
      {
        create: simctlCommand(this.nodePath, [
          "run-credentials",
          "--state-dir",
          this.stateDir,
          "--namespace",
          run.namespaceName,
          "--service-account",
          RUNTIME_NAMES.serviceAccount,
          "--queue",
          run.localQueueName,
          ...(flavors !== undefined ? ["--flavors", JSON.stringify(flavors)] : []),
        ]),
        dir: this.projectDir,
        triggers: [run.namespaceName],
        logging: "stderr",
        addPreviousOutputInEnv: false,
      },
      { ...opts, parent: this, dependsOn: [this.controlPlane, ...run.resources] },
    );
  }
}

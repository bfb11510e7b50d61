/**
 * `simctl`: the sim profile's process supervisor (see docs/sim.md).
 *
 *   simctl start --state-dir DIR [--port-base N | --ports name=port,...] [--nodes N]
 *                [--pod-ready-delay-ms MS] [--pod-ready-jitter-ms MS] [--go-gc PERCENT] [--timeout-ms MS]
 *                [--keep-on-failure]
 *                (--go-gc: GOGC of every process, 25..10000, default 400: components/sim/goRuntime.ts SIM_GO_GC_DEFAULT)
 *   simctl start-controller kueue|agent-sandbox|temporal --state-dir DIR [--configuration FILE] [--timeout-ms MS]
 *                (kueue: FILE is the base Configuration YAML; the process fields are replaced; temporal: the dev
 *                server `start` already started, restarted after a stop-controller with its history file kept)
 *   simctl stop-controller kueue|agent-sandbox|temporal --state-dir DIR
 *   simctl nodes --state-dir DIR --count N [--pool NAME]          register N e2-standard-16 agent nodes, wait Ready
 *   simctl wait-nodes --state-dir DIR --count N [--pool NAME]     wait until <pool>-0000.. are Ready
 *   simctl run-credentials --state-dir DIR --namespace NS --service-account SA [--queue LQ] [--flavors JSON]
 *                kubeconfig of a ServiceAccount token + backend config for the out-of-cluster runtime; JSON is
 *                `{"<ResourceFlavor>": {"nodeLabels": {...}, "tolerations": [...]}}` (default: the sim flavor)
 *   simctl status --state-dir DIR [--json]
 *   simctl stop --state-dir DIR [--grace-ms MS]
 *   simctl check            exit 0 when every sim binary and the pinned manifests are in the cache, else print
 *                           the reason and exit 1
 *
 * `start` and `start-controller` print one JSON line on stdout (state dir, kubeconfig path, API server URL,
 * ports, context name, `temporalAddress`; with `--print-kubeconfig` also the kubeconfig itself, which holds a token: treat that
 * output as a secret); progress goes to stderr. Run with Node >= 22 and tsx:
 * `node --import tsx simctl/main.ts ...` (or `npm run simctl -- ...`).
 */
import { parseArgs } from "node:util";
import { AGENT_SANDBOX_MANIFESTS, KUEUE_MANIFESTS, loadManifests } from "../components/k8s/manifests/cache";
import { controlPlaneBinaries, findSimBinaries, type SimBinaryName } from "./binaries";
import * as fs from "node:fs";
import * as path from "node:path";
import { startController, startSim, simStatus, stopController, stopSim } from "./cluster";
import { controllerNames, controllerSpecs, temporalAddress, type ControllerName } from "./controllers";
import { fakeNodeName } from "../components/sim/fakeNode";
import { writeRunCredentials, type FlavorPlacements } from "./credentials";
import { registerFakeNodes, waitNodesReady } from "./nodes";
import { parsePortOverrides } from "./ports";
import { isGoGcInRange, SIM_GO_GC_DEFAULT, SIM_GO_GC_RANGE } from "../components/sim/goRuntime";
import type { SimState } from "./state";

const log = (line: string) => process.stderr.write(`simctl: ${line}\n`);

function intFlag(name: string, value: string | undefined, dflt: number): number {
  if (value === undefined) return dflt;
  if (!/^\d+$/.test(value)) throw new Error(`--${name}: "${value}" is not a non-negative integer`);
  return Number(value);
}

/** `--go-gc`: an integer in {@link SIM_GO_GC_RANGE}, or the default when absent. */
function goGcFlag(value: string | undefined): number {
  const n = intFlag("go-gc", value, SIM_GO_GC_DEFAULT);
  if (!isGoGcInRange(n)) throw new Error(`--go-gc: must be from ${SIM_GO_GC_RANGE.min} to ${SIM_GO_GC_RANGE.max} (got ${n})`);
  return n;
}

/**
 * The Kueue base Configuration file: `-` reads it from stdin (fd 0; `/dev/stdin` cannot be opened when stdin is a
 * socket, as under the command provider) into `<state>/config/kueue-base.yaml`.
 */
function configurationFile(value: string, stateDir: string): string {
  if (value !== "-") return value;
  const file = path.join(path.resolve(stateDir), "config", "kueue-base.yaml");
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  fs.writeFileSync(file, fs.readFileSync(0), { mode: 0o600 });
  return file;
}

function summary(state: SimState, withKubeconfig = false): string {
  return JSON.stringify({
    ...(withKubeconfig ? { kubeconfigYaml: fs.readFileSync(state.kubeconfig, "utf8") } : {}),
    stateDir: state.stateDir,
    kubeconfig: state.kubeconfig,
    apiserverUrl: state.apiserverUrl,
    contextName: state.contextName,
    ports: state.ports,
    temporalAddress: temporalAddress(state),
    processes: state.processes.map((p) => ({ component: p.component, pid: p.pid, readyAfterMs: p.readyAfterMs })),
  });
}

/**
 * `--flavors` of `run-credentials`: a JSON object of ResourceFlavor name → `{ nodeLabels?, tolerations? }` (the
 * placement the runtime renders into member pods on the `workload` admission path; credentials.ts).
 *
 * @throws Error naming `--flavors` when the text is not such an object
 */
function parseFlavors(text: string): FlavorPlacements {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`run-credentials: --flavors must be JSON (${(error as Error).message})`, { cause: error });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value) || Object.values(value).some((f) => typeof f !== "object" || f === null || Array.isArray(f))) {
    throw new Error(`run-credentials: --flavors must be an object of ResourceFlavor name -> { nodeLabels, tolerations } (got ${text.slice(0, 200)})`);
  }
  return value as FlavorPlacements;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      "state-dir": { type: "string" },
      "port-base": { type: "string" },
      ports: { type: "string" },
      nodes: { type: "string" },
      count: { type: "string" },
      pool: { type: "string" },
      "pod-ready-delay-ms": { type: "string" },
      "pod-ready-jitter-ms": { type: "string" },
      "go-gc": { type: "string" },
      "timeout-ms": { type: "string" },
      "grace-ms": { type: "string" },
      "keep-on-failure": { type: "boolean" },
      configuration: { type: "string" },
      json: { type: "boolean" },
      "print-kubeconfig": { type: "boolean" },
      context: { type: "string" },
      namespace: { type: "string" },
      "service-account": { type: "string" },
      queue: { type: "string" },
      flavors: { type: "string" },
    },
  });
  const stateDir = values["state-dir"];
  const needDir = (): string => {
    if (stateDir === undefined || stateDir === "") throw new Error(`${command}: --state-dir is required`);
    return stateDir;
  };
  switch (command) {
    case "check": {
      const problems: string[] = [];
      try {
        findSimBinaries();
      } catch (err) {
        problems.push((err as Error).message);
      }
      for (const set of [KUEUE_MANIFESTS, AGENT_SANDBOX_MANIFESTS]) {
        try {
          loadManifests(set);
        } catch (err) {
          problems.push((err as Error).message);
        }
      }
      process.stdout.write(problems.length === 0 ? "sim binaries and manifests: ready\n" : `${problems.join("; ")}\n`);
      return problems.length === 0 ? 0 : 1;
    }
    case "start": {
      const dir = needDir();
      const binaries = findSimBinaries(process.env, controlPlaneBinaries);
      const base = values["port-base"] !== undefined ? intFlag("port-base", values["port-base"], 0) : undefined;
      const state = await startSim({
        stateDir: dir,
        binaries,
        ports: { base, overrides: values.ports !== undefined ? parsePortOverrides(values.ports) : {} },
        podReadyDelayMs: intFlag("pod-ready-delay-ms", values["pod-ready-delay-ms"], 0),
        podReadyJitterMs: intFlag("pod-ready-jitter-ms", values["pod-ready-jitter-ms"], 0),
        goGC: goGcFlag(values["go-gc"]),
        readyTimeoutMs: intFlag("timeout-ms", values["timeout-ms"], 180_000),
        keepOnFailure: values["keep-on-failure"] === true,
        ...(values.context !== undefined ? { contextName: values.context } : {}),
        log,
      });
      const nodes = intFlag("nodes", values.nodes, 0);
      if (nodes > 0) {
        try {
          const names = await registerFakeNodes({ stateDir: dir, count: nodes, pool: values.pool });
          log(`${names.length} fake nodes Ready`);
        } catch (err) {
          await stopSim(dir, 3_000);
          throw new Error(`registering fake nodes failed (sim stopped and removed): ${(err as Error).message}`, { cause: err });
        }
      }
      process.stdout.write(`${summary(state, values["print-kubeconfig"] === true)}\n`);
      return 0;
    }
    case "start-controller": {
      const name = positionals[0];
      if (!(controllerNames as readonly string[]).includes(name ?? "")) {
        throw new Error(`start-controller: expected one of ${controllerNames.join(", ")}, got ${JSON.stringify(name ?? "")}`);
      }
      const state = await startController(name as ControllerName, {
        stateDir: needDir(),
        binaries: findSimBinaries(process.env, [controllerSpecs[name as ControllerName].component as SimBinaryName]),
        readyTimeoutMs: intFlag("timeout-ms", values["timeout-ms"], 180_000),
        ...(values.configuration !== undefined ? { configurationFile: configurationFile(values.configuration, needDir()) } : {}),
        log,
      });
      process.stdout.write(`${summary(state)}\n`);
      return 0;
    }
    case "stop-controller": {
      const name = positionals[0];
      if (!(controllerNames as readonly string[]).includes(name ?? "")) {
        throw new Error(`stop-controller: expected one of ${controllerNames.join(", ")}, got ${JSON.stringify(name ?? "")}`);
      }
      log(await stopController(name as ControllerName, needDir(), intFlag("grace-ms", values["grace-ms"], 10_000)));
      return 0;
    }
    case "nodes": {
      const names = await registerFakeNodes({ stateDir: needDir(), count: intFlag("count", values.count, 0), pool: values.pool });
      process.stdout.write(`${JSON.stringify({ nodes: names.length })}\n`);
      return 0;
    }
    case "wait-nodes": {
      const count = intFlag("count", values.count, 0);
      const pool = values.pool ?? "agents";
      const names = Array.from({ length: count }, (_, i) => fakeNodeName(pool, i));
      await waitNodesReady({ stateDir: needDir(), names, timeoutMs: intFlag("timeout-ms", values["timeout-ms"], 120_000) });
      log(`${count} nodes of pool ${pool} Ready`);
      return 0;
    }
    case "run-credentials": {
      if (values.namespace === undefined || values["service-account"] === undefined) throw new Error("run-credentials: --namespace and --service-account are required");
      const c = await writeRunCredentials({
        stateDir: needDir(),
        namespace: values.namespace,
        serviceAccount: values["service-account"],
        ...(values.queue !== undefined ? { queue: values.queue } : {}),
        ...(values.flavors !== undefined ? { flavors: parseFlavors(values.flavors) } : {}),
      });
      process.stdout.write(`${JSON.stringify(c)}\n`);
      return 0;
    }
    case "status": {
      const s = simStatus(needDir());
      if (values.json === true) {
        process.stdout.write(`${JSON.stringify(s)}\n`);
      } else {
        process.stdout.write(`${s.stateDir}: ${s.phase}${s.apiserverUrl ? ` (${s.apiserverUrl})` : ""}\n`);
        for (const c of s.components) {
          const rss = c.rssBytes !== undefined ? ` rss ${(c.rssBytes / 1048576).toFixed(0)} MiB` : "";
          process.stdout.write(`  ${c.component.padEnd(26)} pid ${String(c.pid).padEnd(8)} ${c.running ? "running" : "NOT RUNNING"}${rss}  log ${c.log}\n`);
        }
      }
      return s.phase === "degraded" ? 3 : 0;
    }
    case "stop": {
      const r = await stopSim(needDir(), intFlag("grace-ms", values["grace-ms"], 10_000));
      for (const line of r.stopped) log(`stopped ${line}`);
      log(r.removed ? `removed ${stateDir}` : `nothing to stop in ${stateDir}`);
      return 0;
    }
    default:
      throw new Error(
        `unknown command ${JSON.stringify(command ?? "")}; expected start, start-controller, stop-controller, nodes, wait-nodes, run-credentials, status, stop or check`,
      );
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const e = err as Error;
    process.stderr.write(`simctl: ${e.message}\n`);
    process.exit(1);
  },
);

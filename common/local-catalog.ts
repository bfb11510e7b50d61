/**
 * Cache identities of the `local` tool set (`npm run toolchain -- local`): every binary the `local` (kind)
 * profile needs to build a kind node image offline, derived from `common/pins.ts` (`localBuild`, plus the `sim`
 * tools reused as they are, so both sets share one cache directory per tool), and the lookup of the built
 * executables by logical name ({@link findLocalBinaries}).
 *
 * Node-builtins only (no execa): callers may use it to locate binaries without building anything.
 */
import * as path from "node:path";
import { localBuild, type PauseProgramPin, type SimGoProgramPin } from "./pins";
import { simToolIds, type SimToolId } from "./sim-catalog";
import { findToolBinaries, type BinaryLocation } from "./find-binaries";

/** Where the `pause` program lives in the cache; built with gcc, not Go (see scripts/toolchain-local.ts). */
export interface PauseToolId {
  /** Cache directory prefix: `pause`. */
  readonly name: string;
  /** Cache directory version, the pause version without `v`, e.g. `3.10.1`. */
  readonly version: string;
  /** `{ pause: "bin/pause" }`. */
  readonly binaries: Readonly<Record<string, string>>;
  /** The build recipe. */
  readonly pin: PauseProgramPin;
}

/** One tool of the `local` set: a Go wrapper-module build ({@link SimToolId}) or the gcc-built pause. */
export type LocalToolId = SimToolId | PauseToolId;

/** True when `id` is the gcc-built pause program (its pin names a C source). */
export function isPauseToolId(id: LocalToolId): id is PauseToolId {
  return "sourcePath" in id.pin;
}

function goId(name: string, pin: SimGoProgramPin): SimToolId {
  return {
    name,
    version: pin.goModuleVersion,
    binaries: Object.fromEntries(Object.keys(pin.mainPackages).map((b) => [b, `bin/${b}`])),
    pin,
  };
}

function simId(name: string): SimToolId {
  const found = simToolIds.find((t) => t.name === name);
  if (found === undefined) throw new Error(`common/sim-catalog.ts has no tool ${name}`);
  return found;
}

/** The pause program: `pause-3.10.1/bin/pause`. */
export const pauseToolId: PauseToolId = {
  name: "pause",
  version: localBuild.pause.version,
  binaries: { pause: "bin/pause" },
  pin: localBuild.pause,
};

/**
 * Every tool of the `local` set, in build order: the small ones first (pause, kind, crictl, the CNI plugin,
 * flanneld), then etcd, CoreDNS, the Kubernetes node binaries and the control plane (they share most of the Go
 * build cache), then Temporal, Kueue and Agent Sandbox. etcd, `kubernetes`, `kueue` and `agent-sandbox` are the
 * `sim` set's own ids (same cache directories and stamps); kwok is not needed.
 */
export const localToolIds: readonly LocalToolId[] = [
  pauseToolId,
  goId("kind", localBuild.kind),
  goId("crictl", localBuild.crictl),
  goId("cni-flannel", localBuild.flannelCni),
  goId("flannel", localBuild.flannel),
  simId("etcd"),
  goId("coredns", localBuild.coredns),
  goId("kubernetes-node", localBuild.kubernetesNode),
  simId("kubernetes"),
  goId("temporal", localBuild.temporal),
  simId("kueue"),
  simId("agent-sandbox"),
];

/** Logical names of the `local` set's executables (what {@link findLocalBinaries} returns). */
export const localBinaryNames = [
  "kind",
  "kubelet",
  "kubeadm",
  "kubectl",
  "kube-proxy",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "etcd",
  "coredns",
  "crictl",
  "flanneld",
  "cni-flannel",
  "temporal",
  "pause",
  "kueue",
  "agent-sandbox-controller",
] as const;
/** One logical executable name of the `local` set. */
export type LocalBinaryName = (typeof localBinaryNames)[number];

/** Absolute paths of the `local` set's executables by logical name. */
export type LocalBinaries = Readonly<Record<LocalBinaryName, string>>;

/**
 * Logical names that differ from the tool's binary key: `<tool name>/<binary key>` -> logical name. The CNI
 * plugin is installed as `flannel` (what kubelet's CNI config names) but is called `cni-flannel` here, apart from
 * the flannel daemon `flanneld`.
 */
const logicalOverrides: Readonly<Record<string, LocalBinaryName>> = { "cni-flannel/flannel": "cni-flannel" };

/**
 * Where each logical executable lives, relative to the cache root (e.g. `cni-flannel` ->
 * `cni-flannel-v0.9.1/bin/flannel`), with the id of the tool that provides it.
 */
export function localBinaryLocations(): ReadonlyMap<LocalBinaryName, { readonly id: LocalToolId; readonly relPath: string }> {
  const out = new Map<LocalBinaryName, { id: LocalToolId; relPath: string }>();
  for (const id of localToolIds) {
    for (const [key, rel] of Object.entries(id.binaries)) {
      const logical = logicalOverrides[`${id.name}/${key}`] ?? (key as LocalBinaryName);
      if ((localBinaryNames as readonly string[]).includes(logical)) out.set(logical, { id, relPath: path.join(`${id.name}-${id.version}`, rel) });
    }
  }
  return out;
}

/** Raised when executables of the `local` set are missing; the message says how to build them. */
export class LocalBinariesMissingError extends Error {
  /** @param missing - one entry per missing executable: `<logical name> (<why>)`. */
  constructor(readonly missing: readonly string[]) {
    super(`local binaries not built: ${missing.join("; ")}. Run \`npm run toolchain -- local\` (cold: about 30 minutes on 2 shared cores; figures in scripts/toolchain-local.ts)`);
    this.name = "LocalBinariesMissingError";
  }
}

/** Env var naming a directory of self-built `local` executables, each named by its logical name (overrides the cache). */
export const localBinDirEnv = "COHORT_LOCAL_BIN_DIR";

/**
 * Finds the `local` set's executables without building anything: in `<cache>/<tool>-<version>/` (cache root from
 * `cacheRoot(env)`; the tool directory must hold a valid stamp and the file), or, when `COHORT_LOCAL_BIN_DIR` is
 * set, in that directory under their logical names.
 *
 * @param env - environment (cache root, override directory). @default process.env
 * @param needed - which executables must exist. @default all (the returned map holds only the needed ones)
 * @returns absolute paths by logical name (only the `needed` keys are present).
 * @throws LocalBinariesMissingError listing each missing executable (and why: tool not built, file missing).
 */
export function findLocalBinaries(env: NodeJS.ProcessEnv = process.env, needed: readonly LocalBinaryName[] = localBinaryNames): LocalBinaries {
  const locations = new Map<LocalBinaryName, BinaryLocation>();
  for (const [name, loc] of localBinaryLocations()) locations.set(name, { tool: loc.id, relPath: path.relative(`${loc.id.name}-${loc.id.version}`, loc.relPath) });
  const { found, missing } = findToolBinaries({ env, needed, locations, overrideEnv: localBinDirEnv });
  if (missing.length > 0) throw new LocalBinariesMissingError(missing);
  return found as LocalBinaries;
}

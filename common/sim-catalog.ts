/**
 * Cache identities of the `sim` tool set (name, version, executables, build recipe), derived from
 * `common/pins.ts`; shared by the builders (`scripts/toolchain-sim.ts`) and the binary lookup (`binaries.ts`).
 * Kueue and Agent Sandbox use the `local` profile's pins: both profiles run the same versions.
 */
import { local, localBuild, sim as pins, type SimGoProgramPin } from "./pins";

/** Where one sim tool lives in the cache. */
export interface SimToolId {
  /** Cache directory prefix, e.g. `kubernetes`. */
  readonly name: string;
  /** Cache directory version, e.g. `v1.35.4`. */
  readonly version: string;
  /** Executables by logical name -> path relative to the tool directory. */
  readonly binaries: Readonly<Record<string, string>>;
  /** The build recipe. */
  readonly pin: SimGoProgramPin;
}

function id(name: string, pin: SimGoProgramPin): SimToolId {
  return {
    name,
    version: pin.goModuleVersion,
    binaries: Object.fromEntries(Object.keys(pin.mainPackages).map((b) => [b, `bin/${b}`])),
    pin,
  };
}

/**
 * The Kueue manager built from the `local` Kueue pin. It has no version flag; `pkg/version.GitVersion` is
 * stamped as Kueue's Makefile does (`LD_FLAGS += -X '$(version_pkg).GitVersion=$(GIT_TAG)'`).
 */
export const kueueProgram: SimGoProgramPin = {
  goModule: local.kueue.goModule,
  goModuleVersion: local.kueue.version,
  commit: local.kueue.commit,
  mainPackages: { kueue: `${local.kueue.goModule}/cmd/kueue` },
  versionVars: { [`${local.kueue.goModule}/pkg/version.GitVersion`]: local.kueue.version },
  replace: {},
  versionCheck: null,
};

/** The Agent Sandbox controller built from the `local` Agent Sandbox pin (`--version` prints `version vX`). */
export const agentSandboxProgram: SimGoProgramPin = {
  goModule: local.agentSandbox.goModule,
  goModuleVersion: local.agentSandbox.version,
  commit: local.agentSandbox.commit,
  mainPackages: { "agent-sandbox-controller": `${local.agentSandbox.goModule}/cmd/agent-sandbox-controller` },
  versionVars: {
    [`${local.agentSandbox.goModule}/internal/version.gitVersion`]: local.agentSandbox.version,
    ...(local.agentSandbox.commit !== null ? { [`${local.agentSandbox.goModule}/internal/version.gitSHA`]: local.agentSandbox.commit.slice(0, 7) } : {}),
  },
  replace: {},
  versionCheck: { args: ["--version"], expect: `version ${local.agentSandbox.version}` },
};

/** Every sim tool, in build order (the control plane first: it is what the test harness needs). */
export const simToolIds: readonly SimToolId[] = [
  id("etcd", pins.etcd),
  id("kubernetes", pins.kubernetes),
  id("kwok", pins.kwok),
  id("kueue", kueueProgram),
  id("agent-sandbox", agentSandboxProgram),
  // The Temporal CLI of the `local` set (same pin, same cache directory): the sim runs its dev server as a process.
  id("temporal", localBuild.temporal),
];

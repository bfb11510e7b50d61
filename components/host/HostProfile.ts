/**
 * `HostProfile`: the `host` profile's substrate. This machine, no Docker: an artifact root on local
 * disk and the cohort runtime bundle (`dist/cohort.cjs`, one file that runs with plain Node) put in
 * place under it as a resource, so that every run of the stack uses a copy that no rebuild can change
 * under it.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import { NATIVE_LAUNCHER_NAME, launcherBeside } from "../../runtime/index.js";
import { CohortLabError } from "../errors.js";

/** Arguments of {@link HostProfile}. Plain values: they are checked before any resource exists. */
export interface HostProfileArgs {
  /** Absolute path of the artifact root; created if missing, never deleted (it holds the ledgers). */
  readonly artifactRoot: string;
  /** Absolute path of the built runtime bundle (`npm run build` writes `<project>/dist/cohort.cjs`). */
  readonly runtimeBundleSource: string;
  /** Absolute path of the Node binary that runs the runtime. @default process.execPath (the Node running this program) */
  readonly nodePath?: string;
}

/** The runtime bundle as found on disk. */
export interface RuntimeBundleInfo {
  /** Absolute path of the source file. */
  readonly source: string;
  /** Lower-case hex SHA-256 of its bytes. */
  readonly sha256: string;
  /**
   * The compiled member launcher `npm run build` writes beside the bundle (`cohort-launcher`), when present; the
   * runtime falls back to its perl launcher without it (runtime/backends/process/launcher.ts).
   */
  readonly launcher?: { readonly source: string; readonly sha256: string };
  /**
   * What the copy is addressed by: the bundle's SHA-256, or, with a launcher, the SHA-256 of
   * `<bundle sha256>:<launcher sha256>` (so a rebuilt launcher gets a new copy too).
   */
  readonly releaseSha256: string;
}

/** A host prerequisite is missing (raised before any resource is created; printed without a stack trace). */
export class HostPrerequisiteError extends CohortLabError {
  constructor(message: string) {
    super(message);
    this.name = "HostPrerequisiteError";
  }
}

/**
 * Reads the runtime bundle and hashes it.
 *
 * @throws {HostPrerequisiteError} when the file does not exist (the fix: `npm run build`)
 */
export function inspectRuntimeBundle(source: string): RuntimeBundleInfo {
  if (!path.isAbsolute(source)) throw new HostPrerequisiteError(`runtime bundle path must be absolute (got ${JSON.stringify(source)})`);
  if (!existsSync(source)) {
    throw new HostPrerequisiteError(`the cohort runtime bundle ${source} does not exist: run \`npm run build\` first (the npm scripts host/up/preview do it for you)`);
  }
  const sha256 = createHash("sha256").update(readFileSync(source)).digest("hex");
  const launcherSource = path.join(path.dirname(source), NATIVE_LAUNCHER_NAME);
  if (!existsSync(launcherSource)) return { source, sha256, releaseSha256: sha256 };
  const launcherSha = createHash("sha256").update(readFileSync(launcherSource)).digest("hex");
  return {
    source,
    sha256,
    launcher: { source: launcherSource, sha256: launcherSha },
    releaseSha256: createHash("sha256").update(`${sha256}:${launcherSha}`).digest("hex"),
  };
}

/**
 * Where the launcher copy of a bundle copy lives: `<bundle path without .cjs>-launcher`, the place the runtime
 * looks first (launcherBeside and findNativeLauncher in runtime/backends/process/launcher.ts).
 */
export function runtimeLauncherPath(bundlePath: string): string {
  return launcherBeside(bundlePath);
}

/**
 * Where a bundle with this digest lives under the artifact root: `<root>/.runtime/cohort-<first 12 hex>.cjs`.
 * Content-addressed, so runs recorded in state keep a runtime to reap them with after a rebuild.
 */
export function runtimeBundlePath(artifactRoot: string, sha256: string): string {
  return path.join(artifactRoot, ".runtime", `cohort-${sha256.slice(0, 12)}.cjs`);
}

/**
 * The shell scripts of the bundle resource. Values travel in the environment, never spliced into the
 * script text. `create` copies the launcher (when `COHORT_LAUNCHER_SOURCE` is set) and then the bundle, each
 * through a temp file, checking the SHA-256 seen at preview time before the rename; a create that fails removes
 * what it made (its temp file, a launcher copy it added, an empty `.runtime`), because no delete runs for a
 * resource that was never created. `delete` removes both copies and the `.runtime` directory if it is empty (the
 * artifact root stays).
 */
export const RUNTIME_BUNDLE_SCRIPTS = {
  create: [
    "set -eu",
    'runtime_dir="$(dirname "$COHORT_BUNDLE_PATH")"',
    // A create that fails is not in the state, so no delete will run for it: on any failure (a full disk, an
    // unreadable source, a changed digest) it removes what it made itself: the temp file, a launcher copy it
    // added, the .runtime directory when that is left empty.
    'tmp=""; made_launcher=""',
    'cleanup() { rc=$?; if [ "$rc" != 0 ]; then rm -f "$tmp"; if [ -n "$made_launcher" ]; then rm -f "$made_launcher"; fi; rmdir "$runtime_dir" 2>/dev/null || true; fi; exit "$rc"; }',
    "trap cleanup EXIT",
    'mkdir -p "$COHORT_ARTIFACT_ROOT" "$runtime_dir"',
    "copy() { # source sha256 target",
    '  tmp="$3.tmp.$$"',
    '  cp "$1" "$tmp"',
    '  if ! printf "%s  %s\\n" "$2" "$tmp" | sha256sum -c --status -; then',
    '    echo "$1 changed since the program read it (expected sha256 $2); run pulumi up again" >&2',
    "    exit 1",
    "  fi",
    '  mv -f "$tmp" "$3"',
    '  tmp=""',
    "}",
    'if [ -n "${COHORT_LAUNCHER_SOURCE:-}" ]; then',
    '  if [ ! -e "$COHORT_LAUNCHER_PATH" ]; then made_launcher="$COHORT_LAUNCHER_PATH"; fi',
    '  copy "$COHORT_LAUNCHER_SOURCE" "$COHORT_LAUNCHER_SHA256" "$COHORT_LAUNCHER_PATH"; chmod 755 "$COHORT_LAUNCHER_PATH"',
    "fi",
    'copy "$COHORT_BUNDLE_SOURCE" "$COHORT_BUNDLE_SHA256" "$COHORT_BUNDLE_PATH"',
  ].join("\n"),
  delete: [
    'rm -f "$COHORT_BUNDLE_PATH"',
    'if [ -n "${COHORT_LAUNCHER_PATH:-}" ]; then rm -f "$COHORT_LAUNCHER_PATH"; fi',
    'rmdir "$(dirname "$COHORT_BUNDLE_PATH")" 2>/dev/null || true',
  ].join("\n"),
} as const;

/**
 * The `host` profile's substrate: the artifact root and the runtime bundle copied into it.
 *
 * Children: one `command:local:Command` named `<name>-runtime-bundle`, replaced when the bundle's
 * SHA-256 or the artifact root changes (`triggers`).
 *
 * @throws {HostPrerequisiteError} before any resource when the runtime bundle is missing
 */
export class HostProfile extends pulumi.ComponentResource {
  /** Absolute path of the artifact root. */
  public readonly artifactRoot: pulumi.Output<string>;
  /** Absolute path of the runtime bundle copy; resolves once the copy exists (depend on it through this output). */
  public readonly runtimeBundlePath: pulumi.Output<string>;
  /** Lower-case hex SHA-256 of the bundle. */
  public readonly runtimeBundleSha256: pulumi.Output<string>;
  /** Absolute path of the Node binary that runs the runtime. */
  public readonly nodePath: pulumi.Output<string>;
  /** The command resource that holds the copy. */
  public readonly runtimeBundle: command.local.Command;

  constructor(name: string, args: HostProfileArgs, opts?: pulumi.ComponentResourceOptions) {
    if (!path.isAbsolute(args.artifactRoot)) throw new HostPrerequisiteError(`artifactRoot must be absolute (got ${JSON.stringify(args.artifactRoot)})`);
    const bundle = inspectRuntimeBundle(args.runtimeBundleSource);
    super("cohortlab:host:HostProfile", name, {}, opts);

    const bundlePath = runtimeBundlePath(args.artifactRoot, bundle.releaseSha256);
    this.runtimeBundle = new command.local.Command(
      `${name}-runtime-bundle`,
      {
        create: RUNTIME_BUNDLE_SCRIPTS.create,
        delete: RUNTIME_BUNDLE_SCRIPTS.delete,
        environment: {
          COHORT_ARTIFACT_ROOT: args.artifactRoot,
          COHORT_BUNDLE_SOURCE: bundle.source,
          COHORT_BUNDLE_PATH: bundlePath,
          COHORT_BUNDLE_SHA256: bundle.sha256,
          ...(bundle.launcher !== undefined
            ? { COHORT_LAUNCHER_SOURCE: bundle.launcher.source, COHORT_LAUNCHER_SHA256: bundle.launcher.sha256, COHORT_LAUNCHER_PATH: runtimeLauncherPath(bundlePath) }
            : {}),
        },
        triggers: [bundle.releaseSha256, args.artifactRoot],
        logging: "stderr",
      },
      { parent: this },
    );
    this.artifactRoot = pulumi.output(args.artifactRoot);
    this.runtimeBundlePath = this.runtimeBundle.id.apply(() => bundlePath);
    this.runtimeBundleSha256 = pulumi.output(bundle.sha256);
    this.nodePath = pulumi.output(args.nodePath ?? process.execPath);
    this.registerOutputs({
      artifactRoot: this.artifactRoot,
      runtimeBundlePath: this.runtimeBundlePath,
      runtimeBundleSha256: this.runtimeBundleSha256,
      nodePath: this.nodePath,
      runtimeBundle: this.runtimeBundle,
    });
  }
}

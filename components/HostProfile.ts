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
}

/** A host prerequisite is missing (raised before any resource is created; printed without a stack trace). */
export class HostPrerequisiteError extends pulumi.RunError {
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
  return { source, sha256: createHash("sha256").update(readFileSync(source)).digest("hex") };
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
 * script text. `create` copies through a temp file, checks the SHA-256 seen at preview time, then renames;
 * `delete` removes the copy and the `.runtime` directory if it is empty (the artifact root stays).
 */
export const RUNTIME_BUNDLE_SCRIPTS = {
  create: [
    "set -eu",
    'mkdir -p "$COHORT_ARTIFACT_ROOT" "$(dirname "$COHORT_BUNDLE_PATH")"',
    'tmp="$COHORT_BUNDLE_PATH.tmp.$$"',
    'cp "$COHORT_BUNDLE_SOURCE" "$tmp"',
    'if ! printf "%s  %s\\n" "$COHORT_BUNDLE_SHA256" "$tmp" | sha256sum -c --status -; then',
    '  rm -f "$tmp"',
    '  echo "$COHORT_BUNDLE_SOURCE changed since the program read it (expected sha256 $COHORT_BUNDLE_SHA256); run pulumi up again" >&2',
    "  exit 1",
    "fi",
    'mv -f "$tmp" "$COHORT_BUNDLE_PATH"',
  ].join("\n"),
  delete: ['rm -f "$COHORT_BUNDLE_PATH"', 'rmdir "$(dirname "$COHORT_BUNDLE_PATH")" 2>/dev/null || true'].join("\n"),
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

    const bundlePath = runtimeBundlePath(args.artifactRoot, bundle.sha256);
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
        },
        triggers: [bundle.sha256, args.artifactRoot],
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

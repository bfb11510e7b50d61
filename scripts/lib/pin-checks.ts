/**
 * Pure checks of the pins module: field formats, and agreement between the npm SDK versions in
 * package.json / package-lock.json and the binaries the toolchain builds. Used by `test/unit/pins.test.ts`
 * and by the launcher's refusal messages.
 *
 * Node-20-safe (no imports).
 */

/** Minimal shape of package.json that matters here. */
export interface PackageJsonLike {
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly devDependencies?: Readonly<Record<string, string>>;
}

/** Minimal shape of package-lock.json (lockfileVersion 2 or 3). */
export interface PackageLockLike {
  readonly packages?: Readonly<Record<string, { readonly version?: string }>>;
}

/** A binary that must match an npm SDK version. */
export interface SdkCoupling {
  /** npm package, e.g. `@pulumi/command`. */
  readonly npmPackage: string;
  /** Version the toolchain builds, from common/pins.ts. */
  readonly version: string;
  /** What is built, for messages, e.g. `pulumi-resource-command`. */
  readonly binary: string;
}

const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$/;

/**
 * Compares each coupling with package.json (must be the same exact version) and package-lock.json (the
 * locked `node_modules/<pkg>` entry must have that version).
 *
 * @returns one message per disagreement (empty when all agree), each naming both versions and the fix.
 */
export function sdkPinMismatches(couplings: readonly SdkCoupling[], packageJson: PackageJsonLike, lock: PackageLockLike | undefined): string[] {
  const problems: string[] = [];
  for (const c of couplings) {
    const declared = packageJson.dependencies?.[c.npmPackage] ?? packageJson.devDependencies?.[c.npmPackage];
    if (declared === undefined) {
      problems.push(`package.json: ${c.npmPackage} is not a dependency, but common/pins.ts builds ${c.binary} ${c.version} for it`);
      continue;
    }
    if (!SEMVER.test(declared)) {
      problems.push(`package.json: ${c.npmPackage} must be an exact version (the toolchain builds ${c.binary} ${c.version}); got ${JSON.stringify(declared)}`);
      continue;
    }
    if (declared !== c.version) {
      problems.push(
        `package.json pins ${c.npmPackage} ${declared} but common/pins.ts builds ${c.binary} ${c.version}: ` +
          `update the toolchain section of common/pins.ts, then run \`npm run toolchain\``,
      );
    }
    if (lock !== undefined) {
      const locked = lock.packages?.[`node_modules/${c.npmPackage}`]?.version;
      if (locked !== declared) {
        problems.push(`package-lock.json locks ${c.npmPackage} ${locked ?? "(missing)"} but package.json pins ${declared}: run \`npm install\``);
      }
    }
  }
  return problems;
}

const HEX64 = /^[0-9a-f]{64}$/;
const HEX40 = /^[0-9a-f]{40}$/;

/**
 * Walks a pins object and reports malformed fields, by naming convention:
 * - `sha256` or `*Sha256`: 64 lower-case hex digits, or `null` (unknown);
 * - `commit` or `*Commit`: 40 lower-case hex digits, or `null` (unknown);
 * - `digest` or `*Digest`: `sha256:` + 64 lower-case hex digits, or `null` (unknown);
 * - `version` or `*Version`: a semantic version with an optional leading `v`, or a Go pseudo-version;
 * - `goSum` or `*GoSum`: a go.sum `h1:` hash (44 base64 characters);
 * - `integrity`: an SRI `sha512-` + 88 base64 characters;
 * - `url` or `*Url`: an `https://` URL.
 *
 * @param value - the pins (any JSON-like value).
 * @param at - dotted path of `value`, used in messages. @default "pins"
 * @returns one message per malformed field: `<dotted path>: <rule>, got <value>`.
 */
export function malformedPins(value: unknown, at = "pins"): string[] {
  const problems: string[] = [];
  const visit = (v: unknown, p: string, key: string) => {
    if (Array.isArray(v)) {
      v.forEach((item, i) => visit(item, `${p}[${i}]`, key));
      return;
    }
    if (v !== null && typeof v === "object") {
      for (const [k, child] of Object.entries(v as Record<string, unknown>)) visit(child, `${p}.${k}`, k);
      return;
    }
    const got = JSON.stringify(v);
    const k = key;
    if (k === "sha256" || k.endsWith("Sha256")) {
      if (v !== null && !(typeof v === "string" && HEX64.test(v))) problems.push(`${p}: expected 64 lower-case hex digits or null, got ${got}`);
    } else if (k === "commit" || k.endsWith("Commit")) {
      if (v !== null && !(typeof v === "string" && HEX40.test(v))) problems.push(`${p}: expected a 40-hex-digit commit or null, got ${got}`);
    } else if (k === "digest" || k.endsWith("Digest")) {
      if (v !== null && !(typeof v === "string" && /^sha256:[0-9a-f]{64}$/.test(v))) problems.push(`${p}: expected sha256:<64 lower-case hex> or null, got ${got}`);
    } else if (k === "version" || k.endsWith("Version")) {
      if (!(typeof v === "string" && SEMVER.test(v.replace(/^v/, "")))) problems.push(`${p}: expected a semantic version, got ${got}`);
    } else if (k === "goSum" || k.endsWith("GoSum")) {
      if (!(typeof v === "string" && /^h1:[A-Za-z0-9+/]{43}=$/.test(v))) problems.push(`${p}: expected a go.sum hash h1:<44 base64 characters>, got ${got}`);
    } else if (k === "integrity") {
      if (!(typeof v === "string" && /^sha512-[A-Za-z0-9+/]{86}==$/.test(v))) problems.push(`${p}: expected sha512-<88 base64 characters>, got ${got}`);
    } else if (k === "url" || k.endsWith("Url")) {
      if (!(typeof v === "string" && /^https:\/\/[^\s]+$/.test(v))) problems.push(`${p}: expected an https:// URL, got ${got}`);
    }
  };
  visit(value, at, "");
  return problems;
}

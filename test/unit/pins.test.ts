import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import * as allPins from "../../common/pins";
import { toolchain } from "../../common/pins";
import { sdkCouplings } from "../../scripts/lib/env";
import { malformedPins, sdkPinMismatches, type PackageJsonLike, type PackageLockLike } from "../../scripts/lib/pin-checks";

const repo = path.resolve(__dirname, "..", "..");
const readJson = <T>(file: string) => JSON.parse(fs.readFileSync(path.join(repo, file), "utf8")) as T;

describe("common/pins.ts agrees with package.json and package-lock.json", () => {
  it("has the same @pulumi SDK versions as the binaries it builds", () => {
    const problems = sdkPinMismatches(sdkCouplings, readJson<PackageJsonLike>("package.json"), readJson<PackageLockLike>("package-lock.json"));
    expect(problems).toEqual([]);
  });

  it("couples exactly the CLI and the two plugins", () => {
    expect(sdkCouplings.map((c) => [c.npmPackage, c.version, c.binary])).toEqual([
      ["@pulumi/pulumi", toolchain.pulumi.version, "pulumi (CLI)"],
      ["@pulumi/command", toolchain.command.version, "pulumi-resource-command"],
      ["@pulumi/kubernetes", toolchain.kubernetes.version, "pulumi-resource-kubernetes"],
    ]);
  });

  it("stamps each binary with the version its SDK reports", () => {
    // `pulumi version` must print v<sdk>; providers report the bare version (upstream release convention).
    expect(toolchain.pulumi.versionValue).toBe(`v${toolchain.pulumi.version}`);
    expect(toolchain.pulumi.goModuleRef).toBe(`v${toolchain.pulumi.version}`);
    expect(toolchain.pulumi.require["github.com/pulumi/pulumi/sdk/v3"]).toBe(`v${toolchain.pulumi.version}`);
    expect(toolchain.command.versionValue).toBe(toolchain.command.version);
    expect(toolchain.kubernetes.versionValue).toBe(toolchain.kubernetes.version);
  });

  it("uses Go module refs that are a version, a pseudo-version of the pinned commit, or the commit itself", () => {
    for (const pin of [toolchain.pulumi, toolchain.command, toolchain.kubernetes]) {
      const ref = pin.goModuleRef;
      const pseudo = /^v\d+\.\d+\.\d+-(?:0\.)?\d{14}-([0-9a-f]{12})$/.exec(ref);
      if (pseudo !== null) expect(pin.commit.startsWith(pseudo[1] as string)).toBe(true);
      else expect(ref === pin.commit || /^v\d+\.\d+\.\d+$/.test(ref)).toBe(true);
    }
  });

  it("has no malformed field in any section", () => {
    expect(malformedPins(allPins)).toEqual([]);
  });
});

describe("sdkPinMismatches", () => {
  const couplings = [{ npmPackage: "@pulumi/command", version: "1.2.1", binary: "pulumi-resource-command" }];
  const lock = (v: string): PackageLockLike => ({ packages: { "node_modules/@pulumi/command": { version: v } } });

  it.each([
    [
      "a different exact version",
      { dependencies: { "@pulumi/command": "1.3.0" } },
      lock("1.3.0"),
      [
        "package.json pins @pulumi/command 1.3.0 but common/pins.ts builds pulumi-resource-command 1.2.1: update the toolchain section of common/pins.ts, then run `npm run toolchain`",
      ],
    ],
    [
      "a range",
      { dependencies: { "@pulumi/command": "^1.2.1" } },
      lock("1.2.1"),
      ['package.json: @pulumi/command must be an exact version (the toolchain builds pulumi-resource-command 1.2.1); got "^1.2.1"'],
    ],
    [
      "a missing dependency",
      { dependencies: {} },
      lock("1.2.1"),
      ["package.json: @pulumi/command is not a dependency, but common/pins.ts builds pulumi-resource-command 1.2.1 for it"],
    ],
    [
      "a stale lock",
      { dependencies: { "@pulumi/command": "1.2.1" } },
      lock("1.2.0"),
      ["package-lock.json locks @pulumi/command 1.2.0 but package.json pins 1.2.1: run `npm install`"],
    ],
    ["agreement", { dependencies: { "@pulumi/command": "1.2.1" } }, lock("1.2.1"), []],
  ])("reports %s", (_name, pkg, lk, expected) => {
    expect(sdkPinMismatches(couplings, pkg, lk)).toEqual(expected);
  });
});

describe("malformedPins", () => {
  it("names every malformed field by dotted path", () => {
    const bad = {
      node: { tarballSha256: "ABC", version: "24.x", integrity: "sha256-xyz" },
      plugin: { commit: "7f3eb6f", official: { url: "http://example.test/a.tgz", sha256: "0".repeat(63) } },
      image: { digest: "sha256:1234" },
      list: [{ sha256: null }, { sha256: 5 }],
    };
    expect(malformedPins(bad, "pins")).toEqual([
      'pins.node.tarballSha256: expected 64 lower-case hex digits or null, got "ABC"',
      'pins.node.version: expected a semantic version, got "24.x"',
      'pins.node.integrity: expected sha512-<88 base64 characters>, got "sha256-xyz"',
      'pins.plugin.commit: expected a 40-hex-digit commit or null, got "7f3eb6f"',
      'pins.plugin.official.url: expected an https:// URL, got "http://example.test/a.tgz"',
      `pins.plugin.official.sha256: expected 64 lower-case hex digits or null, got "${"0".repeat(63)}"`,
      'pins.image.digest: expected sha256:<64 lower-case hex> or null, got "sha256:1234"',
      "pins.list[1].sha256: expected 64 lower-case hex digits or null, got 5",
    ]);
  });

  it("accepts null (unknown) sums, commits and digests, pseudo-versions and v-prefixed versions", () => {
    expect(
      malformedPins({
        sha256: null,
        goVersion: "v0.0.0-20260303235922-7f3eb6f3b77c",
        version: "v3.259.0",
        commit: "a".repeat(40),
        imageCommit: null,
        digest: null,
      }),
    ).toEqual([]);
  });
});

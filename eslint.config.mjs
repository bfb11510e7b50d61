// @ts-check
/**
 * ESLint flat config: eslint recommended + typescript-eslint recommended (untyped: no project service, so a full
 * run stays within seconds on 2 cores), plus the floor rules of the issue #11 layout (docs/architecture.md "Floors"):
 *
 *   0 common/  1 runtime/  2 components/  3 stacks/, simctl/  4 scripts/  5 bench/, test/, index.ts
 *
 * The floor rules are `no-restricted-imports` regexes on the import string, generated per folder depth so that
 * "leaves the folder" is a count of `../`. They are written on folder names only, so they hold wherever files
 * move inside the floors. `no-restricted-imports` sees static `import`/`export ... from` only; dynamic
 * `import()`, `require()`, import cycles and files outside any floor are checked by test/unit/layering.test.ts.
 */
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

const EXT = "{ts,mts,cts,js,mjs,cjs}";
/** Deepest folder nesting (below a floor's root folder) that gets its own block. */
const MAX_DEPTH = 6;

/** An import string that goes up exactly `n` folders and then into `rest` (a regex source). */
const upThen = (n, rest) => `^(\\./)?(\\.\\./){${n}}${rest}`;

/** `files` for the sources `depth` folders below `root`. */
const filesAt = (root, depth) => [`${root}/${"*/".repeat(depth)}*.${EXT}`];

const message = {
  leavesCommon: "common/ is floor 0: it imports nothing from the repository outside common/ (docs/architecture.md).",
  npmInCommon: "common/ is floor 0: Node built-ins only (write them as node:*), no npm package (docs/architecture.md).",
  leavesRuntime: "runtime/ is floor 1: it imports nothing from the repository outside runtime/ (docs/architecture.md).",
  coreBackends: "runtime/core/ must not import runtime/backends/* (docs/architecture.md).",
  corePackages: "runtime/core/ must not import @kubernetes/client-node, execa, @pulumi/* or @temporalio/* (docs/architecture.md).",
  coreTemporal: "runtime/core/ must not import runtime/temporal/* (docs/architecture.md).",
  runtimeDoor: "Import the runtime only through runtime/index.ts, never runtime/core/* or runtime/backends/* (docs/architecture.md).",
  upward: "Upward import: a file may import only from its own floor or lower ones (docs/architecture.md).",
};

/** `folders` (top-level names) forbidden from a file `depth` folders below its floor's root folder. */
function upward(depth, folders) {
  return [
    { regex: upThen(depth + 1, `(${folders.join("|")})(/|$)`), message: message.upward },
    { regex: upThen(depth + 1, "index(\\.[cm]?[jt]s)?$"), message: `${message.upward} (the top-level index.ts is floor 5)` },
  ];
}

/** Floors above the runtime: the runtime's one door plus what is above them. */
function aboveRuntime(root, above) {
  return Array.from({ length: MAX_DEPTH + 1 }, (_, d) => ({
    files: filesAt(root, d),
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [{ regex: upThen(d + 1, "runtime/(?!index(\\.[cm]?[jt]s)?$)"), message: message.runtimeDoor }, ...(above.length > 0 ? upward(d, above) : [])],
        },
      ],
    },
  }));
}

const floorRules = [
  // 0 common/
  ...Array.from({ length: MAX_DEPTH + 1 }, (_, d) => ({
    files: filesAt("common", d),
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { regex: "^(?!\\.|node:)", message: message.npmInCommon },
            { regex: upThen(d + 1, ""), message: message.leavesCommon },
          ],
        },
      ],
    },
  })),
  // 1 runtime/ (runtime/core/ below overrides these blocks for its files: later blocks win)
  ...Array.from({ length: MAX_DEPTH + 1 }, (_, d) => ({
    files: filesAt("runtime", d),
    rules: { "no-restricted-imports": ["error", { patterns: [{ regex: upThen(d + 1, ""), message: message.leavesRuntime }] }] },
  })),
  ...Array.from({ length: MAX_DEPTH }, (_, k) => ({
    files: filesAt("runtime/core", k),
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { regex: upThen(k + 2, ""), message: message.leavesRuntime },
            { regex: upThen(k + 1, "backends(/|$)"), message: message.coreBackends },
            { regex: upThen(k + 1, "temporal(/|$)"), message: message.coreTemporal },
            { regex: "^((@kubernetes/client-node|execa)(/|$)|@pulumi/|@temporalio/)", message: message.corePackages },
          ],
        },
      ],
    },
  })),
  // 2 components/ .. 5 bench/
  ...aboveRuntime("components", ["stacks", "simctl", "scripts", "bench", "test"]),
  ...aboveRuntime("stacks", ["simctl", "scripts", "bench", "test"]),
  ...aboveRuntime("simctl", ["stacks", "scripts", "bench", "test"]),
  ...aboveRuntime("scripts", ["bench", "test"]),
  ...aboveRuntime("bench", []),
];

export default tseslint.config(
  { ignores: ["dist/", "artifacts/", "coverage/", ".pulumi-*/", ".sim/", ".tmp/", "node_modules/"] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // The tree's convention (and tsc's noUnusedLocals'): a leading underscore marks a deliberately unused name.
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrorsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_", ignoreRestSiblings: true },
      ],
      // `cond ? a() : b()` as a statement is used on purpose (e.g. add-or-delete in one line).
      "@typescript-eslint/no-unused-expressions": ["error", { allowTernary: true }],
      // Flags initializers that every branch overwrites (`let ok = false; try { ...; ok = true }`): worth seeing, not failing.
      "no-useless-assignment": "warn",
    },
  },
  {
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs" },
    rules: {
      // CommonJS files (bin/, the kind steps script, the Node-version check) load modules with require() by design.
      "@typescript-eslint/no-require-imports": "off",
      // `const crypto = require("node:crypto")` shadowing the global of the same module is idiomatic CommonJS.
      "no-redeclare": ["error", { builtinGlobals: false }],
    },
  },
  {
    files: ["test/**"],
    rules: {
      // Tests reach into untyped manifests and fakes; `any` there is a testing convenience, not an API.
      "@typescript-eslint/no-explicit-any": "off",
    },
  },
  ...floorRules,
);

/**
 * The floors of the issue #11 layout (docs/architecture.md "Floors"), checked on the files themselves:
 *
 *   0 common/  1 runtime/  2 components/  3 stacks/, simctl/  4 scripts/  5 bench/, test/, index.ts
 *
 * Every .ts/.mts/.cts/.js/.mjs/.cjs file in a top-level folder (bar the few below that are on no floor by design)
 * and index.ts is read; its imports (static `import`/`export ... from`, `import("...")`, `require("...")`, with a
 * string literal; found by TypeScript's own pre-processor, so comments and strings do not count) are resolved to
 * repository paths and checked:
 * - a file may import only from its own floor or lower ones, and stacks/ and simctl/ not from each other;
 * - common/ imports nothing outside common/ and no npm package (Node built-ins only);
 * - runtime/ imports nothing outside runtime/; runtime/core/ not runtime/backends/, @kubernetes/client-node,
 *   execa, @pulumi/* or @temporalio/*, nor runtime/temporal/;
 * - components/, stacks/, simctl/, scripts/ and bench/ import the runtime only through runtime/index.ts;
 * - no import cycle between files;
 * - no source file in a top-level folder that is on no floor, no relative import that resolves to nothing.
 * eslint.config.mjs carries the same import rules for static imports (as you type); this test also sees dynamic
 * imports, require() and cycles. A self-test on a synthetic tree keeps the checker from passing vacuously.
 */
import { builtinModules } from "node:module";
import * as fs from "node:fs";
import * as path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(__dirname, "..", "..");

const FLOORS: Readonly<Record<string, number>> = { common: 0, runtime: 1, components: 2, stacks: 3, simctl: 3, scripts: 4, bench: 5, test: 5 };
/** Floors whose files may import the runtime only through its one door. */
const RUNTIME_CLIENTS = new Set(["components", "stacks", "simctl", "scripts", "bench"]);
/** Top-level folders on no floor by design: tests (above everything), the npm bin shim, prose and outputs. */
const NOT_SCANNED = new Set(["test", "bin", "docs", "examples", "node_modules", "dist", "artifacts", "coverage"]);
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/;
/** Top-level tooling configuration (vitest, eslint): not program code. */
const ROOT_CONFIG = /\.config\.m?[jt]s$|^vitest\.[\w-]+\.config\.mts$/;

interface Import {
  readonly spec: string;
  readonly line: number;
}
interface Source {
  /** Repository path, posix separators. */
  readonly file: string;
  readonly imports: readonly Import[];
}

const topFolder = (file: string): string | undefined => (file.includes("/") ? file.slice(0, file.indexOf("/")) : undefined);

/** The floor of a repository path, or undefined when it is on none. */
function floorOf(file: string): number | undefined {
  if (file === "index.ts") return 5;
  const top = topFolder(file);
  return top !== undefined && Object.hasOwn(FLOORS, top) ? FLOORS[top] : undefined;
}

const under = (file: string, folder: string): boolean => file.startsWith(`${folder}/`);

/** Resolves a relative specifier the way TypeScript's nodenext resolution finds sources (`./x.js` is `./x.ts`). */
function resolveWith(exists: (file: string) => boolean, from: string, spec: string): string | undefined {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  const candidates = [base];
  const swapped = /\.(m|c)?js$/.exec(base);
  if (swapped) candidates.push(`${base.slice(0, -swapped[0].length)}.${swapped[1] ?? ""}ts`);
  for (const stem of [base, `${base}/index`]) for (const ext of [".ts", ".mts", ".cts", ".d.ts", ".js", ".mjs", ".cjs", ".json"]) candidates.push(stem + ext);
  return candidates.find((c) => !c.startsWith("../") && exists(c));
}

const isBuiltin = (spec: string): boolean => spec.startsWith("node:") || builtinModules.includes(spec.split("/")[0]!);
const CORE_FORBIDDEN_PACKAGES = /^((@kubernetes\/client-node|execa)(\/|$)|@pulumi\/|@temporalio\/)/;

/** Every layering problem of `sources` (one line each), then every import cycle between them. */
function checkLayering(sources: readonly Source[], exists: (file: string) => boolean): string[] {
  const problems: string[] = [];
  const known = new Set(sources.map((s) => s.file));
  const edges = new Map<string, Set<string>>();
  for (const { file, imports } of sources) {
    const from = floorOf(file);
    if (from === undefined) {
      problems.push(`${file}: in a top-level folder that is on no floor of docs/architecture.md`);
      continue;
    }
    const top = topFolder(file) ?? "index.ts";
    for (const { spec, line } of imports) {
      const at = `${file}:${line} imports "${spec}"`;
      if (!spec.startsWith(".")) {
        if (top === "common" && !isBuiltin(spec)) problems.push(`${at}: common/ may import Node built-ins only, no npm package`);
        if (under(file, "runtime/core") && CORE_FORBIDDEN_PACKAGES.test(spec))
          problems.push(`${at}: runtime/core/ may not import @kubernetes/client-node, execa, @pulumi/* or @temporalio/*`);
        continue;
      }
      const target = resolveWith(exists, file, spec);
      if (target === undefined) {
        problems.push(`${at}: resolves to no file`);
        continue;
      }
      if (known.has(target)) (edges.get(file) ?? edges.set(file, new Set()).get(file)!).add(target);
      const to = floorOf(target);
      const why: string[] = [];
      if (top === "common" && !under(target, "common")) why.push("common/ imports nothing outside common/");
      else if (top === "runtime" && !under(target, "runtime") && target !== "package.json")
        why.push("runtime/ imports nothing outside runtime/"); // the package manifest (its version) is data, not a floor
      else if (to === undefined) {
        if (SOURCE.test(target)) why.push("that file is on no floor");
      } else if (to > from) why.push(`upward: floor ${from} (${top}/) -> floor ${to} (${topFolder(target) ?? target})`);
      else if ((top === "stacks" && under(target, "simctl")) || (top === "simctl" && under(target, "stacks"))) why.push("stacks/ and simctl/ do not import each other");
      if (under(file, "runtime/core") && under(target, "runtime/backends")) why.push("runtime/core/ may not import runtime/backends/");
      if (under(file, "runtime/core") && under(target, "runtime/temporal")) why.push("runtime/core/ may not import runtime/temporal/");
      if (RUNTIME_CLIENTS.has(top) && under(target, "runtime") && target !== "runtime/index.ts") why.push("the runtime is imported only through runtime/index.ts");
      if (why.length > 0) problems.push(`${at} (${target}): ${why.join("; ")}`);
    }
  }
  return [...problems, ...cycles(edges).map((c) => `import cycle: ${c.join(" -> ")}`)];
}

/** One shortest cycle through each file that is on a cycle, without repeating a cycle already listed. */
function cycles(edges: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const found: string[][] = [];
  const seen = new Set<string>();
  for (const start of [...edges.keys()].sort()) {
    // Breadth-first from start's successors back to start: the shortest cycle through start.
    const parent = new Map<string, string>();
    const queue = [...(edges.get(start) ?? [])].sort();
    for (const n of queue) parent.set(n, start);
    let closed = false;
    for (let i = 0; i < queue.length && !closed; i++) {
      const node = queue[i]!;
      if (node === start) {
        closed = true;
        break;
      }
      for (const next of [...(edges.get(node) ?? [])].sort()) {
        if (parent.has(next)) continue;
        parent.set(next, node);
        queue.push(next);
      }
    }
    if (!closed) continue;
    const cycle = [start];
    for (let n = parent.get(start)!; n !== start; n = parent.get(n)!) cycle.unshift(n);
    cycle.unshift(start);
    // cycle is start -> ... -> start; name it by its smallest rotation so each cycle is listed once.
    const ring = cycle.slice(1);
    const min = ring.indexOf([...ring].sort()[0]!);
    const key = [...ring.slice(min), ...ring.slice(0, min)].join(" ");
    if (seen.has(key)) continue;
    seen.add(key);
    found.push([...ring.slice(min), ...ring.slice(0, min), ring[min]!]);
  }
  return found;
}

/** The imports of one file, with their 1-based line numbers. */
function importsOf(text: string): Import[] {
  const info = ts.preProcessFile(text, true, true);
  const lineOf = (pos: number) => text.slice(0, pos).split("\n").length;
  return info.importedFiles.map((f) => ({ spec: f.fileName, line: lineOf(f.pos) }));
}

function walk(dir: string, out: string[]): void {
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    if (e.name.startsWith(".") || e.name === "node_modules") continue;
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) walk(rel, out);
    else if (e.isFile() && SOURCE.test(e.name)) out.push(rel);
  }
}

/** The repository's source files, and the top-level ones that are neither index.ts nor tooling config. */
function repositorySources(): Source[] {
  const files: string[] = [];
  for (const e of fs.readdirSync(ROOT, { withFileTypes: true })) {
    if (e.name.startsWith(".")) continue;
    if (e.isDirectory() && !NOT_SCANNED.has(e.name)) walk(e.name, files);
    else if (e.isFile() && SOURCE.test(e.name) && !ROOT_CONFIG.test(e.name)) files.push(e.name);
  }
  return files.sort().map((file) => ({ file, imports: importsOf(fs.readFileSync(path.join(ROOT, file), "utf8")) }));
}

const existsInRepo = (file: string): boolean => {
  try {
    return fs.statSync(path.join(ROOT, file)).isFile();
  } catch {
    return false;
  }
};

describe("layering checker (synthetic tree)", () => {
  const tree: Record<string, string[]> = {
    "common/pins.ts": ["node:fs", "path", "./paths"],
    "common/paths.ts": [],
    "runtime/index.ts": ["./core/spec", "./backends/index.js"],
    "runtime/core/spec.ts": ["zod", "../../common/pins"],
    "runtime/core/lock.ts": ["../backends/process/status", "execa", "@temporalio/worker", "../temporal/cli"],
    "runtime/backends/index.ts": ["./kubernetes/index", "@kubernetes/client-node"],
    "runtime/backends/kubernetes/index.ts": ["../index"],
    "runtime/backends/process/status.ts": [],
    "runtime/temporal/cli.ts": ["@temporalio/worker", "../core/spec"],
    "components/kind/index.ts": ["../../common/pins.js", "../../runtime", "../sim/index", "@pulumi/pulumi"],
    "components/sim/index.ts": ["../../scripts/sim/ports", "../../runtime/core/spec.js"],
    "stacks/sim.ts": ["../components/sim", "../simctl/main"],
    "simctl/main.ts": ["../common/paths", "../runtime/index.js"],
    "scripts/sim/ports.ts": ["../../stacks/sim", "../../bench/x"],
    "bench/x.ts": ["../runtime/index", "../test/helpers"],
    "index.ts": ["./stacks/sim", "./gone"],
    "lib/odd.ts": [],
  };
  const sources: Source[] = Object.entries(tree).map(([file, specs]) => ({ file, imports: specs.map((spec, i) => ({ spec, line: i + 1 })) }));
  const exists = (file: string) => Object.hasOwn(tree, file) || file === "test/helpers.ts";
  const problems = checkLayering(sources, exists);

  it("reports every broken rule, upward imports and cycles, and nothing else", () => {
    expect(problems).toEqual([
      `runtime/core/spec.ts:2 imports "../../common/pins" (common/pins.ts): runtime/ imports nothing outside runtime/`,
      `runtime/core/lock.ts:1 imports "../backends/process/status" (runtime/backends/process/status.ts): runtime/core/ may not import runtime/backends/`,
      `runtime/core/lock.ts:2 imports "execa": runtime/core/ may not import @kubernetes/client-node, execa, @pulumi/* or @temporalio/*`,
      `runtime/core/lock.ts:3 imports "@temporalio/worker": runtime/core/ may not import @kubernetes/client-node, execa, @pulumi/* or @temporalio/*`,
      `runtime/core/lock.ts:4 imports "../temporal/cli" (runtime/temporal/cli.ts): runtime/core/ may not import runtime/temporal/`,
      `components/sim/index.ts:1 imports "../../scripts/sim/ports" (scripts/sim/ports.ts): upward: floor 2 (components/) -> floor 4 (scripts)`,
      `components/sim/index.ts:2 imports "../../runtime/core/spec.js" (runtime/core/spec.ts): the runtime is imported only through runtime/index.ts`,
      `stacks/sim.ts:2 imports "../simctl/main" (simctl/main.ts): stacks/ and simctl/ do not import each other`,
      `scripts/sim/ports.ts:2 imports "../../bench/x" (bench/x.ts): upward: floor 4 (scripts/) -> floor 5 (bench)`,
      `index.ts:2 imports "./gone": resolves to no file`,
      "lib/odd.ts: in a top-level folder that is on no floor of docs/architecture.md",
      "import cycle: components/sim/index.ts -> scripts/sim/ports.ts -> stacks/sim.ts -> components/sim/index.ts",
      "import cycle: runtime/backends/index.ts -> runtime/backends/kubernetes/index.ts -> runtime/backends/index.ts",
    ]);
  });

  it("passes a tree that keeps to the floors", () => {
    const clean: Source[] = [
      { file: "common/pins.ts", imports: [{ spec: "node:path", line: 1 }] },
      {
        file: "runtime/index.ts",
        imports: [
          { spec: "./core/spec.js", line: 1 },
          { spec: "execa", line: 2 },
        ],
      },
      { file: "runtime/core/spec.ts", imports: [{ spec: "zod", line: 1 }] },
      {
        file: "components/run/index.ts",
        imports: [
          { spec: "../../runtime/index.js", line: 1 },
          { spec: "../../common/pins", line: 2 },
        ],
      },
      { file: "stacks/host.ts", imports: [{ spec: "../components/run", line: 1 }] },
      {
        file: "scripts/run.ts",
        imports: [
          { spec: "../stacks/host", line: 1 },
          { spec: "../simctl/main", line: 2 },
        ],
      },
      { file: "simctl/main.ts", imports: [{ spec: "../components/run/index", line: 1 }] },
      { file: "index.ts", imports: [{ spec: "./stacks/host", line: 1 }] },
    ];
    const files = new Set(clean.map((s) => s.file));
    expect(checkLayering(clean, (f) => files.has(f))).toEqual([]);
  });
});

describe("repository layering (layout.md floors)", () => {
  it("has no import that goes up a floor or breaks a floor rule, and no import cycle", () => {
    const sources = repositorySources();
    expect(sources.length).toBeGreaterThan(50);
    const problems = checkLayering(sources, existsInRepo);
    expect(problems.length, `${problems.length} layering problems:\n${problems.join("\n")}\n`).toBe(0);
  });
});

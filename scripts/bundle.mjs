#!/usr/bin/env node
/**
 * Bundles the cohort runtime (runtime/cli.ts and everything it imports, node_modules included) into ONE
 * CommonJS file, `dist/cohort.cjs`, that runs with plain `node` (>= 22) and no node_modules. Cluster and
 * VM profiles ship this file.
 *
 * Backends are dynamic `import()`s in runtime/backends/index.ts: esbuild keeps each one in the file but
 * wraps it so that its code (and its dependencies') is evaluated only when a run selects it.
 *
 * Usage: `npm run build` (or `node scripts/bundle.mjs [--outfile PATH]`). Writes PATH and PATH.map.
 * esbuild API: https://esbuild.github.io/api/
 */
import { build } from "esbuild";
import { chmod } from "node:fs/promises";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Builds the bundle.
 *
 * @param {{ outfile?: string }} [options] - outfile defaults to `<repo>/dist/cohort.cjs`
 * @returns {Promise<{ outfile: string, bytes: number, warnings: number }>}
 */
export async function bundle(options = {}) {
  const outfile = path.resolve(options.outfile ?? path.join(root, "dist", "cohort.cjs"));
  const result = await build({
    absWorkingDir: root,
    entryPoints: [path.join(root, "runtime", "cli.ts")],
    outfile,
    bundle: true,
    platform: "node",
    target: "node22",
    format: "cjs",
    minify: false,
    sourcemap: "linked",
    sourcesContent: false,
    legalComments: "eof",
    banner: { js: "#!/usr/bin/env node" },
    metafile: true,
    logLevel: "warning",
  });
  await chmod(outfile, 0o755);
  const bytes = result.metafile.outputs[path.relative(root, outfile)]?.bytes ?? 0;
  return { outfile, bytes, warnings: result.warnings.length };
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--outfile");
  const outfile = at === -1 ? undefined : process.argv[at + 1];
  const { outfile: written, bytes } = await bundle(outfile === undefined ? {} : { outfile });
  process.stdout.write(`wrote ${path.relative(process.cwd(), written)} (${(bytes / 1024).toFixed(0)} KiB)\n`);
}

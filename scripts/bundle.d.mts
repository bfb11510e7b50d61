/** Types of scripts/bundle.mjs (see its doc). */
export interface BuiltLauncher {
  readonly file: string;
  readonly bytes: number;
  readonly version: string;
}
export declare function buildLauncher(outDir: string): BuiltLauncher;
/** The Temporal half: `cohort-temporal.cjs` and the pre-bundled workflow code `cohort-temporal-workflows.js`. */
export interface BuiltTemporal {
  readonly cli: string;
  readonly workflows: string;
  readonly workflowBytes: number;
}
export declare function bundleTemporal(outDir: string): Promise<BuiltTemporal>;
export declare function bundle(options?: { outfile?: string }): Promise<{ outfile: string; bytes: number; warnings: number; launcher: BuiltLauncher; temporal: BuiltTemporal }>;

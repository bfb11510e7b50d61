/** Types of scripts/bundle.mjs (see its doc). */
export interface BuiltLauncher {
  readonly file: string;
  readonly bytes: number;
  readonly version: string;
}
export declare function buildLauncher(outDir: string): BuiltLauncher;
export declare function bundle(options?: { outfile?: string }): Promise<{ outfile: string; bytes: number; warnings: number; launcher: BuiltLauncher }>;

/** Types of scripts/bundle.mjs (see its doc). */
export declare function bundle(options?: { outfile?: string }): Promise<{ outfile: string; bytes: number; warnings: number }>;

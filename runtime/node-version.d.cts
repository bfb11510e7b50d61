/** See ./node-version.cjs. */
export declare const MIN_NODE_MAJOR: number;
/** True when `version` (default: this process's) is older than {@link MIN_NODE_MAJOR}. */
export declare function nodeTooOld(version?: string): boolean;

/**
 * The pinned offline toolchain: tool cache, builders, and the environment every Pulumi invocation uses.
 *
 * Modules marked Node-20-safe (paths, stamp, tool, node-tool, env, process, download, pin-checks, catalog,
 * pulumi-args) may be imported by code that runs under the system Node; the rest (go, default-tools,
 * pulumi-host) need Node >= 22 because they use execa 10 or @pulumi/pulumi. Importing this index loads all.
 */
export * from "./catalog";
export * from "./default-tools";
export * from "./download";
export * from "./env";
export * from "./go";
export * from "./node-tool";
export * from "../../common/paths";
export * from "./pin-checks";
export * from "./process";
export * from "./pulumi-args";
export * from "./pulumi-host";
export * from "../../common/stamp";
export * from "./tool";

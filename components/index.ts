/** Package components: cohort-lab's Pulumi ComponentResources, grouped by domain (docs/architecture.md "Floors"). */
export * from "./errors.js";
export * from "./host/index.js";
export * from "./kind/index.js";
export * from "./sim/index.js";
export * from "./k8s/index.js";
export * from "./run/index.js";

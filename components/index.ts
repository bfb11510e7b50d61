/** Package components: cohort-lab's Pulumi ComponentResources, grouped by domain (docs/architecture.md "Floors"). */
export * from "./run/CohortRun.js";
export * from "./host/HostProfile.js";

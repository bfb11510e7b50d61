/** Package components: cohort-lab's Pulumi ComponentResources, one class per file (docs/architecture.md "Floors"). */
export * from "./CohortRun.js";
export * from "./HostProfile.js";

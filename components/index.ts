/** Package components: cohort-lab's Pulumi ComponentResources, one class per file (STYLE.md §1). */
export * from "./run/CohortRun.js";
export * from "./host/HostProfile.js";

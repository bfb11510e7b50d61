/** Package components: cohort-lab's Pulumi ComponentResources, one class per file (STYLE.md §1). */
export * from "./CohortRun.js";
export * from "./HostProfile.js";

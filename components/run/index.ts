/** Package components/run: a cohort run (CohortRun), its per-run cluster objects (Runtime) and their renderers. */
export * from "./CohortRun.js";
export * from "./RunNamespace.js";
export * from "./kubernetesJob.js";
export * from "./manifests.js";
export * from "./clusterWorkflow.js";
export * from "./worker-manifests.js";

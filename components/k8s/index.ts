/** Package components/k8s: the cluster add-ons (Kueue, AgentSandbox, Temporal), their renderers and pinned manifests, and the quota arithmetic. */
export * from "./Kueue.js";
export * from "./AgentSandbox.js";
export * from "./Temporal.js";
export * from "./k8sObject.js";
export * from "./release.js";
export * from "./quota.js";
export * from "./quantity.js";
export * from "./manifests/cache.js";
export * from "./manifests/kueue.js";
export * from "./manifests/agentSandbox.js";
export * from "./manifests/temporal.js";

/** The `gke` profile's components (docs/gke.md): network, node identity, cluster, node pools, the ledger bucket, and the pure capacity arithmetic. */
export * from "./allocatable.js";
export * from "./GkeCluster.js";
export * from "./GkeNetwork.js";
export * from "./GkeNodePool.js";
export * from "./GkeNodeServiceAccount.js";
export * from "./kubeconfig.js";
export * from "./LedgerBucket.js";
export * from "./pin.js";
export * from "./Lifecycle.js";

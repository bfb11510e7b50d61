/** Package components/kind: a kind cluster (KindCluster), its kind config, node image and the project images it loads. */
export * from "./KindCluster.js";
export * from "./kindConfig.js";
export * from "./node-image.js";
export * from "./app-images.js";

/** Package components/sim: the simulated control plane (SimCluster) and its fake nodes (FakeNodePool), with their queue and port plans. */
export * from "./SimCluster.js";
export * from "./FakeNodePool.js";
export * from "./fakeNode.js";
export * from "./queue.js";
export * from "./ports.js";

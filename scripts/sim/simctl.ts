/**
 * The program entry of simctl (simctl/main.ts), kept at this path because every sim stack stores it in its
 * Commands' create and delete steps (SimCluster `SIMCTL_ENTRY`). No code of its own.
 */
import "../../simctl/main";

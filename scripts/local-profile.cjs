/**
 * The program entry of the `local` profile's host-side steps (components/kind/steps.cjs), kept at this path
 * because every local stack stores it in its Commands' create and delete steps (KindCluster `STEPS_ENTRY`).
 * No code of its own.
 */
"use strict";
require("../components/kind/steps.cjs").runAsProgram();

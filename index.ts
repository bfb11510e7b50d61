/**
 * cohort-lab: the Pulumi program. Reads the stack's `cohort-lab:*` config, validates it before any
 * resource exists (an error names the `pulumi config` key and the reason), builds the profile the stack
 * names (stacks/profiles.ts) and exports the stack outputs, the CI contract (docs/host.md "Stack outputs"):
 *
 * - `profile`: the profile built, e.g. `"host"`;
 * - `artifactRoot`: where ledgers go;
 * - `run`: `{ id, outcome, size, readyCount, timeToReadyMs, ledgerPath }` of the stack's cohort run;
 * - cluster profiles only: `kubeContext`, `kubeconfig` (secret), `temporalAddress`, `queues`.
 */
import { buildStack } from "./stacks/profiles.js";

const outputs = buildStack();

export const profile = outputs.profile;
export const artifactRoot = outputs.artifactRoot;
export const run = outputs.run;
export const kubeContext = outputs.kubeContext;
export const kubeconfig = outputs.kubeconfig;
export const temporalAddress = outputs.temporalAddress;
export const queues = outputs.queues;

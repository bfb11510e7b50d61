/**
 * cohort-lab: the Pulumi program. Reads the stack's `cohort-lab:*` config, validates it before any
 * resource exists (an error names the `pulumi config` key and the reason), builds the profile the stack
 * names (stacks/profiles.ts) and exports the stack outputs, the CI contract (docs/host.md "Stack outputs";
 * the TypeScript shape is `StackOutputs` in stacks/profiles.ts):
 *
 * - `profile`: the profile built, e.g. `"host"`;
 * - `artifactRoot`: where ledgers go;
 * - `run`: `{ id, outcome, size, readyCount, timeToReadyMs, ledgerPath, reportPath }` of the stack's cohort run;
 * - cluster profiles only: `kubeContext`, `kubeconfig` (secret), `temporalAddress`, `queues`.
 *
 * The module's exports are the stack outputs. Only the outputs the profile has are exported (Pulumi warns
 * about an exported `undefined`), hence `export =` of the defined fields rather than one `export const` each.
 */
import { buildStack, type StackOutputs } from "./stacks/profiles.js";

const outputs: StackOutputs = buildStack();

export = Object.fromEntries(Object.entries(outputs).filter(([, value]) => value !== undefined)) as Partial<StackOutputs>;

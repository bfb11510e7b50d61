/**
 * A Pulumi program of one MultipassFleet for test/multipass/fleet-engine.test.ts: its arguments come as JSON in
 * `MPFLEET_ARGS` (prefix, machines, multipass, environment, userData, launchTimeoutSeconds); it exports `instances`.
 */
import { MultipassFleet, type MultipassFleetArgs } from "../../components/multipass";

const raw = process.env.MPFLEET_ARGS;
if (raw === undefined) throw new Error("MPFLEET_ARGS is not set");
const fleet = new MultipassFleet("fleet", JSON.parse(raw) as MultipassFleetArgs);

export const instances = fleet.instances;

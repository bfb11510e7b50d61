/** Package components/multipass: Multipass VMs through command resources (MultipassFleet). */
export * from "./MultipassFleet.js";

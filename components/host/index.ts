/** Package components/host: the `host` profile's substrate (docs/architecture.md "Floors"). */
export * from "./HostProfile.js";

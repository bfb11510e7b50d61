/**
 * The `gcs` tool set (`npm run toolchain -- gcs`): fake-gcs-server, the GCS emulator the GCS-ledger tests
 * (test/runtime/ledger-gcs.test.ts) run `cohort run --ledger-export gs://…` and `cohort ledger verify gs://…`
 * against. Built from the Go module proxy like the `sim` tools (a wrapper module, `CGO_ENABLED=0`,
 * `GOTOOLCHAIN=local`, `-trimpath`, `-ldflags "-s -w"`), after its module zip's go.sum hash is checked against
 * `gcs.fakeGcsServer.goSum` in common/pins.ts; cached as `<cache>/fake-gcs-server-<version>/bin/fake-gcs-server`.
 *
 * The emulator has no version flag: the stamp (pin, size, SHA-256) and the go.sum check stand for it.
 */
import { fakeGcsServerId } from "../common/gcs-catalog";
import { downloadPinnedModule } from "./toolchain-manifests";
import { buildGoWrapperTool, goWrapperTool } from "./toolchain-sim";
import type { Tool, ToolSet } from "./lib/tool";

/** fake-gcs-server, go.sum-checked, then built in a wrapper module. */
export const fakeGcsServerTool: Tool = {
  ...goWrapperTool(fakeGcsServerId, { set: "gcs" }),
  async build(ctx) {
    const pin = fakeGcsServerId.pin;
    await downloadPinnedModule({ goModule: pin.goModule, version: pin.goModuleVersion, goSum: pin.goSum }, ctx, fakeGcsServerId.name);
    return buildGoWrapperTool(fakeGcsServerId, ctx, { set: "gcs" });
  },
};

/** The `gcs` tool set. */
export const toolSet: ToolSet = {
  name: "gcs",
  description: "fake-gcs-server (GCS emulator for the GCS-ledger tests)",
  tools: () => [fakeGcsServerTool],
};

/**
 * Entry point of the substitute `pulumi-resource-command` plugin (see ./command-provider.ts). The engine
 * starts it with the engine's gRPC address as the first argument; it prints its own port and serves the
 * ResourceProvider protocol through @pulumi/pulumi/provider.
 *
 * Requires Node >= 22 (@pulumi/pulumi 3.259).
 */
import { createRequire } from "node:module";
import { toolchain as pins } from "../../stacks/pins";
import { makeCommandProvider, type LineLogger } from "./command-provider";

const args = process.argv.slice(2);
const engineAddr = args.find((a) => !a.startsWith("-"));
const sdkRequire = createRequire(require.resolve("@pulumi/pulumi/package.json"));
const grpc = sdkRequire("@grpc/grpc-js") as typeof import("@grpc/grpc-js");
const engrpc = sdkRequire("./proto/engine_grpc_pb") as { EngineClient: new (addr: string, creds: unknown) => { log(req: unknown, cb: () => void): void } };
const engproto = sdkRequire("./proto/engine_pb") as {
  LogRequest: new () => { setSeverity(s: number): void; setMessage(m: string): void; setUrn(u: string): void; setEphemeral(e: boolean): void };
  LogSeverity: { INFO: number };
};
const engine = engineAddr !== undefined ? new engrpc.EngineClient(engineAddr, grpc.credentials.createInsecure()) : undefined;

/** Output lines go to the engine as ephemeral info attached to the resource, as upstream's InfoStatus does. */
const logFor =
  (urn: string): LineLogger =>
  (line) => {
    if (engine === undefined) return;
    const req = new engproto.LogRequest();
    req.setSeverity(engproto.LogSeverity.INFO);
    req.setMessage(line);
    req.setUrn(urn);
    req.setEphemeral(true);
    engine.log(req, () => undefined);
  };

const { main } = sdkRequire("./provider") as { main(provider: unknown, args: string[]): Promise<void> };
void main(makeCommandProvider(pins.command.version, logFor), args);

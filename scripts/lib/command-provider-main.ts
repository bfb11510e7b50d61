/**
 * Entry point of the substitute `pulumi-resource-command` plugin (see ./command-provider.ts). The engine
 * starts it with the engine's gRPC address as the first argument; it prints its own port and serves the
 * ResourceProvider protocol through @pulumi/pulumi/provider.
 *
 * Requires Node >= 22 (@pulumi/pulumi 3.259).
 */
import { createRequire } from "node:module";
import { toolchain as pins } from "../../common/pins";
import { cancelRunningCommands, makeCommandProvider, type LineLogger } from "./command-provider";

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

/**
 * The engine (the Pulumi CLI) starts this provider as its child. When the CLI dies without telling it (SIGKILL of
 * the CLI, a cancelled CI job), this process is reparented and would keep serving nobody with its commands still
 * running: the parent pid is polled, and once it changes every running command gets SIGTERM (the cohort step
 * passes it to the runtime, which ends the run as interrupted within its grace period) and this process exits
 * when they have.
 */
const parentPid = process.ppid;
// Once the engine is gone its pipes are too: a write to them must not become an uncaught EPIPE (the SDK's
// handler would log it to the same pipe, in a loop: seen as a provider spinning at 100% CPU).
process.stdout.on("error", () => undefined);
process.stderr.on("error", () => undefined);
const parentWatch = setInterval(() => {
  if (process.ppid === parentPid) return;
  clearInterval(parentWatch);
  void cancelRunningCommands("SIGTERM").finally(() => process.exit(0));
}, 250);
parentWatch.unref();

const { main } = sdkRequire("./provider") as { main(provider: unknown, args: string[]): Promise<void> };
void main(makeCommandProvider(pins.command.version, logFor), args);

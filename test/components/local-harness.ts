/**
 * Shared by the local-profile mock tests: Pulumi mocks that record every registration WITH its parent, provider
 * reference and dependency URNs. Mocks do not pass `dependsOn` to `newResource`, so the harness wraps the mock
 * monitor's `registerResource` and reads the RegisterResourceRequest the SDK built — `getDependenciesList()` holds
 * every direct dependency URN (explicit `dependsOn` plus the resources behind input Outputs), exactly what the
 * engine would receive. Call {@link installMocks} before importing any code under test (pulumi#12141).
 */
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";

/** One registration as the engine would see it. */
export interface Registration {
  readonly type: string;
  readonly name: string;
  readonly custom: boolean;
  readonly urn: string;
  readonly parent: string;
  /** `<provider URN>::<provider id>` for custom resources with an explicit provider, "" otherwise. */
  readonly provider: string;
  readonly dependencies: readonly string[];
  /** The `aliases` option, as sent: `name` "" = the same name; `noParent` = the stack root; `parentUrn` "" = the same parent. */
  readonly aliases: readonly { readonly name: string; readonly noParent: boolean; readonly parentUrn: string }[];
  readonly inputs: Record<string, unknown>;
}

/** A syntactically valid digest for tests. Never a pin: no image has it. */
export const TEST_DIGEST = `sha256:${"ab".repeat(32)}`;

/** The fake kubeconfig the kind Command "prints". */
export const FAKE_KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n# test\n";

interface RequestLike {
  getType(): string;
  getName(): string;
  getParent(): string;
  getCustom(): boolean;
  getProvider(): string;
  getDependenciesList(): string[];
  getAliasesList(): { getSpec(): { getName(): string; getNoparent(): boolean; getParenturn(): string } | undefined }[];
}

/**
 * The stdout of the `sim` profile's Commands under mocks (an {@link installMocks} `stdoutFor`): `sim-control-plane`
 * prints `simSummary` (simctl start's summary), `sim-run-credentials` the run's kubeconfig and backend config under
 * `<stateDir>/runs/ns/`, `cohort-run` the runtime's `runSummary`; every other Command prints nothing.
 */
export function simCommandStdout(o: { simSummary: object; stateDir: string; runSummary: object }): (name: string) => string | undefined {
  const stdout: Record<string, object | string> = {
    "sim-control-plane": o.simSummary,
    "sim-run-credentials": { kubeconfig: "/k", backendConfig: path.join(o.stateDir, "runs", "ns", "backend.json") },
    "cohort-run": o.runSummary,
    // The workflow mode's run identity (sim.runAs workflow, the default): 12 hex digits.
    "cohort-identity": "0123456789ab",
  };
  return (name) => {
    if (!Object.hasOwn(stdout, name)) return undefined;
    const value = stdout[name]!;
    return `${typeof value === "string" ? value : JSON.stringify(value)}\n`;
  };
}

/**
 * Installs mocks that record registrations.
 *
 * @param stdoutFor - stdout of a `command:local:Command` by name (undefined: none)
 * @param stateFor - extra output state of a resource by type and name (e.g. a cloud resource's computed fields)
 * @param call - the result of an invoke (a data source) by token; default `{}`
 */
export async function installMocks(options: {
  preview: boolean;
  stack?: string;
  stdoutFor?: (name: string) => string | undefined;
  stateFor?: (type: string, inputs: Record<string, unknown>) => Record<string, unknown>;
  call?: (token: string) => Record<string, unknown>;
}): Promise<Registration[]> {
  const registrations: Registration[] = [];
  const pending = new Map<string, Omit<Registration, "inputs">>();
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        const meta = pending.get(`${args.type}::${args.name}`);
        const stdout = args.type === "command:local:Command" ? options.stdoutFor?.(args.name) : undefined;
        const state = {
          ...(args.inputs as Record<string, unknown>),
          ...(stdout !== undefined ? { stdout, stderr: "" } : {}),
          ...(options.stateFor?.(args.type, args.inputs as Record<string, unknown>) ?? {}),
        };
        if (meta !== undefined) registrations.push({ ...meta, inputs: args.inputs as Record<string, unknown> });
        return { id: args.custom ? `${args.name}-id` : undefined, state };
      },
      call: (args) => options.call?.(args.token) ?? {},
    },
    "cohort-lab",
    options.stack ?? "local",
    options.preview,
    "organization",
  );
  const monitor = pulumi.runtime.getMonitor() as unknown as {
    registerResource(req: RequestLike, cb: unknown): unknown;
    newUrn(parent: string, type: string, name: string): string;
  };
  const original = monitor.registerResource.bind(monitor);
  monitor.registerResource = (req: RequestLike, cb: unknown) => {
    pending.set(`${req.getType()}::${req.getName()}`, {
      type: req.getType(),
      name: req.getName(),
      custom: req.getCustom(),
      parent: req.getParent(),
      provider: req.getProvider(),
      dependencies: req.getDependenciesList(),
      aliases: req.getAliasesList().flatMap((a) => {
        const spec = a.getSpec();
        return spec !== undefined ? [{ name: spec.getName(), noParent: spec.getNoparent(), parentUrn: spec.getParenturn() }] : [];
      }),
      urn: monitor.newUrn(req.getParent(), req.getType(), req.getName()),
    });
    return original(req, cb);
  };
  return registrations;
}

/** Resolves an Output (not in preview). */
export function valueOf<T>(output: pulumi.Input<T> | undefined): Promise<T> {
  return new Promise((resolve) => pulumi.output(output as pulumi.Input<T>).apply((v) => resolve(v as T)));
}

/** Waits until the SDK has finished every registration it started. */
export async function settle(registrations: Registration[], expectAtLeast = 1): Promise<void> {
  let last = -1;
  for (let i = 0; i < 200; i += 1) {
    await new Promise((r) => setTimeout(r, 25));
    if (registrations.length >= expectAtLeast && registrations.length === last) return;
    last = registrations.length;
  }
}

/** The registration of `type`/`name`. @throws listing what exists */
export function find(registrations: readonly Registration[], type: string, name: string): Registration {
  const r = registrations.find((x) => x.type === type && x.name === name);
  if (r === undefined) throw new Error(`no ${type} ${name}; have:\n${registrations.map((x) => `${x.type} ${x.name}`).join("\n")}`);
  return r;
}

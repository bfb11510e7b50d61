/**
 * Helpers of the sim tier's real-engine stack tests (stack.test.ts, gke-shape.test.ts): a temp project whose
 * `main` is this repository's index.ts, the pinned Pulumi CLI through the launcher (`npm run pulumi`), a file
 * backend, a sim state dir and artifacts in the same temp dir, a free block of loopback ports, and a record of
 * every process the sim started (checked after destroy).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import os from "node:os";
import path from "node:path";
import { execa } from "execa";
import { portNames } from "../../simctl/ports";
import { readState, type SimState } from "../../simctl/state";
import { PROJECT_DIR } from "../../stacks/config";

/** One `pulumi` command's result. */
export interface PulumiResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly all: string;
  readonly ms: number;
}

/** A block of free consecutive loopback ports below the ephemeral range. */
export async function freeBlock(): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once("error", () => resolve(false));
      s.listen({ host: "127.0.0.1", port, exclusive: true }, () => s.close(() => resolve(true)));
    });
  for (let base = 21000 + (process.pid % 50) * 100; base < 32000; base += 100) {
    let all = true;
    for (let i = 0; i < portNames.length && all; i += 1) all = await free(base + i);
    if (all) return base;
  }
  throw new Error("no free block of loopback ports");
}

/** The records of a run's ledger. */
export function ledgerRecords(ledgerPath: string): Record<string, unknown>[] {
  return readFileSync(path.join(ledgerPath, "records.ndjson"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A sim stack in a temp project (see the file comment). */
export class SimStackProject {
  readonly tmp: string;
  readonly projectDir: string;
  readonly artifactRoot: string;
  readonly stateDir: string;
  /** Every process the sim recorded while it ran ({@link noteProcesses}). */
  readonly seen: SimState["processes"] = [];
  readonly #env: NodeJS.ProcessEnv;

  constructor(
    prefix: string,
    readonly stack = "sim",
  ) {
    this.tmp = mkdtempSync(path.join(os.tmpdir(), prefix));
    this.projectDir = path.join(this.tmp, "project");
    this.artifactRoot = path.join(this.tmp, "artifacts");
    this.stateDir = path.join(this.tmp, "sim-state");
    this.#env = { ...process.env, COHORT_PULUMI_BACKEND_URL: `file://${path.join(this.tmp, "state")}`, PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local", NO_COLOR: "1" };
  }

  async pulumi(args: readonly string[]): Promise<PulumiResult> {
    const started = performance.now();
    const r = await execa("npm", ["run", "-s", "pulumi", "--", "-C", this.projectDir, ...args], { cwd: PROJECT_DIR, env: this.#env, reject: false, all: true, stdin: "ignore" });
    return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), all: String(r.all), ms: performance.now() - started };
  }

  /** {@link pulumi}, failing with the diagnostics when it exits non-zero. */
  async ok(args: readonly string[]): Promise<PulumiResult> {
    const r = await this.pulumi(args);
    if (r.exitCode !== 0) {
      const diagnostics = r.all.indexOf("Diagnostics:");
      throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${(diagnostics >= 0 ? r.all.slice(diagnostics) : r.all).slice(0, 6000)}`);
    }
    return r;
  }

  /** `pulumi config set --stack <stack> ...kv`. */
  config(...kv: string[]): Promise<PulumiResult> {
    return this.ok(["config", "set", "--stack", this.stack, ...kv]);
  }

  async outputs<T>(): Promise<T> {
    return JSON.parse((await this.ok(["stack", "output", "--json", "--stack", this.stack])).stdout) as T;
  }

  /** Writes the stack file: the repository's `Pulumi.sim.yaml`, or `text`. */
  writeStackFile(text?: string): void {
    writeFileSync(path.join(this.projectDir, `Pulumi.${this.stack}.yaml`), text ?? readFileSync(path.join(PROJECT_DIR, "Pulumi.sim.yaml")));
  }

  /** The artifact root, the sim's state dir and a free port block in the stack's config. */
  async configureSim(): Promise<void> {
    await this.config("artifactRoot", this.artifactRoot);
    await this.config("--path", "sim.stateDir", this.stateDir);
    await this.config("--path", "sim.portBase", String(await freeBlock()));
  }

  /**
   * Creates the project, the backend and the stack, and configures the sim ({@link configureSim}).
   *
   * @param stackFile - the stack file's text. @default the repository's Pulumi.sim.yaml
   */
  async setUp(stackFile?: string): Promise<void> {
    const bundle = path.join(PROJECT_DIR, "dist", "cohort.cjs");
    if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run build\` first`);
    mkdirSync(this.projectDir, { recursive: true });
    const project = readFileSync(path.join(PROJECT_DIR, "Pulumi.yaml"), "utf8");
    writeFileSync(path.join(this.projectDir, "Pulumi.yaml"), `${project.trimEnd()}\nmain: ${path.join(PROJECT_DIR, "index.ts")}\n`);
    this.writeStackFile(stackFile);
    symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(this.projectDir, "node_modules"));
    mkdirSync(path.join(this.tmp, "state"));
    await this.ok(["stack", "select", "--create", this.stack]);
    await this.configureSim();
  }

  /** Adds the processes the sim's state file lists now to {@link seen}. */
  noteProcesses(): void {
    const s = readState(path.join(this.stateDir, "sim-state.json"));
    for (const p of s?.processes ?? []) if (!this.seen.some((q) => q.pid === p.pid)) this.seen.push(p);
  }

  /** Destroys the stack (if a backend exists) and removes the temp dir unless COHORT_E2E_KEEP=1. */
  async tearDown(): Promise<void> {
    if (existsSync(path.join(this.tmp, "state"))) await this.pulumi(["destroy", "--yes", "--stack", this.stack, "--skip-preview"]);
    if (process.env.COHORT_E2E_KEEP !== "1") rmSync(this.tmp, { recursive: true, force: true });
  }
}

/** The repository's Pulumi.sim.yaml with only its `encryptionsalt` (made for the launcher's passphrase): a stack file without config. */
export function saltOnlyStackFile(): string {
  const salt = readFileSync(path.join(PROJECT_DIR, "Pulumi.sim.yaml"), "utf8")
    .split("\n")
    .find((l) => l.startsWith("encryptionsalt:"));
  if (salt === undefined) throw new Error("Pulumi.sim.yaml has no encryptionsalt line");
  return `${salt}\n`;
}

/**
 * Shared pieces of the `local` tier: whether it can run here (and why not), and a real-engine Pulumi project in a
 * temp directory whose `main` is this repository's index.ts, with its own file backend, artifacts directory,
 * kubeconfig, kind cluster name and Temporal port, so a test never touches the user's clusters or state.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import os from "node:os";
import path from "node:path";
import { loadExeca } from "../../scripts/lib/process";
import { localTools } from "../../components/kind/KindCluster";
import { cacheRoot } from "../../common/paths";
import { PROJECT_DIR } from "../../stacks/config";
import { findLocalArtifacts } from "../../stacks/local";
import { localBuildMissing } from "../../scripts/local/readiness";

/** Why the tier cannot run here (a Docker engine must answer, and {@link localBuildMissing}), or undefined. */
export function localUnavailableReason(): string | undefined {
  try {
    execFileSync("docker", ["version", "--format", "{{.Server.Version}}"], { stdio: "ignore", timeout: 20_000 });
  } catch {
    return "no Docker engine answers (start one with `bash scripts/docker-engine.sh start`)";
  }
  return localBuildMissing();
}

/** Result of one Pulumi command. */
export interface PulumiResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly all: string;
  readonly ms: number;
  /** With `timedLines`: every line of `all` with the wall-clock time (ms) it arrived; otherwise empty. */
  readonly lines: readonly { readonly at: number; readonly text: string }[];
}

/** A free loopback TCP port (bind test on 127.0.0.1). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** A temp Pulumi project for the `local` stack (see the module doc). */
export class LocalProject {
  readonly tmp = mkdtempSync(path.join(os.tmpdir(), "cohort-e2e-local-"));
  readonly projectDir = path.join(this.tmp, "project");
  readonly artifactRoot = path.join(this.tmp, "artifacts");
  readonly kubeconfig = path.join(this.tmp, "kubeconfig");
  readonly env: NodeJS.ProcessEnv;

  constructor(readonly clusterName: string) {
    this.env = {
      ...process.env,
      COHORT_PULUMI_BACKEND_URL: `file://${path.join(this.tmp, "state")}`,
      PULUMI_CONFIG_PASSPHRASE: "cohort-lab-local",
      // kind writes the cluster's context here, not into the user's kubeconfig.
      KUBECONFIG: this.kubeconfig,
      NO_COLOR: "1",
    };
  }

  /** Writes the project (Pulumi.yaml with `main` = this repository's index.ts, the shipped Pulumi.local.yaml). */
  /** The Temporal host port `init` configured (`local.temporalPort`). */
  temporalPort = 0;

  /**
   * `local.runAs` as `init` and {@link restoreStackFile} set it: `job` for the tests of the Job executor, or
   * undefined to leave the key unset (the default, `workflow`).
   */
  runAs: "job" | "workflow" | undefined = "job";

  async init(temporalPort: number): Promise<void> {
    this.temporalPort = temporalPort;
    mkdirSync(this.projectDir, { recursive: true });
    mkdirSync(path.join(this.tmp, "state"));
    const project = readFileSync(path.join(PROJECT_DIR, "Pulumi.yaml"), "utf8");
    writeFileSync(path.join(this.projectDir, "Pulumi.yaml"), `${project.trimEnd()}\nmain: ${path.join(PROJECT_DIR, "index.ts")}\n`);
    writeFileSync(path.join(this.projectDir, "Pulumi.local.yaml"), readFileSync(path.join(PROJECT_DIR, "Pulumi.local.yaml")));
    symlinkSync(path.join(PROJECT_DIR, "node_modules"), path.join(this.projectDir, "node_modules"));
    await this.ok(["stack", "select", "--create", "local"]);
    await this.config("artifactRoot", this.artifactRoot);
    await this.config("--path", "local.clusterName", this.clusterName);
    await this.config("--path", "local.temporalPort", String(temporalPort));
    if (this.runAs !== undefined) await this.config("--path", "local.runAs", this.runAs);
  }

  /** Runs `pulumi <args>` through the launcher in the project directory. */
  async pulumi(args: readonly string[], options: { signalWhen?: () => Promise<boolean>; signal?: NodeJS.Signals; timedLines?: boolean } = {}): Promise<PulumiResult> {
    const started = performance.now();
    const { execa } = await loadExeca();
    const timed = options.timedLines === true;
    const sub = execa("npm", ["run", "-s", "pulumi", "--", "-C", this.projectDir, ...args], {
      cwd: PROJECT_DIR,
      env: this.env,
      reject: false,
      all: true,
      stdin: "ignore",
      buffer: !timed,
    });
    // timedLines: the output is read here as it arrives (no buffering by execa), each line with its arrival time.
    const lines: { at: number; text: string }[] = [];
    let out = "";
    if (timed) {
      let pending = "";
      sub.all!.setEncoding("utf8");
      sub.all!.on("data", (d: string) => {
        const parts = (pending + d).split("\n");
        pending = parts.pop()!;
        for (const text of parts) lines.push({ at: Date.now(), text });
      });
      sub.all!.on("end", () => {
        if (pending !== "") lines.push({ at: Date.now(), text: pending });
      });
      sub.stdout!.setEncoding("utf8");
      sub.stdout!.on("data", (d: string) => (out += d));
    }
    if (options.signalWhen !== undefined) {
      const when = options.signalWhen;
      let done = false;
      void sub.finally(() => (done = true)).catch(() => undefined);
      void (async () => {
        // Poll (every 2 s, at most 10 min) until the condition holds, then signal the launcher once.
        for (let i = 0; i < 300 && !done; i++) {
          if (await when().catch(() => false)) {
            sub.kill(options.signal ?? "SIGINT");
            return;
          }
          await new Promise((r) => setTimeout(r, 2000));
        }
      })();
    }
    const r = await sub;
    if (timed) return { exitCode: r.exitCode ?? -1, stdout: out, all: lines.map((l) => l.text).join("\n"), ms: performance.now() - started, lines };
    return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), all: String(r.all), ms: performance.now() - started, lines };
  }

  /** Like {@link pulumi}, and throws with the diagnostics when the command fails. */
  async ok(args: readonly string[], options: { timedLines?: boolean } = {}): Promise<PulumiResult> {
    const r = await this.pulumi(args, options);
    if (r.exitCode !== 0) {
      const diagnostics = r.all.indexOf("Diagnostics:");
      throw new Error(`pulumi ${args.join(" ")} exited ${r.exitCode}:\n${(diagnostics >= 0 ? r.all.slice(diagnostics) : r.all).slice(-8000)}`);
    }
    return r;
  }

  config(...kv: string[]): Promise<PulumiResult> {
    return this.ok(["config", "set", "--stack", "local", ...kv]);
  }

  async outputs(): Promise<Record<string, unknown>> {
    return JSON.parse((await this.ok(["stack", "output", "--json", "--show-secrets", "--stack", "local"])).stdout) as Record<string, unknown>;
  }

  /** `kubectl --context kind-<cluster>` with this project's kubeconfig. */
  async kubectl(args: readonly string[]): Promise<string> {
    const tools = localTools(`${process.platform}-${process.arch}`, cacheRoot());
    const { execa } = await loadExeca();
    const r = await execa(tools.kubectl, ["--kubeconfig", this.kubeconfig, "--context", `kind-${this.clusterName}`, ...args], { reject: false, all: true });
    if (r.exitCode !== 0) throw new Error(`kubectl ${args.join(" ")} exited ${r.exitCode}: ${String(r.all).slice(-2000)}`);
    return String(r.stdout);
  }

  /** Writes the shipped Pulumi.local.yaml back (after a test replaced `cohort`), keeping this project's keys. */
  async restoreStackFile(): Promise<void> {
    const keep = (await this.pulumi(["config", "get", "--stack", "local", "--path", "local.temporalPort"])).stdout.trim();
    writeFileSync(path.join(this.projectDir, "Pulumi.local.yaml"), readFileSync(path.join(PROJECT_DIR, "Pulumi.local.yaml")));
    await this.config("artifactRoot", this.artifactRoot);
    await this.config("--path", "local.clusterName", this.clusterName);
    await this.config("--path", "local.temporalPort", keep);
    if (this.runAs !== undefined) await this.config("--path", "local.runAs", this.runAs);
  }

  /** The built node image's tag (for fake kind node containers). */
  nodeImageTag(): string {
    const tag = findLocalArtifacts().nodeImage?.tag;
    if (tag === undefined) throw new Error("no built node image");
    return tag;
  }

  /** The kind binary the profile uses. */
  kindBinary(): string {
    return localTools(`${process.platform}-${process.arch}`, cacheRoot()).kind;
  }

  /** Removes the temp directory (unless COHORT_E2E_KEEP=1). */
  cleanup(): void {
    if (process.env.COHORT_E2E_KEEP !== "1") rmSync(this.tmp, { recursive: true, force: true });
  }
}

/** Docker containers (any state) carrying kind's cluster label with this name. */
export function kindContainers(clusterName: string): string[] {
  const out = execFileSync("docker", ["ps", "-a", "--filter", `label=io.x-k8s.kind.cluster=${clusterName}`, "--format", "{{.Names}}"], { encoding: "utf8" });
  return out.split("\n").filter((l) => l.trim() !== "");
}

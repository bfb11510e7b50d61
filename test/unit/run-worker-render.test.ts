/**
 * components/run/worker-manifests.ts `renderRunWorker`: the in-cluster Temporal run worker of `local.runAs:
 * workflow` — one replica, `Recreate`, in the worker namespace (one Deployment that a new run rolls: its name,
 * namespace and selector do not depend on the run), its own ServiceAccount bound to the run's Role by a RoleBinding
 * in the run namespace, the bundle files in immutable ConfigMaps named by their content under the 1 MiB limit, and
 * an init program that really rebuilds each file (run here with node on the rendered ConfigMaps' bytes, the image's
 * paths swapped for temp dirs) and refuses a file whose SHA-256 differs.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { CONFIG_MAP_MAX_BYTES, RUNTIME_DIR } from "../../components/run/manifests";
import { renderRunWorker, RUN_WORKER_FILES, RUN_WORKER_READY_FILE, RunWorkerFilesError, UNPACK_FILES_SCRIPT, type RunWorkerInput } from "../../components/run/worker-manifests";

// Incompressible bytes: cohort.cjs needs two parts, as the real 6.7 MB bundle (1.2 MB gzipped) does.
const files = RUN_WORKER_FILES.map((name, i) => ({ name, bytes: i === 0 ? randomBytes(1_200_000) : Buffer.from(`// ${name}\n`.repeat(1000)) }));
const input: RunWorkerInput = {
  namespace: "society-0123456789",
  workerNamespace: "cohort-lab-system",
  localQueue: "cohort",
  image: `cohort-lab.local/run-worker:1.24.0@sha256:${"ab".repeat(32)}`, // test fixture, not a pin
  files,
  temporalAddress: "temporal.cohort-lab-system.svc.cluster.local:7233",
  taskQueue: "cohort-lab-local-runs",
  artifactsPath: "/var/lib/cohort-lab-artifacts",
  runAs: { uid: 0, gid: 0 },
  backendSettings: { runAsNonRoot: false },
  terminationGracePeriodSeconds: 50,
};

type Container = { name: string; command: string[]; args?: string[]; readinessProbe?: { exec: { command: string[] } } };
type PodSpec = {
  serviceAccountName: string;
  terminationGracePeriodSeconds: number;
  initContainers: Container[];
  containers: Container[];
  volumes: { name: string; projected?: { sources: { configMap: { name: string; items: { key: string; path: string }[] } }[] } }[];
};

describe("renderRunWorker", () => {
  const o = renderRunWorker(input);
  const spec = o.deployment.spec as { replicas: number; strategy: { type: string }; template: { spec: PodSpec } };

  it("one replica, Recreate, its own ServiceAccount bound to the run's Role, readiness = the worker's ready file", () => {
    expect([spec.replicas, spec.strategy.type]).toEqual([1, "Recreate"]);
    expect(spec.template.spec.serviceAccountName).toBe("cohort-run-worker");
    // The worker's objects in the worker namespace; only its RoleBinding (to the run's Role) in the run namespace.
    for (const obj of [o.serviceAccount, o.config, ...o.fileParts, o.deployment]) expect(obj.metadata.namespace, obj.metadata.name).toBe("cohort-lab-system");
    expect(o.roleBinding).toMatchObject({
      metadata: { namespace: input.namespace },
      roleRef: { kind: "Role", name: "cohort-runtime" },
      subjects: [{ kind: "ServiceAccount", name: "cohort-run-worker", namespace: "cohort-lab-system" }],
    });
    const worker = spec.template.spec.containers[0]!;
    expect([...worker.command, ...worker.args!]).toEqual([
      "node",
      `${RUNTIME_DIR}/cohort.cjs`,
      "worker",
      "--temporal-address",
      input.temporalAddress,
      "--task-queue",
      input.taskQueue,
      "--backend-config",
      "/opt/cohort-src/backend.json",
      "--identity",
      "$(POD_NAME)",
      "--ready-file",
      RUN_WORKER_READY_FILE,
    ]);
    expect(worker.readinessProbe!.exec.command).toEqual(["test", "-f", RUN_WORKER_READY_FILE]);
    expect(spec.template.spec.terminationGracePeriodSeconds).toBe(50);
    expect(JSON.parse((o.config.data as Record<string, string>)["backend.json"]!)).toEqual({ runAsNonRoot: false, namespace: input.namespace, queue: "cohort" });
  });

  it("every ConfigMap is under 1 MiB; a runtime change changes the pod template (it rolls)", () => {
    expect(o.fileParts.length).toBe(RUN_WORKER_FILES.length + 1);
    for (const part of o.fileParts) expect(Buffer.from((part.binaryData as { part: string }).part, "base64").length).toBeLessThan(CONFIG_MAP_MAX_BYTES);
    const changed = renderRunWorker({ ...input, files: files.map((f) => (f.name === "cohort-temporal.cjs" ? { ...f, bytes: Buffer.from("// changed\n") } : f)) });
    const annotations = (d: typeof o.deployment) => (d.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations;
    expect(annotations(changed.deployment)["cohort-lab.dev/files-sha256"]).not.toBe(annotations(o.deployment)["cohort-lab.dev/files-sha256"]);
    expect(renderRunWorker(input)).toEqual(o);
  });

  it("a new run namespace rolls the same Deployment: same name, namespace and selector; new ConfigMaps named by content, immutable", () => {
    const next = renderRunWorker({ ...input, namespace: "society-9876543210" });
    const selector = (d: typeof o.deployment) => (d.spec as { selector: unknown }).selector;
    expect([next.deployment.metadata.name, next.deployment.metadata.namespace]).toEqual([o.deployment.metadata.name, o.deployment.metadata.namespace]);
    expect(selector(next.deployment)).toEqual(selector(o.deployment));
    expect(selector(o.deployment)).toEqual({ matchLabels: { "app.kubernetes.io/name": "cohort-run-worker", "app.kubernetes.io/part-of": "cohort-lab" } });
    // The pod template changes (it names the new config), so the Deployment rolls to a new revision.
    expect(next.deployment.spec).not.toEqual(o.deployment.spec);
    expect(next.config.metadata.name).not.toBe(o.config.metadata.name);
    expect(o.config.metadata.name).toMatch(/^cohort-run-worker-[0-9a-f]{10}$/);
    // Same files, same parts (names and bytes); every ConfigMap immutable.
    expect(next.fileParts).toEqual(o.fileParts);
    for (const cm of [o.config, ...o.fileParts]) expect((cm as { immutable?: boolean }).immutable, cm.metadata.name).toBe(true);
    expect(o.fileParts.map((p) => p.metadata.name)).toEqual(o.fileParts.map((_, i) => expect.stringMatching(new RegExp(`^cohort-run-worker-files-[0-9a-f]{10}-${i}$`))));
    expect(next.roleBinding.metadata.namespace).toBe("society-9876543210");
  });

  it("refuses a worker namespace that is the run namespace, naming runWorker.workerNamespace", () => {
    expect(() => renderRunWorker({ ...input, workerNamespace: input.namespace })).toThrow(/^runWorker\.workerNamespace: must differ from the run namespace society-0123456789/);
  });

  it("the init program rebuilds every file from the projected ConfigMaps, and refuses a file whose SHA-256 differs", () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cohort-worker-unpack-"));
    try {
      const src = path.join(tmp, "src");
      const out = path.join(tmp, "out");
      fs.mkdirSync(src);
      fs.mkdirSync(out);
      // The projected volume, as the kubelet writes it: each ConfigMap item at its path.
      const byName = new Map([o.config, ...o.fileParts].map((cm) => [cm.metadata.name, cm]));
      const projected = spec.template.spec.volumes.find((v) => v.name === "source")!.projected!.sources;
      for (const { configMap } of projected) {
        const cm = byName.get(configMap.name)!;
        for (const item of configMap.items) {
          const data = (cm.data as Record<string, string> | undefined)?.[item.key];
          fs.writeFileSync(path.join(src, item.path), data ?? Buffer.from((cm.binaryData as Record<string, string>)[item.key]!, "base64"));
        }
      }
      const program = UNPACK_FILES_SCRIPT.replaceAll("/opt/cohort-src", src).replaceAll(RUNTIME_DIR, out);
      execFileSync(process.execPath, ["-e", program]);
      for (const f of files) expect(fs.readFileSync(path.join(out, f.name)).equals(f.bytes), f.name).toBe(true);
      const manifest = JSON.parse(fs.readFileSync(path.join(src, "files.json"), "utf8")) as { sha256: string }[];
      manifest[1]!.sha256 = "0".repeat(64);
      fs.writeFileSync(path.join(src, "files.json"), JSON.stringify(manifest));
      const r = spawnSync(process.execPath, ["-e", program], { encoding: "utf8" });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain("cohort-temporal.cjs: sha256");
      // A corrupt part (a flipped byte in the gzip trailer): one line naming the file, no zlib stack.
      const part = path.join(src, "cohort.cjs.gz.0");
      const bytes = fs.readFileSync(part);
      bytes[bytes.length - 5]! ^= 0xff;
      fs.writeFileSync(part, bytes);
      const corrupt = spawnSync(process.execPath, ["-e", program], { encoding: "utf8" });
      expect(corrupt.status).toBe(1);
      expect(corrupt.stderr.trim()).toMatch(/^cohort\.cjs: its parts cohort\.cjs\.gz\.0(, cohort\.cjs\.gz\.\d+)* do not gunzip: /);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("refuses a file list that is not exactly the three bundle files, naming runWorker.files", () => {
    expect(() => renderRunWorker({ ...input, files: files.slice(1) })).toThrow(RunWorkerFilesError);
    expect(() => renderRunWorker({ ...input, files: [...files, files[0]!] })).toThrow(
      /runWorker\.files: expected exactly cohort\.cjs, cohort-temporal\.cjs, cohort-temporal-workflows\.js/,
    );
  });
});

/**
 * components/run/manifests.ts `renderRunObjects`, the one renderer of a run's objects (RunNamespace on `local`
 * and `sim`, simctl/cohort.ts without Pulumi): without `inClusterRuntime` it needs no Job-only field and renders
 * exactly the Namespace, LocalQueue, ServiceAccount, Role and RoleBinding, the same objects as with it (the full
 * set with the ConfigMaps and Job is the golden test/golden/runtime-objects.yaml).
 */
import { describe, expect, it } from "vitest";
import { renderRunObjects, RuntimeBundleTooLargeError, type RunObjectsInput } from "../../components/run/manifests";

const run: RunObjectsInput = { namespace: "society-0123456789", localQueue: "cohort", clusterQueue: "cohort-lab" };
const inClusterRuntime = {
  image: `docker.io/library/node:24@sha256:${"cd".repeat(32)}`, // test fixture, not a pin
  bundle: Buffer.from("// bundle\n"),
  specJson: "{}\n",
  artifactsPath: "/var/lib/cohort-lab-artifacts",
  profile: "local",
  runAs: { uid: 1000, gid: 1000 },
  activeDeadlineSeconds: 600,
};

describe("renderRunObjects", () => {
  it("without an in-cluster runtime: the namespace's five objects, no ConfigMap, no Job", () => {
    const objects = renderRunObjects(run);
    expect(Object.keys(objects)).toEqual(["namespace", "localQueue", "serviceAccount", "role", "roleBinding"]);
    expect(objects.inClusterRuntime).toBeUndefined();
    expect(
      [objects.namespace, objects.localQueue, objects.serviceAccount, objects.role, objects.roleBinding].map((o) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`),
    ).toEqual([
      "Namespace /society-0123456789",
      "LocalQueue society-0123456789/cohort",
      "ServiceAccount society-0123456789/cohort-runtime",
      "Role society-0123456789/cohort-runtime",
      "RoleBinding society-0123456789/cohort-runtime",
    ]);
    expect(objects.localQueue.spec).toEqual({ clusterQueue: "cohort-lab" });
  });

  it("with it: the same five objects plus the ConfigMaps and the Job, whose runtime uses the run's LocalQueue", () => {
    const withRuntime = renderRunObjects({ ...run, inClusterRuntime });
    const { inClusterRuntime: runtime, ...namespaceObjects } = withRuntime;
    expect(namespaceObjects).toEqual(renderRunObjects(run));
    expect(runtime.bundleParts).toHaveLength(1);
    expect([runtime.configMap.metadata.name, runtime.job.kind, runtime.job.metadata.namespace]).toEqual(["cohort-runtime", "Job", "society-0123456789"]);
    const command = (runtime.job.spec as { template: { spec: { containers: { command: string[] }[] } } }).template.spec.containers[0]!.command;
    expect(command).toEqual(expect.arrayContaining(["namespace=society-0123456789", "queue=cohort"]));
  });

  it("checks the spec's size only for the in-cluster runtime (the spec goes into a ConfigMap)", () => {
    expect(() => renderRunObjects({ ...run, inClusterRuntime: { ...inClusterRuntime, specJson: "x".repeat(1024 * 1024 + 1) } })).toThrow(RuntimeBundleTooLargeError);
  });

  it("a bucket ledger: the artifacts volume is an emptyDir and the runtime exports to the bucket; a bad address names the field", () => {
    const hostPath = renderRunObjects({ ...run, inClusterRuntime }).inClusterRuntime.job;
    const bucket = renderRunObjects({ ...run, inClusterRuntime: { ...inClusterRuntime, ledger: { kind: "bucket", exportUri: "gs://my-ledgers" } } }).inClusterRuntime.job;
    type Pod = { volumes: { name: string }[]; containers: { name: string; command: string[] }[] };
    const pod = (job: typeof bucket) => (job.spec as { template: { spec: Pod } }).template.spec;
    expect(pod(bucket).volumes.find((v) => v.name === "artifacts")).toEqual({ name: "artifacts", emptyDir: {} });
    expect(pod(hostPath).volumes.find((v) => v.name === "artifacts")).toEqual({ name: "artifacts", hostPath: { path: "/var/lib/cohort-lab-artifacts", type: "Directory" } });
    expect(pod(bucket).containers[0]!.command).toEqual([...pod(hostPath).containers[0]!.command, "--ledger-export", "gs://my-ledgers"]);
    // hostPath spelled out is the default, byte for byte.
    expect(renderRunObjects({ ...run, inClusterRuntime: { ...inClusterRuntime, ledger: { kind: "hostPath" } } }).inClusterRuntime.job).toEqual(hostPath);
    expect(() => renderRunObjects({ ...run, inClusterRuntime: { ...inClusterRuntime, ledger: { kind: "bucket", exportUri: "s3://x" } } })).toThrow(
      /^inClusterRuntime\.ledger\.exportUri: "s3:\/\/x" is not a ledger address gs:\/\/<bucket>\[\/<prefix>\]: it must start with gs:\/\//,
    );
    expect(() => renderRunObjects({ ...run, inClusterRuntime: { ...inClusterRuntime, ledger: { kind: "nfs" } as never } })).toThrow(
      'inClusterRuntime.ledger.kind: expected "hostPath" or "bucket" (got "nfs")',
    );
  });
});

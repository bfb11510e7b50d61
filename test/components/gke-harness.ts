/**
 * Shared by the gke-profile mock tests: local-harness.ts's recording mocks with what the gcp resources the program
 * reads compute (the cluster's endpoint and CA, a service account's email) and the project number of
 * `gcp:organizations/getProject`, and a project directory holding the run worker's Temporal bundles (the default run
 * mode, `gke.runAs: workflow`, ships them to the worker). Call {@link installGkeMocks} before importing any code under test.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { PROJECT_DIR } from "../../stacks/config.js";
import { installMocks, TEST_DIGEST, type Registration } from "./local-harness.js";

/** The images of `cohort-lab:images`, each by digest. */
export const GKE_TEST_IMAGES = {
  kueue: `registry.k8s.io/kueue/kueue:v0.17.0@${TEST_DIGEST}`,
  agentSandbox: `registry.k8s.io/agent-sandbox/agent-sandbox-controller@${TEST_DIGEST}`,
  runtime: `docker.io/library/node@${TEST_DIGEST}`,
};

/** The run worker image as pushed to a registry, by digest (`gke.runWorkerImage`). */
export const GKE_TEST_WORKER_IMAGE = `us-central1-docker.pkg.dev/my-project-123/cohort/run-worker:1.24.0@${TEST_DIGEST}`;

/** Installs the recording mocks for the `gke` stack (`stdoutFor`: a Command's stdout by name, as in local-harness.ts). */
export function installGkeMocks(o: { readonly preview: boolean; readonly stdoutFor?: (name: string) => string | undefined }): Promise<Registration[]> {
  return installMocks({
    preview: o.preview,
    stack: "gke",
    ...(o.stdoutFor !== undefined ? { stdoutFor: o.stdoutFor } : {}),
    stateFor: (type, inputs) =>
      type === "gcp:container/cluster:Cluster"
        ? { endpoint: "203.0.113.10", masterAuth: { clusterCaCertificate: "Q0E=" } }
        : type === "gcp:serviceaccount/account:Account"
          ? { email: `${String(inputs.accountId)}@my-project-123.iam.gserviceaccount.com` }
          : {},
    call: (token) => (token === "gcp:organizations/getProject:getProject" ? { number: "123456789012", projectId: "my-project-123" } : {}),
  });
}

/**
 * A new project directory (`<tmp>/<prefix>…`) with the run worker's Temporal bundles in its `dist/`: the real ones,
 * copied from this checkout's `dist/` (`npm run build`), or with `standIns` one-line files (enough for a plan, which
 * only reads them).
 *
 * @returns the directory, or why it cannot be made (the bundles are not built)
 */
export function gkeProjectDir(prefix: string, o: { readonly standIns?: boolean } = {}): { readonly dir: string } | { readonly skip: string } {
  const files = ["cohort-temporal.cjs", "cohort-temporal-workflows.js"];
  const missing = o.standIns === true ? [] : files.filter((f) => !fs.existsSync(path.join(PROJECT_DIR, "dist", f)));
  if (missing.length > 0) return { skip: `dist/${missing.join(", dist/")} missing: npm run build` };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.mkdirSync(path.join(dir, "dist"));
  for (const f of files) {
    if (o.standIns === true) fs.writeFileSync(path.join(dir, "dist", f), `// stand-in for dist/${f}\n`);
    else fs.copyFileSync(path.join(PROJECT_DIR, "dist", f), path.join(dir, "dist", f));
  }
  return { dir };
}

/** {@link gkeProjectDir} with stand-in bundles (never skipped). */
export function gkePlanProjectDir(prefix: string): string {
  const made = gkeProjectDir(prefix, { standIns: true });
  if (!("dir" in made)) throw new Error(made.skip);
  return made.dir;
}

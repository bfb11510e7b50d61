/**
 * Whether the tool cache holds what `pulumi up --stack local` with built images (and the `local` test tier) needs.
 * Reads only the cache and the work tree: no Docker engine is needed to tell.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { localTools } from "../../components/kind/KindCluster";
import { AGENT_SANDBOX_MANIFESTS, KUEUE_MANIFESTS, loadManifests } from "../../components/k8s/manifests/cache";
import { PROJECT_DIR } from "../../stacks/config";
import { findLocalArtifacts, LOCAL_ARTIFACTS_ROOT_ENV } from "../../stacks/local";
import { AppImagesMissingError, findAppImages, RUN_WORKER_IMAGE_KEY } from "../../components/kind/app-images";
import { cacheRoot } from "../../common/paths";

/**
 * What is missing, with the command that builds it, or undefined when kind and kubectl (built), the node image, the
 * project images (kueue, agentSandbox, runtime, temporal, openclaw, and the Temporal run worker `runWorker`, which
 * the default run mode, `local.runAs: workflow`, needs; CI builds it with the others by `npm run toolchain -- local-apps`), the
 * Kueue and Agent Sandbox manifests and the runtime bundle are all there.
 */
export function localBuildMissing(): string | undefined {
  try {
    // With downloads refused, only built kind and kubectl are accepted.
    localTools(`${process.platform}-${process.arch}`, cacheRoot(), { ...process.env, COHORT_TOOLCHAIN_SOURCE: "build" });
  } catch {
    return "kind and kubectl are not built (`npm run toolchain -- local`)";
  }
  const artifacts = findLocalArtifacts();
  if (artifacts.nodeImage === undefined) return "the node image is not built (`npm run toolchain -- local-images`)";
  const missing: string[] = (["kueue", "agentSandbox", "runtime", "temporal", "openclaw"] as const).filter((k) => artifacts.images[k] === undefined);
  // The run worker is not one of the profile's always-loaded images (findLocalArtifacts), so it is looked up on its
  // own, in the same cache root.
  const override = process.env[LOCAL_ARTIFACTS_ROOT_ENV];
  const root = override !== undefined && override !== "" ? path.resolve(override) : cacheRoot();
  try {
    findAppImages({ ...process.env, COHORT_LAB_CACHE: root }, [RUN_WORKER_IMAGE_KEY]);
  } catch (error) {
    if (!(error instanceof AppImagesMissingError)) throw error;
    missing.push(RUN_WORKER_IMAGE_KEY);
  }
  if (missing.length > 0) return `project images not built: ${missing.join(", ")} (\`npm run toolchain -- local-apps\`)`;
  try {
    loadManifests(KUEUE_MANIFESTS);
    loadManifests(AGENT_SANDBOX_MANIFESTS);
  } catch (error) {
    return (error as Error).message;
  }
  if (!existsSync(path.join(PROJECT_DIR, "dist", "cohort.cjs"))) return "the runtime bundle is not built (`npm run build`)";
  return undefined;
}

/**
 * The `local-apps` tool set (`npm run toolchain -- local-apps`): the images the `local` (kind) profile runs, built
 * offline from binaries in the tool cache (components/kind/app-images.ts has the recipes and `findAppImages()`,
 * scripts/local/app-images/build.ts the builders):
 *
 * 1. `debian-rootfs-bookworm-minbase-<8 hex>`: a Debian root filesystem from debootstrap (made once).
 * 2. `image-runtime-…`: the toolchain's Node 24 on it (needs `npm run toolchain`).
 * 3. `image-openclaw-…`: stock OpenClaw from npm on the Node image.
 * 4. `image-run-worker-…`: the Temporal run worker, the Node image + the `@temporalio/*` npm closure copied from
 *    this repository's node_modules (needs `npm ci`), smoke-tested with `docker run`.
 * 5. `image-temporal-…`, `image-agent-sandbox-…`, `image-kueue-…`: distroless-like images of the `local` set's
 *    binaries (need `npm run toolchain -- local`).
 *
 * Each image directory holds `image.tar` (`docker save`) and `image.json` (digest from a private containerd 1.6,
 * Docker image ID, reference, archive SHA-256), named by a hash of the image's inputs. Needs root and a Docker
 * engine (`bash scripts/docker-engine.sh start`). Warm runs check stamps and `docker image inspect` each image
 * (loading the archive when Docker lost it).
 */
import type { Tool, ToolSet } from "./lib/tool";
import { APP_IMAGE_KEYS, planImages } from "../components/kind/app-images";
import { imageTool, rootfsTool } from "./local/app-images/build";

/** The tools in build order: the Debian rootfs, then each image of {@link APP_IMAGE_KEYS}. */
export function localAppTools(env: NodeJS.ProcessEnv = process.env): Tool[] {
  const plans = planImages(env);
  return [rootfsTool(), ...APP_IMAGE_KEYS.map((key) => imageTool(plans[key], key))];
}

/** The `local-apps` tool set. */
export const toolSet: ToolSet = {
  name: "local-apps",
  description: "images of the local (kind) profile: Node runtime, OpenClaw, Temporal run worker, Temporal, Agent Sandbox, Kueue (Docker; digests from containerd)",
  tools: () => localAppTools(),
};

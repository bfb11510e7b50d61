/**
 * `npm run toolchain -- local-images`: the offline kind node image of the `local` profile (kind v0.31.0,
 * Kubernetes v1.35.4, every system image inside as `offline.invalid/*`), built by scripts/local/node-image.ts
 * from Debian bookworm packages and the Kubernetes, etcd, CoreDNS, crictl, flannel and pause binaries the
 * toolchain built into the cache. See docs/node-image.md.
 *
 * Tools, in build order: `kind-node-rootfs` and `kind-image-rootfs` (debootstrap tarballs, so a binary
 * change does not re-run debootstrap), then `kind-node-image` (cache directory
 * `<cache>/kind-node-image-v1.35.4-<12 hex of the inputs>`, holding the `docker save` archive and
 * `image.json`). Warm: stamps plus `docker image inspect`; a missing image is `docker load`ed from the archive.
 *
 * Requires root, debootstrap, Go (the kind module zip) and a running Docker engine
 * (`bash scripts/docker-engine.sh start`).
 */
import { cacheRoot } from "../common/paths";
import type { ToolSet } from "./lib/tool";
import { localImageTools } from "./local/node-image";

/** The `local-images` tool set. */
export const toolSet: ToolSet = {
  name: "local-images",
  description: "offline kind node image (kind v0.31.0, Kubernetes v1.35.4, flannel) built with debootstrap and Docker",
  tools: () => localImageTools(cacheRoot()),
};

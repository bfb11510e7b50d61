#!/bin/sh
# Runs inside the node-image build container (Debian bookworm rootfs + kind v0.31.0's images/base/files,
# already copied in by scripts/local/node-image.ts). It does what the RUN steps of kind's
# images/base/Dockerfile do after `clean-install`, with Debian's paths:
# https://github.com/kubernetes-sigs/kind/blob/v0.31.0/images/base/Dockerfile
set -eu

# kind's systemd clean-up (same list as the Dockerfile).
find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
rm -f /lib/systemd/system/multi-user.target.wants/*
rm -f /etc/systemd/system/*.wants/*
rm -f /lib/systemd/system/local-fs.target.wants/*
rm -f /lib/systemd/system/sockets.target.wants/*udev*
rm -f /lib/systemd/system/sockets.target.wants/*initctl*
rm -f /lib/systemd/system/basic.target.wants/*
grep -qx "ReadKMsg=no" /etc/systemd/journald.conf || echo "ReadKMsg=no" >> /etc/systemd/journald.conf
ln -sf /lib/systemd/systemd /sbin/init

# Debian's containerd package ships its own unit in /lib/systemd/system; kind's copy in /etc wins.
systemctl enable kubelet.service
systemctl enable containerd.service
systemctl enable undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests /etc/cni/net.d

# One CNI bin_dir (/opt/cni/bin) holding the flannel meta plugin (copied in) and links to Debian's
# containernetworking-plugins in /usr/lib/cni (bridge, host-local, loopback, portmap, ...).
mkdir -p /opt/cni/bin
for plugin in /usr/lib/cni/*; do
  name=$(basename "$plugin")
  [ -e "/opt/cni/bin/$name" ] || ln -s "$plugin" "/opt/cni/bin/$name"
done
for need in flannel bridge host-local loopback portmap; do
  [ -x "/opt/cni/bin/$need" ] || { echo "setup-node.sh: /opt/cni/bin/$need is missing" >&2; exit 1; }
done

# kind's base spec for every container: `ctr oci spec` (needs no daemon) plus the createContainer hook
# that mounts the product files, without rlimits (a hard limit above dockerd's would fail in runc).
ctr oci spec \
  | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
  | jq 'del(.process.rlimits)' \
  > /etc/containerd/cri-base.json
jq -e '.hooks.createContainer | length == 1' /etc/containerd/cri-base.json >/dev/null

# The runtime versions, for the build log.
containerd --version
runc --version | head -n 1

#!/bin/sh
# Runs in a chroot of a fresh `debootstrap --variant=minbase` Debian bookworm root (scripts/local/node-image.ts
# mounts /proc first and writes /etc/apt/sources.list.d/debian.sources from this machine's apt sources).
# It brings the root up to date (bookworm-updates, bookworm-security) and then cleans it the way kind's
# images/base/files/usr/local/bin/clean-install does:
# https://github.com/kubernetes-sigs/kind/blob/v0.31.0/images/base/files/usr/local/bin/clean-install
set -eu
export DEBIAN_FRONTEND=noninteractive
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
apt-get update
apt-get upgrade -y
apt-get clean -y
rm -f /usr/sbin/policy-rc.d /etc/machine-id /var/lib/dbus/machine-id
: > /etc/machine-id
rm -rf \
   /var/cache/debconf/*-old \
   /var/lib/apt/lists/* \
   /var/log/* \
   /tmp/* \
   /var/tmp/* \
   /usr/share/doc/* \
   /usr/share/doc-base/* \
   /usr/share/man/* \
   /usr/share/local/*

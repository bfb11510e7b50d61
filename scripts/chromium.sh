#!/usr/bin/env bash
# A headless Chromium for the report's browser test (test/runtime/ledger-report-chromium.test.ts):
# `bash scripts/chromium.sh` prints the path of a Chromium binary on stdout, installing Debian's `chromium`
# package first when none is found.
#
# Lookup order: $COHORT_CHROMIUM (when it is an executable file), then `chromium`, `chromium-browser` on PATH.
# Install: only as root on a Debian system (apt-get, non-interactive, --no-install-recommends; `apt-get update`
# once and a retry when the first install fails, e.g. on a stale package list). The package starts no daemon.
# The install time is in README.md "Tests". Exit 0 with the path; exit 1 with the reason on stderr when there is none and it cannot be
# installed. Files (outside the work tree): ${COHORT_LAB_CACHE:-${XDG_CACHE_HOME:-~/.cache}/cohort-lab}/chromium/apt.log
set -euo pipefail

cache_root() {
  if [ -n "${COHORT_LAB_CACHE:-}" ]; then echo "$COHORT_LAB_CACHE"
  elif [ -n "${XDG_CACHE_HOME:-}" ]; then echo "$XDG_CACHE_HOME/cohort-lab"
  else echo "$HOME/.cache/cohort-lab"; fi
}

say() { echo "chromium: $*" >&2; }

find_chromium() {
  if [ -n "${COHORT_CHROMIUM:-}" ] && [ -x "$COHORT_CHROMIUM" ]; then echo "$COHORT_CHROMIUM"; return 0; fi
  local name
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  return 1
}

if find_chromium; then exit 0; fi

[ "$(id -u)" = 0 ] || { say "no chromium found and installing Debian's chromium needs root"; exit 1; }
command -v apt-get >/dev/null 2>&1 || { say "no chromium found and this is not a Debian system (no apt-get): install Chromium and set COHORT_CHROMIUM"; exit 1; }
STATE="$(cache_root)/chromium"
mkdir -p "$STATE"
say "installing Debian's chromium (apt-get; log $STATE/apt.log)"
started=$SECONDS
install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; }
if ! install >"$STATE/apt.log" 2>&1; then
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q && install; } >>"$STATE/apt.log" 2>&1; then
    say "apt-get install chromium failed:"; tail -n 20 "$STATE/apt.log" >&2; exit 1
  fi
fi
find_chromium >/dev/null || { say "apt-get installed chromium but no chromium binary is on PATH"; exit 1; }
say "installed in $((SECONDS - started)) s"
find_chromium

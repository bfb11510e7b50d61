#!/usr/bin/env bash
# A Docker engine for cohort-lab's `local` profile and its tests: `bash scripts/docker-engine.sh start|stop|status`.
#
# start   When a Docker engine already answers (DOCKER_HOST, or /var/run/docker.sock), use it and change nothing.
#         Prints `started`, `running` or `external` on stdout (only `started` means this call started dockerd).
#         Otherwise: install Debian's docker.io when `dockerd` is absent (apt-get, no service is started by the
#         package: a policy-rc.d refuses it for the install), add a runc wrapper as the default runtime ONLY when
#         this machine's capability bounding set lacks a capability runc would grant privileged containers (read
#         from /proc/self/status CapBnd, never assumed; on the machines this project was built on CAP_SYS_RESOURCE
#         is missing, which makes `docker run --privileged` and `docker exec --privileged` fail with "unable to
#         apply caps: operation not permitted"), write the daemon config (its own data root in the tool cache, a
#         pinned bridge subnet and address pool), start `dockerd` detached, and wait until it answers.
# stop    Stops the dockerd this script started (by the pid it recorded); an engine it did not start is left alone.
# status  Exit 0 when an engine answers; prints whose it is.
#
# Files (outside the work tree): ${COHORT_LAB_CACHE:-${XDG_CACHE_HOME:-~/.cache}/cohort-lab}/docker-engine/
#   daemon.json  runc-wrapper  dockerd.pid  dockerd.log  data/ (images, containers, volumes: kept across stops)
#
# Networks: the default bridge is 172.28.0.1/16 and user networks (kind's `kind` network) get /24s from
# 172.29.0.0/16. These containers and networks are the project's own test hosts: tests send traffic only to
# them and to loopback.
#
# References: dockerd config file keys https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file
# ("runtimes", "default-runtime", "data-root", "exec-root", "bip", "default-address-pools");
# runc's bounding-set behaviour https://github.com/opencontainers/runc/issues/3240 (runc 1.1 does not drop
# capabilities missing from its own bounding set before capset(2)).
set -euo pipefail

cache_root() {
  if [ -n "${COHORT_LAB_CACHE:-}" ]; then echo "$COHORT_LAB_CACHE"
  elif [ -n "${XDG_CACHE_HOME:-}" ]; then echo "$XDG_CACHE_HOME/cohort-lab"
  else echo "$HOME/.cache/cohort-lab"; fi
}

STATE="$(cache_root)/docker-engine"
PIDFILE="$STATE/dockerd.pid"
LOG="$STATE/dockerd.log"
EXEC_ROOT=/run/cohort-lab-docker
BRIDGE_IP=172.28.0.1/16
POOL_BASE=172.29.0.0/16
say() { echo "docker-engine: $*" >&2; }

engine_answers() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

our_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q dockerd "/proc/$pid/comm" 2>/dev/null && echo "$pid"
}

# Capability names by number (linux/capability.h); the wrapper drops the ones missing from the bounding set.
CAP_NAMES=(CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_FSETID CAP_KILL CAP_SETGID CAP_SETUID
  CAP_SETPCAP CAP_LINUX_IMMUTABLE CAP_NET_BIND_SERVICE CAP_NET_BROADCAST CAP_NET_ADMIN CAP_NET_RAW CAP_IPC_LOCK
  CAP_IPC_OWNER CAP_SYS_MODULE CAP_SYS_RAWIO CAP_SYS_CHROOT CAP_SYS_PTRACE CAP_SYS_PACCT CAP_SYS_ADMIN CAP_SYS_BOOT
  CAP_SYS_NICE CAP_SYS_RESOURCE CAP_SYS_TIME CAP_SYS_TTY_CONFIG CAP_MKNOD CAP_LEASE CAP_AUDIT_WRITE
  CAP_AUDIT_CONTROL CAP_SETFCAP CAP_MAC_OVERRIDE CAP_MAC_ADMIN CAP_SYSLOG CAP_WAKE_ALARM CAP_BLOCK_SUSPEND
  CAP_AUDIT_READ CAP_PERFMON CAP_BPF CAP_CHECKPOINT_RESTORE)

# Prints the names of the capabilities (up to the kernel's last one) missing from this process's bounding set.
missing_caps() {
  local bnd last i
  bnd=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  last=$(cat /proc/sys/kernel/cap_last_cap)
  for ((i = 0; i <= last && i < ${#CAP_NAMES[@]}; i++)); do
    if ((((bnd >> i) & 1) == 0)); then echo "${CAP_NAMES[$i]}"; fi
  done
}

install_docker() {
  command -v dockerd >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || { say "dockerd is not installed and installing Debian's docker.io needs root"; exit 1; }
  command -v apt-get >/dev/null 2>&1 || { say "dockerd is not installed and this is not a Debian system (no apt-get): install a Docker engine"; exit 1; }
  say "installing Debian's docker.io (apt-get)"
  local guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    # Refuse service starts during the install: the package would start a dockerd without our config. The guard
    # is removed on every way out of this script.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d && guard=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT INT TERM
  fi
  local ok=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io >"$STATE/apt.log" 2>&1 || {
    DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$STATE/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io >>"$STATE/apt.log" 2>&1
  } || ok=$?
  if [ -n "$guard" ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT INT TERM; fi
  if [ "$ok" != 0 ] || ! command -v dockerd >/dev/null 2>&1; then
    say "apt-get install docker.io failed:"; tail -n 20 "$STATE/apt.log" >&2; exit 1
  fi
}

write_wrapper() {
  local runc="$1"; shift
  if ! perl -MJSON::PP -e1 2>/dev/null; then
    # JSON::PP is in perl-modules, which a minimal Debian lacks (perl-base only).
    say "perl's JSON::PP is missing: apt-get install libjson-pp-perl"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libjson-pp-perl >>"$STATE/apt.log" 2>&1 ||
      { say "apt-get install libjson-pp-perl failed:"; tail -n 20 "$STATE/apt.log" >&2; exit 1; }
  fi
  local drop="$*"
  cat >"$STATE/runc-wrapper.tmp" <<EOF
#!/usr/bin/perl
# Written by cohort-lab scripts/docker-engine.sh: removes capabilities this machine's bounding set lacks
# ($drop) from the OCI bundle's config.json (runc create/run --bundle) and from the process file
# (runc exec --process) before calling the real runc with the same arguments.
use strict; use warnings; use JSON::PP;
my %drop = map { \$_ => 1 } qw($drop);
sub fix {
  my (\$file, \$in_process) = @_;
  open(my \$fh, '<', \$file) or return;
  local \$/; my \$text = <\$fh>; close \$fh;
  my \$json = JSON::PP->new->utf8->allow_nonref;
  my \$doc = \$json->decode(\$text);
  my \$caps = \$in_process ? \$doc->{capabilities} : \$doc->{process}{capabilities};
  return unless ref \$caps eq 'HASH';
  for my \$set (keys %\$caps) {
    next unless ref \$caps->{\$set} eq 'ARRAY';
    \$caps->{\$set} = [grep { !\$drop{\$_} } @{\$caps->{\$set}}];
  }
  open(my \$out, '>', "\$file.cohort-tmp") or die "runc-wrapper: \$file: \$!";
  print \$out \$json->encode(\$doc); close \$out or die "runc-wrapper: \$file: \$!";
  rename("\$file.cohort-tmp", \$file) or die "runc-wrapper: rename \$file: \$!";
}
for (my \$i = 0; \$i < @ARGV; \$i++) {
  my \$a = \$ARGV[\$i];
  if (\$a eq '--bundle' || \$a eq '-b') { fix("\$ARGV[\$i+1]/config.json", 0) if defined \$ARGV[\$i+1] }
  elsif (\$a =~ /^--bundle=(.+)\$/) { fix("\$1/config.json", 0) }
  elsif (\$a eq '--process' || \$a eq '-p') { fix(\$ARGV[\$i+1], 1) if defined \$ARGV[\$i+1] }
  elsif (\$a =~ /^--process=(.+)\$/) { fix(\$1, 1) }
}
exec('$runc', @ARGV) or die "runc-wrapper: exec $runc: \$!";
EOF
  chmod 0755 "$STATE/runc-wrapper.tmp"
  mv "$STATE/runc-wrapper.tmp" "$STATE/runc-wrapper"
}

# Prints one word on stdout: `started` (this call started dockerd: the caller owns it and may stop it), `running`
# (a dockerd this script started earlier answers) or `external` (another engine answers; it is used as it is).
start() {
  local pid
  if pid=$(our_pid); then
    # Ours is alive: never start a second one beside it (same data root and socket); wait for it to answer.
    local waited=$SECONDS
    until engine_answers; do
      if ((SECONDS - waited > 60)); then say "dockerd $pid (started by this script) is alive but does not answer after 60 s; see $LOG"; exit 1; fi
      [ -d "/proc/$pid" ] || break
      sleep 1
    done
    if engine_answers; then say "running (pid $pid, started by this script)"; echo running; return 0; fi
  fi
  if engine_answers; then
    say "a Docker engine already answers; using it as it is"
    echo external
    return 0
  fi
  mkdir -p "$STATE/data"
  install_docker
  local missing runtimes=""
  missing=$(missing_caps | tr '\n' ' ')
  if [ -n "${missing// /}" ]; then
    local runc
    runc=$(command -v runc || true)
    [ -n "$runc" ] || { say "runc not found (Debian's docker.io depends on it)"; exit 1; }
    write_wrapper "$runc" $missing
    say "capability bounding set lacks: $missing-> runc wrapper $STATE/runc-wrapper is the default runtime"
    runtimes=$(printf ',\n  "runtimes": { "cohort-runc": { "path": "%s" } },\n  "default-runtime": "cohort-runc"' "$STATE/runc-wrapper")
  fi
  cat >"$STATE/daemon.json" <<EOF
{
  "data-root": "$STATE/data",
  "exec-root": "$EXEC_ROOT",
  "pidfile": "$PIDFILE",
  "hosts": ["unix:///var/run/docker.sock"],
  "storage-driver": "overlay2",
  "bip": "$BRIDGE_IP",
  "default-address-pools": [{ "base": "$POOL_BASE", "size": 24 }],
  "features": { "buildkit": false }$runtimes
}
EOF
  rm -f "$PIDFILE"
  say "starting dockerd (config $STATE/daemon.json, log $LOG)"
  setsid dockerd --config-file "$STATE/daemon.json" </dev/null >>"$LOG" 2>&1 &
  local child=$! started=$SECONDS
  until engine_answers; do
    if ! kill -0 "$child" 2>/dev/null; then say "dockerd exited during start-up:"; tail -n 20 "$LOG" >&2; exit 1; fi
    if ((SECONDS - started > 60)); then
      say "dockerd did not answer within 60 s (stopped again):"; tail -n 20 "$LOG" >&2
      kill -TERM "$child" 2>/dev/null || true
      exit 1
    fi
    sleep 0.5
  done
  say "running (pid $(cat "$PIDFILE"), up in $((SECONDS - started)) s)"
  echo started
}

stop() {
  local pid
  if ! pid=$(our_pid); then say "no dockerd started by this script is running"; return 0; fi
  kill -TERM "$pid"
  local started=$SECONDS
  local killed=""
  while [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
    if ((SECONDS - started > 30)) && [ -z "$killed" ]; then say "dockerd $pid still running after 30 s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; killed=1; fi
    if ((SECONDS - started > 45)); then say "dockerd $pid did not exit after SIGKILL; giving up"; exit 1; fi
    sleep 0.2
  done
  rm -f "$PIDFILE"
  say "stopped (pid $pid)"
}

status() {
  if engine_answers; then
    if pid=$(our_pid); then say "running (pid $pid, started by this script)"; else say "a Docker engine answers (not started by this script)"; fi
    return 0
  fi
  say "no Docker engine answers"
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: bash scripts/docker-engine.sh start|stop|status" >&2; exit 64 ;;
esac

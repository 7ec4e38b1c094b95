#!/usr/bin/env bash
# A real Docker engine for the docker-backend tests, on a fresh offline Debian machine (root).
# Idempotent: installs what is missing (docker.io, busybox-static, musl), starts dockerd in the
# background unless an engine already answers, waits for it (bounded), then pre-builds the
# offline base image the tests use (busybox + bash from this machine, no registry needed).
#
# Environment: AHE_DOCKERD_ARGS replaces the dockerd flags; DOCKERD_LOG (default
# /var/log/ahe-dockerd.log) is where dockerd writes; DOCKERD_WAIT_SEC (default 60) bounds the wait.
set -euo pipefail
cd "$(dirname "$0")/.."

LOG=${DOCKERD_LOG:-/var/log/ahe-dockerd.log}
WAIT_SEC=${DOCKERD_WAIT_SEC:-60}
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python

say() { echo "[setup-docker] $*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

engine_up() {
  "$PYTHON" - <<'PY' >/dev/null 2>&1
import docker
docker.from_env(timeout=5).ping()
PY
}

# 1. Packages (only what is missing).
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v busybox >/dev/null 2>&1 || missing+=(busybox-static)
# musl's loader: tests/test_confine_container.py starts the worker in a musl root too
[ -e /lib/ld-musl-x86_64.so.1 ] || [ "$(uname -m)" != "x86_64" ] || missing+=(musl)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != "0" ]; then
    say "need root to install ${missing[*]}"; exit 1
  fi
  t0=$(now)
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  say "installed ${missing[*]} in $(since "$t0")s"
fi

# 2. The engine.
if engine_up; then
  say "a Docker engine already answers"
else
  if [ "$(id -u)" != "0" ]; then
    say "no Docker engine answers and only root can start dockerd"; exit 1
  fi
  if [ -n "${AHE_DOCKERD_ARGS:-}" ]; then
    arg_sets=("$AHE_DOCKERD_ARGS")
  else
    # No network for containers here: no iptables, no bridge. overlay2 is much faster than
    # vfs; vfs is the fallback that works on any file system.
    common="--iptables=false --ip6tables=false --bridge=none"
    arg_sets=("--storage-driver=overlay2 $common" "--storage-driver=vfs $common")
  fi
  up=0
  for args in "${arg_sets[@]}"; do
    t0=$(now)
    echo "--- $(date -u +%FT%TZ) dockerd $args" >>"$LOG"
    # shellcheck disable=SC2086  # the flags are meant to split
    setsid nohup dockerd $args >>"$LOG" 2>&1 </dev/null &
    pid=$!
    deadline=$(( $(date +%s) + WAIT_SEC ))
    while [ "$(date +%s)" -lt "$deadline" ] && kill -0 "$pid" 2>/dev/null; do
      if engine_up; then up=1; break; fi
      sleep 0.2
    done
    if [ "$up" = "1" ]; then
      say "dockerd ($args) ready in $(since "$t0")s, pid $pid, log $LOG"
      break
    fi
    say "dockerd ($args) did not come up; trying the next flags"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "$up" != "1" ]; then
    say "dockerd did not start; the end of $LOG:"; tail -n 20 "$LOG" || true
    exit 1
  fi
fi

# 3. The offline base image of the tests (cached: a no-op when the engine already has it).
t0=$(now)
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m ahe.sandbox.docker_images build-base
say "base image checked in $(since "$t0")s"

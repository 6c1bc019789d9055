#!/usr/bin/env bash
# Install everything `make demo` and `make test` need on a fresh Debian machine (run as root).
# Idempotent: each step checks first and does nothing when its work is already done.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
log() { printf '[setup] %s\n' "$*"; }

need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# Headless browser for tests/integration/test_browser.py (the HTML report, rendered for real).
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ "${#need_apt[@]}" -gt 0 ]; then
  log "installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" </dev/null >/dev/null
fi

# A Docker engine: use one that answers, else start Debian's dockerd in the background.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: /var/log/grader-dockerd.log)"
  (setsid dockerd >/var/log/grader-dockerd.log 2>&1 &)
  for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /var/log/grader-dockerd.log"; exit 1; }
fi

# Python side: the CPU build of torch first (a plain `torch` would pull a CUDA build).
py=${PYTHON:-python3}
if ! "$py" -c 'import torch, triton' >/dev/null 2>&1; then
  log "installing torch (CPU) and triton"
  "$py" -m pip install -q torch==2.13.0 triton==3.9.0
fi
log "installing grader and its test tools"
"$py" -m pip install -q -e ".[dev,ray]"  # ray: tests/integration/test_round.py's cluster
# rich (terminal tables and progress) and jsonschema (the --json tests) come with the above.
"$py" -c 'import rich, jsonschema' || { log "rich or jsonschema did not install"; exit 1; }
log "ready: $(docker version --format 'docker engine {{.Server.Version}}')"

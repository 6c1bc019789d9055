#!/usr/bin/env bash
# Packs Ray for the lent GPU host, which has no Ray and reaches no index: .device/ray.tar.xz,
# carried with .device/ and unpacked by bench/gpu_session.sh's `ray` step (docs/rounds.md,
# "On the H200"). Run once from the project root, after ../shared/device/prepare.sh.
#
# The host's Python is 3.12 (/opt/torch/.venv); the device tool carries at most 64 MiB, and
# .device/ already holds about 40 MB, while Ray's wheel is 79 MB. So: Ray and its dependencies
# for that Python, less what a grading cluster never loads (the Java jar, the libraries on top
# of Ray core: RLlib, Serve, Data, Train, Tune, LLM; the dashboard's web client; click, which
# .device/wheels has), binaries stripped of their symbols, packed with xz: about 20 MB. The
# Docker engine that prepare.sh packed (36 MB) is packed again at xz's highest preset (30 MB),
# so that .device/, the corpus (build/honest_public) and the tree fit in one call.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${RAY_VERSION:-2.60.0}
OUT=.device/ray.tar.xz
[ -d .device ] || { echo "no .device/: run ../shared/device/prepare.sh first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
site=$work/raysite
python3 -m pip install -q --target "$site" --python-version 3.12 --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 "ray==$VERSION"
( cd "$site"
  rm -rf bin click click-*.dist-info ray/jars ray/rllib ray/llm ray/serve ray/data ray/train \
    ray/tune ray/dashboard/client ray/air/examples
  find . -name __pycache__ -prune -exec rm -rf {} +
  strip --strip-unneeded ray/core/src/ray/gcs/gcs_server ray/core/src/ray/raylet/raylet \
    ray/_raylet.so )
tar -cf - -C "$work" raysite | xz -9e -T2 > "$OUT.part"
mv "$OUT.part" "$OUT"
engine=.device/docker/engine.tar.xz
if [ ! -f "$engine.repacked" ]; then
  mkdir "$work/engine" && tar -C "$work/engine" -xJf "$engine"
  tar -cf - -C "$work/engine" . | xz -9e -T2 > "$engine.part" && mv "$engine.part" "$engine"
  touch "$engine.repacked"
fi
du -sh .device
echo "$OUT: Ray $VERSION for Python 3.12, $(du -h "$OUT" | cut -f1)"

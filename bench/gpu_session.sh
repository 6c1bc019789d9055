#!/usr/bin/env bash
# One call on a lent GPU host (see docs/benchmarks.md): start Docker, grade both examples on the
# GPU in host-runtime mode (the Triton one three times, for stability), compare the timings
# with do_bench in a bare process, run the GPU tests; reports and logs go under $OUT.
set -uo pipefail
bash .device/start-dockerd.sh
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
PY=$(python3 -c 'import sys; print(sys.executable)')
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.executable, torch.__version__, triton.__version__)'
} 2>&1 | tee "$OUT/env.txt"
python3 -m grader doctor 2>&1 | tee "$OUT/doctor.txt"
grade() {  # grade EXAMPLE NAME
  python3 -m grader bundle create "examples/$1" -o "/tmp/$1.tar" >/dev/null
  /usr/bin/time -f "$2 wall %e s" python3 -m grader run "/tmp/$1.tar" --device cuda \
    --runtime host --python "$PY" -o "/tmp/rep-$2" --format json,md -q 2>&1 | tail -n 3
  cp "/tmp/rep-$2/report.json" "$OUT/report-$2.json"
}
grade triton triton-1
python3 bench/fidelity.py "$OUT/report-triton-1.json" 2>&1 | tee "$OUT/fidelity.txt"
grade triton triton-2; grade triton triton-3
[ "${GPU_TESTS:-0}" = 1 ] && { grade torch-fallback fallback
  python3 -m pytest -q -p no:cacheprovider --run-docker --run-gpu tests/gpu 2>&1 | tail -n 5; }
true

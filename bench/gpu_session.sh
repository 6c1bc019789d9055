#!/usr/bin/env bash
# One call on a lent GPU host (see docs/benchmarks.md): start Docker, then run the named steps
# in order; reports and logs come back packed in $OUT/session.tgz.
#   bash bench/gpu_session.sh STEP...
# Steps:
#   calibrate        grader hardware calibrate -> $OUT/calibrated.toml
#   hostile          grader selftest --group hostile_gpu --device cuda
#   examples         examples/triton graded three times (stability) + fidelity vs do_bench
#   fallback         examples/torch-fallback graded once
#   triton           examples/triton graded once
#   ahead            examples/triton graded with --start-ahead off, then on at each
#                    --ahead-depth of AHEAD_DEPTHS (default "2"), AHEAD_ROUNDS times (default
#                    2): ahead-off-1, ahead-on-d2-1, ...: what starting containers ahead saves
#                    per problem
#   fidelity:NAME:DIR[:P,..]  bench/fidelity.py over $OUT/report-NAME.json (or the checkpoint
#                    of a grading NAME cut short) of entry DIR
#                    (optionally only problems P,..; shapes of 20 µs and more, all of them for
#                    examples/triton)
#   cuda             the production runtime kind: bench/cuda_base.py makes a CUDA PyTorch base
#                    image of this host's own installation (no registry here), then the demo
#                    graded with --runtime cuda FROM it (report cuda-triton; the driver's
#                    libraries bound, nothing else of the host's) and the GPU test of that kind
#   setup            bench/setup_cost.py: what a fresh process pays before an entry runs
#                    (import torch/triton, the CUDA context, the profiler's first session),
#                    alone and three at once -> $OUT/setup-cost.{txt,json}
#   clocks           bench/clocks.py: SM clock and power while kernels are timed three ways
#   beside           bench/beside_noise.py: kernels timed by the grader's loop alone, beside
#                    standbys' set-up, beside judging -> $OUT/beside.{md,json}
#   tests[:EXPR]     pytest --run-docker --run-gpu tests/gpu (only the tests -k EXPR selects)
#   suite:DIR[:P,..[:NAME]]  the submission folder DIR graded (optionally only problems P,..),
#                    its report named NAME (default: DIR's name and the problems)
#   round:SUITE[:P,..[:N]]  bench/round_speed.py: a round of N entries (default 3: our Triton
#                    solutions, the PyTorch baseline, the solutions again; for demo the two
#                    examples) on SUITE (optionally only problems P,..), stopped at what is
#                    left of the call less 60 s: per-entry wall time and where it went, first
#                    vs later entries -> $OUT/round-SUITE[-P..].{md,json} (and
#                    .progress.jsonl: the round's progress lines as they came) and the entries'
#                    reports under $OUT/round-SUITE[-P..]/ (a list of problems too long
#                    for a file's name: -<count>p-<digest>); ROUND_ENTRIES="DIR ..." names the
#                    entries instead (repeated until there are N); AHEAD_DEPTH=D grades with
#                    --ahead-depth D, SERVE=1 with --serve, BESIDE=on|off
#                    with --time-beside on|off, PREPARE=1 after `grader round commit` and
#                    `grader round prepare` (timed apart: every entry a later one; with
#                    prepared.json under $OUT/round-.../); PREPARE=round or PREPARE=atrex
#                    for the round: or the atrex steps only
#   atrex[:P,..[:N]]  all of Atrex-Bench as a round (issue 32): build/atrex-bench (carry it:
#                    alibaba/atrex-bench's data/ at eb8697d, docs/import.md) imported as
#                    /tmp/suites/atrex-bench, bench/atrex_entry.py's entry (our Triton kernels
#                    from bench/atrex_solutions/: all 30 operators; an operator without one
#                    gets its reference, verdict fallback), then as round: a round of N entries (default
#                    2: that entry twice; the first computes the references, the later reuses
#                    them) on it (optionally only problems P,..), stopped at what is left of
#                    the call less 60 s -> $OUT/round-atrex-bench[-P..].{md,json} (with the
#                    per-shape CV across the two gradings) and the reports under
#                    $OUT/round-atrex-bench[-P..]/ (AHEAD_DEPTH, SERVE, PREPARE as for round:)
#   atrex-entry      only the import and the entry of the atrex step (for suite:/tmp/atrex-entry:P
#                    with GRADE_OPTS="--suites /tmp/suites -k P/SHAPE ...": a few shapes)
#   import:KIND      tests/fixtures/import/KIND (kernelbench, atrex, atrex_real) imported as the
#                    suite KIND-fixture and its entries (tests/fixtures/import/entries/KIND) graded
#                    on it: the module problems (KernelBench's ModelNew, weights made in the
#                    constructor) on the GPU
#   ray              tests/gpu/test_ray_gpu.py: a round on a one-node Ray cluster holding the GPU,
#                    with the Ray that bench/device_ray.sh packed into .device/ray.tar.xz
#   corpus[:C,..]    bench/honest_corpus.py --device cuda over build/honest_public (carry it;
#                    bench/honest_corpus_assemble.py), all cases or only C,.. -> $OUT/corpus.txt
#   verify:NAME      grader verify of the grading NAME made earlier in this call (its report,
#                    secret and bundle): every verdict, and the timings and scores within
#                    their noise, reproduced on this GPU -> $OUT/verify-NAME.txt
#   bare             bench/baseline_bare.py on llm-inference (solutions, PyTorch entry,
#                    reference in one bare process) -> $OUT/bare.json and the table
#   overhead         bench/overhead.py over every report graded so far in this call
#   expect:NAME:V    stop here unless every shape of $OUT/report-NAME.json got verdict V (a
#                    cheap grading first proves the rest of the call worth its device time)
# GRADER_HELDOUT_CASES=DIR: the tests step also grades the case folders in DIR (cases kept
# apart from the tree; select them with tests:heldout).
# With no steps: examples. GPU_TESTS=1 (the old switch) adds fallback and tests.
# GRADE_OPTS: more `grader run` options for every grading (e.g. "--shapes scored");
# GRADE_LIMIT_S: seconds one grading may take (default 3000); CALL_LIMIT_S: seconds the whole
# call may take (default 570, under the device tool's 600 s): a grading gets at most what is
# left of it less 20 s, so that it is cut by its own limit and leaves its checkpoint to pack
# (a grading killed with the call leaves nothing: lost once, 2026-12-01).
set -uo pipefail
bash .device/start-dockerd.sh
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# Everything is written to a work folder and packed into $OUT/session.tgz at the end: the
# device tool brings back at most eight files.
FINAL=${OUT:-/tmp/out}
OUT=/tmp/session-out
rm -rf "$OUT"  # a warm machine keeps the last call's files: pack only this call's
mkdir -p "$OUT"
trap 'tar -czf "$FINAL/session.tgz" -C "$OUT" .' EXIT
PY=$(python3 -c 'import sys; print(sys.executable)')
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.executable, torch.__version__, triton.__version__)'
  df -h /dev/shm  # the judge's comparing processes take large outputs from shared memory
} 2>&1 | tee "$OUT/env.txt"
python3 -m grader doctor 2>&1 | tee "$OUT/doctor.txt"
grade() {  # grade SUBMISSION_DIR NAME [grader run options...]
  local dir=$1 name=$2; shift 2
  python3 -m grader bundle create "$dir" -o "/tmp/$name.tar" >/dev/null
  # GRADE_LIMIT_S bounds one grading, so that the call ends (and packs $OUT) inside the device
  # tool's limit; a grading cut short leaves its checkpoint (the problems it finished).
  local limit=${GRADE_LIMIT_S:-3000} left=$(( ${CALL_LIMIT_S:-570} - SECONDS - 20 ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 30 ]; then echo "$name: skipped, ${left} s left of the call"; return; fi
  /usr/bin/time -f "$name wall %e s" timeout "$limit" python3 -m grader run \
    "/tmp/$name.tar" --device cuda --runtime host --python "$PY" -o "/tmp/rep-$name" \
    --format json,md -q ${GRADE_OPTS:-} "$@" 2>&1 | tail -n 3
  cp "/tmp/rep-$name/report.json" "$OUT/report-$name.json" 2>/dev/null \
    || cp -r "/tmp/rep-$name/.checkpoint/problems" "$OUT/checkpoint-$name"
  cp "/tmp/rep-$name/report.md" "$OUT/report-$name.md" 2>/dev/null
}
atrex_entry() {  # Atrex-Bench imported as /tmp/suites/atrex-bench, its entry as /tmp/atrex-entry
  if [ ! -d build/atrex-bench/data ]; then
    echo "atrex: no build/atrex-bench/data (carry build/atrex-bench)"; return 1
  fi
  mkdir -p /tmp/suites && rm -rf /tmp/suites/atrex-bench /tmp/atrex-entry
  /usr/bin/time -f "atrex import wall %e s" python3 -m grader import atrex \
    build/atrex-bench -o /tmp/suites/atrex-bench 2>&1 | tail -n 2
  python3 bench/atrex_entry.py /tmp/suites/atrex-bench -o /tmp/atrex-entry \
    2>&1 | tee "$OUT/atrex-entry.txt"
}
round_name() {  # round_name BASE P,..: BASE-P1-P2..., or for a list too long for a file's
  # name (the round's folder, its .progress.jsonl) BASE-<count>p-<digest of the list>
  local base=$1 only=$2 name
  if [ -z "$only" ]; then echo "$base"; return; fi
  name="$base-${only//,/-}"
  if [ ${#name} -gt 120 ]; then
    name="$base-$(tr , '\n' <<<"$only" | wc -l)p-$(printf %s "$only" | sha256sum | cut -c1-8)"
  fi
  echo "$name"
}
run_round() {  # run_round NAME N round_speed.py options...: a round, its reports copied under $OUT
  local name=$1 n=$2; shift 2
  # 60 s kept for the round's stop (SIGINT, up to 20 s of clean-up), the reaping of what it
  # left, and packing $OUT
  local left=$(( ${CALL_LIMIT_S:-570} - SECONDS - 60 ))
  if [ "$left" -lt 60 ]; then echo "$name: skipped, ${left} s left"; return; fi
  rm -rf "/tmp/$name"
  python3 bench/round_speed.py -n "$n" "$@" \
    --device cuda --runtime host --python "$PY" --time-limit "$left" \
    ${AHEAD_DEPTH:+--ahead-depth "$AHEAD_DEPTH"} ${SERVE:+--serve} \
    ${BESIDE:+--time-beside "$BESIDE"} \
    $(case "${PREPARE:-}" in 1|"$kind") echo --prepare ;; esac) \
    -o "/tmp/$name" --json "$OUT/$name.json" --progress "$OUT/$name.progress.jsonl" 2>&1 \
    | tee "$OUT/$name.md"
  mkdir -p "$OUT/$name"
  local d e
  for d in /tmp/"$name"/entries/*/; do  # a report, or what a cut-short entry finished
    e=$(basename "$d")
    if [ -f "$d/report.json" ]; then cp "$d/report.json" "$OUT/$name/$e.json"
    elif [ -d "$d/.checkpoint/problems" ]; then
      cp -r "$d/.checkpoint/problems" "$OUT/$name/$e.checkpoint"; fi
  done
  cp -r /tmp/"$name"/.round "$OUT/$name/outcomes" 2>/dev/null
  cp /tmp/"$name"/leaderboard.md /tmp/"$name"/prepared.json "$OUT/$name/" 2>/dev/null
  # what is worth keeping is under $OUT now; the round's kept references (20 GiB for
  # llm-inference) would take the disk room of a later step's round
  rm -rf "/tmp/$name"
}
steps=("$@")
[ ${#steps[@]} = 0 ] && steps=(examples)
[ "${GPU_TESTS:-0}" = 1 ] && steps+=(fallback tests)
for step in "${steps[@]}"; do
  echo "== $step ($(date -u +%T))"
  case $step in
    calibrate) python3 -m grader hardware calibrate -o "$OUT/calibrated.toml" 2>&1 ;;
    hostile) left=$(( ${CALL_LIMIT_S:-570} - SECONDS - 15 ))
             if [ "$left" -lt 60 ]; then echo "hostile: skipped, ${left} s left"; continue; fi
             timeout "$left" python3 -m grader selftest --group hostile_gpu --device cuda 2>&1 \
               | tee "$OUT/selftest-hostile_gpu.txt" ;;
    examples) grade examples/triton triton-1
              python3 bench/fidelity.py "$OUT/report-triton-1.json" --json "$OUT/fidelity.json" \
                2>&1 | tee "$OUT/fidelity.md"
              grade examples/triton triton-2; grade examples/triton triton-3 ;;
    fallback) grade examples/torch-fallback fallback ;;
    triton) grade examples/triton triton-1 ;;
    ahead) for k in $(seq "${AHEAD_ROUNDS:-2}"); do
             grade examples/triton "ahead-off-$k" --start-ahead off
             for d in ${AHEAD_DEPTHS:-2}; do
               grade examples/triton "ahead-on-d$d-$k" --start-ahead on --ahead-depth "$d"
             done; done ;;
    fidelity:*) IFS=: read -r _ name dir only <<<"$step"
                min=20; [ "$dir" = examples/triton ] && min=0
                fopts=(); IFS=, read -ra ps <<<"$only"
                for p in "${ps[@]}"; do fopts+=(--problem "$p"); done
                rep="$OUT/report-$name.json"; [ -f "$rep" ] || rep="$OUT/checkpoint-$name"
                python3 bench/fidelity.py "$rep" "$dir" --min-us $min "${fopts[@]}" \
                  --json "$OUT/fidelity-$name.json" 2>&1 | tee "$OUT/fidelity-$name.md" ;;
    cuda) /usr/bin/time -f "cuda base wall %e s" timeout 300 python3 bench/cuda_base.py \
            --tag grader-cuda-base:host 2>&1 | tee "$OUT/cuda-base.txt"
          grade examples/triton cuda-triton --runtime cuda --cuda-base grader-cuda-base:host
          GRADER_CUDA_BASE=grader-cuda-base:host python3 -m pytest -q -p no:cacheprovider \
            --run-docker --run-gpu tests/gpu -k cuda_runtime 2>&1 | tail -n 15 \
            | tee "$OUT/pytest-gpu-cuda.txt" ;;
    setup) python3 bench/setup_cost.py --json "$OUT/setup-cost.json" 2>&1 \
             | tee "$OUT/setup-cost.txt" ;;
    clocks) python3 bench/clocks.py --json "$OUT/clocks.json" 2>&1 | tee "$OUT/clocks.md" ;;
    beside) python3 bench/beside_noise.py --json "$OUT/beside.json" 2>&1 | tee "$OUT/beside.md" ;;
    ray) left=$(( ${CALL_LIMIT_S:-570} - SECONDS - 15 ))
         if [ ! -f .device/ray.tar.xz ]; then echo "ray: no .device/ray.tar.xz"; continue; fi
         if [ "$left" -lt 60 ]; then echo "ray: skipped, ${left} s left"; continue; fi
         mkdir -p /tmp/ray-site && tar -xJf .device/ray.tar.xz -C /tmp/ray-site \
           --strip-components=1
         PYTHONPATH=/tmp/ray-site:$PYTHONPATH timeout "$left" python3 -m pytest -q -s \
           -p no:cacheprovider --run-docker --run-gpu tests/gpu/test_ray_gpu.py \
           >"$OUT/pytest-ray.txt" 2>&1
         tail -n 15 "$OUT/pytest-ray.txt" ;;
    corpus|corpus:*) cases=(); [ "$step" != corpus ] && IFS=, read -ra cases <<<"${step#corpus:}"
                     left=$(( ${CALL_LIMIT_S:-570} - SECONDS - 15 ))
                     if [ "$left" -lt 60 ]; then echo "$step: skipped, ${left} s left"; continue; fi
                     timeout "$left" python3 bench/honest_corpus.py --device cuda "${cases[@]}" \
                       2>&1 | tee "$OUT/corpus.txt" ;;
    tests|tests:*) sel=(); [ "$step" != tests ] && sel=(-k "${step#tests:}")
                   left=$(( ${CALL_LIMIT_S:-570} - SECONDS - 15 ))
                   if [ "$left" -lt 30 ]; then echo "$step: skipped, ${left} s left"; continue; fi
                   # appended: several tests steps in one call keep every one's output
                   echo "== $step" >>"$OUT/pytest-gpu.txt"
                   timeout "$left" python3 -m pytest -q -p no:cacheprovider --run-docker \
                     --run-gpu tests/gpu "${sel[@]}" >"$OUT/pytest-step.txt" 2>&1
                   cat "$OUT/pytest-step.txt" >>"$OUT/pytest-gpu.txt"
                   tail -n 15 "$OUT/pytest-step.txt"; rm -f "$OUT/pytest-step.txt" ;;
    import:*) kind=${step#import:}
              mkdir -p /tmp/suites && rm -rf "/tmp/suites/$kind-fixture"
              python3 -m grader import "$kind" "tests/fixtures/import/$kind" \
                -o "/tmp/suites/$kind-fixture" 2>&1 | tail -n 2
              grade "tests/fixtures/import/entries/$kind" "import-$kind" --suites /tmp/suites ;;
    suite:*) IFS=: read -r _ dir only name <<<"$step"
             name=${name:-$(basename "$dir")${only:+-${only//,/-}}}
             opts=(); IFS=, read -ra ps <<<"$only"
             for p in "${ps[@]}"; do opts+=(--problem "$p"); done
             grade "$dir" "$name" "${opts[@]}" ;;
    round:*) IFS=: read -r _ suite only n <<<"$step"
             ropts=(); IFS=, read -ra ps <<<"$only"
             for p in "${ps[@]}"; do ropts+=(--problem "$p"); done
             for e in ${ROUND_ENTRIES:-}; do ropts+=(--entry "$e"); done
             kind=round run_round "$(round_name "round-$suite" "$only")" "${n:-3}" --suite "$suite" \
               "${ropts[@]}" ;;
    atrex-entry) atrex_entry ;;
    atrex|atrex:*) IFS=: read -r _ only n <<<"$step"
                   atrex_entry || continue
                   ropts=(); IFS=, read -ra ps <<<"$only"
                   for p in "${ps[@]}"; do ropts+=(--problem "$p"); done
                   kind=atrex run_round "$(round_name round-atrex-bench "$only")" "${n:-2}" \
                     --suite atrex-bench --suites /tmp/suites --entry /tmp/atrex-entry \
                     "${ropts[@]}" ;;
    verify:*) name=${step#verify:}
              left=$(( ${CALL_LIMIT_S:-570} - SECONDS - 20 ))
              if [ "$left" -lt 30 ]; then echo "$step: skipped, ${left} s left"; continue; fi
              timeout "$left" python3 -m grader verify "/tmp/rep-$name/report.json" \
                --secret "$(cat "/tmp/rep-$name/seed.secret")" --bundle "/tmp/$name.tar" \
                --python "$PY" -q 2>&1 | tee "$OUT/verify-$name.txt" ;;
    bare) python3 bench/baseline_bare.py --seeds 1 --budget 1.0 -o "$OUT/bare.json" \
            2>&1 | tail -n 3
          python3 bench/baseline.py --bare "$OUT/bare.json" 2>&1 | tee "$OUT/baseline.md" ;;
    overhead) python3 bench/overhead.py "$OUT"/report-*.json 2>&1 | tee "$OUT/overhead.md" ;;
    expect:*) IFS=: read -r _ name verdict <<<"$step"
              python3 - "$OUT/report-$name.json" "$verdict" <<'PY' || exit 1
import json, sys
report = json.load(open(sys.argv[1]))
wrong = [(p["id"], s["id"], s["verdict"], s["detail"][:200]) for p in report["problems"]
         for s in p["shapes"] if s["verdict"] != sys.argv[2]]
for w in wrong:
    print("unexpected:", *w)
sys.exit(1 if wrong else 0)
PY
              ;;
    *) echo "unknown step: $step" ;;
  esac
done
true

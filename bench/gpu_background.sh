#!/usr/bin/env bash
# One GPU session longer than one device call (docs/benchmarks.md): the lent machine stays warm
# for a short while after each call and keeps its files, and a process that started a session
# of its own runs on between calls. So the first call starts bench/gpu_session.sh in the
# background, and each call (the first too) waits for it, then brings back what it has so far.
#   bash bench/gpu_background.sh start STEP...   gpu_session.sh STEP... in the background
#                                                (BG_LIMIT_S: seconds it may take in all,
#                                                default 1200; its CALL_LIMIT_S), then wait
#   bash bench/gpu_background.sh wait            wait again (the next call, made at once)
# A call waits until the session has ended or WAIT_S seconds (default 560) have passed, then
# copies into $OUT: bg.log (the session's output so far), and session.tgz once it has ended
# or so-far.tgz (its work folder packed as it stands). Every other variable (SERVE,
# ROUND_ENTRIES, AHEAD_DEPTH, ...) goes to gpu_session.sh as for a call of its own. It runs
# from a copy of the tree, so the working tree a later call brings cannot change it mid-way.
set -uo pipefail
BG=/tmp/grader-bg
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
case ${1:-} in
  start)
    shift
    if [ -f "$BG/pid" ] && kill -0 "$(cat "$BG/pid")" 2>/dev/null; then
      echo "a background session runs already (pid $(cat "$BG/pid")): waiting for it"
    else
      rm -rf "$BG" && mkdir -p "$BG/final"
      # from a copy of the tree: the next call's copy of the working tree may replace this one
      cp -a . "$BG/tree" && cd "$BG/tree" || exit 1
      # setsid: a process of a session of its own outlives the call that started it; it
      # writes its own pid (setsid may fork, so $! need not be it)
      CALL_LIMIT_S=${BG_LIMIT_S:-1200} OUT="$BG/final" setsid nohup bash -c \
        'echo $$ >'"$BG/pid"'; exec bash bench/gpu_session.sh "$@"' gpu_session "$@" \
        >"$BG/bg.log" 2>&1 </dev/null &
      for _ in $(seq 50); do [ -s "$BG/pid" ] && break; sleep 0.1; done
      echo "started gpu_session.sh $* (pid $(cat "$BG/pid"), limit ${BG_LIMIT_S:-1200} s)"
    fi ;;
  wait) [ -f "$BG/pid" ] || { echo "no background session on this machine (a fresh one?)"; exit 1; } ;;
  *) echo "usage: gpu_background.sh start STEP... | wait"; exit 2 ;;
esac
pid=$(cat "$BG/pid")
while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "${WAIT_S:-560}" ]; do sleep 2; done
cp "$BG/bg.log" "$OUT/bg.log"
if [ -f "$BG/final/session.tgz" ]; then
  cp "$BG/final/session.tgz" "$OUT/session.tgz"
  echo "== the background session has ended"
else
  tar -czf "$OUT/so-far.tgz" -C /tmp/session-out . 2>/dev/null
  echo "== the background session runs on: call 'gpu_background.sh wait' within the idle time"
fi
tail -n 40 "$BG/bg.log"

"""What a round costs on this host: `grader round` over N entries, each entry's wall time and
where it went.

    python bench/round_speed.py [--suite llm-inference] [--suites DIR] [-n 3] [--entry DIR ...]
        [--problem P ...] [--device cuda --runtime host --python PY] [--time-limit S]
        [--ahead-depth D] [--serve] [--time-beside auto|on|off] [--prepare]
        [-o ROUND_DIR] [--json FILE] [--progress FILE]

The entries are `--entry` folders (default: the suite's own, in this order: for llm-inference
our Triton solutions then the pure-PyTorch baseline, for demo the two examples), repeated
until there are N; a repeated folder is graded again under another name (a copy). The first
entry computes the round's references; every later one reuses them (docs/rounds.md), so the
first and the later entries' times are the two parts of a round's cost (docs/benchmarks.md,
"The cost of a round"). With `--prepare` the round is committed and its references computed
first (`grader round prepare`), timed apart: every entry then grades as a later one.
`--suites DIR` finds a suite outside the checkout (an import under
/tmp/suites: `grader round --suites`).

Per entry: its wall time (the outcome's: intake to report), and from its report's problems
(`phases_s`, host clocks; docs/architecture.md), summed over its problems: images, the
reference containers (start to exit; zero for a batch taken from the round's cache) and
their input drawing, the entry containers (start to exit) and what of them the harness did
not count (the container's start, Python's and the cold `import torch`), the entry's wait
for its inputs, its own module's import (a standby's imports, when started ahead), the timed
loops (`timing.loop_s`), the host's judging, and the batches whose reference it computed or
reused. The parts overlap (reference and entry run side by side; containers start ahead), so
they do not sum to the wall. Then each entry's slowest problems, with their wall seconds and
verdicts: where a whole suite's time went, and what an entry cut short had reached.

Where one folder is graded more than once (`-n 2` with one `--entry`), the per-shape CV of the
timed median across those gradings: issue 32 asks that a faster round keep the stability of
timings, and a round of one entry twice measures both in one run.

`--time-limit` stops the round (SIGTERM, then SIGKILL, its whole process group) when it has
run that long, as SIGUSR1 sent to this script does at once, and still prints what was
measured: the entries finished, and the problems
the entry cut short had finished (from its checkpoint). The targets (on one H200: for the whole
llm-inference suite the first entry in 300 s or less, every later one in 180 s or less, issue
22; for all of Atrex-Bench imported as `atrex-bench`, every later entry in 600 s or less,
issue 32) are judged only for a run of the whole suite on a GPU; any other run prints its
figures as information.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader.grading.checkpoint import CHECKPOINT_DIR, Finished
from grader.grading.phases import AHEAD_PHASES, HARNESS_PHASES
from grader.model.results import ProblemResult
from grader.paths import REPO
from grader.round.model import Outcome
from grader.round.store import RoundDir

DEFAULT_ENTRIES = {"llm-inference": ("solutions/llm-inference", "solutions/llm-inference-torch"),
                   "demo": ("examples/triton", "examples/torch-fallback")}
# (first, later) entry seconds on one H200 for the whole suite; None: no target (issue 32
# sets none for Atrex-Bench's first entry).
TARGETS: dict[str, tuple[float | None, float]] = {"llm-inference": (300.0, 180.0),
                                                  "atrex-bench": (None, 600.0)}
PARTS = ("image", "ref_container", "ref_inputs", "ref_topup", "ref_outputs", "ref_keep",
         "entry_container", "entry_start", "entry_wait", "entry_import", "timed", "judge")


@dataclass(kw_only=True)
class EntryCost:
    name: str
    status: str  # graded | failed | cut short (the time limit) | not started
    wall_s: float | None  # the outcome's; None when cut short
    problems: int = 0
    shapes: int = 0
    refs_computed: int = 0
    refs_reused: int = 0
    parts: dict[str, float] = field(default_factory=dict)
    # each problem's wall seconds (its first batch's start to its judging's end: a problem's
    # judging runs beside the next ones) and its verdict, slowest first
    by_problem: list[tuple[str, float, str]] = field(default_factory=list)


@dataclass(kw_only=True)
class Prepare:
    """`grader round commit` then `grader round prepare`, before the round's entries."""

    wall_s: float  # both commands
    exit: int | None  # None: stopped
    stopped: str | None = None
    batches: dict[str, int] = field(default_factory=dict)  # by status (prepared.json)
    bytes: dict[str, int] = field(default_factory=dict)  # the references' folders, by status
    by_problem_s: dict[str, float] = field(default_factory=dict)  # reference wall per problem
    not_kept: list[str] = field(default_factory=list)  # "problem: status: detail"


def run_prepare(commit: list[str], prepare: list[str], out: Path, limit_s: float | None,
                progress: Path | None) -> Prepare:
    """Commit the round in `out` and prepare its references, within `limit_s` in all."""
    t0 = time.monotonic()
    for cmd in (commit, prepare):
        print("$ " + " ".join(cmd), flush=True)
        left = None if limit_s is None else max(limit_s - (time.monotonic() - t0), 1.0)
        rc, _, stopped = run_round(cmd, left, progress if cmd is prepare else None)
        if rc != 0:
            break
    got = Prepare(wall_s=time.monotonic() - t0, exit=rc, stopped=stopped)
    record = RoundDir(out).prepared()
    if record is not None:
        for b in record.batches:
            got.batches[b.status] = got.batches.get(b.status, 0) + 1
            got.bytes[b.status] = got.bytes.get(b.status, 0) + b.bytes
            got.by_problem_s[b.problem] = got.by_problem_s.get(b.problem, 0.0) + b.wall_s
            if b.status in ("not kept", "failed"):
                got.not_kept.append(f"{b.problem}: {b.status}: {b.detail}")
    return got


def prepare_line(p: Prepare) -> str:
    state = f"stopped {p.stopped}" if p.stopped else f"exit {p.exit}"
    batches = ", ".join(f"{n} {s} ({p.bytes.get(s, 0) / 1e9:.1f} GB)"
                        for s, n in p.batches.items()) or "no record"
    slow = sorted(p.by_problem_s.items(), key=lambda kv: -kv[1])[:5]
    return (f"prepare: {p.wall_s:.1f} s ({state}); batches: {batches}; slowest: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in slow)
            + "".join(f"\n  {line}" for line in p.not_kept))


def problem_parts(p: ProblemResult) -> dict[str, float]:
    ph = p.phases_s
    timed = sum(s.timing.loop_s for s in p.shapes
                if s.timing is not None and s.timing.loop_s is not None)
    counted = sum(ph.get(f"entry.{k}", 0.0) for k in HARNESS_PHASES["entry"]
                  if k not in AHEAD_PHASES["entry"])
    return {"image": ph.get("image", 0.0), "ref_container": ph.get("reference", 0.0),
            "ref_inputs": ph.get("reference.inputs", 0.0),
            # the checked timed calls a loop reached beyond what the reference computed first
            "ref_topup": ph.get("reference_topup", 0.0),
            # a light-kept batch's correctness outputs computed again after the entry
            "ref_outputs": ph.get("reference_outputs", 0.0),
            # copying a computed reference into the round's store, on the judging thread
            "ref_keep": ph.get("reference_keep", 0.0),
            "entry_container": ph.get("entry", 0.0),
            "entry_start": max(ph.get("entry", 0.0) - counted, 0.0),
            "entry_wait": ph.get("entry.job_wait", 0.0),
            "entry_import": ph.get("entry.standby") or ph.get("entry_import", 0.0),
            "timed": timed, "judge": ph.get("judge", 0.0)}


def _checkpointed(rd: RoundDir, name: str) -> list[ProblemResult]:
    found = []
    for path in sorted((rd.entry_dir(name) / CHECKPOINT_DIR / "problems").glob("*.json")):
        try:
            found.append(Finished.from_json(path.read_text()).result)
        except (OSError, ValueError):
            continue  # written whole or not at all; a stray file says nothing
    return found


def entry_costs(rd: RoundDir) -> list[EntryCost]:
    """Each entry of the round folder, in grading order, with what it cost so far."""
    out = []
    for e in rd.load_manifest().entries:
        if e.refused:
            out.append(EntryCost(name=e.name, status=f"refused: {e.refused}", wall_s=None))
            continue
        outcome: Outcome | None = rd.outcome(e.name)
        rep = rd.report(e.name) if outcome and outcome.status == "graded" else None
        problems = rep.problems if rep is not None else _checkpointed(rd, e.name)
        status = (outcome.status if outcome is not None
                  else "cut short" if problems or rd.entry_dir(e.name).exists()
                  else "not started")
        cost = EntryCost(name=e.name, status=status,
                         wall_s=outcome.wall_s if outcome is not None else None,
                         problems=len(problems), shapes=sum(len(p.shapes) for p in problems))
        for p in problems:
            for k, v in problem_parts(p).items():
                cost.parts[k] = cost.parts.get(k, 0.0) + v
        cost.by_problem = sorted(((p.id, p.wall_s or 0.0, p.verdict.value) for p in problems),
                                 key=lambda row: -row[1])
        if outcome is not None:
            cost.refs_computed = sum(1 for u in outcome.references if u.computed)
            cost.refs_reused = sum(1 for u in outcome.references if not u.computed)
        out.append(cost)
    return out


def table(costs: list[EntryCost]) -> list[str]:
    head = ["entry", "status", "wall s", "problems", "shapes", "refs computed/reused", *PARTS]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for c in costs:
        wall = "-" if c.wall_s is None else f"{c.wall_s:.1f}"
        rows.append(f"| {c.name} | {c.status} | {wall} | {c.problems} | {c.shapes} | "
                    f"{c.refs_computed}/{c.refs_reused} | "
                    + " | ".join(f"{c.parts.get(k, 0.0):.1f}" for k in PARTS) + " |")
    return rows


def slowest_lines(costs: list[EntryCost], most: int = 8) -> list[str]:
    """Each entry's slowest problems: where a whole suite's time went, and what an entry cut
    short had reached."""
    return [f"{c.name}: slowest of {len(c.by_problem)} problems: " + ", ".join(
                f"{pid} {wall:.1f} s ({verdict})" for pid, wall, verdict in c.by_problem[:most])
            for c in costs if c.by_problem]


def summary(costs: list[EntryCost], *, whole_suite_on_gpu: bool,
            suite: str = "llm-inference", prepare: Prepare | None = None) -> list[str]:
    """First and later entries against the suite's targets, and the round's cost model. After
    `prepare` every entry grades on kept references, as a later entry does: all are later."""
    graded = [c for c in costs if c.status == "graded" and c.wall_s is not None]
    if not graded:
        return ["no entry finished: nothing to compare with the targets"]
    first = graded[0] if prepare is None else None
    later = [c.wall_s for c in graded[0 if first is None else 1:] if c.wall_s is not None]
    if first is not None:
        lines = [f"first entry ({first.name}): {first.wall_s:.1f} s"]
        start = f"{first.wall_s:.1f} + (N - 1)"
    else:
        assert prepare is not None
        lines = [f"references prepared before the entries: {prepare.wall_s:.1f} s"]
        start = f"{prepare.wall_s:.1f} + N"
    if later:
        lines.append(f"later entries ({len(later)}): median {statistics.median(later):.1f} s, "
                     f"max {max(later):.1f} s")
        lines.append(f"one GPU, N entries: about {start} x {statistics.median(later):.1f} s")
    target = TARGETS.get(suite)
    if whole_suite_on_gpu and target is not None:
        target_first, target_later = target
        if target_first is not None and first is not None:
            lines.append(f"target first <= {target_first:.0f} s: "
                         + ("met" if (first.wall_s or 0) <= target_first else "NOT met"))
        ok_later = bool(later) and max(later) <= target_later
        lines.append(f"target later <= {target_later:.0f} s: "
                     + ("met" if ok_later else "NOT met" if later else "no later entry"))
    else:
        lines.append("(the targets, " + "; ".join(
            f"{s}: " + (f"first <= {f:.0f} s and " if f is not None else "")
            + f"later <= {lt:.0f} s" for s, (f, lt) in TARGETS.items())
            + ", are for the whole suite on one H200: not judged for this run)")
    return lines


def shape_medians(rd: RoundDir, name: str) -> dict[tuple[str, str], float]:
    """The timed median of each shape an entry graded: from its report, or from what its
    checkpoint holds when it was cut short."""
    rep = rd.report(name)
    problems = rep.problems if rep is not None else _checkpointed(rd, name)
    return {(p.id, s.id): s.timing.median_us for p in problems for s in p.shapes
            if s.timing is not None}


@dataclass(kw_only=True)
class Spread:
    """The per-shape CV of the median across the gradings of one entry folder."""
    source: str
    gradings: int
    shapes: int
    median_cv: float
    p90_cv: float
    max_cv: float
    worst: list[tuple[str, str, list[float]]]  # problem, shape, the medians (µs)


def spreads(rd: RoundDir, worst: int = 5) -> list[Spread]:
    """For each entry folder graded more than once in the round, the CV (sample stdev over
    mean) of each shape's median across its gradings, over the shapes every one of them
    timed."""
    by_source: dict[str, list[str]] = {}
    for e in rd.load_manifest().entries:
        if not e.refused:
            by_source.setdefault(e.source, []).append(e.name)
    out = []
    for source, names in by_source.items():
        if len(names) < 2:
            continue
        medians = [shape_medians(rd, n) for n in names]
        common = set.intersection(*(set(m) for m in medians))
        cvs = []
        for key in sorted(common):
            vals = [m[key] for m in medians]
            mean = statistics.fmean(vals)
            cvs.append((statistics.stdev(vals) / mean if mean > 0 else 0.0, key, vals))
        if not cvs:
            continue
        cvs.sort(key=lambda c: c[0])
        ranked = [c[0] for c in cvs]
        out.append(Spread(source=source, gradings=len(names), shapes=len(cvs),
                          median_cv=statistics.median(ranked),
                          p90_cv=ranked[min(len(ranked) - 1, int(0.9 * len(ranked)))],
                          max_cv=ranked[-1],
                          worst=[(k[0], k[1], v) for _cv, k, v in reversed(cvs[-worst:])]))
    return out


def spread_lines(found: list[Spread]) -> list[str]:
    lines = []
    for s in found:
        lines.append(f"per-shape CV of the median across the {s.gradings} gradings of "
                     f"{s.source}: {s.shapes} shapes, median {s.median_cv:.2%}, 90th "
                     f"percentile {s.p90_cv:.2%}, max {s.max_cv:.2%}")
        lines += [f"  {p}/{sh}: " + " / ".join(f"{v:.2f}" for v in vals) + " µs"
                  for p, sh, vals in s.worst]
    return lines


def run_round(cmd: list[str], limit_s: float | None,
              progress: Path | None = None) -> tuple[int | None, float, str | None]:
    """The round's exit status (None when stopped), its wall time, and what stopped it (the
    time limit, or SIGUSR1 sent to this script: a test stops the round at a point of the
    round's own, not after a time that depends on how fast the host is). Stopped with SIGINT
    first, so that the grader's `finally` blocks remove its containers; what a kill leaves
    (a grader killed mid-way) is reaped as `grader doctor --reap` does, so that no container
    of the round runs on after this script. `progress`: the round's stderr goes there."""
    asked = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: asked.set())
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        err = stack.enter_context(progress.open("w")) if progress is not None else None
        proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stderr=err)
    while True:
        try:
            rc = proc.wait(timeout=0.2)
            return rc, time.monotonic() - t0, None
        except subprocess.TimeoutExpired:
            pass
        if asked.is_set():
            why = "on request (SIGUSR1)"
            break
        if limit_s is not None and time.monotonic() - t0 >= limit_s:
            why = f"at the time limit ({limit_s:.0f} s)"
            break
    wall = time.monotonic() - t0
    for sig, grace in ((signal.SIGINT, 20), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # it ended meanwhile
            pass
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    from grader.sandbox.docker_engine import get_engine
    from grader.sandbox.runs import reap_dead

    print(f"stopped; left by the round and removed: {reap_dead(get_engine().reap)}")
    return None, wall, why


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="demo")
    ap.add_argument("--suites", type=Path, default=None,
                    help="a folder holding the suite (grader round --suites)")
    ap.add_argument("-n", "--entries", type=int, default=3, help="entries in the round")
    ap.add_argument("--entry", action="append", default=[], type=Path,
                    help="a submission folder (repeatable; default: the suite's own)")
    ap.add_argument("--problem", action="append", default=[])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--runtime", choices=("cpu", "cuda", "host"), default=None,
                    help="default: cpu on the CPU, host on a GPU")
    ap.add_argument("--python", default=None)
    ap.add_argument("--time-limit", type=float, default=None, metavar="S",
                    help="stop the round after S seconds and print what was measured")
    ap.add_argument("-o", "--out", type=Path, default=None,
                    help="the round folder (default: a fresh one under $TMPDIR)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--progress", type=Path, default=None,
                    help="the round's progress, one JSON object a line, written here as it "
                    "goes (where a problem cut short spent its time)")
    ap.add_argument("--serve", action="store_true",
                    help="grader round --serve: every entry's batches in serving containers")
    ap.add_argument("--ahead-depth", type=int, default=None,
                    help="grader round --ahead-depth (default: the grader's)")
    ap.add_argument("--time-beside", choices=("auto", "on", "off"), default=None,
                    help="grader round --time-beside (default: the grader's)")
    ap.add_argument("--prepare", action="store_true",
                    help="commit the round and compute its references first (grader round "
                    "commit, grader round prepare): every entry then grades as a later one")
    args = ap.parse_args(argv)
    suite_name = Path(args.suite).name  # --suite may be a folder, as grader round takes it
    folders = args.entry or [REPO / e for e in DEFAULT_ENTRIES.get(suite_name, ())]
    if not folders:
        ap.error(f"no default entries for suite {args.suite!r}: pass --entry DIR")
    entries = [str(folders[i % len(folders)]) for i in range(args.entries)]
    out = args.out or Path(os.environ.get("TMPDIR", "/tmp")) / f"round-speed-{os.getpid()}"
    runtime = args.runtime or ("cpu" if args.device == "cpu" else "host")
    common = ["--suite", args.suite, "-o", str(out), "--device", args.device,
              "--runtime", runtime, *(w for p in args.problem for w in ("--problem", p))]
    if args.suites is not None:
        common += ["--suites", str(args.suites)]
    if args.python:
        common += ["--python", args.python]
    log = ["--log-format", "json"] if args.progress else ["-q"]
    grader = [sys.executable, "-m", "grader", "round"]
    cmd = [*grader, *entries, *common, "--format", "json", *log]
    if args.ahead_depth is not None:
        cmd += ["--ahead-depth", str(args.ahead_depth)]
    if args.serve:
        cmd += ["--serve"]
    if args.time_beside is not None:
        cmd += ["--time-beside", args.time_beside]
    limit = args.time_limit
    prepare: Prepare | None = None
    if args.prepare:
        prepare = run_prepare([*grader, "commit", *common, "-q"],
                              [*grader, "prepare", *common, *log], out, limit,
                              args.progress.with_suffix(".prepare.jsonl")
                              if args.progress else None)
        print(prepare_line(prepare), flush=True)
        if prepare.stopped or prepare.exit != 0:
            if args.json is not None:
                args.json.write_text(json.dumps({"suite": args.suite, "prepare": asdict(prepare)},
                                                indent=1) + "\n")
            return 0 if prepare.stopped else 1
        limit = None if limit is None else max(limit - prepare.wall_s, 1.0)
    print("$ " + " ".join(cmd), flush=True)
    rc, wall, stopped = run_round(cmd, limit, args.progress)
    rd = RoundDir(out)
    if not rd.manifest_file.is_file():
        print(f"the round wrote no manifest (exit {rc}, {wall:.1f} s): nothing measured")
        return 1
    costs = entry_costs(rd)
    print()
    print(f"round: {len(costs)} entries, {wall:.1f} s"
          + (f", stopped {stopped}" if stopped else f", exit {rc}"))
    print(f"host: {os.cpu_count()} cores; device {args.device}, runtime {runtime}; suite "
          f"{args.suite}" + (f", problems {', '.join(args.problem)}" if args.problem
                             else ", every problem"))
    print()
    print("\n".join(table(costs)))
    print()
    if slow := slowest_lines(costs):
        print("\n".join(slow))
        print()
    whole = args.device == "cuda" and suite_name in TARGETS and not args.problem
    notes = summary(costs, whole_suite_on_gpu=whole, suite=suite_name, prepare=prepare)
    print("\n".join(notes))
    spread = spreads(rd)
    if spread:
        print()
        print("\n".join(spread_lines(spread)))
    if args.json is not None:
        args.json.write_text(json.dumps({
            "suite": args.suite, "device": args.device, "runtime": runtime,
            "problems": args.problem, "round_wall_s": wall, "stopped": stopped is not None,
            "exit": rc, "prepare": asdict(prepare) if prepare else None,
            "entries": [asdict(c) for c in costs], "summary": notes,
            "spreads": [asdict(s) for s in spread]}, indent=1) + "\n")
    return 0 if stopped or rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Where the wall time of grading went, per problem, from one or more report.json files.

    python bench/overhead.py REPORT.json [REPORT.json ...] [--import-s 5.0]

Per problem (host clock, `phases_s` of the report): image work, the reference container (start
to exit), the entry container, the host's judging (loading and comparing outputs, reading the
traces), the entry's import as it reported it, and the timed work (the
timed loops' own wall time, `timing.loop_s`; for reports written before it was recorded, an
estimate: samples x median device time). Then the overhead (total - timed work) against the
target of docs/benchmarks.md: 1.5 x (one cold `import torch` + the timed work), with the cold
import taken from --import-s (default: the median entry import of the reports). Last, how the
total grows: a least-squares fit of the problem's total against its number of shapes.
A second table splits each container's time as its harness counted it (`phases_s`
"reference.*" and "entry.*": import, making inputs, the reference's calls, the entry's job wait,
warm-up (compilation), the device profiler's start and stop, traced calls, tensor loads and
saves, timed loops); what is left of the container's wall time is the container's own start
and stop and Python's start. The walls leave out the time a container was held by the other
(reference and entry side by side, or the entry's timed loops waiting for a standby beside):
the "held" column, with the part of the entry's prepare, job wait and timing wait that fell in
it left out too. They also leave out what a container did before its release when it was
started ahead, beside the batch before (grader/grading/worker.py): its cold imports
("standby"), the entry's CUDA context and profiler set-up ("standby_prepare", in place of its
"prepare") and its wait at the gate ("gate"), the last columns. A problem's total then counts
from its first batch's start; the run's wall time per problem graded is the steady cost.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from grader.grading.phases import AHEAD_PHASES, HARNESS_PHASES
from grader.model.results import ProblemResult, Report


def timed_work_s(problem: ProblemResult) -> tuple[float, bool]:
    """Seconds of timed loops, and whether any of it is an estimate."""
    total, estimated = 0.0, False
    for s in problem.shapes:
        if s.timing is None:
            continue
        if s.timing.loop_s is not None:
            total += s.timing.loop_s
        else:
            total += s.timing.samples * s.timing.median_us * 1e-6
            estimated = True
    return total, estimated


def rows(reports: list[Report], import_s: float | None) -> tuple[list[str], list[str]]:
    problems = [p for r in reports for p in r.problems if p.wall_s is not None]
    # The entry's cold imports: made ahead (entry.standby) when its containers started
    # beside the batch before, else its import as it reported it.
    imports = [p.phases_s.get("entry.standby") or p.phases_s["entry_import"] for p in problems
               if "entry_import" in p.phases_s]
    cold = import_s if import_s is not None else (statistics.median(imports) if imports else 0.0)
    table = ["| problem | shapes | total | image | reference | entry | judge | import | timed | "
             "overhead | target | overhead / target |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    fit: list[tuple[int, float]] = []
    for p in problems:
        timed, estimated = timed_work_s(p)
        total = p.wall_s or 0.0
        target = 1.5 * (cold + timed)
        ph = p.phases_s
        cells = [f"{ph.get(k, 0.0):.2f}"
                 for k in ("image", "reference", "entry", "judge", "entry_import")]
        table.append(f"| {p.id} | {len(p.shapes)} | {total:.2f} | {' | '.join(cells)} | "
                     f"{timed:.2f}{'*' if estimated else ''} | {total - timed:.2f} | "
                     f"{target:.2f} | {(total - timed) / target if target else float('inf'):.2f} |")
        fit.append((len(p.shapes), total))
    notes = [f"cold import taken as {cold:.2f} s; * = timed work estimated from the samples"]
    if len({n for n, _ in fit}) > 1:
        xs, ys = [n for n, _ in fit], [t for _, t in fit]
        slope, intercept = statistics.linear_regression(xs, ys)
        notes.append(f"total ≈ {intercept:.2f} s + {slope:.2f} s per shape "
                     f"({len(fit)} problems)")
    if problems:
        notes.append(f"per problem: median {statistics.median(p.wall_s or 0 for p in problems):.2f}"
                     f" s over {len(problems)} problems")
    for r in reports:
        if r.wall_s is not None and r.problems:
            notes.append(f"run: {r.wall_s:.2f} s for {len(r.problems)} problems, "
                         f"{r.wall_s / len(r.problems):.2f} s a problem")
    return table, notes


REF_SPLIT = tuple(k for k in HARNESS_PHASES["reference"] if k not in AHEAD_PHASES["reference"])
ENTRY_SPLIT = tuple(k for k in HARNESS_PHASES["entry"] if k not in AHEAD_PHASES["entry"])
# The entry's phases that may run while the host holds it (waiting for its job, or, beside a
# standby, with its timed loops waiting for GO), in the order its held time is taken from.
HELD = ("prepare", "job_wait", "timing_wait")
ROLE = {"reference": "ref", "entry": "entry"}


def split_rows(reports: list[Report]) -> list[str]:
    """Per problem: each container's wall time, its harness's phases, and the rest."""
    head = (["problem", "ref wall"] + [f"ref {k}" for k in REF_SPLIT] + ["ref rest", "entry wall",
            "entry import"] + [f"entry {k}" for k in ENTRY_SPLIT] + ["entry rest", "held"]
            + [f"{ROLE[role]} {k}" for role, ks in AHEAD_PHASES.items() for k in ks])
    table = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for p in (p for r in reports for p in r.problems if p.wall_s is not None):
        ph = p.phases_s
        ref = [ph.get(f"reference.{k}", 0.0) for k in REF_SPLIT]
        # The walls leave out the time each container was held by the other (held_s); so do
        # the entry's phases that run while it is held, as far as they fall in it.
        held = ph.get("entry_held", 0.0)
        own = max(sum(ph.get(f"entry.{k}", 0.0) for k in HELD) - held, 0.0)
        counted = {}
        for k in HELD:
            counted[k] = min(ph.get(f"entry.{k}", 0.0), own)
            own -= counted[k]
        ent = [ph.get("entry_import", 0.0)] + [
            counted[k] if k in HELD else ph.get(f"entry.{k}", 0.0) for k in ENTRY_SPLIT]
        ref_wall, ent_wall = ph.get("reference", 0.0), ph.get("entry", 0.0)
        cells = [ref_wall, *ref, ref_wall - sum(ref), ent_wall, *ent, ent_wall - sum(ent)]
        cells.append(held + ph.get("reference_held", 0.0))
        cells += [ph.get(f"{role}.{k}", 0.0) for role, ks in AHEAD_PHASES.items() for k in ks]
        table.append(f"| {p.id} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--import-s", type=float, default=None,
                    help="seconds of one cold `import torch` on the host measured")
    args = ap.parse_args()
    reports = [Report.model_validate_json(p.read_text()) for p in args.reports]
    table, notes = rows(reports, args.import_s)
    print("\n".join(table))
    print()
    print("\n".join(notes))
    print()
    print("\n".join(split_rows(reports)))


if __name__ == "__main__":
    main()

"""The baseline table of a suite: per problem, the roofline fraction of our Triton solutions, of
a pure-PyTorch entry and of the reference as-is, on a GPU.

    python bench/baseline.py --bare RESULTS.json [...]               # from bench/baseline_bare.py
    python bench/baseline.py --solutions R.json [...] --torch T.json [...]   # from graded reports
    python bench/baseline.py --bare B.json --solutions R.json CHECKPOINT_DIR ...   # both
    options: [--suite problem_bundles/llm-inference] [--hardware h200]

Per shape, fraction = T_roofline / T_measured (median device time of the timed loop); per
problem, the median over its scored (non-smoke) shapes, the rule the scores use. Unlike S, the
fractions ignore the verdict (the PyTorch entry is graded `fallback`, so its S is 0): they say
how close to the chip each implementation runs. From graded reports, the reference column is
the reference container's own timing, which every grading records; several reports per entry
are merged (a suite graded in parts; a checkpoint folder stands for a grading cut short). Graded
figures replace bare ones for the same problem and column; where both kinds are given, a column
still from the bare run says "(bare)". Prints a Markdown table, then every fraction above 1
(impossible: a wrong roofline or a broken timer) or below 0.01 (a roofline that is absurdly
generous, or an implementation that is absurdly slow) among the shapes that are not launch-bound;
launch-bound shapes (a roofline under the profile's measured launch floor, 4.3 µs on the H200:
scoring/roofline.py) are listed apart: their fractions measure launch latency, not the
roofline's sanity (make_weights.py gives them weights in proportion to the same tiny roofline
times).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from grader.formats.problem import Problem
from grader.grading.checkpoint import Finished
from grader.model.results import ProblemResult, Report
from grader.model.scores import Roofline
from grader.scoring.hardware import HardwareProfile, load_hardware
from grader.scoring.roofline import roofline
from grader.suite.load import load_suite

ABSURDLY_SMALL = 0.01
COLUMNS = ("triton", "torch", "reference")
# problem -> column -> shape -> fraction
Table = dict[str, dict[str, dict[str, float]]]


def _roofline(problem: Problem, shape_id: str, profile: HardwareProfile) -> Roofline:
    return roofline(problem, next(s for s in problem.shapes if s.id == shape_id), profile)


def _fraction(problem: Problem, shape_id: str, profile: HardwareProfile, median_us: float
              ) -> float:
    return _roofline(problem, shape_id, profile).t_s / (median_us * 1e-6)


def graded_problems(path: Path) -> list[ProblemResult]:
    """The problems of a report.json, or of a run's checkpoint folder (`OUT/.checkpoint/
    problems`: what a grading cut short had finished)."""
    if path.is_dir():
        return [Finished.from_json(f.read_text()).result for f in sorted(path.glob("*.json"))]
    return list(Report.model_validate_json(path.read_text()).problems)


def from_reports(graded: list[ProblemResult], column: str, problems: dict[str, Problem],
                 profile: HardwareProfile, table: Table, notes: dict[str, set[str]],
                 bare: set[tuple[str, str]]) -> None:
    """Fill `column` (and the reference column) from graded problems, in place of any bare
    figures for them; notes get the verdicts."""
    for pr in graded:
        cols = table.setdefault(pr.id, {c: {} for c in COLUMNS})
        for col in (column, "reference"):  # graded figures replace the bare run's, failures too
            notes[pr.id] = {n for n in notes.get(pr.id, set())
                            if not n.startswith(f"{col} failed on ")}
            if (pr.id, col) in bare:
                bare.discard((pr.id, col))
                cols[col].clear()
        for sr in pr.shapes:
            if sr.smoke:
                continue
            for col, timing in ((column, sr.timing), ("reference", sr.reference_timing)):
                if timing is not None and timing.median_us > 0:
                    cols[col][sr.id] = _fraction(problems[pr.id], sr.id, profile,
                                                 timing.median_us)
            notes.setdefault(pr.id, set()).add(f"{column} {sr.verdict.value}")


def from_bare(paths: list[Path], problems: dict[str, Problem], profile: HardwareProfile,
              table: Table, notes: dict[str, set[str]], bare: set[tuple[str, str]]) -> None:
    """Fill every column from bench/baseline_bare.py's results; notes get the failures, `bare`
    the (problem, column) cells filled."""
    for path in paths:
        for row in json.loads(path.read_text())["shapes"]:
            cols = table.setdefault(row["problem"], {c: {} for c in COLUMNS})
            for col in COLUMNS:
                got = row.get(col, {})
                if "median_us" in got:
                    cols[col][row["shape"]] = _fraction(problems[row["problem"]], row["shape"],
                                                        profile, got["median_us"])
                    bare.add((row["problem"], col))
                if got.get("correct") is False or "error" in got:
                    notes.setdefault(row["problem"], set()).add(f"{col} failed on {row['shape']}")


def render(table: Table, notes: dict[str, set[str]], problems: dict[str, Problem],
           profile: HardwareProfile, bare: set[tuple[str, str]]) -> str:
    """`bare`: the (problem, column) cells to mark as still from the bare run."""
    def cell(pid: str, col: str) -> str:
        values = table[pid][col]
        if not values:
            return "–"
        mark = " (bare)" if (pid, col) in bare else ""
        return f"{statistics.median(values.values()):.3f}{mark}"

    lines = ["| problem | shapes | Triton solution | PyTorch entry | reference | notes |",
             "| --- | --- | --- | --- | --- | --- |"]
    flagged, launch_bound = [], []
    for pid in sorted(table):
        cols = table[pid]
        n = max(len(v) for v in cols.values())
        lines.append(f"| {pid} | {n} | {cell(pid, 'triton')} | {cell(pid, 'torch')} | "
                     f"{cell(pid, 'reference')} | {', '.join(sorted(notes.get(pid, ())))} |")
        for shape in sorted({sh for col in COLUMNS for sh in cols[col]}):
            r = _roofline(problems[pid], shape, profile)
            got = {col: cols[col][shape] for col in COLUMNS if shape in cols[col]}
            text = (f"  {pid}/{shape} (T_roofline {r.t_s * 1e6:.2f} µs): "
                    + ", ".join(f"{col} {f:.4f}" for col, f in got.items()))
            if any(f > 1.0 for f in got.values()) or (
                    r.regime != "launch" and any(f < ABSURDLY_SMALL for f in got.values())):
                flagged.append(text)
            elif r.regime == "launch":
                launch_bound.append(text)
    lines += ["", "outside (0.01, 1]:" if flagged else "every fraction in (0.01, 1] (shapes not "
              "launch-bound; none above 1 anywhere)", *flagged]
    if launch_bound:
        lines += ["", "launch-bound (T_roofline under the profile's launch floor):",
                  *launch_bound]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bare", nargs="+", type=Path, default=[])
    ap.add_argument("--solutions", nargs="+", type=Path, default=[])
    ap.add_argument("--torch", nargs="+", type=Path, default=[])
    ap.add_argument("--suite", type=Path, default=Path("problem_bundles/llm-inference"))
    ap.add_argument("--hardware", default="h200")
    args = ap.parse_args()
    problems = {pid: b.problem for pid, b in load_suite(args.suite).problems.items()}
    profile = load_hardware(args.hardware)
    table: Table = {}
    notes: dict[str, set[str]] = {}
    bare: set[tuple[str, str]] = set()
    from_bare(args.bare, problems, profile, table, notes, bare)
    for column, paths in (("triton", args.solutions), ("torch", args.torch)):
        graded = [pr for path in paths for pr in graded_problems(path)]
        from_reports(graded, column, problems, profile, table, notes, bare)
    mixed = bool(args.bare and (args.solutions or args.torch))
    print(render(table, notes, problems, profile, bare if mixed else set()))


if __name__ == "__main__":
    main()

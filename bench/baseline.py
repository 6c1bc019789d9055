"""The llm-inference baseline table: per problem, the roofline fraction of our Triton solutions,
of a pure-PyTorch entry and of the reference as-is, from reports graded on a GPU.

    python bench/baseline.py --solutions R1.json [R2.json...] --torch T1.json [T2.json...] \
        [--suite problem_bundles/llm-inference] [--hardware h200]

Several reports per entry are merged (a suite graded in parts, e.g. one report per half of the
problems). Per shape, fraction = T_roofline / T_measured (median of the timed loop); per problem,
the median over its scored (non-smoke) shapes, the rule the scores use. Unlike S, these
fractions ignore the verdict (the PyTorch entry is graded `fallback`, so its S is 0): they say
how close to the chip each implementation runs. The reference column comes from the reference
container's own timings, which every grading records. Prints a Markdown table, then checks that
no fraction exceeds 1 and lists any below 0.01.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from grader.report.model import Report
from grader.scoring.hardware import load_hardware
from grader.scoring.roofline import roofline
from grader.suite import load_suite

ABSURDLY_SMALL = 0.01


def fractions(reports: list[Report], suite_dir: Path, hardware: str
              ) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, set[str]]]:
    """problem -> column ("entry", "reference") -> shape -> fraction; and problem -> the
    verdicts of its scored shapes."""
    suite = load_suite(suite_dir)
    profile = load_hardware(hardware)
    out: dict[str, dict[str, dict[str, float]]] = {}
    verdicts: dict[str, set[str]] = {}
    for rep in reports:
        for pr in rep.problems:
            problem = suite.problems[pr.id].problem
            shapes = {s.id: s for s in problem.shapes}
            cols = out.setdefault(pr.id, {"entry": {}, "reference": {}})
            for sr in pr.shapes:
                if sr.smoke:
                    continue
                t_roof = roofline(problem, shapes[sr.id], profile).t_s
                for col, timing in (("entry", sr.timing), ("reference", sr.reference_timing)):
                    if timing is not None and timing.median_us > 0:
                        cols[col][sr.id] = t_roof / (timing.median_us * 1e-6)
                verdicts.setdefault(pr.id, set()).add(sr.verdict.value)
    return out, verdicts


def _median(values: dict[str, float]) -> float | None:
    return statistics.median(values.values()) if values else None


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solutions", nargs="+", type=Path, required=True)
    ap.add_argument("--torch", nargs="+", type=Path, required=True)
    ap.add_argument("--suite", type=Path, default=Path("problem_bundles/llm-inference"))
    ap.add_argument("--hardware", default="h200")
    args = ap.parse_args()
    load = lambda paths: [Report.model_validate_json(p.read_text()) for p in paths]  # noqa: E731
    sol, verdicts = fractions(load(args.solutions), args.suite, args.hardware)
    tor, _ = fractions(load(args.torch), args.suite, args.hardware)
    print("| problem | shapes | Triton solution | verdict | PyTorch entry | reference |")
    print("| --- | --- | --- | --- | --- | --- |")
    flagged = []
    for pid in sorted(set(sol) | set(tor)):
        s, t = sol.get(pid, {}), tor.get(pid, {})
        n = len(s.get("entry", {}) or t.get("entry", {}))
        seen = ", ".join(sorted(verdicts.get(pid, ())))
        print(f"| {pid} | {n} | {_fmt(_median(s.get('entry', {})))} | {seen} "
              f"| {_fmt(_median(t.get('entry', {})))} "
              f"| {_fmt(_median(s.get('reference', {}) or t.get('reference', {})))} |")
        for col, cols in (("solution", s), ("torch", t)):
            for kind in ("entry", "reference"):
                for shape, f in cols.get(kind, {}).items():
                    if f > 1.0 or f < ABSURDLY_SMALL:
                        flagged.append(f"{pid}/{shape} {col}:{kind} {f:.4f}")
    print()
    print("outside (0.01, 1]:" if flagged else "every fraction in (0.01, 1]")
    for line in flagged:
        print("  " + line)


if __name__ == "__main__":
    main()

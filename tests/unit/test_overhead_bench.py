"""bench/overhead.py: the per-problem split of a report's wall time, and its target."""

from __future__ import annotations

import pytest
from suite_checks import load_module
from test_report_render import make_report

from grader.model.results import Timing
from grader.paths import REPO


def _bench():  # type: ignore[no-untyped-def]
    return load_module(REPO / "bench" / "overhead.py", "_test")


def test_split_target_and_fit() -> None:
    bench = _bench()
    rep = make_report(is_performance=True)
    timing = Timing(median_us=100.0, iqr_us=1.0, cv=0.01, samples=20, method="cuda-events",
                    loop_s=0.5)
    problems = []
    for p, (wall, n_shapes) in zip(rep.problems, ((10.0, 1), (14.0, 3)), strict=False):
        shapes = [p.shapes[0].model_copy(update={"id": f"s{i}", "timing": timing})
                  for i in range(n_shapes)]
        problems.append(p.model_copy(update={
            "wall_s": wall, "shapes": shapes,
            "phases_s": {"image": 0.5, "reference": 3.0, "entry": 6.0, "judge": 0.25,
                         "entry_import": 2.0}}))
    rep = rep.model_copy(update={"problems": problems})
    table, notes = bench.rows([rep], None)
    first = [c.strip() for c in table[2].strip("|").split("|")]
    # total 10 s, one shape whose loop took 0.5 s: overhead 9.5 s against 1.5 x (2 + 0.5)
    assert first[1:] == ["1", "10.00", "0.50", "3.00", "6.00", "0.25", "2.00", "0.50", "9.50",
                         "3.75", "2.53"]
    assert notes[0].startswith("cold import taken as 2.00 s")
    assert "total ≈ 8.00 s + 2.00 s per shape (2 problems)" in notes[1]
    # Without loop_s (older reports) the timed work is estimated and marked.
    old = timing.model_copy(update={"loop_s": None})
    assert bench.timed_work_s(problems[0].model_copy(update={"shapes": [
        problems[0].shapes[0].model_copy(update={"timing": old})]})) == (
        pytest.approx(20 * 100e-6), True)


def test_split_leaves_held_time_out_of_the_entrys_phases() -> None:
    """The entry's wall leaves out its held time; so does the split, taking it from the
    phases that run while held (prepare, job wait, timing wait) in that order."""
    bench = _bench()
    rep = make_report(is_performance=True)
    phases = {"reference": 4.0, "entry": 5.0, "entry_import": 1.0, "entry_held": 3.0,
              "reference_held": 0.5, "entry.prepare": 2.0, "entry.job_wait": 1.0,
              "entry.timing_wait": 1.5, "entry.warm": 0.5, "entry.timing": 0.25,
              "entry.standby": 4.0, "entry.standby_prepare": 3.5, "entry.gate": 2.0,
              "reference.inputs": 1.0, "reference.standby": 4.5}
    problem = rep.problems[0].model_copy(update={"wall_s": 9.0, "phases_s": phases})
    table = bench.split_rows([rep.model_copy(update={"problems": [problem]})])
    head = [c.strip() for c in table[0].strip("|").split("|")]
    row = dict(zip(head, (c.strip() for c in table[2].strip("|").split("|")), strict=True))
    # 4.5 s of held-time phases, 3 s of them held: 1.5 s counted, all of it prepare's.
    assert (row["entry prepare"], row["entry job_wait"], row["entry timing_wait"]) == (
        "1.50", "0.00", "0.00")
    assert row["entry rest"] == f"{5.0 - 1.0 - 1.5 - 0.5 - 0.25:.2f}"
    assert row["held"] == "3.50"
    assert (row["entry standby"], row["entry standby_prepare"], row["entry gate"]) == (
        "4.00", "3.50", "2.00")
    assert row["ref standby"] == "4.50" and "ref standby_prepare" not in row
    assert row["ref rest"] == "3.00"

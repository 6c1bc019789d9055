"""Issue 19: no report or checkpoint holds a NaN or an Infinity, so each can always be read
back (`grader report`, `leaderboard`, `rescore`, `--resume`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from grader.grading.checkpoint import Checkpoint, Finished, RunKey
from grader.grading.settings import GradingSettings
from grader.model.results import Comparison, ProblemResult, Timing
from grader.verdicts import Verdict

KEY = RunKey(grader_version="1", bundle_sha256="ab" * 32, suite="demo", suite_version="1",
             settings=GradingSettings(seeds_per_shape=2))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_the_report_model_refuses_non_finite_numbers(bad: float) -> None:
    with pytest.raises(ValidationError):
        Timing(median_us=bad, iqr_us=0.0, cv=0.0, samples=1, method="cuda-events")
    with pytest.raises(ValidationError):
        ProblemResult(id="p", operator="op", verdict=Verdict.PASSED, phases_s={"entry": bad})
    with pytest.raises(ValidationError):
        ProblemResult(id="p", operator="op", verdict=Verdict.PASSED, wall_s=bad)


def test_an_error_beyond_numbers_is_unknown_not_infinite() -> None:
    # The reference's own Inf against a finite output: the host's difference is Inf.
    c = Comparison(max_abs_err=float("inf"), max_rel_err=float("nan"), atol=0.1, rtol=0.1)
    assert c.max_abs_err is None and c.max_rel_err is None
    assert Comparison.model_validate_json(c.model_dump_json()) == c


def test_a_checkpoint_with_a_literal_nan_is_graded_again(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path)
    cp.start(KEY, bytes(32))
    good = Finished(result=ProblemResult(id="ok", operator="op", verdict=Verdict.PASSED,
                                         phases_s={"entry": 1.5}))
    cp.save(good)
    assert "NaN" not in cp.problem_file("ok").read_text()
    data = json.loads(good.to_json())
    data["result"]["id"] = "nan"
    data["result"]["phases_s"]["entry_import"] = float("nan")  # as 4369f62 wrote one
    cp.problem_file("nan").write_text(json.dumps(data))
    assert "NaN" in cp.problem_file("nan").read_text()
    with pytest.raises(ValueError):
        Finished.from_json(cp.problem_file("nan").read_text())
    _, done = Checkpoint(tmp_path).resume(KEY, bytes(32))
    assert sorted(done) == ["ok"]

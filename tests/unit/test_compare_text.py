"""Issue 23, item 6: `grader compare` labels each column with its machine and submission, cuts
no header, runs no text together, and explains how to compare two entries."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from grader.cli.scoring import compare as compare_cmd
from grader.errors import UsageError
from grader.scoring.across import compare, comparison_text
from tests.unit.test_compare import A, B, report


def _named(hardware: str, s: dict[tuple[str, str], float], name: str, sha: str):  # type: ignore[no-untyped-def]
    rep = report(hardware, s, sha=sha)
    return rep.model_copy(update={"submission": rep.submission.model_copy(
        update={"name": name})})


def test_columns_name_machine_and_submission_uncut() -> None:
    reps = [_named("cpu-interpreter", A, "team-alpha-triton-v2", "a" * 64),
            _named("cpu-interpreter", B, "team-beta-baseline", "b" * 64)]
    cmp = compare(reps, allow_mixed=True)
    text = comparison_text(cmp)
    assert "cpu-interpreter#1" in text and "cpu-interpreter#2" in text
    assert "cpu-interprecpu-interpre" not in text
    head = text.splitlines()[3:5]
    assert head[0].split() == ["cpu-interpreter#1", "cpu-interpreter#2"]
    assert head[1].split() == ["problem", "team-alpha-triton-v2", "team-beta-baseline"]
    assert "team-alpha-triton-v2, team-beta-baseline" in text.splitlines()[0]
    assert any("different entries" in n for n in cmp.notes)
    # every row's numbers line up under their headers
    matmul = next(line for line in text.splitlines() if line.startswith("matmul"))
    assert len(matmul) == len(head[0]) == len(head[1])


def test_on_a_narrow_terminal_the_table_folds_and_cuts_nothing() -> None:
    reps = [_named("cpu-interpreter", A, "team-alpha-triton-v2", "a" * 64),
            _named("cpu-interpreter", B, "team-beta-baseline", "b" * 64)]
    text = comparison_text(compare(reps, allow_mixed=True), width=40)
    assert all(len(line) <= 40 for line in text.splitlines())
    assert "…" not in text and "cpu-interprecpu-interpre" not in text  # folded, never cut
    assert "team-alpha-tr" in text and "iton-v2" in text


def test_two_entries_without_the_flag_say_what_to_do() -> None:
    reps = [_named("h200", A, "one", "a" * 64), _named("h200", B, "two", "b" * 64)]
    with pytest.raises(UsageError) as err:
        compare(reps)
    assert "one, two" in err.value.message
    assert "--allow-mixed" in (err.value.hint or "") and "entries" in (err.value.hint or "")
    help_text = CliRunner().invoke(compare_cmd, ["--help"]).output
    assert "two entries" in help_text.replace("\n", " ").replace("  ", " ")

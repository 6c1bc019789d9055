"""Progress lines: stages recorded from the grading loop's plain messages, modes, ETA."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.cli.progress import Terminal, choose_mode, for_cli, human_line, labelled
from grader.grading.progress import Progress

# What the grader says today, in order, for a suite of three problems graded by one worker:
# it takes each next problem (its image) before the last batch of the one before, so that it
# can start that problem's containers beside it (grader/grading/worker.py).
MESSAGES = [
    "runtime image",
    "vector_add: image", "rmsnorm: image", "vector_add: reference and entry (2 cases)",
    "vector_add: done (passed)", "matmul: image", "rmsnorm: reference and entry (4 cases)",
    "rmsnorm: done (passed)", "matmul: reference and entry (4 cases)", "matmul: done (passed)",
]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _progress(mode: str, stream: io.StringIO, clock: FakeClock) -> Progress:
    return Progress(Terminal(mode, stream=stream), clock=clock,  # type: ignore[arg-type]
                    now=lambda: datetime(2026, 1, 5, 10, 0, tzinfo=UTC))


def _drive(p: Progress, clock: FakeClock) -> None:
    p.plan(["vector_add", "rmsnorm", "matmul"])
    for msg in MESSAGES:
        clock.t += 10.0
        p(msg)
    clock.t += 10.0
    p.finish()


@pytest.mark.parametrize(("log_format", "quiet", "tty", "mode"), [
    ("human", False, True, "live"),
    ("human", False, False, "human"),  # piped: plain lines, no escape codes
    ("human", True, True, "off"),
    ("json", False, False, "json"),
    ("json", False, True, "json"),
    ("json", True, False, "off"),
])
def test_mode(log_format: str, quiet: bool, tty: bool, mode: str) -> None:
    stream = Tty() if tty else io.StringIO()
    assert choose_mode(log_format, quiet=quiet, stream=stream) == mode


def test_json_lines_carry_problem_stage_elapsed_eta() -> None:
    out, clock = io.StringIO(), FakeClock()
    _drive(_progress("json", out, clock), clock)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(events) == 1 + len(MESSAGES) + 1
    for ev in events:
        assert {"event", "problem", "stage", "elapsed_s", "eta_s", "ts"} <= set(ev)
        assert ev["ts"] == "2026-01-05T10:00:00Z"
    start, runtime, *stages, finish = events
    assert start["event"] == "start" and start["total"] == 3
    assert runtime["stage"] == "runtime" and runtime["problem"] is None
    assert [(e["problem"], e["stage"]) for e in stages[:4]] == [
        ("vector_add", "image"), ("rmsnorm", "image"), ("vector_add", "reference"),
        ("vector_add", "done")]
    assert stages[3]["done"] == 1
    # No ETA before a problem has finished; then by problems done: 30 s each, 2 left.
    assert all(e["eta_s"] is None for e in stages[:3])
    assert stages[3]["eta_s"] == pytest.approx(60.0)
    assert stages[6]["problem"] == "rmsnorm" and stages[6]["eta_s"] == pytest.approx(30.0)
    assert finish["event"] == "finish" and finish["done"] == 3 and finish["eta_s"] is None
    assert finish["elapsed_s"] == pytest.approx(110.0)


def test_human_lines() -> None:
    out, clock = Tty(), FakeClock()
    _drive(_progress("human", out, clock), clock)
    lines = out.getvalue().splitlines()
    assert lines[2] == "[grader 0:20 0/3 done] vector_add: image"
    assert lines[5] == "[grader 0:50 eta 1:00 1/3 done] vector_add: done (passed)"
    assert lines[-1] == "[grader 1:50] done: 3/3 problem(s)"


def test_off_prints_nothing_but_records() -> None:
    out, clock = io.StringIO(), FakeClock()
    p = _progress("off", out, clock)
    _drive(p, clock)
    assert out.getvalue() == ""
    assert p.events[-1].event == "finish"


def test_structured_keywords_win_and_unknown_prefixes_are_not_problems() -> None:
    out, clock = io.StringIO(), FakeClock()
    p = _progress("json", out, clock)
    p.plan(["a"])
    p("a: image")
    p("ignored kernels for problems not in the suite: ['zz']")
    assert p.problem is None and p.stage is None
    p("zz: image")  # not planned: not taken for a problem
    assert p.problem is None
    p("anything", problem="a", stage="timing", shape="s1")
    last = json.loads(out.getvalue().splitlines()[-1])
    assert (last["problem"], last["stage"], last["shape"]) == ("a", "timing", "s1")


def test_a_batch_of_a_problem_is_that_problem() -> None:
    out, clock = io.StringIO(), FakeClock()
    p = _progress("json", out, clock)
    p.plan(["fused_moe"])
    p("fused_moe [2/7]: reference and entry (8 cases)")
    assert (p.problem, p.stage) == ("fused_moe", "reference")


def test_unplanned_run_has_no_eta_and_a_closed_stream_does_not_raise() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    p = _progress("json", stream, clock)
    p("x: image")
    assert p.events[-1].eta_s is None and p.events[-1].total == 0
    stream.close()
    p("x: entry")  # must not raise: progress never fails a run
    assert isinstance(p.sink, Terminal) and p.sink.mode == "off"


def test_hours_in_clock() -> None:
    clock = FakeClock()
    p = _progress("off", io.StringIO(), clock)
    clock.t += 3725
    p("runtime image")
    assert human_line(p.events[-1]).startswith("[grader 1:02:05]")


def test_a_labelled_command_prints_its_steps_as_plain_lines() -> None:
    """`grader suite check` reports through Progress (issue 33) and its lines read as they
    did when it printed them itself: `[suite check] message`, no clock, on a terminal too."""
    out = Tty()
    p = labelled("suite check", stream=out)
    p("vector_add: image", problem="vector_add", stage="image")
    p("vector_add: reference, twice (2 cases)", problem="vector_add", stage="reference")
    assert out.getvalue() == ("[suite check] vector_add: image\n"
                              "[suite check] vector_add: reference, twice (2 cases)\n")
    assert [(e.problem, e.stage) for e in p.events] == [("vector_add", "image"),
                                                         ("vector_add", "reference")]


def test_grade_bundle_wires_progress_through_the_grading_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """runner.grade_bundle plans the suite's problems and hands a Progress to the Grader."""
    from grader.grading import factory, runner
    from grader.grading.config import GradingOptions, RunOptions
    from grader.grading.grader import Grader
    from grader.intake.tools import create_bundle
    from grader.paths import REPO

    bundle = tmp_path / "b.tar"
    create_bundle(REPO / "examples" / "triton", bundle)
    seen: list[Progress] = []

    class FakeGrader(Grader):
        """The Grader's work folder and opening of the bundle, no engine, no containers."""

        def __init__(self, cfg: object, engine: object, detector: object,
                     progress: Progress) -> None:
            super().__init__(cfg, engine, detector, progress)  # type: ignore[arg-type]
            seen.append(progress)

        def reap_dead(self) -> None:
            pass

        def reap(self) -> None:
            pass

        def grade(self, sub: object, suite: object) -> SimpleNamespace:  # type: ignore[override]
            for msg in MESSAGES:
                self.progress(msg)
            summary = SimpleNamespace(verdicts={}, shapes=0, problems=3, correctness_rate=1.0,
                                      dsl_adoption_rate=1.0, coverage="all shapes")
            return SimpleNamespace(summary=summary, problems=[],
                                   submission=SimpleNamespace(name="n", dsl="triton"))

    monkeypatch.setattr(factory, "Grader", FakeGrader)
    monkeypatch.setattr(factory, "get_engine", lambda: None)
    monkeypatch.setattr(runner, "write_reports",
                        lambda rep, out, fmts, public=False: out.mkdir() or {})
    out = io.StringIO()
    progress = Progress(Terminal("json", stream=out))
    runner.grade_bundle(RunOptions(grading=GradingOptions(bundle=bundle, out_dir=tmp_path / "r")),
                        progress)
    assert seen == [progress]
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert events[0]["event"] == "start" and events[0]["total"] == 3
    assert [e["problem"] for e in events if e["stage"] == "reference"] == [
        "vector_add", "rmsnorm", "matmul"]
    assert events[-1]["event"] == "finish" and events[-1]["done"] == 3
    # seed.secret is written by the Grader itself, before grading (see grader/grading/checkpoint.py)


def test_concurrent_workers_count_done_conservatively_or_exactly() -> None:
    out, clock = io.StringIO(), FakeClock()
    p = _progress("json", out, clock)
    p.plan(["a", "b", "c", "d", "e"], workers=2)
    for msg in ("a: image", "b: image", "c: image", "d: image", "a: entry",
                "b: reference (2 cases)"):
        clock.t += 5
        p(msg)
    assert p.events[-1].done == 0  # two workers, each grading one problem and holding the next
    clock.t += 5
    p("e: image")  # a worker took a fifth: one of a, b is done
    assert p.events[-1].done == 1 and p.events[-1].eta_s is not None
    p("a: done")
    p("b: done")  # an explicit done counts exactly
    assert p.events[-1].done == 2 and p.events[-1].problem == "b"


def test_threads_can_report_at_once() -> None:
    from concurrent.futures import ThreadPoolExecutor

    ids = [f"p{i}" for i in range(16)]
    out = io.StringIO()
    p = Progress(Terminal("json", stream=out))
    p.plan(ids, workers=4)

    def one(pid: str) -> None:
        for stage in ("image", "reference (1 cases)", "entry", "done"):
            p(f"{pid}: {stage}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, ids))
    p.finish()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2 + 4 * len(ids)
    assert sorted(p.finished) == sorted(ids) and lines[-1]["done"] == 16


def test_live_mode_draws_a_bar_and_leaves_a_line_per_finished_problem() -> None:
    out, clock = Tty(), FakeClock()
    p = _progress("live", out, clock)
    _drive(p, clock)
    text = out.getvalue()
    assert "\x1b[" in text  # a terminal's escape codes: the live bar
    for pid in ("vector_add", "rmsnorm", "matmul"):
        assert f"{pid}: done (passed)" in text
    assert isinstance(p.sink, Terminal) and p.sink.bar is None  # finish() stopped it
    p.close()  # closing twice is harmless


def test_piped_human_lines_carry_no_escape_codes() -> None:
    out, clock = io.StringIO(), FakeClock()
    _drive(for_cli("human", quiet=False, stream=out), clock)
    lines = out.getvalue().splitlines()
    assert lines and "\x1b" not in out.getvalue()
    assert lines[-1].endswith("done: 3/3 problem(s)")

"""When workers start containers ahead (worker.start_ahead), and how a standby that never gets
to its gate is dropped (problem_run.Standby.idle), with fake containers."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from grader import problem_run
from grader.config import RunConfig
from grader.harness.main import AT_GATE
from grader.problem_run import Standby
from grader.worker import AHEAD_CORES, start_ahead


def test_auto_needs_cores_for_each_worker() -> None:
    cfg = RunConfig(bundle=Path("b.tar"), out_dir=Path("o"))
    assert cfg.start_ahead == "auto"
    assert start_ahead(cfg, 1, cores=AHEAD_CORES)
    assert not start_ahead(cfg, 1, cores=2)  # the CI machine: no core to overlap on
    assert not start_ahead(cfg, 2, cores=AHEAD_CORES)
    assert start_ahead(cfg, 4, cores=16)
    on, off = (RunConfig(bundle=Path("b.tar"), out_dir=Path("o"), start_ahead=v)
               for v in ("on", "off"))
    assert start_ahead(on, 8, cores=2) and not start_ahead(off, 1, cores=64)


class FakeContainer:
    def __init__(self, running: bool = True) -> None:
        self.is_running = running

    def running(self) -> bool:
        return self.is_running


def _standby(tmp_path: Path, since: float) -> Standby:
    st = Standby.__new__(Standby)
    st.closed, st.released, st.gated, st.since = False, False, True, since
    st.ref_out, st.ent_out = tmp_path / "ref", tmp_path / "ent"
    st.ref_out.mkdir()
    st.ent_out.mkdir()
    st.ref, st.ent = FakeContainer(), FakeContainer()  # type: ignore[assignment]
    st._stack = contextlib.ExitStack()
    return st


def test_idle_when_each_is_at_its_gate_or_gone(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(problem_run.time, "monotonic", lambda: 10.0)
    st = _standby(tmp_path, since=9.0)
    assert not st.idle()
    (st.ref_out / AT_GATE).write_text("{}")
    assert not st.idle()  # the entry's harness is still importing
    st.ent.is_running = False  # type: ignore[attr-defined]
    assert st.idle() and not st.usable()
    st.ent.is_running = True  # type: ignore[attr-defined]
    (st.ent_out / AT_GATE).write_text("{}")
    assert st.idle() and st.usable()


def test_one_that_never_gets_there_is_dropped(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(problem_run.time, "monotonic", lambda: now[0])
    st = _standby(tmp_path, since=100.0)
    assert not st.idle()
    now[0] += problem_run.GATE_WAIT_S + 1
    assert st.idle() and st.closed and not st.usable()

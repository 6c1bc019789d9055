"""grading/prepare.prepare_all with fakes: problems taken one per sandbox in turn, batches in
suite order whatever sandbox finished first, and a problem whose preparing raises costs only
that problem (one `failed` line saying why)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from grader.errors import InfraError
from grader.grading import prepare
from grader.grading.prepare import PreparedBatch


def test_every_problem_once_in_suite_order_and_a_failure_costs_its_problem_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def fake(prep: Any, setup: str, sp: Any) -> list[PreparedBatch]:
        with lock:
            seen.append((setup, sp.id))
        if sp.id == "broken":
            raise InfraError("cannot build its image")
        if sp.id == "odd":
            raise ValueError("a bug")
        return [PreparedBatch(problem=sp.id, key=f"{sp.id}-{k}", cases=2, status="kept")
                for k in range(2)]

    monkeypatch.setattr(prepare, "prepare_problem", fake)
    todo = [SimpleNamespace(id=p) for p in ("a", "broken", "b", "odd", "c")]
    got = prepare.prepare_all(None, ["gpu0", "gpu1"], todo)  # type: ignore[arg-type]
    assert sorted(p for _, p in seen) == ["a", "b", "broken", "c", "odd"]
    assert [(b.problem, b.status) for b in got] == [
        ("a", "kept"), ("a", "kept"), ("broken", "failed"), ("b", "kept"), ("b", "kept"),
        ("odd", "failed"), ("c", "kept"), ("c", "kept")]
    failed = {b.problem: b.detail for b in got if b.status == "failed"}
    assert failed == {"broken": "cannot build its image; each entry runs its references",
                      "odd": "ValueError: a bug; each entry runs its references"}

"""A round in serving containers (`grader round --serve`, run/served.py, issue 32), with the
real engine on the CPU demo suite: one container runs every batch of an entry, each in a fresh
worker its warden forks, the verdicts are those of a container a batch, and nothing a batch
leaves reaches the next (the carry-state hostile case, whose files zero their outputs when
they find an earlier batch's marker, stays `passed`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.intake.tools import create_bundle
from grader.paths import REPO
from grader.sandbox.spec import ROLE_LABEL, Role

pytestmark = pytest.mark.docker

SECRET = bytes(range(32)).hex()
CARRY = REPO / "tests" / "cases" / "hostile" / "carry_state_between_batches" / "submission"


def _verdicts(out: Path, name: str) -> dict[str, str]:
    report = json.loads((out / "entries" / name / "report.json").read_text())
    return {p["id"]: p["verdict"] for p in report["problems"]}


def _created(engine, since: float, until: float,  # type: ignore[no-untyped-def]
                      role: Role) -> int:
    """How many containers of `role` the engine created between `since` and `until`."""
    events = engine.client.events(since=since, until=until, decode=True, filters={
        "type": "container", "event": "create", "label": f"{ROLE_LABEL}={role}"})
    return sum(1 for _ in events)


def test_round_with_serving_containers(engine, runtime, tmp_path: Path  # type: ignore[no-untyped-def]
                                       ) -> None:
    entries = tmp_path / "entries"
    entries.mkdir()
    create_bundle(REPO / "examples" / "triton", entries / "a_triton.tar")
    create_bundle(CARRY, entries / "b_carry.tar")
    create_bundle(REPO / "examples" / "triton", entries / "c_triton.tar")
    out = tmp_path / "round"
    since = time.time()
    res = subprocess.run([sys.executable, "-m", "grader", "round", str(entries), "-o", str(out),
                          "--suite", "demo", "--seed-secret", SECRET, "--serve",
                          "--start-ahead", "on"],
                         capture_output=True, text=True, cwd=REPO, check=False, timeout=1200)
    until = time.time() + 1
    assert res.returncode == 0, res.stderr[-4000:]
    first, carry, again = (_verdicts(out, n) for n in ("a_triton", "b_carry", "c_triton"))
    assert set(first.values()) == {"passed"}, first
    assert again == first
    assert carry == {p: "passed" for p in first}, (carry, res.stderr[-4000:])
    # Each entry's batches all ran in one serving container: the first entry's beside their
    # reference containers (side by side), the later ones' on the round's references.
    assert _created(engine, since, until, Role.ENTRY) == 3
    assert _created(engine, since, until, Role.REFERENCE) == len(first)

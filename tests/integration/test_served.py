"""A round in serving containers (`grader round --serve`, run/served.py, issue 32), with the
real engine on the CPU demo suite: one container runs every batch of an entry, each in a fresh
worker its warden forks (the first entry's beside their reference containers, the later one's
on the round's references), timed loops beside the next workers' set-up and the judging
before them (`--time-beside on`, the GPU hosts' default), the verdicts are those of a
container a batch, and nothing a batch leaves reaches the next (the carry-state hostile case,
whose files zero their outputs when they find an earlier batch's marker, stays `passed`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.harness.protocol import REFERENCE_MODE, SERVE_MODE
from grader.intake.tools import create_bundle
from grader.paths import REPO
from grader.sandbox.docker_engine import DockerEngine
from grader.sandbox.spec import ContainerSpec

pytestmark = pytest.mark.docker

SECRET = bytes(range(32)).hex()
CARRY = REPO / "tests" / "cases" / "hostile" / "carry_state_between_batches" / "submission"


def _verdicts(out: Path, name: str) -> dict[str, str]:
    report = json.loads((out / "entries" / name / "report.json").read_text())
    return {p["id"]: p["verdict"] for p in report["problems"]}


def test_round_with_serving_containers(engine, runtime, tmp_path: Path,  # type: ignore[no-untyped-def]
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    entries = tmp_path / "entries"
    entries.mkdir()
    create_bundle(REPO / "examples" / "triton", entries / "a_triton.tar")
    create_bundle(CARRY, entries / "b_carry.tar")
    out = tmp_path / "round"
    # The round runs in this process on the real engine, each container it starts counted by
    # its command's mode (another run's containers on the same engine are not counted).
    started: list[str] = []
    start = DockerEngine.start

    def counting(self: DockerEngine, spec: ContainerSpec):  # type: ignore[no-untyped-def]
        started.append(spec.command[3])  # [python, -I, boot.py, MODE, ...]
        return start(self, spec)

    monkeypatch.setattr(DockerEngine, "start", counting)
    monkeypatch.setattr(sys, "argv", ["grader", "round", str(entries), "-o", str(out),
                                      "--suite", "demo", "--seed-secret", SECRET, "--serve",
                                      "--start-ahead", "on", "--time-beside", "on"])
    code: object = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code in (0, None), err[-4000:]
    first, carry = (_verdicts(out, n) for n in ("a_triton", "b_carry"))
    assert set(first.values()) == {"passed"}, first
    assert carry == {p: "passed" for p in first}, (carry, err[-4000:])
    # Each entry's batches all ran in one serving container: the first entry's beside their
    # reference containers (side by side), the later ones' on the round's references.
    assert sorted(started) == sorted([SERVE_MODE] * 2 + [REFERENCE_MODE] * len(first))

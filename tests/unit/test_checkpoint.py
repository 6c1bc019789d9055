"""The run checkpoint behind `grader run --resume`: atomic files, refusal of another run's."""

from __future__ import annotations

import errno
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from grader import files
from grader.errors import InfraError, UsageError
from grader.grading import checkpoint as ck
from grader.grading.checkpoint import Checkpoint, Finished, RunKey
from grader.grading.settings import GradingSettings
from grader.model.results import ProblemResult
from grader.verdicts import Verdict

KEY = RunKey(grader_version="1", bundle_sha256="ab" * 32, suite="demo", suite_version="1",
             settings=GradingSettings(policy="triton", device="cpu", hardware="auto",
                                      runtime="cpu", shapes="auto", seeds_per_shape=2))
# run.json's key as the grader wrote it before issue 33 (a flat RunKey, dataclasses.asdict).
OLD_KEY = {"grader_version": "1", "bundle_sha256": "ab" * 32, "suite": "demo",
           "suite_version": "1", "policy": "triton", "device": "cpu", "hardware": "auto",
           "runtime": "cpu", "shapes": "auto", "seeds_per_shape": 2}
SECRET = bytes(range(32))


def _done(pid: str, verdict: Verdict = Verdict.PASSED) -> Finished:
    return Finished(result=ProblemResult(id=pid, operator="op", verdict=verdict, detail="d"),
                    image_id=f"sha256:{pid}", device_name="cpu")


def test_start_saves_the_secret_privately_and_only_its_commitment(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "out")
    cp.start(KEY, SECRET)
    secret_file = tmp_path / "out" / "seed.secret"
    assert secret_file.read_text().strip() == SECRET.hex()
    assert secret_file.stat().st_mode & 0o077 == 0
    run = json.loads(cp.run_file.read_text())
    assert run["key"]["bundle_sha256"] == KEY.bundle_sha256
    assert run["seed_commitment"] == ck.commitment(SECRET)
    assert SECRET.hex() not in cp.run_file.read_text()


def test_resume_returns_the_secret_and_finished_problems_but_infra_errors(
        tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path)
    cp.start(KEY, SECRET)
    cp.save(_done("vector_add"))
    cp.save(_done("rmsnorm", Verdict.INFRA_ERROR))
    cp.save(_done("matmul", Verdict.INCORRECT))
    cp.save(_done("suite_fault", Verdict.REFERENCE_ERROR))  # graded again once fixed
    cp.save(_done("interp", Verdict.UNVERIFIED))  # kept: resuming on the CPU changes nothing
    (cp.problems_dir / "broken.json").write_text('{"format": 1, "result": {')  # truncated
    secret, done = Checkpoint(tmp_path).resume(KEY, None)
    assert secret == SECRET
    assert sorted(done) == ["interp", "matmul", "vector_add"]
    assert done["vector_add"].image_id == "sha256:vector_add"
    assert done["matmul"].result.verdict == Verdict.INCORRECT
    # the same secret given explicitly is accepted
    assert Checkpoint(tmp_path).resume(KEY, SECRET)[0] == SECRET


def test_a_fresh_start_forgets_the_earlier_checkpoint(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path)
    cp.start(KEY, SECRET)
    cp.save(_done("vector_add"))
    cp.start(KEY, b"\x07" * 32)
    secret, done = cp.resume(KEY, None)
    assert secret == b"\x07" * 32 and done == {}


def test_resume_refuses_another_run_and_says_what_differs(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path)
    cp.start(KEY, SECRET)
    with pytest.raises(UsageError) as err:
        cp.resume(replace(KEY, settings=KEY.settings.but(policy="strict", shapes="all")), None)
    assert "policy: 'triton' in the checkpoint, 'strict' now" in err.value.message
    assert "shapes" in err.value.message and "bundle_sha256" not in err.value.message


def test_resume_without_a_checkpoint_or_with_the_wrong_secret(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no checkpoint"):
        Checkpoint(tmp_path).resume(KEY, None)
    cp = Checkpoint(tmp_path)
    cp.start(KEY, SECRET)
    with pytest.raises(UsageError, match="differs"):
        cp.resume(KEY, b"\x00" * 32)
    cp.secret_file.unlink()
    with pytest.raises(UsageError, match="missing"):
        cp.resume(KEY, None)
    with pytest.raises(UsageError, match="commitment"):
        cp.resume(KEY, b"\x00" * 32)
    assert cp.resume(KEY, SECRET)[0] == SECRET  # the secret given back by hand


def test_resume_refuses_an_unreadable_run_file(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path)
    cp.start(KEY, SECRET)
    cp.run_file.write_text("{not json")
    with pytest.raises(UsageError, match="unreadable"):
        cp.resume(KEY, None)


def test_a_full_disk_is_an_infra_error_and_keeps_the_old_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cp = Checkpoint(tmp_path)
    cp.start(KEY, SECRET)
    cp.save(_done("vector_add"))
    before = cp.problem_file("vector_add").read_text()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(InfraError, match="No space left on device") as err:
        cp.save(_done("vector_add", Verdict.INCORRECT))
    assert "--resume" in (err.value.hint or "")
    assert cp.problem_file("vector_add").read_text() == before
    assert sorted(p.name for p in cp.problems_dir.iterdir()) == ["vector_add.json"]
    with pytest.raises(InfraError, match="cannot start the checkpoint"):
        Checkpoint(tmp_path / "other").start(KEY, SECRET)


def _old_checkpoint(path: Path, key: dict[str, object]) -> Checkpoint:
    """A checkpoint whose run.json holds `key`, as written before issue 33."""
    cp = Checkpoint(path)
    cp.start(KEY, SECRET)
    cp.save(_done("vector_add"))
    cp.run_file.write_text(json.dumps({"format": 1, "key": key,
                                       "seed_commitment": ck.commitment(SECRET)}, indent=1))
    return cp


def test_a_checkpoint_written_before_resumes_and_is_written_the_same(tmp_path: Path) -> None:
    cp = _old_checkpoint(tmp_path, OLD_KEY)
    secret, done = Checkpoint(tmp_path).resume(KEY, None)
    assert secret == SECRET and sorted(done) == ["vector_add"]
    Checkpoint(tmp_path / "new").start(KEY, SECRET)  # the keys it writes are the old ones
    assert json.loads((tmp_path / "new" / ".checkpoint" / "run.json").read_text())["key"] \
        == OLD_KEY
    with pytest.raises(UsageError) as err:
        cp.resume(replace(KEY, settings=KEY.settings.but(device="cuda", runtime="host")), None)
    assert "device: 'cpu' in the checkpoint, 'cuda' now" in err.value.message
    # Settings a checkpoint is not keyed on (the problems, --timeout) do not stop a resume.
    assert cp.resume(replace(KEY, settings=KEY.settings.but(problems=("vector_add",),
                                                            timeout_s=5.0)), None)[0] == SECRET


@pytest.mark.parametrize("key", [
    {k: v for k, v in OLD_KEY.items() if k != "shapes"},  # a key it lacks
    {k: v for k, v in OLD_KEY.items() if k != "suite"},
    {**OLD_KEY, "speed": "fast"},  # one it does not know
    {**OLD_KEY, "device": "tpu"},  # one it cannot hold
    ["not", "an", "object"],
])
def test_a_run_file_that_holds_no_key_is_refused_as_unreadable(tmp_path: Path,
                                                               key: object) -> None:
    cp = _old_checkpoint(tmp_path, key)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"--resume: the checkpoint .* is unreadable") as err:
        cp.resume(KEY, None)
    assert err.value.hint == "leave out --resume for a fresh run"

"""Fault drills against the real engine: what happens when the machinery fails mid-run.

(a) the entry's container is killed from outside; (b) the engine stops answering;
(c) the disk holding the out dir or $TMPDIR fills up. In each: a clear verdict or a clean
InfraError, every result already obtained kept in the checkpoint, `--resume` finishing the rest
without redoing it, and no container of the run left behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests.exceptions
from docker.models.containers import ContainerCollection

from grader.detect.detector import Detector
from grader.detect.policy import load_policy
from grader.errors import InfraError, UsageError
from grader.grading.checkpoint import Checkpoint, Finished
from grader.grading.config import GradingOptions, Presentation, RunOptions, Scheduling
from grader.grading.grader import Grader
from grader.grading.runner import grade_bundle
from grader.grading.settings import GradingSettings
from grader.grading.worker import Worker
from grader.intake.tools import create_bundle
from grader.model.results import Report
from grader.paths import REPO
from grader.sandbox.docker_engine import DockerEngine, get_engine
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker
ALL = ["vector_add", "rmsnorm", "matmul"]

SLEEPY = '''
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def add_k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def kernel(x, y):
    print("fault-drill: in kernel()", file=sys.stderr, flush=True)
    time.sleep(600)
    o = torch.empty_like(x)
    add_k[(triton.cdiv(x.numel(), 1024),)](x, y, o, x.numel(), BLOCK=1024)
    return o
'''


def _bundle(tmp_path: Path, *, sleepy: bool = False) -> Path:
    src = tmp_path / "entry"
    shutil.copytree(REPO / "examples" / "triton", src)
    if sleepy:
        (src / "kernels" / "vector_add.py").write_text(SLEEPY)
    bundle = tmp_path / "bundle.tar"
    create_bundle(src, bundle)
    return bundle


def _grader(cfg: GradingOptions, engine: DockerEngine,
            progress: Callable[[str], None] = lambda _m: None) -> Grader:
    return Grader(cfg, engine, Detector(policy=load_policy(cfg.settings.policy)), progress)


def _left(engine: DockerEngine, session: str) -> list[Any]:
    return list(engine.client.containers.list(
        all=True, filters={"label": f"grader.session={session}"}))


def _verdicts(rep: Report) -> dict[str, Verdict]:
    return {p.id: p.verdict for p in rep.problems}


def _saved(out: Path) -> dict[str, Verdict]:
    cp = Checkpoint(out)
    return {p.stem: Finished.from_json(p.read_text()).result.verdict
            for p in sorted(cp.problems_dir.glob("*.json"))}


def _count_grading(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record which problems a worker plans (i.e. really grades)."""
    graded: list[str] = []
    real = Worker.plan

    def counting(self: Worker, bundle: Any) -> Any:
        graded.append(bundle.id)
        return real(self, bundle)

    monkeypatch.setattr(Worker, "plan", counting)
    return graded


def _fill(mount: Path) -> None:
    """Write zeros into `mount` until the filesystem is full."""
    block = b"\0" * (1 << 20)
    with open(mount / "filler", "wb") as f:
        try:
            while True:
                f.write(block)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    # the file stays open-and-closed; what remains is under one page


@contextmanager
def _killing(engine: DockerEngine, session: str, role: str, marker: bytes
             ) -> Iterator[list[str]]:
    """While the block runs, a thread `docker kill`s the first `role` container of `session`
    whose logs show `marker` (once); yields the ids it killed."""
    killed: list[str] = []
    stop = threading.Event()

    def killer() -> None:
        deadline = time.monotonic() + 110
        while not stop.is_set() and time.monotonic() < deadline:
            for c in engine.client.containers.list(filters={"label": [
                    f"grader.session={session}", f"grader.role={role}"]}):
                if marker in c.logs():
                    c.kill()
                    killed.append(c.id)
                    return
            time.sleep(0.1)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        stop.set()
        thread.join()


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs: a disk that can be filled in a moment without touching the host's."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("ahead", ["off", "on"])
def test_entry_container_killed_from_outside(engine, runtime, tmp_path: Path, ahead: str  # type: ignore[no-untyped-def]
                                             ) -> None:
    """Someone `docker kill`s the entry while kernel() runs: the grader cannot tell that from
    the entry ending itself with exit 137, so it is the entry's runtime_error (an infra_error
    would let an entry trade a failure for an unscored retry); the rest is graded (with the
    next problem's containers waiting beside it, too)."""
    cfg = GradingOptions(bundle=_bundle(tmp_path, sleepy=True), out_dir=tmp_path / "out",
                         scheduling=Scheduling(start_ahead=ahead),
                         settings=GradingSettings(timeout_s=120.0))
    grader = _grader(cfg, engine)
    with _killing(engine, grader.session, "entry", b"fault-drill: in kernel()") as killed:
        rep = grader.open_and_grade()
    assert killed, "the entry container was never seen in kernel()"
    assert _verdicts(rep) == {"vector_add": Verdict.RUNTIME_ERROR,
                              "rmsnorm": Verdict.PASSED, "matmul": Verdict.PASSED}
    va = rep.problems[0]
    assert all("exit 137" in s.detail for s in va.shapes), [s.detail for s in va.shapes]
    assert _saved(cfg.out_dir) == _verdicts(rep)
    assert _left(engine, grader.session) == []


def test_engine_unreachable_mid_run_then_resume(engine, runtime, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine stops answering after the first problem: the rest are infra_error, the
    first is kept, and --resume (engine back) grades only the rest. (Containers started one
    batch ahead would shift the count of starts: test_start_ahead.py has that case.)"""
    cfg = GradingOptions(bundle=_bundle(tmp_path), out_dir=tmp_path / "out",
                         scheduling=Scheduling(start_ahead="off"))
    flaky = get_engine()
    real_run = ContainerCollection.run
    calls = [0]

    def run(self: ContainerCollection, *args: Any, **kwargs: Any) -> Any:
        if self.client is flaky.client:
            calls[0] += 1
            if calls[0] == 3:  # the first problem had its reference and entry containers
                raise docker.errors.APIError("500 Server Error: the engine is shutting down")
            if calls[0] > 3:
                raise requests.exceptions.ConnectionError("connection refused (fault drill)")
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(ContainerCollection, "run", run)
    first = _grader(cfg, flaky)
    rep = first.open_and_grade()
    assert _verdicts(rep) == {"vector_add": Verdict.PASSED, "rmsnorm": Verdict.INFRA_ERROR,
                              "matmul": Verdict.INFRA_ERROR}
    assert "Docker engine" in rep.problems[2].detail or "container" in rep.problems[2].detail
    assert "grader bug" not in rep.problems[1].detail + rep.problems[2].detail
    assert _saved(cfg.out_dir) == _verdicts(rep)
    assert _left(engine, first.session) == []
    kept = Checkpoint(cfg.out_dir).problem_file("vector_add").stat().st_mtime_ns

    # another run's options are refused, saying what differs
    with pytest.raises(UsageError, match="shapes: 'auto' in the checkpoint, 'all' now"):
        _grader(replace(cfg, resume=True, settings=cfg.settings.but(shapes="all")),
                engine).open_and_grade()

    graded = _count_grading(monkeypatch)
    second = _grader(replace(cfg, resume=True), engine)
    again = second.open_and_grade()
    assert graded == ["rmsnorm", "matmul"]
    assert _verdicts(again) == dict.fromkeys(ALL, Verdict.PASSED)
    assert [p.id for p in again.problems] == ALL
    assert second.secret == first.secret
    assert again.environment.seed_commitment == rep.environment.seed_commitment
    assert Checkpoint(cfg.out_dir).problem_file("vector_add").stat().st_mtime_ns == kept
    assert _saved(cfg.out_dir) == _verdicts(again)
    assert _left(engine, second.session) == []


def test_out_dir_fills_up_mid_run_then_resume(engine, runtime, small_disk: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The out dir's disk fills once the second problem has run: its checkpoint, written once
    its judging is done (after the third problem's first batch: worker.Worker.grade), cannot
    be written, so the run stops with an InfraError (no further problem starts, the third's
    result is not kept) and keeps the first; once there is space, --resume grades the rest
    and writes the reports."""
    out = small_disk / "out"
    bundle = _bundle(tmp_path)
    cfg = GradingOptions(bundle=bundle, out_dir=out, scheduling=Scheduling(start_ahead="off"))

    def progress(msg: str) -> None:
        if msg.startswith("matmul: image"):
            _fill(small_disk)

    first = _grader(cfg, engine, progress)
    with pytest.raises(InfraError, match="No space left on device") as err:
        first.open_and_grade()
    assert "1 of 3 problem(s) are kept" in err.value.message
    assert "--resume" in (err.value.hint or "")
    assert _saved(out) == {"vector_add": Verdict.PASSED}
    assert not (out / "report.json").exists()
    assert not [p for p in Checkpoint(out).problems_dir.iterdir() if p.suffix != ".json"]
    assert _left(engine, first.session) == []
    kept = Checkpoint(out).problem_file("vector_add").stat().st_mtime_ns

    (small_disk / "filler").unlink()
    graded = _count_grading(monkeypatch)
    rep = grade_bundle(RunOptions(grading=GradingOptions(bundle=bundle, out_dir=out, resume=True),
                                  presentation=Presentation(quiet=True, keep_checkpoint=True)))
    # the checkpoint kept: read below
    assert graded == ["rmsnorm", "matmul"]
    assert _verdicts(rep) == dict.fromkeys(ALL, Verdict.PASSED)
    assert (out / "report.json").is_file() and (out / "report.html").is_file()
    assert Checkpoint(out).problem_file("vector_add").stat().st_mtime_ns == kept
    assert (out / "seed.secret").read_text().strip() == first.secret.hex()


def _left_in(folder: Path) -> list[str]:
    """What a run left in `folder`, less the empty folder that holds every run's own."""
    runs = folder / "grader-runs"
    return sorted(p for p in os.listdir(folder)
                  if not (p == "grader-runs" and not os.listdir(runs)))



def test_tmpdir_fills_up_mid_run_then_resume(engine, runtime, small_disk: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """$TMPDIR (the work folders, the inputs handed to containers) fills during the second
    problem and stays full: that problem and the next are infra_error, the report is still
    written, and --resume re-grades only them."""
    work = small_disk / "tmp"
    work.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work))
    # One batch ahead, rmsnorm's containers would exist before its "image" line below.
    cfg = GradingOptions(bundle=_bundle(tmp_path), out_dir=tmp_path / "out",
                         scheduling=Scheduling(start_ahead="off"))

    full = [False]

    def progress(msg: str) -> None:
        # Full from then on: the first problem's folders go once its judging is done, beside
        # the second problem's batch (worker.Worker.grade); each step fills what they freed.
        full[0] = full[0] or msg.startswith("rmsnorm: image")
        if full[0]:
            _fill(small_disk)

    first = _grader(cfg, engine, progress)
    rep = first.open_and_grade()
    assert _verdicts(rep) == {"vector_add": Verdict.PASSED, "rmsnorm": Verdict.INFRA_ERROR,
                              "matmul": Verdict.INFRA_ERROR}
    for p in rep.problems[1:]:
        assert p.detail.startswith("host filesystem: No space left on device"), p.detail
    assert _saved(cfg.out_dir) == _verdicts(rep)
    assert _left(engine, first.session) == []
    # Every work folder was removed, tmpfs mounts included; what is left is the (empty) folder
    # that holds each run's own (sandbox/runs.py).
    assert _left_in(work) == []

    (small_disk / "filler").unlink()
    graded = _count_grading(monkeypatch)
    second = _grader(replace(cfg, resume=True), engine)
    again = second.open_and_grade()
    assert graded == ["rmsnorm", "matmul"]
    assert _verdicts(again) == dict.fromkeys(ALL, Verdict.PASSED)
    assert _left(engine, second.session) == []


def test_a_full_out_dir_from_the_start_is_a_clean_infra_error(small_disk: Path,
                                                              tmp_path: Path) -> None:
    """`grader run` into a full disk: exit 30 and one line of error, never a traceback, and
    nothing half-written (the secret and the checkpoint are written whole or not at all)."""
    bundle = _bundle(tmp_path)
    _fill(small_disk)
    out = small_disk / "out"
    res = subprocess.run([sys.executable, "-m", "grader", "run", str(bundle), "-o", str(out)],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert res.returncode == 30, res.stderr
    # Piped, progress is plain lines (the plan first); the error is one line after them.
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: cannot start the checkpoint"), (
        res.stderr)
    assert "No space left on device" in res.stderr and "Traceback" not in res.stderr
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_a_full_tmpdir_from_the_start_is_an_infra_error(engine, small_disk: Path,  # type: ignore[no-untyped-def]
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A full $TMPDIR when the bundle is unpacked. (A fresh `python` would not even pick a
    full $TMPDIR: tempfile probes it with a write and falls back to /tmp.)"""
    cfg = GradingOptions(bundle=_bundle(tmp_path), out_dir=tmp_path / "out")
    _fill(small_disk)
    monkeypatch.setattr(tempfile, "tempdir", str(small_disk))
    # The run's own folder (sandbox/runs.py) is the first thing made in $TMPDIR.
    with pytest.raises(InfraError, match=r"cannot (unpack the bundle|make a work folder): "
                       r"No space left on device"):
        _grader(cfg, engine).open_and_grade()
    assert _left_in(small_disk) == ["filler"]


@pytest.mark.parametrize(("ahead", "problems"), [("off", ("vector_add",)),
                                                  ("on", ("vector_add", "rmsnorm"))])
def test_reference_killed_beside_the_entry_is_graded_again_in_turn(  # type: ignore[no-untyped-def]
        engine, runtime, tmp_path: Path, ahead: str, problems: tuple[str, ...]) -> None:
    """The reference's container dies while the entry's runs beside it (run.pair.run_pair):
    the entry's container is stopped and the problem graded again, reference first, so that
    the entry still gets its own verdict (an entry must not escape one by making the
    reference fail) and nothing is left behind; "on": with the next problem's containers
    started beside it, which wait for that too."""
    suites = tmp_path / "suites"
    shutil.copytree(REPO / "problem_bundles" / "demo", suites / "demo")
    ref = suites / "demo" / "vector_add" / "reference.py"
    source, anchor = ref.read_text(), "    gen = torch.Generator(device=dev).manual_seed(seed)\n"
    assert anchor in source  # the drill's hook: make_inputs's first draw
    drill = ('    import sys, time\n'
             '    print("fault-drill: reference", file=sys.stderr, flush=True)\n'
             '    time.sleep(3)\n')
    ref.write_text(source.replace(anchor, drill + anchor, 1))
    cfg = GradingOptions(bundle=_bundle(tmp_path), out_dir=tmp_path / "out",
                         suite_roots=(suites,), settings=GradingSettings(problems=problems),
                         scheduling=Scheduling(start_ahead=ahead))
    lines: list[str] = []
    grader = _grader(cfg, engine, progress=lines.append)
    with _killing(engine, grader.session, "reference", b"fault-drill: reference") as killed:
        rep = grader.open_and_grade()
    assert killed, "the reference container was never seen"
    assert _verdicts(rep) == dict.fromkeys(problems, Verdict.PASSED)
    assert any("again, one after the other" in line for line in lines), lines
    assert _left(engine, grader.session) == []

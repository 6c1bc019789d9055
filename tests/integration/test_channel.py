"""The evidence channel against the real engine (harness/warden.py, grader/model/channel.py): a
handshake the entry cannot forge, and nothing it runs after its last call reaching a verdict.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_pair import _cases

from grader.cli.selftest import grade_case
from grader.images import ensure, problem_plan
from grader.paths import REPO
from grader.run.batch import Batch
from grader.run.jobs import WorkerSetup
from grader.run.pair import run_pair
from grader.sandbox.docker_engine import DockerEngine
from grader.sandbox.spec import Limits
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker
HOSTILE = REPO / "tests" / "cases" / "hostile"
SAW = "SAW INPUTS DURING IMPORT"  # what the cases print if an input reached their import


@pytest.fixture()
def setup(engine: DockerEngine) -> Iterator[WorkerSetup]:
    box = WorkerSetup(engine=engine, session=f"test-{uuid.uuid4().hex[:8]}",
                  python="/opt/venv/bin/python3", device="cpu")
    try:
        yield box
    finally:
        engine.reap(box.session)


def _pair(engine: DockerEngine, runtime, setup: WorkerSetup, kernel: Path):  # type: ignore[no-untyped-def]
    cases, bundle = _cases()
    image = ensure(engine, problem_plan(runtime.tag, "demo", bundle))
    batch = Batch(image=image.tag, kernel_file=kernel, cases=[c for c in cases if not c.timing],
                  ref_limits=Limits(wall_s=120.0, memory_bytes=4 << 30),
                  entry_limits=Limits(wall_s=120.0), problem=bundle.problem)
    return run_pair(setup, batch)


def test_a_ready_frame_forged_at_import_delivers_nothing(engine, runtime, setup) -> None:  # type: ignore[no-untyped-def]
    kernel = HOSTILE / "forge_ready_frame_at_import" / "submission" / "kernels" / "vector_add.py"
    with _pair(engine, runtime, setup, kernel) as pair:
        entry = pair.entry
        assert entry is not None and entry.frames is not None
        # The warden ended the container on the forged frame, before the entry's own 20 s wait
        # at import was over (it prints when it is); no ready came, so no job or input either.
        assert "without the harness's token" in (entry.frames.tampering or "")
        assert entry.out.ready is None
        assert SAW not in entry.exit.logs and "IMPORT WAIT OVER" not in entry.exit.logs
        assert any(a.tampering and "tampering" in a.text for a in entry.out.anomalies)


def test_a_ready_file_written_at_import_is_not_the_handshake(engine, runtime, setup) -> None:  # type: ignore[no-untyped-def]
    kernel = HOSTILE / "forge_ready_file_at_import" / "submission" / "kernels" / "vector_add.py"
    with _pair(engine, runtime, setup, kernel) as pair:
        entry = pair.entry
        assert entry is not None and entry.frames is not None
        # Its import waited 8 s for inputs that came only after the harness's own ready.
        assert SAW not in entry.exit.logs
        assert entry.out.ready is not None and entry.out.ready.import_s is not None
        assert entry.out.ready.import_s > 7.5
        assert entry.out.result is not None  # the honest run went on to the end
        assert any(a.tampering and "ready.json in the output directory" in a.text
                   for a in entry.out.anomalies)


LATE = '''
import atexit
import os
import sys
import threading
import time
import weakref

import torch
from safetensors.torch import save_file  # noqa: F401 (present in the image)

_OUT = "/grader/out"


def _forge(*_):
    """Write the right answer (computed with torch from inputs drawn as the harness draws
    them: the job's seeds, the recipe) where the harness wrote the kernel's wrong one, and a
    result file that says all is well."""
    try:
        import importlib.util
        import json
        sys.path.insert(0, "/grader/lib")
        from grader_harness import tensors
        from pathlib import Path
        job = json.loads(Path("/grader/in/job.json").read_text())
        spec = importlib.util.spec_from_file_location("r", "/grader/in/recipe/reference.py")
        recipe = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(recipe)
        for case in job["cases"]:
            x, y = recipe.make_inputs(case["seed"], job["device"], **case["params"])
            tensors.save(Path(_OUT) / (case["id"] + ".out"), (x + y,))
        with open(_OUT + "/result.json", "w") as f:
            f.write('{"cases": {}}')
    except Exception as exc:
        print("forge failed:", exc, file=sys.stderr)


_done = threading.Event()


class _Stdout:
    """Replaces sys.stdout: the harness flushes it after sending its result, which is the
    entry's one sure sign that the harness is done."""

    def __init__(self, inner):
        self.inner = inner

    def write(self, s):
        return self.inner.write(s)

    def flush(self):
        _done.set()
        _forge()
        self.inner.flush()


class _Late:
    def __del__(self):
        _forge()


def _loop():
    _done.wait()
    while True:  # a daemon thread, forging again and again until the process is gone
        _forge()


_keep = _Late()
weakref.finalize(_keep, _forge)
atexit.register(_forge)
os.register_at_fork(after_in_child=_forge)
sys.stdout = _Stdout(sys.stdout)
threading.Thread(target=_loop, daemon=True).start()


def kernel(x, y):
    return torch.zeros_like(x)  # wrong: only what runs after the harness could right it
'''


def test_nothing_after_the_last_call_reaches_the_verdict(engine, runtime, tmp_path) -> None:  # type: ignore[no-untyped-def]
    case = tmp_path / "case"
    shutil.copytree(HOSTILE / "forge_ready_file_at_import", case)
    (case / "submission" / "kernels" / "vector_add.py").write_text(LATE)
    (case / "case.toml").write_text('problems = ["vector_add"]\ntimeout_s = 60\n'
                                    '[expect]\nvector_add = "incorrect"\n')
    work = tmp_path / "work"
    work.mkdir()
    result = grade_case(engine, case, work)
    got = result.got["vector_add"]
    # The kernel's own answer is wrong; hooks that ran after the harness's last act would
    # have put the right one in its place. Either they never ran, or what they changed is
    # caught: never a pass.
    assert got in (Verdict.INCORRECT, Verdict.POLICY_VIOLATION, Verdict.TAMPERING), got
    shapes = result.report.problems[0].shapes
    assert all(s.verdict not in (Verdict.PASSED, Verdict.FALLBACK) for s in shapes)
    if got != Verdict.TAMPERING:  # then the kernel's own zeros were what the host compared
        compared = [c for s in shapes for c in s.comparisons]
        assert compared and all(c.mismatched > 0 for c in compared), compared
    assert result.leftovers == 0

"""One way to build each thing (issue 33): the engine in sandbox/docker_engine.get_engine, a
grading's policy, detector and Grader in grading/factory.py, used by every command that
grades; the bundle opened and hashed once on the way into the grading; the --problem check
written once; the timed loop's defaults in one place (harness/protocol.py)."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from grader.errors import DockerUnavailable, GraderError, UsageError
from grader.grading import factory
from grader.grading.config import GradingOptions, Presentation, RunOptions
from grader.grading.grader import Grader
from grader.grading.settings import GradingSettings
from grader.harness import protocol
from grader.intake.tools import create_bundle
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.run.jobs import TimingKnobs
from grader.sandbox import docker_engine
from grader.suite.load import check_problems, load_suite

PACKAGE = REPO / "grader"
EXAMPLE = REPO / "examples" / "triton"


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text("utf-8"))
            for p in sorted(PACKAGE.rglob("*.py"))}


def _called(tree: ast.Module, name: str) -> bool:
    """Whether `tree` calls `name` (as a bare name or an attribute)."""
    return any(isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == name)
        or (isinstance(n.func, ast.Attribute) and n.func.attr == name)) for n in ast.walk(tree))


def test_the_engine_is_made_in_one_place() -> None:
    assert _called(ast.parse("e = DockerEngine(c)"), "DockerEngine")  # the check finds it
    assert not _called(ast.parse('e = "DockerEngine()"  # DockerEngine()'), "DockerEngine")
    makers = sorted(m for m, tree in _modules().items() if _called(tree, "DockerEngine"))
    assert makers == ["sandbox/docker_engine.py"]


class _Client:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail

    def ping(self) -> bool:
        if self.fail is not None:
            raise self.fail
        return True


def test_get_engine_gives_the_docker_engine_or_says_none_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = _Client()
    monkeypatch.setattr(docker, "from_env", lambda timeout: client)
    engine = docker_engine.get_engine()
    assert type(engine) is docker_engine.DockerEngine and engine.client is client
    assert type(engine.clone()) is docker_engine.DockerEngine  # a worker's own, the same way
    monkeypatch.setattr(docker, "from_env", lambda timeout: _Client(
        docker.errors.DockerException("no socket")))
    with pytest.raises(DockerUnavailable, match="no Docker engine answers: no socket"):
        docker_engine.get_engine()


def test_every_grading_is_built_by_the_factory() -> None:
    trees = _modules()
    for name in ("Grader", "Detector"):
        assert sorted(m for m, t in trees.items() if _called(t, name)) == [
            "grading/factory.py"], name
    # grader run, a round's entry and its prepared references, selftest; suite check's
    # reference sandbox.
    assert sorted(m for m, t in trees.items() if _called(t, "build_grader")) == [
        "cli/selftest.py", "grading/runner.py", "round/conduct.py", "round/entry.py"]
    assert sorted(m for m, t in trees.items() if _called(t, "reference_sandbox")) == [
        "cli/suite.py"]


def test_the_factory_names_the_policy_and_takes_a_given_engine() -> None:
    engine = object()
    grader = factory.build_grader(GradingOptions(bundle=Path("b.tar"), out_dir=Path("o")),
                                  lambda _m: None, engine=engine)  # type: ignore[arg-type]
    assert (grader.engine is engine
            and grader.detector.policy.name == grader.cfg.settings.policy)
    with pytest.raises(GraderError, match="no-such-policy"):
        factory.build_grader(GradingOptions(
            bundle=Path("b.tar"), out_dir=Path("o"),
            settings=GradingSettings(policy="no-such-policy")), lambda _m: None,
            engine=engine)  # type: ignore[arg-type]


def test_grader_run_opens_and_hashes_the_bundle_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """grader run: the suite's checks, the output folder's key and the grading take the one
    submission the run opened (issue 33: runner, packing and Grader each opened it)."""
    from grader.grading import grader as grading
    from grader.grading import outdir, runner

    bundle = tmp_path / "b.tar"
    create_bundle(EXAMPLE, bundle)
    sha = hashlib.sha256(bundle.read_bytes()).hexdigest()
    opened: list[Path] = []
    real_open = grading.open_bundle

    def open_bundle(path: Path, work: Path) -> Any:
        opened.append(path)
        return real_open(path, work)

    keys: list[str] = []
    real_prepare = outdir.prepare
    graded: list[str] = []

    def prepare(out: Path, key: str, **kw: Any) -> Any:
        keys.append(key)
        return real_prepare(out, key, **kw)

    def grade(self: Grader, sub: Any, suite: Any) -> Any:
        graded.append(sub.sha256)
        raise UsageError("stop here")  # the grading itself is not this test's

    monkeypatch.setattr(grading, "open_bundle", open_bundle)
    monkeypatch.setattr(outdir, "prepare", prepare)
    monkeypatch.setattr(factory, "get_engine", object)
    monkeypatch.setattr(Grader, "reap_dead", lambda self: None)
    monkeypatch.setattr(Grader, "reap", lambda self: None)
    monkeypatch.setattr(Grader, "grade", grade)
    with pytest.raises(UsageError, match="stop here"):
        runner.grade_bundle(RunOptions(
            grading=GradingOptions(bundle=bundle, out_dir=tmp_path / "out"),
            presentation=Presentation(quiet=True), suite="demo"))
    assert opened == [bundle] and keys == [sha] and graded == [sha]
    assert all(not _called(t, "open_bundle") for m, t in _modules().items()
               if m in ("grading/runner.py", "intake/packing.py"))


def test_the_unknown_problem_check_is_written_once() -> None:
    spelled = sorted(m for m, tree in _modules().items() for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and isinstance(n.value, str)
                     and "is not in suite" in n.value)
    assert spelled == ["suite/load.py"]
    check_problems(load_suite(PROBLEM_BUNDLES / "demo"), ("vector_add",))  # known: no error


def test_the_timing_defaults_have_one_source() -> None:
    from grader.harness.timing import time_kernel

    knobs = TimingKnobs()
    assert (knobs.min_samples, knobs.max_samples, knobs.l2_flush_bytes, knobs.rse_target,
            knobs.budget_s) == (protocol.MIN_SAMPLES, protocol.MAX_SAMPLES,
                                protocol.L2_FLUSH_BYTES, protocol.RSE_TARGET, protocol.BUDGET_S)
    defaults = {k: p.default for k, p in inspect.signature(time_kernel).parameters.items()
                if p.default is not inspect.Parameter.empty}
    for field in dataclasses.fields(TimingKnobs):
        if field.name in defaults:
            assert defaults[field.name] == getattr(knobs, field.name), field.name
    assert {"min_samples", "max_samples", "rse_target", "budget_s"} <= set(defaults)
    # The flush size: spelled in protocol.py alone (the entry's clock falls back on it), of
    # the modules that time (the harness) or send the knobs (run/).
    flush = sorted(m for m, tree in _modules().items() if m.startswith(("harness/", "run/"))
                   for n in ast.walk(tree)
                   if isinstance(n, ast.BinOp) and ast.unparse(n) == "256 << 20")
    assert flush == ["harness/protocol.py"]

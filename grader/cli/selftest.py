"""`grader selftest`: grade the case folders (hostile entries by default) on this host and say,
case by case, whether the grader gave the verdict it must. The same code drives
tests/integration/test_cases.py."""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from grader.grading.config import GradingOptions
from grader.grading.factory import build_grader
from grader.grading.progress import Progress
from grader.grading.settings import GradingSettings
from grader.intake.tools import create_bundle
from grader.model.results import Report
from grader.paths import REPO
from grader.sandbox.docker_engine import DockerEngine
from grader.verdicts import Verdict

CASES = REPO / "tests" / "cases"


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    case: str
    expected: dict[str, Verdict]
    got: dict[str, Verdict]
    known_hole: str | None  # the case.toml's `xfail` reason, if any
    leftovers: int  # containers of the run still there afterwards
    report: Report

    @property
    def ok(self) -> bool:
        return self.got == self.expected and self.leftovers == 0


def case_dirs(groups: tuple[str, ...]) -> list[Path]:
    return sorted(p for g in groups if (CASES / g).is_dir() for p in (CASES / g).iterdir()
                  if (p / "case.toml").is_file())


@dataclass(frozen=True, kw_only=True)
class Target:
    """Where the cases run: the CPU interpreter (CI), or a GPU (`--device cuda` with a runtime
    that has CUDA: `host` on our H200, `cuda` with a CUDA base image)."""

    device: str = "cpu"
    runtime: str = "cpu"
    python: str | None = None


def grade_case(engine: DockerEngine, case: Path, workdir: Path,
               target: Target = Target()) -> CaseResult:
    spec = tomllib.loads((case / "case.toml").read_text())
    source = REPO / spec["source"] if "source" in spec else case / "submission"
    bundle = workdir / "bundle.tar"
    create_bundle(source, bundle)
    settings = GradingSettings.model_validate({
        "shapes": spec.get("shapes", "smoke"), "problems": tuple(spec.get("problems", ())),
        "seeds_per_shape": 2, "timeout_s": float(spec.get("timeout_s", 120)),
        "device": target.device, "runtime": target.runtime})
    cfg = GradingOptions(bundle=bundle, out_dir=workdir / "out", settings=settings,
                         python=target.python)
    if target.device == "cpu":  # on a GPU, a CUDA context needs the larger defaults
        cfg = replace(cfg, base_entry_limits=replace(cfg.base_entry_limits,
                                                     memory_bytes=2 << 30))
    grader = build_grader(cfg, Progress(), engine=engine)
    report = grader.open_and_grade()
    left = engine.client.containers.list(
        all=True, filters={"label": f"grader.session={grader.session}"})
    return CaseResult(case=f"{case.parent.name}/{case.name}",
                      expected={pid: Verdict(v) for pid, v in spec["expect"].items()},
                      got={p.id: p.verdict for p in report.problems},
                      known_hole=spec.get("xfail"), leftovers=len(left), report=report)


def run_selftest(groups: tuple[str, ...], engine: DockerEngine,
                 target: Target = Target()) -> list[CaseResult]:
    results = []
    for case in case_dirs(groups):
        work = Path(tempfile.mkdtemp(prefix="grader-selftest-"))
        try:
            results.append(grade_case(engine, case, work, target))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return results

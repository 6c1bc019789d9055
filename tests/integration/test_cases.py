"""Grade every case folder under tests/cases/ (but intake/) and check its expected verdicts."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from grader.bundle_tools import create_bundle
from grader.config import RunConfig
from grader.detect.policy import load_policy
from grader.detection import Detector
from grader.grade import Grader
from grader.paths import REPO
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker
CASES = Path(__file__).resolve().parents[1] / "cases"
GROUPS = ("grading", "fallback", "hostile")


def _cases() -> list[object]:
    """Every case folder; one whose case.toml says `xfail = "why"` is a known, open hole."""
    out: list[object] = []
    for g in GROUPS:
        if not (CASES / g).is_dir():
            continue
        for p in sorted((CASES / g).iterdir()):
            if not (p / "case.toml").is_file():
                continue
            why = tomllib.loads((p / "case.toml").read_text()).get("xfail")
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(p, marks=marks, id=f"{g}/{p.name}"))
    return out


@pytest.mark.parametrize("case", _cases())
def test_case(case: Path, engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = tomllib.loads((case / "case.toml").read_text())
    source = REPO / spec["source"] if "source" in spec else case / "submission"
    bundle = tmp_path / "bundle.tar"
    create_bundle(source, bundle)
    expect = {pid: Verdict(v) for pid, v in spec["expect"].items()}
    cfg = RunConfig(bundle=bundle, out_dir=tmp_path / "out", shapes=spec.get("shapes", "smoke"),
                    problems=tuple(spec.get("problems", ())), seeds_per_shape=2)
    cfg = replace(cfg, entry_limits=replace(cfg.entry_limits,
                                            wall_s=float(spec.get("timeout_s", 120)),
                                            memory_bytes=2 << 30))
    policy = load_policy(cfg.policy)
    grader = Grader(cfg, engine, Detector(policy=policy), lambda _msg: None)
    report = grader.run()
    got = {p.id: p.verdict for p in report.problems}
    assert got == expect, {p.id: [(s.id, s.verdict, s.detail, s.error_excerpt)
                                  for s in p.shapes] for p in report.problems}
    # nothing of this run is left behind
    assert not engine.client.containers.list(
        all=True, filters={"label": f"grader.session={grader.session}"})

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
GROUPS = ("grading", "fallback")


def _cases() -> list[Path]:
    return sorted(p for g in GROUPS for p in (CASES / g).iterdir() if (p / "case.toml").is_file())


@pytest.mark.parametrize("case", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
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
    report = Grader(cfg, engine, Detector(policy=policy), lambda _msg: None).run()
    got = {p.id: p.verdict for p in report.problems}
    assert got == expect, {p.id: [(s.id, s.verdict, s.detail, s.error_excerpt)
                                  for s in p.shapes] for p in report.problems}
    # nothing of this run is left behind
    assert not engine.client.containers.list(all=True, filters={"label": "grader.session"})

"""`grader images list` and `images prune` (issue 34, friction 8): each image's own size, not
the 2080 MB of the runtime every problem image is built on; prune narrowed to a suite or an
age. No Docker: the engine's answers are given."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from grader.cli.tools import image_lines, prune_targets
from grader.images import problem_plan, problem_repo
from grader.paths import PROBLEM_BUNDLES
from grader.sandbox.docker_engine import DockerEngine, ImageInfo
from grader.suite.load import load_suite

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


def _img(tag: str, kind: str = "problem", *, days: float = 0, own: int | None = 5_000_000,
         image_id: str | None = None) -> ImageInfo:
    return ImageInfo(tag=tag, id=image_id or f"sha256:{tag}", size_bytes=2_080_000_000,
                     kind=kind, created=(NOW - timedelta(days=days)).isoformat()[:19],
                     unique_bytes=own)


def test_the_engine_s_disk_usage_gives_each_image_s_own_bytes() -> None:
    engine = DockerEngine.__new__(DockerEngine)
    engine.client = SimpleNamespace(df=lambda: {"Images": [
        {"Id": "a", "Size": 2_080_000_000, "SharedSize": 2_075_000_000},
        {"Id": "b", "Size": 10, "SharedSize": -1}]})  # -1: the engine did not count it
    assert engine.unique_sizes() == {"a": 5_000_000}


def test_list_shows_own_and_shared_sizes_and_a_total() -> None:
    lines = image_lines([_img("grader-problem-demo-matmul:1"),
                         _img("grader-problem-demo-rmsnorm:1"),
                         _img("grader-runtime-cpu:1", "runtime", own=2_075_000_000)])
    assert "own" in lines[0] and "with shared" in lines[0]
    assert "5.0 MB" in lines[1] and "2080 MB" in lines[1]
    assert lines[-1].startswith("3 image(s): 2085 MB of their own")
    unknown = image_lines([_img("grader-problem-demo-matmul:1", own=None)])
    assert len(unknown) == 2 and " - " in unknown[1]  # no total from sizes it does not know


def test_prune_by_suite_and_by_age() -> None:
    demo = load_suite(PROBLEM_BUNDLES / "demo")
    repos = {problem_repo(demo.id, pid) for pid in demo.problems}
    tag = problem_plan("rt", demo.id, demo.problems["matmul"]).tag
    assert tag.partition(":")[0] in repos  # the plan's tag and the filter agree
    found = [_img(tag, days=30), _img("grader-problem-demo-extra-matmul:1", days=30),
             _img("grader-problem-llm-inference-rope:1", days=1),
             _img("grader-runtime-cpu:1", "runtime", days=30)]
    def names(**kw: object) -> list[str]:
        args = {"everything": False, "repos": None, "older_than": None, "now": NOW, **kw}
        return [i.tag for i in prune_targets(found, **args)]  # type: ignore[arg-type]
    # a suite named "demo-extra" is not the demo suite, though its tags start alike
    assert names(repos=repos) == [tag]
    assert names(older_than=timedelta(days=7)) == [tag, "grader-problem-demo-extra-matmul:1"]
    assert names() == [i.tag for i in found[:3]]  # problem images; the runtime stays
    assert len(names(everything=True)) == 4

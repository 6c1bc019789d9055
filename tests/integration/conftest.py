"""Fixtures for tests against the real Docker engine (run with --run-docker).

The case folders (test_cases.py) are graded ahead (case_pool.py): at the end of collection
their images start building in a process of their own, then a pool of worker processes grades
them while the other tests run. The integration tests run after the others (the unit tests
run while the images build), test_cases.py last; it takes the pool's results.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from case_pool import Ahead, CasePool

from grader.paths import PROBLEM_BUNDLES

HERE = Path(__file__).parent
CASES_FILE = HERE / "test_cases.py"
AHEAD = pytest.StashKey[Ahead]()


def _is_case(item: pytest.Item) -> bool:
    return item.path == CASES_FILE


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The integration tests after the others, test_cases.py last."""
    def rank(item: pytest.Item) -> int:
        return 2 if _is_case(item) else 1 if HERE in item.path.parents else 0

    items.sort(key=rank)  # stable: each group keeps its order


def _selected_cases(session: pytest.Session) -> list[Path]:
    """The case folders of the selected, not skipped test_cases.py tests, in their order."""
    return [it.callspec.params["case"] for it in session.items
            if _is_case(it) and isinstance(it, pytest.Function)
            and it.callspec.params.get("case") is not None and not it.get_closest_marker("skip")]


def pytest_collection_finish(session: pytest.Session) -> None:
    if not session.config.option.collectonly and (cases := _selected_cases(session)):
        session.config.stash[AHEAD] = Ahead(cases)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if (ahead := session.config.stash.get(AHEAD, None)) is not None:
        ahead.close()


@pytest.fixture(scope="session")
def engine():  # type: ignore[no-untyped-def]
    from grader.sandbox.docker_engine import get_engine

    return get_engine()


@pytest.fixture(scope="session")
def runtime(request: pytest.FixtureRequest, engine):  # type: ignore[no-untyped-def]
    """The CPU runtime image, built once if missing (debootstrap + offline wheels); when
    cases are selected, by their image build (case_pool.Ahead)."""
    from grader.sandbox.runtimes import RuntimeConfig, runtime_for

    if (ahead := request.config.stash.get(AHEAD, None)) is not None:
        ahead.images()
    return runtime_for(RuntimeConfig()).ensure_image(engine)


@pytest.fixture(scope="session")
def demo_suite():  # type: ignore[no-untyped-def]
    from grader.suite.load import load_suite

    return load_suite(PROBLEM_BUNDLES / "demo")


@pytest.fixture()
def session(engine) -> Iterator[str]:  # type: ignore[no-untyped-def]
    name = f"test-{uuid.uuid4().hex[:8]}"
    yield name
    engine.reap(name)


@pytest.fixture(scope="session")
def case_pool(request: pytest.FixtureRequest) -> CasePool | None:
    """The pool grading the selected cases (case_pool.py); None when no case is selected."""
    ahead = request.config.stash.get(AHEAD, None)
    return None if ahead is None else ahead.pool()


@pytest.fixture(autouse=True)
def _images_first(request: pytest.FixtureRequest) -> None:
    """Every integration test starts once the cases' images are built: one that grades
    without the `runtime` fixture (through the CLI) would build the same images again."""
    if (ahead := request.config.stash.get(AHEAD, None)) is not None:
        ahead.images()

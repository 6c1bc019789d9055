"""Fixtures for tests against the real Docker engine (run with --run-docker)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from grader.paths import PROBLEM_BUNDLES


@pytest.fixture(scope="session")
def engine():  # type: ignore[no-untyped-def]
    from grader.sandbox.docker_engine import DockerEngine

    return DockerEngine()


@pytest.fixture(scope="session")
def runtime(engine):  # type: ignore[no-untyped-def]
    """The CPU runtime image, built once if missing (debootstrap + offline wheels)."""
    from grader.images import RuntimeConfig, ensure_runtime

    return ensure_runtime(engine, RuntimeConfig())


@pytest.fixture(scope="session")
def demo_suite():  # type: ignore[no-untyped-def]
    from grader.suite.load import load_suite

    return load_suite(PROBLEM_BUNDLES / "demo")


@pytest.fixture()
def session(engine) -> Iterator[str]:  # type: ignore[no-untyped-def]
    name = f"test-{uuid.uuid4().hex[:8]}"
    yield name
    engine.reap(name)

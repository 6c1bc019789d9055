"""Test options: Docker tests run only with --run-docker, GPU tests only with --run-gpu."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-docker", action="store_true", help="run tests needing Docker")
    parser.addoption("--run-gpu", action="store_true", help="run tests needing an NVIDIA GPU")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "docker" in item.keywords and not config.getoption("--run-docker"):
            item.add_marker(pytest.mark.skip(reason="needs --run-docker"))
        if "gpu" in item.keywords and not config.getoption("--run-gpu"):
            item.add_marker(pytest.mark.skip(reason="needs --run-gpu (an NVIDIA GPU host)"))

"""RunConfig: the options as the user gives them, and what the run derives from them."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from grader.errors import UsageError
from grader.grading.config import ENTRY_SETUP_S, RunConfig
from grader.paths import PROBLEM_BUNDLES
from grader.sandbox.spec import Limits


def _cfg(**kw: object) -> RunConfig:
    return RunConfig(bundle=Path("b.tar"), out_dir=Path("o"), **kw)  # type: ignore[arg-type]


def test_defaults_derive_the_cpu_run() -> None:
    cfg = _cfg(suite_roots=())
    assert cfg.suite_roots == (PROBLEM_BUNDLES,)  # empty: the checkout's suites
    assert cfg.secret is None and cfg.shape_selection == "auto"
    # The entry's set-up is allowed on top of its limit, which counts once the harness arms it.
    assert cfg.entry_limits == Limits(setup_s=ENTRY_SETUP_S)
    assert cfg.entry_limits is cfg.base_entry_limits
    assert cfg.reference_limits == cfg.base_reference_limits
    rt = cfg.runtime_config
    assert (rt.kind, rt.python) == ("cpu", "python3")


def test_cuda_and_timeout_adjust_the_limits() -> None:
    cfg = _cfg(device="cuda", runtime="host", timeout=42.0)
    assert (cfg.entry_limits.memory_bytes, cfg.entry_limits.pids, cfg.entry_limits.cpus,
            cfg.entry_limits.wall_s) == (32 << 30, 1024, 4.0, 42.0)
    assert (cfg.reference_limits.memory_bytes, cfg.reference_limits.wall_s) == (64 << 30, 600.0)
    assert cfg.runtime_config.python == sys.executable  # host: this interpreter by default
    cuda = replace(cfg, runtime="cuda", cuda_base="base:1", python="python3.12")
    assert (cuda.runtime_config.kind, cuda.runtime_config.cuda_base,
            cuda.runtime_config.python) == ("cuda", "base:1", "python3.12")


def test_secret_and_practice_are_checked_as_the_config_is_made() -> None:
    assert _cfg(seed_secret="00ff").secret == b"\x00\xff"
    with pytest.raises(UsageError, match="not hexadecimal"):
        _cfg(seed_secret="zz")
    assert _cfg(practice=True).shape_selection == "smoke"
    with pytest.raises(UsageError, match="--practice grades public shapes only"):
        _cfg(practice=True, shapes="all")
    with pytest.raises(UsageError, match="--device cuda with --runtime cpu"):
        replace(_cfg(), device="cuda")  # replace checks too

"""The staged options (issue 33): each stage as the user gives it, what each refuses as it is
made, and what the run derives from them."""

from __future__ import annotations

import json
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest

from grader.errors import UsageError
from grader.grading.checkpoint import RunKey
from grader.grading.config import (
    AHEAD_CORES,
    ENTRY_SETUP_S,
    GradingOptions,
    Presentation,
    RunOptions,
    Scheduling,
)
from grader.grading.settings import CHECKPOINTED, GradingSettings, Narrowing
from grader.grading.worker import GradingContext
from grader.paths import PROBLEM_BUNDLES
from grader.round.model import Settings
from grader.sandbox.spec import Limits


def _cfg(settings: GradingSettings | None = None, **kw: object) -> GradingOptions:
    return GradingOptions(bundle=Path("b.tar"), out_dir=Path("o"),  # type: ignore[arg-type]
                          settings=settings or GradingSettings(), **kw)


def test_defaults_derive_the_cpu_run() -> None:
    cfg = _cfg(suite_roots=())
    assert cfg.suite_roots == (PROBLEM_BUNDLES,)  # empty: the checkout's suites
    assert cfg.secret is None and cfg.settings.shapes == "auto"
    # The entry's set-up is allowed on top of its limit, which counts once the harness arms it.
    assert cfg.entry_limits == Limits(setup_s=ENTRY_SETUP_S)
    assert cfg.entry_limits is cfg.base_entry_limits
    assert cfg.reference_limits == cfg.base_reference_limits
    rt = cfg.runtime_config
    assert (rt.kind, rt.python) == ("cpu", "python3")


def test_cuda_and_timeout_adjust_the_limits() -> None:
    cfg = _cfg(GradingSettings(device="cuda", runtime="host", timeout_s=42.0))
    assert (cfg.entry_limits.memory_bytes, cfg.entry_limits.pids, cfg.entry_limits.cpus,
            cfg.entry_limits.wall_s) == (32 << 30, 1024, 4.0, 42.0)
    assert (cfg.reference_limits.memory_bytes, cfg.reference_limits.wall_s) == (64 << 30, 600.0)
    assert cfg.runtime_config.python == sys.executable  # host: this interpreter by default
    cuda = replace(cfg, settings=cfg.settings.but(runtime="cuda"), cuda_base="base:1",
                   python="python3.12")
    assert (cuda.runtime_config.kind, cuda.runtime_config.cuda_base,
            cuda.runtime_config.python) == ("cuda", "base:1", "python3.12")


def test_secret_and_practice_are_checked_as_the_config_is_made() -> None:
    assert _cfg(seed_secret="00ff").secret == b"\x00\xff"
    with pytest.raises(UsageError, match="not hexadecimal"):
        _cfg(seed_secret="zz")
    practice = Presentation(practice=True)
    assert RunOptions(grading=_cfg(), presentation=practice).grading.settings.shapes == "smoke"
    with pytest.raises(UsageError, match="--practice grades public shapes only"):
        RunOptions(grading=_cfg(GradingSettings(shapes="all")), presentation=practice)
    with pytest.raises(UsageError, match="--device cuda with --runtime cpu"):
        GradingSettings().but(device="cuda")  # a changed copy is checked too
    with pytest.raises(UsageError, match="--device cuda with --runtime cpu"):
        GradingSettings(device="cuda")


def test_each_stage_refuses_what_contradicts_it() -> None:
    """The grading's options refuse --resume with a narrowing, whichever narrows."""
    for narrowing in (Narrowing(keywords=("k",)), Narrowing(only_shapes=("p/s",))):
        with pytest.raises(UsageError, match="--resume finishes the run") as err:
            _cfg(resume=True, narrowing=narrowing)
        assert "resume first" in (err.value.hint or "")
    assert _cfg(resume=True).resume  # no narrowing: resumed as it was started


def test_the_worker_gets_no_presentation() -> None:
    """What a worker reads of the options: the settings, narrowing, scheduling and limits;
    neither the presentation nor the run's paths (issue 33: RunConfig went down whole)."""
    names = {f.name for f in fields(GradingContext)}
    assert {"settings", "narrowing", "scheduling", "entry_limits", "reference_limits"} <= names
    shown = {f.name for f in fields(Presentation)}
    assert not names & (shown | {"cfg", "bundle", "out_dir", "presentation"})
    assert not {f.name for f in fields(GradingOptions)} & shown  # the Grader's neither


def test_scheduling_spreads_the_work() -> None:
    sched = Scheduling(gpus=(1, 3), jobs=4)
    assert sched.slots("cuda") == (1, 3) and sched.slots("cpu") == (0, 1, 2, 3)
    assert sched.ahead(1, cores=AHEAD_CORES) == 2 and sched.ahead(1, cores=2) == 0


def test_run_key_and_round_settings_are_the_one_settings_type() -> None:
    """The checkpoint's key and the round's settings hold GradingSettings; the JSON keys they
    are written under did not change."""
    settings = GradingSettings(policy="strict", device="cuda", runtime="host",
                               problems=("b", "a"), timeout_s=9.0)
    key = RunKey(grader_version="1", bundle_sha256="ab" * 32, suite="demo", suite_version="1",
                 settings=settings.for_suite(3))
    assert isinstance(key.settings, GradingSettings) and key.settings.seeds_per_shape == 3
    assert set(key.to_json()) == {"grader_version", "bundle_sha256", "suite", "suite_version",
                                  *CHECKPOINTED}
    assert RunKey.from_json(json.loads(json.dumps(key.to_json()))) == RunKey(
        grader_version="1", bundle_sha256="ab" * 32, suite="demo", suite_version="1",
        settings=GradingSettings(policy="strict", device="cuda", runtime="host",
                                 seeds_per_shape=3))  # problems, timeout: not keyed
    assert issubclass(Settings, GradingSettings)
    round_settings = Settings(**settings.model_dump(), shared_references=False)
    assert list(round_settings.model_dump()) == [
        "policy", "device", "runtime", "hardware", "shapes", "problems", "seeds_per_shape",
        "timeout_s", "shared_references"]  # a manifest's keys, in their order


def test_a_manifest_written_before_reads_back() -> None:
    """A round's settings as a manifest of the grader before issue 33 wrote them."""
    old = {"policy": "triton", "device": "cpu", "runtime": "cpu", "hardware": "auto",
           "shapes": "auto", "problems": ["vector_add"], "seeds_per_shape": None,
           "timeout_s": None, "shared_references": True}
    got = Settings.model_validate_json(json.dumps(old))
    assert got.problems == ("vector_add",) and got.shared_references
    assert json.loads(got.model_dump_json()) == old
    with pytest.raises(ValueError):  # a key it does not know: refused, not dropped
        Settings.model_validate({**old, "speed": "fast"})

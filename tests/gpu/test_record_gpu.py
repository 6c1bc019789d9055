"""The entry's recorder on a real GPU (bench/record_check.py in a fresh process: once
installed, the recorder stays in its process). Run on the H200 with bench/gpu_session.sh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grader.detect.kernels import KernelKind, classify
from grader.paths import REPO

pytestmark = [pytest.mark.gpu]


def _check(what: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"{what}.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "record_check.py"), what,
                           "--json", str(out)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_every_call_has_its_own_kernels(tmp_path: Path) -> None:
    data = _check("scenarios", tmp_path)
    assert data["consistent"], data["problem"]
    runs = data["runs"]
    for call in runs["honest_32MiB"]:
        assert [k["name"] for k in call["kernels"]] == ["add_k"]
        assert call["covered_us"] > 0.5 * call["device_us"]
    # The entry that switched to cuBLAS after its first calls: the switch is in the record.
    kinds = [{classify(k["name"], {"mm_k"}) for k in c["kernels"]} for c in runs["switch"]]
    assert kinds[0] == {KernelKind.OWN_TRITON} and KernelKind.VENDOR in kinds[-1]
    # Host work behind synchronising copies: the copies are there, as host copies.
    assert any(classify(k["name"], set()) == KernelKind.HOST_COPY
               for c in runs["host"] for k in c["kernels"])
    # A kernel on a stream of its own still belongs to its call, beyond the call's events.
    side = runs["side_stream"][-1]
    assert side["kernels"] and sum(k["device_us"] for k in side["kernels"]) > side["device_us"]


def test_an_entry_spin_makes_the_record_inconsistent(tmp_path: Path) -> None:
    data = _check("spin", tmp_path)
    assert not data["consistent"] and "bracketing spins" in data["problem"]

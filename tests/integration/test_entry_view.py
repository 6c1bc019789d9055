"""What the entry sees of the folders the host gives it (issue 19): no host path of ours in
/proc/self/mountinfo, and no fill level of host-written folders beyond its own files. The
probe is the hostile case tests/cases/hostile/fs_view_probe."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from grader.cli.selftest import grade_case
from grader.paths import REPO
from grader.sandbox.runs import RUNS_DIR
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker

CASE = REPO / "tests" / "cases" / "hostile" / "fs_view_probe"
PAGE = 4096


def _views(text: str) -> list[dict[str, Any]]:
    return [json.loads(line.split("FSVIEW ", 1)[1]) for line in text.splitlines()
            if "FSVIEW {" in line]


@pytest.mark.skipif(os.geteuid() != 0, reason="without root the folders are plain host "
                    "folders: their paths and filesystem show (docs/security.md)")
def test_the_entry_sees_no_host_path_and_no_fill_level(engine, runtime,  # type: ignore[no-untyped-def]
                                                       tmp_path: Path) -> None:
    result = grade_case(engine, CASE, tmp_path)
    problem = result.report.problems[0]
    assert problem.verdict == Verdict.POLICY_VIOLATION, problem.detail
    views = _views(problem.stderr_excerpt or "")
    assert {v["when"] for v in views} == {"import", "call"}, problem.stderr_excerpt
    ours = (RUNS_DIR, "grader-in-", "grader-out-", "grader-run-", str(tmp_path),
            tempfile.gettempdir() + "/", str(REPO))
    for view in views:
        mounts = view["mounts"]
        assert isinstance(mounts, list) and mounts
        for root, point, source in mounts:
            for mark in ours:
                assert mark not in root and mark not in source, (root, point, source)
        seen = view["folders"]["/grader/in"]
        # What statvfs shows is the entry's own files (its kernel in .code, its inputs and
        # job; a page each at most), and a size of the same order: neither the reference's
        # outputs nor the host's memory.
        assert seen["used"] <= seen["visible"] + PAGE * (seen["files"] + 1), seen
        assert seen["total"] <= seen["visible"] + PAGE * seen["files"] + (2 << 20), seen
        # /grader/entry is that same tmpfs's .code folder: nothing else.
        code = view["folders"]["/grader/entry"]
        assert (code["used"], code["total"]) == (seen["used"], seen["total"]), code
    at_import = next(v for v in views if v["when"] == "import")["folders"]["/grader/in"]
    at_call = next(v for v in views if v["when"] == "call")["folders"]["/grader/in"]
    assert at_import["files"] == 1  # its kernel file alone: no input before its import
    assert at_call["files"] > at_import["files"]  # then its inputs and job

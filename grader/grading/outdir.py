"""The output folder of `grader run`: one run's reports, never two runs' mixed (issue 23).

Reusing `-o` replaced `report.json` and `report.html` but left an older `report.md` and
`report.junit.xml` beside them, of another submission; and `.checkpoint/` stayed after a run
that needed no resume. Here a fresh run refuses a folder whose `report.json` is another
bundle's (unless `--force`), removes the report files an earlier run left, and once the
reports are written removes the checkpoint (unless `--keep-checkpoint`, or a problem is
`infra_error`, which `--resume` grades again).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from grader.errors import UsageError
from grader.grading.checkpoint import CHECKPOINT_DIR, host_fs
from grader.model.results import Report
from grader.report.render import FILENAMES
from grader.verdicts import Verdict


def _owner(report_json: Path) -> tuple[str | None, str]:
    """The bundle digest and submission name of an earlier report (None when unreadable)."""
    try:
        sub = json.loads(report_json.read_text(encoding="utf-8")).get("submission", {})
        return str(sub["bundle_sha256"]), str(sub.get("name", "?"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, "unreadable"


def prepare(out_dir: Path, bundle_sha256: str, *, resume: bool, force: bool) -> list[Path]:
    """Make `out_dir` ready for a fresh run of the bundle with this digest; the paths removed.

    A resumed run keeps everything: the checkpoint's own checks (checkpoint.py) say whether
    it is the same run.
    """
    if resume or not out_dir.is_dir():
        return []
    old = out_dir / FILENAMES["json"]
    if old.is_file() and not force:
        sha, name = _owner(old)
        if sha != bundle_sha256:
            raise UsageError(
                f"-o {out_dir}: holds the reports of another submission ({name!r}); a run "
                "there would mix its reports with that one's",
                hint="choose another -o folder, or pass --force to replace those reports")
    removed = []
    with host_fs(f"cannot clear the earlier reports in {out_dir}", hint="check the folder's "
                 "permissions, or choose another -o folder"):
        for name in FILENAMES.values():
            path = out_dir / name
            if path.is_file() or path.is_symlink():
                path.unlink()
                removed.append(path)
    return removed


def finish(out_dir: Path, rep: Report, *, keep_checkpoint: bool) -> bool:
    """After the reports are written: remove the checkpoint unless it is still of use. True
    when it was removed."""
    retry = any(p.verdict in (Verdict.INFRA_ERROR, Verdict.REFERENCE_ERROR)
                for p in rep.problems)
    cp = out_dir / CHECKPOINT_DIR
    if keep_checkpoint or retry or not cp.is_dir():
        return False
    shutil.rmtree(cp, ignore_errors=True)
    return not cp.exists()

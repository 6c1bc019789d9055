"""One round's request and its presentation, and what the round does for each entry wherever
the entry is graded (on this host, conduct.py; on a Ray node, on_ray.py): its `grader run`
options, and the record of its outcome in the round folder."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from grader.grading.checkpoint import host_fs
from grader.grading.config import GradingOptions
from grader.grading.progress import Progress
from grader.report.render import write_reports
from grader.round.commit import report_differences
from grader.round.entry import EntryResult
from grader.round.model import ManifestEntry, Outcome
from grader.round.store import SECRET, RoundDir
from grader.suite.load import Suite


@dataclass(frozen=True, kw_only=True)
class RoundRequest:
    """What a round grades and commits to: its entries, suite, folder, every entry's grading
    and whether references are shared. How its outcome is shown is `RoundPresentation`."""

    paths: tuple[Path, ...]
    suite: str | None  # an id or a folder; None: the round's own (round/suite.py)
    out_dir: Path
    run: GradingOptions  # every entry's grading (its bundle and out_dir are set per entry)
    resume: bool = False
    shared_references: bool = True


@dataclass(frozen=True, kw_only=True)
class RoundPresentation:
    """How a round's outcome is shown and kept, never what it grades or commits to (issue
    33's staged options: beside the RoundRequest, as grading/config.Presentation beside
    `grader run`'s grading; that one's --json, --public, --fail-on and output-folder
    handling have no meaning for a round)."""

    formats: tuple[str, ...] = ("json", "html")  # each entry's reports (json always)
    quiet: bool = False
    log_format: str = "human"  # human | json (see grader.grading.progress)

    @property
    def entry_formats(self) -> tuple[str, ...]:
        """Each entry's report formats, json first and always."""
        return tuple(dict.fromkeys(("json", *self.formats)))


def suite_digest(suite: Suite) -> str:
    """The suite's content hash: suite.toml, weights.toml and each problem's trusted files."""
    h = hashlib.sha256()
    for name in ("suite.toml", "weights.toml"):
        h.update(name.encode() + b"\0" + hashlib.sha256(
            (suite.directory / name).read_bytes()).digest())
    for pid in sorted(suite.problems):
        h.update(pid.encode() + b"\0" + suite.problems[pid].digest().encode())
    return h.hexdigest()


def entry_request(req: RoundRequest, rd: RoundDir, entry: ManifestEntry, secret: bytes,
                  out_dir: Path | None = None) -> GradingOptions:
    assert entry.bundle is not None
    return replace(req.run, bundle=rd.root / entry.bundle,
                   out_dir=out_dir or rd.entry_dir(entry.name), seed_secret=secret.hex(),
                   resume=False)


def record(rd: RoundDir, show: RoundPresentation, got: EntryResult, progress: Progress
           ) -> Outcome:
    """Write an entry's reports, then its outcome (the checkpoint says graded only once its
    report.json is whole)."""
    outcome = got.outcome
    if got.report is not None:
        with host_fs(f"cannot write the reports of {outcome.name}"):
            write_reports(got.report, rd.entry_dir(outcome.name), list(show.entry_formats))
        outcome = outcome.model_copy(update={"report_sha256": rd.report_sha256(outcome.name)})
        committed = rd.load_commitment()
        if committed is not None:
            for diff in report_differences(committed, got.report, ids=outcome.node is None):
                progress.say(f"warning: {outcome.name}: not the committed image: {diff}",
                             "note")
    rd.save_outcome(outcome)
    # The entry's grading kept a copy of the round's secret beside its own checkpoint
    # (grading/checkpoint.py); the round passes the secret to every grading, so the copy serves
    # nothing and would leak the secret with a published entry folder.
    (rd.entry_dir(outcome.name) / SECRET).unlink(missing_ok=True)
    return outcome

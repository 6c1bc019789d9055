"""The round's records: its manifest (published), each entry's outcome (its checkpoint), and
its leaderboard. Frozen pydantic models, written as JSON into the round folder.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from grader.grading.settings import GradingSettings
from grader.model.scores import Frozen
from grader.verdicts import Verdict

FORMAT: Literal[1] = 1


class SuiteRef(Frozen):
    id: str
    version: str
    weights_version: str
    digest: str  # sha256 over suite.toml, weights.toml and every problem's trusted files


class Settings(GradingSettings):
    """What every entry of the round is graded under (the grading settings, grading/settings.py)
    and whether the round computes each reference once; a resumed round must match them."""

    shared_references: bool = True


class ManifestEntry(Frozen):
    name: str  # unique in the round: the folder entries/<name>/
    source: str  # the path it was given as
    renamed_from: str | None = None  # its name collided with an earlier entry's
    declared_name: str | None = None  # the bundle's own [submission] name (entry text)
    bundle: str | None = None  # bundles/<name>.tar, relative to the round folder
    sha256: str | None = None
    refused: str | None = None  # why it was not graded (the intake, another suite)


class ImageRef(Frozen):
    tag: str  # a content hash of its Dockerfile and build context (grader/images.py)
    id: str  # the image itself, as the committing host's engine names it (sha256:...)


class Commitment(Frozen):
    """What an organiser publishes before a round (`grader round commit`): the secret's
    hash, the suite's content hash, the settings and the images every entry will be graded
    with. The round refuses to start under anything else (round/commit.py)."""

    format: Literal[1] = FORMAT
    created_at: datetime
    grader_version: str
    suite: SuiteRef
    settings: Settings
    seed_commitment: str  # sha256 of the round's secret
    images: dict[str, ImageRef]  # "runtime" and each problem graded, as a report's images


class Manifest(Frozen):
    """What anyone can check a round against: the bundles' hashes, the suite's version and
    content hash, the seed secret's commitment and the grader's version."""

    format: Literal[1] = FORMAT
    round_id: str
    created_at: datetime
    grader_version: str
    suite: SuiteRef
    settings: Settings
    seed_commitment: str  # sha256 of the round's secret; the secret itself stays private
    entries: list[ManifestEntry]
    # sha256 of the commitment.json published before the round (None: none was published)
    commitment_sha256: str | None = None


class RefUse(Frozen):
    problem: str
    key: str  # the batch's reference key (grading.reuse.batch_key)
    cases: int
    computed: bool  # True: this entry ran the reference (and kept it); False: reused it


# The name a prepared batch gives as its `computed_by` on the leaderboard.
PREPARED_BY = "(round prepare)"
# The statuses of a batch that `grader round prepare` computed and kept.
PREPARED_KEPT = ("kept", "kept light")


class PreparedRef(Frozen):
    """One batch's reference as `grader round prepare` left it (grading/prepare.py)."""

    problem: str
    key: str  # "" where its problem could not be planned (detail says why)
    cases: int
    # kept: computed and kept; kept light: kept without its correctness outputs (each entry
    # computes those alone); kept already: found kept; not kept: computed, no room to keep
    # it; failed: the reference failed (each entry runs it, and gets the verdict it gives)
    status: Literal["kept", "kept light", "kept already", "not kept", "failed"]
    detail: str = ""
    wall_s: float = 0.0
    bytes: int = 0  # its reference's folder, where one ran


class Prepared(Frozen):
    """The round's references computed before its entries (`grader round prepare`): its
    last run's record."""

    format: Literal[1] = FORMAT
    created_at: datetime
    grader_version: str
    wall_s: float
    batches: list[PreparedRef]


class Outcome(Frozen):
    """One entry's grading as the round's checkpoint keeps it."""

    format: Literal[1] = FORMAT
    name: str
    status: Literal["graded", "failed"]  # failed: the grader's failure, graded again on resume
    error: str | None = None
    report_sha256: str | None = None  # of entries/<name>/report.json
    references: list[RefUse] = Field(default_factory=list)
    wall_s: float | None = None
    node: str | None = None  # the Ray node that graded it (None: this host)


class BoardRow(Frozen):
    rank: int | None  # shared by equal scores ("1, 1, 3"); None: not ranked (not graded)
    entry: str
    declared_name: str | None
    status: Literal["graded", "refused", "failed"]
    error: str | None = None
    s_agg: float | None = None
    problems: dict[str, float | None] = Field(default_factory=dict)  # S_i per problem
    verdicts: dict[Verdict, int] = Field(default_factory=dict)  # shapes per verdict
    shapes: int = 0
    correct_shapes: int = 0
    graded: str | None = None  # which shapes were graded (Summary.coverage): smoke only...
    report_sha256: str | None = None


class ReferenceBatch(Frozen):
    problem: str
    key: str
    cases: int
    computed_by: list[str]  # entries that ran this batch's reference: one when shared
    reused_by: int  # entries that took it from the round's cache


class Board(Frozen):
    format: Literal[1] = FORMAT
    round_id: str
    suite: SuiteRef
    settings: Settings
    hardware: str | None  # the reports' hardware profile
    problems: list[str]  # the columns
    rows: list[BoardRow]
    ties: list[list[str]]  # entries sharing a rank, per shared rank
    references: list[ReferenceBatch]
    notes: list[str] = Field(default_factory=list)  # renamed entries, and the like

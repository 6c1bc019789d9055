"""`grader round verify ROUND_DIR`: check a round folder against its own manifest.

Recomputed from the files, each compared with what the round recorded: every bundle's
sha256 (the manifest's), every graded entry's report (its sha256 in the entry's outcome; its
bundle hash, seed commitment, suite and grader version those of the manifest), the suite's
content hash when the suite is at hand, the secret's commitment when the secret is (the
round's seed.secret, or --secret once it is revealed), the commitment published before the
round (its file's sha256 the manifest's, what it committed the manifest's, and every report
graded with the committed images), and the leaderboard, computed again from the reports and
compared with leaderboard.json.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from grader.errors import GraderError, RoundMismatch
from grader.grading.checkpoint import commitment
from grader.model.results import Report
from grader.round.board import build_board
from grader.round.commit import report_differences
from grader.round.entries import sha256_file
from grader.round.model import Board, Commitment, Manifest, Outcome
from grader.round.request import suite_digest
from grader.round.store import RoundDir
from grader.round.suite import of_round


@dataclass(kw_only=True)
class Checked:
    ok: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


def _commitment(rd: RoundDir, manifest: Manifest, published: Path | None, got: Checked
                ) -> Commitment | None:
    """The round's commitment checked against its manifest: the file (the round folder's,
    or `published`, the copy a checker kept) must be the one the round started under, and
    commit what the manifest says."""
    path = published or rd.commitment_file
    if manifest.commitment_sha256 is None:
        (got.wrong if published else got.unchecked).append(
            "commitment: the round started without one")
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        got.wrong.append(f"commitment: {path} cannot be read: {exc.strerror or exc}")
        return None
    if hashlib.sha256(raw).hexdigest() != manifest.commitment_sha256:
        got.wrong.append(f"commitment: {path} is not the one the round started under (its "
                         "sha256 differs from the manifest's)")
        return None
    try:
        c = Commitment.model_validate_json(raw)
    except ValidationError as exc:
        got.wrong.append(f"commitment: {path} is not a commitment: {exc.error_count()} "
                         "error(s)")
        return None
    checks = [("seed commitment", c.seed_commitment, manifest.seed_commitment),
              ("suite", c.suite, manifest.suite), ("settings", c.settings, manifest.settings),
              ("grader version", c.grader_version, manifest.grader_version)]
    bad = [what for what, a, b in checks if a != b]
    (got.wrong if bad else got.ok).append(
        "commitment " + (f"differs from the manifest: {', '.join(bad)}" if bad else
                         "matches the manifest (secret, suite, settings, grader)"))
    return c


def _images(c: Commitment, outcomes: dict[str, Outcome], reports: dict[str, Report],
            got: Checked) -> None:
    for name, rep in reports.items():
        node = outcomes[name].node
        diffs = report_differences(c, rep, ids=node is None)
        (got.wrong if diffs else got.ok).append(
            f"{name}: images " + ("; ".join(diffs) if diffs else "are the committed ones"
                                  + (f" (tags only: graded on Ray node {node})" if node
                                     else "")))


def verify_round(root: Path, *, suite_roots: Sequence[Path] = (), secret_hex: str | None = None,
                 commitment_file: Path | None = None) -> Checked:
    rd = RoundDir(root)
    manifest = rd.load_manifest()
    got = Checked()
    for e in manifest.entries:
        if e.bundle is None:
            continue
        path = rd.root / e.bundle
        try:
            digest = sha256_file(path)
        except OSError as exc:
            got.wrong.append(f"{e.name}: its bundle {e.bundle} cannot be read: {exc}")
            continue
        (got.ok if digest == e.sha256 else got.wrong).append(
            f"{e.name}: bundle sha256 " + ("matches" if digest == e.sha256 else
                                           f"{digest} is not the manifest's {e.sha256}"))
    outcomes, reports = {}, {}
    for e in manifest.entries:
        out = rd.outcome(e.name)
        if out is None:
            continue
        outcomes[e.name] = out
        if out.status != "graded":
            continue
        rep, sha = rd.report(e.name), rd.report_sha256(e.name)
        if rep is None or sha != out.report_sha256:
            got.wrong.append(f"{e.name}: report.json is missing, unreadable, or not the one "
                             "graded (its sha256 differs from the entry's outcome)")
            continue
        reports[e.name] = rep
        checks = [("bundle sha256", rep.submission.bundle_sha256, e.sha256),
                  ("seed commitment", rep.environment.seed_commitment,
                   manifest.seed_commitment),
                  ("suite", f"{rep.suite.id} {rep.suite.version}",
                   f"{manifest.suite.id} {manifest.suite.version}"),
                  ("grader version", rep.environment.grader_version, manifest.grader_version)]
        bad = [f"{what} {a!r} (manifest: {b!r})" for what, a, b in checks if a != b]
        (got.wrong if bad else got.ok).append(
            f"{e.name}: report " + ("; ".join(bad) if bad else "matches the manifest"))
    try:
        digest = suite_digest(of_round(rd, manifest.suite.id, tuple(suite_roots)))
        (got.ok if digest == manifest.suite.digest else got.wrong).append(
            "suite digest " + ("matches" if digest == manifest.suite.digest
                               else f"{digest} is not the manifest's {manifest.suite.digest}"))
    except (GraderError, OSError) as exc:
        got.unchecked.append(f"suite digest: the suite {manifest.suite.id!r} is not at hand "
                             f"({exc})")
    secret = bytes.fromhex(secret_hex) if secret_hex else rd.secret()
    if secret is None:
        got.unchecked.append("seed commitment: no secret (pass --secret HEX once revealed)")
    else:
        ok = commitment(secret) == manifest.seed_commitment
        (got.ok if ok else got.wrong).append(
            "seed secret " + ("matches the commitment" if ok else "does not match the "
                              "manifest's commitment"))
    committed = _commitment(rd, manifest, commitment_file, got)
    if committed is not None:
        _images(committed, outcomes, reports, got)
    board = build_board(manifest, outcomes, reports, committed, rd.prepared())
    try:
        saved = Board.model_validate_json((rd.root / "leaderboard.json").read_bytes())
    except (OSError, ValidationError) as exc:
        got.wrong.append(f"leaderboard.json: unreadable ({type(exc).__name__})")
    else:
        same = saved == board
        (got.ok if same else got.wrong).append(
            "leaderboard.json " + ("equals the board recomputed from the reports" if same
                                   else "differs from the board recomputed from the reports: "
                                   + _first_difference(saved, board)))
    return got


def _first_difference(saved: Board, now: Board) -> str:
    a, b = saved.model_dump(mode="json"), now.model_dump(mode="json")
    for key in a:
        if a[key] != b.get(key):
            return f"{key} differs"
    return "the order of its fields differs"


def require(got: Checked) -> None:
    if got.wrong:
        raise RoundMismatch(f"{len(got.wrong)} check(s) failed: " + "; ".join(got.wrong[:5])
                            + (" ..." if len(got.wrong) > 5 else ""))

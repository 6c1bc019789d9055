"""The round folder: where each record lives, each written whole or not at all.

    ROUND_DIR/
      commitment.json            published before the round (round/commit.py), when it was
      suite.path                 the folder of the suite the round grades against, so that
                                 later commands find it without --suite (round/suite.py)
      manifest.json              what anyone can check the round against (round/model.Manifest)
      seed.secret                the round's secret (hex, 0600): never published before the end
      bundles/<entry>.tar        what was graded
      entries/<entry>/           each entry's reports (report.json, ...) and its own checkpoint
      .round/<entry>.json        each entry's outcome: the round's checkpoint
      .references/<key>/         the references computed once for the round (0700, host only)
      prepared.json              what `grader round prepare` computed before the entries
      leaderboard.{json,md,html}
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from grader.errors import UsageError
from grader.files import atomic_write
from grader.grading.checkpoint import host_fs
from grader.model.results import Report
from grader.round.model import Commitment, Manifest, Outcome, Prepared

SECRET = "seed.secret"


class RoundDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.manifest_file = root / "manifest.json"
        self.commitment_file = root / "commitment.json"
        self.secret_file = root / SECRET
        self.suite_file = root / "suite.path"
        self.bundles = root / "bundles"
        self.entries = root / "entries"
        self.outcomes = root / ".round"
        self.references = root / ".references"
        self.prepared_file = root / "prepared.json"

    def entry_dir(self, name: str) -> Path:
        return self.entries / name

    def report_file(self, name: str) -> Path:
        return self.entry_dir(name) / "report.json"

    def create(self, manifest: Manifest, secret: bytes) -> None:
        with host_fs(f"cannot start the round in {self.root}",
                     hint="free space in the round folder (-o) or choose another one"):
            for d in (self.root, self.bundles, self.entries, self.outcomes):
                d.mkdir(parents=True, exist_ok=True)
            self.references.mkdir(mode=0o700, exist_ok=True)
            atomic_write(self.secret_file, secret.hex() + "\n", mode=0o600)
            self.save_manifest(manifest)

    def save_manifest(self, manifest: Manifest) -> None:
        with host_fs("cannot write the round's manifest"):
            atomic_write(self.manifest_file,
                         manifest.model_dump_json(indent=1) + "\n")

    def load_manifest(self) -> Manifest:
        try:
            return Manifest.model_validate_json(self.manifest_file.read_bytes())
        except FileNotFoundError:
            raise UsageError(f"{self.root}: no round in it (no manifest.json)",
                             hint="pass the -o of a round") from None
        except (OSError, ValidationError) as exc:
            raise UsageError(f"{self.manifest_file}: unreadable: {exc}") from None

    def load_commitment(self, path: Path | None = None) -> Commitment | None:
        """The round's published commitment (its own file, or `path`); None when the round
        folder has none."""
        path = path or self.commitment_file
        try:
            return Commitment.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            if path != self.commitment_file:
                raise UsageError(f"{path}: no such file") from None
            return None
        except (OSError, ValidationError) as exc:
            raise UsageError(f"{path}: unreadable: {exc}") from None

    def save_suite(self, folder: Path) -> None:
        with host_fs(f"cannot write {self.suite_file}"):
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write(self.suite_file, f"{folder.resolve()}\n")

    def suite_folder(self) -> Path | None:
        """The suite's folder as the round recorded it; None when the round recorded none or
        the folder is gone (a round folder copied to another host)."""
        try:
            folder = Path(self.suite_file.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError):
            return None
        return folder if (folder / "suite.toml").is_file() else None

    def secret(self) -> bytes | None:
        try:
            return bytes.fromhex(self.secret_file.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            return None

    def save_prepared(self, prepared: Prepared) -> None:
        with host_fs(f"cannot write {self.prepared_file}"):
            atomic_write(self.prepared_file, prepared.model_dump_json(indent=1) + "\n")

    def prepared(self) -> Prepared | None:
        """The record of the round's prepared references; None when none were (or it is
        unreadable: the leaderboard then lists only what the entries computed)."""
        try:
            return Prepared.model_validate_json(self.prepared_file.read_bytes())
        except (OSError, ValidationError):
            return None

    def save_outcome(self, outcome: Outcome) -> None:
        with host_fs(f"cannot checkpoint entry {outcome.name}"):
            atomic_write(self.outcomes / f"{outcome.name}.json",
                         outcome.model_dump_json(indent=1) + "\n")

    def outcome(self, name: str) -> Outcome | None:
        try:
            return Outcome.model_validate_json((self.outcomes / f"{name}.json").read_bytes())
        except (OSError, ValidationError):
            return None  # missing or truncated: the entry is graded again

    def report(self, name: str) -> Report | None:
        try:
            return Report.model_validate_json(self.report_file(name).read_bytes())
        except (OSError, ValidationError):
            return None

    def report_sha256(self, name: str) -> str | None:
        try:
            return hashlib.sha256(self.report_file(name).read_bytes()).hexdigest()
        except OSError:
            return None

"""Checkpoints of a run, so that `grader run --resume` finishes it without redoing work.

In the run's out dir:

    seed.secret                        the run's seed secret (hex, 0600), written before grading
    .checkpoint/run.json               what the results depend on (`RunKey`) and the secret's
                                       commitment (never the secret itself)
    .checkpoint/problems/<id>.json     one finished problem: its ProblemResult, image, device

Every file is written whole or not at all (a temporary file, then `os.replace`). A fresh run
forgets any earlier checkpoint in its out dir; `--resume` refuses a checkpoint of another run
(another bundle, suite, policy, device, shapes...) and says what differs. A problem whose
checkpointed verdict is infra_error is graded again on resume: that was the grader's failure.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from grader.errors import InfraError, UsageError
from grader.files import atomic_write
from grader.grading.settings import GradingSettings
from grader.model.results import ProblemResult
from grader.verdicts import Verdict

CHECKPOINT_DIR = ".checkpoint"
SECRET_FILE = "seed.secret"
FORMAT = 1
RESUME_HINT = "free space or fix the host, then run the same command with --resume"


@contextmanager
def host_fs(what: str, hint: str | None = RESUME_HINT) -> Iterator[None]:
    """Turn a host filesystem failure (ENOSPC, EACCES, EROFS...) into an InfraError."""
    try:
        yield
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise InfraError(f"{what}: {exc.strerror or exc}{where}", hint=hint) from None


def commitment(secret: bytes) -> str:
    return hashlib.sha256(secret).hexdigest()


@dataclass(frozen=True, kw_only=True)
class RunKey:
    """Everything a problem's result depends on, besides the seed secret: the grader, the
    bundle, the suite, and the grading settings as applied to that suite (settings.py; those
    a checkpoint is keyed on, CHECKPOINTED). run.json keeps them as one flat object, under the
    names it has always had."""

    grader_version: str
    bundle_sha256: str
    suite: str
    suite_version: str
    settings: GradingSettings

    def to_json(self) -> dict[str, object]:
        return {"grader_version": self.grader_version, "bundle_sha256": self.bundle_sha256,
                "suite": self.suite, "suite_version": self.suite_version,
                **self.settings.checkpointed()}

    @classmethod
    def from_json(cls, saved: dict[str, object]) -> RunKey:
        """The key a run.json holds; KeyError, TypeError or ValueError when it holds none."""
        if not isinstance(saved, dict):
            raise TypeError(f"the key is {type(saved).__name__}, not an object")
        rest = dict(saved)
        ids = {k: str(rest.pop(k)) for k in ("grader_version", "bundle_sha256", "suite",
                                             "suite_version")}
        return cls(**ids, settings=GradingSettings.from_checkpoint(rest))

    def differences(self, now: RunKey) -> list[str]:
        was, new = self.to_json(), now.to_json()
        return [f"{k}: {was[k]!r} in the checkpoint, {new[k]!r} now"
                for k in was if was[k] != new[k]]


def _no_constants(name: str) -> object:
    raise ValueError(f"non-finite number {name}")  # Python's json accepts NaN; JSON does not


@dataclass(frozen=True, kw_only=True)
class Finished:
    """One problem as the checkpoint keeps it."""

    result: ProblemResult
    image_id: str | None = None  # for the report's environment.images
    device_name: str | None = None  # the reference's device, for the hardware profile

    def to_json(self) -> str:
        # allow_nan=False: a checkpoint is read back with a strict parser; the report model
        # forbids non-finite numbers, so this only fails on a grader bug, loudly.
        return json.dumps({"format": FORMAT, "result": self.result.model_dump(mode="json"),
                           "image_id": self.image_id, "device_name": self.device_name},
                          indent=1, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> Finished:
        data = json.loads(text, parse_constant=_no_constants)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a checkpoint of this format")
        return cls(result=ProblemResult.model_validate(data["result"]),
                   image_id=data.get("image_id"), device_name=data.get("device_name"))


class Checkpoint:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.dir = out_dir / CHECKPOINT_DIR
        self.problems_dir = self.dir / "problems"
        self.run_file = self.dir / "run.json"
        self.secret_file = out_dir / SECRET_FILE

    def problem_file(self, problem: str) -> Path:
        return self.problems_dir / f"{problem}.json"

    def start(self, key: RunKey, secret: bytes) -> None:
        """A fresh run: forget any earlier checkpoint, save the secret, then the key."""
        with host_fs(f"cannot start the checkpoint in {self.out_dir}",
                     hint="free space in the out dir (-o) or choose another one"):
            self.out_dir.mkdir(parents=True, exist_ok=True)
            if self.dir.exists():
                shutil.rmtree(self.dir)
            self.problems_dir.mkdir(parents=True)
            atomic_write(self.secret_file, secret.hex() + "\n", mode=0o600)
            atomic_write(self.run_file, json.dumps(
                {"format": FORMAT, "key": key.to_json(), "seed_commitment": commitment(secret)},
                indent=1) + "\n")

    def save(self, done: Finished) -> None:
        with host_fs(f"cannot checkpoint problem {done.result.id}"):
            atomic_write(self.problem_file(done.result.id), done.to_json() + "\n")

    def resume(self, key: RunKey, secret: bytes | None) -> tuple[bytes, dict[str, Finished]]:
        """Check that the checkpoint is this run's; return its secret and finished problems
        (but those whose verdict was infra_error, which are graded again)."""
        try:
            saved = json.loads(self.run_file.read_text(encoding="utf-8"))
            if saved.get("format") != FORMAT:
                raise ValueError(f"format {saved.get('format')!r}")
            was = RunKey.from_json(saved["key"])
            committed = str(saved["seed_commitment"])
        except FileNotFoundError:
            raise UsageError(f"--resume: no checkpoint in {self.out_dir}",
                             hint="pass the -o of the run to resume, or leave out --resume "
                             "for a fresh run") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"--resume: the checkpoint {self.run_file} is unreadable: {exc}",
                             hint="leave out --resume for a fresh run") from None
        diffs = was.differences(key)
        if diffs:
            raise UsageError("--resume: the checkpoint in "
                             f"{self.out_dir} is of another run: " + "; ".join(diffs),
                             hint="resume with the same bundle and options, or leave out "
                             "--resume for a fresh run")
        found = self._saved_secret()
        if secret is not None and found is not None and secret != found:
            raise UsageError("--resume: --seed-secret differs from the checkpoint's seed.secret",
                             hint="leave out --seed-secret when resuming")
        use = secret if secret is not None else found
        if use is None:
            raise UsageError(f"--resume: {self.secret_file} is missing or unreadable",
                             hint="pass the run's secret with --seed-secret")
        if commitment(use) != committed:
            raise UsageError("--resume: the seed secret does not match the checkpoint's "
                             "commitment", hint="pass the run's own secret with --seed-secret")
        return use, self._finished()

    def _saved_secret(self) -> bytes | None:
        try:
            return bytes.fromhex(self.secret_file.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            return None

    def _finished(self) -> dict[str, Finished]:
        out: dict[str, Finished] = {}
        try:
            files = sorted(self.problems_dir.glob("*.json"))
        except OSError:
            return out
        for path in files:
            try:
                done = Finished.from_json(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, KeyError, TypeError, ValidationError):
                continue  # truncated or foreign: that problem is graded again
            # The grader's or the suite's failure: graded again once it is fixed.
            if done.result.id == path.stem and done.result.verdict not in (
                    Verdict.INFRA_ERROR, Verdict.REFERENCE_ERROR):
                out[done.result.id] = done
        return out


"""`grader round commit`: what an organiser publishes before a round, and the round's checks
against it.

Before the round, `commit` draws the round's secret (kept in ROUND_DIR/seed.secret, 0600)
and writes ROUND_DIR/commitment.json: the secret's sha256, the suite's content hash, the
settings every entry will be graded under, the grader's version, and the images entries will
run in (the runtime's and each problem's, built when missing), each by its content-hash tag
and its image id. The organiser publishes that file, or its sha256, before any entry is in.

A round started in that folder takes the secret from seed.secret and refuses to grade under
anything else (another secret, suite, settings or grader, or images whose tag or id differ
from the committed ones: `RoundMismatch`), and records the commitment's sha256 in its
manifest. Each entry's report names the images it was graded with; `grader round verify`
compares them with the commitment (a report graded on a Ray node has that node's image ids,
built there: only their tags, the content hashes, can be compared).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime

from grader import __version__
from grader.errors import UsageError
from grader.files import atomic_write
from grader.grading.checkpoint import commitment, host_fs
from grader.grading.config import GradingOptions
from grader.grading.progress import Progress
from grader.images import ensure, problem_plan
from grader.model.results import Report
from grader.round.model import Commitment, ImageRef, Settings, SuiteRef
from grader.round.store import RoundDir
from grader.sandbox.docker_engine import DockerEngine, get_engine
from grader.sandbox.runtimes import runtime_for
from grader.suite.load import Suite


def round_images(engine: DockerEngine, run: GradingOptions, suite: Suite,
                 progress: Progress | None = None) -> dict[str, ImageRef]:
    """The images a round under `run`'s settings grades with on this host, built if missing:
    "runtime", and each problem graded, named as a report's `environment.images` names them."""
    if progress is not None:
        progress("images: runtime")
    rt = runtime_for(run.runtime_config).ensure_image(engine)
    out = {"runtime": ImageRef(tag=rt.tag, id=rt.id)}
    for pid, sp in suite.problems.items():
        if run.settings.problems and pid not in run.settings.problems:
            continue
        if progress is not None:
            progress(f"images: {pid}")
        got = ensure(engine, problem_plan(rt.tag, suite.id, sp))
        out[pid] = ImageRef(tag=got.tag, id=got.id)
    return out


def write_commitment(rd: RoundDir, c: Commitment, secret: bytes) -> str:
    """seed.secret (0600), then commitment.json; the sha256 of commitment.json's bytes."""
    text = c.model_dump_json(indent=1) + "\n"
    with host_fs(f"cannot write the commitment into {rd.root}",
                 hint="free space in the round folder (-o) or choose another one"):
        rd.root.mkdir(parents=True, exist_ok=True)
        atomic_write(rd.secret_file, secret.hex() + "\n", mode=0o600)
        atomic_write(rd.commitment_file, text)
    return hashlib.sha256(text.encode()).hexdigest()


def make_commitment(rd: RoundDir, *, suite: Suite, suite_ref: SuiteRef, settings: Settings,
                    run: GradingOptions, progress: Progress) -> tuple[Commitment, str]:
    """A new round's commitment written into `rd` (its secret beside it); the commitment and
    the sha256 of its file."""
    if rd.manifest_file.exists():
        raise UsageError(f"{rd.root} holds a round already: a commitment comes before it",
                         hint="commit into a fresh -o, then grade the round there")
    if rd.commitment_file.exists():
        raise UsageError(f"{rd.root} holds a commitment already ({rd.commitment_file})",
                         hint="grade the round there, or remove the folder to commit anew")
    secret = run.secret or secrets.token_bytes(32)
    images = round_images(get_engine(), run, suite, progress)
    c = Commitment(created_at=datetime.now(UTC), grader_version=__version__, suite=suite_ref,
                   settings=settings, seed_commitment=commitment(secret), images=images)
    return c, write_commitment(rd, c, secret)


def file_sha256(rd: RoundDir) -> str | None:
    try:
        return hashlib.sha256(rd.commitment_file.read_bytes()).hexdigest()
    except OSError:
        return None


def differences(c: Commitment, *, suite: SuiteRef, settings: Settings, secret: bytes,
                images: dict[str, ImageRef] | None, grader_version: str = __version__
                ) -> list[str]:
    """How a round about to grade differs from its commitment (pure); empty: it does not.
    `images` None: not compared (the caller has no engine to ask)."""
    out = []
    if commitment(secret) != c.seed_commitment:
        out.append("the secret is not the committed one (its sha256 differs)")
    if suite != c.suite:
        out.append(f"suite {suite.id} {suite.version} (content hash {suite.digest[:16]}) is "
                   f"not the committed {c.suite.id} {c.suite.version} ({c.suite.digest[:16]})")
    if settings != c.settings:
        a, b = settings.model_dump(), c.settings.model_dump()
        out += [f"setting {k}: {a[k]!r}, committed {b[k]!r}" for k in a if a[k] != b[k]]
    if grader_version != c.grader_version:
        out.append(f"grader {grader_version}, committed {c.grader_version}")
    if images is not None:
        for role in sorted(set(images) | set(c.images)):
            got, want = images.get(role), c.images.get(role)
            if got != want:
                out.append(f"image {role}: {_image(got)}, committed {_image(want)}")
    return out


def _image(ref: ImageRef | None) -> str:
    return "none" if ref is None else f"{ref.tag} ({ref.id[:19]})"


def report_differences(c: Commitment, rep: Report, *, ids: bool = True) -> list[str]:
    """The images `rep` was graded with that are not the committed ones (pure): each
    problem's tag (ProblemResult.image) and, with `ids`, every image id the report names
    (ids=False: the report was graded on another host, whose image ids are its own)."""
    out = []
    for p in rep.problems:
        want = c.images.get(p.id)
        if p.image is not None and (want is None or p.image != want.tag):
            out.append(f"{p.id}: image {p.image}, committed "
                       f"{want.tag if want else 'none'}")
    if ids:
        for role, got in sorted(rep.environment.images.items()):
            want = c.images.get(role)
            if want is None or got != want.id:
                out.append(f"{role}: image id {got[:19]}, committed "
                           f"{want.id[:19] if want else 'none'}")
    return out

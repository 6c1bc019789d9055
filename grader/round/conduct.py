"""`grader round`: many bundles against one suite under one secret, into a round folder.

The round starts (or resumes) from its manifest, grades each entry not yet graded (here,
or on a Ray cluster: round/on_ray.py), writes each entry's reports and outcome as soon as it
is graded, and finally the leaderboard. On more than one GPU, the first entry to grade is
graded on all of them (its problems spread over one worker per GPU, as `grader run --gpus`
does) while it computes the round's references; the entries after it are graded side by
side, one per GPU.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from datetime import UTC, datetime

from grader import __version__
from grader.errors import ExposedHostPath, InfraError, RoundMismatch, UsageError
from grader.grading.checkpoint import commitment, host_fs
from grader.grading.factory import build_grader
from grader.grading.progress import Progress
from grader.model.results import Report
from grader.round.board import build_board
from grader.round.commit import (
    differences,
    file_sha256,
    make_commitment,
    round_images,
)
from grader.round.entries import find_entries, stage
from grader.round.entry import grade_entry
from grader.round.model import (
    PREPARED_BY,
    PREPARED_KEPT,
    Board,
    Commitment,
    Manifest,
    ManifestEntry,
    Prepared,
    PreparedRef,
    Settings,
    SuiteRef,
)
from grader.round.refcache import ReferenceCache
from grader.round.render import RENDERERS
from grader.round.request import (
    RoundPresentation,
    RoundRequest,
    entry_request,
    record,
    suite_digest,
)
from grader.round.store import RoundDir
from grader.round.suite import round_suite
from grader.sandbox.docker_engine import get_engine
from grader.sandbox.runtimes import runtime_for
from grader.suite.load import Suite, check_problems
from grader.verdicts import Verdict


def settings_of(req: RoundRequest) -> Settings:
    """The round's settings: every entry's grading settings (problems in order), and whether
    references are shared."""
    s = req.run.settings
    return Settings.model_validate({**s.model_dump(), "problems": sorted(s.problems),
                                    "shared_references": req.shared_references})


def _suite(req: RoundRequest, rd: RoundDir) -> tuple[RoundRequest, Suite]:
    """The round's suite (round/suite.py), recorded in its folder; the request whose entries
    find that suite, by its id, before any other of the same id."""
    suite = round_suite(rd, req.suite, req.run.suite_roots, req.paths)
    check_problems(suite, req.run.settings.problems)
    home = suite.directory.resolve()
    run = replace(req.run, suite_roots=(home.parent, *req.run.suite_roots))
    return replace(req, suite=str(home), run=run), suite


def suite_ref(suite: Suite) -> SuiteRef:
    return SuiteRef(id=suite.id, version=suite.info.version,
                    weights_version=suite.weights.version, digest=suite_digest(suite))


def check_commitment(req: RoundRequest, rd: RoundDir, suite: Suite, ref: SuiteRef,
                     secret: bytes, progress: Progress) -> str | None:
    """With a commitment in the round folder (`grader round commit`): refuse to grade under
    another secret, suite, settings, grader or images (built here when missing); the
    commitment file's sha256 for the manifest. None when the round has no commitment."""
    committed = rd.load_commitment()
    if committed is None:
        return None
    images = round_images(get_engine(), req.run, suite, progress)
    diffs = differences(committed, suite=ref, settings=settings_of(req), secret=secret,
                        images=images)
    if diffs:
        raise RoundMismatch(f"the round differs from its commitment ({rd.commitment_file}): "
                            + "; ".join(diffs),
                            hint="grade under what was committed (the same suite, options "
                            "and images), or commit anew into a fresh round folder")
    progress(f"round: graded as committed ({rd.commitment_file})")
    return file_sha256(rd)


def open_round(req: RoundRequest, rd: RoundDir, suite: Suite, progress: Progress
               ) -> tuple[Manifest, bytes]:
    """A new round's manifest and secret (entries found, staged, refused ones said why), or
    with --resume the round's own, checked against this command's settings; either checked
    against the round's commitment when it has one."""
    ref = suite_ref(suite)
    if req.resume:
        if req.paths:
            raise UsageError("--resume finishes the round's own entries; pass no BUNDLE",
                             hint=f"the entries are listed in {rd.manifest_file}")
        manifest = rd.load_manifest()
        diffs = [f"{k}: {a!r} in the round, {b!r} now" for k, a, b in (
            ("suite", manifest.suite, ref), ("settings", manifest.settings, settings_of(req)),
            ("grader_version", manifest.grader_version, __version__)) if a != b]
        if diffs:
            raise UsageError("--resume: the round in " f"{rd.root} differs: " + "; ".join(diffs),
                             hint="resume with the same suite and options")
        secret = rd.secret()
        if secret is None or commitment(secret) != manifest.seed_commitment:
            raise UsageError(f"--resume: {rd.secret_file} is missing or does not match the "
                             "manifest's commitment")
        if file_sha256(rd) != manifest.commitment_sha256:
            raise RoundMismatch(f"--resume: {rd.commitment_file} is not the commitment the "
                                "round started under (" + (
                                    "its sha256 differs" if manifest.commitment_sha256
                                    else "the round started without one") + ")")
        check_commitment(req, rd, suite, ref, secret, progress)
        return manifest, secret
    if not req.paths:
        raise UsageError("no entries", hint="pass bundles, submission folders, or a folder "
                         "of them")
    if rd.manifest_file.exists():
        raise UsageError(f"{rd.root} holds a round already",
                         hint="pass --resume to finish it, or choose another -o")
    secret = req.run.secret or secrets.token_bytes(32)
    if rd.commitment_file.exists():  # the secret is the committed one
        kept = rd.secret()
        if kept is None:
            raise UsageError(f"{rd.secret_file}: missing or unreadable; the round's "
                             "commitment needs the secret committed beside it")
        if req.run.seed_secret and secret != kept:
            raise RoundMismatch("--seed-secret is not the committed secret (seed.secret)",
                                hint="leave --seed-secret out: the round takes seed.secret")
        secret = kept
    committed = check_commitment(req, rd, suite, ref, secret, progress)
    found = find_entries(list(req.paths))
    with host_fs(f"cannot make {rd.bundles}"):
        rd.bundles.mkdir(parents=True, exist_ok=True)
    entries = []
    for f in found:
        st = stage(f, rd.bundles, suite.id)
        if f.renamed_from:
            progress(f"entry {f.renamed_from!r} is named {f.name!r} in this round (names must "
                     "be unique and safe as folder names)")
        if st.error:
            progress(f"{f.name}: refused: {st.error}")
        entries.append(ManifestEntry(
            name=f.name, source=str(f.source), renamed_from=f.renamed_from,
            declared_name=st.declared_name,
            bundle=str(st.bundle.relative_to(rd.root)) if st.bundle else None,
            sha256=st.sha256, refused=st.error))
    manifest = Manifest(round_id=uuid.uuid4().hex[:12], created_at=datetime.now(UTC),
                        grader_version=__version__, suite=ref, settings=settings_of(req),
                        seed_commitment=commitment(secret), entries=entries,
                        commitment_sha256=committed)
    rd.create(manifest, secret)
    return manifest, secret


def check_round_dir(req: RoundRequest, rd: RoundDir) -> None:
    """No bind of the runtime (--runtime host: the host's interpreter) may show a container
    the round's folder (its references, bundles and secret)."""
    runtime = runtime_for(req.run.runtime_config)
    found = runtime.exposures([("the round folder", rd.root, True)],
                              gpu=req.run.settings.device == "cuda")
    if found:
        raise ExposedHostPath(f"--runtime {runtime.name} would let entries read the round's "
                              "folder:\n    " + "\n    ".join(found),
                              hint="keep the round folder outside the interpreter's install")


def pending(manifest: Manifest, rd: RoundDir) -> list[ManifestEntry]:
    """Entries to grade: not refused, and without a graded outcome whose report is intact and
    free of infra errors (those were the grader's failures)."""
    out = []
    for e in manifest.entries:
        if e.refused:
            continue
        done = rd.outcome(e.name)
        rep = rd.report(e.name) if done and done.status == "graded" else None
        if (done is None or rep is None or done.report_sha256 != rd.report_sha256(e.name)
                or rep.summary.verdicts.get(Verdict.INFRA_ERROR)):
            out.append(e)
    return out


def grade_here(req: RoundRequest, show: RoundPresentation, rd: RoundDir,
               todo: list[ManifestEntry], secret: bytes, progress: Progress) -> None:
    """Grade `todo` on this host. With several GPUs: the first on all of them, the rest one
    per GPU at a time."""
    cache = rd.references if req.shared_references else None
    gpus = req.run.scheduling.gpus if req.run.settings.device == "cuda" else ()
    queue = deque(todo)
    lock = threading.Lock()

    def one(entry: ManifestEntry, gpu: tuple[int, ...] | None) -> None:
        progress(f"entry {entry.name}: grading")
        run = entry_request(req, rd, entry, secret)
        if gpu is not None:
            run = replace(run, scheduling=replace(run.scheduling, gpus=gpu))
        got = grade_entry(entry.name, run, cache, progress)
        with lock:
            out = record(rd, show, got, progress)
        progress(f"entry {entry.name}: {out.status}" + (f" ({out.error})" if out.error else ""))

    if queue:
        one(queue.popleft(), None)  # every GPU on its problems: the references made once
    if len(gpus) <= 1:
        while queue:
            one(queue.popleft(), None)
        return

    def worker(gpu: int) -> None:
        while True:
            with lock:
                if not queue:
                    return
                entry = queue.popleft()
            one(entry, (gpu,))

    with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        list(pool.map(worker, gpus))


def finish(rd: RoundDir, manifest: Manifest) -> Board:
    """The leaderboard from what the round folder holds now, in every format."""
    outcomes = {e.name: o for e in manifest.entries if (o := rd.outcome(e.name)) is not None}
    reports: dict[str, Report] = {}
    for name, o in outcomes.items():
        rep = rd.report(name) if o.status == "graded" else None
        if rep is not None:
            reports[name] = rep
    board = build_board(manifest, outcomes, reports, rd.load_commitment(), rd.prepared())
    with host_fs("cannot write the leaderboard"):
        for fname, render in RENDERERS.values():
            (rd.root / fname).write_text(render(board), encoding="utf-8")
    return board


def commit_round(req: RoundRequest, progress: Progress) -> tuple[Commitment, str]:
    """`grader round commit`: the round's commitment and secret written into its folder,
    before any entry; the commitment and its file's sha256."""
    rd = RoundDir(req.out_dir)
    req, suite = _suite(req, rd)
    check_round_dir(req, rd)
    rd.save_suite(suite.directory)
    return make_commitment(rd, suite=suite, suite_ref=suite_ref(suite),
                           settings=settings_of(req), run=req.run, progress=progress)


def prepare_round(req: RoundRequest, progress: Progress) -> Prepared:
    """`grader round prepare`: a committed round's references, computed before its entries
    and kept in its folder (grading/prepare.py), so that its first entry grades as every
    later one does; the record, also written into the folder (prepared.json). Batches kept
    already are not computed again: a prepare that stopped can be run again."""
    if not req.shared_references:
        raise UsageError("--no-shared-references: such a round keeps no references to prepare")
    rd = RoundDir(req.out_dir)
    req, suite = _suite(req, rd)
    check_round_dir(req, rd)
    secret = rd.secret()
    if rd.load_commitment() is None or secret is None:
        raise UsageError(f"{rd.root}: no committed round to prepare (the references are "
                         "computed under its secret and settings)",
                         hint="grader round commit -o ROUND_DIR first, with the options the "
                         "round will grade with")
    if req.run.secret is not None and req.run.secret != secret:
        raise RoundMismatch("--seed-secret is not the committed secret (seed.secret)",
                            hint="leave --seed-secret out: the round takes seed.secret")
    check_commitment(req, rd, suite, suite_ref(suite), secret, progress)
    t0 = time.monotonic()
    grader = build_grader(replace(req.run, seed_secret=secret.hex()), progress)
    cache = ReferenceCache(rd.references, PREPARED_BY)
    batches = [PreparedRef(**asdict(b)) for b in grader.prepare(suite, cache)]
    # A batch an earlier prepare kept stays its (the leaderboard says who computed it): by
    # the earlier record, or where that run stopped before writing one, by the folder's own.
    last = rd.prepared()
    earlier = {b.key: b for b in (last.batches if last else []) if b.status in PREPARED_KEPT}
    for i, b in enumerate(batches):
        if b.status == "kept already" and cache.computed_by(b.key) == PREPARED_BY:
            batches[i] = earlier.get(b.key) or b.model_copy(update={
                "status": "kept light" if cache.light(b.key) else "kept",
                "detail": "by an earlier prepare"})
    prepared = Prepared(created_at=datetime.now(UTC), grader_version=__version__,
                        wall_s=time.monotonic() - t0, batches=batches)
    rd.save_prepared(prepared)
    return prepared


def run_round(req: RoundRequest, show: RoundPresentation, progress: Progress) -> Board:
    """`grader round`: grade `req`'s entries into its folder, each entry's reports in
    `show`'s formats, and write the leaderboard."""
    rd = RoundDir(req.out_dir)
    req, suite = _suite(req, rd)
    check_round_dir(req, rd)
    manifest, secret = open_round(req, rd, suite, progress)
    rd.save_suite(suite.directory)
    todo = pending(manifest, rd)
    progress(f"round {manifest.round_id}: {len(manifest.entries)} entries, {len(todo)} to grade")
    if req.run.scheduling.ray is not None:
        from grader.round.on_ray import grade_on_ray

        grade_on_ray(req, show, rd, manifest, todo, secret, progress)
    else:
        grade_here(req, show, rd, todo, secret, progress)
    board = finish(rd, manifest)
    failed = [r.entry for r in board.rows if r.status == "failed"]
    for fname, _ in RENDERERS.values():
        progress.say(f"{fname.split('.')[-1]}: {rd.root / fname}")
    if failed:
        raise InfraError(f"{len(failed)} entr{'y' if len(failed) == 1 else 'ies'} not graded "
                         f"(the grader's failure): {', '.join(failed[:5])}",
                         hint=f"fix the host, then: grader round --resume -o {rd.root} ...")
    return board

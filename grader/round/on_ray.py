"""A round on a Ray cluster (`grader round --ray auto|ADDRESS`): one Ray task per entry.

Ray does the placement, the retries and the node membership; nothing here schedules. Each
task asks for one unit of the custom resource `grader_docker` (a node offers it when it has
a Docker engine the grader may use: `ray start ... --resources '{"grader_docker": 1}'`, one
unit per entry it may grade at once) and, with `--device cuda`, one GPU (`num_gpus=1`; the
task grades on the GPU Ray gave it). A task grades its entry on its own node, with that
node's Docker engine, images (the same content-hash tags, built there on first use) and
suite (which must have the manifest's content hash), into a folder of that node's, and
returns the report as JSON; the driver validates it and writes it into the round folder.
A node lost mid-round costs its running tasks, which Ray runs again elsewhere
(`max_retries`); entries already written by the driver are kept.

References are computed once per node (each node's cache is its own folder, under its
`$TMPDIR`, never bound into a container), not once per round. A task removes its entry's work
folder once graded; a node's `$TMPDIR/grader-round/<round>/` (its reference cache) stays
until the organiser removes it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from grader.errors import UsageError
from grader.grading.progress import Progress
from grader.model.results import Report
from grader.round.entry import EntryResult, grade_entry
from grader.round.model import Manifest, ManifestEntry, Outcome
from grader.round.request import RoundPresentation, RoundRequest, entry_request, record
from grader.round.request import suite_digest as digest_of
from grader.round.store import RoundDir
from grader.suite.load import find_suite

RESOURCE = "grader_docker"  # the custom resource of a node that can grade (its Docker engine)
MAX_RETRIES = 3  # a task whose node died is run again elsewhere this many times


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--ray: Ray is not installed",
                         hint="pip install 'grader[ray]' (ray 2.60)") from None
    return ray


def grade_task(name: str, bundle: bytes, task: Any, secret_hex: str, round_id: str,
               suite_digest: str, shared: bool) -> dict[str, str | None]:
    """Runs on a node: grade one entry there; the report and outcome as JSON for the driver."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    base = Path(tempfile.gettempdir()) / "grader-round" / round_id
    work = base / name
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o700)
    path = work / "bundle.tar"
    path.write_bytes(bundle)
    suite = find_suite(task.suite_for_round, list(task.suite_roots))
    if digest_of(suite) != suite_digest:
        outcome = Outcome(name=name, status="failed", node=node,
                          error=f"node {node}: its suite {suite.id!r} is not the round's "
                          "(its content hash differs)")
        return {"report": None, "outcome": outcome.model_dump_json()}
    req = replace(task.request, bundle=path, out_dir=work / "out", seed_secret=secret_hex)
    if req.settings.device == "cuda":
        given = tuple(int(g) for g in ray.get_gpu_ids()) or req.scheduling.gpus
        req = replace(req, scheduling=replace(req.scheduling, gpus=given))
    got = grade_entry(name, req, base / ".references" if shared else None, Progress(),
                      node=node)
    if got.report is not None:  # the driver has it now: its checkpoint (and secret) go
        shutil.rmtree(work, ignore_errors=True)
    return {"report": got.report.model_dump_json() if got.report else None,
            "outcome": got.outcome.model_dump_json()}


class _EntryTask:
    """What a task needs besides its entry (picklable)."""

    def __init__(self, request: Any, suite: str, suite_roots: tuple[Path, ...]) -> None:
        self.request = request
        self.suite_for_round = suite
        self.suite_roots = suite_roots


def grade_on_ray(req: RoundRequest, show: RoundPresentation, rd: RoundDir, manifest: Manifest,
                 todo: list[ManifestEntry], secret: bytes, progress: Progress) -> None:
    """Submit one task per entry of `todo`; write each result as it comes back."""
    from grader.paths import PROBLEM_BUNDLES

    ray = _import_ray()
    if not todo:
        return
    ray.init(address=req.run.scheduling.ray, log_to_driver=False, configure_logging=False)
    try:
        remote = ray.remote(grade_task).options(
            resources={RESOURCE: 1}, num_gpus=1 if req.run.settings.device == "cuda" else 0,
            num_cpus=1, max_retries=MAX_RETRIES)
        roots = tuple(req.run.suite_roots or (PROBLEM_BUNDLES,))
        pending: dict[Any, str] = {}
        for e in todo:
            task = _EntryTask(entry_request(req, rd, e, secret), manifest.suite.id,
                              tuple(p.resolve() for p in roots))
            assert e.bundle is not None
            ref = remote.remote(e.name, (rd.root / e.bundle).read_bytes(), task, secret.hex(),
                                manifest.round_id, manifest.suite.digest,
                                req.shared_references)
            pending[ref] = e.name
            progress(f"entry {e.name}: submitted to the Ray cluster")
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            name = pending.pop(done[0])
            got = _result(ray, done[0], name)
            out = record(rd, show, got, progress)
            progress(f"entry {name}: {out.status} on node {out.node}"
                     + (f" ({out.error})" if out.error else ""))
    finally:
        ray.shutdown()


def _result(ray: Any, ref: Any, name: str) -> EntryResult:
    """A task's result, checked: the report is validated against the schema here, on the
    driver; a task that failed (retries spent, a grader bug) is the entry's `failed`."""
    try:
        raw = ray.get(ref)
        outcome = Outcome.model_validate_json(raw["outcome"])
        report = Report.model_validate_json(raw["report"]) if raw["report"] else None
    except Exception as exc:  # a lost node past its retries, or a bug on the node
        return EntryResult(report=None, outcome=Outcome(
            name=name, status="failed", error=f"the Ray task failed: {type(exc).__name__}: "
            f"{str(exc)[:500]}"))
    if outcome.name != name:
        return EntryResult(report=None, outcome=Outcome(name=name, status="failed",
                                                   error="the task returned another entry"))
    return EntryResult(report=report, outcome=outcome)

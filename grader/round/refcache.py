"""References once per round: each batch's reference outputs kept on the host and reused.

A round grades many entries against one suite under one secret, so every entry gets the
same cases (the seeds derive from the secret, the problem, the shape and the case number:
worker.derive_seed) and the same reference outputs. The first entry to reach a batch runs
its reference as `grader run` does; the folder the reference wrote (`<case>.ref`, the
problem's public recipe, its result with the case checks and, on a GPU, its timings) is then
copied here, whole, under a key of everything its content depends on. Every later entry's
batch runs only the entry's container, which gets its job and the recipe from this copy after
its import, exactly as it would from a fresh reference's folder (jobs.deliver), and draws its
inputs from the job's seeds where it runs them; the expected outputs never leave the host. Its
container is started ahead of its turn, beside the batch before, as a first entry's are
(run.ahead.EntryStandby, cached_entry): it imports while that batch runs, and that batch's
timed loops wait until it is at its gate.

The cache is a folder of the round's (`ROUND_DIR/.references/`, mode 0700) on the host; no
container ever has it bound. On `--runtime host` the round checks that no bind of the host's
interpreter reaches it (round/conduct.py).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import threading
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from grader.harness import tensors
from grader.model.evidence import read_out_dir
from grader.model.runs import Case, Evidence, ExitState
from grader.run import plan as batching
from grader.run.ahead import Beside, Standby
from grader.run.cached import cached_entry

if TYPE_CHECKING:
    from grader.grading.planned import Planned
    from grader.grading.worker import Worker

FORMAT = 1
META = "meta.json"  # written last into a batch's folder: the folder is complete
# A cached reference's exit: what a reference that finished with every case ok leaves (only
# such runs are kept). Its wall time is not this entry's: zero, and its harness phases dropped.
CACHED_EXIT = ExitState(exit_code=0, timed_out=False, oom_killed=False, wall_s=0.0, logs="",
                        logs_truncated=False)


@dataclass(frozen=True, kw_only=True)
class Use:
    """One batch of one entry: its reference computed here (and kept) or taken from the cache."""

    problem: str
    key: str
    cases: int
    computed: bool


def batch_key(w: Worker, plan: Planned, cases: list[Case]) -> str:
    """What a batch's reference outputs depend on: the suite's version, the problem's image
    (a content hash of its reference, problem file and the harness), the device, runtime and
    timing knobs, and each case (id, seed, module seed, timing set, shape and its params)."""
    ctx, setup = w.ctx, w.setup
    doc = {"format": FORMAT, "suite": w.suite.id, "suite_version": w.suite.info.version,
           "problem": plan.sp.id, "image": plan.image, "device": setup.device,
           "runtime": ctx.settings.runtime,
           "timing": asdict(setup.timing) if setup.timing else None,
           "cases": [[c.id, c.seed, c.module_seed, c.timing, c.shape.id, c.shape.params]
                     for c in cases]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


class ReferenceCache:
    """The round's reference outputs, by batch key; one view per entry (`entry`), which
    records what that entry computed and what it took (`uses`)."""

    def __init__(self, root: Path, entry: str = "") -> None:
        self.root = root
        self.entry = entry
        self.uses: list[Use] = []
        self._lock = threading.Lock()

    def for_entry(self, entry: str) -> ReferenceCache:
        return ReferenceCache(self.root, entry)

    def folder(self, key: str) -> Path | None:
        path = self.root / key
        return path if (path / META).is_file() else None

    def has(self, w: Worker, plan: Planned, k: int) -> bool:
        return self.folder(batch_key(w, plan, plan.part_cases(k))) is not None

    def _note(self, use: Use) -> None:
        with self._lock:
            self.uses.append(use)

    def keep(self, w: Worker, plan: Planned, k: int, ref_dir: Path) -> None:
        """Copy a usable reference's folder in (regular files only), whole or not at all: a
        folder beside the others, renamed into place once its META is written. Another
        worker that got there first wins; a host that cannot write it loses only the reuse."""
        cases = plan.part_cases(k)
        key = batch_key(w, plan, cases)
        self._note(Use(problem=plan.sp.id, key=key, cases=len(cases), computed=True))
        if self.folder(key) is not None:
            return
        tmp = self.root / f".part-{uuid.uuid4().hex}"
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            with os.scandir(ref_dir) as it:
                files = {Path(e.path): st.st_size for e in it
                         if stat.S_ISREG((st := e.stat(follow_symlinks=False)).st_mode)}
            size, free = sum(files.values()), shutil.disk_usage(self.root).free
            if size > free:  # known before a byte is copied, not after tens of gigabytes
                raise OSError(errno.ENOSPC, f"{size} bytes to keep, {free} free")
            tmp.mkdir(mode=0o700)
            for f in files:
                tensors.copy_file(f, tmp / f.name)
            (tmp / META).write_text(json.dumps(
                {"format": FORMAT, "problem": plan.sp.id, "cases": [c.id for c in cases],
                 "computed_by": self.entry, "created": time.time()}, indent=1))
            os.rename(tmp, self.root / key)
        except OSError as exc:
            w.ctx.progress(f"{plan.label(k)}: cannot keep its reference for the round: {exc}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def grade(self, w: Worker, plan: Planned, k: int, beside: Beside | None) -> bool:
        """Grade batch `k` of `plan` on the cached reference, running the entry's container
        only; False (nothing done) when the cache does not have it.

        The entry's limits are those `grader run` would give it: from the problem's count,
        raised when the reference's outputs need more (run.pair.run_pair), or from the
        outputs alone when the batch runs one container after the other."""
        cases, shapes = plan.part_cases(k), plan.parts[k]
        key = batch_key(w, plan, cases)
        ref_dir = self.folder(key)
        if ref_dir is None:
            return False
        standby = plan.standbys.pop(k, None)
        if isinstance(standby, Standby):  # started before the cache had this batch
            standby.close()
            standby = None
        batch = w.batch(plan, k)
        ids = [c.id for c in cases]
        base = batch.entry_limits if batch is not None else w.ctx.entry_limits
        limits = batching.entry_limits(base, ref_dir, ids)
        if batch is not None and limits.output_bytes <= base.output_bytes:
            limits = base
        out = read_out_dir(ref_dir)
        if out.result is not None:  # the reference's own phases were counted where it ran
            out = replace(out, result=out.result.model_copy(update={"phases_s": {}}))
        ref = Evidence(exit=CACHED_EXIT, out=out)
        self._note(Use(problem=plan.sp.id, key=key, cases=len(cases), computed=False))
        plan.started = plan.started or time.monotonic()
        w.ctx.progress(f"{plan.label(k)}: entry ({len(cases)} cases; the round's reference)")
        with cached_entry(w.setup, plan.image, plan.kernel, cases, ref_dir, limits,
                          plan.sp.problem, standby=standby, beside=beside) as entry:
            results, logs = w.judge(plan, shapes, cases, ref, entry, limits)
        plan.results += results
        plan.logs = logs
        return True

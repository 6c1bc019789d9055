"""References once per round: each batch's reference outputs kept on the host and reused.

A round grades many entries against one suite under one secret, so every entry gets the
same cases (the seeds derive from the secret, the problem, the shape and the case number:
grading.seeds.derive_seed) and the same reference outputs. The first entry to reach a batch
runs its reference as `grader run` does; the folder the reference wrote (`<case>.ref`, the
problem's public recipe, its result with the case checks and, on a GPU, its timings) is then
copied here, whole, under a key of everything its content depends on
(grading.reuse.batch_key). The cache is storage alone, the worker's `References`: a folder
found by key, one kept, what each entry reused; the worker grades (grading.reuse). Every
later entry's batch runs only the entry's container, which gets its job and the recipe from
this copy after its import, exactly as it would from a fresh reference's folder
(jobs.deliver), and draws its inputs from the job's seeds where it runs them; the expected
outputs never leave the host. Its container is started ahead of its turn, beside the batch
before, as a first entry's are (run.ahead.EntryStandby, cached_entry): it imports while that
batch runs, and that batch's timed loops wait until it is at its gate.

A batch whose folder does not fit the room left (or its problem's share of it) is kept light
when that fits: its result, timings, recipe and checked timed calls' samples, without its
correctness cases' expected outputs (the bulk: Atrex-Bench's block_scaled_mm, 5-12 GB a
batch). A later entry's batch then runs its entry alone as on a whole folder, and after it a
reference container that computes only those outputs (grading.reuse.grade_cached): no
timed loop, no checked calls, and no pairing with the entry's container.

The cache is a folder of the round's (`ROUND_DIR/.references/`, mode 0700) on the host; no
container ever has it bound. On `--runtime host` the round checks that no bind of the host's
interpreter reaches it (round/conduct.py).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from grader.files import regular_files
from grader.harness import tensors
from grader.harness.protocol import EXPECTED, case_file

FORMAT = 1
META = "meta.json"  # written last into a batch's folder: the folder is complete
# The share of the cache's file system a keep leaves free, at most RESERVE_MAX: the round's
# reports and checkpoints (megabytes) live there too, and often the engine's images (built
# before the round: `grader round commit`). Atrex-Bench's references alone come to more than the
# GPU hosts' 64 GiB free (block_scaled_mm: 57 GiB): the batches that do not fit are computed
# again for each entry, and the disk never fills. A tenth alone left 25 GB of those 64 GiB to
# the host (a disk of 252 GB), and the batches it turned away cost every later entry of
# Atrex-Bench minutes (docs/benchmarks.md, "Twenty-third session").
RESERVE = 0.1
RESERVE_MAX = 8 << 30
# One problem's kept folders may take at most this share of the room the cache may still fill
# (free space less RESERVE) when its first batch is kept; its batches past that are computed
# again for each entry. In a suite's order one large problem would take the room of many small
# ones (Atrex-Bench's block_scaled_mm, second of 30, would fill it alone), and every batch not
# kept costs each later entry a reference run. Counted by the folders' own sizes: a count
# planned from a problem's traffic (where its outputs cannot be counted apart: Atrex-Bench's
# fp8_blockscale_fused_moe, 20.7 GiB a seed, whose outputs are 0.2 GiB) would turn small ones
# away.
PROBLEM_SHARE = 0.5


def host_reserve(total: int) -> int:
    """The bytes of a file system of `total` bytes that the round's keeps leave free."""
    return min(int(total * RESERVE), RESERVE_MAX)


# How a batch's reference was kept: whole, or light (without its correctness outputs).
Kept = Literal["whole", "light"]


@dataclass(frozen=True, kw_only=True)
class Use:
    """One batch of one entry: its reference computed here (and kept) or taken from the cache."""

    problem: str
    key: str
    cases: int
    computed: bool


class ReferenceCache:
    """The round's reference outputs, by batch key; one view per entry (`entry`), which
    records what that entry computed and what it took (`uses`)."""

    def __init__(self, root: Path, entry: str = "") -> None:
        self.root = root
        self.entry = entry
        self.uses: list[Use] = []
        self._lock = threading.Lock()
        # by problem: the bytes its kept folders may take (set by its first keep) and take
        self._share: dict[str, int] = {}
        self._kept: dict[str, int] = {}

    def for_entry(self, entry: str) -> ReferenceCache:
        return ReferenceCache(self.root, entry)

    def folder(self, key: str) -> Path | None:
        path = self.root / key
        return path if (path / META).is_file() else None

    def _note(self, use: Use) -> None:
        with self._lock:
            self.uses.append(use)

    def reused(self, key: str, *, problem: str, cases: int) -> None:
        self._note(Use(problem=problem, key=key, cases=cases, computed=False))

    def _meta(self, key: str) -> dict[str, object]:
        try:
            meta = json.loads((self.root / key / META).read_text())
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def light(self, key: str) -> dict[str, int]:
        """The outputs a kept folder was kept without (a light keep: case id -> bytes), empty
        for a whole one."""
        light = self._meta(key).get("light")
        return {str(k): int(v) for k, v in light.items()} if isinstance(light, dict) else {}

    def computed_by(self, key: str) -> str | None:
        """Who computed the kept folder of `key` (an entry's name, or `grader round
        prepare`'s); None when none is kept."""
        by = self._meta(key).get("computed_by")
        return by if isinstance(by, str) else None

    def keep(self, key: str, ref_dir: Path, *, problem: str, cases: list[str],
             outputs: Sequence[str] = ()) -> Kept:
        """Copy a usable reference's folder in (regular files only), whole or not at all: a
        folder beside the others, renamed into place once its META is written. Another
        worker that got there first wins. A folder that does not fit (below) is kept light
        when that fits: without the expected outputs of `outputs` (the batch's correctness
        cases), which each later entry's batch computes again in a reference run of their
        own after its entry (grading/reuse.grade_cached); its result, timings, recipe and the
        checked timed calls' samples are kept. OSError when the host cannot write it, when
        even that would leave less than host_reserve of the disk free, or when the whole
        folder would take its problem's kept folders past PROBLEM_SHARE of the room left
        when its first batch came and the light one does not fit: the worker says so, the
        round loses only the reuse."""
        self._note(Use(problem=problem, key=key, cases=len(cases), computed=True))
        if self.folder(key) is not None:
            return "whole"
        tmp = self.root / f".part-{uuid.uuid4().hex}"
        claimed = 0
        kind: Kept
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            files = regular_files(ref_dir)
            left = {ref_dir / case_file(c, EXPECTED) for c in outputs}
            light = {f.name.removesuffix(f".{EXPECTED}"): size for f, size in files.items()
                     if f in left}
            size, kind = sum(files.values()), "whole"
            try:
                claimed = self._claim(problem, size, share=True)
            except OSError:
                if not light:
                    raise
                files = {f: n for f, n in files.items() if f not in left}
                size, kind = sum(files.values()), "light"
                claimed = self._claim(problem, size, share=False)
            tmp.mkdir(mode=0o700)
            for f in files:
                tensors.copy_file(f, tmp / f.name)
            (tmp / META).write_text(json.dumps(
                {"format": FORMAT, "problem": problem, "cases": cases,
                 "computed_by": self.entry, "created": time.time(),
                 **({"light": light} if kind == "light" else {})}, indent=1))
            os.rename(tmp, self.root / key)
            claimed = 0
            return kind
        finally:
            if claimed:
                with self._lock:
                    self._kept[problem] -= claimed
            shutil.rmtree(tmp, ignore_errors=True)

    def _claim(self, problem: str, size: int, *, share: bool) -> int:
        """`size` bytes of the room claimed for `problem`, before a byte is copied (workers
        keep batches side by side); OSError when they would leave less than host_reserve of
        the disk free, or (`share`) take the problem past its share of the room."""
        disk = shutil.disk_usage(self.root)
        reserve = host_reserve(disk.total)
        room = disk.free - reserve
        if size > room:  # known before a byte is copied, not after tens of GiB
            raise OSError(errno.ENOSPC, f"{size} bytes to keep, {disk.free} free, "
                          f"{reserve} of them left to the host")
        with self._lock:
            limit = self._share.setdefault(problem, int(PROBLEM_SHARE * room))
            kept = self._kept.get(problem, 0)
            if share and kept + size > limit:
                raise OSError(errno.ENOSPC, f"{size} bytes to keep, past its problem's "
                              f"share of the room ({kept} of {limit} bytes kept): left "
                              "to the problems after it")
            self._kept[problem] = kept + size
        return size

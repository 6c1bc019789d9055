"""A batch whose reference a round computed already (grader/round/refcache.py): its entry's
container alone, started ahead when it could be (ahead.EntryStandby), or a worker of the
entry's serving container (run.served).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.model.runs import Evidence
from grader.run.ahead import Beside, EntryStandby
from grader.run.batch import Batch, entry_run
from grader.run.jobs import WorkerSetup
from grader.run.sequential import EntryRun, entry_container
from grader.run.served import Server


@contextmanager
def cached_entry(setup: WorkerSetup, batch: Batch, ref_out: Path, *,
                 standby: EntryStandby | None, beside: Beside | None,
                 server: Callable[[], Server | None] | None = None) -> Iterator[Evidence]:
    """Run the batch's entry on a reference computed earlier (a round's cache,
    grader/round/): in its standby, started ahead of its turn, when there is one still
    usable (and, for a container of its own, started under the batch's entry limits), else
    as a worker of the entry's serving container, when `server` gives one (asked only
    then: one it starts is not started for nothing), else in a container of its own
    (entry_container). `beside`: what its timed loops wait for (as
    run_pair's do); its warm-up and traced calls run beside it."""
    with contextlib.ExitStack() as stack:
        if standby is not None:
            stack.callback(standby.close)
            standby.settle()
            # A served worker takes the batch's limits at its release; a container has its own.
            if not standby.usable() or (not standby.served
                                        and standby.batch.entry_limits != batch.entry_limits):
                standby.close()
                standby = None
        if standby is None and server is not None and (serving := server()) is not None:
            standby = EntryStandby(setup, batch, server=serving)  # released at once below
            stack.callback(standby.close)
        if standby is None:
            # Started at once, beside the next batches' standbys: only its timed loops wait
            # for them (it waited for their set-up before its own: 17.0 s for a later entry's
            # first light problem on the H200, 2026-12-05, where its others took 4-8 s).
            with entry_container(setup, batch, ref_out, beside=beside) as run:
                yield run
            return
        standby.release(batch)
        exit_state = EntryRun(setup=setup, ent=standby.ent, in_dir=standby.ent_in,
                              batch=batch, ref_out=ref_out, beside=beside).wait()
        yield entry_run(exit_state, standby.ent_out)

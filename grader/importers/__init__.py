"""`grader import KIND DIR -o OUT`: other benchmarks' problems as suites of ours.

Each source module reads its format into a `SuiteDraft` (common.py) without writing anything;
`write.write_suite` makes the suite (docs/import.md has every mapping).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from grader.importers import atrex, kernelbench
from grader.importers.common import SuiteDraft
from grader.importers.write import ImportOptions, ImportResult, write_suite

READERS: dict[str, Callable[..., SuiteDraft]] = {"atrex": atrex.read,
                                                 "kernelbench": kernelbench.read}

__all__ = ["READERS", "ImportOptions", "ImportResult", "import_suite"]


def import_suite(kind: str, source: Path, opts: ImportOptions) -> ImportResult:
    """Read `source` as a `kind` benchmark and write it as the suite `opts.out`."""
    draft = READERS[kind](source, skip_bad=opts.skip_bad)
    return write_suite(draft, opts)

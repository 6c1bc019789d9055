"""A suite of the user's own for the integration tests (issue 34): the demo's vector_add
under the id `mine`, in a folder outside problem_bundles/, and a submission for it."""

from __future__ import annotations

import shutil
from pathlib import Path

from grader.paths import REPO

DEMO = REPO / "problem_bundles" / "demo"


def vector_add_suite(folder: Path) -> Path:
    """`folder/mine`: the demo's vector_add problem, its weights, as suite `mine`."""
    suite = folder / "mine"
    (suite / "vector_add").mkdir(parents=True)
    for name in ("problem.toml", "reference.py"):
        shutil.copy(DEMO / "vector_add" / name, suite / "vector_add" / name)
    (suite / "suite.toml").write_text(
        '[suite]\nid = "mine"\ndescription = "the demo\'s vector add, as a suite of its own"\n'
        'version = "0.1.0"\nproblems = ["vector_add"]\nseeds_per_shape = 2\ntimeout_s = 300\n')
    weights = (DEMO / "weights.toml").read_text().split("[[weights]]")
    (suite / "weights.toml").write_text("[[weights]]".join(
        b for b in weights if "matmul" not in b and "rmsnorm" not in b))
    return suite


def entry_for_mine(folder: Path, name: str, example: str = "triton") -> Path:
    """`folder/name`: a submission for suite `mine` with the vector_add kernel of
    examples/`example`."""
    entry = folder / name
    (entry / "kernels").mkdir(parents=True)
    shutil.copy(REPO / "examples" / example / "kernels" / "vector_add.py", entry / "kernels")
    (entry / "submission.toml").write_text(
        f'[submission]\nname = "{name}"\nsuite = "mine"\ndsl = "triton"\n\n'
        '[problems.vector_add]\nfile = "kernels/vector_add.py"\n')
    return entry

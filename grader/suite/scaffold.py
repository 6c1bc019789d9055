"""`grader init`: scaffold a new problem folder from the templates in templates/problem/.

The files are valid as written (the tests load them with the same code `grader run` uses
and run the reference), so an organiser starts from something that grades and edits it,
rather than from a blank page and a schema.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from grader.errors import UsageError

TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "problem"
FILES: dict[str, str] = {"problem.toml": "problem.toml.tmpl", "reference.py": "reference.py.tmpl"}
# The `Ident` pattern of grader.formats; a problem id is also a folder and a Python-safe name.
PROBLEM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


SUITE_TOML = """\
# Suite `$id`, created by `grader init`. Field by field: docs/formats.md (Suites).
[suite]
id = "$id"  # the folder's name
description = "TODO: what this suite measures, for agents and readers"
version = "0.1.0"
problems = [$problems]  # add each new problem here (grader init does for a new suite)
seeds_per_shape = 2
timeout_s = 300
"""
WEIGHTS_TOML = """\
# Importance weights of suite `$id`'s scored shapes: each shape's share of the score.
# Smoke shapes carry none. Field by field: docs/formats.md (Weights).
version = "0.1.0"
source = "TODO: where the weights come from (traces, a serving model, uniform)"

# One table per scored (problem, shape), e.g.:
# [[weights]]
# problem = "$first"
# shape = "prefill_8k"
# weight = 1.0
"""


def suite_files(suite_id: str, problem_id: str) -> dict[str, str]:
    """suite.toml and weights.toml of a new suite holding `problem_id` (pure)."""
    values = {"id": suite_id, "problems": f'"{problem_id}"', "first": problem_id}
    return {"suite.toml": Template(SUITE_TOML).substitute(values),
            "weights.toml": Template(WEIGHTS_TOML).substitute(values)}


@dataclass(frozen=True, kw_only=True)
class Scaffold:
    directory: Path
    files: list[Path]  # the problem's
    next_steps: list[str]
    suite_files: list[Path] = field(default_factory=list)  # a new suite's toml files


def render(problem_id: str, problem_dir: Path) -> dict[str, str]:
    """The scaffold's files by name (pure)."""
    values = {"id": problem_id, "problem_dir": str(problem_dir)}
    return {name: Template((TEMPLATES / tmpl).read_text(encoding="utf-8")).substitute(values)
            for name, tmpl in FILES.items()}


def scaffold(problem_id: str, suite_dir: Path) -> Scaffold:
    """Write SUITE_DIR/PROBLEM_ID/{problem.toml,reference.py}; never overwrites anything."""
    if not PROBLEM_ID.fullmatch(problem_id):
        raise UsageError(f"{problem_id!r}: not a valid problem id",
                         hint="use letters, digits, `_`, `.` and `-` (at most 64, starting "
                         "with a letter or digit), e.g. rms_norm")
    if suite_dir.exists() and not suite_dir.is_dir():
        raise UsageError(f"--suite {suite_dir}: not a folder",
                         hint="pass the suite folder, e.g. problem_bundles/demo")
    target = suite_dir / problem_id
    if target.exists():
        raise UsageError(f"{target}: already exists; grader init never overwrites",
                         hint="choose another id, or remove the folder first")
    # A new suite gets its suite.toml and weights.toml too (issue 23: init told the user to
    # edit files it had not made); an existing suite's are never touched.
    new_suite = not (suite_dir / "suite.toml").exists()
    suite_id = suite_dir.resolve().name
    if new_suite and not PROBLEM_ID.fullmatch(suite_id):
        raise UsageError(f"--suite {suite_dir}: {suite_id!r} is not a valid suite id (a new "
                         "suite's id is its folder's name)",
                         hint="name the folder with letters, digits, `_`, `.` and `-`")
    if new_suite and (suite_dir / "weights.toml").exists():
        raise UsageError(f"{suite_dir}: has weights.toml but no suite.toml; grader init "
                         "never overwrites", hint="add suite.toml by hand, or remove the "
                         "weights.toml")
    texts = {name: (target, text) for name, text in render(problem_id, target).items()}
    if new_suite:
        texts.update({name: (suite_dir, text)
                      for name, text in suite_files(suite_id, problem_id).items()})
    try:
        target.mkdir(parents=True)
        written = []
        for name, (folder, text) in texts.items():
            path = folder / name
            with open(path, "x", encoding="utf-8") as fh:  # "x": fail rather than overwrite
                fh.write(text)
            written.append(path)
    except OSError as exc:
        raise UsageError(f"{target}: cannot create the problem: {exc.strerror or exc}",
                         hint="check that --suite is a writable folder") from None
    return Scaffold(directory=target, files=[p for p in written if p.parent == target],
                    suite_files=[p for p in written if p.parent != target],
                    next_steps=next_steps(problem_id, suite_dir, target))


def next_steps(problem_id: str, suite_dir: Path, target: Path) -> list[str]:
    steps = [f"replace the TODOs in {target / 'problem.toml'} and {target / 'reference.py'}",
             f"grader roofline derive {target}   # checks the flops and bytes expressions"]
    suite_toml = suite_dir / "suite.toml"
    listed = False
    if suite_toml.is_file():
        try:
            listed = problem_id in tomllib.loads(suite_toml.read_text("utf-8")).get(
                "suite", {}).get("problems", [])
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            listed = False
    if not listed:
        steps.append(f"add {problem_id!r} to [suite].problems in {suite_toml}")
    steps.append(f"give its scored shapes weights in {suite_dir / 'weights.toml'}")
    steps.append(f"grade a kernel for it: grader run KERNEL.py --problem {problem_id} "
                 f"--suite {suite_dir}")
    return steps

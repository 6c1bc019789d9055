"""`grader init`: scaffold a new problem folder from the templates in templates/problem/.

The files are valid as written (the tests load them with the same code `grader run` uses
and run the reference), so an organiser starts from something that grades and edits it,
rather than from a blank page and a schema.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from string import Template

from grader.errors import UsageError

TEMPLATES = Path(__file__).resolve().parent / "templates" / "problem"
FILES: dict[str, str] = {"problem.toml": "problem.toml.tmpl", "reference.py": "reference.py.tmpl"}
# The `Ident` pattern of grader.formats; a problem id is also a folder and a Python-safe name.
PROBLEM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, kw_only=True)
class Scaffold:
    directory: Path
    files: list[Path]
    next_steps: list[str]


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
    texts = render(problem_id, target)
    try:
        target.mkdir(parents=True)
        written = []
        for name, text in texts.items():
            path = target / name
            with open(path, "x", encoding="utf-8") as fh:  # "x": fail rather than overwrite
                fh.write(text)
            written.append(path)
    except OSError as exc:
        raise UsageError(f"{target}: cannot create the problem: {exc.strerror or exc}",
                         hint="check that --suite is a writable folder") from None
    return Scaffold(directory=target, files=written,
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
    return steps

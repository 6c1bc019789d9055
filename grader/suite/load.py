"""Load a suite from `problem_bundles/<suite>/`: its problems, weights and trusted files."""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.errors import ProblemError, UsageError
from grader.formats._base import load_toml
from grader.formats.problem import Problem, SuiteFile, SuiteInfo, Weights

# Every problem's trusted files; a problem's `extra_files` (e.g. the sources an importer
# wrapped) join them, in its image and in the release kit. Nothing else of the folder does.
PROBLEM_FILES = ("problem.toml", "reference.py")


@dataclass(frozen=True, kw_only=True)
class SuiteProblem:
    """A problem of a suite: its spec and its folder of trusted files (`sp` in the code; it
    was SuiteProblem, a second meaning of the word that names the submission's tar: issue 33)."""

    problem: Problem
    directory: Path

    @property
    def id(self) -> str:
        return self.problem.id

    def files(self) -> dict[str, bytes]:
        """The trusted files that go into the problem's image, by name."""
        names = (*PROBLEM_FILES, *self.problem.extra_files)
        return {name: (self.directory / name).read_bytes() for name in names}

    def digest(self) -> str:
        h = hashlib.sha256()
        for name, data in sorted(self.files().items()):
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        return h.hexdigest()


@dataclass(frozen=True, kw_only=True)
class Suite:
    info: SuiteInfo
    weights: Weights
    problems: dict[str, SuiteProblem]
    directory: Path

    @property
    def id(self) -> str:
        return self.info.id


def load_problem(directory: Path) -> SuiteProblem:
    toml_path = directory / "problem.toml"
    if not toml_path.is_file():
        raise ProblemError(f"{toml_path}: missing", hint="every problem folder needs problem.toml")
    problem = load_toml(toml_path, Problem, ProblemError)
    if problem.id != directory.name:
        raise ProblemError(
            f"{toml_path}: field id: is {problem.id!r} but the folder is {directory.name!r}"
        )
    if not (directory / "reference.py").is_file():
        raise ProblemError(f"{directory / 'reference.py'}: missing",
                           hint="define reference(*inputs) and make_inputs(seed, device, **params)")
    for name in problem.extra_files:
        path = directory / name
        if path.is_symlink() or not path.is_file():
            raise ProblemError(f"{toml_path}: field extra_files: {path} is not a regular file",
                               hint="list only files of the problem's own folder")
    return SuiteProblem(problem=problem, directory=directory)


def load_suite(directory: Path) -> Suite:
    suite_path = directory / "suite.toml"
    if not suite_path.is_file():
        raise ProblemError(f"{suite_path}: missing",
                           hint="is this a problem_bundles/<suite> folder?")
    info = load_toml(suite_path, SuiteFile, ProblemError).suite
    if info.id != directory.name:
        raise ProblemError(f"{suite_path}: field suite.id: is {info.id!r} "
                           f"but the folder is {directory.name!r}")
    weights_path = directory / "weights.toml"
    if not weights_path.is_file():
        raise ProblemError(f"{weights_path}: missing", hint="every suite needs weights.toml")
    weights = load_toml(weights_path, Weights, ProblemError)
    problems = {pid: load_problem(directory / pid) for pid in info.problems}
    for i, w in enumerate(weights.weights):
        where = f"{weights_path}: field weights.{i}"
        if w.problem not in problems:
            raise ProblemError(f"{where}.problem: {w.problem!r} is not a problem of the suite")
        shape_ids = {s.id for s in problems[w.problem].problem.shapes}
        if w.shape is not None and w.shape not in shape_ids:
            raise ProblemError(f"{where}.shape: {w.shape!r} is not a shape of {w.problem}",
                               hint=f"expected one of {sorted(shape_ids)}")
    return Suite(info=info, weights=weights, problems=problems, directory=directory)


def find_suite(name_or_path: str, roots: list[Path]) -> Suite:
    """A suite by name under one of the `roots` (problem_bundles folders, `--suites`), else by
    folder path. The roots come first: a folder of the same name in the working directory
    (an import's source, a checkout) must not shadow the suite asked for (issue 20)."""
    for root in roots:
        if (root / name_or_path / "suite.toml").is_file():
            return load_suite(root / name_or_path)
    path = Path(name_or_path)
    if path.is_dir():
        return load_suite(path)
    raise ProblemError(f"suite {name_or_path!r} not found",
                       hint=f"looked in {', '.join(str(r) for r in roots)}; pass --suites DIR "
                       "(a folder of suites, or the suite's own) or set GRADER_SUITES")


def check_problems(suite: Suite, problems: Iterable[str]) -> None:
    """Refuse a --problem naming no problem of `suite` (the first in name order), saying which
    it has, the nearest first (issue 34: the refusal had no hint). The one check for run,
    suite check and round (issue 33: written three times with one message)."""
    unknown = sorted(set(problems) - set(suite.problems))
    if not unknown:
        return
    near = difflib.get_close_matches(unknown[0], list(suite.problems), n=1)
    raise UsageError(f"--problem {unknown[0]!r} is not in suite {suite.id}",
                     hint=(f"did you mean {near[0]!r}? " if near else "")
                     + f"suite {suite.id} has {', '.join(suite.problems)}")

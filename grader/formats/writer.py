"""TOML text of the format models (pure), written by tomli-w and read back before it is returned.

The one writer of the files the grader generates from a model: an imported suite's
`problem.toml`, `suite.toml` and `weights.toml` (grader/importers/write.py) and a release kit's
`spec.toml` (the release kit's builder). A model is dumped in the order of its fields (plain
keys first, then tables such as `[tolerance.<dtype>]`, `[[shapes]]` and `[hidden]`, as TOML
needs), under a header of comment lines. The text is parsed again with the project's own loader
(`parse_toml`, what `grader run` reads files with), and one that does not read back as the very
same model is refused rather than written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import tomli_w
from pydantic import BaseModel

from grader.errors import GraderError
from grader.formats._base import parse_toml
from grader.formats.problem import Problem, SuiteFile, SuiteInfo, Weights
from grader.formats.spec import Spec


def comment_lines(header: str) -> str:
    """`header` as TOML comment lines, one per line of it (tomli-w writes no comments)."""
    return "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def model_toml(model: BaseModel, name: str, header: str = "", *,
               skip_defaults: bool = True) -> str:
    """`model` as the text of file `name`: fields equal to their default are left out when
    `skip_defaults` (never a field that is None); GraderError if it would not read back."""
    data = model.model_dump(exclude_defaults=skip_defaults, exclude_none=True)
    # Texts with a newline become multi-line strings, easier to read, unless one holds a
    # carriage return: tomli-w writes a multi-line string's "\r\n" as "\n".
    multiline = not any("\r" in s for s in _strings(data))
    body = tomli_w.dumps(data, multiline_strings=multiline)
    text = f"{comment_lines(header)}\n{body}" if header else body
    if parse_toml(text, type(model), name, GraderError) != model:
        raise GraderError(f"{name}: the written TOML does not read back as the same "
                          f"{type(model).__name__}", hint="a grader bug: report it with --debug")
    return text


def problem_toml(problem: Problem, header: str = "") -> str:
    return model_toml(problem, f"problem {problem.id}: problem.toml", header)


def spec_toml(spec: Spec, header: str = "") -> str:
    return model_toml(spec, f"problem {spec.id}: spec.toml", header)


def suite_toml(info: SuiteInfo, header: str = "") -> str:
    # Every field written out: the seeds and the time limit an import chose stay in view.
    return model_toml(SuiteFile(suite=info), "suite.toml", header, skip_defaults=False)


def weights_toml(weights: Weights, header: str = "") -> str:
    return model_toml(weights, "weights.toml", header)

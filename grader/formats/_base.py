"""Shared pieces of the format models: strict frozen models and TOML loading with good errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from grader.errors import GraderError

# Identifiers of problems, shapes and suites: safe as file names and in container paths.
Ident = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


class Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


M = TypeVar("M", bound=BaseModel)


def describe_validation(err: ValidationError) -> str:
    """One line per problem: the field's dotted path, what was wrong and what was expected."""
    lines = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"  field {where}: {e['msg']} (got {e.get('input')!r:.80})")
    return "\n".join(lines)


def parse_toml(text: str, model: type[M], source: str, error: type[GraderError]) -> M:
    """Parse TOML text into `model`; any failure raises `error` naming `source` and the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply to be a valid file") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(
            f"{source}: invalid {model.__name__}:\n{describe_validation(exc)}",
            hint="see docs/formats.md for the expected fields",
        ) from None


def load_toml(path: Path, model: type[M], error: type[GraderError]) -> M:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    return parse_toml(text, model, str(path), error)

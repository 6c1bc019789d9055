"""One finding of the fallback/tampering analysis, static or dynamic."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Severity(StrEnum):
    INFO = "info"  # worth showing, changes no verdict
    WARNING = "warning"  # suspicious; the dynamic evidence decides
    FALLBACK = "fallback"  # the work is delegated: the shape cannot be `passed`
    VIOLATION = "violation"  # forbidden by the policy: `policy_violation`
    TAMPERING = "tampering"  # an attack on the grader's evidence: `tampering`


class Layer(StrEnum):
    STATIC = "static"
    DYNAMIC = "dynamic"


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str = Field(pattern=r"^[A-Z]{2,4}[0-9]{3}$")  # e.g. FB001
    severity: Severity
    layer: Layer
    message: str
    file: str | None = None
    line: int | None = Field(default=None, ge=1)
    column: int | None = Field(default=None, ge=0)
    snippet: str | None = None

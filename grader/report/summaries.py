"""What `--json` prints on stdout for agents and CI: one object per command (issue 23).

`grader check --json`, `grader bundle check --json` and `grader run --json` each print one
object of the models below, and nothing else on stdout (human text goes to stderr). When the
command fails (a refused bundle, a `--fail-on` gate, a broken reference) the object is still
printed, with `ok: false`, the exit code and the error, before the command exits with that
code. The JSON schemas in docs/schemas/ are generated from these models
(`grader schema NAME`; a unit test keeps them current).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.errors import GraderError
from grader.model.findings import Finding
from grader.verdicts import Verdict

if TYPE_CHECKING:
    from grader.intake.tools import BundleCheck
    from grader.model.results import ProblemResult, Report, ShapeResult

SCHEMA_VERSION: Literal["1"] = "1"


class Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorInfo(Out):
    """A failure of the command: its class, exit code, message and advice (docs/cli.md)."""

    kind: str  # the error class, e.g. BundleTooLarge, VerdictGate, ReferenceFailed
    exit_code: int
    message: str
    hint: str | None = None

    @classmethod
    def of(cls, exc: GraderError) -> ErrorInfo:
        return cls(kind=type(exc).__name__, exit_code=exc.exit_code, message=exc.message,
                   hint=exc.hint)


class FileFindings(Out):
    file: str
    findings: list[Finding]


class CheckSummary(Out):
    """`grader check --json`: the static findings of a bundle's kernels."""

    command: Literal["check"] = "check"
    schema_version: Literal["1"] = SCHEMA_VERSION
    ok: bool  # the bundle was read (findings do not make it fail)
    exit_code: int
    error: ErrorInfo | None = None
    bundle: str
    files: list[FileFindings] = Field(default_factory=list)
    total: int = 0
    blocking: int = 0  # findings of severity fallback, violation or tampering


class KernelOut(Out):
    problem: str
    file: str
    lines: int
    bytes: int


class BundleCheckSummary(Out):
    """`grader bundle check --json`: would the grader accept this bundle, and why not."""

    command: Literal["bundle-check"] = "bundle-check"
    schema_version: Literal["1"] = SCHEMA_VERSION
    ok: bool  # exit 0: accepted, with no blocking finding
    exit_code: int
    error: ErrorInfo | None = None
    bundle: str
    name: str | None = None
    suite: str | None = None
    dsl: str | None = None
    kernels: list[KernelOut] = Field(default_factory=list)
    suite_found: bool = False
    missing: list[str] = Field(default_factory=list)  # suite problems without a kernel
    not_in_suite: list[str] = Field(default_factory=list)
    kernel_errors: list[str] = Field(default_factory=list)
    files: list[FileFindings] = Field(default_factory=list)
    blocking: int = 0


class ShapeOut(Out):
    id: str
    verdict: Verdict
    detail: str
    error_excerpt: str | None = None
    # Roofline time over the measured time (S); None when nothing was timed (a CPU run).
    roofline_fraction: float | None = None
    t_roofline_s: float | None = None
    measured_s: float | None = None
    findings: list[Finding] = Field(default_factory=list)


class ProblemOut(Out):
    id: str
    verdict: Verdict
    detail: str
    kernel_file: str | None = None
    stderr_excerpt: str | None = None
    findings: list[Finding] = Field(default_factory=list)  # static findings of the file
    shapes: list[ShapeOut] = Field(default_factory=list)


class RunSummary(Out):
    """`grader run --json`: the verdicts, per problem and shape, and where the reports are."""

    command: Literal["run"] = "run"
    schema_version: Literal["1"] = SCHEMA_VERSION
    ok: bool  # exit 0
    exit_code: int
    error: ErrorInfo | None = None
    practice: bool = False  # public shapes only (grader run --practice)
    submission: str | None = None
    suite: str | None = None
    device: str | None = None
    is_performance: bool | None = None  # False: CPU interpreter, nothing timed
    verdicts: dict[Verdict, int] = Field(default_factory=dict)  # shapes per verdict
    # Which shapes ran (report.json's summary.shapes_graded, in words): "smoke shapes only
    # (N shapes not graded)" on a CPU, where a verdict speaks for those alone (issue 34).
    shapes_graded: str | None = None
    s_agg: float | None = None
    problems: list[ProblemOut] = Field(default_factory=list)
    reports: dict[str, str] = Field(default_factory=dict)  # format -> file written


SCHEMAS: dict[str, type[Out]] = {"check": CheckSummary, "bundle-check": BundleCheckSummary,
                                 "run": RunSummary}


def schema(name: str) -> dict[str, Any]:
    """The JSON schema of `--json`'s output for command `name` (a key of SCHEMAS)."""
    return SCHEMAS[name].model_json_schema(mode="serialization")


def _files(findings: dict[str, list[Finding]]) -> list[FileFindings]:
    return [FileFindings(file=f, findings=items) for f, items in findings.items()]


def check_summary(bundle: str, findings: dict[str, list[Finding]], blocking: int
                  ) -> CheckSummary:
    return CheckSummary(ok=True, exit_code=0, bundle=bundle, files=_files(findings),
                        total=sum(len(v) for v in findings.values()), blocking=blocking)


def bundle_check_summary(c: BundleCheck, error: GraderError | None) -> BundleCheckSummary:
    return BundleCheckSummary(
        ok=error is None, exit_code=error.exit_code if error else 0,
        error=ErrorInfo.of(error) if error else None, bundle=str(c.bundle), name=c.name,
        suite=c.suite, dsl=c.dsl,
        kernels=[KernelOut(problem=k.problem, file=k.file, lines=k.lines, bytes=k.size)
                 for k in c.kernels],
        suite_found=c.suite_found, missing=c.missing, not_in_suite=c.ignored,
        kernel_errors=c.kernel_errors, files=_files(c.findings), blocking=len(c.blocking))


def _shape(problem: str, s: ShapeResult, rep: Report) -> ShapeOut:
    score = next((x for x in (rep.scores.shapes if rep.scores else [])
                  if x.problem == problem and x.shape == s.id), None)
    timed = score is not None and score.measured_s is not None and rep.environment.is_performance
    return ShapeOut(id=s.id, verdict=s.verdict, detail=s.detail, error_excerpt=s.error_excerpt,
                    roofline_fraction=score.s if timed and score else None,
                    t_roofline_s=score.t_roofline_s if score else None,
                    measured_s=score.measured_s if score else None, findings=s.findings)


def _problem(p: ProblemResult, rep: Report) -> ProblemOut:
    return ProblemOut(id=p.id, verdict=p.verdict, detail=p.detail, kernel_file=p.kernel_file,
                      stderr_excerpt=p.stderr_excerpt, findings=p.findings,
                      shapes=[_shape(p.id, s, rep) for s in p.shapes])


def run_summary(rep: Report, reports: dict[str, str], error: GraderError | None, *,
                practice: bool = False) -> RunSummary:
    return RunSummary(
        ok=error is None, exit_code=error.exit_code if error else 0,
        error=ErrorInfo.of(error) if error else None, practice=practice,
        submission=rep.submission.name, suite=rep.suite.id, device=rep.environment.device,
        is_performance=rep.environment.is_performance, verdicts=dict(rep.summary.verdicts),
        shapes_graded=rep.summary.coverage, s_agg=rep.scores.s_agg if rep.scores else None,
        problems=[_problem(p, rep) for p in rep.problems], reports=reports)

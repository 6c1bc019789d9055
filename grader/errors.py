"""The grader's own failures: each class is one exit code and one kind of advice.

A hostile or broken *entry* never raises these: its failures are verdicts (see verdicts.py).
These are for problems the operator must fix: a bad bundle file, a bad problem, a missing
Docker engine, an image that will not build.
"""

from __future__ import annotations


class GraderError(Exception):
    """Base class: `message` says what failed, `hint` what to do about it."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(GraderError):
    exit_code = 2


class ExposedHostPath(UsageError):
    """--runtime host would show an entry's container something it must never see: a suite,
    the output folder, the checkpoint or the seed secret lies inside a host path the mode
    binds (grader/sandbox/host_runtime.py, issue 18)."""

    exit_code = 5


class BundleError(GraderError):
    """The submission bundle was refused at intake. Subclasses give each refusal its code."""

    exit_code = 10


class BundleUnreadable(BundleError):
    exit_code = 11


class UnsafeMember(BundleError):
    """Absolute path, `..`, link, device or FIFO member."""

    exit_code = 12


class BundleTooLarge(BundleError):
    """Too many members or bytes: a tar bomb."""

    exit_code = 13


class UnexpectedMember(BundleError):
    """A member outside `kernels/` and the manifest, or a duplicate name."""

    exit_code = 14


class ManifestError(BundleError):
    """`submission.toml` missing, unparsable or invalid, or naming files that are not there."""

    exit_code = 15


class KernelSourceError(GraderError):
    """`grader bundle check`: a kernel file does not parse, or binds no entry point (kernel(),
    or a module problem's entry class); `grader run` would grade it compile_error."""

    exit_code = 16


class ProblemError(GraderError):
    """A problem bundle, suite, weights or policy file is invalid (the organiser's files)."""

    exit_code = 20


class ReferenceFailed(ProblemError):
    """A suite's reference.py failed (did not import, or raised on its own inputs): the suite
    is at fault, not the entry and not the machinery (issue 23)."""

    exit_code = 21


class RooflineMismatch(ProblemError):
    """`grader roofline derive`: a problem's `flops` or `bytes` expression disagrees with the
    count of its reference (issue 34: it exited 1, "an unexpected grader failure", silently)."""

    exit_code = 22


class InfraError(GraderError):
    """The machinery failed: Docker, an image build, the host filesystem."""

    exit_code = 30


class DockerUnavailable(InfraError):
    exit_code = 31


class ImageBuildError(InfraError):
    exit_code = 32


class RoundMismatch(GraderError):
    """Results that do not match what they claim: `grader round verify` (a round folder's
    files against its manifest, commitment or board), a round started under other settings,
    secret or images than its commitment, or `grader verify` (a report whose results do not
    reproduce under its revealed secret)."""

    exit_code = 6


class FindingsGate(GraderError):
    """`grader bundle check`: the bundle is readable, but static findings would block it."""

    exit_code = 4


class VerdictGate(GraderError):
    """Grading finished, but a verdict named in --fail-on occurred."""

    exit_code = 3


EXIT_CODES: dict[str, int] = {
    cls.__name__: cls.exit_code
    for cls in (
        GraderError,
        UsageError,
        ExposedHostPath,
        VerdictGate,
        FindingsGate,
        RoundMismatch,
        BundleError,
        BundleUnreadable,
        UnsafeMember,
        BundleTooLarge,
        UnexpectedMember,
        ManifestError,
        KernelSourceError,
        ProblemError,
        ReferenceFailed,
        RooflineMismatch,
        InfraError,
        DockerUnavailable,
        ImageBuildError,
    )
}

"""Verdicts are data: a closed enum and the one table of messages shown to people."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    PASSED = "passed"
    FALLBACK = "fallback"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    RESOURCE_LIMIT = "resource_limit"
    POLICY_VIOLATION = "policy_violation"
    TAMPERING = "tampering"
    MISSING = "missing"
    # Neither passed nor failed: Triton's CPU interpreter cannot run this honest code (issue
    # 23); the shape needs a GPU to be judged (judge/interpreter.py).
    UNVERIFIED = "unverified"
    # The suite's reference.py failed: the organiser's fault, never the entry's (issue 23).
    REFERENCE_ERROR = "reference_error"
    INFRA_ERROR = "infra_error"

    @property
    def message(self) -> str:
        return MESSAGES[self]

    @property
    def is_entry_failure(self) -> bool:
        """True for verdicts that blame the entry: not passed, not the grader's or the suite's
        failures (infra_error, reference_error), not a shape this host cannot judge."""
        return self not in (Verdict.PASSED, *NOT_JUDGED)


MESSAGES: dict[Verdict, str] = {
    # Of the shapes graded: a CPU run grades the smoke ones only, and the report says so
    # (Summary.coverage); a passed never speaks for a shape that did not run (issue 34).
    Verdict.PASSED: "correct on every input of the shapes graded, and written in the target "
                    "DSL",
    Verdict.FALLBACK: "correct, but the work was delegated to PyTorch or a vendor library",
    Verdict.INCORRECT: "outputs differ from the reference beyond the tolerance",
    Verdict.COMPILE_ERROR: "the kernel file could not be imported or has no kernel() function",
    Verdict.RUNTIME_ERROR: "kernel() raised an exception or the process crashed",
    Verdict.TIMEOUT: "the entry exceeded its wall-clock limit and was killed",
    Verdict.RESOURCE_LIMIT: "the entry exceeded a memory, process or output-size limit",
    Verdict.POLICY_VIOLATION: "the entry did something the policy forbids",
    Verdict.TAMPERING: "the entry's evidence was forged or physically impossible",
    Verdict.MISSING: "the submission has no kernel for this problem",
    Verdict.UNVERIFIED: "not verifiable on this host: Triton's CPU interpreter cannot run this "
                        "code (its limit, not the entry's); grade on a GPU to judge it",
    Verdict.REFERENCE_ERROR: "the suite's reference failed, not the entry; the organiser must "
                             "fix reference.py (grader suite check finds it)",
    Verdict.INFRA_ERROR: "the grader failed, not the entry; re-run or report it",
}

# Verdicts that judge nothing about the entry: the shape could not be judged here. Gates
# (--fail-on) name them explicitly; leaderboards count them apart.
NOT_JUDGED: tuple[Verdict, ...] = (Verdict.UNVERIFIED, Verdict.REFERENCE_ERROR,
                                   Verdict.INFRA_ERROR)

# When several verdicts apply to one problem, the most severe one is reported.
# An unverified shape outranks a passed one (the problem is not shown passed) and yields to
# any failure the entry is to blame for.
SEVERITY: tuple[Verdict, ...] = (
    Verdict.PASSED,
    Verdict.UNVERIFIED,
    Verdict.FALLBACK,
    Verdict.INCORRECT,
    Verdict.RUNTIME_ERROR,
    Verdict.COMPILE_ERROR,
    Verdict.MISSING,
    Verdict.RESOURCE_LIMIT,
    Verdict.TIMEOUT,
    Verdict.POLICY_VIOLATION,
    Verdict.TAMPERING,
    Verdict.REFERENCE_ERROR,
    Verdict.INFRA_ERROR,
)


def worst(verdicts: list[Verdict]) -> Verdict:
    """The most severe verdict of several (passed when there are none)."""
    return max(verdicts, key=SEVERITY.index, default=Verdict.PASSED)

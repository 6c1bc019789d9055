"""Whether several runs can be set side by side (a leaderboard, a comparison): the fields that
must agree, and the refusal when they do not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grader.errors import UsageError


def check_comparable(contexts: Sequence[Mapping[str, str]], fields: Sequence[str], *,
                     allow_mixed: bool, refusal: str, hint: str) -> dict[str, list[str]]:
    """The distinct values of each field over `contexts`; refuses (UsageError) when one field
    has several, unless `allow_mixed`."""
    context = {f: sorted({c[f] for c in contexts}) for f in fields}
    differing = {f: v for f, v in context.items() if len(v) > 1}
    if differing and not allow_mixed:
        what = "; ".join(f"{f}: {', '.join(v)}" for f, v in differing.items())
        raise UsageError(f"{refusal} ({what})", hint=hint)
    return context

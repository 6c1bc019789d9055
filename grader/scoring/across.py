"""`grader compare REPORT...`: one entry on several pieces of hardware.

The first report is the baseline A; for every other report B, the **portability** of a problem
is `S_i(B) / S_i(A)`: the share of A's roofline attainment the same kernels keep on B (as
KernelGenBench's multi-chip study reports). 1 means the kernel is as close to B's speed of light
as to A's. A ratio is none when either score is none, or A's is 0 (nothing to keep).

Only the same entry is compared: the same bundle (by sha256), suite, weights version, policy and
scoring options. Anything else is refused unless `allow_mixed`, and then the result says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from grader.errors import UsageError
from grader.formats.problem import Phase
from grader.model.results import Report
from grader.model.scores import Frozen
from grader.scoring.comparable import check_comparable
from grader.scoring.scores import PHASES

# What must agree between the reports of one comparison.
SAME = ("bundle_sha256", "suite", "weights_version", "policy", "options")


class Run(Frozen):
    """One report's context and scores."""

    label: str  # the hardware profile, numbered if it appears twice
    submission: str = ""  # the report's submission name (a column's second header line)
    hardware: str
    device: str
    is_performance: bool
    s_agg: float | None
    s_agg_by_phase: dict[Phase, float | None]


class ProblemRow(Frozen):
    problem: str
    s: list[float | None]  # S_i per run, in the order of `runs`
    portability: list[float | None]  # S_i(run) / S_i(baseline) per run; the baseline's is 1


class Comparison(Frozen):
    submission: str
    baseline: str  # label of the first run
    runs: list[Run]
    problems: list[ProblemRow]
    s_agg_ratio: list[float | None]  # S_agg(run) / S_agg(baseline) per run
    s_agg_ratio_by_phase: dict[Phase, list[float | None]]
    mixed: bool
    context: dict[str, list[str]]  # each field of SAME: the distinct values seen
    notes: list[str]


def ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base


def _context(report: Report) -> dict[str, str]:
    card = report.scores
    assert card is not None
    options = card.options
    return {
        "bundle_sha256": report.submission.bundle_sha256, "suite": report.suite.id,
        "weights_version": card.weights_version, "policy": report.environment.policy,
        "options": f"fallback_scores={options.fallback_scores} "
                   f"include_smoke={options.include_smoke}",
    }


def _labels(reports: Sequence[Report]) -> list[str]:
    names = [r.environment.hardware for r in reports]
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if names.count(name) == 1 else f"{name}#{seen[name]}")
    return out


def compare(reports: Sequence[Report], *, allow_mixed: bool = False) -> Comparison:
    """Per-problem portability and the S_agg ratio of `reports[1:]` against `reports[0]`."""
    if len(reports) < 2:
        raise UsageError("compare needs at least two reports",
                         hint="pass the same entry's reports from two or more machines")
    unscored = [i + 1 for i, r in enumerate(reports) if r.scores is None]
    if unscored:
        raise UsageError(f"report(s) {unscored} have no scores",
                         hint="re-score them with `grader rescore`")
    contexts = [_context(r) for r in reports]
    two_entries = len({c["bundle_sha256"] for c in contexts}) > 1
    context = check_comparable(
        contexts, SAME, allow_mixed=allow_mixed,
        refusal="the reports are not the same entry scored the same way" + (
            f" (submissions {', '.join(dict.fromkeys(r.submission.name for r in reports))})"
            if two_entries else ""),
        hint="compare is for one entry (one bundle) on several machines; to compare "
             "different entries or reports scored differently anyway, pass --allow-mixed: the "
             "ratios then compare entries rather than machines, and the output says so")
    cards = [r.scores for r in reports if r.scores is not None]
    labels = _labels(reports)
    runs = [Run(label=label, submission=r.submission.name, hardware=r.environment.hardware,
                device=r.environment.device,
                is_performance=r.environment.is_performance, s_agg=c.s_agg,
                s_agg_by_phase=dict(c.s_agg_by_phase))
            for label, r, c in zip(labels, reports, cards, strict=True)]
    per_run = [{p.problem: p.s for p in c.problems} for c in cards]
    names = list(dict.fromkeys(p for scores in per_run for p in scores))
    rows = []
    for name in names:
        s = [scores.get(name) for scores in per_run]
        rows.append(ProblemRow(problem=name, s=s, portability=[ratio(v, s[0]) for v in s]))
    notes = []
    if not all(r.is_performance for r in runs):
        notes.append("some runs are not performance runs (CPU interpreter): their scores only "
                     "exercise the arithmetic")
    if len(set(r.hardware for r in runs)) < len(runs):
        notes.append("the same hardware appears more than once: a ratio there measures "
                     "run-to-run noise, not portability")
    differing = [f for f, v in context.items() if len(v) > 1]
    if "bundle_sha256" in differing:
        notes.append("different entries: a ratio compares an entry with the baseline's entry "
                     "(and their machines), not one entry's portability")
    if differing:
        notes.append("mixed: " + ", ".join(differing) + " differ between the reports")
    base = runs[0]
    return Comparison(
        submission=reports[0].submission.name, baseline=base.label, runs=runs, problems=rows,
        s_agg_ratio=[ratio(r.s_agg, base.s_agg) for r in runs],
        s_agg_ratio_by_phase={ph: [ratio(r.s_agg_by_phase.get(ph), base.s_agg_by_phase.get(ph))
                                   for r in runs] for ph in PHASES},
        mixed=bool(differing), context=context, notes=notes,
    )


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def comparison_text(cmp: Comparison, width: int | None = None) -> str:
    """Two tables (rich, grader/terminal.py): S_i per run, then portability against the
    baseline. Each column's header names its machine and, on a second line, its submission;
    nothing is cut or run together (issue 23 saw `cpu-interprecpu-interpre`): on a terminal
    (`width`) a long cell folds onto another line."""
    from grader.terminal import render, table

    header = ["problem", *(f"{r.label}\n{r.submission}" for r in cmp.runs)]
    s_rows = [[p.problem, *(_num(v) for v in p.s)] for p in cmp.problems]
    s_rows.append(["S_agg", *(_num(r.s_agg) for r in cmp.runs)])
    port = [[p.problem, *(_num(v) for v in p.portability)] for p in cmp.problems]
    port.append(["S_agg", *(_num(v) for v in cmp.s_agg_ratio)])
    port += [[f"S_agg {ph}", *(_num(v) for v in values)]
             for ph, values in cmp.s_agg_ratio_by_phase.items()]
    subs = list(dict.fromkeys(r.submission for r in cmp.runs))
    return render(f"submission {', '.join(subs)}; baseline {cmp.baseline}", "",
                  table(header, s_rows, title="S_i"), "",
                  table(header, port, title=f"portability (S on run / S on {cmp.baseline})"),
                  *(f"note: {n}" for n in cmp.notes), width=width)

"""`report.md`: a compact GitHub-flavoured summary for CI job pages.

Pure: a `Report` in, text out. GitHub renders job summaries as Markdown with inline HTML, so
entry-supplied text could otherwise break out of a table cell, open a code span, inject a
link or image, or mention a team. `md_text` neutralises all of that.
"""

from __future__ import annotations

import re

from grader.model.results import ProblemResult, Report, ShapeResult
from grader.model.scores import ScoreCard
from grader.report.inert import inert_text
from grader.report.public import NOTE
from grader.scoring.scores import PHASES
from grader.verdicts import SEVERITY, Verdict

CELL_LIMIT = 300  # entry text per table cell; the HTML report has the full excerpts
ERROR_LIMIT = 700  # an error's excerpt: its end, where a traceback names the exception
FINDINGS_SHOWN = 20  # per problem; report.json and the SARIF file have them all

EMOJI: dict[Verdict, str] = {
    Verdict.PASSED: "✅",
    Verdict.FALLBACK: "🟡",
    Verdict.INCORRECT: "❌",
    Verdict.RUNTIME_ERROR: "💥",
    Verdict.COMPILE_ERROR: "🛠️",
    Verdict.TIMEOUT: "⏱️",
    Verdict.RESOURCE_LIMIT: "📈",
    Verdict.POLICY_VIOLATION: "⛔",
    Verdict.TAMPERING: "🚨",
    Verdict.MISSING: "⬜",
    Verdict.UNVERIFIED: "❔",
    Verdict.REFERENCE_ERROR: "📕",
    Verdict.INFRA_ERROR: "🔧",
}

# Markdown punctuation that can start emphasis, code, links, images, tables, strikethrough,
# headings or (on GitHub) math; escaped with a backslash. HTML-significant characters become
# entities.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]#!|~$])")
# `@` is followed by a zero-width space: GitHub finds mentions, and cmark-gfm e-mail links,
# in the text after entities are decoded, so `&#64;` alone still made `a&#64;b.io` a link.
_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "@": "&#64;&#8203;"}
_WHITESPACE = re.compile(r"\s+")
# GitHub links bare URLs (`https://...`, `www....`) itself: an entity breaks the pattern
# and renders as the same character (issue 24: no link an entry chose on our summary).
_AUTOLINK = re.compile(r"://|(?<![^\W_])(www)\.", re.IGNORECASE)
# A cell's text can also stand alone as a paragraph (a problem's detail): a leading list,
# setext or ordered-list marker would make it a block of another kind.
_BLOCK_START = re.compile(r"^([-+=]|\d{1,9}(?=[.)](?:\s|$)))")


def md_text(value: object, limit: int = CELL_LIMIT) -> str:
    """Entry text made inert for a Markdown table cell: one line, escaped, capped."""
    text = _WHITESPACE.sub(" ", inert_text(value)).strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    # Backslashes first, entities second: the entities' own `#` must stay unescaped.
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = "".join(_HTML_ENTITIES.get(ch, ch) for ch in text)
    text = _AUTOLINK.sub(lambda m: f"{m.group(1)}&#46;" if m.group(1) else "&#58;//", text)
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" if m.group(1)[0].isdigit()
                            else "\\" + m.group(1), text)


def verdict_cell(verdict: Verdict) -> str:
    return f"{EMOJI[verdict]} {verdict.value}"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _headline(report: Report) -> str:
    summary = report.summary
    counts = ", ".join(
        f"{summary.verdicts[v]} {v.value}" for v in SEVERITY if summary.verdicts.get(v, 0)
    )
    return (
        f"**{summary.problems} problems, {summary.shapes} shapes:** {counts or 'nothing graded'}"
    )


def _shape_time(shape: ShapeResult) -> str:
    if shape.timing is None:
        return "–"
    return f"{shape.timing.median_us:.3g} µs"


def _max_err(shape: ShapeResult) -> str:
    abs_errs = [c.max_abs_err for c in shape.comparisons if c.max_abs_err is not None]
    return f"{max(abs_errs):.3g}" if abs_errs else "–"


def _tail(text: str, limit: int = ERROR_LIMIT) -> str:
    """The end of `text`, made inert: a traceback's last lines say what went wrong."""
    return md_text(text if len(text) <= limit else "…" + text[-(limit - 1):], limit)


def _evidence(problem: ProblemResult) -> list[str]:
    """The errors (one line per distinct excerpt, with the shapes it is from), the entry's
    stderr and the findings, so that report.md says why, not only what (issue 23: a
    compile error showed only "importing the kernel file failed")."""
    lines: list[str] = []
    by_error: dict[str, list[str]] = {}
    for shape in problem.shapes:
        if shape.error_excerpt:
            by_error.setdefault(shape.error_excerpt, []).append(shape.id)
    for text, ids in by_error.items():
        which = "all shapes" if len(ids) == len(problem.shapes) and len(ids) > 1 else \
            ", ".join(md_text(i, 80) for i in ids[:5]) + (" …" if len(ids) > 5 else "")
        lines.append(f"**Error** ({which}): {_tail(text)}")
    if problem.stderr_excerpt:
        lines.append(f"**Entry stderr** (its end): {_tail(problem.stderr_excerpt)}")
    findings = [("static", f) for f in problem.findings] + [
        (s.id, f) for s in problem.shapes for f in s.findings]
    for where, f in findings[:FINDINGS_SHOWN]:
        place = (f"{md_text(problem.kernel_file or 'kernel', 120)}:{f.line}" if f.line
                 else md_text(where, 80))
        lines.append(f"**Finding** {md_text(f.rule, 40)} ({f.severity.value}) at {place}: "
                     f"{md_text(f.message)}")
    if len(findings) > FINDINGS_SHOWN:
        lines.append(f"… and {len(findings) - FINDINGS_SHOWN} more finding(s) in "
                     "report.json")
    # One paragraph each (blank lines between): no list, whose markers entry text could join.
    return [x for line in lines for x in (line, "")]


def _problem_section(problem: ProblemResult, timed: bool) -> list[str]:
    passed = sum(1 for s in problem.shapes if s.verdict is Verdict.PASSED)
    lines = [
        f"### {md_text(problem.id, 120)} · {md_text(problem.operator, 120)} · "
        f"{verdict_cell(problem.verdict)} ({passed}/{len(problem.shapes)} shapes passed)",
        "",
    ]
    if problem.detail:
        lines += [md_text(problem.detail), ""]
    if not problem.shapes:
        lines += [f"_{md_text(problem.verdict.message)}_", ""]
        return lines + _evidence(problem)
    header = "| Shape | Phase | Verdict | Detail | Max abs err |"
    rule = "|---|---|---|---|---:|"
    if timed:
        header += " Median time |"
        rule += "---:|"
    lines += [header, rule]
    for shape in problem.shapes:
        smoke = " (smoke)" if shape.smoke else ""
        row = (
            f"| {md_text(shape.id, 80)}{smoke} | {shape.phase} "
            f"| {verdict_cell(shape.verdict)} | {md_text(shape.detail) or '–'} "
            f"| {_max_err(shape)} |"
        )
        if timed:
            row += f" {_shape_time(shape)} |"
        lines.append(row)
    lines.append("")
    return lines + _evidence(problem)


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _secs(value: float | None) -> str:
    return "–" if value is None else f"{value * 1e6:.3g} µs"


def _scores_section(card: ScoreCard, hardware: str, is_performance: bool) -> list[str]:
    """S_agg (overall, per phase), the funnel, the secondary metrics and S per problem/shape."""
    phases = [ph for ph in PHASES if ph in card.s_agg_by_phase]
    f = card.funnel
    funnel = " → ".join(f"{gate} {getattr(f, gate)}/{f.shapes} ({_pct(f.rate(gate))})"
                        for gate in ("compiled", "correct", "native", "timed"))
    fast = ", ".join(f"fast_{x.p:g} {_pct(x.share)}" for x in card.fast_p) or "–"
    speedup = "–" if card.speedup_geomean is None else f"{card.speedup_geomean:.3g}×"
    lines = [f"### Scores against {md_text(hardware)}", ""]
    if not is_performance:
        lines += ["> ⚠️ Not performance: CPU-interpreter times against a nominal profile; "
                  "these scores only exercise the arithmetic.", ""]
    lines += [
        f"**S_agg {_score(card.s_agg)}** · " + " · ".join(
            f"{ph} {_score(card.s_agg_by_phase[ph])}" for ph in phases),
        "",
        f"Weights {md_text(card.weights_version)} ({card.weights_mode}, "
        f"{'normalised' if card.weights_normalised else 'not normalised'}, coverage "
        f"{_pct(card.weight_coverage)}) · speed-up geomean {speedup} over "
        f"{card.speedup_shapes} shapes · {fast}",
        "",
        f"Gate funnel: {funnel}",
        "",
        "| Problem | S_i | " + " | ".join(phases) + " | Scored shapes |",
        "|---|---:|" + "---:|" * len(phases) + "---:|",
    ]
    for p in card.problems:
        lines.append(f"| {md_text(p.problem, 120)} | {_score(p.s)} | "
                     + " | ".join(_score(p.by_phase.get(ph)) for ph in phases)
                     + f" | {p.scored_shapes} |")
    lines += ["", "| Shape | Regime | T_roofline | T_measured | S |",
              "|---|---|---:|---:|---:|"]
    for s in card.shapes:
        if s.scored:
            lines.append(f"| {md_text(f'{s.problem}/{s.shape}', 160)} | {s.regime or '–'} | "
                         f"{_secs(s.t_roofline_s)} | {_secs(s.measured_s)} | {_score(s.s)} |")
    lines.append("")
    if card.tampering_candidates:
        lines += ["**Tampering candidates:** "
                  + md_text(", ".join(card.tampering_candidates)), ""]
    lines += [f"- {md_text(note)}" for note in card.notes]
    return [*lines, ""] if card.notes else lines


def render_markdown(report: Report, *, public: bool = False) -> str:
    """The report as a short Markdown summary (headline, rates, one table per problem);
    `public`: a rendering of report/public.py's view, which says so."""
    env = report.environment
    summary = report.summary
    lines = [
        f"## Grader: {md_text(report.submission.name, 120)}",
        "",
        f"Suite **{md_text(report.suite.id)} {md_text(report.suite.version)}** · "
        f"DSL {md_text(report.submission.dsl)} · policy {md_text(env.policy)} · "
        f"hardware {md_text(env.hardware)} · device {md_text(env.device)}",
        "",
        _headline(report),
        "",
        f"Correctness {_pct(summary.correctness_rate)} · DSL adoption "
        f"{_pct(summary.dsl_adoption_rate)} · **illusion gap {_pct(summary.illusion_gap)}**",
        "",
    ]
    if not env.is_performance:
        lines += [
            "> ⚠️ Timings come from the CPU interpreter and are not performance numbers.",
            "",
        ]
    if summary.shapes_graded in ("smoke", "scored"):
        lines += [f"> ⚠️ Shapes graded: **{summary.coverage}**; a verdict here speaks for "
                  "the shapes that ran, not for those left out (grade with `--shapes all`, "
                  "or on a GPU, to run them).", ""]
    if public:
        lines += [f"> {NOTE}", ""]
    lines += ["| Problem | Operator | Verdict | Shapes passed |", "|---|---|---|---:|"]
    for problem in report.problems:
        passed = sum(1 for s in problem.shapes if s.verdict is Verdict.PASSED)
        lines.append(
            f"| {md_text(problem.id, 120)} | {md_text(problem.operator, 120)} "
            f"| {verdict_cell(problem.verdict)} | {passed}/{len(problem.shapes)} |"
        )
    lines.append("")
    if report.scores is not None:
        lines += _scores_section(report.scores, env.hardware, env.is_performance)
    timed = any(s.timing is not None for p in report.problems for s in p.shapes)
    for problem in report.problems:
        lines += _problem_section(problem, timed)
    lines.append(
        f"<sub>grader {md_text(env.grader_version)} · seed commitment "
        f"{md_text(env.seed_commitment[:16])}… · {report.created_at.isoformat()}</sub>"
    )
    return "\n".join(lines) + "\n"

"""`report.html`: one self-contained page for people (no scripts, fonts or remote resources).

Pure: a `Report` in, text out. Every entry-supplied string is hostile, so the jinja2
environment autoescapes everything, refuses undefined names, and `finalize` strips the
characters that break parsers from every value before it is escaped. The page also carries
a Content-Security-Policy that forbids scripts, so a missed escape still cannot run code.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup

from grader.model.results import ProblemResult, Report, ShapeResult
from grader.model.scores import ScoreCard, ShapeScore
from grader.report.inert import clean_text
from grader.report.public import NOTE
from grader.scoring.scores import PHASES
from grader.verdicts import SEVERITY, Verdict

# Defensive caps; the producer already caps what it records, but a report file can be edited.
PRE_LIMIT = 4000  # error excerpts, stderr, source snippets
TEXT_LIMIT = 5000  # anything else, enforced by finalize

# Verdict -> CSS colour family (see the .v-* rules in the template).
VERDICT_GROUP: dict[Verdict, str] = {
    Verdict.PASSED: "ok",
    Verdict.FALLBACK: "warn",
    Verdict.INCORRECT: "bad",
    Verdict.RUNTIME_ERROR: "bad",
    Verdict.COMPILE_ERROR: "bad",
    Verdict.TIMEOUT: "limit",
    Verdict.RESOURCE_LIMIT: "limit",
    Verdict.TAMPERING: "evil",
    Verdict.POLICY_VIOLATION: "evil",
    Verdict.MISSING: "none",
    Verdict.UNVERIFIED: "none",
    Verdict.REFERENCE_ERROR: "infra",
    Verdict.INFRA_ERROR: "infra",
}

# Geometry of the per-problem timing chart (inline SVG), in CSS pixels.
CHART_LABEL_W = 170
CHART_BAR_W = 420
CHART_VALUE_W = 130
CHART_ROW_H = 22

# Geometry of the roofline chart (log-scale time axis), in CSS pixels.
ROOF_LABEL_W = 260
ROOF_PLOT_W = 460
ROOF_VALUE_W = 110
ROOF_AXIS_H = 34
ROOF_MAX_TICKS = 8


def _finalize(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    if isinstance(value, str):
        return clean_text(value, TEXT_LIMIT)
    return value


def _clip(value: Any, limit: int = PRE_LIMIT, tail: bool = False) -> str:
    return clean_text(value, limit, tail=tail)


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}g}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _us(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.3g} s"
    if value >= 1e3:
        return f"{value / 1e3:.3g} ms"
    return f"{value:.3g} µs"


def _seconds(value: float | None) -> str:
    return "–" if value is None else _us(value * 1e6)


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _bar_width(value: float) -> str:
    """A CSS width for a 0..1 rate (numbers only: never entry text inside a style)."""
    return f"{max(0.0, min(1.0, float(value))) * 100:.1f}%"


def _verdict_group(verdict: Verdict) -> str:
    return VERDICT_GROUP.get(Verdict(verdict), "none")


def _verdict_counts(report: Report) -> list[tuple[Verdict, int]]:
    counts = report.summary.verdicts
    return [(v, counts[v]) for v in SEVERITY if counts.get(v, 0) > 0]


def _shapes_passed(problem: ProblemResult) -> int:
    return sum(1 for shape in problem.shapes if shape.verdict is Verdict.PASSED)


def _has_evidence(shape: ShapeResult) -> bool:
    return bool(
        shape.error_excerpt
        or shape.findings
        or (shape.trace and (shape.trace.torch_ops or shape.trace.triton_launches
                             or shape.trace.device_kernels))
        or any(c.mismatched for c in shape.comparisons)
    )


def timing_chart(problem: ProblemResult) -> dict[str, Any] | None:
    """Geometry of a horizontal bar chart of median time per shape, or None without timings."""
    timed = [shape for shape in problem.shapes if shape.timing is not None]
    if not timed:
        return None
    longest = max(shape.timing.median_us for shape in timed if shape.timing) or 1.0
    bars = []
    for row, shape in enumerate(timed):
        assert shape.timing is not None
        width = CHART_BAR_W * shape.timing.median_us / longest
        bars.append({
            "label": clean_text(shape.id, 28),
            "y": row * CHART_ROW_H,
            "width": round(max(width, 1.0), 1),
            "value": _us(shape.timing.median_us),
            "group": _verdict_group(shape.verdict),
        })
    return {
        "bars": bars,
        "label_w": CHART_LABEL_W,
        "bar_w": CHART_BAR_W,
        "row_h": CHART_ROW_H,
        "width": CHART_LABEL_W + CHART_BAR_W + CHART_VALUE_W,
        "height": len(bars) * CHART_ROW_H + 4,
    }


def _valid(t: float | None) -> bool:
    return t is not None and math.isfinite(t) and t > 0


def _chart_row_label(shape: ShapeScore) -> str:
    return clean_text(f"{shape.problem}/{shape.shape}", 40)


def _problem_score(card: ScoreCard, problem: str) -> float | None:
    return next((p.s for p in card.problems if p.problem == problem), None)


def roofline_chart(card: ScoreCard) -> dict[str, Any] | None:
    """Geometry of a log-scale dot chart: per scored shape, its roofline time (the speed of
    light, a tick) and its measured time (a dot); the gap between them is 1/S. None when no
    shape has a roofline. Only numbers go into attributes; labels are text, escaped."""
    shapes = [s for s in card.shapes if s.scored and _valid(s.t_roofline_s)]
    if not shapes:
        return None
    times = [t for s in shapes for t in (s.t_roofline_s, s.measured_s)
             if t is not None and _valid(t)]
    lo = math.floor(math.log10(min(times)))
    hi = max(math.ceil(math.log10(max(times))), lo + 1)
    step = max(1, math.ceil((hi - lo) / ROOF_MAX_TICKS))

    def x(t: float) -> float:
        return round(ROOF_LABEL_W + (math.log10(t) - lo) / (hi - lo) * ROOF_PLOT_W, 1)

    ticks = [{"x": x(10.0 ** k), "label": _seconds(10.0 ** k)} for k in range(lo, hi + 1, step)]
    rows = []
    for i, s in enumerate(shapes):
        assert s.t_roofline_s is not None
        measured = s.measured_s if _valid(s.measured_s) else None
        rows.append({
            "label": _chart_row_label(s),
            "y": ROOF_AXIS_H + i * CHART_ROW_H + CHART_ROW_H // 2,
            "roof_x": x(s.t_roofline_s),
            "measured_x": x(measured) if measured is not None else None,
            "group": _verdict_group(s.verdict),
            "value": f"S={s.s:.3g}" if s.counted else s.verdict.value,
        })
    height = ROOF_AXIS_H + len(rows) * CHART_ROW_H + 6
    return {"rows": rows, "ticks": ticks, "label_w": ROOF_LABEL_W, "plot_w": ROOF_PLOT_W,
            "axis_h": ROOF_AXIS_H, "width": ROOF_LABEL_W + ROOF_PLOT_W + ROOF_VALUE_W,
            "height": height}


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grader.report", "templates"),
        autoescape=jinja2.select_autoescape(
            enabled_extensions=("html", "htm", "xml", "j2"), default=True
        ),
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        clip=_clip, num=_num, pct=_pct, us=_us, bar=_bar_width, vgroup=_verdict_group,
        secs=_seconds, score=_score,
    )
    env.globals.update(
        timing_chart=timing_chart,
        roofline_chart=roofline_chart,
        problem_score=_problem_score,
        PHASES=PHASES,
        shapes_passed=_shapes_passed,
        has_evidence=_has_evidence,
        PRE_LIMIT=PRE_LIMIT,
    )
    return env


def render_html(report: Report, *, public: bool = False) -> str:
    """The whole report as one self-contained HTML document; `public`: a rendering of
    report/public.py's view, which says so."""
    template = _environment().get_template("report.html.j2")
    return template.render(
        report=report,
        public_note=NOTE if public else None,
        env=report.environment,
        summary=report.summary,
        verdict_counts=_verdict_counts(report),
        Verdict=Verdict,
    )

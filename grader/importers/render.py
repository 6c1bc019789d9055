"""TOML text of an imported suite's files (pure): problem.toml, suite.toml, weights.toml.

Written by hand in the field order of docs/formats.md; `write.write_suite` parses every text
back with the grader's models and checks it reads as what was meant.
"""

from __future__ import annotations

import json
import re

from grader.formats.problem import Problem, SuiteInfo, Weights

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)  # a JSON string is a TOML basic string


def _key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else json.dumps(k, ensure_ascii=False)


def _inline(table: dict[str, object]) -> str:
    return "{ " + ", ".join(f"{_key(k)} = {value(v)}" for k, v in table.items()) + " }"


def _multiline(text: str) -> str:
    # A literal multi-line string keeps notes readable; a basic string where the text holds
    # the delimiter, or a control character a literal string cannot hold.
    if "'''" in text or text.endswith("'") or any(
            (ord(c) < 32 and c not in "\n\t") or c == "\x7f" for c in text):
        return value(text)
    return "'''\n" + text + "'''"


def problem_toml(problem: Problem, header: str) -> str:
    p = problem
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [f"id = {value(p.id)}", f"operator = {value(p.operator)}",
              f"description = {value(p.description)}", f"dtypes = {value(list(p.dtypes))}",
              f"interface = {value(p.interface)}"]
    if p.interface == "module":
        lines += [f"init_params = {value(list(p.init_params))}",
                  f"entry_classes = {value(list(p.entry_names()))}"]
    if p.extra_files:
        lines.append(f"extra_files = {value(list(p.extra_files))}")
    lines += [f"{name} = {value(expr)}" for name, expr in (("flops", p.flops), ("bytes", p.bytes))
              if expr is not None]
    for dtype, tol in p.tolerance.items():
        lines += ["", f"[tolerance.{dtype}]", f"atol = {tol.atol!r}", f"rtol = {tol.rtol!r}"]
    for s in p.shapes:
        lines += ["", "[[shapes]]", f"id = {value(s.id)}", f"params = {_inline(dict(s.params))}",
                  f"phase = {value(s.phase)}"]
        if s.smoke:
            lines.append("smoke = true")
        lines += [f"{name} = {value(n)}" for name, n in (("flops", s.flops), ("bytes", s.bytes))
                  if n is not None]
    lines += ["", "[hidden]", f"provenance = {value(p.hidden.provenance)}"]
    if p.hidden.notes:
        lines.append(f"notes = {_multiline(p.hidden.notes)}")
    return "\n".join(lines) + "\n"


def suite_toml(info: SuiteInfo, header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += ["", "[suite]", f"id = {value(info.id)}", f"description = {value(info.description)}",
              f"version = {value(info.version)}", f"problems = {value(list(info.problems))}",
              f"seeds_per_shape = {info.seeds_per_shape}", f"timeout_s = {info.timeout_s!r}"]
    return "\n".join(lines) + "\n"


def weights_toml(weights: Weights, header: str) -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [f"version = {value(weights.version)}", f"source = {value(weights.source)}"]
    for w in weights.weights:
        lines += ["", "[[weights]]", f"problem = {value(w.problem)}"]
        if w.shape is not None:
            lines.append(f"shape = {value(w.shape)}")
        lines.append(f"weight = {w.weight!r}")
    return "\n".join(lines) + "\n"

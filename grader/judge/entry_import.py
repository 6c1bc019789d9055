"""Why an entry's import failed, in the words of its verdict's detail (`compile_error`).

Issue 34: every failed import read "importing the kernel file failed", a missing `kernel()`
and a syntax error alike. The detail names what the harness could not find, or the line that
did not parse; otherwise the exception's class when it is one of Python's own. The rest of the
entry's text (its message, its traceback) stays in the error excerpt, which a public report
shows or hides by its own rule (report/public.py): a detail is shown everywhere, so it carries
nothing the entry chose but a line number.
"""

from __future__ import annotations

import builtins
import re

FAILED = "importing the kernel file failed"
# The harness's own messages (harness/entry.py, harness/modules.find_class).
_NO_KERNEL = "the kernel file defines no callable kernel()"
_NO_CLASS = re.compile(r"^AttributeError: the file defines no class ([A-Za-z_][\w ]*)$")
_SYNTAX_AT = re.compile(r'File "[^"]+", line (\d+)\s*$', re.M)
_LAST = re.compile(r"^([A-Za-z_]\w*)(?::|$)")


def import_failure(error: str | None) -> str:
    """The detail for a ready frame's `error` (a traceback's text, or None)."""
    lines = [ln.strip() for ln in (error or "").splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if last == f"AttributeError: {_NO_KERNEL}":
        return f"{_NO_KERNEL}: the harness calls kernel(...) with the problem's inputs"
    if m := _NO_CLASS.match(last):
        return f"the kernel file defines no class {m.group(1)} (the problem's entry class)"
    kind = m.group(1) if (m := _LAST.match(last)) else None
    if kind in ("SyntaxError", "IndentationError", "TabError"):
        lines_at = _SYNTAX_AT.findall(error or "")
        at = f" at line {lines_at[-1]}" if lines_at else ""
        return f"the kernel file does not parse{at} ({kind})"
    if kind is not None and isinstance(getattr(builtins, kind, None), type):
        return f"{FAILED} ({kind})"
    return FAILED

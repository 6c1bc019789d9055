"""Entry text made inert for the readers CI puts behind our reports (issue 24).

`clean_text` drops what XML forbids (NUL, ESC and the other C0 controls, lone surrogates):
every string that came from the entry is hostile, and those bytes break XML, confuse HTML
parsers or fail UTF-8 encoding; all the renderers share it. CI adds
readers of its own, and entry text reaches them through every format:
- GitHub's runner executes a workflow command on any log line that starts with `::` (after
  blanks) or holds `##[` anywhere (Azure Pipelines: `##vso[`). A report printed in a job, or
  a reporter logging a test's text, would run `::add-mask::` or forge `::error::`. A zero-width
  space between the two marks keeps the text readable and no longer a command.
- C1 controls (U+0080-U+009F, among them the 8-bit CSI) and bidirectional overrides ("Trojan
  Source") change what a terminal or a page shows without being seen; they are dropped.
- SARIF message strings have placeholders (`{0}`) and embedded links (`[text](1)`): literal
  braces are doubled and brackets escaped (SARIF 2.1.0, 3.11.5 and 3.11.6).
"""

from __future__ import annotations

import re

ZWSP = "\u200b"
_INVISIBLE = re.compile("[\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# `::` after the blanks that open a line: the runner trims leading white space (.NET's set,
# which Python's \s covers) and splits lines at CR as well as LF.
_LINE_COMMAND = re.compile(r"(?:^|(?<=[\r\n]))([^\S\r\n]*):(?=:)")
_V1_COMMAND = re.compile(r"#(?=#(?:vso)?\[)", re.IGNORECASE)
_SARIF_SPECIAL = re.compile(r"([\\\[\]])")


# Characters XML 1.0 forbids (C0 controls but tab/LF/CR, lone surrogates, U+FFFE/U+FFFF).
# The same set is unwelcome in HTML and Markdown, so every renderer strips it.
_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean_text(value: object, limit: int | None = None, *, tail: bool = False) -> str:
    """`value` as text safe to embed anywhere: forbidden characters dropped, length capped.

    With `tail`, the end is kept (the useful part of a traceback); otherwise the start.
    """
    text = _FORBIDDEN.sub("", str(value))
    if limit is None or len(text) <= limit:
        return text
    dropped = len(text) - limit
    if tail:
        return f"[… {dropped} earlier characters omitted]\n" + text[-limit:]
    return text[:limit] + f"\n[… {dropped} more characters omitted]"


def inert_text(value: object, limit: int | None = None, *, tail: bool = False) -> str:
    """`clean_text`, then no workflow command, C1 control or bidirectional override left."""
    text = _INVISIBLE.sub("", clean_text(value, limit, tail=tail))
    text = _LINE_COMMAND.sub(lambda m: m.group(1) + ":" + ZWSP, text)
    return _V1_COMMAND.sub("#" + ZWSP, text)


def sarif_text(value: object) -> str:
    """Entry text as a SARIF plain-text message: inert, no placeholder, no embedded link."""
    text = _SARIF_SPECIAL.sub(r"\\\1", inert_text(value))
    return text.replace("{", "{{").replace("}", "}}")

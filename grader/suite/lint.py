"""What a suite's own files leave unfinished, said by `grader suite check` and `grader release`
alike (issue 34: `grader release` shipped a fresh problem's `TODO:` description without a word,
and `suite check` passed over a problem folder that `suite.toml` does not list).

Warnings, not refusals: a TODO may be deliberate, and a folder may be a problem in the making.
Pure reads of the suite's files.
"""

from __future__ import annotations

from grader.suite.load import Suite

TODO = "TODO"


def unfinished(suite: Suite) -> list[str]:
    """The texts the release kit ships to participants that still hold a TODO marker (as
    `grader init` writes them): the suite's and each problem's description, each reference."""
    out = []
    if TODO in suite.info.description:
        out.append(f"{suite.directory / 'suite.toml'}: the suite's description still says "
                   f"{TODO}")
    for pid, sp in suite.problems.items():
        if TODO in sp.problem.description or TODO in sp.problem.operator:
            out.append(f"{sp.directory / 'problem.toml'}: problem {pid}'s description "
                       f"still says {TODO}")
        ref = sp.directory / "reference.py"
        lines = [n for n, line in enumerate(ref.read_text(encoding="utf-8", errors="replace")
                                            .splitlines(), 1) if f"{TODO}:" in line]
        if lines:
            out.append(f"{ref}:{lines[0]}: the reference still has {len(lines)} {TODO}(s); "
                       "participants get it in the kit")
    return out


def unlisted(suite: Suite) -> list[str]:
    """Problem folders (a folder holding problem.toml) beside the suite's that its suite.toml
    does not list: never checked, released or graded."""
    listed = set(suite.problems)
    return [f"{d}: a problem folder that {suite.directory / 'suite.toml'} does not list; it is "
            "not checked, released or graded"
            for d in sorted(suite.directory.iterdir())
            if d.is_dir() and (d / "problem.toml").is_file() and d.name not in listed]


def warnings(suite: Suite) -> list[str]:
    return [*unfinished(suite), *unlisted(suite)]

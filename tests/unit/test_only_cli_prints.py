"""Only the command line prints (issue 33): every other module returns results or tells the
user through grading/progress.py's `Progress`, whose sink the command line owns. Exempt: the
harness (it runs in the containers, its stdout is its channel) and terminal.py, which renders
tables into text and prints nothing itself."""

from __future__ import annotations

import ast

from grader.paths import REPO

PACKAGE = REPO / "grader"
EXEMPT = ("grader/cli/", "grader/harness/", "grader/__main__.py", "grader/terminal.py")
STREAM_WRITES = {"write", "writelines", "flush"}
ECHOES = {"echo", "secho"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _prints(tree: ast.AST) -> list[str]:
    """The calls of `tree` that write to the terminal: print, click.echo (however imported),
    sys.stdout/sys.stderr's writes."""
    from_click = {a.asname or a.name for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module == "click"
                  for a in node.names if a.name in ECHOES}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        head, _, last = name.rpartition(".")
        if (name == "print" or name in from_click or (head == "click" and last in ECHOES)
                or (head in ("sys.stdout", "sys.stderr", "sys.__stdout__", "sys.__stderr__")
                    and last in STREAM_WRITES)):
            out.append(f"line {node.lineno}: {name}(...)")
    return out


def test_no_module_outside_the_command_line_prints() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(EXEMPT):
            continue
        found += [f"{rel} {hit}" for hit in _prints(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, "print outside grader/cli/ (say it through Progress):\n" + "\n".join(found)


def test_the_check_sees_each_way_to_print() -> None:
    src = ("import click, sys\nfrom click import echo as say\nprint('a')\nclick.echo('b')\n"
           "say('c')\nsys.stderr.write('d')\nsys.stdout.flush()\n"
           "text = \"print('in a string, run elsewhere')\"\n")
    assert [h.split(": ")[1] for h in _prints(ast.parse(src))] == [
        "print(...)", "click.echo(...)", "say(...)", "sys.stderr.write(...)",
        "sys.stdout.flush(...)"]


def test_the_exempt_paths_exist() -> None:
    for rel in EXEMPT:
        assert (REPO / rel).exists(), rel

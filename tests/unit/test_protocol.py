"""The handshake between host and container is named in one place: grader/harness/protocol.py.

No other module of the package spells one of its paths, file names or environment variables
as a literal (prose in docstrings and comments may); protocol.py itself imports nothing, and
the harness imports nothing of the grader outside itself (it runs beside entry code, with the
standard library, torch and triton alone)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from grader.harness import protocol
from grader.images import problem_plan
from grader.run.jobs import WorkerSetup, container_spec, entry_spec, io_binds
from grader.sandbox.spec import Limits, Role
from grader.suite.load import find_suite

PACKAGE = Path(protocol.__file__).resolve().parents[1]
HARNESS = PACKAGE / "harness"
# The suite format names a problem's reference file too (suite/load.py, the importers, the
# release kit): a name of the suite's, which the image copies as it is.
SUITE_NAMES = {protocol.REFERENCE_FILE}


def _known() -> set[str]:
    """The names no module but protocol.py may spell: files, environment variables, the
    harness's package name."""
    names = {v for k, v in vars(protocol).items() if isinstance(v, str)
             and (k.endswith(("_FILE", "_ENV")) or k == "HARNESS_PACKAGE")}
    return names - SUITE_NAMES


def _literals(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module (f-string parts too), docstrings left out."""
    tree = ast.parse(path.read_text("utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docs)


def _duplicates(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """`path`'s literals that spell a handshake name: `file:line: literal`."""
    patterns = [re.compile(r"(?<![\w.-])" + re.escape(name) + r"(?![\w.-])")
                for name in sorted(_known())]
    suffixes = {"." + kind for kind in protocol.CASE_KINDS}
    return [f"{path.relative_to(root)}:{line}: {text[:80]!r}" for line, text in _literals(path)
            if "/grader/" in text or text == "/grader" or text in suffixes
            or any(p.search(text) for p in patterns)]


def test_no_module_but_protocol_spells_a_handshake_name() -> None:
    modules = [p for p in sorted(PACKAGE.rglob("*.py"))
               if p != Path(protocol.__file__).resolve()]
    assert len(modules) > 100
    found = [hit for p in modules for hit in _duplicates(p)]
    assert found == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""A docstring may say job.json and /grader/in."""\n'
                      'A = "/grader/in"\n'
                      'B = IN / "ready.json"\n'
                      'C = f"{cid}.out"\n'
                      'D = {"GRADER_STANDBY": "1"}\n'
                      'E = "a go.json file"\n'
                      'F = "cargo.json", "jobs.json", ".input"  # other names: job.json\n')
    assert _duplicates(sample, tmp_path) == [
        "sample.py:2: '/grader/in'", "sample.py:3: 'ready.json'", "sample.py:4: '.out'",
        "sample.py:5: 'GRADER_STANDBY'", "sample.py:6: 'a go.json file'"]


def _imports(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mods.add("." if node.level else (node.module or "").split(".")[0])
    return mods


def test_protocol_imports_nothing() -> None:
    assert _imports(Path(protocol.__file__)) == {"__future__"}


@pytest.mark.parametrize("path", sorted(HARNESS.glob("*.py")), ids=lambda p: p.name)
def test_the_harness_imports_the_standard_library_torch_and_triton(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {".", "torch", "triton", protocol.HARNESS_PACKAGE}
    assert _imports(path) <= allowed


def test_frames_and_files_agree() -> None:
    assert set(protocol.FRAMES.values()) == set(protocol.FRAME_MAX) == {
        protocol.STANDBY, protocol.ARMED, protocol.READY, protocol.TRACED, protocol.RESULT}
    assert protocol.TAMPERING not in protocol.FRAME_MAX  # the warden's alone
    assert protocol.case_file("s.0", protocol.OUTPUTS) == "s.0.out"
    # Files the harness writes that are not outputs start with a dot (evidence.read_out_dir).
    assert all(n.startswith(".") for n in (protocol.CASES_FILE, protocol.GATE_FILE,
                                           protocol.TRACED_FILE, protocol.ARMED_FILE))


def test_host_and_image_put_things_where_the_harness_looks() -> None:
    suite = find_suite("demo", [PACKAGE.parent / "problem_bundles"])
    plan = problem_plan("runtime:x", suite.id, suite.problems["vector_add"])
    assert f"COPY harness/ {protocol.HARNESS}/\n" in plan.dockerfile
    assert f"COPY problem/ {protocol.PROBLEM}/\n" in plan.dockerfile
    assert f"harness/{Path(protocol.BOOT).name}" in plan.context
    assert "harness/protocol.py" in plan.context  # the harness's copy of these names
    setup = WorkerSetup(engine=None, session="s", python="/py", device="cpu")  # type: ignore[arg-type]
    ref = container_spec(setup, "img", Role.REFERENCE, io_binds(Path("/i"), Path("/o")),
                         Limits(), gated=True)
    assert ref.command[:4] == ["/py", "-I", protocol.BOOT, protocol.REFERENCE_MODE]
    assert {b.container for b in ref.binds} == {protocol.IN, protocol.OUT}
    assert ref.env[protocol.STANDBY_ENV] == "1" and ref.env[protocol.DEVICE_ENV] == "cpu"
    ent = entry_spec(setup, "img", Path("/i"), Path("/o"), Limits(), None)
    assert ent.command[3] == protocol.ENTRY_MODE and ent.masks == (protocol.PROBLEM,)
    assert {b.container for b in ent.binds} == {protocol.ENTRY, protocol.IN, protocol.OUT}
    assert protocol.LOG_BYTES_ENV in ent.env and ent.stdout_bytes == protocol.STDOUT_BYTES
    # dynamo off where the entry runs (harness/record.py's dispatch mode has no guard)
    assert ent.env["TORCHDYNAMO_DISABLE"] == "1" and "TORCHDYNAMO_DISABLE" not in ref.env
    assert protocol.ENTRY_FILE == f"{protocol.ENTRY}/{protocol.KERNEL_FILE}"

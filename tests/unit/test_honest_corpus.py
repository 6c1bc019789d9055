"""The corpus of honest public Triton code (issue 17 "And no false alarms on honest code"),
without Docker. The tree holds only what is ours (tests/cases/honest_public_src/: manifest,
case.toml, submission.toml, adapter); bench/honest_corpus_assemble.py adds the upstream code
from local copies into build/honest_public/. Here: the manifest and the case folders are well
formed and credited in NOTICE.md, the adapters are thin and ours, the assembler reproduces a
toy corpus over upstream files of our own making (tests/fixtures/honest_corpus/) and refuses
every mismatch, and bench/honest_corpus.py finds the cases and prints its table. Where the
real corpus has been assembled, its static analysis must raise no false alarm (skipped when
absent, as in CI). The grading runs in tests/integration/test_cases.py (CPU group) and
tests/gpu/test_honest_public.py (both)."""

from __future__ import annotations

import ast
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from suite_checks import load_module

from grader.detect.policy import Policy, load_policy
from grader.detect.static import analyze
from grader.model.findings import Finding, Layer, Severity
from grader.model.results import ProblemResult, ShapeResult
from grader.paths import REPO
from grader.verdicts import Verdict

SRC = REPO / "tests" / "cases" / "honest_public_src"
FIXTURE = REPO / "tests" / "fixtures" / "honest_corpus"
ASSEMBLED = REPO / "build" / "honest_public"
GROUPS = ("honest_public", "honest_public_gpu")
DECISIVE = frozenset({Severity.FALLBACK, Severity.VIOLATION, Severity.TAMPERING})
TOY = "1111111111111111111111111111111111111111"


def _bench() -> Any:
    return load_module(REPO / "bench" / "honest_corpus.py", "_test")


def _asm() -> Any:
    return load_module(REPO / "bench" / "honest_corpus_assemble.py", "_test_asm")


def _toy_copies() -> dict[str, Path]:
    return {"toy": FIXTURE / "upstream" / "toy", "tut": FIXTURE / "upstream" / "tut"}


def _toy(tmp_path: Path) -> Path:
    out = tmp_path / "corpus"
    _asm().assemble(_toy_copies(), out, FIXTURE / "src" / "manifest.toml")
    return out


# --- the manifest and the case folders (ours) -------------------------------------------------


def test_manifest_names_every_case_and_uses_every_source() -> None:
    m = _asm().load_manifest()
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    assert set(m.cases) == folders and len(folders) >= 8
    for prefix in ("liger_", "triton_tutorial_", "vllm_"):
        assert any(n.startswith(prefix) for n in folders), prefix
    used = {s for c in m.cases.values() for s in c.parts}
    assert used == set(m.sources)
    for src in m.sources.values():
        assert len(src.commit) == 40 and len(src.blob) == 40
    assert {c.group for c in m.cases.values()} == set(GROUPS)


def test_no_upstream_code_is_committed() -> None:
    """Every file of the source folder is ours: the manifest, NOTICE.md, and three small
    files per case; no file carries an upstream marker or a licence text."""
    allowed = {"manifest.toml", "NOTICE.md", "case.toml", "submission.toml", "adapter.py"}
    for path in SRC.rglob("*"):
        if path.is_file():
            assert path.name in allowed, path
            if path.suffix == ".py":
                assert "# ==================== upstream" not in path.read_text()
    assert not (SRC / "LICENSES").exists()
    assert not (REPO / "tests" / "cases" / "honest_public").exists()
    assert not (REPO / "tests" / "cases" / "honest_public_gpu").exists()


@pytest.mark.parametrize("name", sorted(p.name for p in SRC.iterdir() if p.is_dir()))
def test_case_folder_is_well_formed_thin_and_credited(name: str) -> None:
    m = _asm().load_manifest()
    case, here = m.cases[name], SRC / name
    raw = (here / "case.toml").read_text(encoding="utf-8")
    spec = tomllib.loads(raw)
    sub = tomllib.loads((here / "submission.toml").read_text(encoding="utf-8"))
    assert spec["description"].startswith("honest, public: ")
    assert spec["problems"] == [case.problem] == sorted(sub["problems"])
    # Honest code passes, or fails on its own (a runtime_error whose cause case.toml states):
    # never a cheating verdict.
    assert spec["expect"] in ({case.problem: "passed"}, {case.problem: "runtime_error"})
    if spec["expect"][case.problem] != "passed":
        assert "# Expected runtime_error, not passed: " in raw
    assert sub["problems"][case.problem]["file"] == f"kernels/{case.problem}.py"
    # The adapter is ours and thin: one top-level function, kernel(), a few lines.
    adapter = (here / "adapter.py").read_text(encoding="utf-8")
    tree = ast.parse(adapter)
    assert [type(n) for n in tree.body] == [ast.FunctionDef]
    assert tree.body[0].name == "kernel"  # type: ignore[attr-defined]
    assert len(adapter.splitlines()) <= 12
    notice = (SRC / "NOTICE.md").read_text(encoding="utf-8")
    assert f"| `{name}` |" in notice
    for sid in case.parts:
        assert m.projects[m.sources[sid].project].repo in notice


# --- the assembler, on upstream files of our own making ---------------------------------------


def test_assembler_writes_the_case_folders_exactly(tmp_path: Path) -> None:
    out = _toy(tmp_path)
    kernel = (out / "honest_public" / "toy_sum" / "submission" / "kernels" / "row_sum.py")
    assert kernel.read_text() == (
        "# Toy case (ours).\n#\n# toy's licence:\n# Toy licence, written for this test.\n"
        "# Use it as you like. \n\n"
        "# ==================== upstream pkg/helpers.py ====================\n"
        '"""Helpers of a toy package (fixture, ours)."""\n\n# [corpus edit] stand-in\n'
        "Version = str\n\n\ndef block_size(n):\n    return 1 << (n - 1).bit_length()\n\n"
        "# ==================== upstream pkg/ops.py ====================\nimport torch\n\n"
        "# [corpus edit] removed `from pkg.helpers import block_size`\n\n\n"
        "def row_sum(x):\n    return x.sum(dim=-1) + 0 * block_size(x.shape[-1])\n\n"
        "# ==================== corpus adapter (ours) ====================\n\n\n"
        "def kernel(x):\n    return row_sum(x)\n")
    tut = (out / "honest_public_gpu" / "tut_scale" / "submission" / "kernels" / "scale.py")
    text = tut.read_text()
    # c-block licence: "/*" and "*/" gone, "*" become "#", trailing blanks dropped.
    assert text.startswith("# Tutorial case (ours).\n#\n# Tutorial licence, written for this "
                           "test.\n#\n\n# ==================== upstream tutorial.py")
    assert "narrative" not in text and "DEVICE" not in text and "print(" not in text
    assert text.endswith("    return x * k\n\n\n# ==================== corpus adapter (ours) "
                         "====================\n\n\ndef kernel(x, k):\n    return scale(x, k)\n")
    src = FIXTURE / "src" / "tut_scale"
    assert (tut.parent.parent / "submission.toml").read_bytes() == (
        src / "submission.toml").read_bytes()
    assert (tut.parent.parent.parent / "case.toml").read_bytes() == (
        src / "case.toml").read_bytes()
    # The assembly grades: discovery finds both groups in it.
    bench = _bench()
    assert [p.name for p in bench.discover(GROUPS, root=out)] == ["toy_sum", "tut_scale"]
    assert [p.name for p in bench.discover(bench.groups_for("cpu"), root=out)] == ["toy_sum"]


def test_assembler_reads_a_git_directory(tmp_path: Path) -> None:
    """The `fetch` tool brings bare mirrors: files are read at the manifest's commit."""
    work = tmp_path / "toy"
    (work / "pkg").mkdir(parents=True)
    for rel in ("LICENSE", "pkg/helpers.py", "pkg/ops.py"):
        (work / rel).write_bytes((FIXTURE / "upstream" / "toy" / TOY / rel).read_bytes())
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "toy"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    asm = _asm()
    text = asm.read_upstream(work / ".git", head, "pkg/ops.py",
                             asm.blob_id((work / "pkg" / "ops.py").read_bytes()))
    assert text == (work / "pkg" / "ops.py").read_text()
    with pytest.raises(asm.AssembleError, match=r"no pkg/none\.py"):
        asm.read_upstream(work / ".git", head, "pkg/none.py", "0" * 40)


def _edit_manifest(tmp_path: Path, old: str, new: str) -> Path:
    src = tmp_path / "src"
    for p in (FIXTURE / "src").rglob("*"):
        if p.is_file():
            (src / p.relative_to(FIXTURE / "src")).parent.mkdir(parents=True, exist_ok=True)
            (src / p.relative_to(FIXTURE / "src")).write_bytes(p.read_bytes())
    text = (src / "manifest.toml").read_text()
    assert old in text
    (src / "manifest.toml").write_text(text.replace(old, new, 1))
    return src / "manifest.toml"


@pytest.mark.parametrize(("old", "new", "error"), [
    ('path = "pkg/ops.py"\nblob = "', 'path = "pkg/ops.py"\nblob = "0', "is not the file of"),
    ("lines = [11, 12]", "lines = [10, 12]", "does not start with"),
    ("lines = [18, 20]", "lines = [18, 99]", "outside the file"),
    ('comment_out = ["from pkg.helpers import block_size"]',
     'comment_out = ["from pkg.helpers import nothing"]', "no line"),
    ('symbols = ["scale"]', 'symbols = ["scale", "DEVICE"]', "keeps"),
    ('parts = ["tut"]', 'parts = ["tut", "absent"]', "unknown source"),
])
def test_assembler_refuses_a_mismatch_and_writes_nothing(tmp_path: Path, old: str, new: str,
                                                         error: str) -> None:
    asm = _asm()
    manifest = _edit_manifest(tmp_path, old, new)
    out = tmp_path / "out"
    with pytest.raises(asm.AssembleError, match=error):
        asm.assemble(_toy_copies(), out, manifest)
    assert not out.exists()


def test_assembler_replaces_only_its_own_folder_and_compare_finds_changes(
        tmp_path: Path) -> None:
    asm = _asm()
    out = _toy(tmp_path)
    again = tmp_path / "again"
    asm.assemble(_toy_copies(), again, FIXTURE / "src" / "manifest.toml")
    assert asm.compare(out, again) == []
    kernel = again / "honest_public" / "toy_sum" / "submission" / "kernels" / "row_sum.py"
    kernel.write_text(kernel.read_text() + "# changed\n")
    assert asm.compare(out, again) == [
        "differs: honest_public/toy_sum/submission/kernels/row_sum.py"]
    _toy(tmp_path)  # an assembled folder is replaced whole
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("not ours")
    with pytest.raises(asm.AssembleError, match="not written by this script"):
        asm.assemble(_toy_copies(), other, FIXTURE / "src" / "manifest.toml")
    assert (other / "keep.txt").read_text() == "not ours"


def test_assembler_cli_reports_a_missing_copy(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    rc = _asm().main(["--liger", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")])
    assert rc == 2
    assert "error: " in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# --- the assembled corpus, where it is present -------------------------------------------------


def _assembled() -> list[Any]:
    cases = sorted(p for g in GROUPS if (ASSEMBLED / g).is_dir()
                   for p in (ASSEMBLED / g).iterdir() if (p / "case.toml").is_file())
    if not cases:
        return [pytest.param(None, id="assembled", marks=pytest.mark.skip(
            reason=f"no assembled corpus in {ASSEMBLED} (bench/honest_corpus_assemble.py)"))]
    out = []
    for case in cases:
        why = tomllib.loads((case / "case.toml").read_text()).get("xfail")
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(case, id=f"{case.parent.name}/{case.name}", marks=marks))
    return out


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy("triton")


@pytest.mark.parametrize("case", _assembled())
def test_static_analysis_raises_no_false_alarm(case: Path, policy: Policy) -> None:
    for path in sorted((case / "submission" / "kernels").glob("*.py")):
        findings = analyze(path.read_text(encoding="utf-8"), f"kernels/{path.name}", policy)
        decisive = [f"{f.rule} {f.severity} line {f.line}: {f.message}"
                    for f in findings if f.severity in DECISIVE]
        assert not decisive, "\n".join(decisive)


# --- bench/honest_corpus.py ---------------------------------------------------------------------


def test_discovery_by_name_and_refusal_of_an_unknown_one(tmp_path: Path) -> None:
    bench = _bench()
    out = _toy(tmp_path)
    both = bench.discover(GROUPS, root=out)
    one = both[-1]
    assert bench.discover(GROUPS, [one.name], root=out) == [one]
    assert bench.discover(GROUPS, [str(one)], root=out) == [one.resolve()]
    with pytest.raises(SystemExit, match="no case 'no_such_case'"):
        bench.discover(GROUPS, ["no_such_case"], root=out)


def test_grading_without_an_assembly_says_how_to_make_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _bench().main(["--corpus", str(tmp_path / "none")]) == 2
    assert "honest_corpus_assemble.py" in capsys.readouterr().err


def _finding(rule: str, severity: Severity, line: int | None = None) -> Finding:
    return Finding(rule=rule, severity=severity, layer=Layer.STATIC, message="m", line=line)


def _problem(pid: str, verdict: Verdict, static: list[Finding],
             dynamic: list[Finding]) -> ProblemResult:
    shape = ShapeResult(id="smoke", phase="decode", smoke=True, params={}, verdict=verdict,
                        findings=dynamic)
    return ProblemResult(id=pid, operator=pid, verdict=verdict, shapes=[shape], findings=static)


def test_table_lists_verdicts_and_findings_and_counts_passes() -> None:
    bench = _bench()
    ok = _problem("softmax", Verdict.PASSED, [_finding("DK001", Severity.WARNING, 360),
                                              _finding("ST002", Severity.INFO)], [])
    bad = _problem("rms_norm", Verdict.POLICY_VIOLATION,
                   [_finding("DS003", Severity.VIOLATION, 287),
                    _finding("DS003", Severity.VIOLATION, 287)],
                   [_finding("DY001", Severity.FALLBACK)])
    rows = (bench.rows_from_problems("honest_public/a", [ok], None)
            + bench.rows_from_problems("honest_public_gpu/b", [bad], "getattr on torch"))
    assert [r.ok for r in rows] == [True, False]
    assert rows[0].findings == ("DK001 warning line 360",)  # info left out
    assert rows[1].findings == ("DS003 violation line 287", "DY001 fallback")  # once each
    table = bench.render(rows).splitlines()
    assert table[0].split() == ["case", "problem", "verdict", "findings"]
    assert table[1].split() == ["honest_public/a", "softmax", "passed", "DK001", "warning",
                                "line", "360"]
    assert table[2].split()[:3] == ["honest_public_gpu/b", "rms_norm", "policy_violation"]
    assert table[3].strip() == "known: getattr on torch"
    assert table[-1] == "1/2 as expected"


def test_a_problem_not_passed_shows_why_from_its_first_such_shape() -> None:
    bench = _bench()
    excerpt = "Traceback (most recent call last):\n" + "  frame\n" * 9 \
        + "TypeError: launch() takes 9 positional arguments but 11 were given\n"
    shape = ShapeResult(id="smoke", phase="decode", smoke=True, params={},
                        verdict=Verdict.RUNTIME_ERROR, detail="kernel() raised",
                        error_excerpt=excerpt)
    crashed = ProblemResult(id="softmax", operator="softmax", verdict=Verdict.RUNTIME_ERROR,
                            shapes=[shape])
    (row,) = bench.rows_from_problems("honest_public_gpu/c", [crashed], None)
    assert row.why is not None and row.why.startswith("smoke: kernel() raised | ")
    assert row.why.endswith("TypeError: launch() takes 9 positional arguments but 11 were given")
    assert "Traceback" not in row.why  # only the excerpt's last lines
    assert bench.render([row]).splitlines()[2].strip() == f"why: {row.why}"
    passed = _problem("softmax", Verdict.PASSED, [], [])
    assert bench.rows_from_problems("honest_public/a", [passed], None)[0].why is None
    # A case that expects the code's own failure is as expected when it fails so.
    (own,) = bench.rows_from_problems("honest_public_gpu/c", [crashed], None,
                                      {"softmax": "runtime_error"})
    assert own.ok and bench.render([own]).splitlines()[2].strip() == \
        "expected: runtime_error (case.toml)"

"""Every TOML file the grader generates reads back through the project's own parser.

The writer (grader/formats/writer.py) is checked on every committed problem and on texts chosen
to be awkward; then every generated file is read back from where it lands: an imported suite's
problem.toml, suite.toml and weights.toml (Atrex-Bench in both layouts, KernelBench), and a
release kit's spec.toml and submission.toml. (The calibrated hardware profile: test_calibrate.)
"""

from __future__ import annotations

import io
import tarfile
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.errors import GraderError
from grader.formats import writer
from grader.formats._base import load_toml, parse_toml
from grader.formats.problem import Hidden, Problem, Shape, SuiteFile, SuiteInfo, Weight, Weights
from grader.formats.spec import Spec
from grader.formats.submission import Manifest
from grader.formats.writer import model_toml, problem_toml, suite_toml, weights_toml
from grader.importers import ImportOptions, import_suite
from grader.organiser.release_kit import SPEC_NAME, build_kit, spec_of
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.suite.load import Suite, load_suite

FIXTURES = REPO / "tests" / "fixtures" / "import"
COMMITTED = sorted(PROBLEM_BUNDLES.glob("*/*/problem.toml"))


def read(text: str, model: type, name: str = "file.toml") -> object:
    return parse_toml(text, model, name, GraderError)


def body(text: str) -> str:
    """The text after its opening comment lines (and the blank line below them)."""
    lines = text.splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)


# -- the writer -------------------------------------------------------------------------------
@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_committed_problem_round_trips(path: Path) -> None:
    problem = load_toml(path, Problem, GraderError)
    text = problem_toml(problem, "a header")
    assert read(text, Problem) == problem
    # Written once more from what was read: the same text (the writer is deterministic).
    assert problem_toml(read(text, Problem), "a header") == text  # type: ignore[arg-type]


def awkward_problem(text: str, key: str, value: float) -> Problem:
    return Problem(
        id="awkward", operator="op", description=text, dtypes=["bfloat16", "float32"],
        tolerance={"bfloat16": {"atol": 1e-2, "rtol": 1.6e-2}, "float32": {"atol": 0.0,
                                                                          "rtol": 1e-300}},
        flops="2*n", interface="module", init_params=["n"], entry_classes=["ModelNew"],
        extra_files=["source_problem.py"],
        shapes=[Shape(id="smoke", phase="prefill", smoke=True, bytes=value,
                      params={"n": 3, key: text, "sizes": [1, 2.5, True, text], "eps": value}),
                Shape(id="big", phase="decode", params={}, bytes=1.0)],
        hidden=Hidden(provenance=text, notes=f"{text}\nsecond line '''\n\"\"\"\n"))


@pytest.mark.parametrize("text", ["", "plain", "two\nlines", "crlf\r\nline", "ends with '",
                                  "tab\tand \x01 control \x7f", "quotes \" ''' \"\"\" \\ done",
                                  "unicode é 漢字 🚀", "# not a comment\n[hidden]\nx = 1"])
def test_awkward_texts_round_trip(text: str) -> None:
    problem = awkward_problem(text, "a.b c", 1e-300)
    assert read(problem_toml(problem), Problem) == problem


@settings(max_examples=150, deadline=None)
@given(text=st.text(), key=st.text(min_size=1),
       value=st.floats(min_value=1e-300, max_value=1e300, allow_nan=False))
def test_any_text_key_and_number_round_trip(text: str, key: str, value: float) -> None:
    problem = awkward_problem(text, key if key not in ("n", "sizes", "eps") else f"{key}_", value)
    assert read(problem_toml(problem), Problem) == problem


def test_tolerances_are_one_table_per_dtype() -> None:
    data = tomllib.loads(problem_toml(awkward_problem("x", "k", 2.0)))
    assert data["tolerance"] == {"bfloat16": {"atol": 1e-2, "rtol": 1.6e-2},
                                 "float32": {"atol": 0.0, "rtol": 1e-300}}


def test_the_header_is_comments_only() -> None:
    problem = awkward_problem("x", "k", 2.0)
    text = problem_toml(problem, "line one\n\nid = \"other\"\n[hidden]")
    assert text.startswith('# line one\n#\n# id = "other"\n# [hidden]\n\n')
    assert read(text, Problem) == problem


def test_suite_and_weights_round_trip() -> None:
    info = SuiteInfo(id="s", description="two\nlines", version="1.0", problems=["a", "b.c"])
    text = suite_toml(info, "head")
    assert read(text, SuiteFile) == SuiteFile(suite=info)
    assert "seeds_per_shape = 2" in text and "timeout_s = 300.0" in text  # defaults shown
    weights = Weights(version="1.0", source="somewhere", weights=[
        Weight(problem="a", weight=0.25), Weight(problem="b.c", shape="x", weight=3.0)])
    assert read(weights_toml(weights, "head"), Weights) == weights


def test_a_text_that_would_not_read_back_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = awkward_problem("x", "k", 2.0)
    real = writer.tomli_w.dumps
    monkeypatch.setattr(writer.tomli_w, "dumps", lambda data, **kw: real(
        {**data, "description": "changed"}, **kw))
    with pytest.raises(GraderError, match="does not read back as the same Problem"):
        problem_toml(problem)
    with pytest.raises(GraderError, match="does not read back"):
        model_toml(problem, "problem.toml")


# -- imported suites --------------------------------------------------------------------------
IMPORTS = [("atrex", FIXTURES / "atrex"), ("atrex", FIXTURES / "atrex_real"),
           ("kernelbench", FIXTURES / "kernelbench")]


@pytest.fixture(scope="module", params=IMPORTS, ids=lambda p: p[1].name)
def imported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Suite:
    kind, source = request.param
    out = tmp_path_factory.mktemp("import") / f"{source.name.replace('_', '-')}-suite"
    return import_suite(kind, source, ImportOptions(out=out)).suite


def test_imported_files_round_trip(imported: Suite) -> None:
    # Each file is what the writer makes of what the file says: nothing lost either way.
    suite_file = imported.directory / "suite.toml"
    info = load_toml(suite_file, SuiteFile, GraderError).suite
    assert info == imported.info
    assert body(suite_toml(info)) == body(suite_file.read_text("utf-8"))
    weights_file = imported.directory / "weights.toml"
    weights = load_toml(weights_file, Weights, GraderError)
    assert weights == imported.weights and weights.weights
    assert body(weights_toml(weights)) == body(weights_file.read_text("utf-8"))
    for bundle in imported.problems.values():
        path = bundle.directory / "problem.toml"
        problem = load_toml(path, Problem, GraderError)
        assert problem == bundle.problem and problem.hidden.provenance
        assert body(problem_toml(problem)) == body(path.read_text("utf-8"))
        assert path.read_text("utf-8").startswith("# Imported by `grader import ")


# -- release kits -----------------------------------------------------------------------------
def kit_members(suite: Suite) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(build_kit(suite)), mode="r:") as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers()}


@pytest.fixture(scope="module", params=["demo", "llm-inference", "imported"])
def kit_suite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Suite:
    if request.param != "imported":
        return load_suite(PROBLEM_BUNDLES / request.param)
    out = tmp_path_factory.mktemp("kit") / "atrex-kit"
    return import_suite("atrex", FIXTURES / "atrex", ImportOptions(out=out)).suite


def test_kit_specs_and_manifest_round_trip(kit_suite: Suite) -> None:
    files = kit_members(kit_suite)
    for bundle in kit_suite.problems.values():
        text = files[f"problems/{bundle.id}/{SPEC_NAME}"].decode()
        spec = read(text, Spec)
        source = (bundle.directory / "reference.py").read_text("utf-8")
        extra = {n: (bundle.directory / n).read_text("utf-8") for n in bundle.problem.extra_files}
        assert spec == spec_of(bundle.problem, source, extra)
        assert isinstance(spec, Spec) and spec.shapes and all(
            s.id in {x.id for x in bundle.problem.shapes if x.smoke} for s in spec.shapes)
        assert set(spec.tolerance) == set(bundle.problem.dtypes)
        assert text.startswith("# Public specification of one problem.")
    manifest = read(files["submission.toml"].decode(), Manifest)
    assert isinstance(manifest, Manifest) and manifest.submission.suite == kit_suite.id
    assert {p: e.file for p, e in manifest.problems.items()} == {
        p: f"kernels/{p}.py" for p in kit_suite.problems}
    assert "# output_tokens = 0" in files["submission.toml"].decode()

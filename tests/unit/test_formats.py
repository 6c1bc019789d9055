"""The format models (problem.toml, suite.toml, weights.toml, submission.toml) and the suite loader.

A bad file must give a ProblemError (organiser files) or ManifestError (the submission's
manifest) whose message names the file, the field's dotted path and what was expected.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from grader.errors import GraderError, ManifestError, ProblemError
from grader.formats._base import load_toml, parse_toml
from grader.formats.problem import Problem, SuiteFile, Tolerance, Weights
from grader.formats.submission import Manifest
from grader.suite.load import find_suite, load_problem, load_suite


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip()


PROBLEM = dedent("""
    id = "vector_add"
    operator = "elementwise_add"
    description = "out = x + y"
    dtypes = ["float32"]
    flops = "n"
    bytes = "12 * n"

    [tolerance.float32]
    atol = 1e-5
    rtol = 1e-5

    [[shapes]]
    id = "small"
    params = { n = 4096 }
    phase = "decode"
    smoke = true

    [[shapes]]
    id = "large"
    params = { n = 16777216 }
    phase = "prefill"

    [hidden]
    provenance = "written for the demo suite"
""")

SUITE = dedent("""
    [suite]
    id = "demo"
    version = "1"
    problems = ["vector_add"]
    seeds_per_shape = 3
""")

WEIGHTS = dedent("""
    version = "2026-11"
    source = "traffic estimate"

    [[weights]]
    problem = "vector_add"
    shape = "large"
    weight = 3.0

    [[weights]]
    problem = "vector_add"
    weight = 1
""")

MANIFEST = dedent("""
    [submission]
    name = "my entry"
    suite = "demo"
    dsl = "triton"

    [submission.agent]
    model = "some-model"
    output_tokens = 12000
    wall_s = 30.5

    [problems.vector_add]
    file = "kernels/vector_add.py"
""")


def refused(text: str, model: type, source: str = "SRC/file.toml",
            error: type[GraderError] = ProblemError) -> str:
    """parse_toml must refuse `text`; returns the message, which always names the source."""
    with pytest.raises(error) as info:
        parse_toml(text, model, source, error)
    message = str(info.value)
    assert source in message
    return message


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# --- problem.toml ----------------------------------------------------------------------------


def test_good_problem() -> None:
    p = parse_toml(PROBLEM, Problem, "problem.toml", ProblemError)
    assert p.id == "vector_add"
    assert [s.id for s in p.shapes] == ["small", "large"]
    assert p.shapes[0].params == {"n": 4096} and p.shapes[0].smoke
    assert p.shapes[1].phase == "prefill" and not p.shapes[1].smoke
    assert p.tolerance_for("float32") == Tolerance(atol=1e-5, rtol=1e-5)
    assert p.tolerance_for("bfloat16") == Tolerance(atol=2e-2, rtol=2e-2)  # the default
    assert p.tolerance_for("int32") == Tolerance(atol=0.0, rtol=0.0)  # exact
    assert p.hidden.provenance


def test_problem_models_are_frozen() -> None:
    p = parse_toml(PROBLEM, Problem, "problem.toml", ProblemError)
    with pytest.raises(ValidationError):
        p.id = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        p.shapes[0].phase = "prefill"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("old", "new", "field", "expected"),
    [
        pytest.param('phase = "decode"', 'phase = "middle"', "shapes.0.phase",
                     "'prefill' or 'decode'", id="bad-phase"),
        pytest.param('id = "small"\n', "", "shapes.0.id", "Field required", id="shape-no-id"),
        pytest.param('id = "small"', 'id = "../small"', "shapes.0.id", "pattern",
                     id="shape-id-path"),
        pytest.param("params = { n = 4096 }", "params = { n = [[1], [2]] }", "shapes.0.params.n",
                     "", id="param-nested-list"),
        pytest.param("smoke = true", "smoke = 2", "shapes.0.smoke", "boolean",
                     id="smoke-not-bool"),
        pytest.param('dtypes = ["float32"]', 'dtypes = ["float128"]', "dtypes.0",
                     "'float32'", id="unknown-dtype"),
        pytest.param('dtypes = ["float32"]', "dtypes = []", "dtypes", "at least 1",
                     id="no-dtypes"),
        pytest.param("atol = 1e-5", "atol = -1.0", "tolerance.float32.atol",
                     "greater than or equal to 0", id="negative-atol"),
        pytest.param("atol = 1e-5", "atol = nan", "tolerance.float32.atol",
                     "finite number", id="nan-atol"),
        pytest.param("[tolerance.float32]", "[tolerance.complex64]", "tolerance.complex64",
                     "'float32'", id="tolerance-unknown-dtype"),
        # flops/bytes may be left out only where every shape has numbers of its own
        pytest.param('flops = "n"\n', "", "(top level)", "flops: no expression, and shapes "
                     "['small', 'large'] have no flops number", id="no-flops"),
        pytest.param('bytes = "12 * n"', 'bytes = ""', "bytes", "at least 1", id="empty-bytes"),
        pytest.param('id = "vector_add"', "id = 7", "id", "string", id="id-not-string"),
        pytest.param('id = "vector_add"', 'id = "vector add"', "id", "pattern",
                     id="id-with-space"),
        pytest.param('operator = "elementwise_add"', 'operator = ""', "operator",
                     "at least 1", id="empty-operator"),
        pytest.param('provenance = "written for the demo suite"', "provenance = 1",
                     "hidden.provenance", "string", id="hidden-wrong-type"),
    ],
)
def test_bad_problem_names_file_field_and_expectation(old: str, new: str, field: str,
                                                      expected: str) -> None:
    message = refused(edit(PROBLEM, old, new), Problem, "demo/vector_add/problem.toml")
    assert f"field {field}" in message
    assert expected in message
    assert "invalid Problem" in message


@pytest.mark.parametrize(
    ("text", "field"),
    [
        pytest.param('colour = "red"\n' + PROBLEM, "colour", id="top-level"),
        pytest.param(edit(PROBLEM, "smoke = true", "smoke = true\nweight = 2"), "shapes.0.weight",
                     id="in-a-shape"),
        pytest.param(edit(PROBLEM, "rtol = 1e-5", "rtol = 1e-5\nmaxdiff = 1"),
                     "tolerance.float32.maxdiff", id="in-a-tolerance"),
        pytest.param(PROBLEM + 'secret = "x"\n', "hidden.secret", id="in-hidden"),
    ],
)
def test_problem_unknown_fields_are_rejected(text: str, field: str) -> None:
    message = refused(text, Problem)
    assert f"field {field}:" in message and "Extra inputs are not permitted" in message


def test_duplicate_shape_ids_are_rejected() -> None:
    text = edit(PROBLEM, 'id = "large"', 'id = "small"')
    message = refused(text, Problem, "demo/vector_add/problem.toml")
    assert "shape ids must be unique" in message and "'small'" in message


def test_problem_needs_a_shape() -> None:
    head = PROBLEM.split("[[shapes]]")[0]
    message = refused("shapes = []\n" + head, Problem)
    assert "field shapes:" in message and "at least 1" in message


def test_not_toml_names_the_file_and_the_position() -> None:
    message = refused("id = \n", Problem, "demo/x/problem.toml")
    assert "not valid TOML" in message and "line 1" in message


def test_all_errors_of_a_file_are_listed() -> None:
    text = edit(edit(PROBLEM, 'phase = "decode"', 'phase = "x"'), "atol = 1e-5", "atol = -1.0")
    message = refused(text, Problem)
    assert "shapes.0.phase" in message and "tolerance.float32.atol" in message


# --- suite.toml and weights.toml -------------------------------------------------------------


def test_good_suite_and_weights() -> None:
    suite = parse_toml(SUITE, SuiteFile, "suite.toml", ProblemError).suite
    assert (suite.id, suite.version, suite.problems) == ("demo", "1", ["vector_add"])
    assert suite.seeds_per_shape == 3 and suite.timeout_s == 300.0
    weights = parse_toml(WEIGHTS, Weights, "weights.toml", ProblemError)
    assert [(w.problem, w.shape, w.weight) for w in weights.weights] == [
        ("vector_add", "large", 3.0), ("vector_add", None, 1.0)]


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        pytest.param(edit(SUITE, "seeds_per_shape = 3", "seeds_per_shape = 0"),
                     "suite.seeds_per_shape", "greater than or equal to 1", id="zero-seeds"),
        pytest.param(SUITE + "timeout_s = 1e9\n", "suite.timeout_s", "less than or equal",
                     id="huge-timeout"),
        pytest.param(SUITE + "timeout_s = 0\n", "suite.timeout_s", "greater than 0",
                     id="zero-timeout"),
        pytest.param(edit(SUITE, '"vector_add"]', '"vector_add", "vector_add"]'), "suite",
                     "listed twice", id="problem-twice"),
        pytest.param(edit(SUITE, '["vector_add"]', "[]"), "suite.problems", "at least 1",
                     id="no-problems"),
        pytest.param(edit(SUITE, 'version = "1"\n', ""), "suite.version", "Field required",
                     id="no-version"),
        pytest.param(SUITE + 'owner = "me"\n', "suite.owner", "Extra inputs", id="unknown"),
        pytest.param('id = "demo"\n', "suite", "Field required", id="no-suite-table"),
    ],
)
def test_bad_suite(text: str, field: str, expected: str) -> None:
    message = refused(text, SuiteFile, "demo/suite.toml")
    assert f"field {field}:" in message and expected in message


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        pytest.param(edit(WEIGHTS, "weight = 3.0", "weight = -3.0"), "weights.0.weight",
                     "greater than or equal to 0", id="negative"),
        pytest.param(edit(WEIGHTS, "weight = 3.0", "weight = nan"), "weights.0.weight",
                     "finite number", id="nan"),
        pytest.param(edit(WEIGHTS, "weight = 1", 'weight = "heavy"'), "weights.1.weight",
                     "valid number", id="not-a-number"),
        pytest.param(edit(WEIGHTS, "weight = 1", "weight = 1\nphase = 2"), "weights.1.phase",
                     "Extra inputs", id="unknown-field"),
        pytest.param(edit(WEIGHTS, 'shape = "large"', 'shape = "a/b"'), "weights.0.shape",
                     "pattern", id="bad-shape-id"),
        pytest.param(edit(WEIGHTS, 'version = "2026-11"\n', ""), "version", "Field required",
                     id="no-version"),
    ],
)
def test_bad_weights(text: str, field: str, expected: str) -> None:
    message = refused(text, Weights, "demo/weights.toml")
    assert f"field {field}:" in message and expected in message


def test_infinite_weight_is_rejected() -> None:
    message = refused(edit(WEIGHTS, "weight = 3.0", "weight = inf"), Weights, "demo/weights.toml")
    assert "finite number" in message


def test_duplicate_weight_entries_are_rejected() -> None:
    text = WEIGHTS + '\n[[weights]]\nproblem = "vector_add"\nshape = "large"\nweight = 5\n'
    assert "given twice" in refused(text, Weights, "demo/weights.toml")


# --- submission.toml -------------------------------------------------------------------------


def test_good_manifest() -> None:
    m = parse_toml(MANIFEST, Manifest, "bundle.tar:submission.toml", ManifestError)
    assert m.submission.suite == "demo" and m.submission.dsl == "triton"
    assert m.submission.agent is not None and m.submission.agent.output_tokens == 12000
    assert m.problems["vector_add"].file == "kernels/vector_add.py"


def test_manifest_defaults() -> None:
    text = '[submission]\nname = "x"\nsuite = "demo"\n[problems.a]\nfile = "kernels/a.py"\n'
    m = parse_toml(text, Manifest, "m", ManifestError)
    assert m.submission.dsl == "triton" and m.submission.agent is None


@pytest.mark.parametrize(
    ("old", "new", "field", "expected"),
    [
        pytest.param('file = "kernels/vector_add.py"', 'file = "../x.py"',
                     "problems.vector_add.file", "pattern", id="dotdot"),
        pytest.param('file = "kernels/vector_add.py"', 'file = "/abs.py"',
                     "problems.vector_add.file", "pattern", id="absolute"),
        pytest.param('file = "kernels/vector_add.py"', 'file = "kernels/sub/x.py"',
                     "problems.vector_add.file", "pattern", id="subfolder"),
        pytest.param('file = "kernels/vector_add.py"', 'file = "kernels/x.py\\n"',
                     "problems.vector_add.file", "pattern", id="trailing-newline"),
        pytest.param('file = "kernels/vector_add.py"', "file = 3", "problems.vector_add.file",
                     "string", id="wrong-type"),
        pytest.param('dsl = "triton"', 'dsl = "Triton Lang"', "submission.dsl", "pattern",
                     id="bad-dsl"),
        pytest.param('name = "my entry"', 'name = ""', "submission.name", "at least 1",
                     id="empty-name"),
        pytest.param('suite = "demo"', 'suite = "../demo"', "submission.suite", "pattern",
                     id="suite-path"),
        pytest.param("output_tokens = 12000", "output_tokens = -1",
                     "submission.agent.output_tokens", "greater than or equal to 0",
                     id="negative-tokens"),
        pytest.param("wall_s = 30.5", "wall_s = nan", "submission.agent.wall_s",
                     "finite number", id="nan-wall"),
        pytest.param("wall_s = 30.5", "wall_s = 30.5\ncost_usd = 1", "submission.agent.cost_usd",
                     "Extra inputs", id="unknown-agent-field"),
        pytest.param("[problems.vector_add]", '[problems."../x"]', "problems.../x.[key]",
                     "pattern", id="problem-id-path"),
    ],
)
def test_bad_manifest(old: str, new: str, field: str, expected: str) -> None:
    message = refused(edit(MANIFEST, old, new), Manifest, "b.tar:submission.toml",
                      ManifestError)
    assert f"field {field}:" in message and expected in message


def test_manifest_two_problems_one_file() -> None:
    text = MANIFEST + '\n[problems.rmsnorm]\nfile = "kernels/vector_add.py"\n'
    message = refused(text, Manifest, "b.tar:submission.toml", ManifestError)
    assert "same kernel file" in message


def test_manifest_needs_problems() -> None:
    text = MANIFEST.split("[problems.vector_add]")[0]
    message = refused(text, Manifest, "b.tar:submission.toml", ManifestError)
    assert "field problems:" in message and "Field required" in message


def test_load_toml_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "problem.toml"
    path.write_bytes(b'id = "\xff"\n')
    with pytest.raises(ProblemError, match="cannot read") as info:
        load_toml(path, Problem, ProblemError)
    assert str(path) in str(info.value)


# --- the loaders in grader/suite/load.py ----------------------------------------------------------


def write_suite(root: Path, *, suite: str = SUITE, weights: str = WEIGHTS,
                problems: dict[str, str] | None = None) -> Path:
    directory = root / "demo"
    directory.mkdir(parents=True)
    (directory / "suite.toml").write_text(suite)
    (directory / "weights.toml").write_text(weights)
    for pid, text in (problems if problems is not None else {"vector_add": PROBLEM}).items():
        (directory / pid).mkdir()
        (directory / pid / "problem.toml").write_text(text)
        (directory / pid / "reference.py").write_text(
            "def reference(x, y):\n    return x + y\n")
    return directory


def test_load_good_suite(tmp_path: Path) -> None:
    directory = write_suite(tmp_path)
    suite = load_suite(directory)
    assert suite.id == "demo" and list(suite.problems) == ["vector_add"]
    bundle = suite.problems["vector_add"]
    assert bundle.id == "vector_add" and set(bundle.files()) == {"problem.toml", "reference.py"}
    digest = bundle.digest()
    assert digest == load_problem(directory / "vector_add").digest()
    (directory / "vector_add" / "reference.py").write_text("def reference(x, y):\n    return y\n")
    assert load_problem(directory / "vector_add").digest() != digest


def test_problem_folder_name_must_match_id(tmp_path: Path) -> None:
    folder = tmp_path / "vec_add"
    folder.mkdir()
    (folder / "problem.toml").write_text(PROBLEM)
    (folder / "reference.py").write_text("")
    with pytest.raises(ProblemError) as info:
        load_problem(folder)
    message = str(info.value)
    assert str(folder / "problem.toml") in message and "field id" in message
    assert "'vector_add'" in message and "'vec_add'" in message


def test_problem_files_must_exist(tmp_path: Path) -> None:
    folder = tmp_path / "vector_add"
    folder.mkdir()
    with pytest.raises(ProblemError, match=r"problem\.toml: missing"):
        load_problem(folder)
    (folder / "problem.toml").write_text(PROBLEM)
    with pytest.raises(ProblemError, match=r"reference\.py: missing"):
        load_problem(folder)


def test_suite_folder_name_must_match_id(tmp_path: Path) -> None:
    directory = write_suite(tmp_path)
    renamed = directory.rename(tmp_path / "other")
    with pytest.raises(ProblemError) as info:
        load_suite(renamed)
    message = str(info.value)
    assert str(renamed / "suite.toml") in message and "field suite.id" in message
    assert "'demo'" in message and "'other'" in message


def test_suite_needs_its_files(tmp_path: Path) -> None:
    directory = write_suite(tmp_path)
    (directory / "weights.toml").unlink()
    with pytest.raises(ProblemError, match=r"weights\.toml: missing"):
        load_suite(directory)
    (directory / "suite.toml").unlink()
    with pytest.raises(ProblemError, match=r"suite\.toml: missing"):
        load_suite(directory)


def test_suite_problem_folder_missing(tmp_path: Path) -> None:
    suite = edit(SUITE, '["vector_add"]', '["vector_add", "rmsnorm"]')
    directory = write_suite(tmp_path, suite=suite)
    with pytest.raises(ProblemError, match=r"rmsnorm.problem\.toml: missing"):
        load_suite(directory)


def test_bad_problem_inside_suite_names_its_file(tmp_path: Path) -> None:
    bad = edit(PROBLEM, 'phase = "decode"', 'phase = "middle"')
    directory = write_suite(tmp_path, problems={"vector_add": bad})
    with pytest.raises(ProblemError) as info:
        load_suite(directory)
    message = str(info.value)
    assert str(directory / "vector_add" / "problem.toml") in message
    assert "field shapes.0.phase" in message


def test_weights_naming_an_unknown_problem(tmp_path: Path) -> None:
    weights = edit(WEIGHTS, 'problem = "vector_add"\nweight = 1', 'problem = "softmax"\nweight = 1')
    directory = write_suite(tmp_path, weights=weights)
    with pytest.raises(ProblemError) as info:
        load_suite(directory)
    message = str(info.value)
    assert str(directory / "weights.toml") in message
    assert "field weights.1.problem" in message and "'softmax'" in message


def test_weights_naming_an_unknown_shape(tmp_path: Path) -> None:
    weights = edit(WEIGHTS, 'shape = "large"', 'shape = "huge"')
    directory = write_suite(tmp_path, weights=weights)
    with pytest.raises(ProblemError) as info:
        load_suite(directory)
    message = str(info.value)
    assert str(directory / "weights.toml") in message
    assert "field weights.0.shape" in message and "'huge'" in message
    assert "['large', 'small']" in message  # the hint says what was expected


def test_bad_weights_file_names_the_file(tmp_path: Path) -> None:
    directory = write_suite(tmp_path, weights=edit(WEIGHTS, "weight = 3.0", "weight = -1"))
    with pytest.raises(ProblemError) as info:
        load_suite(directory)
    assert str(directory / "weights.toml") in str(info.value)
    assert "field weights.0.weight" in str(info.value)


def test_find_suite(tmp_path: Path) -> None:
    root = tmp_path / "problem_bundles"
    directory = write_suite(root)
    assert find_suite("demo", [tmp_path / "elsewhere", root]).directory == directory
    assert find_suite(str(directory), []).id == "demo"
    with pytest.raises(ProblemError, match="'nope' not found") as info:
        find_suite("nope", [root])
    assert info.value.hint is not None and str(root) in info.value.hint


def test_error_exit_codes() -> None:
    assert ProblemError.exit_code == 20 and ManifestError.exit_code != ProblemError.exit_code

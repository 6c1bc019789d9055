"""`grader import atrex|kernelbench`: every source field mapped, a loadable suite whose references
run, and a clear ProblemError (never a traceback) for each kind of malformed source."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from grader.errors import ProblemError, UsageError
from grader.harness.modules import as_function, build_module
from grader.importers import ImportOptions, import_suite
from grader.importers.common import problem_id, shape_id
from grader.organiser.release_kit import build_kit, kit_files
from grader.paths import REPO
from grader.scoring.derive import check, load_reference
from grader.suite.load import Suite, load_suite

FIXTURES = REPO / "tests" / "fixtures" / "import"
ATREX = FIXTURES / "atrex"
KERNELBENCH = FIXTURES / "kernelbench"


def imported(kind: str, source: Path, out: Path, **kw: object) -> Suite:
    return import_suite(kind, source, ImportOptions(out=out, **kw)).suite  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def atrex_suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    return imported("atrex", ATREX, tmp_path_factory.mktemp("a") / "atrex-fixture")


@pytest.fixture(scope="module")
def kb_suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    return imported("kernelbench", KERNELBENCH, tmp_path_factory.mktemp("k") / "kb-fixture")


# -- Atrex: the mapping -----------------------------------------------------------------------
def test_atrex_suite_and_weights(atrex_suite: Suite) -> None:
    assert atrex_suite.id == "atrex-fixture" and atrex_suite.info.version == "0.1.0"
    assert list(atrex_suite.problems) == ["linear", "relu", "scale_softmax"]
    w = {(x.problem, x.shape): x.weight for x in atrex_suite.weights.weights}
    # {"op": n}, {"op": {"weight", "shapes"}}, {"op": {shape key: n}} with a name and an index
    assert w == {("relu", None): 0.2, ("linear", None): 0.5, ("linear", "llama_proj"): 0.4,
                 ("scale_softmax", "rows8"): 0.1, ("scale_softmax", "shape1"): 0.2}
    assert atrex_suite.weights.source.startswith("Atrex-Bench operator_importance.json, as given")


def test_atrex_metadata_formulas_tolerance_and_shapes(atrex_suite: Suite) -> None:
    p = atrex_suite.problems["relu"].problem
    assert (p.operator, p.description, p.dtypes) == (
        "elementwise", "out = max(x, 0), elementwise, fp32", ["float32"])
    assert (p.flops, p.bytes) == ("n", "8 * n")
    assert p.tolerance_for("float32").atol == 1e-6 and p.tolerance_for("float32").rtol == 1e-6
    assert p.interface == "module" and p.init_params == [] and p.entry_names()[0] == "Model"
    assert p.extra_files == ["source_input.py", "source_reference.py"]
    assert [(s.id, s.params, s.phase, s.smoke, s.flops) for s in p.shapes] == [
        ("tiny", {"n": 1000}, "prefill", True, None),
        ("decode_4k", {"n": 4096}, "decode", False, None)]  # "decode 4k" made an id
    assert p.hidden.provenance == "fixture written for the grader's importer tests"
    notes = p.hidden.notes
    assert "fields not imported: owner" in notes and "source_trace" in notes
    assert "phase guessed (metadata says none" in notes and "tiny=prefill" in notes


def test_atrex_init_kwargs_and_roofline_numbers(atrex_suite: Suite) -> None:
    p = atrex_suite.problems["linear"].problem
    assert p.init_params == ["in_features", "out_features"]
    small, big = p.shapes
    # init and input kwargs share in_features (same value): one param
    assert small.params == {"in_features": 32, "out_features": 16, "batch": 8}
    assert small.smoke and not big.smoke  # "public": true
    assert (small.flops, small.bytes, big.flops, big.bytes) == (8192, 3648, 98304, 19648)
    assert p.flops is None and p.bytes is None
    assert p.tolerance_for("float32").atol == 1e-3  # tolerance by dtype
    assert p.init_kwargs(big) == {"in_features": 64, "out_features": 48}
    assert p.description.startswith("A linear layer")


def test_atrex_without_metadata_derives_and_assumes(atrex_suite: Suite) -> None:
    p = atrex_suite.problems["scale_softmax"].problem
    # an unnamed shape: its index; a smoke shape derived (here: the smallest, as it is)
    assert [s.id for s in p.shapes] == ["smoke", "rows8", "shape1"]
    assert p.shapes[0].smoke and p.shapes[0].params == p.shapes[1].params
    assert p.dtypes == ["float32"] and p.tolerance == {}
    assert all(s.flops and s.bytes for s in p.shapes)
    assert "derived" in p.hidden.notes and "no metadata.json" in p.hidden.notes
    assert p.description == "Atrex-Bench operator scale_softmax"


def test_atrex_numbers_agree_with_derivation(atrex_suite: Suite) -> None:
    for bundle in atrex_suite.problems.values():
        rows = check(bundle.directory)
        assert rows and all(r.ok for r in rows), rows


def test_every_shape_counts_what_it_returns(atrex_suite: Suite, kb_suite: Suite) -> None:
    """Each imported shape says how many bytes one call returns (counted on `meta`), so that
    batches are sized by their outputs and not by the traffic of inputs drawn where they are
    used (run/plan.py): float32 batch x out_features for linear, n for relu."""
    shapes = {(pid, s.id): s.output_bytes for pid, sp in atrex_suite.problems.items()
              for s in sp.problem.shapes}
    assert shapes[("linear", "small")] == 4 * 8 * 16
    assert shapes[("linear", "llama_proj")] == 4 * 16 * 48
    assert shapes[("relu", "decode_4k")] == 4 * 4096
    assert shapes[("scale_softmax", "smoke")] == 4 * 8 * 64  # the derived smoke shape too
    kb = kb_suite.problems["level2_3_matmul_scale"].problem
    assert [s.output_bytes for s in kb.shapes] == [4 * 16 * 24] * 2
    # not a roofline number: the shapes' traffic is still the count of what a call moves
    assert all(s.bytes is None or s.bytes > (s.output_bytes or 0)
               for sp in atrex_suite.problems.values() for s in sp.problem.shapes)


def test_outputs_counted_where_the_reference_reads_values(tmp_path: Path) -> None:
    """A reference that reads values (`.tolist()` of state indices, as Atrex-Bench's
    chunk_gated_delta_rule_state) cannot run on meta; its outputs are counted there all the
    same, with the values read as zeros (derive.output_bytes_on_meta): 2 x 64 x 100 bf16
    chunks and the float32 state, where its upstream `bytes` (8) would have stood for them."""
    src = _atrex_copy(tmp_path)
    op = src / "state_update"
    op.mkdir()
    _write(op / "input.py", "import torch\n\n\ndef _make_inputs(rows, width):\n"
           "    return [torch.randn(rows, width), torch.arange(rows)]\n")
    _write(op / "reference.py", textwrap.dedent("""\
        import torch


        class Model(torch.nn.Module):
            def __init__(self, chunks):
                super().__init__()
                self.chunks = chunks

            def forward(self, state, idx):
                rows = torch.tensor(idx.tolist(), device=state.device)
                picked = state.index_select(0, rows)
                out = torch.empty(self.chunks, *picked.shape, dtype=torch.bfloat16,
                                  device=state.device)
                for c in range(self.chunks):
                    out[c] = (picked * c).to(torch.bfloat16)
                return {"chunks": out, "state": picked.clone()}
        """))
    _write(op / "shapes.json", json.dumps([
        {"name": "big", "init_kwargs": {"chunks": 2},
         "input_kwargs": {"rows": 64, "width": 100}}]))
    _write(op / "metadata.json", json.dumps({"flops": 1.0, "bytes": 8.0}))
    p = imported("atrex", src, tmp_path / "out").problems["state_update"].problem
    big = next(s for s in p.shapes if s.id == "big")
    assert (p.flops, p.bytes, big.bytes) == ("1.0", "8.0", None)  # upstream's, as given
    assert big.output_bytes == 2 * 64 * 100 * 2 + 64 * 100 * 4
    # A guess from zeros may split batches, never merge them: where it is below the shape's
    # traffic count, that count stands.
    _write(op / "metadata.json", json.dumps({"flops": 1.0, "bytes": 1e9}))
    p = imported("atrex", src, tmp_path / "out2").problems["state_update"].problem
    assert next(s for s in p.shapes if s.id == "big").output_bytes is None


# -- KernelBench: the mapping ----------------------------------------------------------------
def test_kernelbench_mapping(kb_suite: Suite) -> None:
    assert list(kb_suite.problems) == ["level1_19_relu", "level1_99_linear_relu",
                                       "level2_3_matmul_scale"]
    assert {(w.problem, w.shape, w.weight) for w in kb_suite.weights.weights} == {
        (pid, None, 1.0) for pid in kb_suite.problems}
    assert "KernelBench has no" in kb_suite.weights.source
    relu = kb_suite.problems["level1_19_relu"].problem
    assert relu.operator == "ReLU" and relu.description == (
        "Simple model that performs a ReLU activation.")
    # the file's one shape, and a smoke shape: small already, so the same sizes
    assert [(s.id, s.params, s.phase, s.smoke) for s in relu.shapes] == [
        ("smoke", {"batch_size": 4, "dim": 256}, "prefill", True),
        ("default", {"batch_size": 4, "dim": 256}, "prefill", False)]
    assert relu.entry_names() == ("ModelNew", "Model") and relu.init_params == []
    assert relu.tolerance_for("float32").atol == 1e-2 and relu.dtypes == ["float32"]
    assert relu.extra_files == ["source_problem.py"]
    assert relu.hidden.provenance == "KernelBench level1/19_ReLU.py"
    lin = kb_suite.problems["level1_99_linear_relu"].problem
    assert lin.init_params == ["in_features", "out_features"]
    assert lin.shapes[1].params == {"in_features": 32, "out_features": 16, "batch_size": 8}
    mm = kb_suite.problems["level2_3_matmul_scale"].problem
    # get_init_inputs() returns [scale * 2]: named after Model.__init__'s argument
    assert mm.init_params == ["scaling_factor"]
    assert mm.shapes[1].params == {"scaling_factor": 1.0, "M": 16, "K": 32, "N": 24,
                                   "scale": 0.5}
    for bundle in kb_suite.problems.values():
        rows = check(bundle.directory)  # the derived numbers are what derivation says
        assert all(r.ok and r.derived_flops > 0 for r in rows), rows


def test_one_kernelbench_file(tmp_path: Path) -> None:
    suite = imported("kernelbench", KERNELBENCH / "level1" / "19_ReLU.py", tmp_path / "one")
    assert list(suite.problems) == ["19_relu"]


# -- the imported suites load and their references run ------------------------------------
@pytest.mark.parametrize("which", ["atrex_suite", "kb_suite"])
def test_references_run_seeded_on_cpu(which: str, request: pytest.FixtureRequest) -> None:
    suite: Suite = request.getfixturevalue(which)
    again = load_suite(suite.directory)  # the loader `grader run` uses
    assert list(again.problems) == list(suite.problems)
    for bundle in suite.problems.values():
        p = bundle.problem
        assert set(bundle.files()) == {"problem.toml", "reference.py", *p.extra_files}
        ref = load_reference(bundle.directory, "module")
        for shape in p.shapes:
            state = torch.get_rng_state()
            inputs = ref.make_inputs(3, "cpu", **shape.params)
            assert torch.equal(torch.get_rng_state(), state)  # the global RNG is untouched
            same = ref.make_inputs(3, "cpu", **shape.params)
            other = ref.make_inputs(4, "cpu", **shape.params)
            assert all(torch.equal(a, b) for a, b in zip(inputs, same, strict=True))
            assert not all(torch.equal(a, b) for a, b in zip(inputs, other, strict=True))
            model = build_module(ref.Model, p.init_kwargs(shape), 5, "cpu")
            out = as_function(model)(*inputs)
            assert isinstance(out, torch.Tensor) and torch.isfinite(out).all()
            twin = build_module(ref.Model, p.init_kwargs(shape), 5, "cpu")
            assert torch.equal(as_function(twin)(*inputs), out)  # same seed, same weights


def test_atrex_release_kit_has_sources_but_no_hidden_files(atrex_suite: Suite) -> None:
    files = kit_files(atrex_suite)
    names = {n.split("/", 2)[-1] for n in files if n.startswith("problems/linear/")}
    assert names == {"spec.toml", "reference.py", "source_reference.py", "source_input.py"}
    assert not any(n.endswith(("metadata.json", "roofline.json", "problem.toml",
                               "weights.toml")) for n in files)
    spec = files["problems/linear/spec.toml"].decode()
    assert 'interface = "module"' in spec and "class Model(torch.nn.Module)" in spec
    assert "__init__(self, in_features, out_features); forward(self, x)" in spec
    assert "interface = \"module\"" in files["README.md"].decode()
    # The stub is the entry class, with the reference Model's arguments (issue 34).
    stub = files["kernels/linear.py"].decode()
    assert "class Model(torch.nn.Module):" in stub  # as the spec's signature names it
    assert "def __init__(self, in_features, out_features):" in stub
    assert "def forward(self, x):" in stub and "raise NotImplementedError" in stub
    compile(stub, "kernels/linear.py", "exec")
    build_kit(atrex_suite)  # no hidden value in any published file


# -- ids --------------------------------------------------------------------------------------
def test_ids_are_safe_and_unique() -> None:
    taken: set[str] = set()
    assert problem_id("Level 1/19_ReLU", taken) == "level_1_19_relu"
    assert problem_id("level-1 19 relu", taken) == "level_1_19_relu_2"
    assert problem_id("___", taken) == "problem"
    assert shape_id("decode 4k/x", set(), "s0") == "decode_4k_x"
    assert shape_id("..", set(), "s0") == "s0"


# -- malformed sources: a ProblemError naming what is wrong -----------------------------------
def _atrex_copy(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(ATREX, src)
    return src


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _rmdirs(root: Path) -> None:
    for d in root.iterdir():
        if d.is_dir():
            shutil.rmtree(d)


ATREX_BREAKS: list[tuple[str, Callable[[Path], None], str]] = [
    ("no-reference", lambda s: (s / "relu" / "reference.py").unlink(),
     r"relu/reference.py: missing"),
    ("no-input", lambda s: (s / "relu" / "input.py").unlink(), r"relu/input.py: missing"),
    ("no-shapes", lambda s: (s / "relu" / "shapes.json").unlink(), r"shapes.json: missing"),
    ("bad-json", lambda s: _write(s / "relu" / "shapes.json", "[{"),
     r"shapes.json: not valid JSON: .* line 1"),
    ("shapes-not-object", lambda s: _write(s / "relu" / "shapes.json", '7'),
     r"shapes.json: is a JSON int, expected an object of shapes by id"),
    ("shape-by-id-not-object", lambda s: _write(s / "relu" / "shapes.json", '{"n": 1}'),
     r"shapes.json: shape n: unexpected content"),
    ("shapes-empty", lambda s: _write(s / "relu" / "shapes.json", "{}"), r"lists no shape"),
    ("shape-not-object", lambda s: _write(s / "relu" / "shapes.json", "[3]"),
     r"shapes.json: shape 0: unexpected content"),
    ("no-class", lambda s: _write(s / "relu" / "reference.py", "def Model(): pass\n"),
     r"reference.py: defines no class Model"),
    ("syntax", lambda s: _write(s / "relu" / "reference.py", "class Model(:\n"),
     r"reference.py: not valid Python"),
    ("no-make-inputs", lambda s: _write(s / "relu" / "input.py", "x = 1\n"),
     r"input.py: defines no _make_inputs\(\)"),
    ("list-param", lambda s: _write(s / "relu" / "shapes.json",
                                    '[{"input_kwargs": {"n": [[1], [2]]}}]'),
     r"input_kwargs.n: is list .*a flat list"),
    ("param-conflict", lambda s: _write(
        s / "linear" / "shapes.json", '[{"init_kwargs": {"in_features": 4, "out_features": 2},'
        ' "input_kwargs": {"batch": 2, "in_features": 8}}]'),
     r"`in_features` is 4 for the constructor and 8 for the inputs"),
    ("bad-dtype", lambda s: _write(s / "relu" / "metadata.json", '{"dtype": "complex32"}'),
     r"metadata.json: dtype: unknown dtype 'complex32'"),
    ("bad-metadata", lambda s: _write(s / "relu" / "metadata.json", '{"tolerance": "tight"}'),
     r"metadata.json: unexpected content:\n  field tolerance"),
    ("roofline-length", lambda s: _write(s / "linear" / "roofline.json", "[]"),
     r"roofline.json: lists 0 entries for 2 shapes"),
    ("roofline-negative", lambda s: _write(s / "linear" / "roofline.json",
                                           '{"small": {"flops": -1}}'),
     r"roofline.json: shape small: unexpected content"),
    ("importance-bad", lambda s: _write(s / "operator_importance.json", '{"relu": "high"}'),
     r"operator_importance.json: relu: weight 'high' is not a number"),
    ("importance-not-object", lambda s: _write(s / "operator_importance.json", "7"),
     r"operator_importance.json: is a JSON int"),
    ("no-operators", lambda s: _rmdirs(s), r"no operator folder"),
]


@pytest.mark.parametrize(("case", "breaks", "message"), ATREX_BREAKS,
                         ids=[c[0] for c in ATREX_BREAKS])
def test_atrex_malformed(tmp_path: Path, case: str, breaks: Callable[[Path], None],
                         message: str) -> None:
    src = _atrex_copy(tmp_path)
    breaks(src)
    with pytest.raises(ProblemError, match=message):
        imported("atrex", src, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]  # no staging folder left behind


KB_BREAKS: list[tuple[str, str, str]] = [
    ("no-class", "def get_inputs(): return []\n", r"defines no class Model"),
    ("no-get-inputs", "class Model: pass\n", r"defines no get_inputs\(\)"),
    ("syntax", "class Model(\n", r"not valid Python"),
    ("init-not-literal", "class Model:\n    def __init__(self, a): pass\n"
     "def get_inputs(): return []\ndef get_init_inputs(): return make()\n",
     r"does not return a list literal"),
    ("init-nested-tuple", "class Model:\n    def __init__(self, k): pass\n"
     "def get_inputs(): return []\ndef get_init_inputs(): return [(3, (5, 1))]\n",
     r"returns '\(3, \(5, 1\)\)', which is not a constant"),
    ("init-object", "import torch\nclass Model:\n    def __init__(self, c): pass\n"
     "cfg = make()\ndef get_inputs(): return []\ndef get_init_inputs(): return [cfg]\n",
     r"returns 'cfg', which is not a constant"),
    ("foreign-import", "from transformers import AutoConfig\nclass Model: pass\n"
     "def get_inputs(): return []\n", r"imports transformers, which the grader's images"),
    ("too-many-init", "class Model:\n    def __init__(self): pass\n"
     "def get_inputs(): return []\ndef get_init_inputs(): return [1]\n",
     r"gives 1 value\(s\), Model.__init__ names 0"),
    ("too-few-init", "class Model:\n    def __init__(self, a, b): pass\n"
     "def get_inputs(): return []\ndef get_init_inputs(): return [1]\n",
     r"Model.__init__ needs 2"),
]


@pytest.mark.parametrize(("case", "text", "message"), KB_BREAKS, ids=[c[0] for c in KB_BREAKS])
def test_kernelbench_malformed(tmp_path: Path, case: str, text: str, message: str) -> None:
    src = tmp_path / "src" / "level1"
    src.mkdir(parents=True)
    (src / "1_Op.py").write_text(text)
    with pytest.raises(ProblemError, match=message):
        imported("kernelbench", tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_kernelbench_no_problem_files(tmp_path: Path) -> None:
    (tmp_path / "notes.py").write_text("x = 1\n")
    with pytest.raises(ProblemError, match="no KernelBench problem file"):
        imported("kernelbench", tmp_path, tmp_path / "out")


def test_missing_source_and_existing_out_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or folder"):
        imported("kernelbench", tmp_path / "nowhere", tmp_path / "out")
    with pytest.raises(UsageError, match="not a folder"):
        imported("atrex", tmp_path / "nowhere", tmp_path / "out")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")
    with pytest.raises(UsageError, match="never overwrites"):
        imported("atrex", ATREX, tmp_path / "out")
    assert (tmp_path / "out" / "keep").read_text() == "mine"
    with pytest.raises(UsageError, match="not a valid one"):
        imported("atrex", ATREX, tmp_path / "bad name")


def test_skip_bad_leaves_out_and_lists(tmp_path: Path) -> None:
    src = _atrex_copy(tmp_path)
    (src / "relu" / "shapes.json").write_text('{"oops": 1}')
    result = import_suite("atrex", src, ImportOptions(out=tmp_path / "out", skip_bad=True))
    assert list(result.suite.problems) == ["linear", "scale_softmax"]
    assert len(result.skipped) == 1 and "shape oops: unexpected content" in result.skipped[0]
    assert any("'relu' is no imported operator" in n for n in result.notes)


def test_derivation_failure_names_problem_and_shape(tmp_path: Path) -> None:
    src = _atrex_copy(tmp_path)
    (src / "scale_softmax" / "reference.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def __init__(self, scale):\n"
        "        super().__init__()\n    def forward(self, x):\n"
        "        raise RuntimeError('boom')\n")
    with pytest.raises(ProblemError, match=r"scale_softmax: deriving FLOPs and bytes of shape "
                       r"\w+ on meta failed: RuntimeError: boom; on cpu failed: RuntimeError"):
        imported("atrex", src, tmp_path / "out")


def test_importance_list_form_and_no_importance(tmp_path: Path) -> None:
    src = _atrex_copy(tmp_path)
    (src / "operator_importance.json").write_text(json.dumps({"operators": [
        {"operator": "relu", "weight": 2}, {"operator": "linear", "shape": "small",
                                            "weight": 1.5}]}))
    suite = imported("atrex", src, tmp_path / "a")
    assert {(w.problem, w.shape, w.weight) for w in suite.weights.weights} == {
        ("relu", None, 2.0), ("linear", "small", 1.5)}
    (src / "operator_importance.json").unlink()
    suite = imported("atrex", src, tmp_path / "b")
    assert {(w.problem, w.weight) for w in suite.weights.weights} == {
        (p, 1.0) for p in suite.problems}
    assert suite.weights.source.startswith("uniform")


# -- the command --------------------------------------------------------------------------------
def _grader(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=REPO, check=False)


def test_cli_imports_and_prints_next_step(tmp_path: Path) -> None:
    res = _grader("import", "kernelbench", str(KERNELBENCH), "-o", str(tmp_path / "kb"),
                  "--suite-version", "2.0", "--seeds", "3")
    assert res.returncode == 0, res.stderr
    assert "imported 3 problem(s), 6 shape(s)" in res.stdout and "next: grader run" in res.stdout
    info = load_suite(tmp_path / "kb").info
    assert (info.version, info.seeds_per_shape) == ("2.0", 3)


def test_cli_errors_have_exit_codes_and_no_traceback(tmp_path: Path) -> None:
    src = _atrex_copy(tmp_path)
    (src / "relu" / "shapes.json").write_text('7')
    res = _grader("import", "atrex", str(src), "-o", str(tmp_path / "out"))
    assert res.returncode == ProblemError.exit_code
    assert res.stderr.startswith("error: ") and "expected an object of shapes" in res.stderr
    assert "Traceback" not in res.stderr
    res = _grader("import", "atrex", str(tmp_path / "none"), "-o", str(tmp_path / "out"))
    assert res.returncode == UsageError.exit_code and "Traceback" not in res.stderr


# -- Atrex-Bench as shipped (tests/fixtures/import/atrex_real: its schemas, our operators) ----
ATREX_REAL = FIXTURES / "atrex_real"


@pytest.fixture(scope="module")
def real_suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    return imported("atrex", ATREX_REAL, tmp_path_factory.mktemp("r") / "atrex-real")


def test_real_layout_shapes_phases_and_metadata(real_suite: Suite) -> None:
    assert list(real_suite.problems) == ["fp8_quant_fnuz", "fused_add_rms_norm", "topk_filter"]
    p = real_suite.problems["fused_add_rms_norm"].problem
    assert p.init_params == ["eps"] and p.dtypes == ["bfloat16"]
    smoke, *scored = p.shapes
    assert smoke.smoke and [s.id for s in scored] == ["0", "1"]
    # "prefill/decode": the description, else the token count, decides (and is noted)
    assert [s.phase for s in scored] == ["prefill", "decode"]
    assert "phase guessed" in p.hidden.notes and "0=prefill, 1=decode" in p.hidden.notes
    assert p.hidden.provenance.startswith("Atrex-Bench atrex_900, from vllm fused_add_rms_norm")
    assert "production_performance" in p.hidden.notes and "call_count 12" in p.hidden.notes
    fnuz = real_suite.problems["fp8_quant_fnuz"].problem
    assert fnuz.dtypes == ["float8_e4m3fn", "float32"] and fnuz.init_params == []
    assert fnuz.shapes[1].params == {"shape": [608, 2048]}  # a list param, as shipped
    assert real_suite.problems["topk_filter"].problem.shapes[1].phase == "decode"


def test_real_roofline_used_as_given_and_derivation_beside_it(real_suite: Suite) -> None:
    p = real_suite.problems["fused_add_rms_norm"].problem
    s0 = p.shapes[1]
    assert (s0.flops, s0.bytes) == (10487808, 8390656 + 8388608)  # W; Q read + Q write
    fnuz = real_suite.problems["fp8_quant_fnuz"].problem
    assert fnuz.shapes[2].flops is not None  # upstream null: derived
    notes = p.hidden.notes + fnuz.hidden.notes
    assert "SOL_time_ms for H20, XPU-A not imported" in notes
    assert "upstream used" in notes  # where our derivation differs by more than 10 %


def test_real_importance_kept_unnormalised(real_suite: Suite) -> None:
    w = {(x.problem, x.shape): x.weight for x in real_suite.weights.weights}
    assert w == {("fused_add_rms_norm", None): 0.04, ("topk_filter", None): 0.035,
                 ("fp8_quant_fnuz", None): 0.01}
    assert "num_profiles 1234" in real_suite.weights.source


def test_real_smoke_shapes_are_scaled_down_and_run_on_cpu(real_suite: Suite) -> None:
    fnuz = real_suite.problems["fp8_quant_fnuz"].problem
    smoke = fnuz.shapes[0]
    assert smoke.smoke and smoke.params == {"shape": [152, 512]}  # [608, 2048] halved twice
    topk = real_suite.problems["topk_filter"].problem
    assert topk.shapes[0].params["top_k"] == 50  # the same in every shape: structure, kept
    assert "smoke shape from shape 0" in topk.hidden.notes
    for bundle in real_suite.problems.values():
        p = bundle.problem
        ref = load_reference(bundle.directory, "module")
        shape = p.shapes[0]
        inputs = ref.make_inputs(1, "cpu", **shape.params)  # device='cuda' in the source
        assert all(x.device.type == "cpu" for x in inputs)
        out = as_function(build_module(ref.Model, p.init_kwargs(shape), 1, "cpu"))(*inputs)
        assert isinstance(out, dict | tuple | torch.Tensor)


def test_dict_inputs_follow_forward_order(real_suite: Suite) -> None:
    bundle = real_suite.problems["fused_add_rms_norm"]
    ref = load_reference(bundle.directory, "module")
    x, residual, weight = ref.make_inputs(2, "cpu", token_count=3, hidden_size=8)
    assert x.shape == residual.shape == (3, 8) and weight.shape == (8,)
    assert x.dtype == torch.bfloat16
    assert ref._in_order({"weight": 1, "x": 2, "residual": 3}) == (2, 3, 1)
    with pytest.raises(TypeError, match=r"not arguments of Model\.forward"):
        ref._in_order({"bias": 1})


def test_kernelbench_tuples_lists_and_formulas(tmp_path: Path) -> None:
    """Tuple and list constructor arguments are params; a constant computed from others stays
    consistent when the smoke shape scales the free ones; a hyphenated file name imports."""
    src = tmp_path / "src" / "level3"
    src.mkdir(parents=True)
    (src / "7_Conv-Net_bs8.py").write_text(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
        "    def __init__(self, channels, kernel_size, widths):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(channels, widths[0], kernel_size)\n\n"
        "    def forward(self, x):\n        return torch.softmax(self.conv(x), dim=1)\n\n"
        "batch_size = 64\nchannels = 16\nheight = 512\nwidth = height * 2\n"
        "kernel_size = (3, 5)\nwidths = [32] * 2\n\n"
        "def get_inputs():\n    return [torch.rand(batch_size, channels, height, width)]\n\n"
        "def get_init_inputs():\n    return [channels, kernel_size, widths]\n")
    suite = imported("kernelbench", tmp_path / "src", tmp_path / "kb")
    p = suite.problems["level3_7_conv_net_bs8"].problem
    smoke, default = p.shapes
    assert default.params["kernel_size"] == [3, 5] and default.params["widths"] == [32, 32]
    assert smoke.smoke and smoke.params["width"] == 2 * smoke.params["height"]  # N = 2 * dim
    assert smoke.params["height"] < 512 and smoke.params["kernel_size"] == [3, 5]
    assert default.flops and default.flops > 2 * 64 * 16 * 510 * 1020 * 15 * 32  # + softmax
    rows = check(suite.problems["level3_7_conv_net_bs8"].directory, device="meta")
    assert all(r.ok for r in rows), rows


def test_no_problem_imported_lists_every_reason(tmp_path: Path) -> None:
    src = tmp_path / "src" / "level4"
    src.mkdir(parents=True)
    for i in (1, 2):
        (src / f"{i}_gpt-{i}_bs1.py").write_text(
            "from transformers import AutoModelForCausalLM\nclass Model: pass\n"
            "def get_inputs(): return []\n")
    (src / "notes.py").write_text("x = 1\n")
    with pytest.raises(ProblemError) as err:
        imported("kernelbench", tmp_path / "src", tmp_path / "out", skip_bad=True)
    msg = err.value.message
    assert "1_gpt-1_bs1.py: imports transformers" in msg and "2_gpt-2_bs1.py" in msg
    assert "notes.py: not named <n>_<Name>.py" in msg

"""Module problems (`interface = "module"`): the format, the harness building classes in both
containers under one seed, static analysis of class entries, and the host's seeds and jobs.

The harness runs here in child processes (TRITON_INTERPRET must be set before triton is
imported), with its fixed container paths pointed at temporary folders: the reference run and
the entry run are the real `grader.harness.main` code, only without containers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.detect.policy import load_policy
from grader.detect.static import analyze
from grader.errors import ProblemError
from grader.formats._base import parse_toml
from grader.formats.problem import Problem
from grader.grading.seeds import derive_module_seed, derive_seed
from grader.harness import tensors
from grader.harness.modules import as_function, build_module, find_class
from grader.harness.protocol import RECIPE_DIR, RECIPE_FILE
from grader.importers import ImportOptions, import_suite
from grader.model.runs import Case
from grader.paths import REPO
from grader.run.jobs import entry_args, module_job
from grader.suite.load import SuiteProblem, load_problem

FIXTURES = REPO / "tests" / "fixtures" / "import"

PROBLEM = textwrap.dedent("""
    id = "lin"
    operator = "linear"
    dtypes = ["float32"]
    interface = "module"
    init_params = ["i", "o"]
    bytes = "4 * (b*i + i*o + b*o)"

    [[shapes]]
    id = "s"
    params = { i = 8, o = 4, b = 2 }
    phase = "prefill"
    flops = 128
""")


def _problem(text: str) -> Problem:
    return parse_toml(text, Problem, "problem.toml", ProblemError)


# -- the format ---------------------------------------------------------------------------------
def test_module_fields_and_defaults() -> None:
    p = _problem(PROBLEM)
    assert p.entry_names() == ("ModelNew", "Model") and p.extra_files == []
    assert p.init_kwargs(p.shapes[0]) == {"i": 8, "o": 4}
    assert p.flops is None and p.shapes[0].flops == 128
    fn = _problem(PROBLEM.replace('interface = "module"\ninit_params = ["i", "o"]\n', "")
                  .replace("flops = 128", 'flops = 7.5'))
    assert fn.interface == "function" and fn.entry_names() == ("kernel",)


@pytest.mark.parametrize(("old", "new", "message"), [
    ('interface = "module"\n', "", "init_params and entry_classes need interface"),
    ('interface = "module"', 'interface = "class"', "'function' or 'module'"),
    ("flops = 128\n", "", "flops: no expression, and shapes ['s'] have no flops number"),
    ('init_params = ["i", "o"]', 'init_params = ["not a name"]', "init_params.0"),
    ('init_params = ["i", "o"]', 'extra_files = ["../x.py"]', "extra_files.0"),
    ('init_params = ["i", "o"]', 'extra_files = ["reference.py"]', "not reference.py"),
    ('init_params = ["i", "o"]', "entry_classes = []", "entry_classes"),
])
def test_module_fields_refused(old: str, new: str, message: str) -> None:
    with pytest.raises(ProblemError) as err:
        _problem(PROBLEM.replace(old, new))
    assert message in err.value.message


def test_extra_files_reach_the_image_and_must_exist(tmp_path: Path) -> None:
    d = tmp_path / "lin"
    d.mkdir()
    (d / "problem.toml").write_text(PROBLEM.replace(
        'init_params = ["i", "o"]', 'init_params = ["i", "o"]\nextra_files = ["helper.py"]'))
    (d / "reference.py").write_text("")
    with pytest.raises(ProblemError, match=r"extra_files: .*helper.py is not a regular file"):
        load_problem(d)
    (d / "helper.py").write_text("X = 1\n")
    (d / "notes.py").write_text("not listed\n")
    assert set(load_problem(d).files()) == {"problem.toml", "reference.py", "helper.py"}


# -- seeds and jobs on the host ----------------------------------------------------------------
def test_module_seed_is_keyed_and_not_the_input_seed() -> None:
    secret, other = bytes(32), bytes([1] * 32)
    seed = derive_seed(secret, "p", "s", 0)
    assert derive_module_seed(secret, seed) == derive_module_seed(secret, seed)
    assert derive_module_seed(secret, seed) != seed
    assert derive_module_seed(other, seed) != derive_module_seed(secret, seed)
    assert 0 <= derive_module_seed(secret, seed) < 2**31


def test_jobs_carry_constructor_arguments_only_for_module_problems() -> None:
    p = _problem(PROBLEM)
    cases = [Case(id="s.0", shape=p.shapes[0], seed=1, module_seed=9),
             Case(id="s.t0", shape=p.shapes[0], seed=2, module_seed=10, timing=True)]
    assert module_job(p, cases) == {"module": {"s.0": {"init": {"i": 8, "o": 4}, "seed": 9},
                                                "s.t0": {"init": {"i": 8, "o": 4}, "seed": 10}}}
    assert entry_args(p) == ("ModelNew", "Model")
    fn = p.model_copy(update={"interface": "function", "init_params": []})
    assert module_job(fn, cases) == {} and entry_args(fn) == () and module_job(None, cases) == {}


# -- building modules ------------------------------------------------------------------------
class _Lin(torch.nn.Module):
    def __init__(self, i: int, o: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(i, o)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.lin(x))


def test_build_module_is_seeded_eval_frozen_and_leaves_the_rng() -> None:
    state = torch.get_rng_state()
    a = build_module(_Lin, {"i": 8, "o": 4}, 3, "cpu")
    b = build_module(_Lin, {"i": 8, "o": 4}, 3, "cpu")
    c = build_module(_Lin, {"i": 8, "o": 4}, 4, "cpu")
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.lin.weight, b.lin.weight) and not torch.equal(a.lin.weight, c.lin.weight)
    assert not a.training and not any(p.requires_grad for p in a.parameters())
    x = torch.randn(2, 8)
    assert torch.equal(as_function(a)(x), as_function(a)(x))  # eval: dropout is off
    meta = build_module(_Lin, {"i": 8, "o": 4}, 3, "meta")
    assert meta.lin.weight.device.type == "meta"


def test_find_class_and_non_modules() -> None:
    ns = type(sys)("ns")
    ns.Model, ns.kernel = _Lin, len  # type: ignore[attr-defined]
    assert find_class(ns, ["ModelNew", "Model"]) is _Lin
    with pytest.raises(AttributeError, match="no class ModelNew or kernel"):
        find_class(ns, ["ModelNew", "kernel"])
    with pytest.raises(TypeError, match=r"not a torch\.nn\.Module"):
        build_module(dict, {}, 0, "cpu")


# -- static analysis of class entries --------------------------------------------------------
HONEST = FIXTURES / "entries" / "kernelbench" / "kernels" / "level1_99_linear_relu.py"
FALLBACK = FIXTURES / "entries" / "kernelbench" / "kernels" / "level2_3_matmul_scale.py"


def _rules(source: str, entry: tuple[str, ...] | None) -> list[tuple[str, str]]:
    return [(f.rule, f.severity.value) for f in
            analyze(source, "k.py", load_policy("triton"), entry)]


def test_class_entry_is_reached_and_its_init_is_set_up() -> None:
    src = HONEST.read_text()
    found = analyze(src, "k.py", load_policy("triton"), ("ModelNew", "Model"))
    assert [(f.rule, f.severity.value) for f in found] == [("FB001", "warning")]
    assert "in __init__: set-up" in found[0].message  # nn.Linear built for its weights
    assert _rules(src, None) == _rules(src, ("ModelNew", "Model"))  # guessed from the file
    as_function_problem = _rules(src, ("kernel",))  # graded as a kernel() problem: unreached
    assert ("ST002", "info") in as_function_problem and ("DK001", "warning") in (
        as_function_problem)


def test_class_entry_fallback_in_forward() -> None:
    rules = _rules(FALLBACK.read_text(), ("ModelNew", "Model"))
    assert ("FB001", "fallback") in rules and ("FB005", "fallback") in rules
    # compute in __init__ beside a matmul in forward: only the forward one decides
    src = FALLBACK.read_text().replace(
        "self.scaling_factor = scaling_factor",
        "self.scaling_factor = torch.tensor(scaling_factor).exp().item()")
    found = analyze(src, "k.py", load_policy("triton"), ("ModelNew",))
    init_lines = {f.line for f in found if f.severity.value == "warning"}
    assert init_lines and all(f.severity.value == "fallback" for f in found
                              if f.line not in init_lines)


def test_missing_entry_class_is_st002() -> None:
    found = analyze("import torch\nclass Other: pass\n", "k.py", load_policy("triton"),
                    ("ModelNew", "Model"))
    assert any(f.rule == "ST002" and "class ModelNew or Model" in f.message for f in found)


# -- the harness, reference and entry runs ---------------------------------------------------
DRIVER = r"""
import sys
from pathlib import Path
import grader.harness.main as h
mode, work, problem, entry = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
h.IN, h.OUT = work / f"{mode}-in", work / f"{mode}-out"
h.PROBLEM, h.ENTRY = problem, entry
if mode == "reference":
    sys.exit(h.run_reference())
from grader.harness.entry import run_entry  # after the paths above: it reads them at import
sys.exit(run_entry(sys.argv[5:] or None))
"""


def _harness(work: Path, mode: str, problem: Path, entry: Path, *args: str
             ) -> subprocess.CompletedProcess[str]:
    (work / "driver.py").write_text(DRIVER)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(work / "driver.py"), mode, str(work),
                           str(problem), str(entry), *args], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def kb_linear(tmp_path_factory: pytest.TempPathFactory) -> SuiteProblem:
    out = tmp_path_factory.mktemp("kb") / "kb"
    suite = import_suite("kernelbench", FIXTURES / "kernelbench",
                         ImportOptions(out=out)).suite
    return suite.problems["level1_99_linear_relu"]


def _run_pair(tmp_path: Path, bundle: SuiteProblem, entry: Path) -> dict[str, Any]:
    """The reference run, then the entry run on the same seeds, drawing its inputs with the
    recipe the reference packed (as jobs.deliver places it); the entry's result.json."""
    p = bundle.problem
    cases = [Case(id=f"default.{k}", shape=p.shapes[0], seed=11 + k, module_seed=100 + k)
             for k in range(2)]
    for mode in ("reference", "entry"):
        (tmp_path / f"{mode}-in").mkdir()
        (tmp_path / f"{mode}-out").mkdir()
    job = {"device": "cpu", **module_job(p, cases)}
    (tmp_path / "reference-in" / "job.json").write_text(json.dumps({**job, "cases": [
        {"id": c.id, "params": c.shape.params, "seed": c.seed} for c in cases]}))
    res = _harness(tmp_path, "reference", bundle.directory, entry)
    assert res.returncode == 0, res.stderr[-3000:]
    with tarfile.open(tmp_path / "reference-out" / RECIPE_FILE) as tar:
        tar.extractall(tmp_path / "entry-in" / RECIPE_DIR, filter="data")
    (tmp_path / "entry-in" / "job.json").write_text(json.dumps({**job, "cases": [
        {"id": c.id, "params": c.shape.params, "seed": c.seed} for c in cases]}))
    res = _harness(tmp_path, "entry", bundle.directory, entry, *entry_args(p))
    assert res.returncode == 0, res.stderr[-3000:]
    result: dict[str, Any] = json.loads((tmp_path / "entry-out" / "result.json").read_text())
    return result


def test_harness_builds_the_same_weights_on_both_sides(tmp_path: Path,
                                                       kb_linear: SuiteProblem) -> None:
    result = _run_pair(tmp_path, kb_linear, HONEST)
    for cid in ("default.0", "default.1"):
        assert result["cases"][cid]["ok"], result["cases"][cid]
        ref = tensors.load(tmp_path / "reference-out" / f"{cid}.ref")[0]
        out = tensors.load(tmp_path / "entry-out" / f"{cid}.out")[0]
        assert torch.allclose(ref, out, atol=1e-5), cid  # Linear weights equal: same seed
        trace = result["cases"][cid]["trace"]
        assert trace["triton_launches"] and set(trace["torch_ops"]) <= {"aten.empty"}
    a, b = (tensors.load(tmp_path / "reference-out" / f"default.{k}.ref")[0] for k in (0, 1))
    assert not torch.equal(a, b)


def test_harness_traces_forward_of_a_fallback(tmp_path: Path, kb_linear: SuiteProblem) -> None:
    fallback = tmp_path / "fallback.py"
    fallback.write_text(textwrap.dedent("""
        import torch
        class Model(torch.nn.Module):  # accepted too: entry_classes = ["ModelNew", "Model"]
            def __init__(self, in_features, out_features):
                super().__init__()
                self.linear = torch.nn.Linear(in_features, out_features)
            def forward(self, x):
                return torch.relu(self.linear(x))
    """))
    result = _run_pair(tmp_path, kb_linear, fallback)
    trace = result["cases"]["default.0"]["trace"]
    assert not trace["triton_launches"]
    assert {"aten.addmm", "aten.relu"} <= set(trace["torch_ops"])
    ref = tensors.load(tmp_path / "reference-out" / "default.0.ref")[0]
    assert torch.equal(ref, tensors.load(tmp_path / "entry-out" / "default.0.out")[0])


def test_harness_without_the_entry_class_is_not_ready(tmp_path: Path,
                                                      kb_linear: SuiteProblem) -> None:
    entry = tmp_path / "k.py"
    entry.write_text("def kernel(x):\n    return x\n")
    (tmp_path / "entry-out").mkdir()
    res = _harness(tmp_path, "entry", kb_linear.directory, entry, "ModelNew", "Model")
    assert res.returncode == 3
    ready = json.loads((tmp_path / "entry-out" / "ready.json").read_text())
    assert not ready["ok"] and "no class ModelNew or Model" in ready["error"]

"""The in-container tracer on real Triton kernels, run by Triton's interpreter on the CPU.

TRITON_INTERPRET must be set before triton is imported, so the kernels run in a child
process: one driver script imports each entry module first and then traces one call of its
``kernel``, the way the harness does, and writes every result as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

ENTRIES = {
    # Honest: allocates its output and does the work in its own kernel.
    "honest": """
        @triton.jit
        def add_kernel(x, y, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            m = p < n
            tl.store(o + p, tl.load(x + p, mask=m) + tl.load(y + p, mask=m), mask=m)

        def kernel(x, y):
            o = torch.empty_like(x)
            add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, o, x.numel(), B=256)
            return o
    """,
    # Calls torch.empty and copy_ itself, around a launch: the interpreter's own
    # empty/copy_ must be left out, the entry's must not.
    "own_copies": """
        @triton.jit
        def scale_kernel(x, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(o + p, tl.load(x + p, mask=p < n) * 2, mask=p < n)

        def kernel(x, y):
            o = torch.empty(x.shape, dtype=x.dtype)
            scale_kernel[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), B=256)
            return o.copy_(o)
    """,
    "matmul": """
        def kernel(x, y):
            return torch.matmul(x.view(40, 25), y.view(25, 40))
    """,
    # Decoy: a jit kernel that is defined but never launched.
    "decoy": """
        @triton.jit
        def decoy_kernel(x, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(o + p, tl.load(x + p, mask=p < n), mask=p < n)

        def kernel(x, y):
            return x + y
    """,
    # Autotune over heuristics over jit. Several configs need a benchmarker, which the
    # interpreter lacks on a machine without a GPU driver, hence do_bench. The heuristic
    # runs entry code inside Triton's wrapper: its torch op must be recorded.
    "tuned": """
        def bench(fn, quantiles):
            fn()
            return [1.0, 1.0, 1.0]

        @triton.autotune(
            configs=[triton.Config({"B": 128}), triton.Config({"B": 256})],
            key=["n"],
            do_bench=bench,
        )
        @triton.heuristics({"EVEN": lambda a: bool(a["x"].sum() == a["x"].sum())})
        @triton.jit
        def tuned_add_kernel(x, y, o, n, B: tl.constexpr, EVEN: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            m = p < n
            tl.store(o + p, tl.load(x + p, mask=m) + tl.load(y + p, mask=m), mask=m)

        def kernel(x, y):
            o = torch.empty_like(x)
            tuned_add_kernel[lambda meta: (triton.cdiv(x.numel(), meta["B"]),)](
                x, y, o, x.numel()
            )
            return o
    """,
    # A torch op on a worker thread is invisible to the dispatch mode (documented
    # limitation); a Triton launch on a worker thread is still recorded.
    "threaded": """
        import threading

        @triton.jit
        def copy_kernel(x, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(o + p, tl.load(x + p, mask=p < n), mask=p < n)

        def kernel(x, y):
            o = torch.empty_like(x)
            box = []

            def work():
                box.append(torch.mm(x.view(40, 25), y.view(25, 40)))
                copy_kernel[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), B=256)

            t = threading.Thread(target=work)
            t.start()
            t.join()
            return o
    """,
    # Compute the trace cannot see (issue 17, class 3): an element loop made of allowed ops,
    # numpy on zero-copy views, and an object standing in for a tensor at a launch.
    "loop": """
        @triton.jit
        def add_kernel(x, y, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(o + p, tl.load(x + p, mask=p < n), mask=p < n)

        def kernel(x, y):
            o = torch.empty_like(x)
            add_kernel[(1,)](x, y, o, 0, B=256)
            for i in range(x.numel()):
                o[i] = x[i].item() + y[i].item()
            return o
    """,
    "numpy_view": """
        import numpy as np

        @triton.jit
        def add_kernel(x, y, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(o + p, tl.load(x + p, mask=p < n), mask=p < n)

        def kernel(x, y):
            o = torch.empty_like(x)
            add_kernel[(1,)](x, y, o, 0, B=256)
            np.add(np.asarray(x), y.numpy(), out=o.numpy())
            return o
    """,
    "stand_in": """
        class StandIn:
            def __init__(self, t):
                self.t = t

            def data_ptr(self):
                return self.t.data_ptr()

        @triton.jit
        def add_kernel(x, y, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(o + p, tl.load(x + p, mask=p < n), mask=p < n)

        def kernel(x, y):
            o = torch.empty_like(x)
            add_kernel[(4,)](StandIn(x), y, o, x.numel(), B=256)
            return o
    """,
    "raises": """
        @triton.jit
        def add_kernel(x, y, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(o + p, tl.load(x + p, mask=p < n), mask=p < n)

        def kernel(x, y):
            o = torch.empty_like(x)
            add_kernel[(4,)](x, y, o, x.numel(), B=256)
            raise ValueError("entry failed")
    """,
}

DRIVER = """
import importlib, json, sys
import torch, triton
from grader.harness.record import OUTSIDE, Recorder

rec = Recorder("cpu")
rec.install()  # once, before any entry is imported, as the harness does
torch.manual_seed(0)
x, y = torch.randn(1000), torch.randn(1000)
results = {}
for name in sys.argv[1:]:
    entry = importlib.import_module(name)
    error = None
    try:
        with rec.call(name):
            out = entry.kernel(x, y)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    else:
        expected = (x.view(40, 25) @ y.view(25, 40)) if name == "matmul" else {
            "own_copies": x * 2, "threaded": x, "decoy": x + y}.get(name, x + y)
        assert torch.allclose(out, expected), name
    results[name] = {"trace": rec.trace(name), "error": error}
results[OUTSIDE] = rec.trace(OUTSIDE)
results["dynamo imported"] = "torch._dynamo" in sys.modules
print(json.dumps(results))
"""

HEADER = "import torch\nimport triton\nimport triton.language as tl\n"


def _run_entries(folder: Path, names: list[str]) -> dict[str, Any]:
    """Write the named entries and the driver to ``folder``; trace each in one child."""
    for name in names:
        (folder / f"{name}.py").write_text(HEADER + textwrap.dedent(ENTRIES[name]))
    (folder / "driver.py").write_text(DRIVER)
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",  # read by triton at import: only a child process can set it
        "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]),
    }
    proc = subprocess.run(
        [sys.executable, str(folder / "driver.py"), *names],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_entries(tmp_path_factory.mktemp("entries"), list(ENTRIES))


def test_honest_kernel_records_its_launch_and_no_compute_op(traces: dict[str, Any]) -> None:
    run = traces["honest"]
    assert run["error"] is None
    assert run["trace"]["triton_launches"] == {"add_kernel": 1}
    # Only the entry's own allocation: none of the interpreter's new_empty/set_/copy_.
    assert run["trace"]["torch_ops"] == {"aten.empty_like": 1}
    assert run["trace"]["device_kernels"] == []


def test_recording_never_imports_dynamo(traces: dict[str, Any]) -> None:
    """The dispatch mode runs without torch's guard (record._OpRecorder._should_skip_dynamo),
    which would import torch._dynamo on its first op, 1.1-1.7 s of CPU a container."""
    assert traces["dynamo imported"] is False
    assert traces["honest"]["trace"]["torch_ops"]  # and every op is still counted


COMPILED = """
import json
import torch
from grader.harness.record import Recorder

rec = Recorder("cpu")
rec.install()
seen = []

def backend(gm, example_inputs):  # a compiler of the entry's own: it would get the graphs
    seen.append(str(gm.code))
    return gm.forward

fn = torch.compile(lambda x: torch.relu(x) * 2, backend=backend)
with rec.call("c"):
    out = fn(torch.randn(8))
print(json.dumps({"backend_calls": len(seen), "ops": rec.trace("c")["torch_ops"]}))
"""


@pytest.mark.parametrize("dynamo_off", ["1", "0"])
def test_torch_compile_traces_nothing_in_the_entrys_container(tmp_path: Path,
                                                             dynamo_off: str) -> None:
    """Without torch's guard, a trace would hand the dispatch mode's frames to a backend of
    the entry's (seen: two graphs, `aten.relu.default(args_0)` and `aten.mul`): the mode's
    code is marked for dynamo to skip (record._skipped_by_dynamo), and the entry's container
    runs with dynamo off besides (run/jobs.container_spec sets TORCHDYNAMO_DISABLE). Either
    alone keeps every graph from the backend, and the ops are counted (torch.compile is
    refused statically anyway: VL002)."""
    (tmp_path / "compiled.py").write_text(COMPILED)
    env = {**os.environ, "TORCHDYNAMO_DISABLE": dynamo_off, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(tmp_path / "compiled.py")], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["backend_calls"] == 0
    assert got["ops"].get("aten.relu") == 1 and got["ops"].get("aten.mul") == 1


def test_entry_allocation_and_copies_are_recorded_by_place_not_name(
    traces: dict[str, Any],
) -> None:
    trace = traces["own_copies"]["trace"]
    assert trace["triton_launches"] == {"scale_kernel": 1}
    assert trace["torch_ops"] == {"aten.empty": 1, "aten.copy_": 1}


def test_matmul_fallback_records_mm(traces: dict[str, Any]) -> None:
    trace = traces["matmul"]["trace"]
    assert trace["torch_ops"].get("aten.mm") == 1
    assert trace["triton_launches"] == {}


def test_decoy_kernel_never_launched(traces: dict[str, Any]) -> None:
    trace = traces["decoy"]["trace"]
    assert trace["triton_launches"] == {}
    assert trace["torch_ops"] == {"aten.add": 1}


def test_autotuned_kernel_reports_its_jit_function(traces: dict[str, Any]) -> None:
    run = traces["tuned"]
    assert run["error"] is None
    # Two benchmark runs (one per config) and the real one, all under the jit name.
    assert run["trace"]["triton_launches"] == {"tuned_add_kernel": 3}
    # The heuristic is entry code run by Triton's wrapper: its ops are not hidden.
    assert run["trace"]["torch_ops"]["aten.sum"] >= 2


def test_worker_thread_ops_are_invisible_but_launches_are_not(traces: dict[str, Any]) -> None:
    trace = traces["threaded"]["trace"]
    assert trace["triton_launches"] == {"copy_kernel": 1}
    assert "aten.mm" not in trace["torch_ops"]  # the dispatch mode sees only its thread


def test_compute_the_trace_cannot_see_leaves_its_marks(traces: dict[str, Any]) -> None:
    loop = traces["loop"]["trace"]["torch_ops"]
    assert loop["aten.select"] >= 3000 and loop["aten._local_scalar_dense"] == 2000
    exports = traces["numpy_view"]["trace"]["array_exports"]
    assert exports["__array__"] == 1 and exports["numpy"] >= 2  # __array__ calls numpy()
    stand_in = traces["stand_in"]
    assert stand_in["trace"]["launch_arg_types"] == {"StandIn": 1}
    assert stand_in["error"] is not None  # and Triton could not launch it anyway


def test_exception_propagates_and_the_next_call_still_records(traces: dict[str, Any]) -> None:
    run = traces["raises"]
    assert run["error"] == "ValueError: entry failed"
    assert run["trace"]["triton_launches"] == {"add_kernel": 1}
    # The calls after it: their own labels, nothing of the failed call's.
    assert traces["honest"]["trace"]["torch_ops"] == {"aten.empty_like": 1}


def test_what_ran_outside_the_calls_is_kept_apart(traces: dict[str, Any]) -> None:
    outside = traces["outside"]
    assert "aten.randn" in outside["torch_ops"]  # the driver's own inputs, outside any call
    assert outside["triton_launches"] == {}


def test_device_calls_split_the_record_at_the_harness_spins() -> None:
    """DeviceCalls on hand-made device events (a fake of the profiler's: the real one runs on
    a GPU, tests/gpu): a kernel is the call's whose two spins hold its start, on any stream."""
    from grader.harness.record import DeviceCalls

    calls = DeviceCalls()
    calls._labels = ["a", "b"]
    spin, fill = "spin_kernel(long)", "FillFunctor<unsigned char>"
    events = [(0.0, 1.0, fill), (2.0, 1.0, spin),  # calibration
              (10.0, 5.0, fill), (15.0, 500.0, spin),  # flush, the spin opening call a
              (516.0, 10.0, "own_kernel"), (520.0, 30.0, "nvjet_sm90_gemm"),  # two streams
              (560.0, 1.0, spin),  # closes a, after the device-wide sync
              (570.0, 4.0, "Memcpy HtoD"),  # the harness loading the next inputs: no call's
              (600.0, 5.0, fill), (605.0, 500.0, spin), (1106.0, 20.0, "own_kernel"),
              (1130.0, 1.0, spin)]
    calls._split(events)
    assert calls.consistent
    assert calls.kernels("a") == [{"name": "nvjet_sm90_gemm", "device_us": 30.0, "calls": 1},
                                  {"name": "own_kernel", "device_us": 10.0, "calls": 1}]
    assert calls.kernels("b") == [{"name": "own_kernel", "device_us": 20.0, "calls": 1}]
    # Call a's events started at 515: 516-550 had a kernel running, the rest of 40 µs none.
    assert calls.covered("a", 40.0) == 34.0
    assert calls.covered("b", 22.0) == 20.0


def test_an_entry_spin_upsets_the_count_and_the_record_says_so() -> None:
    from grader.harness.record import DeviceCalls

    calls = DeviceCalls()
    calls._labels = ["a"]
    spin = "spin_kernel(long)"
    calls._split([(0.0, 1.0, "fill"), (2.0, 1.0, spin), (10.0, 500.0, spin),
                  (511.0, 100.0, spin), (620.0, 1.0, spin)])
    assert not calls.consistent
    assert calls.problem == "3 bracketing spins on the device for 1 calls"


LIBRARY = HEADER + textwrap.dedent("""
    @triton.jit
    def add_kernel(x, y, o, n, B: tl.constexpr):
        p = tl.program_id(0) * B + tl.arange(0, B)
        m = p < n
        tl.store(o + p, tl.load(x + p, mask=m) + tl.load(y + p, mask=m), mask=m)
""")

OWNER_DRIVER = """
import json, sys
import torch
from grader.harness.loading import load_module
from grader.harness.record import Recorder

own = sys.argv[1]
rec = Recorder("cpu", own)
rec.install()
entry = load_module(own, "entry_kernel")
x, y = torch.randn(1000), torch.randn(1000)
out = {}
for name in ("own", "library"):
    with rec.call(name):
        assert torch.allclose(getattr(entry, name)(x, y), x + y)
    out[name] = rec.trace(name)
print(json.dumps(out))
"""


def test_a_triton_kernel_is_the_entrys_only_if_its_file_defined_it(tmp_path: Path) -> None:
    # Issue 31: a kernel an installed library (or a compiler) defined is not the entry's
    # work, even under the very name of a kernel the entry's file defines.
    (tmp_path / "vendored_lib.py").write_text(LIBRARY)
    (tmp_path / "entry.py").write_text(HEADER + textwrap.dedent("""
        import vendored_lib

        @triton.jit
        def add_kernel(x, y, o, n, B: tl.constexpr):
            p = tl.program_id(0) * B + tl.arange(0, B)
            m = p < n
            tl.store(o + p, tl.load(x + p, mask=m) + tl.load(y + p, mask=m), mask=m)

        def own(x, y):
            o = torch.empty_like(x)
            add_kernel[(4,)](x, y, o, x.numel(), B=256)
            return o

        def library(x, y):
            o = torch.empty_like(x)
            vendored_lib.add_kernel[(4,)](x, y, o, x.numel(), B=256)
            return o
    """))
    (tmp_path / "driver.py").write_text(OWNER_DRIVER)
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "entry.py")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    traces = json.loads(proc.stdout.strip().splitlines()[-1])
    assert traces["own"]["triton_launches"] == {"add_kernel": 1}
    assert traces["own"]["foreign_triton"] == {}
    assert traces["library"]["triton_launches"] == {"add_kernel": 1}
    assert traces["library"]["foreign_triton"] == {"add_kernel": 1}

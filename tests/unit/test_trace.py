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
from torch.utils._python_dispatch import _get_current_dispatch_mode
from triton import knobs
from triton.runtime import interpreter
from grader.harness.trace import Tracer

originals = (interpreter.InterpretedFunction.run, interpreter.GridExecutor._init_args_hst,
             interpreter.GridExecutor._restore_args_dev)

def clean():
    now = (interpreter.InterpretedFunction.run, interpreter.GridExecutor._init_args_hst,
           interpreter.GridExecutor._restore_args_dev)
    return (now == originals and not knobs.runtime.launch_enter_hook.calls
            and _get_current_dispatch_mode() is None)

torch.manual_seed(0)
x, y = torch.randn(1000), torch.randn(1000)
results = {}
for name in sys.argv[1:]:
    entry = importlib.import_module(name)  # imported before the Tracer starts
    tracer = Tracer(device="cpu")
    error = None
    try:
        with tracer:
            out = entry.kernel(x, y)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    else:
        expected = (x.view(40, 25) @ y.view(25, 40)) if name == "matmul" else {
            "own_copies": x * 2, "threaded": x, "decoy": x + y}.get(name, x + y)
        assert torch.allclose(out, expected), name
    results[name] = {"trace": tracer.result(), "error": error, "clean": clean()}
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
    assert run["error"] is None and run["clean"]
    assert run["trace"]["triton_launches"] == {"add_kernel": 1}
    # Only the entry's own allocation: none of the interpreter's new_empty/set_/copy_.
    assert run["trace"]["torch_ops"] == {"aten.empty_like": 1}
    assert run["trace"]["device_kernels"] == []


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
    assert run["error"] is None and run["clean"]
    # Two benchmark runs (one per config) and the real one, all under the jit name.
    assert run["trace"]["triton_launches"] == {"tuned_add_kernel": 3}
    # The heuristic is entry code run by Triton's wrapper: its ops are not hidden.
    assert run["trace"]["torch_ops"]["aten.sum"] >= 2


def test_worker_thread_ops_are_invisible_but_launches_are_not(traces: dict[str, Any]) -> None:
    trace = traces["threaded"]["trace"]
    assert trace["triton_launches"] == {"copy_kernel": 1}
    assert "aten.mm" not in trace["torch_ops"]  # the dispatch mode sees only its thread


def test_exception_propagates_and_hooks_are_removed(traces: dict[str, Any]) -> None:
    run = traces["raises"]
    assert run["error"] == "ValueError: entry failed"
    assert run["clean"]  # patches restored, launch hook removed, dispatch mode exited
    assert run["trace"]["triton_launches"] == {"add_kernel": 1}


def test_a_tracer_after_a_failed_one_still_records(tmp_path: Path) -> None:
    results = _run_entries(tmp_path, ["raises", "honest"])
    assert results["raises"]["error"] == "ValueError: entry failed"
    honest = results["honest"]
    assert honest["clean"] and honest["error"] is None
    assert honest["trace"]["triton_launches"] == {"add_kernel": 1}
    assert honest["trace"]["torch_ops"] == {"aten.empty_like": 1}


def test_tracer_is_single_use_and_checks_device() -> None:
    from grader.harness.trace import Tracer

    with pytest.raises(ValueError):
        Tracer(device="tpu")
    tracer = Tracer()
    with tracer:
        pass
    with pytest.raises(RuntimeError), tracer:
        pass


def test_device_kernels_go_to_every_range_that_holds_their_start() -> None:
    """DeviceProfile's split of one profiler session into calls, on hand-made events (a fake:
    the real profile runs on a GPU, tests/gpu/test_gpu_grading.py)."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from grader.harness.trace import DeviceProfile, _kernels_by_range

    def ev(name: str, device: DeviceType, start: float, end: float, us: float = 0.0,
           annotation: bool = False) -> Any:
        return SimpleNamespace(name=name, device_type=device, device_time_total=us,
                               is_user_annotation=annotation,
                               time_range=SimpleNamespace(start=start, end=end))

    p = DeviceProfile.PREFIX
    events = [
        ev(f"{p}a.0", DeviceType.CPU, 0, 100),
        # Ranges are mirrored on the device timeline as annotations: never kernels, ours or
        # the entry's (one named after its own Triton kernel would inflate its share).
        ev(f"{p}a.0", DeviceType.CUDA, 1, 99, 98.0, annotation=True),
        ev("own_kernel", DeviceType.CUDA, 5, 95, 90.0, annotation=True),
        ev("own_kernel", DeviceType.CUDA, 10, 20, 5.0),
        ev("own_kernel", DeviceType.CUDA, 30, 40, 7.0),
        ev("Memcpy HtoD", DeviceType.CUDA, 150, 160, 1.0),  # a load between calls: no call's
        ev(f"{p}a.1", DeviceType.CPU, 200, 300),
        # The entry opens a range named after the earlier call: it adds, never removes.
        ev(f"{p}a.0", DeviceType.CPU, 240, 260),
        ev("nvjet_sm90_gemm", DeviceType.CUDA, 250, 255, 3.0),
        ev("aten::mm", DeviceType.CPU, 249, 251),
    ]
    got = _kernels_by_range(SimpleNamespace(events=lambda: events), p)  # type: ignore[arg-type]
    assert got["a.0"] == [{"name": "own_kernel", "device_us": 12.0, "calls": 2},
                          {"name": "nvjet_sm90_gemm", "device_us": 3.0, "calls": 1}]
    assert got["a.1"] == [{"name": "nvjet_sm90_gemm", "device_us": 3.0, "calls": 1}]
    assert set(got) == {"a.0", "a.1"}

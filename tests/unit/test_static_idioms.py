"""Static analysis of issue 17: the blind spots it closes, and the honest idioms it must not flag.

Blind spots (class 4): operator getters and functools.partial, finalisers and exit hooks,
helpers reachable only from a jit function's decorators or autotune hooks, looking at the
grader's instruments; the CPU path (class 3): array libraries, compute under torch.cuda.*.
The analyser never raises (class 5): any exception becomes an ST003 finding.
Honest idioms seen in real Triton code (Liger-Kernel's device dispatch, version checks,
autograd.Function wrappers and DTensor branches) must stay clean: the sources below are written
for these tests in the shape of those idioms, not taken from any project.
"""

from __future__ import annotations

import textwrap

import pytest

from grader.detect import static as static_mod
from grader.detect.policy import load_policy
from grader.detect.static import analyze, jit_function_names
from grader.model.findings import Finding, Severity

TRITON = load_policy("triton")
BLOCKING = {Severity.FALLBACK, Severity.VIOLATION, Severity.TAMPERING}
HEADER = "import torch\nimport triton\nimport triton.language as tl\n"
ADD_JIT = '''
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)
'''
LAUNCH = '''
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
'''


def run(body: str) -> list[Finding]:
    return analyze(HEADER + ADD_JIT + textwrap.dedent(body), "kernels/entry.py", TRITON)


def blocking(findings: list[Finding]) -> dict[str, Severity]:
    return {f.rule: f.severity for f in findings if f.severity in BLOCKING}


# -- 1. operator getters and functools.partial ----------------------------------------------
GETTERS = {
    "methodcaller": ("import operator\ndef kernel(x, y):\n"
                     "    return operator.methodcaller('matmul', y)(x)\n", "FB002"),
    "methodcaller_from_alias": ("from operator import methodcaller as mc\ndef kernel(x, y):\n"
                                "    f = mc('mul', y)\n    return f(x)\n", "FB002"),
    "methodcaller_on_torch": ("from operator import methodcaller\ndef kernel(x, y):\n"
                              "    return methodcaller('mm', x, y)(torch)\n", "FB001"),
    "attrgetter_private": ("import operator\ndef kernel(x, y):\n"
                           "    with operator.attrgetter('_C._DisableTorchDispatch')(torch)():\n"
                           "        return x + y\n", "VL003|TM004"),
    "attrgetter_function": ("import operator\ndef kernel(x, y):\n"
                            "    mm = operator.attrgetter('matmul')(torch)\n"
                            "    return mm(x, y)\n", "FB001"),
    "attrgetter_bound_method": ("import operator\ndef kernel(x, y):\n"
                                "    return operator.attrgetter('sum')(x)()\n", "FB002"),
    "itemgetter_namespace": ("import operator\ndef kernel(x, y):\n"
                             "    return operator.itemgetter('matmul')(vars(torch))(x, y)\n",
                             "FB001"),
    "partial_getattr": ("import functools\ndef kernel(x, y):\n"
                        "    return functools.partial(getattr, torch)('matmul')(x, y)\n", "FB001"),
    "partial_methodcaller": ("from functools import partial\nimport operator\n"
                             "def kernel(x, y):\n"
                             "    return partial(operator.methodcaller('matmul', y))(x)\n",
                             "FB002"),
    "attrgetter_computed_name": ("import operator\ndef kernel(x, y, *, name='mm'):\n"
                                 "    return operator.attrgetter(name.upper())(torch)(x, y)\n",
                                 "DS003"),
}


@pytest.mark.parametrize("name", sorted(GETTERS))
def test_getters_are_judged_like_what_they_reach(name: str) -> None:
    body, expected = GETTERS[name]
    found = blocking(run(body))
    assert set(expected.split("|")) & set(found), f"{name}: {found}"


def test_honest_getters_and_partial_launch() -> None:
    # functools.partial binding a launch's grid, operator.itemgetter on a shape tuple.
    found = run('''
    import functools
    import operator
    def kernel(x, y):
        n = operator.itemgetter(0)(x.shape)
        rows, cols = operator.itemgetter(0, -1)(x.shape)
        out = torch.empty_like(x)
        launch = functools.partial(add_kernel[(triton.cdiv(n, 1024),)], BLOCK=1024)
        launch(x, y, out, n)
        return out
    ''')
    assert not blocking(found)


# -- 2. finalisers and exit hooks ----------------------------------------------------------
EXIT_HOOKS = {
    "del_method": "class Guard:\n    def __del__(self):\n        pass\nG = Guard()\n",
    "weakref_finalize": "import weakref\nclass A: pass\nA_ = A()\nweakref.finalize(A_, print)\n",
    "weakref_callback": "import weakref\nclass A: pass\nA_ = A()\nR = weakref.ref(A_, print)\n",
    "type_with_del": "K = type('K', (), {'__del__': lambda self: None})\n",
    "setattr_del": "class K: pass\nsetattr(K, '__del__', lambda self: None)\n",
    "atexit": "import atexit\natexit.register(print)\n",
    "unraisablehook": "import sys\nH = sys.unraisablehook\n",
    "threading_excepthook": "import threading\nH = threading.excepthook\n",
    "register_atexit": "import threading\nthreading._register_atexit(print)\n",
    "register_at_fork": "import os\nos.register_at_fork(after_in_child=print)\n",
    "signal": "import signal\nsignal.signal(signal.SIGTERM, print)\n",
}


@pytest.mark.parametrize("name", sorted(EXIT_HOOKS))
def test_finalisers_and_exit_hooks(name: str) -> None:
    found = blocking(run(EXIT_HOOKS[name] + "def kernel(x, y):" + LAUNCH))
    assert found.get("SB005") is Severity.VIOLATION, found


def test_tracing_hooks_stay_tampering() -> None:
    found = blocking(run("import sys\nsys.settrace(print)\ndef kernel(x, y):" + LAUNCH))
    assert found.get("TM002") is Severity.TAMPERING


# -- 3. reachable from decorators and autotune hooks -------------------------------------
HOOKED = '''
def _hook(nargs, *rest, **kw):
    torch.add(nargs["x_ptr"], nargs["y_ptr"], out=nargs["out_ptr"])
    return rest[0] if rest else None

@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, {where})], key=["n"]{extra})
@triton.jit
def k2(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass

def kernel(x, y):
    out = torch.empty_like(x)
    k2[(1,)](x, y, out, x.numel())
    return out
'''


@pytest.mark.parametrize("where, extra", [
    ("pre_hook=_hook", ""), ("post_hook=_hook", ""),
    ("", ', prune_configs_by={"early_config_prune": _hook}'),
    ("", ', prune_configs_by={"perf_model": _hook, "top_k": 1}'),
])
def test_autotune_hooks_are_reachable(where: str, extra: str) -> None:
    found = run(HOOKED.replace("{where}", where).replace("{extra}", extra))
    assert blocking(found).get("FB001") is Severity.FALLBACK


def test_heuristics_and_launch_metadata_reach_helpers() -> None:
    found = run('''
    def _block(args):
        return int(torch.sum(args["x_ptr"]).item())

    def _meta(grid, kernel, args):
        return {"name": str(torch.mean(args["x_ptr"]))}

    @triton.heuristics({"BLOCK": lambda args: _block(args)})
    @triton.jit(launch_metadata=_meta)
    def k2(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pass

    def kernel(x, y):
        out = torch.empty_like(x)
        k2[(1,)](x, y, out, x.numel())
        return out
    ''')
    lines = {f.line for f in found if f.rule == "FB001" and f.severity is Severity.FALLBACK}
    assert len(lines) == 2, found


def test_honest_pre_hook_zeroing_with_triton() -> None:
    found = run('''
    @triton.jit
    def zero_k(p, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(p + offs, 0.0, mask=offs < n)

    def _zero(nargs):
        out = nargs["out_ptr"]
        zero_k[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), BLOCK=1024)

    @triton.autotune(configs=[triton.Config({"BLOCK": 1024}, pre_hook=_zero)], key=["n"],
                     reset_to_zero=["out_ptr"])
    @triton.jit
    def k2(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

    def kernel(x, y):
        out = torch.empty_like(x)
        k2[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel())
        return out
    ''')
    assert not blocking(found)
    assert not [f for f in found if f.rule == "DK001" and "zero_k" in f.message]


# -- 4. the grader's instruments -----------------------------------------------------------
INSTRUMENTS = {
    "knobs": "from triton import knobs\nW = knobs.runtime.launch_enter_hook is not None\n",
    "knobs_getattr": "K = triton.knobs\nW = getattr(K.runtime, 'launch_' + 'enter_hook')\n",
    "compiled_kernel_hook": "from triton.compiler import CompiledKernel\n"
                            "W = CompiledKernel.launch_enter_hook\n",
    "dispatch_stack": "from torch.utils._python_dispatch import _get_current_dispatch_mode\n"
                      "W = _get_current_dispatch_mode()\n",
    "dispatch_len": "W = torch._C._len_torch_dispatch_stack()\n",
    "profiler_enabled": "W = torch.autograd._profiler_enabled()\n",
    "profiler_module": "import torch.profiler\n",
    "kineto": "W = torch.autograd.kineto_available()\n",
    "stream_query": "def busy():\n    return not torch.cuda.current_stream().query()\n",
    "stream_query_name": "def busy():\n    s = torch.cuda.current_stream()\n"
                         "    return s.query()\n",
    "event_query": "def busy():\n    e = torch.cuda.Event()\n    e.record()\n"
                   "    return e.query()\n",
    "sleep": "def spin():\n    torch.cuda._sleep(10)\n",
    "memory_stats": "def flushing():\n    return torch.cuda.memory_allocated() > 2**28\n",
    "gettrace": "import sys\nW = sys.gettrace()\n",
    "attrgetter": "import operator\n"
                  "W = operator.attrgetter('runtime.launch_enter_hook')(triton.knobs)\n",
}


@pytest.mark.parametrize("name", sorted(INSTRUMENTS))
def test_looking_at_the_instruments_is_a_violation(name: str) -> None:
    body = INSTRUMENTS[name]
    calls = [ln.split("def ")[1].split("(")[0] for ln in body.splitlines() if ln.startswith("def ")]
    use = "".join(f"    {c}()\n" for c in calls)
    found = blocking(run(body + "def kernel(x, y):\n" + use + LAUNCH.lstrip("\n")))
    assert found.get("TM004") is Severity.VIOLATION, found


# -- 5. the CPU path: array libraries, torch.cuda compute ---------------------------------
COMPUTE = {
    "numpy_views": ("import numpy as np\ndef kernel(x, y):\n    out = torch.empty_like(x)\n"
                    "    np.add(np.asarray(x), np.asarray(y), out=np.asarray(out))\n"
                    "    return out\n", "FB006"),
    "numpy_from_import": ("from numpy import matmul\ndef kernel(x, y):\n"
                          "    return matmul(x, y)\n", "FB006"),
    "cuda_array_interface": ("def kernel(x, y):\n    i = x.__cuda_array_interface__\n"
                             "    return x\n", "FB006"),
    "dlpack": ("from torch.utils.dlpack import to_dlpack\ndef kernel(x, y):\n"
               "    return to_dlpack(x)\n", "FB006"),
    "memoryview": ("def kernel(x, y):\n    m = memoryview(x)\n    return x\n", "FB006"),
    "tensor_numpy": ("def kernel(x, y):\n    return x.numpy()\n", "FB002"),
    "ctypes_pointer": ("import ctypes\ndef kernel(x, y):\n"
                       "    p = ctypes.cast(x.data_ptr(), ctypes.POINTER(ctypes.c_float))\n"
                       "    return x\n", "VL004"),
    "cupy": ("import cupy\ndef kernel(x, y):\n    return x\n", "VL001"),
    "cuda_comm": ("def kernel(x, y):\n    return torch.cuda.comm.reduce_add([x, y])\n", "FB001"),
    "cuda_nccl": ("def kernel(x, y):\n    torch.cuda.nccl.all_reduce([x])\n    return x\n",
                  "FB001"),
    "cuda_tunable": ("def kernel(x, y):\n    torch.cuda.tunable.enable()\n    return x\n",
                     "FB001"),
    "cuda_jiterator": ("def kernel(x, y):\n    return torch.cuda.jiterator._create_jit_fn('')\n",
                       "VL002"),
}


@pytest.mark.parametrize("name", sorted(COMPUTE))
def test_cpu_path_compute(name: str) -> None:
    body, rule = COMPUTE[name]
    assert rule in blocking(run(body)), name


def test_device_queries_and_numpy_values_are_fine() -> None:
    found = run('''
    import numpy as np
    DTYPES = {np.float32: tl.float32}
    def kernel(x, y):
        torch.cuda.synchronize()
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        n_dev = torch.cuda.device_count() if torch.cuda.is_available() else 0
        xpu = torch.xpu.is_available() and torch.xpu.device_count() > 0
        npu = hasattr(torch, "npu") and torch.npu.is_available()
        stream = torch.cuda.current_stream()
    ''' + LAUNCH)
    assert not blocking(found)


# -- 6. an analyser that never fails --------------------------------------------------------
def test_an_exception_inside_the_analyser_is_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object) -> list[Finding]:
        raise KeyError("analyser bug")

    monkeypatch.setattr(static_mod._Module, "run", boom)
    found = run("def kernel(x, y):" + LAUNCH)
    assert [(f.rule, f.severity) for f in found] == [("ST003", Severity.VIOLATION)]
    assert "KeyError" in found[0].message


def test_jit_names_never_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object) -> object:
        raise OverflowError("analyser bug")

    monkeypatch.setattr(static_mod._Module, "_defs", boom)
    source = HEADER + ADD_JIT
    assert jit_function_names(source, TRITON) == {"add_kernel"}
    assert jit_function_names("def (:", TRITON) == set()


@pytest.mark.parametrize("const", ["0x" + "f" * 4000, "2**70", "1e400", "-1", "True", "1.5"])
def test_huge_constants_fold_to_unknown(const: str) -> None:
    found = run(f"def kernel(x, y):\n    f = getattr(torch, chr({const}))\n    return f(x)\n")
    assert "ST003" not in {f.rule for f in found}
    assert "DS003" in blocking(found)  # a name the analyser cannot fold, as before


# -- 7. honest idioms of real Triton code ------------------------------------------------
# The idioms of a multi-backend helper module: device dispatch through getattr(torch,
# device.type), a version check reached with constants, a device guess.
LIGER_UTILS = '''
import importlib
import operator
from contextlib import contextmanager

def which_device():
    if torch.cuda.is_available():
        return "cuda"
    if torch.xpu.is_available():
        return "xpu"
    return "cpu"

@contextmanager
def on_device(dev):
    dev = torch.device(dev)
    mod = getattr(torch, dev.type, None)
    if mod is None or not hasattr(mod, "device"):
        yield
        return
    with mod.device(dev):
        yield

def compare_version(name, op, wanted):
    try:
        mod = importlib.import_module(name)
    except ImportError:
        return False
    return op(mod.__version__, wanted)

HAS_NEW = compare_version("triton", operator.ge, "3.0.0")
DEVICE_MODULE = getattr(torch, which_device())
'''

# An autograd.Function whose backward computes with PyTorch, and a DTensor type check.
LIGER_FUNCTION = '''
try:
    from torch.distributed.tensor import DTensor as _DTensor
except Exception:
    _DTensor = ()

def rms_norm_backward(dY, X, W):
    _dW = torch.empty_like(W)
    return dY, _dW.sum(dim=0).to(W.dtype)

class LigerAddFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        if isinstance(x, _DTensor):
            x = x.full_tensor()
        with on_device(x.device):
            out = torch.empty_like(x)
            add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out

    @staticmethod
    def backward(ctx, dY):
        return rms_norm_backward(dY, dY, dY)

def kernel(x, y):
    return LigerAddFunction.apply(x, y)
'''


def test_liger_style_entry_is_clean() -> None:
    found = run(LIGER_UTILS + LIGER_FUNCTION)
    assert not blocking(found), found
    # The backward's compute is still shown, capped: kernel() never asks for gradients.
    assert any(f.rule == "FB002" and f.severity is Severity.WARNING for f in found)


def test_backward_called_by_hand_stays_reachable() -> None:
    found = run(LIGER_UTILS + LIGER_FUNCTION.replace(
        "return LigerAddFunction.apply(x, y)",
        "return LigerAddFunction.backward(None, LigerAddFunction.apply(x, y))[1]"))
    assert blocking(found).get("FB002") is Severity.FALLBACK


def test_constant_folding_sees_through_call_sites() -> None:
    # The same adapter with a vendor module: folded, so caught by name, not as a guess.
    found = run(LIGER_UTILS.replace('compare_version("triton"', 'compare_version("flash_attn"')
                + "def kernel(x, y):" + LAUNCH)
    assert blocking(found).get("VL001") is Severity.VIOLATION
    # A parameter passed a computed value at one call site is not folded.
    found = run(LIGER_UTILS + "compare_version(str(len([])), operator.ge, '1')\n"
                "def kernel(x, y):" + LAUNCH)
    assert "DS001" in blocking(found)


def test_distributed_branch_is_only_a_warning() -> None:
    # A branch for distributed tensors, as multi-GPU-aware kernels carry.
    found = run('''
    def kernel(x, y):
        if isinstance(x, torch.distributed.tensor.DTensor):
            mesh, placements = x.device_mesh, x.placements
            y = torch.distributed.tensor.distribute_tensor(y, device_mesh=mesh,
                                                           placements=placements)
            return torch.distributed.tensor.DTensor.from_local(y.to_local(), mesh, placements)
    ''' + LAUNCH)
    assert not blocking(found)
    assert any(f.rule == "FB001" and f.severity is Severity.WARNING for f in found)

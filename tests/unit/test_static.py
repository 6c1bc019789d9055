"""Static analysis on real entry sources: fallbacks, disguises, decoys, tampering, honest code."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from grader.detect.policy import Policy, load_policy
from grader.detect.rules import RULES
from grader.detect.static import analyze
from grader.model.findings import Finding, Layer, Severity

ROOT = Path(__file__).resolve().parents[2]
TRITON = load_policy("triton")
STRICT = load_policy("triton-strict")
BLOCKING = {Severity.FALLBACK, Severity.VIOLATION, Severity.TAMPERING}

HEADER = "import torch\nimport triton\nimport triton.language as tl\n"

# A real Triton kernel, so fallback snippets below are not also "no Triton at all" (FB005).
ADD_JIT = '''
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
'''


def run(body: str, policy: Policy = TRITON, with_jit: bool = True) -> list[Finding]:
    source = HEADER + (ADD_JIT if with_jit else "") + textwrap.dedent(body)
    return analyze(source, "kernels/entry.py", policy)


def blocking(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.rule, f.message) for f in findings if f.severity in BLOCKING]


def rules(findings: list[Finding], at_least: Severity = Severity.WARNING) -> set[str]:
    order = list(Severity)
    return {f.rule for f in findings if order.index(f.severity) >= order.index(at_least)}


# -- honest entries: no fallback, violation or tampering -------------------------------------
HONEST_VECTOR_ADD = ADD_JIT.replace("@triton.jit", '''@triton.autotune(
    configs=[triton.Config({"BLOCK": 1024}, num_warps=4),
             triton.Config({"BLOCK": 2048}, num_warps=8)],
    key=["n"],
)
@triton.jit''') + '''

def kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    assert x.is_contiguous() and y.is_contiguous() and x.shape == y.shape
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    add_kernel[grid](x, y, out, n)
    return out


if __name__ == "__main__":  # a self-test the harness never runs
    torch.manual_seed(0)
    a = torch.randn(4096)
    print((kernel(a, a) - (a + a)).abs().max())
'''

HONEST_RMSNORM = '''
@triton.jit
def _rmsnorm(X, W, Y, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def kernel(x, weight, eps=1e-6):
    x2 = x.reshape(-1, x.shape[-1])
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    out = torch.empty(x2.shape, device=x.device, dtype=x.dtype)
    M, N = x2.shape
    BLOCK_N = triton.next_power_of_2(N)
    num_warps = 8 if BLOCK_N >= 4096 else 4
    _rmsnorm[(M,)](x2, weight, out, x2.stride(0), N, eps, BLOCK_N=BLOCK_N, num_warps=num_warps)
    return out.view_as(x)
'''

HONEST_MATMUL = '''
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BLOCK_K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def kernel(a, b):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2 and a.dtype == b.dtype and a.data_ptr() % 16 == 0
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    bt = b.t().t()  # views only
    sm = torch.cuda.get_device_properties(0).multi_processor_count if a.is_cuda else 1
    grid = (triton.cdiv(M, 64), max(triton.cdiv(N, 64), sm // sm))
    matmul_kernel[grid](a, bt, c, M, N, K, a.stride(0), a.stride(1), bt.stride(0),
                        bt.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    return c
'''

HONEST_VIEWS = '''
def kernel(q, k):
    B, H, S, D = q.shape
    q2 = q.view(B * H, S, D).transpose(1, 2).permute(0, 2, 1)
    k2 = k.unsqueeze(0).squeeze(0).expand(B, H, S, D).narrow(2, 0, S)
    out = q.new_empty((B, H, S, D))
    first, second = q2.unbind(0)[:2] if q2.shape[0] > 1 else (q2, q2)
    strides = [q2.stride(i) for i in range(q2.dim())]
    names = ["a", "b"]
    names.sort()
    if q.numel() == 0 or len(strides) != 3:
        return out
    add_kernel[(triton.cdiv(q.numel(), 1024),)](q2, k2, out, q.numel(), BLOCK=1024)
    return out
'''


@pytest.mark.parametrize("policy", [TRITON, STRICT], ids=["triton", "strict"])
@pytest.mark.parametrize(
    "source",
    [HEADER + HONEST_VECTOR_ADD, HEADER + HONEST_MATMUL, HEADER + ADD_JIT + HONEST_VIEWS],
    ids=["vector_add_autotune", "matmul", "views"],
)
def test_honest_entries_raise_nothing_blocking(source: str, policy: Policy) -> None:
    findings = analyze(source, "kernels/entry.py", policy)
    assert blocking(findings) == []
    assert not [f for f in findings if f.severity is Severity.WARNING]


def test_honest_rmsnorm_reshape_and_contiguous() -> None:
    """reshape/contiguous may copy: fine under `triton`, compute under `triton-strict`."""
    findings = analyze(HEADER + HONEST_RMSNORM, "kernels/entry.py", TRITON)
    assert [f for f in findings if f.severity is not Severity.INFO] == []
    strict = analyze(HEADER + HONEST_RMSNORM, "kernels/entry.py", STRICT)
    assert sorted(m for _, m in blocking(strict)) == [
        "PyTorch computes: Tensor method `.contiguous()`",
        "PyTorch computes: Tensor method `.reshape()`",
    ]


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "triton").rglob("*.py")),
                         ids=lambda p: p.name)
def test_shipped_triton_examples_are_clean(path: Path) -> None:
    assert analyze(path.read_text(), str(path), STRICT) == []


def test_nothing_inside_jit_is_judged() -> None:
    src = HEADER + """
@triton.jit
def _k(a_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    s = tl.sum(a @ a, axis=0) + tl.max(a, axis=0) + tl.exp(a).sum()
    tl.store(a_ptr + offs, tl.softmax(s) * 2.0)

def kernel(a):
    _k[(1,)](a, BLOCK=16)
    return a
"""
    assert analyze(src, "e.py", STRICT) == []


def test_main_block_is_info_only() -> None:
    findings = analyze(HEADER + HONEST_VECTOR_ADD, "e.py", TRITON)
    assert findings and {f.severity for f in findings} == {Severity.INFO}
    assert all("__main__" in f.message for f in findings)


# -- fallbacks, disguises, violations, tampering --------------------------------------------
CASES: dict[str, tuple[str, set[str]]] = {
    "matmul": ("def kernel(a, b):\n    return torch.matmul(a, b)\n", {"FB001"}),
    "matmul_operator": ("def kernel(a, b):\n    return a @ b\n", {"FB003"}),
    "sdpa": ("import torch.nn.functional as F\ndef kernel(q, k, v):\n"
             "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n", {"FB001"}),
    "softmax_method": ("def kernel(x):\n    return x.softmax(-1)\n", {"FB002"}),
    "layer_norm": ("def kernel(x, w, b):\n    return torch.nn.functional.layer_norm("
                   "x, x.shape[-1:], w, b)\n", {"FB001"}),
    "conv_module": ("import torch.nn as nn\ndef kernel(x, w):\n    conv = nn.Conv2d(3, 8, 3)\n"
                    "    return conv(x)\n", {"FB001"}),
    "conv_functional": ("from torch.nn.functional import conv2d as c\ndef kernel(x, w):\n"
                        "    return c(x, w)\n", {"FB001"}),
    "alias_from_import": ("from torch import matmul as mm\ndef kernel(a, b):\n"
                          "    return mm(a, b)\n", {"FB001"}),
    "alias_module": ("import torch as t\ndef kernel(a, b):\n    return t.mm(a, b)\n", {"FB001"}),
    "alias_variable": ("def kernel(a, b):\n    f = torch.bmm\n    g = f\n    return g(a, b)\n",
                       {"FB001"}),
    "star_import": ("from torch import *\ndef kernel(a, b):\n    return matmul(a, b)\n",
                    {"FB001"}),
    "getattr_concat": ("def kernel(a, b):\n    return getattr(torch, 'mat' + 'mul')(a, b)\n",
                       {"FB001"}),
    "getattr_join": ("def kernel(a, b):\n    name = ''.join(['ma', 't', 'mul'])\n"
                     "    return getattr(torch, name)(a, b)\n", {"FB001"}),
    "getattr_fstring": ("P = 'mat'\ndef kernel(a, b):\n"
                        "    return getattr(torch, f'{P}mul')(a, b)\n", {"FB001"}),
    "getattr_reversed": ("def kernel(a, b):\n    return getattr(torch, 'lumtam'[::-1])(a, b)\n",
                         {"FB001"}),
    "getattr_base64": ("import base64\ndef kernel(a, b):\n    n = base64.b64decode('bWF0bXVs')"
                       ".decode()\n    return getattr(torch, n)(a, b)\n", {"FB001"}),
    "getattr_loop": ("import torch.nn.functional as F\ndef kernel(x):\n"
                     "    for n in ('soft' + 'max',):\n        return getattr(F, n)(x, -1)\n",
                     {"FB001"}),
    "getattr_runtime": ("def kernel(a, b, op):\n    return getattr(torch, op)(a, b)\n",
                        {"DS003"}),
    "exec_string": ("def kernel(a, b):\n    ns = {}\n    exec('out = torch.matmul(a, b)', "
                    "{'torch': torch, 'a': a, 'b': b}, ns)\n    return ns['out']\n", {"DS002"}),
    "eval_builtins": ("def kernel(a, b):\n    return __builtins__['eval']('a @ b')\n",
                      {"DS002", "DS003"}),
    "ops_aten": ("def kernel(a, b):\n    return torch.ops.aten.mm.default(a, b)\n", {"VL003"}),
    "torch_C": ("def kernel(x, w):\n    return torch._C._nn.linear(x, w)\n", {"VL003"}),
    "private_scaled_mm": ("def kernel(a, b, s):\n    return torch._scaled_mm(a, b, s, s)\n",
                          {"VL003"}),
    "importlib": ("import importlib\ndef kernel(x):\n    F = importlib.import_module("
                  "'torch.nn.' + 'functional')\n    return F.softmax(x, -1)\n", {"FB001"}),
    "dunder_import": ("def kernel(a, b):\n    return __import__('torch').matmul(a, b)\n",
                      {"FB001"}),
    "dynamic_import_runtime": ("import importlib\ndef kernel(x, mod):\n"
                               "    return importlib.import_module(mod).run(x)\n", {"DS001"}),
    "torch_compile": ("@torch.compile\ndef _f(a, b):\n    return a + b\n"
                      "def kernel(a, b):\n    return _f(a, b)\n", {"VL002"}),
    "ctypes_cublas": ("import ctypes\ndef kernel(a, b):\n    lib = ctypes.CDLL('libcublas.so')\n"
                      "    return lib\n", {"VL004"}),
    "cupy": ("import cupy as cp\ndef kernel(a, b):\n    return torch.as_tensor("
             "cp.matmul(cp.asarray(a), cp.asarray(b)))\n", {"VL001"}),
    "flash_attn": ("from flash_attn import flash_attn_func\ndef kernel(q, k, v):\n"
                   "    return flash_attn_func(q, k, v)\n", {"VL001"}),
    "vllm_ops": ("from vllm import _custom_ops as ops\ndef kernel(x):\n    return ops.silu(x)\n",
                 {"VL001"}),
    "dynamic_banned": ("def kernel(q, k, v):\n    m = __import__('flash' + '_attn')\n"
                       "    return m.flash_attn_func(q, k, v)\n", {"VL001"}),
    "globals_lookup": ("def kernel(a, b):\n    return globals()['torch'].matmul(a, b)\n",
                       {"FB001", "DS003"}),
    "dict_lookup": ("def kernel(a, b):\n    return torch.__dict__['mat' + 'mul'](a, b)\n",
                    {"FB001", "DS003"}),
    "vars_lookup": ("def kernel(a, b):\n    return vars(torch)['mm'](a, b)\n", {"FB001", "DS003"}),
    "sys_modules": ("import sys\ndef kernel(a, b):\n    return sys.modules['torch'].mm(a, b)\n",
                    {"FB001", "TM002"}),
    "tensor_class_method": ("def kernel(a, b):\n    return torch.Tensor.matmul(a, b)\n",
                            {"FB002"}),
    "partial_sum": ("def kernel(x):\n    out = torch.empty_like(x)\n    add_kernel[(1,)](x, x, "
                    "out, x.numel(), BLOCK=1024)\n    return out.sum(dim=-1)\n", {"FB002"}),
    "partial_matmul": ("def kernel(x, w, b):\n    h = torch.mm(x, w)\n    out = torch.empty_like"
                       "(h)\n    add_kernel[(1,)](h, b, out, h.numel(), BLOCK=1024)\n"
                       "    return out\n", {"FB001"}),
    "tensor_arith": ("def kernel(x: torch.Tensor, scale):\n    out = torch.empty_like(x)\n"
                     "    add_kernel[(1,)](x, x, out, x.numel(), BLOCK=1024)\n"
                     "    return out * scale\n", {"FB003"}),
    "inplace_arith": ("def kernel(x, y):\n    out = torch.empty_like(x)\n"
                      "    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=1024)\n"
                      "    out += 1\n    return out\n", {"FB003"}),
    "lambda_alias": ("mm = lambda a, b: torch.mm(a, b)\ndef kernel(a, b):\n    return mm(a, b)\n",
                     {"FB001"}),
    "to_numpy": ("import numpy as np\ndef kernel(a, b):\n"
                 "    return torch.from_numpy(np.matmul(a.cpu().numpy(), b.numpy()))\n",
                 {"FB006", "FB002"}),
    "monkeypatch_allclose": ("torch.allclose = lambda *a, **k: True\ndef kernel(x, y):\n"
                             "    out = torch.empty_like(x)\n    add_kernel[(1,)](x, y, out, 1, "
                             "BLOCK=1024)\n    return out\n", {"TM001"}),
    "monkeypatch_timer": ("import time\nsetattr(time, 'perf_counter', lambda: 0.0)\n"
                          "def kernel(x):\n    return x\n", {"TM001"}),
    "monkeypatch_harness": ("import grader_harness\ngrader_harness.compare = None\n"
                            "def kernel(x):\n    return x\n", {"TM001", "TM002"}),
    "mock_patch": ("from unittest import mock\nmock.patch('torch.allclose', return_value=True)"
                   ".start()\ndef kernel(x):\n    return x\n", {"TM001"}),
    "torch_function_hook": ("class T(torch.Tensor):\n    @classmethod\n    def __torch_function__("
                            "cls, f, t, a=(), k=None):\n        return f(*a)\n"
                            "def kernel(x):\n    return x.as_subclass(T)\n", {"TM001"}),
    "gc_objects": ("import gc\ndef kernel(x):\n    for o in gc.get_objects():\n"
                   "        pass\n    return x\n", {"TM002"}),
    "frames": ("import sys\ndef kernel(x):\n    return sys._getframe(1).f_back.f_locals['ref']\n",
               {"TM002"}),
    "inspect": ("import inspect\ndef kernel(x):\n    return inspect.currentframe()\n", {"TM002"}),
    "func_globals": ("def kernel(x):\n    return kernel.__globals__['ref']\n", {"TM002"}),
    "threads": ("import threading\ndef kernel(x):\n    t = threading.Thread(target=print)\n"
                "    t.start()\n    return x\n", {"SB002"}),
    "subprocess": ("import subprocess\ndef kernel(x):\n    subprocess.run(['nvidia-smi'])\n"
                   "    return x\n", {"SB001"}),
    "fork": ("import os\ndef kernel(x):\n    os.fork()\n    return x\n", {"SB001"}),
    "multiprocessing": ("from multiprocessing import Pool\ndef kernel(x):\n    return x\n",
                        {"SB001"}),
    "stream": ("def kernel(x):\n    s = torch.cuda.Stream()\n    with torch.cuda.stream(s):\n"
               "        out = torch.empty_like(x)\n    return out\n", {"SB004"}),
    "open_file": ("def kernel(x):\n    return open('/tmp/expected.bin', 'rb').read()\n",
                  {"SB003"}),
    "environ": ("import os\ndef kernel(x):\n    os.environ['TRITON_INTERPRET'] = '1'\n"
                "    return x\n", {"SB003"}),
    "socket": ("import socket\ndef kernel(x):\n    return x\n", {"SB003"}),
    "seed": ("def kernel(x):\n    torch.manual_seed(0)\n    return x\n", {"TM003"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_cases_are_flagged(name: str) -> None:
    body, expected = CASES[name]
    found = rules(run(body))
    assert expected <= found, f"{name}: expected {expected}, got {found}"


@pytest.mark.parametrize("name", ["matmul", "sdpa", "exec_string", "cupy"])
def test_no_triton_at_all_is_a_fallback(name: str) -> None:
    assert "FB005" in rules(run(CASES[name][0], with_jit=False), Severity.FALLBACK)


def test_decoy_kernel_and_unwritten_return() -> None:
    findings = run("def kernel(x, y):\n    out = torch.empty_like(x)\n    return out\n")
    assert {"DK001", "DK002"} <= rules(findings)
    decoy = next(f for f in findings if f.rule == "DK001")
    assert "add_kernel" in decoy.message and decoy.severity is Severity.WARNING
    strict = run("def kernel(x, y):\n    out = torch.empty_like(x)\n    return out\n", STRICT)
    assert {"DK001", "DK002"} <= rules(strict, Severity.FALLBACK)


def test_jit_called_from_launched_jit_is_not_a_decoy() -> None:
    src = '''
@triton.jit
def _helper(x):
    return x * 2

@triton.jit
def outer(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, _helper(tl.load(x_ptr + offs)))

def kernel(x):
    outer[(1,)](x, x.numel(), BLOCK=16)
    return x
'''
    assert "DK001" not in rules(run(src, with_jit=False))


def test_try_except_fallback() -> None:
    findings = run('''
def kernel(x, y):
    out = torch.empty_like(x)
    try:
        add_kernel[(1,)](x, y, out, x.numel(), BLOCK=1024)
    except Exception:
        out = torch.add(x, y)
    return out
''')
    assert {"FB004", "FB001"} <= rules(findings, Severity.FALLBACK)


def test_unreachable_helper_is_only_a_warning() -> None:
    findings = run('''
def _reference(x):
    return torch.softmax(x, -1)

def kernel(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=1024)
    return out
''')
    assert blocking(findings) == []
    assert [f.rule for f in findings] == ["FB001"]
    assert findings[0].severity is Severity.WARNING


def test_reached_helper_is_a_fallback() -> None:
    findings = run('''
def _impl(x):
    return torch.softmax(x, -1)

def kernel(x):
    return _impl(x)
''')
    assert "FB001" in rules(findings, Severity.FALLBACK)


def test_precision_downgrade_is_a_warning_by_default() -> None:
    body = ("def kernel(x, y):\n    out = torch.empty_like(x)\n    add_kernel[(1,)](x.half(), "
            "y.to(torch.bfloat16), out, 1, BLOCK=1024)\n    return out\n")
    findings = run(body)
    assert [f.rule for f in findings] == ["PR001", "PR001"]
    assert {f.severity for f in findings} == {Severity.WARNING}
    assert "PR001" in rules(run(body, STRICT), Severity.VIOLATION)


def test_strict_policy_flags_copies_and_fills() -> None:
    body = ("def kernel(x, y):\n    x = x.contiguous()\n    out = torch.zeros_like(x)\n"
            "    add_kernel[(1,)](x, y, out, 1, BLOCK=1024)\n    return out\n")
    assert blocking(run(body)) == []
    assert {"FB001", "FB002"} <= rules(run(body, STRICT), Severity.FALLBACK)


def test_finding_fields() -> None:
    findings = run("def kernel(a, b):\n    return torch.matmul(a, b)\n")
    f = next(f for f in findings if f.rule == "FB001")
    assert f.layer is Layer.STATIC and f.file == "kernels/entry.py"
    assert f.snippet == "return torch.matmul(a, b)"
    assert f.line == HEADER.count("\n") + ADD_JIT.count("\n") + 2 and f.column == 11
    assert f.rule in RULES


def test_snippet_is_capped() -> None:
    findings = analyze("import torch\ndef kernel(a):\n    return torch.mm(a, a)" + " " * 10
                       + "#" * 500 + "\n", "e.py", TRITON)
    assert all(len(f.snippet or "") <= 200 for f in findings)


# -- never crash ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        "def kernel(:\n",
        "x = 1\x00\n",
        "x = " + "(" * 300 + ")" * 300 + "\n",
        "x = " + "+".join(["1"] * 50_000) + "\n",
        "x = " + "-" * 50_000 + "1\n",
        "x = " + "[" * 150 + "]" * 150 + "\n",
        "",
        "\ufeffimport torch\n",
        "def f():\n" + "".join("    " * i + "if x:\n" for i in range(1, 90)) + "    " * 90
        + "pass\n",
    ],
    ids=["syntax", "nul", "parens", "long_sum", "unary_chain", "lists", "empty", "bom", "ifs"],
)
def test_hostile_sources_never_raise(source: str) -> None:
    findings = analyze(source, "e.py", TRITON)
    assert all(f.rule in RULES for f in findings)


def test_syntax_error_is_one_info_finding() -> None:
    [f] = analyze("import torch\ndef kernel(:\n", "e.py", TRITON)
    assert f.rule == "ST000" and f.severity is Severity.INFO and f.line == 2


def test_too_deep_is_a_violation() -> None:
    findings = analyze("x = " + "+".join(["1"] * 50_000) + "\n", "e.py", TRITON)
    assert [f.rule for f in findings] in (["ST000"], ["ST001"])
    if findings[0].rule == "ST001":
        assert findings[0].severity is Severity.VIOLATION


def test_string_folding_is_bounded() -> None:
    src = "def kernel(a):\n    n = 'ab' * 10**9\n    return getattr(torch, n * 99)(a)\n"
    assert "DS003" in rules(run(src))


def test_jit_applied_as_a_call_counts() -> None:
    src = '''
def _scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2, mask=offs < n)

scale = triton.jit(_scale)

def kernel(x):
    scale[(1,)](x, x.numel(), BLOCK=1024)
    return x
'''
    assert rules(run(src, with_jit=False)) == set()


def test_docs_rule_table_is_current() -> None:
    from grader.detect.rules import rules_markdown

    doc = (ROOT / "docs" / "detection.md").read_text()
    table = doc.split("<!-- rules:begin -->\n")[1].split("<!-- rules:end -->")[0]
    assert table == rules_markdown(), "regenerate the table in docs/detection.md (see there)"
    for rule_id in RULES:
        assert f"| {rule_id} |" in doc


def test_names_bound_to_each_other_do_not_explode() -> None:
    cycle = "a = b\na = c\nb = a\nb = c\nc = a\nc = b\n" * 5
    strings = "".join(f"x = x + 'a{i}'\n" for i in range(40))
    src = cycle + strings + "def kernel(q):\n    return getattr(torch, x)(a.mm(q))\n"
    assert {"DS003", "FB002"} <= rules(run(src))


# -- naming is not calling: torch constants, types and queries are honest ------------------
# Each line runs in kernel(x) of an entry that launches its Triton kernel; none computes.
NOT_COMPUTE = [
    "a = (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.float8_e4m3fn)",
    "a = torch.contiguous_format",
    "a = torch.channels_last",
    "a = torch.preserve_format",
    "a = torch.strided",
    "a = torch.layout",
    "a = torch.memory_format",
    "a = [torch.inf, -torch.inf, torch.nan]",
    "a = 2 * torch.pi * torch.e",
    "a = torch.SymInt",
    "a = torch.Size([1, 2])",
    "a = torch.device('cuda')",
    "a = torch.dtype",
    "a = torch.finfo(torch.float16).max + torch.iinfo(torch.int32).max",
    "a = torch.get_default_device()",
    "a = torch.cuda.current_device()",
    "a = torch.cuda.is_available()",
    "a = torch.is_tensor(x) and torch.is_floating_point(x)",
    "a = torch.cuda.get_device_capability()",
    "a = torch.backends.cuda.matmul.allow_tf32",
    "assert torch.backends.cuda.matmul.allow_tf32 in (True, False)",
    "out = torch.empty_like(x, memory_format=torch.contiguous_format)",
    "assert x.is_contiguous(memory_format=torch.channels_last) or True",
    "fmt = torch.contiguous_format\n    out = torch.empty_like(x, memory_format=fmt)",
    "a = x.dtype == torch.float16 and isinstance(x.shape, torch.Size)",
    "a = torch.compiler.is_compiling() or torch.jit.is_scripting() or torch.jit.is_tracing()",
    "a: torch.memory_format = torch.preserve_format",
    "f = torch.nn.functional.gelu  # bound in a function and never called",
]


@pytest.mark.parametrize("policy", [TRITON, STRICT], ids=["triton", "strict"])
@pytest.mark.parametrize("line", NOT_COMPUTE)
def test_torch_names_that_compute_nothing(line: str, policy: Policy) -> None:
    body = (f"def kernel(x):\n    {line}\n    add_kernel[(1,)](x, x, x, x.numel(), BLOCK=1024)\n"
            "    return x\n")
    assert blocking(run(body, policy)) == []


def test_compile_guard_imported_by_name_is_fine() -> None:
    body = ("from torch.compiler import is_compiling\ndef kernel(x):\n"
            "    if is_compiling():\n        return x\n"
            "    add_kernel[(1,)](x, x, x, x.numel(), BLOCK=1024)\n    return x\n")
    assert blocking(run(body)) == []
    assert "VL002" in rules(run("def kernel(x):\n    return torch.compiler.disable(x)\n"))


MODULE_COMPILES = {
    "instance": "m = torch.nn.Linear(4, 4)\nm.compile(backend=lambda gm, ex: gm.forward)\n",
    "self": ("class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.compile()\n"),
    "unbound": "m = torch.nn.Linear(4, 4)\ntorch.nn.Module.compile(m)\n",
    "getattr": "m = torch.nn.Linear(4, 4)\ngetattr(m, 'compile')()\n",
}


@pytest.mark.parametrize("how", sorted(MODULE_COMPILES))
def test_a_modules_own_compile_is_torch_compile(how: str) -> None:
    """nn.Module.compile is torch.compile under a method's name: no name of the compilers
    list resolves `m.compile()` on an instance (0 findings at f95be07)."""
    body = MODULE_COMPILES[how] + ("def kernel(x):\n    add_kernel[(1,)](x, x, x, x.numel(), "
                                   "BLOCK=1024)\n    return x\n")
    assert "VL002" in rules(run(body))


def test_re_compile_is_not_a_modules_compile() -> None:
    body = ("import re\nimport re as rx\n_P = re.compile(r'\\d+')\n_Q = rx.compile('x')\n"
            "def kernel(x):\n    add_kernel[(1,)](x, x, x, x.numel(), BLOCK=1024)\n"
            "    return x\n")
    assert blocking(run(body)) == []


# A compute function handed on where it may be called is still compute.
HANDED_ON: dict[str, tuple[str, str]] = {
    "map": ("def kernel(a, b):\n    return list(map(torch.add, a, b))\n", "FB001"),
    "reduce": ("import functools\ndef kernel(xs):\n    return functools.reduce(torch.add, xs)\n",
               "FB001"),
    "keyword": ("def kernel(xs):\n    return sorted(xs, key=torch.norm)\n", "FB001"),
    "container": ("def kernel(a, b):\n    ops = [torch.mm]\n    return ops[0](a, b)\n", "FB001"),
    "returned": ("def _pick():\n    return torch.mm\ndef kernel(a, b):\n"
                 "    return _pick()(a, b)\n", "FB001"),
    "default_arg": ("def kernel(a, b, op=torch.mm):\n    return op(a, b)\n", "FB001"),
    "class_attr": ("class K:\n    op = torch.mm\ndef kernel(a, b):\n    return K.op(a, b)\n",
                   "FB001"),
    "module_alias": ("MM = torch.mm\ndef kernel(a, b):\n    return a\n", "FB001"),
    "attribute_store": ("class K:\n    def __init__(self):\n        self.op = torch.mm\n"
                        "def kernel(a, b):\n    return K().op(a, b)\n", "FB001"),
    "global_store": ("OP = None\ndef kernel(a, b):\n    global OP\n    OP = torch.mm\n"
                     "    return a\n", "FB001"),
    "local_alias_called": ("def kernel(a, b):\n    f = torch.bmm\n    return f(a, b)\n",
                           "FB001"),
    "getattr_bound": ("def kernel(a, b):\n    f = getattr(torch, 'mm')\n    return f(a, b)\n",
                      "FB001"),
    "dunder_call": ("def kernel(a, b):\n    return torch.mm.__call__(a, b)\n", "FB001"),
    "tensor_method_ref": ("def kernel(a, b):\n    return list(map(torch.Tensor.add, a, b))\n",
                          "FB002"),
}


@pytest.mark.parametrize("name", sorted(HANDED_ON))
def test_compute_functions_handed_on_are_compute(name: str) -> None:
    body, rule = HANDED_ON[name]
    assert rule in rules(run(body), Severity.FALLBACK)


# -- operator, getattr on tensors, rot13 ----------------------------------------------------
OPERATOR_CASES: dict[str, str] = {
    "matmul": "import operator\ndef kernel(a, b):\n    return operator.matmul(a, b)\n",
    "from_import": "from operator import matmul\ndef kernel(a, b):\n    return matmul(a, b)\n",
    "from_import_alias": ("from operator import matmul as mm\ndef kernel(a, b):\n"
                          "    f = mm\n    return f(a, b)\n"),
    "dunder": "import operator\ndef kernel(a, b):\n    return operator.__matmul__(a, b)\n",
    "reduce_matmul": ("import functools, operator\ndef kernel(xs):\n"
                      "    return functools.reduce(operator.matmul, xs)\n"),
    "add_tensor": ("import operator\ndef kernel(x: torch.Tensor, y):\n"
                   "    return operator.add(x, y)\n"),
    "mul_tensor_alias": ("from operator import mul\ndef kernel(x: torch.Tensor):\n"
                         "    return mul(x, 2)\n"),
    "reduce_mul_tensors": ("import functools, operator\ndef kernel(x: torch.Tensor):\n"
                           "    return functools.reduce(operator.mul, x.unbind(0))\n"),
    "map_add_tensor": ("import operator\ndef kernel(x: torch.Tensor, y: torch.Tensor):\n"
                       "    return list(map(operator.add, x, y))\n"),
}


@pytest.mark.parametrize("name", sorted(OPERATOR_CASES))
def test_operator_module_is_the_operator(name: str) -> None:
    assert "FB003" in rules(run(OPERATOR_CASES[name]), Severity.FALLBACK)


def test_operator_on_plain_numbers_is_fine() -> None:
    body = ("import functools, operator\ndef kernel(x):\n"
            "    n = functools.reduce(operator.mul, x.shape, 1) + operator.add(1, 2)\n"
            "    add_kernel[(1,)](x, x, x, n, BLOCK=1024)\n    return x\n")
    assert blocking(run(body)) == []


GETATTR_METHODS: dict[str, str] = {
    "annotated": ("def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
                  "    return getattr(a, 'matmul')(b)\n"),
    "untyped": "def kernel(a, b):\n    return getattr(a, 'mat' + 'mul')(b)\n",
    "bound_later": "def kernel(x):\n    s = getattr(x, 'sum')\n    return s(-1)\n",
    "ambiguous_on_tensor": ("def kernel(x: torch.Tensor, y):\n"
                            "    return getattr(x, 'add')(y)\n"),
    "dunder": "def kernel(a, b):\n    return getattr(a, '__matmul__')(b)\n",
}


@pytest.mark.parametrize("name", sorted(GETATTR_METHODS))
def test_getattr_of_a_tensor_method(name: str) -> None:
    assert "FB002" in rules(run(GETATTR_METHODS[name]), Severity.FALLBACK)


def test_getattr_of_allowed_or_container_methods_is_fine() -> None:
    body = ("def kernel(x):\n    names = ['b', 'a']\n    getattr(names, 'sort')()\n"
            "    seen = set()\n    getattr(seen, 'add')(1)\n    n = getattr(x, 'numel')()\n"
            "    y = getattr(x, 'view')(-1)\n    add_kernel[(1,)](y, y, y, n, BLOCK=1024)\n"
            "    return x\n")
    assert blocking(run(body)) == []


@pytest.mark.parametrize("expr", [
    "codecs.decode('zngzhy', 'rot13')",
    "codecs.decode('zngzhy', 'rot_13')",
    "codecs.encode('zngzhy', 'rot13')",
    "decode('zng' + 'zhy', 'rot-13')",
])
def test_rot13_names_are_folded(expr: str) -> None:
    body = ("import codecs\nfrom codecs import decode\ndef kernel(a, b):\n"
            f"    return getattr(torch, {expr})(a, b)\n")
    found = run(body)
    assert "FB001" in rules(found, Severity.FALLBACK)
    assert "DS003" not in rules(found)


def test_opt_einsum_is_a_vendor_library() -> None:
    body = ("import opt_einsum as oe\ndef kernel(a, b):\n"
            "    return oe.contract('ij,jk->ik', a, b)\n")
    assert "VL001" in rules(run(body), Severity.VIOLATION)


def test_getattr_of_torch_bound_locally_is_judged_at_the_call() -> None:
    body = ("def kernel(x):\n    fmt = getattr(torch, 'contiguous_format')\n"
            "    f = getattr(torch, 'mm')  # never called\n"
            "    add_kernel[(1,)](x, x, x, x.numel(), BLOCK=1024)\n    return x\n")
    assert blocking(run(body)) == []

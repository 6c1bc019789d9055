"""`grader roofline derive`: count a reference's FLOPs and bytes by running it once.

The reference runs on the CPU (or on the `meta` device, which computes nothing and is instant
for large shapes) under `torch.utils.flop_counter.FlopCounterMode`, which counts matrix products,
convolutions and attention exactly. What it does not count is added by these rules, applied to
each aten op as it is dispatched:

- an op tagged `pointwise` (add, mul, rsqrt, exp, ...): one FLOP per output element. A
  transcendental counts as one FLOP, like an add: the roofline charges the tensor-core peak,
  and the point is the order of magnitude of the non-matmul work, not its exact cost;
- an op tagged `reduction` (sum, mean, amax, ...): one FLOP per input element;
- an op in PER_ELEMENT (softmax, norms, pooling, scans, losses: neither tagged, so they
  counted nothing: issue 20): its factor per element of its first input;
- anything else (views, copies, dtype conversions, fills): no FLOPs. A conversion moves data;
  it does no arithmetic that a fused kernel would have to pay for.

Bytes are the *semantic* traffic: every tensor the reference reads (what `make_inputs` returned,
and a module problem's parameters and buffers) plus every tensor it returns, each storage
counted once (the union of the byte ranges its views cover), reads and writes counted apart.
Intermediates are not counted: a fused kernel keeps them on chip, and the roofline is the speed
of light of the fused operation.

The references are the organiser's trusted code; they run here, never an entry.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import torch
from pydantic import Field
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from grader.errors import ProblemError
from grader.formats.expr import work
from grader.harness.modules import build_module
from grader.model.scores import Frozen
from grader.suite.load import load_problem

Rule = Literal["flop_counter", "pointwise", "reduction", "per_element", "free"]

# FLOPs per input element of composite ops that neither FlopCounterMode nor the tags count,
# by what a fused kernel computes: softmax (max, subtract, exp, sum, divide: 5), a norm
# (mean, variance: 3; normalise and scale, shift: 3), a pooling window or scan (one op per
# element read), a loss (its pointwise terms and the reduction). Orders of magnitude, like
# the pointwise rule: a transcendental counts as one.
PER_ELEMENT: dict[str, int] = {
    **dict.fromkeys(("aten._softmax", "aten._log_softmax", "aten._safe_softmax"), 5),
    **dict.fromkeys(("aten.native_layer_norm", "aten.native_group_norm",
                     "aten.native_batch_norm", "aten._native_batch_norm_legit",
                     "aten._native_batch_norm_legit_no_training", "aten._fused_rms_norm"), 6),
    **dict.fromkeys(("aten.max_pool1d", "aten.max_pool2d_with_indices",
                     "aten.max_pool3d_with_indices", "aten.avg_pool1d", "aten.avg_pool2d",
                     "aten.avg_pool3d", "aten.adaptive_avg_pool1d", "aten._adaptive_avg_pool2d",
                     "aten._adaptive_avg_pool3d", "aten.adaptive_max_pool2d",
                     "aten.adaptive_max_pool3d", "aten.cumsum", "aten.cumprod",
                     "aten.logcumsumexp", "aten._cummax_helper", "aten._cummin_helper"), 1),
    **dict.fromkeys(("aten.mse_loss", "aten.l1_loss", "aten.smooth_l1_loss",
                     "aten.huber_loss", "aten.binary_cross_entropy",
                     "aten.binary_cross_entropy_with_logits", "aten.soft_margin_loss",
                     "aten.kl_div", "aten.nll_loss_forward", "aten.nll_loss2d_forward",
                     "aten.cosine_embedding_loss", "aten.margin_ranking_loss",
                     "aten.hinge_embedding_loss", "aten.triplet_margin_loss"), 3),
}

DEFAULT_RTOL = 0.01  # check(): relative agreement asked of the expressions

# output_bytes_on_meta: a reference that reads values (`.tolist()` of lengths or indices,
# `.item()`) cannot run on meta, and its outputs are still counted there, with every value it
# reads zero, within bounds that keep the count cheap and the host untouched: a read out of
# meta of at most ZERO_READ_ELEMENTS elements, and at most ZERO_OPS ops dispatched over all
# the runs that share one OpBudget (the importer's: a problem's shapes). Through a Python
# mode an op costs about 35 µs on the CI host; Atrex-Bench's chunk_gated_delta_rule_state
# takes about 80 000 over its 26 shapes, gated_delta_rule_update's per-token loop 320 000 at
# one of its larger shapes.
ZERO_READ_ELEMENTS = 1 << 20
ZERO_OPS = 100_000


class OpCount(Frozen):
    calls: int = Field(ge=1)
    flops: int = Field(ge=0)
    rule: Rule


class Derived(Frozen):
    problem: str
    shape: str
    device: str
    flops: int = Field(ge=0)
    bytes: int = Field(ge=0)  # bytes_read + bytes_written
    bytes_read: int = Field(ge=0)
    bytes_written: int = Field(ge=0)
    by_op: dict[str, OpCount]


class CheckRow(Frozen):
    shape: str
    expr_flops: float
    derived_flops: int
    expr_bytes: float
    derived_bytes: int
    ok: bool


def _rule(func: Any) -> Rule:
    if func._overloadpacket in flop_registry:
        return "flop_counter"
    if str(func._overloadpacket) in PER_ELEMENT:
        return "per_element"
    tags = getattr(func, "tags", ())
    if torch.Tag.pointwise in tags:
        return "pointwise"
    if torch.Tag.reduction in tags:
        return "reduction"
    return "free"


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


class _OpRecorder(TorchDispatchMode):
    """Counts every aten op and applies the pointwise/reduction rules to the uncounted ones."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, dict[str, Any]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        rule = _rule(func)
        flops = 0
        if rule == "pointwise":
            outs = _tensors(out)
            flops = outs[0].numel() if outs else 0
        elif rule in ("reduction", "per_element"):
            ins = _tensors(args)
            flops = ins[0].numel() if ins else 0
            if rule == "per_element":
                flops *= PER_ELEMENT[str(func._overloadpacket)]
        entry = self.counts.setdefault(str(func._overloadpacket),
                                       {"calls": 0, "flops": 0, "rule": rule})
        entry["calls"] += 1
        entry["flops"] += flops
        return out


def unique_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes covered by `tensors`, each storage's overlapping views counted once."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for t in tensors:
        if t.numel() == 0:
            continue
        size = t.element_size()
        extent = 1 + sum((int(n) - 1) * abs(int(s))
                         for n, s in zip(t.shape, t.stride(), strict=True))
        start = int(t.storage_offset()) * size
        ranges.setdefault(t.untyped_storage()._cdata, []).append((start, start + extent * size))
    total = 0
    for spans in ranges.values():
        end = -1
        for lo, hi in sorted(spans):
            if hi > end:
                total += hi - max(lo, end)
                end = hi
    return total


def load_reference(problem_dir: Path, interface: str = "function") -> ModuleType:
    path = problem_dir / "reference.py"
    spec = importlib.util.spec_from_file_location(f"_grader_reference_{problem_dir.name}", path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the organiser's file: say which and why
        raise ProblemError(f"{path}: import failed: {type(exc).__name__}: {exc}") from None
    for name in ("reference" if interface == "function" else "Model", "make_inputs"):
        if not callable(getattr(module, name, None)):
            raise ProblemError(f"{path}: defines no {name}" + ("()" if name[0].islower() else ""))
    return module


def _prepared(ref: ModuleType, params: dict[str, Any], init: dict[str, Any] | None, *,
              device: str, seed: int) -> tuple[Any, Sequence[Any], list[torch.Tensor]]:
    """One run of a loaded reference made ready on `device`: what to call (`reference`, or
    the module problem's `Model` built from `init`), its inputs, and the module's parameters
    and buffers (read by the run, like inputs)."""
    inputs = ref.make_inputs(seed, device, **params)
    inputs = inputs if isinstance(inputs, tuple | list) else (inputs,)
    if init is None:
        return ref.reference, inputs, []
    module = build_module(ref.Model, init, seed, device)
    return module, inputs, [*module.parameters(), *module.buffers()]


@dataclass
class OpBudget:
    """The ops output_bytes_on_meta may still dispatch, over every run that shares it."""

    left: int = ZERO_OPS


class _ZeroValues(TorchDispatchMode):
    """Values read out of `meta` are zeros: `.item()` a zero of its dtype, a copy to another
    device (`.tolist()`, `.cpu()`) zeros of its shape, up to ZERO_READ_ELEMENTS; and each
    op takes one of `budget`'s. ProblemError past either bound."""

    def __init__(self, budget: OpBudget) -> None:
        super().__init__()
        self.budget = budget

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.budget.left <= 0:
            raise ProblemError("the ops allowed for counting on meta are spent")
        self.budget.left -= 1
        aten = torch.ops.aten
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if first is not None and first.device.type == "meta":
            if func is aten._local_scalar_dense.default:
                return (False if first.dtype == torch.bool
                        else 0.0 if first.dtype.is_floating_point else 0)
            to = kwargs.get("device")
            if func is aten._to_copy.default and to is not None and torch.device(to).type != "meta":
                _readable(first)
                return torch.zeros(first.shape, dtype=kwargs.get("dtype") or first.dtype,
                                   device=to)
        src = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else None
        if (func is aten.copy_.default and first is not None and src is not None
                and src.device.type == "meta" and first.device.type != "meta"):
            _readable(src)
            return first.zero_()
        return func(*args, **kwargs)


def _readable(t: torch.Tensor) -> None:
    if t.numel() > ZERO_READ_ELEMENTS:
        raise ProblemError(f"a read of {t.numel()} elements out of meta: not counted there")


def output_bytes_on_meta(ref: ModuleType, params: dict[str, Any], init: dict[str, Any] | None,
                         *, budget: OpBudget | None = None, seed: int = 0) -> int:
    """The bytes one run of the reference returns, counted on meta where it reads values that
    meta does not have: each read gives zeros (_ZeroValues). Only a hint (for batching by
    outputs, run/plan.py), never a roofline number: zero lengths or indices leave most of
    the work undone, and the outputs of most references depend on the shape's parameters
    alone (Atrex-Bench's chunk_gated_delta_rule_state, unified_attention). Raises what the
    reference raises, and ProblemError past _ZeroValues' bounds (`budget`: shared with
    other runs; a fresh one of ZERO_OPS by default)."""
    call, inputs, _ = _prepared(ref, params, init, device="meta", seed=seed)
    with torch.no_grad(), _ZeroValues(budget if budget is not None else OpBudget()):
        outputs = call(*inputs)
    return unique_bytes(_tensors(outputs))


def count(ref: ModuleType, params: dict[str, Any], init: dict[str, Any] | None, *,
          device: str = "cpu", seed: int = 0) -> tuple[int, int, int, dict[str, OpCount]]:
    """(FLOPs, bytes read, bytes written, ops) of one run of a loaded reference module.

    `init`: a module problem's constructor arguments (its `Model` is built, outside the
    count, and its parameters and buffers count as read, like inputs), None for
    `reference(*inputs)`. Raises what the reference raises."""
    call, inputs, read_too = _prepared(ref, params, init, device=device, seed=seed)
    recorder = _OpRecorder()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter, recorder:
        outputs = call(*inputs)
    counted = counter.get_flop_counts().get("Global", {})
    by_op: dict[str, OpCount] = {}
    for name, entry in recorder.counts.items():
        flops = entry["flops"]
        if entry["rule"] == "flop_counter":
            flops = sum(int(n) for op, n in counted.items() if str(op) == name)
        by_op[name] = OpCount(calls=entry["calls"], flops=flops, rule=entry["rule"])
    read = unique_bytes([*_tensors(inputs), *read_too])
    written = unique_bytes(_tensors(outputs))
    return sum(op.flops for op in by_op.values()), read, written, by_op


def derive(problem_dir: Path | str, shape_id: str, *, device: str = "cpu",
           seed: int = 0) -> Derived:
    """Run the reference of `shape_id` once and count its FLOPs and semantic bytes."""
    sp = load_problem(Path(problem_dir))
    problem = sp.problem
    shapes = {s.id: s for s in problem.shapes}
    if shape_id not in shapes:
        raise ProblemError(f"{sp.directory}: no shape {shape_id!r}",
                           hint=f"shapes: {', '.join(shapes)}")
    ref = load_reference(sp.directory, problem.interface)
    where = f"{sp.directory / 'reference.py'} (shape {shape_id})"
    shape = shapes[shape_id]
    init = problem.init_kwargs(shape) if problem.interface == "module" else None
    try:
        flops, read, written, by_op = count(ref, dict(shape.params), init, device=device,
                                            seed=seed)
    except Exception as exc:
        raise ProblemError(f"{where}: the reference failed: {type(exc).__name__}: {exc}") from None
    return Derived(problem=sp.id, shape=shape_id, device=device, flops=flops,
                   bytes=read + written, bytes_read=read, bytes_written=written, by_op=by_op)


def agrees(expr_value: float, derived: int, rtol: float) -> bool:
    return math.isclose(expr_value, derived, rel_tol=rtol, abs_tol=0.0)


def check(problem_dir: Path | str, *, shapes: Sequence[str] | None = None,
          rtol: float = DEFAULT_RTOL, device: str = "cpu") -> list[CheckRow]:
    """The problem's `flops`/`bytes` expressions against derivation, shape by shape.

    `ok` when both agree within `rtol` (relative to the larger of the two). `shapes`: the shape
    ids to check (default: all; the large ones are quick on `device="meta"`).
    """
    sp = load_problem(Path(problem_dir))
    problem = sp.problem
    rows = []
    for shape in problem.shapes:
        if shapes is not None and shape.id not in shapes:
            continue
        d = derive(sp.directory, shape.id, device=device)
        expr_flops, expr_bytes = work(problem, shape)
        ok = agrees(expr_flops, d.flops, rtol) and agrees(expr_bytes, d.bytes, rtol)
        rows.append(CheckRow(shape=shape.id, expr_flops=expr_flops, derived_flops=d.flops,
                             expr_bytes=expr_bytes, derived_bytes=d.bytes, ok=ok))
    return rows

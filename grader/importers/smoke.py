"""Smoke shapes for imported problems: a source's shape scaled down until a CPU grades it.

Neither benchmark ships shapes small enough for Triton's CPU interpreter, and a problem with
no smoke shape is graded on nothing there (issue 20). So the importer derives one:

1. Start from the source's smallest shape (its inputs' and parameters' bytes, on `meta`).
2. Halve one size at a time, the largest first, while the bytes exceed TARGET_BYTES. A size is
   a param the source itself varies between its shapes (what stays the same in every shape,
   a head dimension or a quantisation group, is structure: left alone), or, for a one-shape
   source, a param the importer says is free (KernelBench: a literal constant). Params that
   follow from others are kept consistent: equal in every shape (scaled together), a list's
   length (`num_seqs` = len(`seq_lens`)), or the source's own formulas (`recompute`).
3. A step is kept when the generator and the reference still run on `meta` with fewer bytes;
   the result is then run on the CPU, walking back to a larger step if it fails there.

The references are trusted code run here, as `grader roofline derive` runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from grader.harness.modules import as_function, build_module
from grader.importers.common import Param, ProblemDraft, ShapeDraft

TARGET_BYTES = 256 << 10  # inputs and parameters of a smoke shape, at most (when reachable)
CPU_BYTES = 64 << 20  # the largest step tried on the CPU when walking back
MAX_STEPS = 80


@dataclass(frozen=True)
class Knob:
    """Something that can be halved: int params scaled together, or a list param's
    elements, or its length (with the int params that equal it)."""

    kind: str  # "int", "elems", "len"
    names: tuple[str, ...]

    def magnitude(self, p: dict[str, Param]) -> int:
        v = p[self.names[0]]
        if self.kind == "int":
            return v if isinstance(v, int) else 0
        if not isinstance(v, list):
            return 0
        if self.kind == "len":
            return len(v)
        return max((x for x in v if isinstance(x, int) and not isinstance(x, bool)), default=0)

    def halve(self, p: dict[str, Param]) -> dict[str, Param]:
        out = dict(p)
        v = p[self.names[0]]
        if self.kind == "int" and isinstance(v, int):
            for n in self.names:
                out[n] = max(1, v // 2)
        elif self.kind == "elems" and isinstance(v, list):
            out[self.names[0]] = [max(1, x // 2) if isinstance(x, int) and not isinstance(
                x, bool) else x for x in v]
        elif self.kind == "len" and isinstance(v, list):
            keep = max(1, len(v) // 2)
            out[self.names[0]] = v[:keep]
            for other in self.names[1:]:
                out[other] = keep
        return out


def _int(v: Param) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_list(v: Param) -> bool:
    return isinstance(v, list) and bool(v) and all(_int(x) for x in v)


def knobs(draft: ProblemDraft) -> list[Knob]:
    shapes = draft.shapes
    first = shapes[0].params
    names = [n for n in first if all(n in s.params for s in shapes)]
    if draft.scalable is not None:
        free = [n for n in names if n in draft.scalable]
    elif len(shapes) > 1:  # what the source varies is a size; the rest is structure
        free = [n for n in names if any(s.params[n] != first[n] for s in shapes)]
    else:
        free = names
    out: list[Knob] = []
    used: set[str] = set()
    for n in free:
        v = first[n]
        if _int_list(v):
            assert isinstance(v, list)
            same_len = tuple(m for m in free if m != n and all(
                _int(s.params[m]) and isinstance(s.params[n], list)
                and s.params[m] == len(s.params[n]) for s in shapes))  # type: ignore[arg-type]
            if len(shapes) > 1 and same_len:
                out.append(Knob("len", (n, *same_len)))
                used |= set(same_len)
            out.append(Knob("elems", (n,)))
    for n in free:
        if n in used or not _int(first[n]):
            continue
        twins = tuple(m for m in free if m != n and m not in used and len(shapes) > 1 and all(
            s.params[m] == s.params[n] and _int(s.params[m]) for s in shapes))
        used |= {n, *twins}
        out.append(Knob("int", (n, *twins)))
    return out


def _bytes(values: Any) -> int:
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, list | tuple):
        return sum(_bytes(v) for v in values)
    if isinstance(values, dict):
        return sum(_bytes(v) for v in values.values())
    return 0


class _Trial:
    def __init__(self, draft: ProblemDraft, ref: ModuleType) -> None:
        self.draft, self.ref = draft, ref
        self.forward_on_meta = True

    def init(self, params: dict[str, Param]) -> dict[str, Any]:
        return {k: params[k] for k in self.draft.init_params if k in params}

    def size(self, params: dict[str, Param]) -> int | None:
        """Bytes of the inputs and parameters on `meta`; None when it does not run there."""
        try:
            inputs = self.ref.make_inputs(0, "meta", **params)
            model = build_module(self.ref.Model, self.init(params), 0, "meta")
            if self.forward_on_meta:
                as_function(model)(*inputs)
        except Exception:
            return None
        return _bytes(inputs) + _bytes(list(model.parameters())) + _bytes(list(model.buffers()))

    def runs_on_cpu(self, params: dict[str, Param]) -> bool:
        try:
            inputs = self.ref.make_inputs(0, "cpu", **params)
            model = build_module(self.ref.Model, self.init(params), 0, "cpu")
            as_function(model)(*inputs)
        except Exception:
            return False
        return True


def smoke_params(draft: ProblemDraft, ref: ModuleType
                 ) -> tuple[dict[str, Param] | None, str, ShapeDraft | None]:
    """Params of a smoke shape for `draft` (its reference loaded as `ref`), a note, and the
    shape it was scaled from."""
    trial = _Trial(draft, ref)
    sized = [(n, s) for s in draft.shapes if (n := trial.size(s.params)) is not None]
    if not sized:  # some references have no meta kernels: check the generator alone there
        trial.forward_on_meta = False
        sized = [(n, s) for s in draft.shapes if (n := trial.size(s.params)) is not None]
    if not sized:
        return None, "no smoke shape: no shape's inputs can be made on meta", None
    size, base = min(sized, key=lambda x: x[0])
    recompute: Callable[[dict[str, Param]], dict[str, Param]] = draft.recompute or dict
    params = dict(base.params)
    steps = [(size, params)]
    dead: set[Knob] = set()
    ks = knobs(draft)
    for _ in range(MAX_STEPS):
        if size <= TARGET_BYTES:
            break
        for k in sorted((k for k in ks if k not in dead), key=lambda k: -k.magnitude(params)):
            if k.magnitude(params) <= 1:
                continue
            try:
                cand = recompute(k.halve(params))
            except Exception:
                cand = params
            got = trial.size(cand) if cand != params else None
            if got is not None and got < size:
                size, params = got, cand
                steps.append((size, params))
                break
            dead.add(k)
        else:
            break
    for n, p in reversed(steps):
        if n <= CPU_BYTES and trial.runs_on_cpu(p):
            scaled = {k: v for k, v in p.items() if v != base.params.get(k)}
            how = ", ".join(f"{k} {base.params[k]!r} -> {v!r}" for k, v in scaled.items())
            return p, (f"smoke shape from shape {base.id} ({how or 'as it is'}; {n} bytes of "
                       "inputs and parameters), derived by the importer for CPU grading"), base
    return None, ("no smoke shape: no scaled-down shape of "
                  f"{base.id} runs on the CPU (the reference needs a GPU, or its sizes "
                  "cannot shrink)"), None


def with_smoke(draft: ProblemDraft, ref: ModuleType, taken: set[str]) -> ProblemDraft:
    """`draft` with a derived smoke shape when it has none (the note says how, or why not)."""
    from dataclasses import replace

    from grader.importers.common import shape_id

    if any(s.smoke for s in draft.shapes):
        return draft
    params, note, base = smoke_params(draft, ref)
    if params is None or base is None:
        return replace(draft, notes=[*draft.notes, note])
    shape = ShapeDraft(id=shape_id("smoke", taken, "smoke"), params=params, phase=base.phase,
                       smoke=True, keys=())
    return replace(draft, shapes=[shape, *draft.shapes], notes=[*draft.notes, note])

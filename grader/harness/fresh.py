"""Fresh inputs for every timed call, and the samples by which every timed output is checked
(issue 31). Runs in both containers: the entry's (beside entry code: what it computes here is
evidence) and the reference's.

An entry that sees one input twice can remember its output and replay it: a device-side table
keyed by a fingerprint of the values, in nothing but Triton kernels, passes every check on the
calls' kernels. So no timed call gets values the entry has been given before. Each call's
inputs are drawn on the device, right before the call, by the problem's own public recipe
(`make_inputs`, the release kit's) from a seed of its own; the seeds reach the harness in its
job after the entry's import, and exist nowhere the entry's code may read (files and the
harness's memory are out of its reach as long as the static rules hold: docs/security.md).

Every timed call's outputs are sampled the same way right after the call: at most SAMPLE
elements per output, at positions drawn from the call's seed (whole outputs up to SAMPLE
elements), kept on the device. Which calls are compared with the reference is the host's
secret (model/timed.py); the entry cannot tell a checked call from another, before or after it.
Standard library and torch only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

SAMPLE = 4096  # elements per output of a timed call; smaller outputs are sampled whole
_POSITIONS_SALT = b"grader/sample-positions"


def load_recipe(path: Path) -> Any:
    """The problem's reference module (its `make_inputs`), loaded by path under a name of its
    own. In the entry's container it is the public copy the host placed with the job."""
    from .loading import load_module

    return load_module(path, "problem_recipe")


def make(recipe: Any, seed: int, device: str, params: dict[str, Any]) -> tuple[Any, ...]:
    """One call's inputs, drawn from `seed` where the call runs."""
    from .loading import as_tuple

    return as_tuple(recipe.make_inputs(seed, device, **params))


def _positions_seed(seed: int, index: int, numel: int) -> int:
    data = b"%s/%d/%d/%d" % (_POSITIONS_SALT, seed, index, numel)
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "little") >> 1


def positions(seed: int, index: int, numel: int) -> Any:
    """Where output `index` of the call drawn from `seed` is sampled: SAMPLE positions of its
    `numel` elements (None: all of them). Drawn on the CPU, so both containers agree whatever
    their device."""
    import torch

    if numel <= SAMPLE:
        return None
    gen = torch.Generator(device="cpu").manual_seed(_positions_seed(seed, index, numel))
    return torch.randint(0, numel, (SAMPLE,), generator=gen, dtype=torch.int64)


def sample(outputs: tuple[Any, ...], seed: int) -> list[Any]:
    """The samples of one call's outputs, on their device: per output its shape (int64) and
    its sampled elements in its own dtype. A non-tensor output is a TypeError."""
    import torch

    from .loading import check_outputs

    check_outputs(outputs)
    taken: list[Any] = []
    for index, out in enumerate(outputs):
        flat = out.detach().reshape(-1)
        where = positions(seed, index, flat.numel())
        values = flat.clone() if where is None else flat[where.to(flat.device)]
        taken += [torch.tensor(tuple(out.shape), dtype=torch.int64), values]
    return taken


def timed_loop(clock: Any, fn: Any, recipe: Any, device: str, spec: dict[str, Any],
               knobs: dict[str, Any], label: str, keep: Any = None,
               phase: Any = None) -> tuple[dict[str, Any], list[str]]:
    """One shape's timed loop by its plan (`spec`, model/timed.py's TimedPlan.as_job with the
    shape's params): call i on inputs drawn from its own seed, right before it; with a
    `last` in the plan, one closing call on it once sampling stops. `keep(seed, case id or
    None, outputs)` after every call; `phase(name)`: the harness's phase counter, which
    counts the drawing as "timed_inputs" (what fresh inputs cost: docs/benchmarks.md)."""
    import contextlib

    from .timing import time_kernel

    calls = spec["calls"]
    last = spec.get("last") or calls[-1]

    def plan_of(i: int) -> tuple[int, str | None]:
        seed, cid = calls[i] if i >= 0 else last
        return int(seed), cid

    def draw(i: int) -> tuple[Any, tuple[Any, ...], bool]:
        with phase("timed_inputs") if phase is not None else contextlib.nullcontext():
            values = make(recipe, plan_of(i)[0], device, spec["params"])
            if device.startswith("cuda"):
                import torch

                torch.cuda.synchronize()  # drawn, not only queued: its cost is counted
        return fn, values, False

    def kept(i: int, out: Any) -> None:
        if keep is not None:
            keep(*plan_of(i), out)

    return time_kernel(clock, draw, label, keep=kept, closing="last" in spec,
                       rse_target=knobs["rse_target"], budget_s=knobs["budget_s"],
                       min_samples=knobs["min_samples"],
                       max_samples=min(knobs["max_samples"], len(calls)))

"""Loading a file of Python by path, a call's outputs as a tuple, and the check that they are
plain tensors: what the harness's modes and harness/fresh.py share. Standard library and
torch only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any


def load_module(path: Path, name: str) -> Any:
    # Loaded by path, with its folder kept off sys.path: a `torch.py` beside the kernel
    # shadows nothing.
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def as_tuple(out: Any) -> tuple[Any, ...]:
    if isinstance(out, dict):
        # Atrex-Bench's references return {name: tensor} (issue 20): by name, so that an
        # entry's dict in another order still lines up with the reference's.
        return tuple(out[k] for k in sorted(out, key=str))
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def check_outputs(out: tuple[Any, ...]) -> None:
    """Every output exactly a torch.Tensor, else a TypeError naming what was returned."""
    import torch

    # Exactly torch.Tensor: a subclass could compute lazily when the harness saves it, after
    # the call ended (tests/cases/hostile/evasive_lazy_tensor_subclass).
    bad = [type(o).__name__ for o in out if type(o) is not torch.Tensor]
    if bad:
        raise TypeError(f"kernel() returned {', '.join(bad)} where plain torch.Tensor "
                        "outputs were expected")

"""Module-style problems (`interface = "module"`): the class to build, and how to build it.

The reference container builds the reference's `Model` and the entry container the entry's
class, each with the same constructor arguments and under the same seed, so parameters drawn
in a constructor (nn.Linear weights) are identical on both sides. The seed comes from the host,
derived from the case's secret seed but not equal to it (worker.derive_module_seed). The host's
`grader roofline derive` and the importers build modules with the same function.
Standard library and torch only: this file also runs next to entry code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def find_class(module: Any, names: Sequence[str]) -> type:
    """The first of `names` that `module` defines as a class."""
    for name in names:
        value = vars(module).get(name)
        if isinstance(value, type):
            return value
    raise AttributeError(f"the file defines no class {' or '.join(names)}")


@contextlib.contextmanager
def _seeded(seed: int, device: str) -> Iterator[None]:
    import torch

    # fork_rng restores every generator it forks: building a module leaves the process's
    # global RNG as it was. On a GPU the current device's generator is forked and seeded too,
    # for constructors that draw there.
    cuda = device.startswith("cuda") and torch.cuda.is_available()
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if cuda else []):
        torch.manual_seed(seed)
        yield


def build_module(cls: type, init: dict[str, Any], seed: int, device: str) -> Any:
    """`cls(**init)` under `seed`, on `device`, in eval mode, its parameters frozen.

    Built on the CPU and then moved, so a seed gives the same parameters on every device;
    on `meta` it is built there directly (nothing is computed: `grader roofline derive`)."""
    import torch

    with _seeded(seed, device), (torch.device("meta") if device == "meta"
                                 else contextlib.nullcontext()):
        module = cls(**init)
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"{cls.__name__}(...) is a {type(module).__name__}, not a "
                        "torch.nn.Module")
    module = module.to(device).eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def as_function(module: Any) -> Callable[..., Any]:
    """Calls `module` under no_grad: the graded call is inference, as the reference's is."""
    import torch

    def call(*inputs: Any) -> Any:
        with torch.no_grad():
            return module(*inputs)

    return call

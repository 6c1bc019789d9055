"""Limits of Triton's CPU interpreter that fail honest code (issue 23).

On a CPU host every Triton kernel runs through Triton's interpreter (`TRITON_INTERPRET=1`),
which (triton 3.9) rejects code that compiles and runs correctly on a GPU:
- a Python scalar argument used as a tensor (`eps.to(tl.float32)`: on a GPU a scalar argument
  is a tensor of rank 0, in the interpreter a plain float with no `.to`);
- `tl.extra.libdevice` functions, which the interpreter implements as stubs returning None
  (`TypeError: cannot convert None ... to tensor`, `unsupported operand ... 'NoneType'`).

A case that fails this way is `unverified` on this host: neither passed nor the entry's
runtime error. Only errors raised inside a kernel body under the interpreter count (Triton
wraps those in `InterpreterError`), and the libdevice sign only when the kernel file calls
libdevice: an ordinary error in the entry's own Python, or a kernel's own bug, stays a
`runtime_error`. The error text is the entry's (it could write any text): the worst an entry
gains by imitating one is `unverified` instead of `runtime_error`, which no gate counts as
passed and leaderboards count apart.
"""

from __future__ import annotations

import re

INTERPRETER_ERROR = "InterpreterError"
_SCALAR = re.compile(r"'(float|int|bool)' object has no attribute '(\w+)'")
_NONE = ("cannot convert None of type <class 'NoneType'> to tensor", "'NoneType'")


def interpreter_limit(error: str | None, source: str) -> str | None:
    """Why `error` (a case's traceback on the CPU interpreter) is a limit of the interpreter
    rather than the entry's failure, in a sentence; None when it is not one. `source`: the
    entry's kernel file."""
    if not error or INTERPRETER_ERROR not in error:
        return None
    scalar = _SCALAR.search(error)
    if scalar is not None:
        return (f"Triton's CPU interpreter passes a Python {scalar.group(1)} argument where a "
                f"GPU passes a scalar tensor ('.{scalar.group(2)}' is missing on it)")
    if "libdevice" in source and any(sign in error for sign in _NONE):
        return ("Triton's CPU interpreter does not implement libdevice functions (they "
                "return None there)")
    return None


def unverified_detail(case_id: str, why: str) -> str:
    return f"case {case_id}: unverified on this host: {why}; grade on a GPU to judge it"

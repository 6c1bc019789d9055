"""Limits of Triton's CPU interpreter that fail honest code (issue 23).

On a CPU host every Triton kernel runs through Triton's interpreter (`TRITON_INTERPRET=1`),
which (triton 3.9) rejects code that compiles and runs correctly on a GPU:
- a Python scalar argument used as a tensor (`eps.to(tl.float32)`: on a GPU a scalar argument
  is a tensor of rank 0, in the interpreter a plain float with no `.to`);
- `tl.extra.libdevice` functions, which the interpreter implements as stubs returning None
  (`TypeError: cannot convert None ... to tensor`, `unsupported operand ... 'NoneType'`).

- bf16 arithmetic: the interpreter holds bf16 as raw 16-bit patterns and applies numpy's
  arithmetic to them (`+`, `tl.sum`, `tl.dot` all wrong; upstream triton-lang/triton#11584).
  The entry's harness counts such ops (harness/trace.install_bf16_watch); a case whose
  outputs are wrong after the interpreter computed on bf16 is `unverified`.

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


def bf16_limit(ops: dict[str, int] | None) -> str | None:
    """Why a wrong output is the interpreter's bf16 arithmetic (the ops the entry's harness
    saw it compute on bf16), or None when it computed none."""
    if not ops:
        return None
    named = ", ".join(f"{op} x{n}" for op, n in sorted(ops.items())[:6])
    return ("Triton's CPU interpreter computed on bf16 operands, which it holds as raw bit "
            f"patterns ({named}; triton-lang/triton#11584)")


def unverified_detail(case_id: str, why: str) -> str:
    return f"case {case_id}: unverified on this host: {why}; grade on a GPU to judge it"

"""Calls, as the Checker judges them (one pass with static_visit.Checker, which mixes this in):
a library function called, a Tensor method on what may be a tensor, dynamic imports and
getattr with a computed name, setattr on a protected object, `operator` functions on tensors,
precision lowered by `.to(...)`, and work put on another stream. Split from static_visit.py
(issue 33: every module under 400 lines); the checks of issue 17 on calls (getters, finalisers,
`.query()`) come from static_hooks.HookChecks.
"""

from __future__ import annotations

import ast

from grader.detect.static_hooks import _EXIT_DUNDERS, HookChecks
from grader.detect.static_names import (
    AMBIGUOUS_METHODS,
    INSTRUMENT_ATTRS,
    LOW_PRECISION_DTYPES,
    LOW_PRECISION_METHODS,
    MODULE_COMPILE,
    OPERATOR_ARITH,
    TENSOR_METHODS,
)
from grader.detect.static_scope import lookup

_IMPORTERS = frozenset({"builtins.__import__", "importlib.__import__", "importlib.import_module"})
_SETTERS = frozenset({"builtins.setattr", "builtins.delattr", "builtins.object.__setattr__",
                      "builtins.object.__delattr__"})
_LITERALS = (ast.Constant, ast.JoinedStr, ast.List, ast.Dict, ast.Set, ast.Tuple, ast.ListComp,
             ast.DictComp, ast.SetComp)


class CallChecks(HookChecks, ast.NodeVisitor):
    """Mixed into static_visit.Checker, which provides what HookChecks declares; the
    `_compute_method` HookChecks declares is this one (a subclass: first in the order)."""

    # -- calls ------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        funcs = self.resolver.qualnames(node.func, self.scope)
        args = node.args
        if funcs & _IMPORTERS:
            if not self.check_ref(node, " (through a dynamic import)"):
                if not self.resolver.qualnames(node, self.scope):
                    self.emit("DS001", node, "imports a module whose name is computed at run time")
            return self._visit_all(args, node.keywords)
        if "builtins.getattr" in funcs and len(args) >= 2:
            names = self.resolver.getattr_names(args[0], args[1], self.scope)
            if names is None:
                self.emit("DS003", node, "getattr with a name computed at run time")
            elif names & INSTRUMENT_ATTRS:
                self.emit("TM004", node, f"touches `{sorted(names & INSTRUMENT_ATTRS)[0]}` "
                          "(through getattr): the grader's instruments")
            elif self.resolver.qualnames(args[0], self.scope):
                self.check_ref(node, " (through getattr)")  # getattr(torch, "mm")
            else:
                self._getattr_method(node, args[0], args[1])  # getattr(x, "sum"): a method
            return self._visit_all(args, node.keywords)
        if funcs & _SETTERS and args:
            targets = self.resolver.qualnames(args[0], self.scope)
            hit = sorted(q for q in targets if self.policy.is_protected(q))
            if hit:
                self.emit("TM001", node, f"sets or deletes an attribute of `{hit[0]}`")
            names = self.resolver.strings(args[1], self.scope) if len(args) > 1 else None
            if names and names & _EXIT_DUNDERS:
                self.emit("SB005", node, "installs `__del__`: a finaliser")
        self._exit_hooks(node, funcs)
        self._getters(node, funcs)
        if any(q.startswith(("unittest.mock.patch", "mock.patch")) for q in funcs):
            self.emit("TM001", node, "patches with unittest.mock")
        if isinstance(node.func, ast.Attribute) and not funcs:
            self._method(node, node.func)
        self._operator(node, funcs)
        for kw in node.keywords:
            if kw.arg == "stream" and not _is_none(kw.value):
                self.emit("SB004", kw.value, "passes `stream=`: work on another CUDA stream")
        self.generic_visit(node)

    def _visit_all(self, args: list[ast.expr], keywords: list[ast.keyword]) -> None:
        for a in [*args, *(k.value for k in keywords)]:
            self.visit(a)

    def _method(self, node: ast.Call, func: ast.Attribute) -> None:
        name, receiver = func.attr, func.value
        # Chained calls share a start column: place each at its own method name.
        at = (func.end_lineno or func.lineno, max((func.end_col_offset or 0) - len(name), 0))
        if name in LOW_PRECISION_METHODS or (name in ("to", "type") and self._low_dtype(node)):
            self.emit("PR001", node, f"`.{name}(...)` lowers precision in host code", at)
        if self._compute_method(name, receiver):
            self.emit("FB002", node, f"PyTorch computes: Tensor method `.{name}()`", at)
        if name == MODULE_COMPILE:
            self._module_compile(node, at)

    def _module_compile(self, node: ast.AST, at: tuple[int, int] | None = None,
                        how: str = "") -> None:
        """`m.compile(...)` on an object no name resolves (an nn.Module's own method): that is
        torch.compile, whose kernels PyTorch generates (re.compile and triton.compile resolve
        to their modules and never come here)."""
        self.emit("VL002", node, f"`.compile()` of an object{how}: an nn.Module's compiles "
                  "through torch.compile", at)

    def _compute_method(self, name: str, receiver: ast.AST) -> bool:
        """Would `receiver.name(...)` be a Tensor compute method (as _method judges it)?"""
        if name not in TENSOR_METHODS or name in self.policy.allowed_calls:
            return False
        if isinstance(receiver, _LITERALS) or self._literal_name(receiver):
            return False
        return name not in AMBIGUOUS_METHODS or self.resolver.is_tensor(receiver, self.scope)

    def _getattr_method(self, node: ast.Call, receiver: ast.AST, name: ast.AST) -> None:
        """getattr(a, "matmul"): the bound method, called here or later, is `a.matmul`."""
        for n in sorted(self.resolver.strings(name, self.scope) or ()):
            if n == MODULE_COMPILE:
                self._module_compile(node, how=" (through getattr)")
                return
            if self._compute_method(n, receiver):
                self.emit("FB002", node, f"PyTorch computes: Tensor method `.{n}()` "
                          "(through getattr)")
                return

    def _operator(self, node: ast.Call, funcs: set[str]) -> None:
        """operator.add(x, y) on a tensor, or operator.mul handed to a call with tensors
        (functools.reduce(operator.mul, xs)): tensor arithmetic, as `x + y` is."""
        values = [*node.args, *(k.value for k in node.keywords)]
        plain = [v.value if isinstance(v, ast.Starred) else v for v in values]

        def tensors(skip: ast.AST | None = None) -> bool:
            return any(v is not skip and (self.resolver.is_tensor(v, self.scope)
                                          or self.resolver.is_seq(v, self.scope))
                       for v in plain)

        hit = sorted(funcs & OPERATOR_ARITH)
        if hit and tensors():
            self.emit("FB003", node, f"PyTorch computes: tensor arithmetic (`{hit[0]}`)")
            return
        for v in plain:
            ops = sorted(self.resolver.qualnames(v, self.scope) & OPERATOR_ARITH)
            if ops and tensors(skip=v):
                self.emit("FB003", v, f"PyTorch computes: tensor arithmetic (`{ops[0]}` "
                          "handed to a call with tensors)")
                return

    def _low_dtype(self, node: ast.Call) -> bool:
        for a in [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")]:
            for q in self.resolver.qualnames(a, self.scope):
                if q.startswith("torch.") and q[6:] in LOW_PRECISION_DTYPES:
                    return True
        return False

    def _literal_name(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Name):
            return False
        _, bounds = lookup(self.scope, node.id)
        return bool(bounds) and all(
            b.how == "expr" and isinstance(b.expr, _LITERALS) for b in bounds
        )


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None

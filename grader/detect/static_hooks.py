"""Checks of issue 17 that the Checker mixes in: operator getters and functools.partial,
finalisers not named by the policy, `.query()` of streams and events, and branches for
distributed tensors. Split from static_visit.py to keep modules small; they read the
Checker's state (scope, resolver, policy) and emit through it. static_calls.CallChecks
extends this mixin (it provides `_compute_method`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from grader.detect.static_names import AMBIGUOUS_METHODS, INSTRUMENT_ATTRS
from grader.detect.static_scope import lookup

if TYPE_CHECKING:
    from grader.detect.policy import Policy
    from grader.detect.static_resolve import Resolver
    from grader.detect.static_scope import Scope

_TYPE_CHECKS = frozenset({"builtins.isinstance", "builtins.issubclass"})
_EXIT_DUNDERS = frozenset({"__del__"})
_BUSY_PRODUCERS = ("torch.cuda.current_stream", "torch.cuda.default_stream", "torch.cuda.Event",
                   "torch.cuda.Stream", "torch.cuda.ExternalStream", "torch.Event", "torch.Stream",
                   "torch.accelerator.current_stream", "torch.cuda.streams",
                   "torch.cuda.Event.record", "torch.cuda.current_blas_handle")


class CheckerParts:
    """What static_visit.Checker provides to the checks mixed into it (HookChecks and
    static_operators.OperatorChecks): its resolver, policy and scope, and emitting."""

    resolver: Resolver
    policy: Policy

    @property
    def scope(self) -> Scope:
        raise NotImplementedError

    def emit(self, rule: str, node: ast.AST, message: str,
             at: tuple[int, int] | None = None) -> None:
        raise NotImplementedError


class HookChecks(CheckerParts):
    """Mixed into static_visit.Checker through static_calls.CallChecks, which provide these."""

    def check_ref(self, node: ast.AST, how: str = "") -> bool:
        raise NotImplementedError

    def classify(self, q: str) -> tuple[str, str] | None:
        raise NotImplementedError

    def _compute_method(self, name: str, receiver: ast.AST) -> bool:
        raise NotImplementedError

    def _distributed_guard(self, test: ast.expr) -> bool:
        """Is `test` only isinstance checks against torch.distributed types?"""
        checks = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) \
            else [test]
        for c in checks:
            if not (isinstance(c, ast.Call) and len(c.args) == 2 and self.resolver.qualnames(
                c.func, self.scope) & _TYPE_CHECKS):
                return False
            types = c.args[1].elts if isinstance(c.args[1], ast.Tuple) else [c.args[1]]
            quals = [self.resolver.qualnames(t, self.scope) for t in types]
            if not all(q and all(x.startswith("torch.distributed.") for x in q) for q in quals):
                return False
        return True

    def _exit_hooks(self, node: ast.Call, funcs: set[str]) -> None:
        """Finalisers not named by the policy: a weakref callback, a class made by type()
        with `__del__`, and `.query()` of a stream or event (is the device busy?)."""
        if funcs & {"weakref.ref", "weakref.ReferenceType", "_weakref.ref"} and (
            len(node.args) >= 2 or node.keywords
        ):
            self.emit("SB005", node, "weakref with a callback: a finaliser, run after the "
                      "harness is done")
        if "builtins.type" in funcs and len(node.args) == 3 and isinstance(node.args[2], ast.Dict):
            keys = {k.value for k in node.args[2].keys if isinstance(k, ast.Constant)}
            if keys & _EXIT_DUNDERS:
                self.emit("SB005", node, "makes a class with `__del__`: a finaliser")
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "query" and not node.args:
            made = self._producers(func.value)
            if any(q.startswith(_BUSY_PRODUCERS) for q in made):
                self.emit("TM004", node, "asks a CUDA stream or event whether work is pending: "
                          "the grader's instruments")

    def _producers(self, expr: ast.AST, depth: int = 0) -> set[str]:
        """Qualnames of what `expr` is or was made by (x = torch.cuda.Event(); x.query())."""
        out = set(self.resolver.qualnames(expr, self.scope))
        if isinstance(expr, ast.Call):
            out |= self.resolver.qualnames(expr.func, self.scope)
        elif isinstance(expr, ast.Name) and depth < 4:
            owner, bounds = lookup(self.scope, expr.id)
            for b in bounds:
                if b.how == "expr" and isinstance(b.expr, ast.Call) and owner is self.scope:
                    out |= self._producers(b.expr, depth + 1)
        return out

    def _getters(self, node: ast.Call, funcs: set[str]) -> None:
        """operator.methodcaller/attrgetter/itemgetter and functools.partial: what they reach
        is judged like the call or attribute they stand for (issue 17)."""
        if "operator.methodcaller" in funcs and node.args:
            for n in sorted(self.resolver.strings(node.args[0], self.scope) or ()):
                if n not in AMBIGUOUS_METHODS and self._compute_method(n, ast.Name("?")):
                    self.emit("FB002", node, f"PyTorch computes: Tensor method `.{n}()` "
                              "(through operator.methodcaller)")
                    break
        if not isinstance(node.func, ast.Call | ast.Name):
            return
        plain = [a for a in node.args if not isinstance(a, ast.Starred)]
        for c in self.resolver.callees(node.func, self.scope):
            if c.kind == "func" and not c.bound:
                continue
            how = {"attr": "operator.attrgetter", "item": "operator.itemgetter",
                   "method": "operator.methodcaller", "func": "functools.partial"}[c.kind]
            if not c.known:
                self.emit("DS003", node, f"{how} with a name computed at run time")
                continue
            receiver = c.bound[0][0] if c.bound else (plain[0] if plain else None)
            if c.kind == "method" and receiver is not None:
                self._methodcaller(node, receiver, c.names)
            elif c.kind == "attr" and receiver is not None and not self.resolver.qualnames(
                node, self.scope
            ):
                for n in sorted(c.names):  # attrgetter("sum")(x): the bound method x.sum
                    if self._compute_method(n.split(".")[-1], receiver):
                        self.emit("FB002", node, f"PyTorch computes: Tensor method `.{n}` "
                                  f"(through {how})")
                        break
            if c.kind == "attr" and {p for n in c.names for p in n.split(".")} & INSTRUMENT_ATTRS:
                self.emit("TM004", node, f"touches the grader's instruments (through {how})")
            self.check_ref(node, f" (through {how})")

    def _methodcaller(self, node: ast.Call, receiver: ast.AST, names: frozenset[str]) -> None:
        owners = self.resolver.qualnames(receiver, self.scope)
        for n in sorted(names):
            for q in sorted(owners):  # methodcaller("matmul", b)(torch): torch.matmul(b)
                verdict = self.classify(f"{q}.{n}")
                if verdict is not None:
                    self.emit(verdict[0], node, verdict[1] + " (through operator.methodcaller)")
                    return
            if not owners and self._compute_method(n, receiver):
                self.emit("FB002", node, f"PyTorch computes: Tensor method `.{n}()` (through "
                          "operator.methodcaller)")
                return

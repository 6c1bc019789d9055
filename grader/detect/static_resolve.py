"""What an expression may name or spell, decided on the syntax tree alone.

`qualnames` answers "which library object can this be?" through aliases, `from` imports,
attribute chains, getattr, __import__/importlib, globals()/vars()/__dict__ and sys.modules.
`strings` (static_strings.StringFolder) folds the constant strings those lookups are built
from ("mat" + "mul", f-strings, joins, slices, chr, base64): the disguises seen in hostile
entries. Operator getters and functools.partial are unwrapped by static_fold. All are
bounded (depth, set size, string length) so a hostile file cannot make them slow.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from grader.detect.static_fold import (
    Arg,
    Callee,
    CallSites,
    callees,
    device_types,
)
from grader.detect.static_scope import BUILTIN_NAMES, LOCAL, Bound, Scope, lookup
from grader.detect.static_strings import MAX_DEPTH, StringFolder, _cap

GLOBALS = "<globals>"  # the value of globals()/vars()/locals(): a namespace, keys are names
DICT = ".__dict__"

_SPLITTERS = frozenset({"unbind", "split", "chunk", "tensor_split", "split_with_sizes"})
_SCALAR_METHODS = frozenset(
    {"size", "stride", "dim", "ndimension", "numel", "nelement", "element_size", "item",
     "tolist", "data_ptr", "storage_offset", "is_contiguous", "get_device", "is_floating_point"}
)
_VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data", "grad"})


class Resolver(StringFolder):
    def __init__(self, scopes: dict[ast.AST, Scope], not_op: Callable[[str], bool]) -> None:
        self.scopes = scopes
        self._not_op = not_op  # torch names that return no tensor (policy's torch_utilities)
        self._tensors: dict[int, set[str]] = {}
        self._seqs: dict[int, set[str]] = {}
        # Per (binding scope, name): the answer, or None while it is being computed. Without
        # this, names bound to each other (`a = b; b = a; a = c`) branch exponentially; with
        # it, a cycle simply contributes nothing.
        self._name_quals: dict[tuple[int, str], set[str] | None] = {}
        self._name_strings: dict[tuple[int, str], set[str] | bool | None] = {}
        self._returns: dict[int, set[str] | bool | None] = {}
        self.calls = CallSites(scopes)

    # -- names ------------------------------------------------------------------------------
    def name_qualnames(self, name: str, scope: Scope, depth: int) -> set[str]:
        owner, bounds = lookup(scope, name)
        if owner is None:
            if name == "__builtins__":
                return {"builtins"}
            if name in BUILTIN_NAMES:
                return {f"builtins.{name}"}
            # A free name may come from `from torch import *`.
            root = scope
            while root.parent is not None:
                root = root.parent
            return _cap({f"{star}.{name}" for star in root.star_imports})
        key = (id(owner), name)
        if key in self._name_quals:
            return self._name_quals[key] or set()
        self._name_quals[key] = None
        out: set[str] = set()
        for b in bounds:
            out |= self._bound_qualnames(b, owner, depth)
        self._name_quals[key] = out = _cap(out)
        return out

    def _bound_qualnames(self, b: Bound, owner: Scope, depth: int) -> set[str]:
        if b.how == "qual":
            return {b.qual}
        if b.how == "def":
            return {f"{LOCAL}.{b.qual}"}
        if b.how == "expr" and b.expr is not None:
            return self.qualnames(b.expr, owner, depth + 1)
        return set()

    def qualnames(self, node: ast.AST, scope: Scope, depth: int = 0) -> set[str]:
        """Dotted names of the objects `node` may evaluate to (empty when unknown)."""
        if depth > MAX_DEPTH:
            return set()
        d = depth + 1
        if isinstance(node, ast.Name):
            return self.name_qualnames(node.id, scope, d)
        if isinstance(node, ast.Attribute):
            return _cap({f"{q}.{node.attr}" for q in self.qualnames(node.value, scope, d)})
        if isinstance(node, ast.Subscript):
            return self._subscript(node.value, node.slice, scope, d)
        if isinstance(node, ast.IfExp):
            return self.qualnames(node.body, scope, d) | self.qualnames(node.orelse, scope, d)
        if isinstance(node, ast.BoolOp):
            return _cap(set().union(*(self.qualnames(v, scope, d) for v in node.values)))
        if isinstance(node, ast.NamedExpr):
            return self.qualnames(node.value, scope, d)
        if isinstance(node, ast.Call):
            return self._call(node, scope, d)
        return set()

    def _subscript(self, value: ast.AST, key: ast.AST, scope: Scope, d: int,
                   key_scope: Scope | None = None) -> set[str]:
        keys = self.strings(key, key_scope or scope, d) or set()
        return self._subscript_keys(value, scope, keys, d)

    def _call(self, node: ast.Call, scope: Scope, d: int) -> set[str]:
        out: set[str] = set()
        plain = [(a, scope) for a in node.args if not isinstance(a, ast.Starred)]
        for c in self.callees(node.func, scope, d):
            args = [*c.bound, *plain]
            if c.kind == "attr" and args:  # attrgetter("a.b")(obj) is obj.a.b
                out |= {f"{q}.{n}" for q in self.qualnames(args[0][0], args[0][1], d)
                        for n in c.names}
            elif c.kind == "item" and args:  # itemgetter("k")(ns) is ns["k"]
                out |= self._subscript_keys(args[0][0], args[0][1], c.names, d)
            elif c.kind == "func" and c.func is not None:
                out |= self._apply(c.func, c.scope, args, node, d)
        return _cap(out)

    def callees(self, node: ast.expr, scope: Scope, depth: int = 0) -> list[Callee]:
        """What calling `node` may call (operator getters and functools.partial unwrapped)."""
        return callees(self, node, scope, depth)

    def getattr_names(self, obj: ast.expr, name: ast.expr, scope: Scope,
                      d: int = 0) -> set[str] | None:
        """The attribute names getattr(obj, name) may look up, or None when unknown."""
        got = self.strings(name, scope, d)
        if got is None:
            got = device_types(self, obj, name, scope, d)
        return None if got is None else {n for n in got if n}

    def _apply(self, func: ast.expr, fscope: Scope, args: list[Arg], node: ast.Call,
               d: int) -> set[str]:
        """What calling `func` with `args` evaluates to, where that is a named object."""
        funcs = self.qualnames(func, fscope, d)
        out: set[str] = set()
        if "builtins.getattr" in funcs and len(args) >= 2:
            names = self.getattr_names(args[0][0], args[1][0], args[1][1], d) or set()
            out |= {f"{q}.{n}" for q in self.qualnames(args[0][0], args[0][1], d) for n in names}
        if funcs & {"builtins.__import__", "importlib.__import__"} and args:
            has_from = len(args) >= 4 or any(k.arg == "fromlist" for k in node.keywords)
            for mod in self.strings(args[0][0], args[0][1], d) or set():
                out.add(mod if has_from else mod.split(".")[0])
        if "importlib.import_module" in funcs and args:
            out |= self.strings(args[0][0], args[0][1], d) or set()
        if "functools.partial" in funcs and args:
            out |= self.qualnames(args[0][0], args[0][1], d)
        if funcs & {"builtins.globals", "builtins.locals"} or (
            "builtins.vars" in funcs and not args
        ):
            out.add(GLOBALS)
        if "builtins.vars" in funcs and args:
            out |= {q + DICT for q in self.qualnames(args[0][0], args[0][1], d)}
        # namespace.get("name") behaves like namespace["name"]
        if isinstance(func, ast.Attribute) and func.attr == "get" and args:
            out |= self._subscript(func.value, args[0][0], fscope, d, args[0][1])
        return out

    def _subscript_keys(self, value: ast.AST, scope: Scope, keys: set[str] | frozenset[str],
                        d: int) -> set[str]:
        out: set[str] = set()
        for base in self.qualnames(value, scope, d):
            for k in keys:
                if not k:
                    continue
                if base == GLOBALS:
                    out |= self.name_qualnames(k, _module(scope), d)
                elif base.endswith(DICT):
                    out.add(f"{base[: -len(DICT)]}.{k}")
                elif base == "sys.modules":
                    out.add(k)
                elif base == "builtins.__dict__" or base == "builtins":
                    out.add(f"builtins.{k}")
        return _cap(out)

    # -- tensors ---------------------------------------------------------------------------
    def tensor_names(self, scope: Scope) -> tuple[set[str], set[str]]:
        """Names bound to tensors in `scope`, and names bound to sequences of tensors."""
        key = id(scope)
        if key in self._tensors:
            return self._tensors[key], self._seqs[key]
        tensors = set(scope.tensor_evidence)
        seqs = {scope.vararg} if scope.vararg else set()
        for name, arg in scope.params.items():
            if arg.annotation is not None and any(
                q == "torch.Tensor" for q in self.qualnames(arg.annotation, scope)
            ):
                tensors.add(name)
        self._tensors[key], self._seqs[key] = tensors, seqs
        for _ in range(4):  # fixed point over assignments; four rounds reach real code's chains
            before = len(tensors) + len(seqs)
            for name, bounds in scope.bindings.items():
                for b in bounds:
                    if b.expr is None or b.how not in ("expr", "elem"):
                        continue
                    if b.how == "expr" and self.is_tensor(b.expr, scope):
                        tensors.add(name)
                    elif b.how == "elem" and self.is_seq(b.expr, scope):
                        tensors.add(name)
                    elif b.how == "expr" and self.is_seq(b.expr, scope):
                        seqs.add(name)
            if len(tensors) + len(seqs) == before:
                break
        return tensors, seqs

    def is_seq(self, node: ast.AST, scope: Scope) -> bool:
        if isinstance(node, ast.Name):
            owner, _ = lookup(scope, node.id)
            return owner is not None and node.id in self.tensor_names(owner)[1]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in _SPLITTERS and self.is_tensor(node.func.value, scope)
        return False

    def is_tensor(self, node: ast.AST, scope: Scope, depth: int = 0) -> bool:
        """True when `node` certainly evaluates to a torch tensor (never guesses yes)."""
        if depth > MAX_DEPTH:
            return False
        d = depth + 1
        if isinstance(node, ast.Name):
            owner, _ = lookup(scope, node.id)
            return owner is not None and node.id in self.tensor_names(owner)[0]
        if isinstance(node, ast.Subscript):
            return self.is_tensor(node.value, scope, d) or self.is_seq(node.value, scope)
        if isinstance(node, ast.Attribute):
            return node.attr in _VIEW_ATTRS and self.is_tensor(node.value, scope, d)
        if isinstance(node, ast.BinOp):
            return self.is_tensor(node.left, scope, d) or self.is_tensor(node.right, scope, d)
        if isinstance(node, ast.UnaryOp):
            return self.is_tensor(node.operand, scope, d)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and self.is_tensor(func.value, scope, d):
                return func.attr not in _SCALAR_METHODS
            return any(
                _is_torch_function(q) and not self._not_op(q)
                for q in self.qualnames(func, scope, d)
            )
        return False


def _is_torch_function(q: str) -> bool:
    parts = q.split(".")
    return parts[0] == "torch" and len(parts) == 2 and parts[1][:1].islower()


def _module(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


__all__ = ["GLOBALS", "Bound", "Resolver"]

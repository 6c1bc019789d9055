"""What an expression may name or spell, decided on the syntax tree alone.

`qualnames` answers "which library object can this be?" through aliases, `from` imports,
attribute chains, getattr, __import__/importlib, globals()/vars()/__dict__ and sys.modules.
`strings` folds the constant strings those lookups are built from ("mat" + "mul",
f-strings, joins, slices, chr, base64): the disguises seen in hostile entries.
Both are bounded (depth, set size, string length) so a hostile file cannot make them slow.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
from collections.abc import Callable
from itertools import product

from grader.detect.static_fold import (
    MAX_CHR,
    Arg,
    Callee,
    CallSites,
    callees,
    device_types,
    foldable_function,
    param_args,
    returns,
)
from grader.detect.static_scope import BUILTIN_NAMES, LOCAL, Bound, Scope, lookup

MAX_DEPTH = 24
MAX_SET = 16
MAX_LEN = 512
GLOBALS = "<globals>"  # the value of globals()/vars()/locals(): a namespace, keys are names
DICT = ".__dict__"

_STR_METHODS = frozenset(
    {"upper", "lower", "strip", "lstrip", "rstrip", "replace", "capitalize", "title",
     "swapcase", "removeprefix", "removesuffix", "casefold"}
)
_SPLITTERS = frozenset({"unbind", "split", "chunk", "tensor_split", "split_with_sizes"})
_SCALAR_METHODS = frozenset(
    {"size", "stride", "dim", "ndimension", "numel", "nelement", "element_size", "item",
     "tolist", "data_ptr", "storage_offset", "is_contiguous", "get_device", "is_floating_point"}
)
_VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data", "grad"})


def _cap(values: set[str]) -> set[str]:
    return set(sorted(values)[:MAX_SET]) if len(values) > MAX_SET else values


class Resolver:
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

    # -- constant strings --------------------------------------------------------------------
    def strings(self, node: ast.AST, scope: Scope, depth: int = 0) -> set[str] | None:
        """Every string `node` may evaluate to, or None when that cannot be decided."""
        if depth > MAX_DEPTH:
            return None
        d = depth + 1
        try:
            result = self._strings(node, scope, d)
        except (ValueError, TypeError, IndexError, UnicodeError, binascii.Error, LookupError,
                ArithmeticError):
            # ArithmeticError: OverflowError of chr(2**70) or int(1e400) (issue 17: a huge
            # constant fed to a builtin once crashed the analyser).
            return None
        if result is None or any(len(s) > MAX_LEN for s in result):
            return None
        return _cap(result)

    def _strings(self, node: ast.AST, scope: Scope, d: int) -> set[str] | None:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return {node.value}
            if isinstance(node.value, int | float) and not isinstance(node.value, bool):
                return {str(node.value)}
            return None
        if isinstance(node, ast.Name):
            owner, bounds = lookup(scope, node.id)
            if owner is None or not bounds:
                return None
            key = (id(owner), node.id)
            if key in self._name_strings:  # False: in progress (a cycle), so unknown
                memo = self._name_strings[key]
                return memo if isinstance(memo, set) else None
            self._name_strings[key] = False
            out: set[str] | None = set()
            for b in bounds:
                if b.how == "unknown" and node.id in owner.params and b is bounds[0]:
                    got = self._param_strings(owner, node.id, d)
                else:
                    got = self.strings(b.expr, owner, d) if b.how == "expr" and b.expr else None
                if got is None or out is None:
                    out = None
                    break
                out |= got
            self._name_strings[key] = out
            return out
        if isinstance(node, ast.JoinedStr):
            parts: list[set[str]] = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    if v.format_spec is not None or v.conversion not in (-1, ord("s")):
                        return None
                    got = self.strings(v.value, scope, d)
                else:
                    got = self.strings(v, scope, d)
                if got is None:
                    return None
                parts.append(got)
            return self._concat(parts)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Add):
                left, right = self.strings(node.left, scope, d), self.strings(node.right, scope, d)
                return None if left is None or right is None else self._concat([left, right])
            if isinstance(node.op, ast.Mult) and isinstance(node.right, ast.Constant):
                times = node.right.value
                left = self.strings(node.left, scope, d)
                if left is None or not isinstance(times, int) or not 0 <= times <= 64:
                    return None
                return {s * times for s in left}
            return None
        if isinstance(node, ast.Subscript):
            base = self.strings(node.value, scope, d)
            if base is None:
                return None
            return {s[self._index(node.slice)] for s in base}
        if isinstance(node, ast.IfExp):
            yes, no = self.strings(node.body, scope, d), self.strings(node.orelse, scope, d)
            return None if yes is None or no is None else yes | no
        if isinstance(node, ast.Call):
            return self._string_call(node, scope, d)
        return None

    def _param_strings(self, fn_scope: Scope, name: str, d: int) -> set[str] | None:
        """A parameter that is a constant string at every call site (and its default where a
        call omits it) folds to those strings: `compare_version("triton", ...)`."""
        fn = fn_scope.node
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or fn_scope.parent is None:
            return None
        if not foldable_function(self, fn, fn_scope.parent, d):
            return None
        sites = self.calls.sites(fn)
        args = None if sites is None else param_args(fn, name, sites, fn_scope)
        if args is None or len(args) > MAX_SET:
            return None
        out: set[str] = set()
        for expr, scope in args:
            got = self.strings(expr, scope, d)
            if got is None:
                return None
            out |= got
        return out

    def _return_strings(self, func: ast.expr, scope: Scope, d: int) -> set[str] | None:
        """A call of a module function all of whose returns fold: `infer_device()`."""
        if not isinstance(func, ast.Name):
            return None
        owner, bounds = lookup(scope, func.id)
        if owner is None or len(bounds) != 1 or bounds[0].how != "def":
            return None
        fn = bounds[0].expr
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            return None
        if not foldable_function(self, fn, owner, d):
            return None
        memo = self._returns.get(id(fn))
        if memo is not None:
            return memo if isinstance(memo, set) else None
        self._returns[id(fn)] = False  # in progress: a recursive call is unknown
        values = returns(fn)
        fn_scope = self.scopes.get(fn, owner)
        out: set[str] | None = set()
        for v in values or []:
            got = self.strings(v, fn_scope, d)
            if got is None or out is None:
                out = None
                break
            out |= got
        result = None if values is None or out is None else _cap(out)
        self._returns[id(fn)] = result
        return result

    @staticmethod
    def _concat(parts: list[set[str]]) -> set[str]:
        total = 1
        for p in parts:
            total *= max(len(p), 1)
        if total > MAX_SET:
            raise ValueError("too many combinations")
        return {"".join(c) for c in product(*parts)}

    @staticmethod
    def _index(node: ast.AST) -> int | slice:
        def const(n: ast.AST | None) -> int | None:
            if n is None:
                return None
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
                inner = const(n.operand)
                return None if inner is None else -inner
            if isinstance(n, ast.Constant) and isinstance(n.value, int):
                return n.value
            raise ValueError("not a constant index")

        if isinstance(node, ast.Slice):
            return slice(const(node.lower), const(node.upper), const(node.step))
        value = const(node)
        if value is None:
            raise ValueError("not a constant index")
        return value

    def _seq_strings(self, node: ast.AST, scope: Scope, d: int) -> list[set[str]] | None:
        if isinstance(node, ast.Name):
            owner, bounds = lookup(scope, node.id)
            if owner is not None and len(bounds) == 1 and bounds[0].how == "expr":
                assert bounds[0].expr is not None
                return self._seq_strings(bounds[0].expr, owner, d + 1)
            return None
        if isinstance(node, ast.List | ast.Tuple):
            items = [self.strings(e, scope, d) for e in node.elts]
            return None if any(i is None for i in items) else items  # type: ignore[return-value]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            if node.func.id in ("reversed", "list", "tuple"):
                whole = self.strings(node.args[0], scope, d)
                if whole is not None and len(whole) == 1:
                    chars = list(next(iter(whole)))
                    return [{c} for c in (chars[::-1] if node.func.id == "reversed" else chars)]
                return self._seq_strings(node.args[0], scope, d)
        return None

    def _string_call(self, node: ast.Call, scope: Scope, d: int) -> set[str] | None:
        func, args = node.func, node.args
        if isinstance(func, ast.Name) and len(args) == 1:
            if func.id == "chr" and isinstance(args[0], ast.Constant):
                code = args[0].value
                if type(code) is not int or not 0 <= code < MAX_CHR:
                    return None  # bounded: chr(2**70), chr(1e400), chr(True) are not folded
                return {chr(code)}
            if func.id == "str":
                return self.strings(args[0], scope, d)
        if isinstance(func, ast.Name) and not args and not node.keywords:
            got = self._return_strings(func, scope, d)
            if got is not None:
                return got
        quals = self.qualnames(func, scope, d)
        if quals & {"codecs.decode", "codecs.encode"} and len(args) >= 2:
            text, enc = self.strings(args[0], scope, d), self.strings(args[1], scope, d)
            if text is not None and enc is not None and {e.replace("-", "_") for e in enc} <= {
                "rot13", "rot_13"
            }:
                return {codecs.decode(t, "rot13") for t in text}
            return None
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "join" and len(args) == 1:
            seps, items = self.strings(func.value, scope, d), self._seq_strings(args[0], scope, d)
            if seps is None or items is None:
                return None
            total = len(seps)
            for item in items:
                total *= max(len(item), 1)
                if total > MAX_SET:
                    return None
            return {sep.join(c) for sep in seps for c in product(*items)} if items else seps
        if func.attr == "decode":
            raw = self._bytes(func.value, scope, d)
            return None if raw is None else {raw.decode("utf-8", errors="replace")}
        if func.attr in _STR_METHODS:
            base = self.strings(func.value, scope, d)
            const_args = [self.strings(a, scope, d) for a in args]
            if base is None or any(a is None or len(a) != 1 for a in const_args):
                return None
            plain = [next(iter(a)) for a in const_args]  # type: ignore[arg-type]
            return {getattr(s, func.attr)(*plain) for s in base}
        return None

    def _bytes(self, node: ast.AST, scope: Scope, d: int) -> bytes | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            return node.value
        if isinstance(node, ast.Call) and node.args:
            quals = self.qualnames(node.func, scope, d)
            if quals & {"base64.b64decode", "base64.standard_b64decode", "base64.b32decode",
                        "base64.b16decode", "base64.urlsafe_b64decode"}:
                text = self.strings(node.args[0], scope, d)
                raw = self._bytes(node.args[0], scope, d) if text is None else None
                if text is not None and len(text) == 1:
                    raw = next(iter(text)).encode()
                if raw is None:
                    return None
                fn = next(q for q in sorted(quals) if q.startswith("base64.")).split(".")[1]
                return bytes(getattr(base64, fn)(raw))
            if isinstance(node.func, ast.Name) and node.func.id == "bytes":
                return self._bytes(node.args[0], scope, d)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "encode":
                text = self.strings(node.func.value, scope, d)
                return next(iter(text)).encode() if text and len(text) == 1 else None
        return None

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

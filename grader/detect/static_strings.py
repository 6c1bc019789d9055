"""Constant strings an expression may evaluate to, decided on the syntax tree alone.

The names getattr, __import__ and namespace lookups are built from ("mat" + "mul",
f-strings, joins, slices, chr, base64, rot13; a parameter constant at every call site; a
function that returns constants): the disguises seen in hostile entries. Bounded (depth, set
size, string length, code points) so that a hostile file can make it answer "unknown", never
make it slow or raise (issue 17: `chr` of a huge constant once did). Mixed into
static_resolve.Resolver, whose name resolution it uses.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
from itertools import product

from grader.detect.static_fold import (
    MAX_CHR,
    CallSites,
    foldable_function,
    param_args,
    returns,
)
from grader.detect.static_scope import Scope, lookup

MAX_DEPTH = 24
MAX_SET = 16
MAX_LEN = 512

_STR_METHODS = frozenset(
    {"upper", "lower", "strip", "lstrip", "rstrip", "replace", "capitalize", "title",
     "swapcase", "removeprefix", "removesuffix", "casefold"}
)


def _cap(values: set[str]) -> set[str]:
    return set(sorted(values)[:MAX_SET]) if len(values) > MAX_SET else values


class StringFolder:
    """Mixed into Resolver, which provides qualnames() and these memos."""

    scopes: dict[ast.AST, Scope]
    calls: CallSites
    _name_strings: dict[tuple[int, str], set[str] | bool | None]
    _returns: dict[int, set[str] | bool | None]

    def qualnames(self, node: ast.AST, scope: Scope, depth: int = 0) -> set[str]:
        raise NotImplementedError

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

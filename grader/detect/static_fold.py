"""What the analyser can decide about calls without running them (issue 17).

- Callees: what `f(...)` calls when `f` is built by `operator.attrgetter`, `itemgetter`,
  `methodcaller` or `functools.partial` (a disguise of a plain attribute, subscript or method
  call: `methodcaller("matmul", b)(a)` is `a.matmul(b)`).
- Call sites: where each function the module defines is called, so that a parameter that
  is the same constant at every call site (Liger-Kernel's `compare_version("triton", ...)`
  reaching `importlib.import_module(package)`) folds to that constant, and a function that
  only returns constants (`infer_device()`) folds to them.
- Device types: `getattr(torch, device.type)` names one of torch's device modules.

Everything here is bounded by the resolver's depth and set caps: a hostile file may make it
answer "unknown", never make it slow or raise.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

from grader.detect.static_scope import Scope, lookup

# The device types a `torch.device` can have that name a torch module of device queries.
DEVICE_TYPES = frozenset({"cuda", "cpu", "xpu", "npu", "mps", "mtia", "musa", "hpu"})
MAX_CHR = 0x110000  # chr() of anything else raises (ValueError, OverflowError)
# Decorators that call the function with the arguments its callers wrote: its parameters
# can be folded from its call sites. Any other decorator may call it with anything.
_TRANSPARENT_DECORATORS = frozenset(
    {"contextlib.contextmanager", "functools.lru_cache", "functools.cache", "builtins.staticmethod"}
)
_GETTERS = {"operator.attrgetter": "attr", "operator.itemgetter": "item",
            "operator.methodcaller": "method"}

Arg = tuple[ast.expr, Scope]
_Function = ast.FunctionDef | ast.AsyncFunctionDef
GetterKind = Literal["attr", "item", "method", "func"]


@dataclass(frozen=True)
class Callee:
    """One thing a called expression may be.

    kind "attr"/"item"/"method": an operator getter; `names` the attribute paths, keys or
    method names it was built with (`known` False when one could not be folded). kind
    "func": a plain callable `func` (in `scope`); `bound` the arguments functools.partial
    put before the caller's."""

    kind: GetterKind
    scope: Scope
    names: frozenset[str] = frozenset()
    known: bool = True
    func: ast.expr | None = None
    bound: tuple[Arg, ...] = ()


def callees(resolver: Resolves, node: ast.expr, scope: Scope, depth: int) -> list[Callee]:
    """What calling `node` may call: getters and partials unwrapped, names followed."""
    out: list[Callee] = []
    todo: list[tuple[ast.expr, Scope, tuple[Arg, ...], int]] = [(node, scope, (), depth)]
    seen: set[tuple[int, int]] = set()
    while todo and len(out) < 16:
        expr, sc, bound, d = todo.pop()
        if d > 24 or (id(expr), len(bound)) in seen:
            continue
        seen.add((id(expr), len(bound)))
        if isinstance(expr, ast.Name):
            owner, bounds = lookup(sc, expr.id)
            exprs = [b.expr for b in bounds if b.how == "expr" and isinstance(b.expr, ast.Call)]
            if owner is not None and exprs and len(exprs) == len(bounds):
                todo.extend((e, owner, bound, d + 1) for e in exprs if isinstance(e, ast.expr))
                continue
        if isinstance(expr, ast.Call):
            funcs = resolver.qualnames(expr.func, sc, d + 1)
            kinds = {_GETTERS[q] for q in funcs if q in _GETTERS}
            if kinds and expr.args:
                names, known = _getter_names(resolver, expr, sc, d + 1, "method" in kinds)
                # itemgetter's keys are indices far more often than names; a computed key
                # matters only on a namespace (globals(), vars(m)), itself a finding.
                known = known or kinds == {"item"}
                for kind in sorted(kinds):
                    out.append(Callee(kind, sc, frozenset(names), known, bound=bound))  # type: ignore[arg-type]
                continue
            if "functools.partial" in funcs and expr.args:
                more = tuple((a, sc) for a in expr.args[1:] if not isinstance(a, ast.Starred))
                todo.append((expr.args[0], sc, more + bound, d + 1))
                continue
        out.append(Callee("func", sc, func=expr, bound=bound))
    return out


def _getter_names(resolver: Resolves, call: ast.Call, scope: Scope, d: int,
                  method: bool) -> tuple[set[str], bool]:
    args = call.args[:1] if method else call.args
    names: set[str] = set()
    for a in args:
        got = resolver.strings(a, scope, d)
        if got is None:
            if isinstance(a, ast.Constant):  # itemgetter(0): an index, not a name
                continue
            return names, False
        names |= got
    return names, True


def device_types(resolver: Resolves, obj: ast.expr, name: ast.expr, scope: Scope,
                 d: int) -> set[str] | None:
    """`getattr(torch, dev.type)` where `dev` is a torch.device or a tensor's `.device`:
    one of torch's device modules (Liger-Kernel's device_context). None otherwise."""
    if not (isinstance(name, ast.Attribute) and name.attr == "type"):
        return None
    if resolver.qualnames(obj, scope, d) != {"torch"}:
        return None
    dev = name.value
    if isinstance(dev, ast.Attribute) and dev.attr == "device":
        return set(DEVICE_TYPES) if resolver.is_tensor(dev.value, scope) else None
    if not isinstance(dev, ast.Name):
        return None
    owner, bounds = lookup(scope, dev.id)
    if owner is None:
        return None
    made = [b for b in bounds if b.how == "expr" and isinstance(b.expr, ast.Call)
            and "torch.device" in resolver.qualnames(b.expr.func, owner, d)]
    params = [b for b in bounds if b.how == "unknown" and dev.id in owner.params]
    if made and len(made) + len(params) == len(bounds) and len(params) <= 1:
        return set(DEVICE_TYPES)
    return None


def walk_scoped(scopes: dict[ast.AST, Scope]) -> Iterator[tuple[ast.AST, Scope, ast.AST | None]]:
    """Every node of the module with the scope its names are looked up in, and its parent.
    Iterative: a deeply nested file must not recurse here."""
    root = next((n for n, s in scopes.items() if s.parent is None), None)
    if root is None:
        return
    todo: list[tuple[ast.AST, Scope, ast.AST | None]] = [(root, scopes[root], None)]
    while todo:
        node, scope, parent = todo.pop()
        yield node, scope, parent
        inner = scopes.get(node, scope)
        todo.extend((child, inner, node) for child in ast.iter_child_nodes(node))


class CallSites:
    """Where each function defined in the module is called by its own name."""

    def __init__(self, scopes: dict[ast.AST, Scope]) -> None:
        self._scopes = scopes
        self._sites: dict[ast.AST, list[tuple[ast.Call, Scope]]] | None = None
        self._escapes: set[ast.AST] = set()

    def _build(self) -> dict[ast.AST, list[tuple[ast.Call, Scope]]]:
        sites: dict[ast.AST, list[tuple[ast.Call, Scope]]] = {}
        for node, scope, parent in walk_scoped(self._scopes):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                for b in lookup(scope, node.id)[1]:
                    if b.how == "def" and isinstance(b.expr, _Function):
                        if isinstance(parent, ast.Call) and parent.func is node:
                            sites.setdefault(b.expr, []).append((parent, scope))
                        else:
                            self._escapes.add(b.expr)
        return sites

    def sites(self, fn: ast.AST) -> list[tuple[ast.Call, Scope]] | None:
        """Every call of `fn` by name, or None when its name is also used otherwise."""
        if self._sites is None:
            self._sites = self._build()
        if fn in self._escapes:
            return None
        return self._sites.get(fn, [])


def param_args(fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str,
               sites: list[tuple[ast.Call, Scope]], fn_scope: Scope
               ) -> list[Arg] | None:
    """The expressions `param` takes at every call site (its default where one omits it), or
    None when some call site's value cannot be told (starred arguments, unknown position)."""
    args = fn.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    if param not in positional and param not in [a.arg for a in args.kwonlyargs]:
        return None
    if not sites:
        return None
    default = _default(fn, param)
    out: list[Arg] = []
    for call, scope in sites:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            return None
        value: ast.expr | None = None
        if param in positional and positional.index(param) < len(call.args):
            value = call.args[positional.index(param)]
        for k in call.keywords:
            if k.arg == param:
                value = k.value
        if value is not None:
            out.append((value, scope))
        elif default is not None and fn_scope.parent is not None:
            out.append((default, fn_scope.parent))
        else:
            return None
    return out


def _default(fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> ast.expr | None:
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    offset = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        if a.arg == param and i >= offset:
            return args.defaults[i - offset]
    for a, dflt in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if a.arg == param:
            return dflt
    return None


class Names(Protocol):
    def qualnames(self, node: ast.AST, scope: Scope, depth: int = 0) -> set[str]: ...


class Resolves(Names, Protocol):
    """What this module asks of the resolver (static_resolve.Resolver)."""

    def strings(self, node: ast.AST, scope: Scope, depth: int = 0) -> set[str] | None: ...

    def is_tensor(self, node: ast.AST, scope: Scope, depth: int = 0) -> bool: ...


def foldable_function(resolver: Names, fn: ast.AST, scope: Scope, d: int) -> bool:
    """Is `fn` a plain function whose callers' arguments are what it receives?"""
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if not resolver.qualnames(target, scope, d) & _TRANSPARENT_DECORATORS:
            return False
    return True


def returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr] | None:
    """The values `fn` returns (its own returns, not nested functions'), or None when it
    yields. Falling off the end returns None, which names nothing: no string is missed."""
    found: list[ast.expr] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await):
            return None
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node.value)
        todo.extend(ast.iter_child_nodes(node))
    return found or None

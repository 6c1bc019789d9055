"""Scopes and name bindings of an entry's module: who is bound to what, by which statement.

Flow-insensitive on purpose: a name may take any of the values any of its bindings give it,
so `f = os.path.join; f = torch.matmul` resolves to both. Nothing here executes entry code.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Literal

BUILTIN_NAMES = frozenset(dir(builtins)) | {"__builtins__"}
LOCAL = "<entry>"  # qualname prefix of things the entry defines itself

ScopeKind = Literal["module", "function", "class"]


@dataclass(frozen=True)
class Bound:
    """One way a name gets a value.

    how: "qual" (an import: `qual` is the dotted name), "expr" (assigned `expr`), "elem"
    (one element of unpacking `expr`), "def" (a def or class of this module), "unknown".
    """

    how: Literal["qual", "expr", "elem", "def", "unknown"]
    qual: str = ""
    expr: ast.AST | None = None


@dataclass(eq=False)
class Scope:
    kind: ScopeKind
    node: ast.AST
    parent: Scope | None
    bindings: dict[str, list[Bound]] = field(default_factory=dict)
    params: dict[str, ast.arg] = field(default_factory=dict)
    vararg: str | None = None  # `*inputs`: a tuple of tensors when this is kernel()
    declared_global: set[str] = field(default_factory=set)
    star_imports: list[str] = field(default_factory=list)
    tensor_evidence: set[str] = field(default_factory=set)  # names used like tensors

    def bind(self, name: str, bound: Bound) -> None:
        self.bindings.setdefault(name, []).append(bound)


class ScopeBuilder(ast.NodeVisitor):
    """Builds a Scope per module, function, lambda and class, and fills their bindings."""

    def __init__(self, tensor_attrs: frozenset[str]) -> None:
        self.scopes: dict[ast.AST, Scope] = {}
        self.module: Scope | None = None
        self._stack: list[Scope] = []
        self._tensor_attrs = tensor_attrs

    @property
    def cur(self) -> Scope:
        return self._stack[-1]

    def build(self, tree: ast.Module) -> Scope:
        self.module = Scope("module", tree, None)
        self.scopes[tree] = self.module
        self._stack = [self.module]
        self.generic_visit(tree)
        return self.module

    def _target(self, target: ast.AST, bound: Bound) -> None:
        if isinstance(target, ast.Name):
            self.cur.bind(target.id, bound)
        elif isinstance(target, ast.Tuple | ast.List):
            value = bound.expr
            if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts, strict=True):
                    self._target(t, Bound("expr", expr=v))
            else:
                for t in target.elts:
                    self._target(t, Bound("elem", expr=value) if value else bound)
        elif isinstance(target, ast.Starred):
            self._target(target.value, Bound("unknown"))

    # -- binding statements ---------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.cur.bind(alias.asname, Bound("qual", qual=alias.name))
            else:  # `import a.b.c` binds `a`
                top = alias.name.split(".")[0]
                self.cur.bind(top, Bound("qual", qual=top))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:  # relative: a sibling file of the entry, not a library
            base = f"{LOCAL}.{base}" if base else LOCAL
        for alias in node.names:
            if alias.name == "*":
                self.cur.star_imports.append(base)
            else:
                qual = f"{base}.{alias.name}" if base else alias.name
                self.cur.bind(alias.asname or alias.name, Bound("qual", qual=qual))

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._target(t, Bound("expr", expr=node.value))
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target, Bound("expr", expr=node.value))
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, Bound("unknown"))
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._target(node.target, Bound("expr", expr=node.value))
        self.generic_visit(node)

    def _for(self, node: ast.For | ast.AsyncFor | ast.comprehension) -> None:
        # `for name in ("mat", "mul")`: each element is a possible value.
        if isinstance(node.iter, ast.Tuple | ast.List | ast.Set):
            for elt in node.iter.elts:
                self._target(node.target, Bound("expr", expr=elt))
        else:
            self._target(node.target, Bound("elem", expr=node.iter))

    def visit_For(self, node: ast.For) -> None:
        self._for(node)
        self.generic_visit(node)

    visit_AsyncFor = visit_For  # type: ignore[assignment]

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self._for(node)
        self.generic_visit(node)

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._target(node.optional_vars, Bound("unknown"))
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.cur.bind(node.name, Bound("unknown"))
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.cur.declared_global.update(node.names)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.attr in self._tensor_attrs:
            self.cur.tensor_evidence.add(node.value.id)
        self.generic_visit(node)

    # -- new scopes -------------------------------------------------------------------------
    def _enter(self, kind: ScopeKind, node: ast.AST) -> Scope:
        scope = Scope(kind, node, self.cur)
        self.scopes[node] = scope
        return scope

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        for d in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.visit(d)
        scope = self._enter("function", node)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            scope.params[a.arg] = a
            scope.bind(a.arg, Bound("unknown"))
        for star in (args.vararg, args.kwarg):
            if star is not None:
                scope.bind(star.arg, Bound("unknown"))
        scope.vararg = args.vararg.arg if args.vararg else None
        self._stack.append(scope)
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            self.visit(stmt)
        self._stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.cur.bind(node.name, Bound("def", qual=node.name, expr=node))
        self._function(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(d)
        self.cur.bind(node.name, Bound("def", qual=node.name, expr=node))
        scope = self._enter("class", node)
        self._stack.append(scope)
        for stmt in node.body:
            self.visit(stmt)
        self._stack.pop()


def lookup(scope: Scope, name: str) -> tuple[Scope | None, list[Bound]]:
    """The scope that binds `name` as seen from `scope`, and its bindings."""
    if name in scope.declared_global:
        while scope.parent is not None:
            scope = scope.parent
    s: Scope | None = scope
    first = True
    while s is not None:
        # Class bodies are not enclosing scopes for the functions inside them.
        if (first or s.kind != "class") and name in s.bindings:
            return s, s.bindings[name]
        first = False
        s = s.parent
    return None, []


def module_of(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope

"""The checks: one pass over the host code of an entry, emitting findings.

Code inside @triton.jit functions is the DSL and is never judged for compute (tl.sum, tl.dot
and `a @ b` there are exactly what an entry should write). Everything else is host code.

This module holds the pass itself (emitting, what a dotted name is, scopes and regions,
imports, names and attributes, try/except fallback); the Checker mixes in the checks of calls
(static_calls, with static_hooks) and of operators and assignments (static_operators), one
module per theme (issue 33).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from grader.detect.policy import Policy
from grader.detect.rules import RULES
from grader.detect.static_calls import CallChecks
from grader.detect.static_hooks import _EXIT_DUNDERS, _TYPE_CHECKS
from grader.detect.static_names import (
    ARRAY_PROTOCOL_ATTRS,
    FRAME_ATTRS,
    INSTRUMENT_ATTRS,
    OPERATOR_MATMUL,
    TENSOR_METHODS,
    TORCH_CONSTANTS,
    TORCH_DTYPES,
    TORCH_HOOKS,
    TORCH_MODULES,
)
from grader.detect.static_operators import OperatorChecks
from grader.detect.static_resolve import GLOBALS, Resolver
from grader.detect.static_scope import LOCAL, Scope
from grader.model.findings import Finding, Layer, Severity

_COMPUTE_RULES = frozenset({"FB001", "FB002", "FB003"})
_NAMESPACE_FUNCS = frozenset({"builtins.globals", "builtins.vars", "builtins.locals"})
# Where an uncalled reference is only read as a value: compared, tested, used in arithmetic
# or an f-string, annotated, or a bare statement. (Bound to a plain name is decided apart.)
_VALUE_PARENTS = (ast.Compare, ast.BinOp, ast.UnaryOp, ast.AugAssign, ast.Expr,
                  ast.FormattedValue, ast.If, ast.While, ast.Assert, ast.comprehension, ast.arg)
# Parents that pass their child's value on: the reference is where they are.
_TRANSPARENT = (ast.IfExp, ast.BoolOp, ast.NamedExpr, ast.Attribute, ast.Subscript)


@dataclass
class Context:
    """What the module-level pass learnt: which functions are jit, reachable, main-only."""

    jit_names: set[str]
    jit_nodes: set[ast.AST]
    unreachable: set[ast.AST]  # top-level defs kernel() cannot reach
    main_blocks: set[ast.AST]  # `if __name__ == "__main__":` bodies: never run by the harness
    setup: set[ast.AST] = field(default_factory=set)  # a module entry's __init__ methods


@dataclass
class Checker(CallChecks, OperatorChecks):
    source_lines: list[str]
    filename: str
    policy: Policy
    resolver: Resolver
    scopes: dict[ast.AST, Scope]
    ctx: Context
    findings: list[Finding] = field(default_factory=list)
    _scope: Scope | None = None
    _region: Severity | None = None  # cap on severities: INFO in main blocks, WARNING unreached
    _setup: bool = False  # inside a module entry's __init__: compute there is only a warning
    _seen: set[tuple[str, int, int]] = field(default_factory=set)
    _parents: dict[ast.AST, ast.AST] = field(default_factory=dict)

    # -- emitting ---------------------------------------------------------------------------
    def emit(self, rule: str, node: ast.AST, message: str,
             at: tuple[int, int] | None = None) -> None:
        line, col = at or (getattr(node, "lineno", 1), getattr(node, "col_offset", 0))
        if (rule, line, col) in self._seen:  # the outer end of a chain already said it
            return
        self._seen.add((rule, line, col))
        severity = self.policy.severity_of(rule)
        if self._region is Severity.INFO:
            severity, message = Severity.INFO, f"{message} (only under __main__: never run)"
        elif self._region is Severity.WARNING and severity is not Severity.TAMPERING:
            if severity in (Severity.FALLBACK, Severity.VIOLATION):
                severity = Severity.WARNING
                message = f"{message} (in a function kernel() does not reach)"
        elif self._setup and rule in _COMPUTE_RULES and severity is Severity.FALLBACK:
            severity = Severity.WARNING
            message = f"{message} (in __init__: set-up, outside the graded call)"
        text = self.source_lines[line - 1].strip() if 0 < line <= len(self.source_lines) else ""
        self.findings.append(Finding(
            rule=rule, severity=severity, layer=Layer.STATIC, message=message,
            file=self.filename, line=max(line, 1), column=max(col, 0), snippet=text[:200],
        ))

    @property
    def scope(self) -> Scope:
        assert self._scope is not None
        return self._scope

    # -- what a dotted name is --------------------------------------------------------------
    def classify(self, q: str) -> tuple[str, str] | None:
        """(rule, message) for a library object the entry names, or None when it is fine."""
        if q.startswith(LOCAL) or q == GLOBALS or self.policy.names_torch_utility(q):
            return None
        if self.policy.is_value(q):
            return None
        if q in OPERATOR_MATMUL:
            return "FB003", f"PyTorch computes: `@` (matrix multiply) as `{q}`"
        rule = self.policy.name_rule(q)
        if rule is not None:
            return rule, f"uses `{q}`"
        if q in ("builtins", *_NAMESPACE_FUNCS):
            return "DS003", f"uses `{q}`: names looked up at run time"
        parts = q.split(".")
        if parts[0] != "torch":
            return None
        rest = parts[1:]
        if any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in rest):
            return "VL003", f"uses private PyTorch name `{q}`"
        if len(rest) >= 2 and rest[0] == "Tensor":
            if rest[1] in TENSOR_METHODS and rest[1] not in self.policy.allowed_calls:
                return "FB002", f"calls Tensor method `{rest[1]}` through `{q}`"
            return None
        if self.policy.is_torch_utility(q) or q in TORCH_MODULES or not rest:
            return None
        if len(rest) == 1 and (rest[0] in TORCH_DTYPES or rest[0] in TORCH_CONSTANTS
                               or rest[0] in self.policy.allowed_calls):
            return None
        if rest[-1].startswith("__") and rest[-1].endswith("__"):
            return None
        return "FB001", f"PyTorch computes: `{q}`"

    def check_ref(self, node: ast.AST, how: str = "") -> bool:
        value_only: bool | None = None
        for q in sorted(self.resolver.qualnames(node, self.scope)):
            verdict = self.classify(q)
            if verdict is None:
                continue
            if verdict[0] in _COMPUTE_RULES:
                # Naming a compute function calls nothing: only a call, or the function
                # handed on where it may be called (an argument, a container, a return
                # value...), is compute. A plain name bound to it is judged where it is called.
                value_only = self._value_only(node) if value_only is None else value_only
                if value_only:
                    continue
            self.emit(verdict[0], node, verdict[1] + how)
            return True
        return False

    def _value_only(self, node: ast.AST) -> bool:
        """Is this (uncalled) reference only read as a value where it stands?"""
        child, parent = node, self._parents.get(node)
        while isinstance(parent, _TRANSPARENT) and not (
            isinstance(parent, ast.IfExp) and child is parent.test
        ) and not (isinstance(parent, ast.Subscript) and child is not parent.value):
            child, parent = parent, self._parents.get(parent)
        if isinstance(parent, ast.Tuple) and child in parent.elts:
            child, parent = parent, self._parents.get(parent)  # isinstance(x, (A, B))
        if isinstance(parent, ast.Call) and child in parent.args[1:2] and self.resolver.qualnames(
            parent.func, self.scope
        ) & _TYPE_CHECKS:
            return True  # isinstance(x, DTensor): a type compared, nothing called
        if isinstance(parent, ast.Call | ast.keyword):
            return False  # called, or handed to a call (map(torch.add, ...), key=torch.norm)
        if isinstance(parent, ast.Assign):
            return self._local_names(parent.targets)
        if isinstance(parent, ast.AnnAssign):
            return child is parent.annotation or self._local_names([parent.target])
        if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
            return child is parent.returns
        if isinstance(parent, ast.IfExp):
            return True  # the test
        return isinstance(parent, _VALUE_PARENTS)

    def _local_names(self, targets: list[ast.expr]) -> bool:
        """Plain names local to a function: every call through them is resolved and judged.
        (A module or class attribute may be called from elsewhere, under another name.)"""
        scope = self.scope
        if scope.kind != "function" or not all(isinstance(t, ast.Name) for t in targets):
            return False
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        return not any(isinstance(n, ast.Global | ast.Nonlocal) and names & set(n.names)
                       for n in ast.walk(scope.node))

    # -- scopes and regions -----------------------------------------------------------------
    def run(self, tree: ast.Module) -> list[Finding]:
        self._scope = self.scopes[tree]
        self._parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.generic_visit(tree)
        return self.findings

    def _in(self, node: ast.AST, body: list[ast.stmt], region: Severity | None) -> None:
        saved_scope, saved_region = self._scope, self._region
        self._scope = self.scopes.get(node, self._scope)
        if region is not None and (saved_region is None or region is Severity.INFO):
            self._region = region
        for stmt in body:
            self.visit(stmt)
        self._scope, self._region = saved_scope, saved_region

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.visit(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        if node.name in TORCH_HOOKS:
            self.emit("TM001", node, f"defines `{node.name}`: intercepts the harness's torch calls")
        if node.name in _EXIT_DUNDERS:
            self.emit("SB005", node, f"defines `{node.name}`: a finaliser, run when the object "
                      "is collected or the interpreter exits, after the harness is done")
        if node in self.ctx.jit_nodes:
            return  # the DSL itself: never judged for compute
        region = Severity.WARNING if node in self.ctx.unreachable else None
        saved_setup = self._setup
        self._setup = self._setup or node in self.ctx.setup
        self._in(node, node.body, region)
        self._setup = saved_setup

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(d)
        region = Severity.WARNING if node in self.ctx.unreachable else None
        self._in(node, node.body, region)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)
        saved = self._scope
        self._scope = self.scopes.get(node, saved)
        self.visit(node.body)
        self._scope = saved

    def visit_If(self, node: ast.If) -> None:
        if node in self.ctx.main_blocks:
            self.visit(node.test)
            self._in(node, node.body, Severity.INFO)
            for stmt in node.orelse:
                self.visit(stmt)
        elif self._distributed_guard(node.test):
            # `if isinstance(x, DTensor):` (Liger-Kernel's SwiGLU): a branch for distributed
            # tensors, which the harness never passes. What is found there is shown as a
            # warning; if the branch ever runs, the trace of the timed calls decides.
            self.visit(node.test)
            self._in(node, node.body, Severity.WARNING)
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    # -- imports ----------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return
        base = node.module or ""
        for alias in node.names:
            self._import(node, base if alias.name == "*" else f"{base}.{alias.name}")

    def _import(self, node: ast.AST, q: str) -> None:
        verdict = self.classify(q)
        # Importing a compute function (or numpy, for its dtypes) is not yet a use: its
        # calls are judged where they are.
        if verdict is not None and verdict[0] not in _COMPUTE_RULES | {"FB006"}:
            self.emit(verdict[0], node, f"imports `{q}`: {RULES[verdict[0]].title}")

    # -- names and attributes ---------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.check_ref(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FRAME_ATTRS:
            self.emit("TM002", node, f"reads `.{node.attr}`: frame, globals or class graph")
        elif node.attr == "__dict__":
            self.emit("DS003", node, "reads `__dict__`: attributes looked up at run time")
        if node.attr in INSTRUMENT_ATTRS:
            self.emit("TM004", node, f"touches `.{node.attr}`: the grader's instruments")
        elif node.attr in ARRAY_PROTOCOL_ATTRS:
            self.emit("FB006", node, f"uses `.{node.attr}`: another library computing on a "
                      "view of the tensor's memory")
        if isinstance(node.ctx, ast.Load):
            self.check_ref(node)
            quals = self.resolver.qualnames(node, self.scope)
            if quals and all(self.policy.names_torch_utility(q) or self.policy.is_value(q)
                             for q in quals):
                # torch.jit.is_scripting: the whole chain is a named utility, so its
                # prefix torch.jit is not judged alone.
                base = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if not isinstance(base, ast.Name):
                    self.visit(base)
                return
        self.visit(node.value)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            self.check_ref(node, " (by subscript)")
        self.generic_visit(node)

    # -- try/except fallback ----------------------------------------------------------------
    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        for stmt in node.body:
            self.visit(stmt)
        launches = any(self._is_launch(n) for s in node.body for n in ast.walk(s))
        before = len(self.findings)
        for h in node.handlers:
            self.visit(h)
        compute = [f for f in self.findings[before:] if f.rule in _COMPUTE_RULES]
        if launches and compute:
            self.emit("FB004", node, f"falls back to PyTorch (line {compute[0].line}) "
                      "when the Triton launch raises")
        for stmt in [*node.orelse, *node.finalbody]:
            self.visit(stmt)

    visit_TryStar = visit_Try

    def _is_launch(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func.value if isinstance(node.func, ast.Subscript) else node.func
        names = {q.removeprefix(f"{LOCAL}.") for q in self.resolver.qualnames(func, self.scope)}
        return isinstance(node.func, ast.Subscript) or bool(names & self.ctx.jit_names)

"""Static detection of fallback delegation and tampering, on the syntax tree of one entry file.

No entry code runs here: `grader check` calls `analyze` in seconds, without Docker or a GPU.
The module-level pass (this file) finds the @triton.jit functions, what the entry point
(kernel(), or a module problem's class) can reach and which Triton functions are decoys;
static_visit.Checker judges the host code; names are resolved by static_resolve. A hostile
file never makes this raise: a file that does not parse or nests too deeply becomes a finding.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from grader.detect.policy import Policy
from grader.detect.rules import RULES
from grader.detect.static_fold import walk_scoped
from grader.detect.static_names import (
    AUTOGRAD_FUNCTIONS,
    AUTOGRAD_ONLY_METHODS,
    TENSOR_ONLY_ATTRS,
)
from grader.detect.static_resolve import Resolver
from grader.detect.static_scope import LOCAL, Scope, ScopeBuilder
from grader.detect.static_visit import Checker, Context
from grader.formats.problem import DEFAULT_ENTRY_CLASSES
from grader.model.findings import Finding, Layer

__all__ = ["RULES", "analyze", "jit_function_names"]

_DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
# Seeing any of these, reachability by name is not to be trusted: everything is reachable.
_DYNAMIC_LOOKUPS = frozenset(
    {"globals", "vars", "locals", "getattr", "__import__", "eval", "exec", "__builtins__"}
)
_ALLOCATORS = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
     "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones",
     "new_full"}
)


def analyze(source: str, filename: str, policy: Policy,
            entry: tuple[str, ...] | None = None) -> list[Finding]:
    """Findings for one entry file, sorted by position. Never raises on hostile input.

    `entry`: the names the harness calls (Problem.entry_names(): `kernel`, or a module
    problem's class names); None guesses from the file (kernel() if it defines one, else the
    usual class names), for checks that know no problem (`grader check`)."""
    try:
        return _analyze(source, filename, policy, entry)
    except Exception as exc:  # an entry's input is never the grader's failure
        # Issue 17: an exception here once became `infra_error` (and let a fallback pass a CI
        # gate on cheating verdicts). A file the analyser cannot check is a violation.
        return [_unanalysable(policy, filename, source, exc)]


def _unanalysable(policy: Policy, filename: str, source: object, exc: BaseException) -> Finding:
    lines = source.splitlines() if isinstance(source, str) else []
    return _bare("ST003", policy, filename, lines, 1, 1,
                 f"the analyser failed on this file ({type(exc).__name__}); nothing else "
                 "checked")


def _analyze(source: str, filename: str, policy: Policy,
             entry: tuple[str, ...] | None) -> list[Finding]:
    lines = source.splitlines()
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return [_bare("ST000", policy, filename, lines, exc.lineno, exc.offset,
                      f"does not parse: {exc.msg}")]
    except ValueError as exc:  # e.g. null bytes in the source
        return [_bare("ST000", policy, filename, lines, 1, 0, f"does not parse: {exc}")]
    except (RecursionError, MemoryError):
        return [_too_deep(policy, filename, lines)]
    try:
        findings = _Module(tree, source, lines, filename, policy, entry).run()
    except (RecursionError, MemoryError):
        return [_too_deep(policy, filename, lines)]
    return sorted(findings, key=lambda f: (f.line or 0, f.column or 0, f.rule))


def jit_function_names(source: str, policy: Policy) -> set[str]:
    """The names of the file's @triton.jit functions, as Triton names their compiled kernels.

    Found on the host from the source, so an entry cannot claim a vendor kernel as its own by
    what it reports from inside its container."""
    try:
        module = _Module(ast.parse(source), source, source.splitlines(), "<kernel>", policy)
        defs = module._defs()
        jit = {node for entries in defs.values() for node, scope in entries
               if module._is_jit(node, scope)}
        jit |= module._jit_by_call(defs)[0]
    except Exception:  # never raises on an entry (issue 17)
        # Own kernels found by the plain shape of their decorators: attribution stays
        # possible for a file analyze() reports as unanalysable.
        return _jit_names_plainly(source)
    return {node.name for node in jit}


def _jit_names_plainly(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
        return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and any(
            "jit" in ast.dump(d) for d in n.decorator_list)}
    except Exception:  # a file ast cannot even walk: nothing to attribute
        return set()


def _bare(rule: str, policy: Policy, filename: str, lines: list[str], line: int | None,
          col: int | None, message: str) -> Finding:
    line = line if line and line >= 1 else 1
    text = lines[line - 1].strip()[:200] if line <= len(lines) else ""
    return Finding(rule=rule, severity=policy.severity_of(rule), layer=Layer.STATIC,
                   message=message, file=filename, line=line,
                   column=max((col or 1) - 1, 0), snippet=text)


def _too_deep(policy: Policy, filename: str, lines: list[str]) -> Finding:
    return _bare("ST001", policy, filename, lines, 1, 1,
                 "the syntax tree nests deeper than the analyser accepts; nothing else checked")


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and consts)


def _loads(nodes: Iterable[ast.AST]) -> set[str]:
    return {n.id for root in nodes for n in ast.walk(root)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _loads_except(node: ast.AST, skip: set[ast.AST]) -> set[str]:
    out: set[str] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if n in skip:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        todo.extend(ast.iter_child_nodes(n))
    return out


class _Module:
    def __init__(self, tree: ast.Module, source: str, lines: list[str], filename: str,
                 policy: Policy, entry: tuple[str, ...] | None = None) -> None:
        self.tree, self.lines, self.filename, self.policy = tree, lines, filename, policy
        builder = ScopeBuilder(TENSOR_ONLY_ATTRS)
        self.module = builder.build(tree)
        self.scopes = builder.scopes
        self.resolver = Resolver(self.scopes, policy.is_torch_utility)
        if entry is None:
            bound = self.module.bindings
            classes = tuple(n for n in DEFAULT_ENTRY_CLASSES if n in bound)
            entry = classes if "kernel" not in bound and classes else ("kernel",)
        self.entry = entry

    # -- module-level facts -----------------------------------------------------------------
    def _defs(self) -> dict[str, list[tuple[_DefNode, Scope]]]:
        """Every def and class in the file, by name, with the scope its decorators run in."""
        out: dict[str, list[tuple[_DefNode, Scope]]] = {}
        for scope in self.scopes.values():
            for name, bounds in scope.bindings.items():
                for b in bounds:
                    if b.how == "def" and isinstance(b.expr, _DefNode):
                        out.setdefault(name, []).append((b.expr, scope))
        return out

    def _is_jit(self, node: _DefNode, scope: Scope) -> bool:
        if isinstance(node, ast.ClassDef):
            return False
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            for q in self.resolver.qualnames(target, scope):
                if q.split(".")[0] == "triton" and q.split(".")[-1] == "jit":
                    return True
        return False

    def _jit_by_call(self, defs: dict[str, list[tuple[_DefNode, Scope]]]
                     ) -> tuple[set[_DefNode], set[str]]:
        """`add = triton.jit(_add)`: the wrapped def is a jit function too, under both names."""
        nodes: set[_DefNode] = set()
        names: set[str] = set()
        for name, bounds in self.module.bindings.items():
            for b in bounds:
                call = b.expr
                while isinstance(call, ast.Call) and isinstance(call.func, ast.Call):
                    call = call.args[0] if call.args else None  # autotune(...)(jit(f))
                if not isinstance(call, ast.Call) or not call.args:
                    continue
                quals = self.resolver.qualnames(call.func, self.module)
                if any(q.split(".")[0] == "triton" and q.endswith(".jit") for q in quals):
                    inner = call.args[0]
                    if isinstance(inner, ast.Name):
                        nodes |= {d for d, _ in defs.get(inner.id, [])
                                  if not isinstance(d, ast.ClassDef)}
                        names |= {name, inner.id}
        return nodes, names

    def run(self) -> list[Finding]:
        defs = self._defs()
        jit = {node for entries in defs.values() for node, scope in entries
               if self._is_jit(node, scope)}
        by_call, by_call_names = self._jit_by_call(defs)
        jit |= by_call
        jit_names = {n for n, entries in defs.items() if any(e[0] in jit for e in entries)}
        jit_names |= by_call_names
        body = self.tree.body
        mains: set[ast.AST] = {s for s in body if _is_main_guard(s)}
        top = {n: [e[0] for e in entries if e[1] is self.module] for n, entries in defs.items()}
        roots: list[ast.AST] = []
        for stmt in body:
            if stmt in mains:
                continue
            if isinstance(stmt, _DefNode):
                # Decorators, bases and defaults run at import; a jit function's decorators
                # too, and what they name runs with its launches: autotune hooks (pre_hook,
                # post_hook, prune_configs_by, perf_model, early_config_prune), heuristics
                # lambdas, launch_metadata (issue 17: helpers reached only from there).
                roots.extend(stmt.decorator_list)
                if not isinstance(stmt, ast.ClassDef):
                    roots.extend(stmt.args.defaults)
                else:
                    roots.extend(stmt.bases)
            else:
                roots.append(stmt)
        grad_only = self._autograd_only(top)
        reached, host_refs = self._reach(roots, top, jit, grad_only)
        setup = self._setup_methods(top)
        unreachable: set[ast.AST] = set()
        if not self._dynamic_lookups():
            unreachable = {d for n, nodes in top.items() if n not in reached for d in nodes
                           if d not in jit} | grad_only
        ctx = Context(jit_names=jit_names, jit_nodes=set(jit), unreachable=unreachable,
                      main_blocks=mains, setup=setup)
        checker = Checker(self.lines, self.filename, self.policy, self.resolver, self.scopes, ctx)
        checker._scope = self.module
        self._decoys(checker, jit, jit_names, host_refs)
        self._unwritten_return(checker, top)
        if not any(n in self.module.bindings for n in self.entry):
            what = ("kernel()" if self.entry == ("kernel",)
                    else "class " + " or ".join(self.entry))
            checker.emit("ST002", self.tree.body[0] if body else self.tree,
                         f"no module-level {what}: the harness has nothing to call")
        return checker.run(self.tree)

    def _dynamic_lookups(self) -> bool:
        """Does the file look names up at run time? getattr with a name the analyser folds
        (getattr(torch, device.type)) is not such a lookup: it names what it reaches."""
        loads = _loads([self.tree])
        if loads & (_DYNAMIC_LOOKUPS - {"getattr"}):
            return True
        if "getattr" not in loads:
            return False
        calls = [(n, s) for n, s, _ in walk_scoped(self.scopes) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "getattr"]
        getattr_loads = sum(1 for n in ast.walk(self.tree)
                            if isinstance(n, ast.Name) and n.id == "getattr")
        if getattr_loads != len(calls):
            return True  # getattr handed on or aliased: not a call the analyser can read
        return any(len(c.args) < 2 or self.resolver.getattr_names(c.args[0], c.args[1], s) is None
                   for c, s in calls)

    def _setup_methods(self, top: dict[str, list[_DefNode]]) -> set[ast.AST]:
        """`__init__` of the entry's classes: it runs once per case, outside the traced and
        timed call, and building layers there (nn.Linear for its weights) is how a module
        entry gets the reference's parameters. Compute found there is a warning, not a
        fallback; what runs during forward() is judged by the trace."""
        if self.entry == ("kernel",):
            return set()
        return {stmt for name in self.entry for node in top.get(name, [])
                if isinstance(node, ast.ClassDef) for stmt in node.body
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__"}

    def _autograd_only(self, top: dict[str, list[_DefNode]]) -> set[ast.AST]:
        """backward (jvp, vjp, vmap) of the module's autograd.Function classes: autograd
        calls them only when gradients are asked for, which an inference entry does not do
        without computing (x.backward(), torch.autograd.grad are FB002/FB001). Kept in
        reach when anything names them otherwise (`Fn.backward(ctx, g)` called by hand)."""
        methods = {stmt for nodes in top.values() for cls in nodes
                   if isinstance(cls, ast.ClassDef) and self._is_autograd_function(cls)
                   for stmt in cls.body if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
                   and stmt.name in AUTOGRAD_ONLY_METHODS}
        if not methods:
            return set()
        named = {n.attr for n in ast.walk(self.tree) if isinstance(n, ast.Attribute)} | {
            n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)}
        return set() if named & AUTOGRAD_ONLY_METHODS else set(methods)

    def _is_autograd_function(self, cls: ast.ClassDef) -> bool:
        return any(self.resolver.qualnames(b, self.module) & AUTOGRAD_FUNCTIONS
                   for b in cls.bases)

    def _reach(self, roots: list[ast.AST], top: dict[str, list[_DefNode]],
               jit: set[_DefNode], skip: set[ast.AST]) -> tuple[set[str], set[str]]:
        """Top-level names kernel() and import-time code reach, and every name host code loads
        (`skip`: methods whose bodies are out of reach)."""
        refs = _loads(roots) | set(self.entry)
        reached: set[str] = set()
        todo = [n for n in refs if n in top]
        while todo:
            name = todo.pop()
            if name in reached:
                continue
            reached.add(name)
            for node in top.get(name, []):
                if node in jit:
                    continue
                new = _loads([node]) if not skip else _loads_except(node, skip)
                refs |= new
                todo.extend(n for n in new if n in top and n not in reached)
        return reached, refs

    def _decoys(self, checker: Checker, jit: set[_DefNode], jit_names: set[str],
                host_refs: set[str]) -> None:
        if not jit:
            imports_local = any(isinstance(s, ast.ImportFrom) and s.level
                                for s in ast.walk(self.tree))
            anchor = self.tree.body[0] if self.tree.body else self.tree
            if not imports_local:
                checker.emit("FB005", anchor, "defines no @triton.jit function: no kernel in "
                             "the target DSL")
            return
        used = host_refs & jit_names
        todo = list(used)
        by_name = {n: [d for d in jit if d.name == n] for n in jit_names}
        while todo:
            for node in by_name.get(todo.pop(), []):
                for n in _loads(node.body) & jit_names:
                    if n not in used:
                        used.add(n)
                        todo.append(n)
        for node in sorted(jit, key=lambda d: d.lineno):
            if node.name not in used:
                checker.emit("DK001", node, f"@triton.jit function `{node.name}` is never "
                             "launched or called from code kernel() reaches")

    def _unwritten_return(self, checker: Checker, top: dict[str, list[_DefNode]]) -> None:
        for fn in [d for name in self.entry for d in top.get(name, [])]:
            scope = self.scopes.get(fn)
            if scope is None or isinstance(fn, ast.ClassDef):
                continue
            returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value]
            returned: list[ast.Name] = []
            for r in returns:
                vals = r.value.elts if isinstance(r.value, ast.Tuple) else [r.value]
                returned += [v for v in vals if isinstance(v, ast.Name)]
            in_returns = {id(n) for r in returns for n in ast.walk(r)}
            loads = [n for n in ast.walk(fn) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Load) and id(n) not in in_returns]
            for name in returned:
                bounds = scope.bindings.get(name.id, [])
                if bounds and all(self._allocates(b.expr, scope) for b in bounds) and not any(
                    n.id == name.id for n in loads
                ):
                    checker._scope = scope
                    checker.emit("DK002", name, f"returns `{name.id}`, allocated but never "
                                 "passed to any call: no launch wrote it")
                    checker._scope = self.module

    def _allocates(self, expr: ast.AST | None, scope: Scope) -> bool:
        if not isinstance(expr, ast.Call):
            return False
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in _ALLOCATORS:
            return True
        quals = self.resolver.qualnames(expr.func, scope)
        return any(q.startswith("torch.") and q[6:] in _ALLOCATORS for q in quals) and not any(
            q.startswith(LOCAL) for q in quals
        )

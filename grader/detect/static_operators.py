"""Operators and assignments, as the Checker judges them (one pass with static_visit.Checker,
which mixes this in): tensor arithmetic written as an operator (`a @ b`, `x + y`, `x += y`, a
comparison), and an assignment or `del` that patches a protected library, a dunder or a
namespace (TM001). Split from static_visit.py (issue 33: every module under 400 lines).
"""

from __future__ import annotations

import ast

from grader.detect.static_hooks import CheckerParts
from grader.detect.static_resolve import GLOBALS

_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift,
          ast.RShift, ast.BitOr, ast.BitXor, ast.BitAnd)


class OperatorChecks(CheckerParts, ast.NodeVisitor):
    """Mixed into static_visit.Checker, which provides CheckerParts."""

    # -- operators --------------------------------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.emit("FB003", node, "PyTorch computes: `@` (matrix multiply)")
        elif isinstance(node.op, _ARITH) and self.resolver.is_tensor(node, self.scope):
            op = type(node.op).__name__
            self.emit("FB003", node, f"PyTorch computes: tensor arithmetic ({op})")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if not isinstance(node.op, ast.Not) and self.resolver.is_tensor(node, self.scope):
            self.emit("FB003", node, "PyTorch computes: tensor unary operator")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        plain = all(isinstance(o, ast.Is | ast.IsNot | ast.In | ast.NotIn) for o in node.ops)
        if not plain and any(
            self.resolver.is_tensor(x, self.scope) for x in [node.left, *node.comparators]
        ):
            self.emit("FB003", node, "PyTorch computes: tensor comparison")
        self.generic_visit(node)

    # -- assignments: monkeypatching --------------------------------------------------------
    def _store(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self._store(t, node)
            return
        if isinstance(target, ast.Attribute):
            owners = self.resolver.qualnames(target.value, self.scope)
            hit = sorted(q for q in owners if self.policy.is_protected(q))
            if hit:
                self.emit("TM001", node, f"assigns `{hit[0]}.{target.attr}`")
            elif target.attr.startswith("__") and target.attr.endswith("__"):
                self.emit("TM001", node, f"assigns dunder attribute `{target.attr}`")
        elif isinstance(target, ast.Subscript):
            for q in self.resolver.qualnames(target.value, self.scope):
                base = q.removesuffix(".__dict__")
                if q in ("sys.modules", GLOBALS) or (base != q and self.policy.is_protected(base)):
                    self.emit("TM001", node, f"replaces an entry of `{q}`")
                    break

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._store(t, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._store(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._store(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._store(node.target, node)
        if isinstance(node.op, ast.MatMult):
            self.emit("FB003", node, "PyTorch computes: `@=`")
        elif self.resolver.is_tensor(node.target, self.scope) or self.resolver.is_tensor(
            node.value, self.scope
        ):
            self.emit("FB003", node, "PyTorch computes: in-place tensor arithmetic")
        self.generic_visit(node)

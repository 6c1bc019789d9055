"""A safe evaluator for the `flops` and `bytes` expressions of `problem.toml`.

The expressions are organiser data, but they travel in bundles and suites that pass through many
hands, so they are never given to `eval`. They are parsed with `ast` and walked over a closed set
of node types: numbers, the shape's numeric params, + - * / // % **, unary minus and plus, and
min, max, ceil, floor, log2, sqrt. Sizes are bounded so that an expression like `9**9**9` fails
fast instead of eating the machine.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping

from grader.errors import ProblemError
from grader.formats.problem import Problem, Shape

MAX_LENGTH = 500
MAX_NODES = 200
MAX_EXPONENT = 64  # |exponent| of `**`
MAX_MAGNITUDE = 1e30  # |value| of every intermediate result (1e30 FLOPs is far past any shape)

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}

_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    # name: (function, least number of arguments, most (None: any))
    "min": (min, 2, None),
    "max": (max, 2, None),
    "ceil": (math.ceil, 1, 1),
    "floor": (math.floor, 1, 1),
    "log2": (math.log2, 1, 1),
    "sqrt": (math.sqrt, 1, 1),
}


class _Evaluator:
    def __init__(self, expr: str, params: Mapping[str, object]) -> None:
        self.expr = expr
        self.params = params

    def fail(self, what: str, node: ast.AST | None = None) -> ProblemError:
        where = ""
        if node is not None and hasattr(node, "col_offset"):
            where = f" at column {node.col_offset + 1} ({ast.unparse(node)!r:.60})"
        return ProblemError(
            f"expression {self.expr!r:.120}: {what}{where}",
            hint="allowed: numbers, shape params, + - * / // % **, parentheses and "
                 + ", ".join(_FUNCTIONS),
        )

    def check(self, value: Number, node: ast.AST) -> Number:
        if isinstance(value, complex) or not math.isfinite(value):
            raise self.fail(f"the value {value!r} is not a finite real number", node)
        if abs(value) > MAX_MAGNITUDE:
            raise self.fail(f"a value exceeds {MAX_MAGNITUDE:g}", node)
        return value

    def visit(self, node: ast.AST) -> Number:
        if isinstance(node, ast.Expression):
            return self.visit(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise self.fail(f"the constant {node.value!r} is not a number", node)
            return self.check(node.value, node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            value = self.visit(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return self.binary(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(f"{type(node).__name__} is not allowed", node)

    def name(self, node: ast.Name) -> Number:
        if node.id not in self.params:
            known = ", ".join(sorted(self.params)) or "none"
            raise self.fail(f"unknown name {node.id!r} (the shape's params: {known})", node)
        value = self.params[node.id]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"param {node.id!r} is {value!r}, not a number", node)
        return self.check(value, node)

    def binary(self, node: ast.BinOp) -> Number:
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise self.fail(f"exponent {right!r} exceeds {MAX_EXPONENT}", node)
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise self.fail("division by zero", node) from None
        except OverflowError:
            raise self.fail("the value overflows", node) from None
        return self.check(value, node)

    def call(self, node: ast.Call) -> Number:
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise self.fail("only min, max, ceil, floor, log2 and sqrt may be called", node)
        if node.keywords:
            raise self.fail("keyword arguments are not allowed", node)
        func, least, most = _FUNCTIONS[node.func.id]
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail("starred arguments are not allowed", node)
        if len(node.args) < least or (most is not None and len(node.args) > most):
            raise self.fail(f"{node.func.id}() takes {least if most == least else f'{least}+'} "
                            f"argument(s), got {len(node.args)}", node)
        args = [self.visit(a) for a in node.args]
        try:
            value = func(*args)
        except (ValueError, OverflowError) as exc:
            raise self.fail(f"{node.func.id}() failed: {exc}", node) from None
        return self.check(value, node)


def parse(expr: str) -> ast.Expression:
    """Parse and bound an expression (no names are checked: that needs the params)."""
    if not isinstance(expr, str) or not expr.strip():
        raise ProblemError(f"expression {expr!r}: empty")
    if len(expr) > MAX_LENGTH:
        raise ProblemError(f"expression {expr[:60]!r}...: longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ProblemError(f"expression {expr!r:.120}: not a valid expression: {exc}") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        raise ProblemError(f"expression {expr!r:.120}: {nodes} syntax nodes, more than "
                           f"{MAX_NODES}")
    return tree


def evaluate(expr: str, params: Mapping[str, object]) -> float:
    """The value of `expr` with `params` bound to its names; ProblemError on anything else."""
    tree = parse(expr)
    return float(_Evaluator(expr, params).visit(tree))


def work(problem: Problem, shape: Shape) -> tuple[float, float]:
    """(FLOPs, bytes) of `shape`: its own numbers where it has them, else the problem's
    expressions evaluated on its params (the model guarantees one of the two)."""
    flops = shape.flops if shape.flops is not None else evaluate(problem.flops or "", shape.params)
    nbytes = shape.bytes if shape.bytes is not None else evaluate(problem.bytes or "",
                                                                   shape.params)
    return flops, nbytes

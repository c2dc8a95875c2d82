"""``expr``: the small, safe expression language that ties a parameter to others.

An expression is parsed with Python's ``ast`` and compiled into nested ``jax.numpy``
calls; only numbers (real or complex), parameter names, the constants ``pi`` and ``e``,
arithmetic (``+ - * / ** %`` and unary signs) and the functions of :data:`FUNCTIONS`
are allowed, so nothing is ever handed to ``eval``. The spellings are lmfit's (its
``asteval`` names), so that lmfit's expressions, as ``"2.3548200*p1_sigma"`` or
``"max(1e-15, sigma)"``, read the same.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy import special

from fixedopt._models.faddeeva import wofz
from fixedopt._models.gamma import loggamma


def _fold(binary: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def fold(first: Any, *rest: Any) -> Any:
        out = first
        for item in rest:
            out = binary(out, item)
        return out

    return fold


_NUMPY_NAMES = (
    "sqrt", "exp", "log", "log10", "log2", "log1p", "expm1", "sin", "cos", "tan",
    "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "abs", "sign",
    "real", "imag", "hypot", "floor", "ceil",
)  # fmt: skip
FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{name: getattr(jnp, name) for name in _NUMPY_NAMES},
    "max": _fold(jnp.maximum),
    "min": _fold(jnp.minimum),
    "erf": special.erf,
    "erfc": special.erfc,
    "gamma": special.gamma,
    "gamfcn": special.gamma,  # lmfit's name
    "gammaln": special.gammaln,
    "wofz": wofz,
    "loggammafcn": loggamma,  # lmfit's name; complex arguments too
    "betalnfnc": lambda a, b: special.gammaln(a) + special.gammaln(b) - special.gammaln(a + b),
    "square": jnp.square,
}
CONSTANTS = {"pi": np.pi, "e": np.e}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}

Values = Mapping[str, Any]
Compiled = Callable[[Values], Any]


@dataclasses.dataclass(frozen=True)
class Expression:
    """A parsed ``expr``: its ``source``, the parameter ``names`` it reads, and
    ``evaluate(values)`` (``values`` maps those names to arrays or tracers)."""

    source: str
    names: frozenset[str]
    evaluate: Compiled = dataclasses.field(compare=False, repr=False)

    def __call__(self, values: Values) -> jax.Array:
        return jnp.asarray(self.evaluate(values))


def parse(
    source: str, parameter: str = "expr", functions: Mapping[str, Callable[..., Any]] | None = None
) -> Expression:
    """Parse ``source`` into an :class:`Expression`; a ``ValueError`` names
    ``parameter`` and what is not allowed. ``functions`` may be called too, beside
    :data:`FUNCTIONS`.

    Example:
      >>> from fixedopt.models import parse_expression
      >>> tie = parse_expression("2 * sqrt(p1_sigma) + pi")
      >>> sorted(tie.names), float(tie({"p1_sigma": 4.0}))
      (['p1_sigma'], 7.141592653589793)
    """
    if not isinstance(source, str):
        raise TypeError(f"`expr` of {parameter!r} must be a string, got {type(source).__name__}")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as error:
        message = f"`expr` of {parameter!r}: cannot parse {source!r} ({error.msg})"
        raise ValueError(message) from None
    names: set[str] = set()
    table = {**FUNCTIONS, **(functions or {})}
    evaluate = _compile(tree.body, source, parameter, names, table)
    return Expression(source, frozenset(names), evaluate)


def _compile(
    node: ast.AST,
    source: str,
    parameter: str,
    names: set[str],
    table: Mapping[str, Callable[..., Any]],
) -> Compiled:
    """``node`` as a function of the parameter values (recursive)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex):
        constant = node.value
        return lambda values: constant
    if isinstance(node, ast.Name):
        return _name(node.id, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        binary = _BINARY[type(node.op)]
        left = _compile(node.left, source, parameter, names, table)
        right = _compile(node.right, source, parameter, names, table)

        def apply(values: Values) -> Any:
            return binary(left(values), right(values))

        return apply
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        unary = _UNARY[type(node.op)]
        operand = _compile(node.operand, source, parameter, names, table)

        def negate(values: Values) -> Any:
            return unary(operand(values))

        return negate
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id not in table:
            raise ValueError(
                f"`expr` of {parameter!r} ({source!r}): unknown function {node.func.id!r}; "
                f"the functions are {sorted(table)}"
            )
        function = table[node.func.id]
        arguments = [_compile(arg, source, parameter, names, table) for arg in node.args]
        return lambda values: function(*(argument(values) for argument in arguments))
    raise ValueError(
        f"`expr` of {parameter!r} ({source!r}): {ast.unparse(node)!r} is not allowed; "
        "an expression has numbers, parameter names, + - * / ** %, and calls of "
        f"{sorted(table)}"
    )


def _name(name: str, names: set[str]) -> Compiled:
    if name in CONSTANTS:
        constant = CONSTANTS[name]
        return lambda values: constant
    names.add(name)
    return lambda values: values[name]

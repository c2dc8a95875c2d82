"""lmfit's ``ExpressionModel``: a model written as a string, compiled by the expression
language of ``expr`` ties (:mod:`fixedopt._models.expressions`, nothing handed to
``eval``), with the built-in lineshapes callable in it."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._models import lineshapes
from fixedopt._models.expressions import Expression, parse
from fixedopt._models.model import Model, with_parameters

# The lineshapes lmfit lets an expression call (lmfit.lineshapes.functions), those built in.
_LMFIT_CALLABLE = (
    "gaussian", "gaussian2d", "lorentzian", "voigt", "pvoigt", "moffat", "pearson4",
    "pearson7", "breit_wigner", "damped_oscillator", "dho", "lognormal", "students_t",
    "expgaussian", "doniach", "skewed_gaussian", "skewed_voigt", "thermal_distribution",
    "step", "rectangle", "exponential", "powerlaw", "linear", "parabolic", "sine",
    "split_lorentzian",
)  # fmt: skip
LINESHAPES: dict[str, Callable[..., Any]] = {
    name: getattr(lineshapes, name) for name in _LMFIT_CALLABLE
}


class ExpressionModel(Model):
    """A model from an expression of the independent variable(s) and parameters, as
    lmfit's ``ExpressionModel``: every other name in ``expr`` is a parameter, in the
    order of its first appearance. The independent variable is ``x`` unless
    ``independent_vars`` names others. Arithmetic, lmfit's math functions (``exp``,
    ``sqrt``, ``erf``, ...) and the built-in lineshapes (``gaussian(x, a, c, s)``) may be
    used; a ``prefix`` may not (as in lmfit: write the names in ``expr``).

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt.models import ExpressionModel
      >>> model = ExpressionModel("amplitude * exp(-x / tau) + offset")
      >>> model.param_names
      ('amplitude', 'tau', 'offset')
      >>> params = model.make_params(amplitude=2.0, tau=1.0, offset=0.5)
      >>> model.eval(params, x=jnp.array([0.0])).tolist()
      [2.5]
    """

    def __init__(
        self, expr: str, independent_vars: Sequence[str] | None = None, **options: Any
    ) -> None:
        if options.pop("prefix", ""):
            raise ValueError("ExpressionModel takes no `prefix` (as lmfit's): write it in `expr`")
        expression = parse(expr, "ExpressionModel", LINESHAPES)
        independent = _independent(expr, expression, independent_vars)
        names = [n for n in _in_order(expr) if n in expression.names and n not in independent]
        super().__init__(_curve(expression, independent, names), independent_vars=independent,
                         name=expr.strip(), **options)  # fmt: skip
        self.expr = expr.strip()

    def __repr__(self) -> str:
        return f"ExpressionModel({self.expr!r})"


def _independent(
    expr: str, expression: Expression, independent_vars: Sequence[str] | None
) -> tuple[str, ...]:
    """The independent variables: ``independent_vars``, or ``x``; each must appear."""
    if independent_vars is None:
        if "x" not in expression.names:
            raise ValueError(f"`expr` {expr!r} has no `x`: name the variable in `independent_vars`")
        return ("x",)
    independent = tuple(independent_vars)
    missing = [name for name in independent if name not in expression.names]
    if missing or not independent:
        raise ValueError(f"`independent_vars` {missing or independent} are not in `expr` {expr!r}")
    return independent


def _in_order(expr: str) -> list[str]:
    """The names in ``expr`` in the order they first appear (``ast.walk`` is not)."""
    nodes = [n for n in ast.walk(ast.parse(expr.strip(), mode="eval")) if isinstance(n, ast.Name)]
    nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    return list(dict.fromkeys(n.id for n in nodes))


def _curve(expression: Expression, independent: tuple[str, ...], names: list[str]) -> Any:
    """``f(*independent, *names)`` evaluating ``expression``, shaped as the independent
    variables broadcast together (an expression without them is still a curve)."""

    def curve(*args: Any, **kwargs: Any) -> jax.Array:
        values = dict(zip((*independent, *names), args)) | kwargs
        out = expression(values)
        shape = jnp.broadcast_shapes(jnp.shape(out), *(jnp.shape(values[v]) for v in independent))
        return jnp.broadcast_to(out, shape)

    return with_parameters(curve, independent, names)

"""``Parameter`` and ``Parameters``: lmfit's named parameters, each attribute either one
value for every fit of a batch or one value per fit."""

from __future__ import annotations

import dataclasses
import keyword
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

Expr = str | None | Sequence[str | None]


def traced(what: str) -> TypeError:
    """The error of a fit's input that is a JAX tracer (under ``jax.grad``, ``jax.jit``
    or ``jax.vmap``): a fit's result is made on the host (its report, errors and
    curves), so it has no derivative rule."""
    return TypeError(
        f"Model.fit cannot run under jax.grad, jax.jit or jax.vmap ({what} is traced): its "
        "result is made on the host, and has no derivative. To differentiate a fit or trace "
        "it, call fixedopt.curve_fit (with the model's function, `model.func`, for a plain "
        "model) or fixedopt.least_squares: their solutions are differentiable (an implicit "
        "derivative), under jit and vmap too"
    )


def _per_row(name: str, what: str, value: Any, dtype: Any) -> np.ndarray:
    """``value`` as a 0-d (one for all fits) or 1-d (one per fit) NumPy array; a
    ``TypeError`` names the attribute where it is not numbers (or, for ``vary``, not
    booleans: NumPy reads the string ``"False"`` as true)."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value)):
        raise traced(f"`{what}` of parameter {name!r}")
    wanted = "booleans" if dtype is bool else "numbers"
    problem = TypeError(
        f"`{what}` of parameter {name!r} must be {wanted} (one, or one per fit), got "
        f"{type(value).__name__} {value!r}"[:200]
    )
    try:
        if np.asarray(value).dtype.kind in "USV":
            raise problem
        array = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as error:
        raise problem from error
    if array.ndim > 1:
        raise ValueError(
            f"`{what}` of parameter {name!r} must be a scalar (every fit) or 1-D (one per "
            f"fit), got shape {array.shape}"
        )
    return array


def _expr(name: str, expr: Expr) -> str | tuple[str | None, ...] | None:
    """``expr`` as ``None``, one string, or a tuple of strings/``None`` (one per fit);
    an empty string is ``None``, as in lmfit."""
    if expr is None or isinstance(expr, str):
        return expr.strip() or None if isinstance(expr, str) else None
    rows = tuple(None if e is None or not str(e).strip() else str(e).strip() for e in expr)
    if not all(e is None or isinstance(e, str) for e in expr):
        raise TypeError(f"`expr` of parameter {name!r} must hold strings or None per fit")
    return rows


@dataclasses.dataclass
class Parameter:
    """One named parameter (lmfit's ``Parameter``), for a batch of fits.

    Each of ``value``, ``vary``, ``min``, ``max`` is a scalar (every fit) or a 1-D
    array (one per fit); ``expr`` is ``None``, a string (a tie in every fit) or a
    sequence of strings and ``None`` (a tie in some fits; free or fixed, by ``vary``, in
    the others). A tied parameter is computed from the others, never fitted.
    """

    name: str
    value: Any = 0.0
    vary: Any = True
    min: Any = -np.inf
    max: Any = np.inf
    expr: Expr = None

    def __post_init__(self) -> None:
        if not (self.name.isidentifier() and not keyword.iskeyword(self.name)):
            raise ValueError(f"a parameter's name must be a Python identifier, got {self.name!r}")
        self.set(self.value, self.vary, self.min, self.max, self.expr)

    def set(
        self,
        value: Any = None,
        vary: Any = None,
        min: Any = None,
        max: Any = None,
        expr: Expr = None,
    ) -> None:
        """Change the attributes given (``expr=""`` removes a tie, as in lmfit)."""
        if value is not None:
            self.value = _per_row(self.name, "value", value, float)
        if vary is not None:
            self.vary = _per_row(self.name, "vary", vary, bool)
        if min is not None:
            self.min = _per_row(self.name, "min", min, float)
        if max is not None:
            self.max = _per_row(self.name, "max", max, float)
        if expr is not None:
            self.expr = _expr(self.name, expr)
        if np.any(np.asarray(self.min) > np.asarray(self.max)):
            raise ValueError(f"parameter {self.name!r}: `min` must be <= `max`")

    def rows(self) -> int | None:
        """The number of fits this parameter describes (``None``: any)."""
        sizes = {np.size(a) for a in (self.value, self.vary, self.min, self.max) if np.ndim(a)}
        if isinstance(self.expr, tuple):
            sizes.add(len(self.expr))
        if len(sizes) > 1:
            sizes_text = sorted(sizes)
            raise ValueError(f"parameter {self.name!r} has per-fit entries of sizes {sizes_text}")
        return sizes.pop() if sizes else None


class Parameters(dict[str, Parameter]):
    """lmfit's ``Parameters``: an ordered mapping of names to :class:`Parameter`, for a
    batch of fits (see :meth:`Parameter`).

    Example:
      >>> from fixedopt.models import Parameters
      >>> params = Parameters()
      >>> params.add("center", value=[1.0, 2.0], vary=[True, False])
      >>> params.add("width", value=0.5, min=0.0)
      >>> params.add("fwhm", expr="2.3548 * width")
      >>> params.rows()
      2
    """

    def add(self, name: str, value: Any = 0.0, vary: Any = True, min: Any = -np.inf,
            max: Any = np.inf, expr: Expr = None) -> None:  # fmt: skip
        """Add (or replace) the parameter ``name``."""
        self[name] = Parameter(name, value, vary, min, max, expr)

    def add_many(self, *parameters: Parameter) -> None:
        """Add :class:`Parameter` objects."""
        for parameter in parameters:
            self[parameter.name] = parameter

    def rows(self) -> int | None:
        """The batch size the per-fit entries give (``None``: every entry is shared)."""
        sizes = {rows for p in self.values() if (rows := p.rows()) is not None}
        if len(sizes) > 1:
            raise ValueError(f"the parameters have per-fit entries of sizes {sorted(sizes)}")
        return sizes.pop() if sizes else None

    def valuesdict(self) -> dict[str, np.ndarray]:
        """``{name: value}`` (lmfit's name)."""
        return {name: np.asarray(p.value) for name, p in self.items()}

    def copy(self) -> Parameters:
        out = Parameters()
        out.add_many(*(dataclasses.replace(p) for p in self.values()))
        return out

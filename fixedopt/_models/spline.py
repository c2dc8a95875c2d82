"""lmfit's ``SplineModel``: a cubic B-spline through fixed knots whose coefficients
``s0 ... s{n-1}`` are the parameters (a flexible baseline under peaks).

lmfit builds the knot vector with ``scipy.interpolate.splrep(xknots, ones, k=3)`` (the
"not-a-knot" vector: the end knots four times, the second and second-to-last knots
left out) and evaluates with ``splev``, which extrapolates beyond the end knots with
the end pieces. Here the same vector is built in NumPy and the spline evaluated by de
Boor's algorithm in ``jax.numpy``: linear in the coefficients, differentiable, equal to
lmfit's to rounding (``tests/models/test_spline.py``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._models.builtin import _Builtin, _rows, _squeeze
from fixedopt._models.model import Model, with_parameters

ORDER = 3  # cubic, as lmfit's (its only order)
MOST_KNOTS = 100  # lmfit's limit


def knot_vector(xknots: np.ndarray) -> np.ndarray:
    """``splrep``'s knot vector of a cubic interpolant through ``xknots`` (sorted):
    each end four times, the inner knots but the second and the second-to-last."""
    return np.concatenate([[xknots[0]] * (ORDER + 1), xknots[2:-2], [xknots[-1]] * (ORDER + 1)])


def spline(x: Any, knots: np.ndarray, coefficients: jax.Array) -> jax.Array:
    """The cubic B-spline of ``coefficients`` (``(n,)``) on ``knots`` (``(n + 4,)``) at
    ``x``, by de Boor's algorithm; beyond the end knots the end pieces go on."""
    x = jnp.asarray(x)
    n = coefficients.shape[0]
    t = jnp.asarray(knots, x.dtype)
    # the knot interval of each x: t[j] <= x < t[j + 1], from ORDER to n - 1
    interval = jnp.clip(jnp.searchsorted(t, x, side="right") - 1, ORDER, n - 1)
    points = [coefficients[interval - ORDER + r] for r in range(ORDER + 1)]
    for level in range(1, ORDER + 1):
        for r in range(ORDER, level - 1, -1):
            left = t[interval + r - ORDER]
            right = t[interval + 1 + r - level]
            alpha = (x - left) / (right - left)
            points[r] = (1.0 - alpha) * points[r - 1] + alpha * points[r]
    return points[ORDER]


class SplineModel(_Builtin):
    """A cubic spline through the knots ``xknots`` (at least 4, at most 100, as lmfit's),
    its coefficients the parameters ``s0 ... s{n-1}``; ``guess`` reads each knot's
    coefficient off the data there, as lmfit's.

    Example:
      >>> import numpy as np
      >>> from fixedopt.models import SplineModel
      >>> model = SplineModel(np.linspace(0.0, 10.0, 6), prefix="bg_")
      >>> model.param_names[:3]
      ('bg_s0', 'bg_s1', 'bg_s2')
    """

    def __init__(self, xknots: Any, prefix: str = "") -> None:
        xknots = np.asarray(xknots, dtype=np.float64).ravel()
        if not ORDER + 1 <= len(xknots) <= MOST_KNOTS or np.any(np.diff(xknots) <= 0):
            raise ValueError(
                f"`xknots` must be {ORDER + 1} to {MOST_KNOTS} increasing values, got "
                f"{len(xknots)}{'' if np.all(np.diff(xknots) > 0) else ' not increasing'}"
            )
        self.xknots = xknots
        self.knots = knot_vector(xknots)
        Model.__init__(self, _spline_function(self.knots, len(xknots)), prefix, name="spline")

    def _guess(self, data: Any, x: Any) -> dict[str, Any]:
        rows, x = _rows(data, x)
        values = {}
        for i, knot in enumerate(self.xknots):
            at = int(np.abs(x - knot).argmin())
            here = rows[:, at]
            after = rows[:, at + 1] if at < len(x) - 2 else here
            before = rows[:, at - 1] if at > 0 else here
            values[f"s{i}"] = (4.0 * here + after + before) / 6.0
        return _squeeze(data, values)


def _spline_function(knots: np.ndarray, count: int) -> Any:
    """:func:`spline` on ``knots`` with the keywords ``s0 ... s{count-1}`` (default 1,
    as lmfit's) in its signature."""
    names = [f"s{i}" for i in range(count)]

    def spline_model(x: Any, **coefficients: Any) -> jax.Array:
        return spline(x, knots, jnp.stack([jnp.asarray(coefficients[n]) for n in names]))

    return with_parameters(spline_model, ("x",), names, default=1.0)

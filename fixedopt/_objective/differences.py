"""scipy's finite differences of a function run on the host
(``scipy.optimize._numdiff.approx_derivative``): the relative step ``eps ** (1/2)``
(``'2-point'``, ``'cs'``) or ``eps ** (1/3)`` (``'3-point'``) of the parameters' dtype,
times ``max(1, |p|)`` with the sign of ``p`` (``+`` at 0), each step made exact in
floating point (``(p + h) - p``); within bounds, scipy's adjustments: a ``'2-point'``
step that would leave them turns around, a ``'3-point'`` difference near one is
one-sided (or central with a shorter step).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SCHEMES = ("2-point", "3-point", "cs")


def finite_differences(
    fun: Callable[[np.ndarray], np.ndarray],
    p: np.ndarray,
    f0: np.ndarray,
    scheme: str,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
) -> np.ndarray:
    """The ``(f0.size, p.size)`` Jacobian of ``fun`` at ``p`` (``f0 = fun(p)``), its
    points within ``lower <= p <= upper`` where given.

    Example:
      >>> import numpy as np
      >>> p = np.array([2.0, -1.0])
      >>> fun = lambda p: np.array([p[0] ** 2, p[0] * p[1]])
      >>> print(finite_differences(fun, p, fun(p), "3-point").round(6) + 0.0)
      [[ 4.  0.]
       [-1.  2.]]
    """
    p = np.asarray(p)
    dtype = p.dtype if np.issubdtype(p.dtype, np.floating) else np.dtype(np.float64)
    eps = np.finfo(dtype).eps
    relative = eps ** (1 / 3) if scheme == "3-point" else eps**0.5
    sign = np.where(p >= 0, 1.0, -1.0).astype(dtype)
    h = (relative * sign * np.maximum(1.0, np.abs(p))).astype(dtype)
    h = np.abs(h) if scheme == "3-point" else h  # central: as scipy, steps ahead
    one_sided = np.zeros(p.shape, bool)
    if scheme != "cs" and (lower is not None or upper is not None):
        lower = np.broadcast_to(-np.inf if lower is None else lower, p.shape)
        upper = np.broadcast_to(np.inf if upper is None else upper, p.shape)
        h, one_sided = _within(p, h, lower, upper, scheme)
    f0 = np.ravel(f0)
    matrix = np.empty((f0.size, p.size), np.result_type(f0.dtype, dtype))
    for j in range(p.size):
        matrix[:, j] = _column(fun, p, f0, h, j, scheme, bool(one_sided[j]))
    return matrix


def _column(
    fun: Callable[[np.ndarray], np.ndarray], p: np.ndarray, f0: np.ndarray, h: np.ndarray,
    j: int, scheme: str, one_sided: bool,
) -> np.ndarray:  # fmt: skip
    """Column ``j``: the derivative in ``p[j]`` by ``scheme`` with step ``h[j]``."""

    def moved(by: float) -> np.ndarray:
        q = p.copy()
        q[j] = p[j] + by
        return q

    if scheme == "cs":  # the complex step, exact to rounding for a real-analytic fun
        q = p + 0j
        q[j] += 1j * h[j]
        return np.ravel(fun(q)).imag / h[j]  # type: ignore[no-any-return]
    if scheme == "2-point":
        ahead = moved(h[j])
        return (np.ravel(fun(ahead)) - f0) / (ahead[j] - p[j])  # type: ignore[no-any-return]
    if one_sided:  # scipy's one-sided three points: p, p + h, p + 2h
        first, second = moved(h[j]), moved(2 * h[j])
        change = -3.0 * f0 + 4 * np.ravel(fun(first)) - np.ravel(fun(second))
        return change / (second[j] - p[j])  # type: ignore[no-any-return]
    behind, ahead = moved(-h[j]), moved(h[j])
    return (np.ravel(fun(ahead)) - np.ravel(fun(behind))) / (ahead[j] - behind[j])  # type: ignore[no-any-return]


def _within(
    p: np.ndarray, h: np.ndarray, lower: np.ndarray, upper: np.ndarray, scheme: str
) -> tuple[np.ndarray, np.ndarray]:
    """scipy's steps kept within the bounds, and where a three-point difference is
    one-sided."""
    h, one_sided = h.copy(), np.zeros(p.shape, bool)
    below, above = p - lower, upper - p
    if scheme == "2-point":
        violated = (p + h < lower) | (p + h > upper)
        fitting = np.abs(h) <= np.maximum(below, above)
        h[violated & fitting] *= -1
        forward = (above >= below) & ~fitting
        h[forward] = above[forward]
        backward = (above < below) & ~fitting
        h[backward] = -below[backward]
        return h, one_sided
    central = (below >= h) & (above >= h)
    forward = (above >= below) & ~central
    h[forward] = np.minimum(h[forward], 0.5 * above[forward])
    backward = (above < below) & ~central
    h[backward] = -np.minimum(h[backward], 0.5 * below[backward])
    one_sided = forward | backward
    nearest = np.minimum(above, below)
    shorter = ~central & (np.abs(h) <= nearest)
    h[shorter] = nearest[shorter]
    one_sided[shorter] = False
    return h, one_sided

"""scipy's finite differences of a function run on the host
(``scipy.optimize._numdiff.approx_derivative`` without bounds): the relative step
``eps ** (1/2)`` (``'2-point'``, ``'cs'``) or ``eps ** (1/3)`` (``'3-point'``) of the
parameters' dtype, times ``max(1, |p|)`` with the sign of ``p`` (``+`` at 0), each
step made exact in floating point (``(p + h) - p``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SCHEMES = ("2-point", "3-point", "cs")


def finite_differences(
    fun: Callable[[np.ndarray], np.ndarray], p: np.ndarray, f0: np.ndarray, scheme: str
) -> np.ndarray:
    """The ``(f0.size, p.size)`` Jacobian of ``fun`` at ``p`` (``f0 = fun(p)``).

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
    f0 = np.ravel(f0)
    matrix = np.empty((f0.size, p.size), np.result_type(f0.dtype, dtype))
    for j in range(p.size):
        step = np.zeros_like(p, dtype)
        step[j] = h[j]
        if scheme == "2-point":
            ahead = p + step
            matrix[:, j] = (np.ravel(fun(ahead)) - f0) / (ahead[j] - p[j])
        elif scheme == "3-point":
            ahead, behind = p + step, p - step
            matrix[:, j] = (np.ravel(fun(ahead)) - np.ravel(fun(behind))) / (ahead[j] - behind[j])
        else:  # 'cs': the complex step, exact to rounding for a real-analytic fun
            complex_step = p + 1j * step
            matrix[:, j] = np.ravel(fun(complex_step)).imag / h[j]
    return matrix

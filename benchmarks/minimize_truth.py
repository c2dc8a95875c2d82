"""The status-truth cases of ``minimize``: problems, starts, and the independent
judge of accuracy (shared by ``tests/driver/test_minimize_truth.py`` and
``benchmarks/status_truth.py``).

Each problem is a residual function ``r(x)``; ``minimize`` sees ``scale * 0.5 |r|^2``
with ``scale`` in ``(1e-6, 1, 1e6)`` (the same fit in other units of the objective).
They are the Moré–Garbow–Hillstrom least-squares problems of
``benchmarks/mgh_least_squares.py`` (their data arrays are float64, so a float32 row
computes parts of its objective in float64), minimize's degenerate minima (Powell's
singular function, Wood: ``f* = 0``, the first with a singular Hessian), written in
the dtype of ``x``, and three regression fits whose parameters differ in scale by up
to 1e6, with synthetic data (the models and magnitudes of NIST's Misra1a, Bennett5
and a Gaussian peak on a background).

Accuracy is judged in float64 by scipy: the returned point ``x`` is polished by
MINPACK (``least_squares(method="lm")``, tolerances 1e-15) to ``x*``, and ``f*`` is
the smaller of the polished and the returned objective. A row is accurate when its
parameters are, as ``least_squares``'s are documented (every parameter within
``100 sqrt(eps)`` of ``x*``, relative to ``max(|x*_i|, 1e-3 |x*|_inf, 1e-3 |x0 - x*|_inf)``),
or when its objective is (``eps`` of the row's dtype):

    f(x) - f* <= sqrt(eps) * max(|f*|, eps * (f(x0) - f*)),

within ``sqrt(eps)`` of its minimum, relatively, or, where the minimum is 0 (at a
singular minimum, where parameters are determined only to ``gap ** (1/4)``), within
``eps ** 1.5`` of the start's height above it: the scale
the driver's loop stops on (its ``objective_scale``), with room ``1 / sqrt(eps)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import scipy.optimize

from benchmarks import mgh_least_squares as mgh

SCALES = (1e-6, 1.0, 1e6)
DTYPES = (np.float32, np.float64)
POLISH = {"method": "lm", "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15, "max_nfev": 20_000}


class Problem(NamedTuple):
    residuals: object  # x -> r, jax.numpy
    starts: tuple  # starting points


def powell_singular(x):
    five, ten = jnp.sqrt(jnp.asarray(5.0, x.dtype)), jnp.sqrt(jnp.asarray(10.0, x.dtype))
    return jnp.stack([x[0] + 10 * x[1], five * (x[2] - x[3]), (x[1] - 2 * x[2]) ** 2,
                      ten * (x[0] - x[3]) ** 2])  # fmt: skip


def wood(x):
    s90, s10 = jnp.sqrt(jnp.asarray(90.0, x.dtype)), jnp.sqrt(jnp.asarray(10.0, x.dtype))
    return jnp.stack([10 * (x[1] - x[0] ** 2), 1 - x[0], s90 * (x[3] - x[2] ** 2), 1 - x[2],
                      s10 * (x[1] + x[3] - 2), (x[1] - x[3]) / s10])  # fmt: skip


def _data(seed: int, t: np.ndarray, model, truth, noise: float) -> np.ndarray:
    """``model(truth, t)`` plus Gaussian noise of standard deviation ``noise``."""
    y = np.asarray(model(jnp.asarray(truth, np.float64), jnp.asarray(t, np.float64)))
    return y + noise * np.random.default_rng(seed).normal(size=t.shape)


def saturation(b, t):
    """Misra1a's model ``b1 (1 - exp(-b2 t))``: b1 ~ 240, b2 ~ 5.5e-4."""
    return b[0] * (1 - jnp.exp(-b[1] * t))


def power_law(b, t):
    """Bennett5's model ``b1 (b2 + t)^(-1/b3)``: b1 ~ -2500, b2 ~ 47, b3 ~ 0.93."""
    return b[0] * (b[1] + t) ** (-1 / b[2])


def peak(b, t):
    """A Gaussian peak on a background: amplitude 1e4, centre 500, width 5, level 100."""
    return b[0] * jnp.exp(-0.5 * ((t - b[1]) / b[2]) ** 2) + b[3]


SATURATION_T = np.array([77.6, 114.9, 141.1, 190.8, 239.9, 289.0, 332.8, 378.4, 434.8,
                         477.3, 536.8, 593.1, 689.1, 760.0])  # fmt: skip
SATURATION_Y = _data(1, SATURATION_T, saturation, [238.94, 5.5016e-4], 0.1)
POWER_T = np.linspace(7.447, 11.79, 154)
POWER_Y = _data(2, POWER_T, power_law, [-2523.5, 46.737, 0.93218], 0.002)
PEAK_T = np.linspace(470.0, 530.0, 61)
PEAK_Y = _data(3, PEAK_T, peak, [1e4, 500.0, 5.0, 100.0], 30.0)


def fit(model, t: np.ndarray, y: np.ndarray):
    """The residual function of ``model`` on the data ``(t, y)``, in the dtype of ``x``."""

    def residuals(x):
        return model(x, jnp.asarray(t, x.dtype)) - jnp.asarray(y, x.dtype)

    return residuals


def _mgh(name: str, factor: float = 10.0) -> Problem:
    problem = mgh.PROBLEMS[name]
    start = np.asarray(problem.start, np.float64)
    return Problem(problem.residuals, (tuple(start), tuple(factor * start)))


PROBLEMS: dict[str, Problem] = {
    **{name: _mgh(name) for name in mgh.PROBLEMS},
    "powell_singular": Problem(powell_singular, ((3.0, -1.0, 0.0, 1.0), (30.0, -10.0, 0.0, 10.0))),
    "wood": Problem(wood, ((-3.0, -1.0, -3.0, -1.0), (-30.0, -10.0, -30.0, -10.0))),
    "saturation": Problem(fit(saturation, SATURATION_T, SATURATION_Y),
                          ((500.0, 1e-4), (250.0, 5e-4))),
    "power_law": Problem(fit(power_law, POWER_T, POWER_Y),
                         ((-2000.0, 50.0, 0.8), (-1500.0, 45.0, 0.85))),
    "peak": Problem(fit(peak, PEAK_T, PEAK_Y),
                    ((8000.0, 497.0, 4.0, 80.0), (1.2e4, 503.0, 7.0, 120.0))),
}  # fmt: skip


def objective(residuals):
    """``scale * 0.5 |r(x)|^2``, the function ``minimize`` sees."""

    def fun(x, scale):
        r = residuals(x)
        return scale * 0.5 * jnp.sum(r * r)

    return fun


def half_sum_of_squares(residuals, x: np.ndarray) -> float:
    """``0.5 |r(x)|^2`` in float64."""
    r = np.asarray(residuals(jnp.asarray(x, np.float64)), np.float64)
    return float(0.5 * np.dot(r, r)) if np.all(np.isfinite(r)) else math.inf


def parameter_error(x: np.ndarray, x_star: np.ndarray, x0: np.ndarray) -> float:
    """The largest error of a parameter, relative to ``max(|x*_i|, 1e-3 |x*|_inf,
    1e-3 |x0 - x*|_inf)`` (the last where ``x* = 0``)."""
    floor = 1e-3 * max(np.max(np.abs(x_star)), np.max(np.abs(x0 - x_star)))
    return float(np.max(np.abs(x - x_star) / np.maximum(np.abs(x_star), floor)))


def judge(residuals, x0: np.ndarray, x: np.ndarray, dtype) -> dict:
    """The independent verdict on a returned point ``x`` (see the module docstring)."""
    x, x0 = np.asarray(x, np.float64), np.asarray(x0, np.float64)
    value = half_sum_of_squares(residuals, x)
    best, x_star = value, x
    if np.all(np.isfinite(x)):
        fun = lambda z: np.asarray(residuals(jnp.asarray(z)), np.float64)
        try:
            polished = scipy.optimize.least_squares(fun, x, **POLISH).x
        except ValueError:  # MINPACK needs m >= n; the returned point is then the judge
            polished = x
        if half_sum_of_squares(residuals, polished) <= value:
            best, x_star = half_sum_of_squares(residuals, polished), polished
    eps = float(np.finfo(dtype).eps)
    start = half_sum_of_squares(residuals, x0)
    allowed = math.sqrt(eps) * max(abs(best), eps * max(start - best, 0.0))
    gap = value - best
    error = parameter_error(x, x_star, x0) if np.all(np.isfinite(x)) else math.inf
    accurate = bool(gap <= allowed or error <= 100 * math.sqrt(eps))
    return {"gap": gap, "allowed": allowed, "error": error, "accurate": accurate}

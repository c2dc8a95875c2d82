"""Least-squares test problems of Moré, Garbow and Hillstrom (1981), with their
standard starting points and their known minimizers; and two small batched fits for
the units tests (shared by ``tests/driver/test_statuses.py`` and
``benchmarks/status_truth.py``).

Each problem is ``residuals(x) -> r`` (jax.numpy), a standard start, and the known
local minimizers ``x*`` (computed from the published minima: where the paper lists
only ``f*``, ``x*`` is the point scipy's MINPACK reaches with tight tolerances, and
the test checks ``sum(r**2)`` there against the published value). ``f`` below is
MGH's ``sum(r**2)``; fixedopt's ``Solution.value`` is half of it.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import scipy.optimize


class LeastSquaresProblem(NamedTuple):
    residuals: object
    start: tuple
    minima: tuple  # ((x*, sum of squares at x*), ...): every known local minimizer


def rosenbrock(x):
    return jnp.stack([10.0 * (x[1] - x[0] ** 2), 1.0 - x[0]])


def freudenstein_roth(x):
    return jnp.stack(
        [
            -13.0 + x[0] + ((5.0 - x[1]) * x[1] - 2.0) * x[1],
            -29.0 + x[0] + ((x[1] + 1.0) * x[1] - 14.0) * x[1],
        ]
    )


def powell_badly_scaled(x):
    return jnp.stack([1e4 * x[0] * x[1] - 1.0, jnp.exp(-x[0]) + jnp.exp(-x[1]) - 1.0001])


def brown_badly_scaled(x):
    return jnp.stack([x[0] - 1e6, x[1] - 2e-6, x[0] * x[1] - 2.0])


def beale(x):
    y = jnp.array([1.5, 2.25, 2.625])
    i = jnp.arange(1.0, 4.0)
    return y - x[0] * (1.0 - x[1] ** i)


def jennrich_sampson(x):
    i = jnp.arange(1.0, 11.0)
    return 2.0 + 2.0 * i - (jnp.exp(i * x[0]) + jnp.exp(i * x[1]))


def helical_valley(x):
    theta = jnp.arctan2(x[1], x[0]) / (2.0 * jnp.pi)
    return jnp.stack(
        [
            10.0 * (x[2] - 10.0 * theta),
            10.0 * (jnp.sqrt(x[0] ** 2 + x[1] ** 2) - 1.0),
            x[2],
        ]
    )


BARD_Y = jnp.array(
    [0.14, 0.18, 0.22, 0.25, 0.29, 0.32, 0.35, 0.39, 0.37, 0.58, 0.73, 0.96, 1.34, 2.10, 4.39]
)


def bard(x):
    u = jnp.arange(1.0, 16.0)
    v = 16.0 - u
    w = jnp.minimum(u, v)
    return BARD_Y - (x[0] + u / (v * x[1] + w * x[2]))


GAUSSIAN_Y = jnp.array(
    [0.0009, 0.0044, 0.0175, 0.0540, 0.1295, 0.2420, 0.3521, 0.3989,
     0.3521, 0.2420, 0.1295, 0.0540, 0.0175, 0.0044, 0.0009]
)  # fmt: skip


def gaussian(x):
    t = (7.0 - jnp.arange(1.0, 16.0)) / 2.0
    return x[0] * jnp.exp(-x[1] * (t - x[2]) ** 2 / 2.0) - GAUSSIAN_Y


MEYER_Y = jnp.array(
    [34780.0, 28610.0, 23650.0, 19630.0, 16370.0, 13720.0, 11540.0, 9744.0,
     8261.0, 7030.0, 6005.0, 5147.0, 4427.0, 3820.0, 3307.0, 2872.0]
)  # fmt: skip


def meyer(x):
    t = 45.0 + 5.0 * jnp.arange(1.0, 17.0)
    return x[0] * jnp.exp(x[1] / (t + x[2])) - MEYER_Y


def box_3d(x):
    t = 0.1 * jnp.arange(1.0, 11.0)
    return jnp.exp(-t * x[0]) - jnp.exp(-t * x[1]) - x[2] * (jnp.exp(-t) - jnp.exp(-10.0 * t))


KOWALIK_Y = jnp.array(
    [0.1957, 0.1947, 0.1735, 0.1600, 0.0844, 0.0627, 0.0456, 0.0342, 0.0323, 0.0235, 0.0246]
)
KOWALIK_U = jnp.array([4.0, 2.0, 1.0, 0.5, 0.25, 0.167, 0.125, 0.1, 0.0833, 0.0714, 0.0625])


def kowalik_osborne(x):
    u = KOWALIK_U
    return KOWALIK_Y - x[0] * (u**2 + u * x[1]) / (u**2 + u * x[2] + x[3])


OSBORNE1_Y = jnp.array(
    [0.844, 0.908, 0.932, 0.936, 0.925, 0.908, 0.881, 0.850, 0.818, 0.784, 0.751,
     0.718, 0.685, 0.658, 0.628, 0.603, 0.580, 0.558, 0.538, 0.522, 0.506, 0.490,
     0.478, 0.467, 0.457, 0.448, 0.438, 0.431, 0.424, 0.420, 0.414, 0.411, 0.406]
)  # fmt: skip


def osborne_1(x):
    t = 10.0 * jnp.arange(33.0)
    return OSBORNE1_Y - (x[0] + x[1] * jnp.exp(-t * x[3]) + x[2] * jnp.exp(-t * x[4]))


def brown_dennis(x):
    t = jnp.arange(1.0, 21.0) / 5.0
    return (x[0] + t * x[1] - jnp.exp(t)) ** 2 + (x[2] + x[3] * jnp.sin(t) - jnp.cos(t)) ** 2


def biggs_exp6(x):
    t = 0.1 * jnp.arange(1.0, 14.0)
    y = jnp.exp(-t) - 5.0 * jnp.exp(-10.0 * t) + 3.0 * jnp.exp(-4.0 * t)
    return x[2] * jnp.exp(-t * x[0]) - x[3] * jnp.exp(-t * x[1]) + x[5] * jnp.exp(-t * x[4]) - y


# Minimizers: exact where MGH gives them; else the published sum of squares and a
# point reached by MINPACK with tolerances 1e-15 (see the module docstring).
PROBLEMS = {
    "rosenbrock": LeastSquaresProblem(rosenbrock, (-1.2, 1.0), (((1.0, 1.0), 0.0),)),
    "freudenstein_roth": LeastSquaresProblem(
        freudenstein_roth,
        (0.5, -2.0),
        (((5.0, 4.0), 0.0), ((11.412779, -0.8968053), 48.9842)),
    ),
    "powell_badly_scaled": LeastSquaresProblem(
        powell_badly_scaled, (0.0, 1.0), (((1.098159e-5, 9.106147), 0.0),)
    ),
    "brown_badly_scaled": LeastSquaresProblem(
        brown_badly_scaled, (1.0, 1.0), (((1e6, 2e-6), 0.0),)
    ),
    "beale": LeastSquaresProblem(beale, (1.0, 1.0), (((3.0, 0.5), 0.0),)),
    "jennrich_sampson": LeastSquaresProblem(
        jennrich_sampson, (0.3, 0.4), (((0.2578252, 0.2578252), 124.362),)
    ),
    "helical_valley": LeastSquaresProblem(
        helical_valley, (-1.0, 0.0, 0.0), (((1.0, 0.0, 0.0), 0.0),)
    ),
    "bard": LeastSquaresProblem(
        bard, (1.0, 1.0, 1.0), (((0.08241056, 1.133037, 2.343695), 8.21487e-3),)
    ),
    "gaussian": LeastSquaresProblem(
        gaussian, (0.4, 1.0, 0.0), (((0.3989561, 1.000019, 0.0), 1.12793e-8),)
    ),
    "meyer": LeastSquaresProblem(
        meyer, (0.02, 4000.0, 250.0), (((0.005609636, 6181.346, 345.2236), 87.9458),)
    ),
    "box_3d": LeastSquaresProblem(box_3d, (0.0, 10.0, 20.0), (((1.0, 10.0, 1.0), 0.0),)),
    "kowalik_osborne": LeastSquaresProblem(
        kowalik_osborne,
        (0.25, 0.39, 0.415, 0.39),
        (((0.1928069, 0.1912823, 0.1230565, 0.1360623), 3.07505e-4),),
    ),
    "osborne_1": LeastSquaresProblem(
        osborne_1,
        (0.5, 1.5, -1.0, 0.01, 0.02),
        (((0.3754101, 1.935847, -1.464687, 0.01286753, 0.02212270), 5.46489e-5),),
    ),
    "brown_dennis": LeastSquaresProblem(
        brown_dennis,
        (25.0, 5.0, -5.0, -1.0),
        (((-11.59444, 13.20363, -0.4034394, 0.2367787), 85822.2),),
    ),
}


def relative_error(x, x_star) -> float:
    """Largest per-component error, relative to ``max(|x*_i|, 1e-3 |x*|_inf)``."""
    x, x_star = np.asarray(x, float), np.asarray(x_star, float)
    floor = 1e-3 * np.max(np.abs(x_star))
    return float(np.max(np.abs(x - x_star) / np.maximum(np.abs(x_star), floor)))


# ------------------------------------------------------------ fits for the units tests

T = np.linspace(0.0, 3.0, 25)
ROW_FIXED = np.array([[False] * 3, [False, False, True], [True, False, False], [False] * 3])


def decay(p, y):
    """An amplitude, a rate and an offset: amplitude, offset and data share units."""
    return p[0] * jnp.exp(-p[1] * T) + p[2] - y


def decay_batch():
    """Four noisy curves, each with its own fixed parameter (or none)."""
    rng = np.random.default_rng(0)
    truth = np.array([[2.0, 1.3, 0.5], [1.0, 0.7, -0.2], [3.0, 2.1, 0.1], [0.5, 0.4, 1.0]])
    y = truth[:, :1] * np.exp(-truth[:, 1:2] * T) + truth[:, 2:]
    y = y + 0.01 * rng.normal(size=y.shape)
    return np.where(ROW_FIXED, truth, [[1.0, 1.0, 0.0]]), ROW_FIXED.copy(), y


def hyperbola(p, y):
    """Homogeneous of degree 1 in ``p``: every parameter has the data's units."""
    return jnp.sqrt(p[0] ** 2 + (p[1] * T) ** 2) + p[2] * T - y


def hyperbola_batch():
    rng = np.random.default_rng(1)
    truth = np.array([[1.0, 2.0, -0.5], [0.5, 1.0, 0.3], [2.0, 0.7, 0.1], [1.5, 3.0, -1.0]])
    y = np.sqrt(truth[:, :1] ** 2 + (truth[:, 1:2] * T) ** 2) + truth[:, 2:] * T
    y = y + 0.01 * rng.normal(size=y.shape)
    return np.where(ROW_FIXED, truth, [[0.8, 1.5, 0.0]]), ROW_FIXED.copy(), y


def reference_fits(x0, fixed, y, model):
    """MINPACK on each row's reduced problem (fixed parameters removed), tolerances
    1e-15."""
    fits = []
    for b in range(len(x0)):
        free = ~fixed[b]

        def reduced(z, b=b, free=free):
            p = x0[b].copy()
            p[free] = z
            return np.asarray(model(jnp.asarray(p), jnp.asarray(y[b])))

        tight = dict(xtol=1e-15, ftol=1e-15, gtol=1e-15)
        p = x0[b].copy()
        p[free] = scipy.optimize.least_squares(reduced, x0[b][free], method="lm", **tight).x
        fits.append(p)
    return np.array(fits)

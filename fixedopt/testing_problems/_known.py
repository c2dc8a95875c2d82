"""The problems with known answers: Moré, Garbow and Hillstrom's least-squares problems,
the status-truth cases of ``minimize`` with an independent judge, and two small batched
fits in the data's units with MINPACK's fits of them (see the package's docstring).
The references call scipy (not a dependency of fixedopt), imported where they are used."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Residuals = Callable[[jax.Array], jax.Array]


class LeastSquaresProblem(NamedTuple):
    """A residual function ``x -> r`` (jax.numpy), a standard start, and every known
    local minimizer ``x*`` with MGH's ``f = sum(r**2)`` there (fixedopt's
    ``Solution.value`` is half of it). Where MGH lists only ``f*``, ``x*`` is the point
    scipy's MINPACK reaches with tolerances 1e-15."""

    residuals: Residuals
    start: tuple[float, ...]
    minima: tuple[tuple[tuple[float, ...], float], ...]


def rosenbrock(x: jax.Array) -> jax.Array:
    return jnp.stack([10.0 * (x[1] - x[0] ** 2), 1.0 - x[0]])


def freudenstein_roth(x: jax.Array) -> jax.Array:
    return jnp.stack([-13.0 + x[0] + ((5.0 - x[1]) * x[1] - 2.0) * x[1],
                      -29.0 + x[0] + ((x[1] + 1.0) * x[1] - 14.0) * x[1]])  # fmt: skip


def powell_badly_scaled(x: jax.Array) -> jax.Array:
    return jnp.stack([1e4 * x[0] * x[1] - 1.0, jnp.exp(-x[0]) + jnp.exp(-x[1]) - 1.0001])


def brown_badly_scaled(x: jax.Array) -> jax.Array:
    return jnp.stack([x[0] - 1e6, x[1] - 2e-6, x[0] * x[1] - 2.0])


def beale(x: jax.Array) -> jax.Array:
    y = jnp.array([1.5, 2.25, 2.625])
    i = jnp.arange(1.0, 4.0)
    return y - x[0] * (1.0 - x[1] ** i)


def jennrich_sampson(x: jax.Array) -> jax.Array:
    i = jnp.arange(1.0, 11.0)
    return 2.0 + 2.0 * i - (jnp.exp(i * x[0]) + jnp.exp(i * x[1]))


def helical_valley(x: jax.Array) -> jax.Array:
    theta = jnp.arctan2(x[1], x[0]) / (2.0 * jnp.pi)
    return jnp.stack([10.0 * (x[2] - 10.0 * theta),
                      10.0 * (jnp.sqrt(x[0] ** 2 + x[1] ** 2) - 1.0), x[2]])  # fmt: skip


# The data of MGH's problems, float64 (a float32 row computes parts of its residuals in
# float64 where x64 is on).
BARD_Y = np.array([0.14, 0.18, 0.22, 0.25, 0.29, 0.32, 0.35, 0.39, 0.37, 0.58, 0.73, 0.96,
                   1.34, 2.10, 4.39])  # fmt: skip
GAUSSIAN_Y = np.array([0.0009, 0.0044, 0.0175, 0.0540, 0.1295, 0.2420, 0.3521, 0.3989,
                       0.3521, 0.2420, 0.1295, 0.0540, 0.0175, 0.0044, 0.0009])  # fmt: skip
MEYER_Y = np.array([34780.0, 28610.0, 23650.0, 19630.0, 16370.0, 13720.0, 11540.0, 9744.0,
                    8261.0, 7030.0, 6005.0, 5147.0, 4427.0, 3820.0, 3307.0, 2872.0])  # fmt: skip
KOWALIK_Y = np.array([0.1957, 0.1947, 0.1735, 0.1600, 0.0844, 0.0627, 0.0456, 0.0342,
                      0.0323, 0.0235, 0.0246])  # fmt: skip
KOWALIK_U = np.array([4.0, 2.0, 1.0, 0.5, 0.25, 0.167, 0.125, 0.1, 0.0833, 0.0714, 0.0625])
OSBORNE1_Y = np.array(
    [0.844, 0.908, 0.932, 0.936, 0.925, 0.908, 0.881, 0.850, 0.818, 0.784, 0.751,
     0.718, 0.685, 0.658, 0.628, 0.603, 0.580, 0.558, 0.538, 0.522, 0.506, 0.490,
     0.478, 0.467, 0.457, 0.448, 0.438, 0.431, 0.424, 0.420, 0.414, 0.411, 0.406]
)  # fmt: skip


def bard(x: jax.Array) -> jax.Array:
    u = jnp.arange(1.0, 16.0)
    v = 16.0 - u
    w = jnp.minimum(u, v)
    return jnp.asarray(BARD_Y) - (x[0] + u / (v * x[1] + w * x[2]))


def gaussian(x: jax.Array) -> jax.Array:
    t = (7.0 - jnp.arange(1.0, 16.0)) / 2.0
    return x[0] * jnp.exp(-x[1] * (t - x[2]) ** 2 / 2.0) - jnp.asarray(GAUSSIAN_Y)


def meyer(x: jax.Array) -> jax.Array:
    t = 45.0 + 5.0 * jnp.arange(1.0, 17.0)
    return x[0] * jnp.exp(x[1] / (t + x[2])) - jnp.asarray(MEYER_Y)


def box_3d(x: jax.Array) -> jax.Array:
    t = 0.1 * jnp.arange(1.0, 11.0)
    return jnp.exp(-t * x[0]) - jnp.exp(-t * x[1]) - x[2] * (jnp.exp(-t) - jnp.exp(-10.0 * t))


def kowalik_osborne(x: jax.Array) -> jax.Array:
    u = jnp.asarray(KOWALIK_U)
    return jnp.asarray(KOWALIK_Y) - x[0] * (u**2 + u * x[1]) / (u**2 + u * x[2] + x[3])


def osborne_1(x: jax.Array) -> jax.Array:
    t = 10.0 * jnp.arange(33.0)
    model = x[0] + x[1] * jnp.exp(-t * x[3]) + x[2] * jnp.exp(-t * x[4])
    return jnp.asarray(OSBORNE1_Y) - model


def brown_dennis(x: jax.Array) -> jax.Array:
    t = jnp.arange(1.0, 21.0) / 5.0
    return (x[0] + t * x[1] - jnp.exp(t)) ** 2 + (x[2] + x[3] * jnp.sin(t) - jnp.cos(t)) ** 2


def biggs_exp6(x: jax.Array) -> jax.Array:
    t = 0.1 * jnp.arange(1.0, 14.0)
    y = jnp.exp(-t) - 5.0 * jnp.exp(-10.0 * t) + 3.0 * jnp.exp(-4.0 * t)
    return x[2] * jnp.exp(-t * x[0]) - x[3] * jnp.exp(-t * x[1]) + x[5] * jnp.exp(-t * x[4]) - y


LEAST_SQUARES = {  # name: (residuals, start, ((x*, f*), ...))
    "rosenbrock": LeastSquaresProblem(rosenbrock, (-1.2, 1.0), (((1.0, 1.0), 0.0),)),
    "freudenstein_roth": LeastSquaresProblem(
        freudenstein_roth, (0.5, -2.0), (((5.0, 4.0), 0.0), ((11.412779, -0.8968053), 48.9842))
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


def relative_error(x: Any, x_star: Any) -> float:
    """Largest per-component error, relative to ``max(|x*_i|, 1e-3 |x*|_inf)``."""
    x, x_star = np.asarray(x, float), np.asarray(x_star, float)
    return _largest_error(x, x_star, 1e-3 * np.max(np.abs(x_star)))


def _largest_error(x: np.ndarray, x_star: np.ndarray, floor: float) -> float:
    """Largest per-component error, relative to ``max(|x*_i|, floor)``."""
    return float(np.max(np.abs(x - x_star) / np.maximum(np.abs(x_star), floor)))


# ------------------------------------------------ batched fits in the data's units

T = np.linspace(0.0, 3.0, 25)
ROW_FIXED = np.array([[False] * 3, [False, False, True], [True, False, False], [False] * 3])
Batch = tuple[np.ndarray, np.ndarray, np.ndarray]  # x0, fixed, y: one row per fit


def decay(p: jax.Array, y: jax.Array) -> jax.Array:
    """An amplitude, a rate and an offset: amplitude, offset and data share units."""
    return p[0] * jnp.exp(-p[1] * T) + p[2] - y


def decay_batch() -> Batch:
    """Four noisy curves, each with its own fixed parameter (or none)."""
    rng = np.random.default_rng(0)
    truth = np.array([[2.0, 1.3, 0.5], [1.0, 0.7, -0.2], [3.0, 2.1, 0.1], [0.5, 0.4, 1.0]])
    y = truth[:, :1] * np.exp(-truth[:, 1:2] * T) + truth[:, 2:]
    y = y + 0.01 * rng.normal(size=y.shape)
    return np.where(ROW_FIXED, truth, [[1.0, 1.0, 0.0]]), ROW_FIXED.copy(), y


def hyperbola(p: jax.Array, y: jax.Array) -> jax.Array:
    """Homogeneous of degree 1 in ``p``: every parameter has the data's units."""
    return jnp.sqrt(p[0] ** 2 + (p[1] * T) ** 2) + p[2] * T - y


def hyperbola_batch() -> Batch:
    """Four noisy curves, each with its own fixed parameter (or none)."""
    rng = np.random.default_rng(1)
    truth = np.array([[1.0, 2.0, -0.5], [0.5, 1.0, 0.3], [2.0, 0.7, 0.1], [1.5, 3.0, -1.0]])
    y = np.sqrt(truth[:, :1] ** 2 + (truth[:, 1:2] * T) ** 2) + truth[:, 2:] * T
    y = y + 0.01 * rng.normal(size=y.shape)
    return np.where(ROW_FIXED, truth, [[0.8, 1.5, 0.0]]), ROW_FIXED.copy(), y


def reference_fits(
    x0: np.ndarray, fixed: np.ndarray, y: np.ndarray, model: Callable[..., jax.Array]
) -> np.ndarray:
    """MINPACK on each row's reduced problem (fixed parameters removed), tolerances 1e-15."""
    import scipy.optimize

    fits = []
    for b in range(len(x0)):
        free = ~fixed[b]

        def reduced(z: np.ndarray, b: int = b, free: np.ndarray = free) -> np.ndarray:
            p = x0[b].copy()
            p[free] = z
            return np.asarray(model(jnp.asarray(p), jnp.asarray(y[b])))

        tight = dict(xtol=1e-15, ftol=1e-15, gtol=1e-15)
        p = x0[b].copy()
        p[free] = scipy.optimize.least_squares(reduced, x0[b][free], method="lm", **tight).x
        fits.append(p)
    return np.array(fits)


# ------------------------------------------------ the status-truth cases of minimize

SCALES = (1e-6, 1.0, 1e6)  # the objective times each: the same fit in other units
POLISH = {"method": "lm", "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15, "max_nfev": 20_000}


class MinimizeProblem(NamedTuple):
    """A residual function ``x -> r`` (jax.numpy) and starting points: ``minimize``
    sees ``scale * 0.5 |r|^2`` (:func:`objective`)."""

    residuals: Residuals
    starts: tuple[tuple[float, ...], ...]


def powell_singular(x: jax.Array) -> jax.Array:
    """Powell's singular function (``f* = 0``, a singular Hessian), in the dtype of ``x``."""
    five, ten = jnp.sqrt(jnp.asarray(5.0, x.dtype)), jnp.sqrt(jnp.asarray(10.0, x.dtype))
    return jnp.stack([x[0] + 10 * x[1], five * (x[2] - x[3]), (x[1] - 2 * x[2]) ** 2,
                      ten * (x[0] - x[3]) ** 2])  # fmt: skip


def wood(x: jax.Array) -> jax.Array:
    """Wood's function (``f* = 0``), in the dtype of ``x``."""
    s90, s10 = jnp.sqrt(jnp.asarray(90.0, x.dtype)), jnp.sqrt(jnp.asarray(10.0, x.dtype))
    return jnp.stack([10 * (x[1] - x[0] ** 2), 1 - x[0], s90 * (x[3] - x[2] ** 2), 1 - x[2],
                      s10 * (x[1] + x[3] - 2), (x[1] - x[3]) / s10])  # fmt: skip


def saturation(b: jax.Array, t: jax.Array, xp: Any = jnp) -> Any:
    """NIST Misra1a's model ``b1 (1 - exp(-b2 t))``: b1 ~ 240, b2 ~ 5.5e-4."""
    return b[0] * (1 - xp.exp(-b[1] * t))


def power_law(b: jax.Array, t: jax.Array, xp: Any = jnp) -> Any:
    """NIST Bennett5's model ``b1 (b2 + t)^(-1/b3)``: b1 ~ -2500, b2 ~ 47, b3 ~ 0.93."""
    return b[0] * (b[1] + t) ** (-1 / b[2])


def peak(b: jax.Array, t: jax.Array, xp: Any = jnp) -> Any:
    """A Gaussian peak on a background: amplitude 1e4, centre 500, width 5, level 100."""
    return b[0] * xp.exp(-0.5 * ((t - b[1]) / b[2]) ** 2) + b[3]


Model = Callable[..., jax.Array]  # (b, t, xp=jax.numpy): NumPy's too, for the data


def synthetic(seed: int, t: np.ndarray, model: Model, truth: list[float], noise: float) -> Any:
    """``model(truth, t)`` in float64 (NumPy's: importing compiles nothing), plus Gaussian
    noise of standard deviation ``noise``."""
    y = model(np.asarray(truth, np.float64), np.asarray(t, np.float64), np)
    return y + noise * np.random.default_rng(seed).normal(size=t.shape)


def fit(model: Model, t: np.ndarray, y: np.ndarray) -> Residuals:
    """The residual function of ``model`` on the data ``(t, y)``, in the dtype of ``x``."""

    def residuals(x: jax.Array) -> jax.Array:
        return model(x, jnp.asarray(t, x.dtype)) - jnp.asarray(y, x.dtype)

    return residuals


SATURATION_T = np.array([77.6, 114.9, 141.1, 190.8, 239.9, 289.0, 332.8, 378.4, 434.8,
                         477.3, 536.8, 593.1, 689.1, 760.0])  # fmt: skip
SATURATION_Y = synthetic(1, SATURATION_T, saturation, [238.94, 5.5016e-4], 0.1)
POWER_T = np.linspace(7.447, 11.79, 154)
POWER_Y = synthetic(2, POWER_T, power_law, [-2523.5, 46.737, 0.93218], 0.002)
PEAK_T = np.linspace(470.0, 530.0, 61)
PEAK_Y = synthetic(3, PEAK_T, peak, [1e4, 500.0, 5.0, 100.0], 30.0)


def _from_least_squares(problem: LeastSquaresProblem) -> MinimizeProblem:
    start = tuple(float(s) for s in np.asarray(problem.start, np.float64))
    return MinimizeProblem(problem.residuals, (start, tuple(10.0 * s for s in start)))


# The MGH problems (from their start and 10 times it); two degenerate minima; three
# regression fits whose parameters differ in scale by up to 1e6 (synthetic data with
# the models and magnitudes of NIST's Misra1a and Bennett5, and a Gaussian peak).
MINIMIZE: dict[str, MinimizeProblem] = {
    **{name: _from_least_squares(problem) for name, problem in LEAST_SQUARES.items()},
    "powell_singular": MinimizeProblem(powell_singular, ((3.0, -1.0, 0.0, 1.0),
                                                         (30.0, -10.0, 0.0, 10.0))),
    "wood": MinimizeProblem(wood, ((-3.0, -1.0, -3.0, -1.0), (-30.0, -10.0, -30.0, -10.0))),
    "saturation": MinimizeProblem(fit(saturation, SATURATION_T, SATURATION_Y),
                                  ((500.0, 1e-4), (250.0, 5e-4))),
    "power_law": MinimizeProblem(fit(power_law, POWER_T, POWER_Y),
                                 ((-2000.0, 50.0, 0.8), (-1500.0, 45.0, 0.85))),
    "peak": MinimizeProblem(fit(peak, PEAK_T, PEAK_Y),
                            ((8000.0, 497.0, 4.0, 80.0), (1.2e4, 503.0, 7.0, 120.0))),
}  # fmt: skip


def objective(residuals: Residuals) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``fun(x, scale) = scale * 0.5 |r(x)|^2``, the function ``minimize`` sees."""

    def fun(x: jax.Array, scale: jax.Array) -> jax.Array:
        r = residuals(x)
        return scale * 0.5 * jnp.sum(r * r)

    return fun


def half_sum_of_squares(residuals: Residuals, x: np.ndarray) -> float:
    """``0.5 |r(x)|^2`` in float64 (inf where a residual is not finite)."""
    r = np.asarray(residuals(jnp.asarray(x, np.float64)), np.float64)
    return float(0.5 * np.dot(r, r)) if np.all(np.isfinite(r)) else math.inf


def parameter_error(x: np.ndarray, x_star: np.ndarray, x0: np.ndarray) -> float:
    """The largest error of a parameter, relative to ``max(|x*_i|, 1e-3 |x*|_inf,
    1e-3 |x0 - x*|_inf)`` (the last where ``x* = 0``)."""
    floor = 1e-3 * max(np.max(np.abs(x_star)), np.max(np.abs(x0 - x_star)))
    return _largest_error(x, x_star, floor)


def judge(residuals: Residuals, x0: Any, x: Any, dtype: Any) -> dict[str, Any]:
    """The independent verdict on a point ``x`` that ``minimize`` returned from ``x0``.

    Judged in float64 by scipy: ``x`` is polished by MINPACK (tolerances 1e-15) to
    ``x*``, and ``f*`` is the smaller of the polished and the returned objective. The
    row is accurate when its parameters are, as ``least_squares``'s are documented
    (every parameter within ``100 sqrt(eps)`` of ``x*``, relative as in
    :func:`parameter_error`), or when its objective is (``eps`` of ``dtype``):
    ``f(x) - f* <= sqrt(eps) max(|f*|, eps (f(x0) - f*))``, that is within ``sqrt(eps)``
    of its minimum relatively, or, where the minimum is 0 (a singular minimum, whose
    parameters are determined only to ``gap ** (1/4)``), within ``eps ** 1.5`` of the
    start's height above it: the scale the driver's loop stops on, with room
    ``1 / sqrt(eps)``. Returns ``gap``, ``allowed``, ``error`` and ``accurate``.
    """
    import scipy.optimize

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

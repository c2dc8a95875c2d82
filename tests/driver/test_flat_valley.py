"""Rows crossing a valley at the floor of ``f`` are not stopped as stationary.

With JAX's 64-bit mode off, float32 Rosenbrock rows (n = 64) near their minimum
lower neither ``f`` (its change is below rounding) nor the gradient's norm for several
accepted steps in a row while still moving down the valley; the rule that stops a row
after ``FLAT_STEPS`` such steps (``fixedopt._driver.loop``) called them CONVERGED
(PRECISION) with gradients up to 0.1 at ``abs_gtol`` 1e-3 (docs/decisions.md, "Flat
steps in a valley").
"""

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from fixedopt.testing_problems import BATCHED


def test_float32_rosenbrock_rows_in_the_valley_reach_abs_gtol():
    """16 rows of the benchmarks' rosen n = 64 (float32, relative tests off, as
    ``benchmarks.methods`` asks): every CONVERGED row's float64 gradient is within
    ``abs_gtol`` up to the float32 gradient's rounding (2x). Rows 8 and 13 stopped
    PRECISION at 0.0078 and 0.0126 with ``FLAT_STEPS`` = 4."""
    problem = BATCHED["rosen"](1024, 64, 0, "float32")
    x0, fixed = problem.x0[:16], problem.fixed[:16]
    with jax.enable_x64(False):
        solution = fixedopt.minimize(problem.jax_fun, jnp.asarray(x0), jnp.asarray(fixed),
                                     abs_gtol=1e-3, gtol=0.0, ftol=0.0, xtol=0.0,
                                     batched=True)  # fmt: skip
        x, status = np.asarray(solution.x, np.float64), np.asarray(solution.status)
    gradient = np.max(np.where(fixed, 0.0, np.abs(problem.numpy_fun(x)[1])), axis=-1)
    converged = status == fixedopt.Status.CONVERGED
    assert converged.all(), status
    assert np.all(gradient[converged] <= 2e-3), gradient


def test_float32_least_squares_rows_below_the_cost_rounding_reach_abs_gtol():
    """Levenberg-Marquardt on ``1e4 + 0.5 sum_i d_i (x_i - c_i)^2`` (``d`` from 1 to 1e4,
    n = 16, float32, relative tests off): a gap of the cost below its rounding (1e-3)
    leaves gradients up to 1.2 on the stiff entries, far above their rounding. Its
    steps then change the cost by rounding alone, and rows 0 and 6 gave up CONVERGED
    (PRECISION) at gradients 1.06 and 1.18 before a step that lowers the gradient
    (then ``GRADIENT_DROP`` times, now at all: ``LEVEL_DROP``) was taken
    (``fixedopt/_solvers/levenberg_marquardt.py``)."""
    rng = np.random.default_rng(0)
    d = np.geomspace(1.0, 1e4, 16)
    c = rng.normal(size=(128, 16))
    x0 = (c + rng.normal(size=(128, 16)))[:8]
    fixed = (rng.random((128, 16)) < 0.3)[:8]
    c = c[:8].astype(np.float32)
    with jax.enable_x64(False):
        weights = jnp.sqrt(jnp.asarray(d, jnp.float32))

        def residuals(x, c):
            offset = jnp.full((1,), np.sqrt(2e4), x.dtype)  # the cost's 1e4
            return jnp.concatenate([weights * (x - c), offset])

        solution = fixedopt.least_squares(residuals, jnp.asarray(x0, jnp.float32),
                                          jnp.asarray(fixed), args=(jnp.asarray(c),),
                                          abs_gtol=1e-2, gtol=0.0, ftol=0.0, xtol=0.0,
                                          batched=True)  # fmt: skip
        x, status = np.asarray(solution.x, np.float64), np.asarray(solution.status)
    gradient = np.max(np.where(fixed, 0.0, np.abs(d * (x - c))), axis=-1)
    assert (status == fixedopt.Status.CONVERGED).all(), status
    assert np.all(gradient <= 2e-2), gradient


def test_float32_gauss_newton_rows_whose_gradient_can_fall_reach_abs_gtol():
    """Gauss-Newton on rosen's residuals (n = 64, float32, relative tests off, abs_gtol
    1e-4), three rows of 128: each took a step that changed the cost by rounding and
    lowered the gradient's max-norm over 100 times, and its secant then predicted no more
    than rounding to gain: the rows gave up CONVERGED (PRECISION) at float64 gradients
    3.5e-4, 2.4e-4 and 6.2e-4 (the float32 points nearest their minima have 1.5e-5 to
    1.7e-5) before such a step went on (``GRADIENT_DROP``,
    ``fixedopt/_solvers/gauss_newton.py``)."""
    problem = BATCHED["rosen"](128, 64, 0, "float32")
    rows = [76, 85, 115]
    x0, fixed = problem.x0[rows], problem.fixed[rows]

    def residuals(x):
        odd, even = x[0::2], x[1::2]
        return jnp.concatenate([10.0 * (even - odd**2), 1.0 - odd])

    with jax.enable_x64(False):
        solution = fixedopt.least_squares(residuals, jnp.asarray(x0), jnp.asarray(fixed),
                                          solver=fixedopt.GaussNewton(), abs_gtol=1e-4,
                                          gtol=0.0, ftol=0.0, xtol=0.0, batched=True)  # fmt: skip
        x, status = np.asarray(solution.x, np.float64), np.asarray(solution.status)
    gradient = np.max(np.where(fixed, 0.0, np.abs(0.5 * problem.numpy_fun(x)[1])), axis=-1)
    assert (status == fixedopt.Status.CONVERGED).all(), status
    assert np.all(gradient <= 2e-4), gradient


def rosen_residuals(x):
    odd, even = x[0::2], x[1::2]
    return jnp.concatenate([10.0 * (even - odd**2), 1.0 - odd])


def test_float32_levenberg_marquardt_rows_above_their_floor_reach_abs_gtol():
    """Levenberg-Marquardt on rosen's residuals (n = 64, float32, relative tests off,
    abs_gtol 3e-5), four rows of 128: each tried a step whose predicted and actual
    changes of the cost were rounding and that lowered the gradient's max-norm 4 to 7
    times (1.0e-4 -> 2.5e-5 on row 67), short of ``GRADIENT_DROP``'s 8, and gave up
    CONVERGED (PRECISION) at float64 gradients up to 1.56e-4 (docs/decisions.md, "The
    last false PRECISION verdicts"); such a trial is now taken (``LEVEL_DROP``)."""
    problem = BATCHED["rosen"](128, 64, 0, "float32")
    rows = [5, 67, 68, 106]
    x0, fixed = problem.x0[rows], problem.fixed[rows]
    with jax.enable_x64(False):
        solution = fixedopt.least_squares(rosen_residuals, jnp.asarray(x0), jnp.asarray(fixed),
                                          abs_gtol=3e-5, gtol=0.0, ftol=0.0, xtol=0.0,
                                          batched=True)  # fmt: skip
        x, status = np.asarray(solution.x, np.float64), np.asarray(solution.status)
    gradient = np.max(np.where(fixed, 0.0, np.abs(0.5 * problem.numpy_fun(x)[1])), axis=-1)
    assert (status == fixedopt.Status.CONVERGED).all(), status
    assert np.all(gradient <= 6e-5), gradient


def test_float32_gradient_descent_rows_above_their_floor_do_not_stop_converged():
    """Gradient descent on rosen's cost (n = 64, float32, relative tests off, abs_gtol
    1e-4), rows 40 to 55 of 128: row 48 zigzagged across the valley below the cost's
    rounding until its line search found no trial that lowered ``f`` (nor passed the
    approximate Wolfe test) and gave up CONVERGED (PRECISION) after 937 steps at a
    float64 gradient of 3.1e-4, over 8 times its floor; the line search now takes a
    trial within the cost's rounding that lowers the gradient's max-norm
    (``LEVEL_DROP``), and the row reaches abs_gtol (9.5e-5, 928 steps)."""
    problem = BATCHED["rosen"](128, 64, 0, "float32")
    x0, fixed = problem.x0[40:56], problem.fixed[40:56]
    with jax.enable_x64(False):
        solution = fixedopt.minimize(lambda x: 0.5 * jnp.sum(rosen_residuals(x) ** 2),
                                     jnp.asarray(x0), jnp.asarray(fixed),
                                     solver=fixedopt.GradientDescent(), abs_gtol=1e-4,
                                     gtol=0.0, ftol=0.0, xtol=0.0, batched=True)  # fmt: skip
        x, status = np.asarray(solution.x, np.float64), np.asarray(solution.status)
    gradient = np.max(np.where(fixed, 0.0, np.abs(0.5 * problem.numpy_fun(x)[1])), axis=-1)
    converged = status == fixedopt.Status.CONVERGED
    assert converged[48 - 40], status
    assert np.all(gradient[converged] <= 2e-4), gradient[converged]

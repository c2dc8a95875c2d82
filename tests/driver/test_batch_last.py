"""Levenberg-Marquardt batch-last by construction (fixedopt._driver.batch_last), run on
the CPU by forcing the machine profile's layout: Gpufit's spots take the lanes' steps
and statuses and reach their points, fixed entries stay bit-identical, bounds hold, one
row's NaN stays in its row, and a new mask compiles nothing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import engine, machine
from fixedopt._numerics import backends
from fixedopt.testing_problems import gaussian_fits, gaussian_model

ROWS = 96
GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}


def residual(p, data):
    return gaussian_model(p) - data


def spots(dtype):
    """Gpufit's spots, some entries fixed: the background in every third row, the
    width and the background in every seventh (rows of 3 free entries)."""
    fits = gaussian_fits(ROWS, seed=5)
    fixed = np.zeros((ROWS, 5), bool)
    fixed[::3, 4] = True
    fixed[::7, 3:] = True
    x0 = np.where(fixed, fits.truth, fits.x0)
    return jnp.asarray(x0, dtype), jnp.asarray(fixed), jnp.asarray(fits.data, dtype)


def solve(layout, x0, fixed, data, **options):
    """The batch's least-squares solve, called as a user calls it, in ``layout``."""
    with machine.forced_layout(layout):
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True,
                                      **GPUFIT, **options)  # fmt: skip


def scaled_difference(x, reference):
    """``max |x - reference|`` over each row's largest entry of ``reference``."""
    x, reference = np.asarray(x), np.asarray(reference)
    return np.max(np.abs(x - reference) / np.max(np.abs(reference), axis=1, keepdims=True))


# The points agree to the dtype's precision: float64 to rounding; float32 to sqrt(eps)
# of a row's scale, as J^T J is summed in another order (the batch-last sums run over
# the residuals, the lanes' in XLA:CPU's order), and a spot's background is ill
# conditioned (measured: 5e-5 of the row's amplitude at most, in 4,096 spots).
TOLERANCE = {jnp.float32: float(np.sqrt(np.finfo(np.float32).eps)), jnp.float64: 1e-10}


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_the_lanes_steps_statuses_and_points(dtype):
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        pytest.skip("x64 off")
    x0, fixed, data = spots(dtype)
    lanes = solve(machine.ROWS_MAJOR, x0, fixed, data)
    last = solve(machine.BATCH_LAST, x0, fixed, data)
    np.testing.assert_array_equal(last.status, lanes.status)
    np.testing.assert_array_equal(last.steps, lanes.steps)
    assert np.all(np.asarray(last.status) == fixedopt.Status.CONVERGED)
    assert scaled_difference(last.x, lanes.x) <= TOLERANCE[dtype]
    # Fixed entries bit-identical to their values.
    np.testing.assert_array_equal(np.asarray(last.x)[np.asarray(fixed)],
                                  np.asarray(x0)[np.asarray(fixed)])  # fmt: skip
    assert last.x.dtype == dtype


def test_bounds_hold_as_in_the_lanes():
    """Bounds that bind (the width at most 0.97, below a third of the spots' truths): the lanes'
    statuses and steps, every entry within its bounds, fixed ones exact."""
    x0, fixed, data = spots(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
    lower = jnp.broadcast_to(jnp.asarray([0.0, 0.0, 0.0, 0.5, -10.0], x0.dtype), x0.shape)
    upper = jnp.broadcast_to(jnp.asarray([1e4, 5.0, 5.0, 0.97, 10.0], x0.dtype), x0.shape)
    x0 = jnp.clip(x0, lower, upper)
    bounds = (lower, upper)
    lanes = solve(machine.ROWS_MAJOR, x0, fixed, data, bounds=bounds)
    last = solve(machine.BATCH_LAST, x0, fixed, data, bounds=bounds)
    np.testing.assert_array_equal(last.status, lanes.status)
    np.testing.assert_array_equal(last.steps, lanes.steps)
    x = np.asarray(last.x)
    assert np.all((x >= np.asarray(lower)) & (x <= np.asarray(upper)))
    assert np.sum(x[:, 3] == x.dtype.type(0.97)) >= ROWS // 4  # the bound binds
    np.testing.assert_array_equal(x[np.asarray(fixed)], np.asarray(x0)[np.asarray(fixed)])
    assert scaled_difference(last.x, lanes.x) <= 1e-6


@pytest.fixture(scope="module")
def jitted():
    """The batch-last solve inside ``jax.jit`` (its loop claims nothing: the verdicts
    are final in it), one program for the tests below."""

    def run(x0, fixed, data):
        return solve(machine.BATCH_LAST, x0, fixed, data)

    return jax.jit(run)


def test_one_rows_nan_stays_in_its_row(jitted):
    x0, fixed, data = spots(jnp.float32)
    clean = jitted(x0, fixed, data)
    broken = jitted(x0, fixed, data.at[4, 7].set(jnp.nan))
    assert int(broken.status[4]) == fixedopt.Status.NONFINITE
    others = np.arange(ROWS) != 4
    for field in ("x", "value", "steps", "status", "reason"):
        np.testing.assert_array_equal(np.asarray(getattr(broken, field))[others],
                                      np.asarray(getattr(clean, field))[others])  # fmt: skip


def test_a_new_mask_compiles_nothing(jitted):
    x0, fixed, data = spots(jnp.float32)
    jitted(x0, fixed, data)
    before = jitted._cache_size()
    programs = engine.compiled_programs()
    flipped = fixed.at[:, 0].set(True).at[::2, 4].set(False)
    solution = jitted(x0, flipped, data)
    assert jitted._cache_size() == before and engine.compiled_programs() == programs
    np.testing.assert_array_equal(np.asarray(solution.x)[:, 0], np.asarray(x0)[:, 0])


def test_the_profile_takes_it_only_where_forced_and_for_small_rows():
    """The lanes on every backend but as its profile says; forced, only small
    float32/float64 least-squares rows step batch-last."""
    solver = fixedopt.LevenbergMarquardt()
    for backend in ("tpu", "cpu", "gpu"):
        schedule = machine.schedule(solver, None, backend)
        chosen = backends.defaults(backend).batch_last
        assert schedule.layout == (machine.BATCH_LAST if chosen else machine.ROWS_MAJOR)
        assert schedule.batch_last(5, 25, jnp.float32) == chosen
    assert not backends.CPU.batch_last  # the CPU's programs stay the lanes'
    with machine.forced_layout(machine.BATCH_LAST):
        tpu = machine.schedule(solver, None, "tpu")
    assert tpu.batch_last(5, 25, jnp.float32) and tpu.batch_last(8, 512, jnp.float64)
    assert not tpu.batch_last(9, 25, jnp.float32)  # too many unknowns
    assert not tpu.batch_last(5, 1000, jnp.float32)  # too large a Jacobian
    assert not tpu.batch_last(5, 25, jnp.bfloat16)
    with pytest.raises(ValueError, match="`layout`"), machine.forced_layout("sideways"):
        pass


def test_poisson_fits_as_in_the_lanes():
    """Fisher scoring of Gpufit's spots against Poisson counts (float64 where on: in
    float32 a step's ftol test reads a deviance summed in another order, and 15% of the
    rows stopped a step apart in both directions, all CONVERGED)."""
    dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    x0, fixed, _ = spots(dtype)
    truth = gaussian_fits(ROWS, seed=5).truth.astype(np.float64)
    counts = np.random.default_rng(1).poisson(gaussian_model(truth, np))
    model = lambda p: gaussian_model(p)

    data = jnp.asarray(counts, dtype)

    def fit(layout):
        with machine.forced_layout(layout):
            return fixedopt.least_squares(model, x0, fixed, batched=True, counts=data,
                                          estimator="poisson", **GPUFIT)  # fmt: skip

    lanes, last = fit(machine.ROWS_MAJOR), fit(machine.BATCH_LAST)
    np.testing.assert_array_equal(last.status, lanes.status)
    if dtype == jnp.float64:
        np.testing.assert_array_equal(last.steps, lanes.steps)
        assert scaled_difference(last.x, lanes.x) <= 1e-10


def test_jobs_take_the_one_loops_steps_and_points(monkeypatch):
    """The rows in eight jobs, the stragglers gathered and run on (``batch_last.JOBS``,
    off by default): each row's steps, status and point as in the one loop."""
    from fixedopt._driver import batch_last

    fits = gaussian_fits(2 * batch_last.TILE * batch_last.TILE_ROWS * 8, seed=9)
    x0, fixed, data = (jnp.asarray(a, jnp.float32) if a.dtype != bool else jnp.asarray(a)
                       for a in (fits.x0, np.zeros(fits.x0.shape, bool), fits.data))  # fmt: skip
    one = solve(machine.BATCH_LAST, x0, fixed, data)
    engine.clear_compiled()
    monkeypatch.setattr(batch_last, "JOBS", 8)
    monkeypatch.setattr(batch_last, "LEFT_OVER", 64)
    jobs = solve(machine.BATCH_LAST, x0, fixed, data)
    engine.clear_compiled()
    np.testing.assert_array_equal(jobs.status, one.status)
    np.testing.assert_array_equal(jobs.steps, one.steps)
    np.testing.assert_array_equal(jobs.x, one.x)

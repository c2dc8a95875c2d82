"""The batch on the minor axis (``fixedopt._driver.minor``, ``machine.ROWS_MINOR``),
forced on the CPU: the same guarantees as the lanes (fixed entries bit-identical, a
row's result its own, a NaN row isolated, no recompile for a new mask), and the same
steps and statuses as the lanes' layout, in float32 and float64, with bounds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Status
from fixedopt._driver import engine, machine
from fixedopt.testing_problems import gaussian_fits
from fixedopt.testing_problems._small_fits import gaussian_model
from tests.helpers import assert_rows_identical, bits, quadratic, quadratic_rows

ROWS = 40
GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}


def spot_residual(p, data):
    return gaussian_model(p) - data


def spots(dtype, rows=ROWS):
    """Gpufit's spots, the width fixed in every third row, the background in every
    fifth (fixed at values off the start's)."""
    fits = gaussian_fits(rows, seed=3)
    fixed = np.zeros((rows, 5), bool)
    fixed[::3, 3], fixed[::5, 4] = True, True
    x0 = np.where(fixed, fits.truth * 1.01, fits.x0).astype(dtype)
    return jnp.asarray(x0), jnp.asarray(fixed), jnp.asarray(fits.data.astype(dtype))


def solve_spots(layout, x0, fixed, data, **options):
    with machine.forced_layout(layout):
        return fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True,
                                      **options)  # fmt: skip


def bounds_of(x0):
    """Bounds that hold some entries: the width within 2% of its start, the amplitude
    above 0.99 of it."""
    lower = jnp.full_like(x0, -jnp.inf).at[:, 3].set(0.98 * x0[:, 3]).at[:, 0].set(0.99 * x0[:, 0])
    upper = jnp.full_like(x0, jnp.inf).at[:, 3].set(1.02 * x0[:, 3])
    return lower, upper


@pytest.mark.parametrize(("dtype", "bounded"), [(np.float32, True), (np.float64, False)],
                         ids=["float32-bounded", "float64-free"])  # fmt: skip
def test_the_minor_layout_takes_the_lanes_steps(dtype, bounded):
    """Every row takes the same steps to the same status (in float64 for the same
    reason) as through the lanes, its fixed entries bit-identical to their values, its
    point equal to rounding (the same elementwise program; XLA fuses it otherwise).
    (``lanes`` the batch: no padded rows, a smaller program.)"""
    x0, fixed, data = spots(dtype)
    options = {"lanes": ROWS} | ({"bounds": bounds_of(x0)} if bounded else {})
    minor = solve_spots(machine.ROWS_MINOR, x0, fixed, data, **options)
    lanes = solve_spots(machine.ROWS_MAJOR, x0, fixed, data, **options)
    np.testing.assert_array_equal(minor.status, lanes.status)
    np.testing.assert_array_equal(minor.steps, lanes.steps)
    if dtype == np.float64:
        # In float32 a row at its rounding floor may stop by another test (seen under
        # AVX2: GTOL in the lanes, PRECISION here, 1 row of 40): the two layouts are
        # different programs, whose fusions round the last step's tests differently.
        np.testing.assert_array_equal(minor.reason, lanes.reason)
    assert np.all(minor.status == Status.CONVERGED)
    np.testing.assert_array_equal(bits(minor.x[fixed]), bits(x0[fixed]))
    eps = np.finfo(dtype).eps
    # float32: that row's other last step moved it by 2.2e-5 relative (under AVX2); the
    # two agree to the accuracy a converged fit promises, sqrt(eps), not to rounding.
    rtol = 64 * eps if dtype == np.float64 else np.sqrt(eps)
    np.testing.assert_allclose(minor.x, lanes.x, rtol=rtol)
    if bounded:
        np.testing.assert_array_equal(minor.at_bound, lanes.at_bound)
        assert np.any(minor.at_bound)
        lower, upper = bounds_of(x0)
        assert np.all((minor.x >= lower) & (minor.x <= upper))


def test_a_rows_result_is_its_own_and_a_nan_row_stops_alone():
    """A row's result does not depend on its neighbours (the batch reversed, a row of
    NaN data beside it): bit for bit; the NaN row stops NONFINITE, alone."""
    x0, fixed, data = spots(np.float32)
    whole = solve_spots(machine.ROWS_MINOR, x0, fixed, data)
    reverse = slice(None, None, -1)
    reversed_ = solve_spots(machine.ROWS_MINOR, x0[reverse], fixed[reverse], data[reverse])
    assert_rows_identical(reversed_, whole, reverse)
    poisoned = solve_spots(machine.ROWS_MINOR, x0, fixed, data.at[7].set(jnp.nan))
    assert poisoned.status[7] == Status.NONFINITE
    others = np.arange(ROWS) != 7
    assert_rows_identical(poisoned, jax.tree.map(lambda a: a[others], whole), others)


def test_a_new_mask_compiles_nothing():
    """The mask is data: a new one reuses the compiled minor-layout solve."""
    x0, fixed, data = spots(np.float64, rows=24)
    solve_spots(machine.ROWS_MINOR, x0, fixed, data, lanes=24)
    before = engine.compiled_programs()
    solution = solve_spots(machine.ROWS_MINOR, x0, ~fixed, data, lanes=24)
    assert engine.compiled_programs() == before
    np.testing.assert_array_equal(bits(solution.x[~fixed]), bits(x0[~fixed]))


def test_minimize_in_the_minor_layout_certifies_as_the_lanes():
    """L-BFGS (whose verdicts the driver certifies: the PENDING rows) reaches the
    lanes' statuses and steps, the fixed entries untouched."""
    x0, fixed, args = quadratic_rows(size=24, n=6)
    solutions = {}
    for layout in (machine.ROWS_MINOR, machine.ROWS_MAJOR):
        with machine.forced_layout(layout):
            solutions[layout] = fixedopt.minimize(quadratic, x0, fixed, args=args, batched=True,
                                                  lanes=24)  # fmt: skip
    minor, lanes = solutions[machine.ROWS_MINOR], solutions[machine.ROWS_MAJOR]
    np.testing.assert_array_equal(minor.status, lanes.status)
    np.testing.assert_array_equal(minor.steps, lanes.steps)
    np.testing.assert_array_equal(bits(minor.x[fixed]), bits(x0[fixed]))
    np.testing.assert_allclose(minor.x, lanes.x, rtol=1e-12, atol=1e-12)


def test_forced_layout_is_checked():
    with pytest.raises(ValueError, match="`layout`"), machine.forced_layout("columns"):
        pass


def test_a_shrinking_or_chunked_batch_gives_each_row_the_same_bits(monkeypatch):
    """Rows gathered into a smaller batch as others stop (here 40 -> 20 -> 10 -> 5), or
    solved in chunks (of 16 rows, the last padded), take the same steps to the same
    bits as in the whole batch to the end."""
    from fixedopt._driver import minor

    x0, fixed, data = spots(np.float32)
    options = {"ftol": 1e-8, "max_steps": 30, "lanes": ROWS}  # lanes: no padded rows

    def solve(sizes, chunk):
        residual = lambda p, d: spot_residual(p, d)  # a new function: traced anew
        monkeypatch.setattr(minor, "sizes", lambda total, fewest: sizes)
        monkeypatch.setattr(minor, "CHUNK", chunk)
        with machine.forced_layout(machine.ROWS_MINOR):
            return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True,
                                          **options)  # fmt: skip

    whole = solve((), ROWS)
    assert len(np.unique(whole.steps)) >= 3  # rows stop at different trips
    assert_rows_identical(solve((20, 10, 5), ROWS), whole)
    assert_rows_identical(solve((), 16), whole)


def test_no_profile_puts_the_batch_on_the_minor_axis_yet():
    """Measured, the minor axis lost on the CPU and compiled 6x longer on a TPU
    (docs/decisions.md, "The batch on a TPU's lanes"): only forced."""
    for solver in (fixedopt.LevenbergMarquardt(), fixedopt.LBFGS()):
        for backend in ("cpu", "gpu", "tpu"):
            assert machine.schedule(solver, None, backend).layout == machine.ROWS_MAJOR
    with machine.forced_layout(machine.ROWS_MINOR):
        assert machine.schedule(fixedopt.LBFGS(), 8, "cpu").layout == machine.ROWS_MINOR

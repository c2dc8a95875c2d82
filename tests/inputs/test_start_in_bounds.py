"""A least-squares start outside its bounds is scipy's "x0 is infeasible", named."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt


def residual(p):
    return p - 1.0


@pytest.mark.parametrize(
    "x0, batched, where",
    [
        (np.array([0.5, 3.0]), False, "entry 1 is 3.0"),
        (np.array([[0.5, 0.2], [0.3, -1.0]]), True, "row 1, entry 1 is -1.0"),
    ],
)
def test_a_least_squares_start_outside_its_bounds_is_named(x0, batched, where):
    message = (
        f"`x0` is infeasible: {where}, outside [0.0, 2.0]. Start inside the bounds "
        "(least_squares does not move a start onto them, as scipy.optimize.least_squares)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        fixedopt.least_squares(residual, x0, False, bounds=(0.0, 2.0), batched=batched)


def test_a_fixed_entry_outside_and_minimize_are_not_refused():
    # A fixed entry is checked as a fixed value (its own message); minimize projects a
    # start onto its bounds, as scipy's L-BFGS-B does.
    x0 = np.array([0.5, 3.0])
    with pytest.raises(ValueError, match="`fixed_values`"):
        fixedopt.least_squares(residual, x0, np.array([False, True]), bounds=(0.0, 2.0))
    solution = fixedopt.minimize(lambda p: jnp.sum((p - 1.0) ** 2), x0, False, bounds=(0.0, 2.0))
    np.testing.assert_allclose(solution.x, [1.0, 1.0], atol=1e-8)


@pytest.mark.parametrize("lanes", [None, 2])
def test_a_traced_start_outside_its_bounds_stops_its_row_infeasible(lanes):
    # Under jit the start cannot be checked before the solve: the row that starts
    # outside stops INFEASIBLE with its start unchanged (not projected), and the rows
    # around it solve as without it; a fixed entry outside is not a start.
    x0 = jnp.array([[0.5, 0.2], [0.3, -1.0], [1.5, 0.5], [0.5, 1.5]])
    fixed = jnp.array([[False, False], [False, False], [False, False], [False, True]])

    @jax.jit
    def solve(x0):
        values = jnp.where(fixed, 1.5, x0)
        return fixedopt.least_squares(residual, x0, fixed, fixed_values=values,
                                      bounds=(0.0, 2.0), batched=True, lanes=lanes)  # fmt: skip

    solution = solve(x0)
    status = [fixedopt.Status(int(s)).name for s in solution.status]
    assert status == ["CONVERGED", "INFEASIBLE", "CONVERGED", "CONVERGED"]
    np.testing.assert_array_equal(solution.x[1], x0[1])
    # Not evaluated at its start (outside the bounds): no value of another point.
    assert np.isnan(solution.value[1]) and np.isnan(solution.grad_norm[1])
    assert np.all(np.isfinite(solution.value[np.array([0, 2, 3])]))
    np.testing.assert_allclose(np.asarray(solution.x)[[0, 2]], 1.0, atol=1e-8)
    assert solution.x[3, 1] == 1.5
